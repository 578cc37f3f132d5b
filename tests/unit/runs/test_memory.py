"""A report's memory estimate (``runs.memory``), its refusal before any load, and its record in provenance."""

from __future__ import annotations

import json

import pytest
import torch

from tests.helpers import make_byte_model
from tl_geometry import models
from tl_geometry.cli import main
from tl_geometry.errors import InputError
from tl_geometry.models import ModelShape
from tl_geometry.runs import memory, pipeline

pytestmark = pytest.mark.needs_hooked


@pytest.fixture
def byte_model():
    return make_byte_model()


SHAPE = ModelShape(4, 128, 1_000_000, 256, "hf-dir", 20_000, 500, 384)


def test_the_estimate_by_hand():
    """Every term written out for one shape (8 × 128 tokens, agop in the report at 16 probes): the
    working set is the interaction family's declaration, AGOP's plan for this shape."""
    from tl_geometry.families.interaction.memory import agop_plan

    e = memory.estimate(SHAPE)
    L, d, m, V, S, T = 4, 128, 384, 500, 128, 1024
    weights = 4 * 1_020_000
    plan = agop_plan(
        d_model=d,
        n_hooks=L,
        n_layers=L,
        d_mlp=m,
        n_heads=2,
        seq_len=S,
        d_vocab=V,
        n_seqs=8,
        n_groups=8,
        text_groups=8,
        d_head=64,
        n_kv_heads=2,
        gated_mlp=True,
    )  # heads: d_q / 64 with d_q = d_model (not in the shape); 16 probes in 8 groups; every sequence a text group
    assert plan.batch_size == 8 and plan.n_chunks == 1
    captured = 12 * (L + 1) * T * d
    working = int(1.2 * (plan.working_set_bytes + captured))
    load = int(2.0 * weights + L * 256 * 256)
    held = int(1.15 * weights)
    assert (e.weights_bytes, e.n_params, e.load_bytes, e.held_bytes) == (weights, 1_020_000, load, held)
    assert e.working_bytes == working and e.families == (("interaction", plan.working_set_bytes),)
    assert e.peak_bytes == 512 * 2**20 + max(load, held + working)
    prov = e.provenance()
    assert prov["peak_gib"] == round(e.peak_bytes / 2**30, 3) and prov["source"] == "hf-dir"
    assert prov["families_gib"] == {"interaction": round(plan.working_set_bytes / 2**30, 3)}


def test_without_a_declaring_family_the_working_set_is_one_batch_of_logits():
    e = memory.estimate(SHAPE, metrics=["shape", "pga"])
    assert e.families == ()
    assert e.working_bytes == int(1.2 * (4 * 8 * 128 * 500 + 12 * 5 * 1024 * 128))


def test_the_estimate_follows_the_runs_agop_options():
    """The request's options reach the declaration: a smaller memory_mb, fewer sequences per pass."""
    big = ModelShape(30, 576, 134_515_008, 2048, "gguf", 28_311_552, 49152, 1536, d_q=576, d_kv=192, gated_mlp=True)
    at = {mb: memory.estimate(big, options={"agop": {"n_probes": 16, "memory_mb": mb}}) for mb in (512, 4096)}
    assert at[4096].working_bytes > at[512].working_bytes
    assert memory.estimate(big, options={"agop": {"n_probes": 16}}).peak_bytes == memory.estimate(big).peak_bytes


def test_a_plugin_familys_declaration_joins_the_estimate_and_a_broken_one_warns():
    import tl_geometry as tg

    calls = []

    def declared(shape, *, n_seqs, seq_len, options):
        calls.append((shape.d_model, n_seqs, seq_len, dict(options)))
        return 10 * 2**30

    tg.register_metric("mem_doc_metric", needs="weights")(lambda model, tokens=None, *, hooks=None: None)
    try:
        tg.register_family(tg.FamilySpec("mem_doc_family", metrics=("mem_doc_metric",), memory=declared))
        e = memory.estimate(SHAPE, metrics=["mem_doc_metric", "agop"], options={"agop": {}, "mem_doc_metric": {"x": 1}})
        assert calls == [(128, 8, 128, {"mem_doc_metric": {"x": 1}})]
        assert dict(e.families)["mem_doc_family"] == 10 * 2**30 and "interaction" in dict(e.families)
        assert e.working_bytes >= 1.2 * 10 * 2**30
        assert "mem_doc_family" not in dict(memory.estimate(SHAPE, metrics=["agop"]).families)  # not run: not asked
        assert "mem_doc_family" in dict(memory.estimate(SHAPE).families)  # the default report runs every metric
        tg.register_family(
            tg.FamilySpec("mem_doc_family", metrics=("mem_doc_metric",), memory=lambda *a, **k: 1 / 0), overwrite=True
        )
        with pytest.warns(
            RuntimeWarning, match=r"family 'mem_doc_family': its memory declaration .* failed \(ZeroDivisionError"
        ):
            e = memory.estimate(SHAPE, metrics=["mem_doc_metric"])
        assert e.families == ()
    finally:
        tg.unregister_family("mem_doc_family")
        tg.unregister_metric("mem_doc_metric")


def test_the_estimate_grows_with_the_text_and_the_vocabulary_and_shrinks_without_agop():
    base = memory.estimate(SHAPE).peak_bytes
    assert memory.estimate(SHAPE, n_seqs=4).peak_bytes < base < memory.estimate(SHAPE, seq_len=256).peak_bytes
    wide = ModelShape(4, 128, 1_000_000, 256, "hf-dir", 20_000, 50_000, 384)
    assert memory.estimate(wide).peak_bytes > base
    assert memory.estimate(SHAPE, metrics=["shape", "pga"]).peak_bytes < base
    assert memory.estimate(SHAPE, agop_batch=1).peak_bytes < base


def test_a_large_model_is_dominated_by_its_load():
    big = ModelShape(2, 64, 500_000_000, 64, "gguf", 0, 100, 256)
    e = memory.estimate(big, n_seqs=1, seq_len=2)
    assert e.peak_bytes == e.process_bytes + e.load_bytes and e.load_bytes > e.held_bytes + e.working_bytes


def test_the_smollm2_estimate_is_near_its_measured_report_peak():
    """SmolLM2-135M's shape (its GGUF header) against the peak RSS of one default report, measured
    with /usr/bin/time -v (2.07, 2.07 GiB with AGOP's sums as packed triangles and W_U laid out
    as TL's copy, 2026-12-07; docs/reliability.md Memory): within 15 %, not below."""
    smollm2 = ModelShape(30, 576, 134_515_008, 2048, "gguf", 28_311_552, 49152, 1536, d_q=576, d_kv=192, gated_mlp=True)
    assert models.peek("smollm2-135m") in (None, smollm2)  # the header's shape, where the model is installed
    ratio = memory.estimate(smollm2).peak_gib / 2.07
    assert 1.0 <= ratio < 1.15


def test_a_built_model_counts_no_load():
    """A model passed in is loaded already: its estimate is the held model plus the working set, and
    the same shape read from files adds the load's peak (the 1 B scaled model: 8.04 GiB estimated
    against 6.15 measured while a load of two weight copies that never happened was counted)."""
    files = ModelShape(2, 64, 500_000_000, 64, "gguf", 0, 100, 256)
    built = ModelShape(2, 64, 500_000_000, 64, "model", 0, 100, 256)
    a, b = memory.estimate(files, n_seqs=1, seq_len=2), memory.estimate(built, n_seqs=1, seq_len=2)
    assert a.load_bytes > 0 and b.load_bytes == 0
    assert (b.held_bytes, b.working_bytes) == (a.held_bytes, a.working_bytes)
    assert b.peak_bytes == b.process_bytes + b.held_bytes + b.working_bytes < a.peak_bytes


def test_shape_of_a_built_model(tiny_model):
    shape = memory.shape_of_model(tiny_model)
    assert shape.n_params == sum(p.numel() for p in tiny_model.parameters())
    assert (shape.n_layers, shape.d_model, shape.d_vocab, shape.d_mlp, shape.source) == (3, 32, 101, 64, "model")


# ------------------------------------------------------------------ the refusal, before any load
@pytest.fixture
def model_dir(tmp_path):
    """A model directory peek can read (config.json and a safetensors file), never loaded here."""
    from safetensors.torch import save_file

    d = tmp_path / "model"
    d.mkdir()
    config = {"num_hidden_layers": 2, "hidden_size": 32, "n_positions": 64, "vocab_size": 101, "intermediate_size": 64}
    (d / "config.json").write_text(json.dumps(config))
    save_file({"w": torch.zeros(101, 32), "b": torch.zeros(32, 32)}, str(d / "model.safetensors"))
    return d


def _need(model_dir, **kw):
    return memory.estimate(models.peek(str(model_dir)), **kw).peak_bytes


def test_report_refuses_with_the_estimate_when_memory_is_short(monkeypatch, model_dir):
    need = _need(model_dir, n_seqs=2, seq_len=16, metrics=["shape"])
    monkeypatch.setattr(pipeline, "available_memory_bytes", lambda: need - 1)  # faked: one byte short
    monkeypatch.setattr(models, "load", lambda *a, **k: pytest.fail("a refused model must never load"))
    with pytest.raises(InputError, match=r"needs about \d+\.\d\d GiB for a report of 2 x 16 tokens") as err:
        pipeline.run_report(str(model_dir), metrics=["shape"], n_seqs=2, seq_len=16, progress=False)
    msg = str(err.value)
    assert "the available RAM allows" in msg and "--ignore-memory-check" in msg and "working set" in msg
    assert f"{need / 2**30:.2f} GiB" in msg


def test_the_limit_and_the_override(monkeypatch, model_dir, byte_model):
    need = _need(model_dir, n_seqs=2, seq_len=16, metrics=["shape"])
    monkeypatch.setattr(pipeline, "available_memory_bytes", lambda: 2**50)  # plenty: only the limit refuses
    with pytest.raises(InputError, match=r"--max-memory-gb / max_memory_gb allows"):
        pipeline.check_model_memory(str(model_dir), need / 2**30 * 0.99, n_seqs=2, seq_len=16, metrics=["shape"])
    assert (
        pipeline.check_model_memory(str(model_dir), need / 2**30 * 1.01, n_seqs=2, seq_len=16, metrics=["shape"])
        == need
    )
    # the override runs it and records the estimate, unchecked, with the measured peak
    monkeypatch.setattr(models, "load", lambda *a, **k: byte_model)
    report = pipeline.run_report(
        str(model_dir),
        metrics=["shape"],
        n_seqs=2,
        seq_len=16,
        max_memory_gb=need / 2**30 / 10,
        ignore_memory_check=True,
        progress=False,
    )
    rec = report.provenance["memory"]
    assert rec["peak_gib"] == round(need / 2**30, 3) and rec["checked"] is False and rec["source"] == "hf-dir"
    assert rec["measured_peak_gib"] > 0 and rec["max_memory_gb"] == pytest.approx(need / 2**30 / 10)


def test_a_model_passed_in_has_its_estimate_recorded(byte_model):
    report = pipeline.run_report(byte_model, metrics=["shape"], n_seqs=2, seq_len=16, progress=False)
    rec = report.provenance["memory"]
    assert rec["source"] == "model" and rec["n_params"] == sum(p.numel() for p in byte_model.parameters())
    assert rec["checked"] is True and rec["measured_peak_gib"] > 0


def test_the_cli_refuses_and_the_flag_overrides(monkeypatch, model_dir, byte_model, tmp_path, capsys):
    monkeypatch.setattr(models, "load", lambda *a, **k: byte_model)
    argv = ["report", "--model", str(model_dir), "--metrics", "shape", "--n-seqs", "2", "--seq-len", "16"]
    argv += ["--no-figures", "--max-memory-gb", "0.001"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "needs about" in err and "0.00 GiB" in err and "--ignore-memory-check" in err
    assert not (tmp_path / "a").exists()
    assert main([*argv, "--out", str(tmp_path / "b"), "--ignore-memory-check"]) == 0, capsys.readouterr().err
    prov = json.loads((tmp_path / "b" / "report.json").read_text())["provenance"]
    assert prov["memory"]["checked"] is False and prov["memory"]["peak_gib"] >= 0.5  # the process at least


def test_ignore_memory_check_must_be_a_bool():
    with pytest.raises(ValueError, match="ignore_memory_check"):
        pipeline.build_report("smollm2-135m", ignore_memory_check="yes")


def test_peek_reads_the_attention_and_mlp_widths_the_agop_bound_needs(tmp_path):
    """A model directory: heads, key/value heads and the gate from config.json and the tensor names;
    a GGUF: the query and key widths and the gate from the tensor shapes."""
    import gguf
    import numpy as np
    from safetensors.torch import save_file

    d = tmp_path / "llama"
    d.mkdir()
    cfg = {
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 50,
        "intermediate_size": 96,
    }
    (d / "config.json").write_text(json.dumps(cfg))
    save_file({"model.layers.0.mlp.gate_proj.weight": torch.zeros(96, 64)}, str(d / "model.safetensors"))
    s = models.peek(str(d))
    assert (s.n_heads, s.d_q, s.d_kv, s.gated_mlp) == (4, 64, 32, True)
    (d / "config.json").write_text(json.dumps({**cfg, "head_dim": 32}))
    save_file({"h.0.mlp.c_fc.weight": torch.zeros(96, 64)}, str(d / "model.safetensors"))
    s = models.peek(str(d))
    assert (s.d_q, s.d_kv, s.gated_mlp) == (128, 64, False)

    path = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor("token_embd.weight", np.zeros((50, 64), np.float32))
    w.add_tensor("blk.0.attn_q.weight", np.zeros((96, 64), np.float32))  # numpy (out, in): GGUF dims (in, out)
    w.add_tensor("blk.0.attn_k.weight", np.zeros((32, 64), np.float32))
    w.add_tensor("blk.0.ffn_gate.weight", np.zeros((128, 64), np.float32))
    w.add_tensor("blk.0.ffn_up.weight", np.zeros((128, 64), np.float32))
    for step in (w.write_header_to_file, w.write_kv_data_to_file, w.write_tensors_to_file, w.close):
        step()
    g = models.peek(str(path))
    assert (g.d_model, g.d_q, g.d_kv, g.d_mlp, g.gated_mlp, g.n_heads) == (64, 96, 32, 128, True, None)
