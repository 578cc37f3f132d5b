"""Without the ``plot`` extra (no matplotlib): one line names the extra, the results are still written."""

from __future__ import annotations

import json
import logging
import sys

import pytest

import tl_geometry.runs.pipeline as pipeline
from tests.helpers import make_byte_model, make_report
from tl_geometry.cli import main
from tl_geometry.render import plotting
from tl_geometry.render.html import render_into

OUTPUTS = ("report.json", "report.md", "index.html")


@pytest.fixture
def no_matplotlib(monkeypatch):
    """matplotlib made unimportable (``sys.modules[name] = None`` is how Python spells "not installed")."""
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert not plotting.available()


@pytest.fixture
def saved_report(tmp_path):
    path = tmp_path / "in" / "report.json"
    path.parent.mkdir()
    make_report().to_json(path)
    return path


def test_drawing_names_the_extra(no_matplotlib):
    with pytest.raises(plotting.PlotExtraMissingError, match=r"pip install 'tl-geometry\[plot\]'"):
        plotting.figures(make_report())
    assert issubclass(plotting.PlotExtraMissingError, ImportError)


def test_render_into_writes_everything_but_the_figures(no_matplotlib, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        render_into(make_report(), tmp_path / "o", figures=True)
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == sorted(OUTPUTS)
    assert [r.getMessage() for r in caplog.records if "matplotlib" in r.getMessage()] == [plotting.PLOT_EXTRA_NOTE]


def test_render_cli_without_matplotlib_prints_one_line_and_writes(no_matplotlib, saved_report, tmp_path, capsys):
    assert main(["render", str(saved_report), "--out", str(tmp_path / "page")]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "matplotlib" in line]
    assert len(err) == 1 and "tl-geometry[plot]" in err[0]
    assert sorted(p.name for p in (tmp_path / "page").iterdir()) == sorted(OUTPUTS)


def test_render_no_figures_draws_none(saved_report, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert main(["render", str(saved_report), "--out", str(tmp_path / "page"), "--no-figures"]) == 0
    assert sorted(p.name for p in (tmp_path / "page").iterdir()) == sorted(OUTPUTS)
    assert "matplotlib" not in capsys.readouterr().err


def test_report_cli_without_matplotlib_keeps_the_computed_results(no_matplotlib, monkeypatch, tmp_path, capsys):
    """The run computes, then writes report.json / report.md / index.html: no crash after the work."""
    import dataclasses

    real, model = pipeline.run, make_byte_model()
    monkeypatch.setattr(
        pipeline, "run", lambda req: real(dataclasses.replace(req, model=model))
    )  # the checked request, on a tiny model
    out = tmp_path / "r"
    assert (
        main(["report", "--metrics", "shape", "spectral", "--n-seqs", "2", "--seq-len", "16", "--out", str(out)]) == 0
    )
    err = [line for line in capsys.readouterr().err.splitlines() if "matplotlib" in line]
    assert len(err) == 1 and "tl-geometry[plot]" in err[0]
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUTS)
    rows = json.loads((out / "report.json").read_text())["rows"]
    assert {r["metric"] for r in rows} >= {"spectral.rankme", "spectral.isotropy"}  # computed rows, computed and kept
