"""A full disk while a report is written (issue 33): the error propagates as the OSError it is (the
CLI prints it in one line, exit 1) and nothing is left behind — no partial-run/, no lock, no new
directory; a previous report in the directory is kept byte for byte."""

from __future__ import annotations

import errno

import pytest

from tests.helpers import make_byte_model
from tl_geometry.report import GeometryReport
from tl_geometry.runs import pipeline


@pytest.fixture
def full_disk(monkeypatch):
    real = GeometryReport.to_json

    def to_json(self, path=None, **kw):
        if path is not None:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(self, path, **kw)

    monkeypatch.setattr(GeometryReport, "to_json", to_json)


def _run(out, **kw):
    return pipeline.run_report(
        make_byte_model(), out=out, corpus="pydoc", n_seqs=2, seq_len=8, metrics=["depth_width"], **kw
    )


def test_a_new_directory_is_removed(tmp_path, full_disk):
    out = tmp_path / "rep"
    with pytest.raises(OSError) as info:
        _run(out)
    assert info.value.errno == errno.ENOSPC
    assert not out.exists()


def test_a_previous_report_is_kept_byte_for_byte(tmp_path, monkeypatch):
    out = tmp_path / "rep"
    _run(out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real = GeometryReport.to_json

    def to_json(self, path=None, **kw):
        if path is not None:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(self, path, **kw)

    monkeypatch.setattr(GeometryReport, "to_json", to_json)
    with pytest.raises(OSError):
        _run(out, force=True)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no partial-run/, no lock
