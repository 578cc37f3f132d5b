"""Weights-only capacity table (safetensors / GGUF / HF directory) and the capacity CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import tl_geometry as tg
from tl_geometry.weights_reader import embedding_capacity, find_embedding, read_embedding


def reference_eps(x: np.ndarray) -> float:
    """All ordered pairs of non-zero rows, materialized."""
    x = np.asarray(x, dtype=np.float64)
    u = x[np.linalg.norm(x, axis=1) > 0]
    u = u / np.linalg.norm(u, axis=1, keepdims=True)
    s = u @ u.T
    off = s[~np.eye(len(u), dtype=bool)]
    return float(off.mean() + 2 * off.std())


def _emb(vocab=300, d=16, seed=0):
    g = np.random.default_rng(seed)
    x = (g.standard_normal((vocab, d)) + 0.7 * g.standard_normal(d)).astype(np.float32)
    x[5] = 0.0  # a padding row
    return x


def write_safetensors(path, tensors):
    from safetensors.torch import save_file

    save_file({k: torch.as_tensor(v).contiguous() for k, v in tensors.items()}, str(path))


def write_gguf(path, tensors, quant=None):
    import gguf

    w = gguf.GGUFWriter(str(path), "llama")
    for name, arr in tensors.items():
        if quant is None:
            w.add_tensor(name, arr)
        else:
            q = gguf.quants.quantize(arr, quant)
            w.add_tensor(name, q, raw_dtype=quant)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_safetensors_file_streams_exactly(tmp_path):
    x = _emb()
    write_safetensors(tmp_path / "model.safetensors", {"model.embed_tokens.weight": x, "model.norm.weight": np.ones(16, np.float32)})
    row = embedding_capacity(tmp_path / "model.safetensors", block=64)
    assert row.epsilon == pytest.approx(reference_eps(x), abs=1e-9)
    assert (row.d_model, row.vocab, row.n_dropped, row.tensor) == (16, 300, 1, "model.embed_tokens.weight")
    assert row.capacity == pytest.approx(tg.capacity(16, row.epsilon) if row.epsilon < 1 else math.nan)


def test_bf16_shards_in_an_hf_directory(tmp_path):
    x = _emb(vocab=200, d=12, seed=1)
    xb = torch.from_numpy(x).to(torch.bfloat16)
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors", {"model.layers.0.mlp.weight": torch.ones(3, 3, dtype=torch.bfloat16)})
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", {"model.embed_tokens.weight": xb, "lm_head.weight": xb[:, :] * 2})
    (tmp_path / "config.json").write_text("{}")
    row = embedding_capacity(tmp_path)
    assert row.epsilon == pytest.approx(reference_eps(xb.float().numpy()), abs=1e-9)
    src = find_embedding(tmp_path, matrix="unembed")
    assert (src.name, src.tied, src.dtype, src.shape) == ("lm_head.weight", False, "BF16", (200, 12))


def test_tied_unembedding_falls_back_to_embedding(tmp_path):
    write_safetensors(tmp_path / "m.safetensors", {"transformer.wte.weight": _emb()})
    src = find_embedding(tmp_path / "m.safetensors", matrix="unembed")
    assert src.name == "transformer.wte.weight" and src.tied
    assert embedding_capacity(tmp_path / "m.safetensors", matrix="unembed").tensor.endswith("(tied)")


@pytest.mark.parametrize("quant", [None, "Q8_0"])
def test_gguf_with_dequantization(tmp_path, quant):
    import gguf

    x = _emb(vocab=256, d=64, seed=2)
    qt = getattr(gguf.GGMLQuantizationType, quant) if quant else None
    write_gguf(tmp_path / "m.gguf", {"token_embd.weight": x, "output_norm.weight": np.ones(64, np.float32)}, quant=qt)
    expected = x if qt is None else gguf.quants.dequantize(gguf.quants.quantize(x, qt), qt)
    row = embedding_capacity(tmp_path / "m.gguf", block=100)
    assert (row.d_model, row.vocab) == (64, 256)
    assert row.epsilon == pytest.approx(reference_eps(expected), abs=1e-9)
    np.testing.assert_array_equal(read_embedding(tmp_path / "m.gguf").numpy(), expected)
    if qt is not None:  # quantization error is small but real
        assert row.epsilon == pytest.approx(reference_eps(x), abs=1e-2)


def test_missing_embedding_names_the_tensors(tmp_path):
    write_safetensors(tmp_path / "m.safetensors", {"encoder.w1": np.ones((3, 3), np.float32), "encoder.w2": np.ones(3, np.float32)})
    with pytest.raises(ValueError, match="no embedding tensor.*encoder.w1, encoder.w2"):
        embedding_capacity(tmp_path / "m.safetensors")
    write_gguf(tmp_path / "m.gguf", {"blk.0.ffn_up.weight": np.ones((4, 4), np.float32)})
    with pytest.raises(ValueError, match="tensors found: blk.0.ffn_up.weight"):
        find_embedding(tmp_path / "m.gguf")
    with pytest.raises(ValueError, match="tensor 'nope' not found"):
        find_embedding(tmp_path / "m.safetensors", tensor="nope")


def test_bad_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file or directory"):
        embedding_capacity(tmp_path / "missing.safetensors")
    (tmp_path / "weights.bin").write_bytes(b"0")
    with pytest.raises(ValueError, match="expected a .safetensors or .gguf"):
        embedding_capacity(tmp_path / "weights.bin")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no"):
        embedding_capacity(tmp_path / "empty")
    with pytest.raises(ValueError, match="matrix must be"):
        find_embedding(tmp_path / "weights.bin", matrix="both")


# ----------------------------------------------------------------------------- CLI
def test_cli_table_and_json(tmp_path, capsys):
    from tl_geometry.cli import main

    x = _emb()
    write_safetensors(tmp_path / "m.safetensors", {"model.embed_tokens.weight": x})
    assert main(["capacity", str(tmp_path / "m.safetensors"), "Llama-2-7B", "--json"]) == 0
    recs = json.loads(capsys.readouterr().out)
    assert recs[0]["kind"] == "weights" and recs[0]["epsilon"] == pytest.approx(reference_eps(x), abs=1e-9)
    assert recs[1]["kind"] == "published" and recs[1]["epsilon"] == 0.0645
    assert recs[1]["capacity"] == pytest.approx(tg.capacity(4096, 0.0645))
    assert main(["capacity", "--published", "--form", "adjusted"]) == 0
    out = capsys.readouterr().out
    assert "Llama-3.1-405B" in out and "published" in out and "adjusted form" in out


def test_cli_bad_arguments(tmp_path, capsys):
    from tl_geometry.cli import main

    assert main(["capacity"]) == 2
    assert "at least one PATH_OR_MODEL" in capsys.readouterr().err
    assert main(["capacity", str(tmp_path / "nope.gguf")]) == 2
    assert "no such file" in capsys.readouterr().err
