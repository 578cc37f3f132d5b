"""Weights-only capacity table (safetensors / GGUF / HF directory) and the capacity CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import tl_geometry as tg
from tl_geometry.families.capacity.weights_reader import embedding_capacity, find_embedding, read_embedding


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
    write_safetensors(
        tmp_path / "model.safetensors", {"model.embed_tokens.weight": x, "model.norm.weight": np.ones(16, np.float32)}
    )
    row = embedding_capacity(tmp_path / "model.safetensors", block=64)
    assert row.epsilon == pytest.approx(reference_eps(x), abs=1e-9)
    assert (row.d_model, row.vocab, row.n_dropped, row.tensor) == (16, 300, 1, "model.embed_tokens.weight")
    assert row.model_class == "class1"  # random 16-d rows: ε ≈ 0.5, no count
    assert row.capacity is None and row.status == "indeterminate" and "Class 1" in row.reason
    assert row.preset == "paper"


def test_class2_embedding_gets_a_count_and_three_sigma(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 1024)).astype(np.float32)  # ε ≈ 2/√1024: Class 2
    write_safetensors(tmp_path / "model.safetensors", {"model.embed_tokens.weight": x})
    row = embedding_capacity(tmp_path / "model.safetensors")
    assert row.status == "count" and row.model_class == "class2"
    assert row.capacity == tg.capacity(1024, row.epsilon)
    assert row.capacity_3sigma == tg.capacity(1024, row.mean + 3 * row.std)


def test_bf16_shards_in_an_hf_directory(tmp_path):
    x = _emb(vocab=200, d=12, seed=1)
    xb = torch.from_numpy(x).to(torch.bfloat16)
    write_safetensors(
        tmp_path / "model-00001-of-00002.safetensors",
        {"model.layers.0.mlp.weight": torch.ones(3, 3, dtype=torch.bfloat16)},
    )
    write_safetensors(
        tmp_path / "model-00002-of-00002.safetensors", {"model.embed_tokens.weight": xb, "lm_head.weight": xb[:, :] * 2}
    )
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


@pytest.mark.parametrize("step", [1, 7, 1024])
def test_fast_q8_0_dequantization_is_bit_identical_to_gguf(step):
    import gguf

    from tl_geometry.families.capacity.weights_reader import dequantize_q8_0

    qt = gguf.GGMLQuantizationType.Q8_0
    g = np.random.default_rng(3)
    x = (g.standard_normal((45, 96)) * np.logspace(-6, 4, 45)[:, None]).astype(np.float32)
    x[3] = 0.0  # a zero scale
    raw = gguf.quants.quantize(x, qt)
    # every int8 value and the extreme float16 scales (largest, smallest normal, subnormal)
    raw[:4, 2:34] = np.arange(-128, 128, 8, dtype=np.int8).view(np.uint8)
    raw[:4, :2] = np.array([65504.0, 6.1035e-05, 6e-08, -2.5], np.float16).view(np.uint8).reshape(4, 2)
    got = dequantize_q8_0(raw, step=step)
    np.testing.assert_array_equal(got, gguf.quants.dequantize(raw, qt))
    assert got.dtype == np.float32 and got.shape == (45, 96)


def test_fast_q8_0_writes_into_a_given_buffer_and_checks_it():
    import gguf

    from tl_geometry.errors import InputError
    from tl_geometry.families.capacity.weights_reader import dequantize_q8_0

    raw = gguf.quants.quantize(
        np.random.default_rng(5).standard_normal((10, 64)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0
    )
    out = np.full((10, 64), np.nan, np.float32)
    assert dequantize_q8_0(raw, out=out) is out
    np.testing.assert_array_equal(out, dequantize_q8_0(raw))
    with pytest.raises(InputError, match=r"out must be a C-contiguous float32 array of shape \(10, 64\)"):
        dequantize_q8_0(raw, out=np.empty((10, 64)))


def test_fast_q8_0_refuses_partial_blocks():
    from tl_geometry.errors import InputError
    from tl_geometry.families.capacity.weights_reader import dequantize_q8_0

    with pytest.raises(InputError, match="whole 34-byte blocks, got 35 bytes per row"):
        dequantize_q8_0(np.zeros((2, 35), np.uint8))


def test_missing_embedding_names_the_tensors(tmp_path):
    write_safetensors(
        tmp_path / "m.safetensors", {"encoder.w1": np.ones((3, 3), np.float32), "encoder.w2": np.ones(3, np.float32)}
    )
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
    assert recs[0]["capacity"] is None and recs[0]["status"] == "indeterminate" and recs[0]["reason"]
    assert main(["capacity", "--published", "--form", "adjusted"]) == 0
    out = capsys.readouterr().out
    assert "Llama-3.1-405B" in out and "published" in out and "adjusted form" in out
    # every published Class-1 row reads "indeterminate", never a number (the paper's Table 1)
    gemma = next(line for line in out.splitlines() if line.startswith("Gemma-7B "))
    assert gemma.rstrip().endswith("indeterminate") and 'preset "paper"' in out


def test_cli_full_form_reproduces_the_papers_table(capsys):
    from tl_geometry.cli import main

    assert main(["capacity", "--published", "--json"]) == 0
    recs = {r["source"]: r for r in json.loads(capsys.readouterr().out)}
    for name, row in tg.published_rows().items():
        got = recs[name]["capacity"]
        if row.capacity is None:
            assert got is None and recs[name]["status"] == "indeterminate"
        else:
            assert got == pytest.approx(row.capacity, rel=0.006)  # 3 digits, ε to 5 decimals


def test_cli_bad_arguments(tmp_path, capsys):
    from tl_geometry.cli import main

    assert main(["capacity"]) == 2
    assert "at least one PATH_OR_MODEL" in capsys.readouterr().err
    assert main(["capacity", str(tmp_path / "nope.gguf")]) == 2
    assert "no such file" in capsys.readouterr().err


# --- truncated / corrupt files: a message with the expected and the actual size, never a numpy traceback ---


def _small_files(tmp_path):
    x = _emb(vocab=300, d=16, seed=4)
    write_gguf(tmp_path / "m.gguf", {"token_embd.weight": x})
    write_safetensors(tmp_path / "m.safetensors", {"model.embed_tokens.weight": x})
    return tmp_path / "m.gguf", tmp_path / "m.safetensors"


def _reference_expected_size(path) -> int:
    """Slow, obvious reference: the size implied by the whole, untruncated file's own parser."""
    if path.suffix == ".gguf":
        import gguf

        r = gguf.GGUFReader(str(path))
        return max(t.data_offset + t.n_bytes for t in r.tensors)
    import json
    import struct

    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    head = json.loads(data[8 : 8 + n])
    return 8 + n + max(v["data_offsets"][1] for k, v in head.items() if k != "__metadata__")


@pytest.mark.parametrize("fmt", ["gguf", "safetensors"])
def test_whole_files_pass_the_header_check(tmp_path, fmt):
    from tl_geometry.io.weight_files import check_weights_file

    g, s = _small_files(tmp_path)
    path = g if fmt == "gguf" else s
    assert check_weights_file(path) == path.stat().st_size == _reference_expected_size(path)
    assert check_weights_file(tg.models.zoo_file()) == tg.models.zoo_file().stat().st_size  # header only: cheap


@pytest.mark.parametrize("fmt", ["gguf", "safetensors"])
@pytest.mark.parametrize("keep", ["all-but-100", "half", "header-part", "none"])
def test_truncated_files_name_expected_and_actual_size(tmp_path, fmt, keep):
    from tl_geometry.io.weight_files import CorruptFileError

    g, s = _small_files(tmp_path)
    whole = g if fmt == "gguf" else s
    data = whole.read_bytes()
    expected = _reference_expected_size(whole)
    n = {"all-but-100": len(data) - 100, "half": len(data) // 2, "header-part": 50, "none": 0}[keep]
    cut = tmp_path / f"cut.{fmt}"
    cut.write_bytes(data[:n])
    label = "GGUF" if fmt == "gguf" else "safetensors"
    if keep in ("all-but-100", "half"):
        match = f"cut.{fmt} is truncated: its {label} header says {expected:,} bytes but the file has {n:,} bytes"
    else:
        match = f"cut.{fmt} is truncated: its {label} header alone needs at least [0-9,]+ bytes but the file has {n:,} bytes"
    for call in (embedding_capacity, find_embedding, read_embedding):
        with pytest.raises(CorruptFileError, match=match):
            call(cut)
    # a directory holding the cut file is checked too
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / cut.name).write_bytes(data[:n])
    with pytest.raises(CorruptFileError, match="is truncated"):
        embedding_capacity(tmp_path / "d")


@pytest.mark.parametrize(
    "fmt, content, match",
    [
        ("gguf", b"\0" * 64, r"not a GGUF file: it starts with b'\\x00\\x00\\x00\\x00', expected b'GGUF'"),
        ("gguf", b"GGUF" + (99).to_bytes(4, "little") + b"\0" * 32, "unsupported or corrupt GGUF version 99"),
        ("safetensors", b"\xff" * 64, "not a safetensors file: its first 8 bytes give a header of"),
        ("safetensors", (4).to_bytes(8, "little") + b"nope", "corrupt safetensors header"),
    ],
)
def test_corrupt_files_are_named(tmp_path, fmt, content, match):
    from tl_geometry.io.weight_files import CorruptFileError

    p = tmp_path / f"bad.{fmt}"
    p.write_bytes(content)
    with pytest.raises(CorruptFileError, match=match):
        embedding_capacity(p)


def test_safetensors_with_trailing_bytes_is_corrupt(tmp_path):
    from tl_geometry.io.weight_files import CorruptFileError

    _, s = _small_files(tmp_path)
    size = s.stat().st_size
    with open(s, "ab") as fh:
        fh.write(b"\0" * 10)
    with pytest.raises(CorruptFileError, match=f"header says {size:,} bytes but the file has {size + 10:,} bytes"):
        embedding_capacity(s)


def test_cli_capacity_on_a_truncated_file(tmp_path, capsys):
    from tl_geometry.cli import main

    g, _ = _small_files(tmp_path)
    data = g.read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[:-100])
    assert main(["capacity", str(tmp_path / "cut.gguf")]) != 0
    err = capsys.readouterr().err
    assert "is truncated" in err and f"the file has {len(data) - 100:,} bytes" in err and "Traceback" not in err


def test_gguf_tensor_index_equals_gguf_readers(tmp_path):
    """Our header walk + memory map lists the same tensors, types, shapes and bytes as gguf.GGUFReader."""
    import gguf

    from tl_geometry.families.capacity.weights_reader import _gguf_tensors

    g = np.random.default_rng(5)
    path = tmp_path / "mixed.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(500)])  # values we skip, not decode
    w.add_tensor("token_embd.weight", g.standard_normal((96, 64)).astype(np.float32))
    w.add_tensor("blk.0.attn_q.weight", g.standard_normal((64, 64)).astype(np.float16))
    w.add_tensor("output_norm.weight", np.ones(64, np.float32))
    for i, qt in enumerate((gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.Q4_0)):
        x = g.standard_normal((40, 64)).astype(np.float32)
        w.add_tensor(f"blk.{i}.ffn_up.weight", gguf.quants.quantize(x, qt), raw_dtype=qt)
    w.add_tensor("blk.0.ffn_gate.weight", g.integers(-9, 9, (8, 4)).astype(np.int32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    ours = _gguf_tensors(path)
    ref = gguf.GGUFReader(str(path)).tensors
    assert list(ours) == [t.name for t in ref]
    for t in ref:
        o = ours[t.name]
        assert o.tensor_type == t.tensor_type and o.shape == tuple(int(s) for s in t.shape)
        assert o.data.dtype == t.data.dtype and o.data.shape == t.data.shape
        np.testing.assert_array_equal(o.data, t.data)


# ----------------------------------------------------------------------------- streaming (issue 24), damage (issue 23)
def test_prefetched_stream_equals_serial_and_records_a_timeline(tmp_path):
    from tl_geometry.families.capacity.weights_reader import Timeline

    x = _emb(vocab=5000, d=24, seed=3)
    write_gguf(tmp_path / "m.gguf", {"token_embd.weight": x})
    tl = Timeline()
    a = embedding_capacity(tmp_path / "m.gguf", block=1024, timeline=tl)
    b = embedding_capacity(tmp_path / "m.gguf", block=1024, prefetch=False)
    assert (a.mean, a.std, a.epsilon) == (b.mean, b.std, b.epsilon)
    assert a.epsilon == pytest.approx(reference_eps(x), rel=1e-7)
    s = tl.summary()
    assert s["blocks"] == 5 and s["wall_s"] > 0 and s["dequantize_s"] > 0 and s["gram_s"] > 0
    assert "overlap" in tl.format()


@pytest.mark.parametrize(("quant", "in_caller"), [(None, True), ("Q8_0", True), ("Q4_0", False)])
def test_cheap_dequantization_runs_in_the_caller_the_rest_in_the_reader(tmp_path, monkeypatch, quant, in_caller):
    import threading

    import gguf

    from tl_geometry.families.capacity import weights_reader as wr

    qt = getattr(gguf.GGMLQuantizationType, quant) if quant else None
    x = _emb(vocab=3000, d=64, seed=4)
    write_gguf(tmp_path / "m.gguf", {"token_embd.weight": x}, quant=qt)
    where: list[str] = []
    real = wr._gguf_dequantized

    def spy(src, raws, timeline, reuse=False):
        for rows in real(src, raws, timeline, reuse):
            where.append(threading.current_thread().name)
            yield rows

    monkeypatch.setattr(wr, "_gguf_dequantized", spy)
    a = embedding_capacity(tmp_path / "m.gguf", block=1024)
    assert set(where) == {threading.main_thread().name if in_caller else "tl-geometry-reader"}
    b = embedding_capacity(tmp_path / "m.gguf", block=1024, prefetch=False)
    assert (a.mean, a.std, a.epsilon) == (b.mean, b.std, b.epsilon) and len(where) == 6


def test_reader_thread_errors_reach_the_caller(tmp_path):
    from tl_geometry.families.capacity.weights_reader import _prefetch

    def blocks():
        yield torch.zeros(2, 2)
        raise OSError("disk gone")

    it = _prefetch(blocks())
    assert next(it).shape == (2, 2)
    with pytest.raises(OSError, match="disk gone"):
        next(it)


def test_reader_thread_stops_when_the_caller_stops():
    from tl_geometry.families.capacity.weights_reader import _prefetch

    produced = []

    def blocks():
        for i in range(1000):
            produced.append(i)
            yield torch.zeros(1)

    it = _prefetch(blocks())
    next(it)
    it.close()  # the caller gave up: the thread must not run on through the file
    assert len(produced) < 10


@pytest.mark.parametrize("prefetch", [True, False])
def test_weights_that_dequantize_to_nan_are_refused_with_the_tensor_name(tmp_path, prefetch):
    from tl_geometry.io.weight_files import CorruptFileError

    x = _emb(vocab=3000, d=32, seed=4)
    x[2100, 7] = np.nan
    write_gguf(tmp_path / "m.gguf", {"token_embd.weight": x})
    with pytest.raises(CorruptFileError, match=r"tensor 'token_embd.weight' \(F32\) holds NaN or inf .*row 2,100"):
        embedding_capacity(tmp_path / "m.gguf", block=1024, prefetch=prefetch)
    with pytest.raises(CorruptFileError, match="token_embd.weight"):
        read_embedding(tmp_path / "m.gguf")


def test_corrupt_gguf_key_value_length_is_named_not_a_huge_size(tmp_path):
    import struct

    from tl_geometry.io.weight_files import CorruptFileError

    g, _ = _small_files(tmp_path)
    data = bytearray(g.read_bytes())
    # the first key's name length sits after magic, version, tensor count and key count (4+4+8+8 bytes)
    data[24:32] = struct.pack("<Q", 2**64 - 1 - 1024)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="corrupt GGUF header: the name of key/value 0 at byte 32") as e:
        embedding_capacity(bad)
    assert "18,446,744" in str(e.value) and "needs" not in str(e.value)
