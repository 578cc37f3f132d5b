"""Interaction family on SmolLM2-135M (30 layers, d_model 576) with real text (pydoc)."""

import math

import pytest
import torch

import tl_geometry as tg
from tests.helpers import run_with_leaf

pytestmark = pytest.mark.integration

HOOKS = ["blocks.0.hook_resid_pre", "blocks.15.hook_resid_pre", "blocks.29.hook_resid_pre"]


@pytest.fixture(scope="module")
def tokens(pydoc_tokens):
    return pydoc_tokens[:2, :48]


def test_depth_width_ratio_smollm2(smollm2):
    r = tg.depth_width_ratio(smollm2)
    assert r == 30 / 576 and round(r, 3) == 0.052
    assert not tg.in_efficient_interval(r)  # just above the paper's [0.023, 0.047]
    rep = tg.get_metric("depth_width")(smollm2)
    row = rep.rows[0]
    assert row.metric == "depth_width.ratio" and row.extras["in_interval"] is False


def test_probe_gradients_equal_autograd_on_smollm2(smollm2, tokens):
    """The AGOP from 2 probes equals Σ g gᵀ with g from torch.autograd.grad on each activation."""
    tok = tokens[:1, :16]
    h = "blocks.15.hook_resid_pre"
    res = tg.agop(smollm2, tok, hooks=[h], n_probes=2, seed=3, progress=False, probes="logits")
    keep = tg.capture.valid_mask(smollm2, tok)[0]  # BOS dropped
    gen = torch.Generator().manual_seed(tg.capture.probe_seed(3, 0))  # sequence 0's own generator
    G = torch.zeros(576, 576, dtype=torch.float64)
    for _ in range(2):
        logits, leaf = run_with_leaf(smollm2, tok, h)
        u = torch.randn(logits.shape[1:], generator=gen)[None]
        (g,) = torch.autograd.grad((u * logits).sum(), leaf)
        g = g[0, keep].double()
        G += g.T @ g
    G /= 2 * int(keep.sum())
    assert res[h].n_positions == int(keep.sum()) == 15
    torch.testing.assert_close(res.matrices[h].double(), G, rtol=2e-3, atol=1e-6 * float(G.abs().max()))


def test_agop_smollm2_report_and_stderr(smollm2, tokens):
    a = tg.agop(smollm2, tokens[:1, :32], hooks=HOOKS, n_probes=4, seed=0, progress=False)
    b = tg.agop(smollm2, tokens[:1, :32], hooks=HOOKS, n_probes=4, seed=1, progress=False)
    for h in HOOKS:
        s, t = a[h], b[h]
        assert 0 < s.ratio < 1 and s.trace > 0 and math.isfinite(s.stderr) and s.ratio_stderr_probes > 0
        # one sequence: no error over the text (NaN, with the reason)
        assert math.isnan(s.ratio_stderr) and s.stderr_note and s.n_text_groups == 1
        # two probe seeds on the same tokens agree within their probe errors
        assert abs(s.ratio - t.ratio) < 5 * math.hypot(s.ratio_stderr_probes, t.ratio_stderr_probes) + 1e-3
    rep = tg.agop_report(a, smollm2)
    assert {r.metric for r in rep.rows} == {"agop.aofe", "agop.aofe_ratio", "agop.trace"}
    assert sorted({r.layer for r in rep.rows}) == [0, 15, 29]


def test_registered_metrics_smollm2(smollm2, tokens):
    rep = tg.analyze(
        smollm2,
        tokens[:1, :16],
        metrics=["wtw_aofe", "depth_width", "nfa"],
        options={"nfa": {"layers": [3, 20], "n_probes": 2, "progress": False}},
        progress=False,
    )
    assert 0 < rep.value("wtw.aofe_ratio") < 1
    for h in ("blocks.3.ln2.hook_normalized", "blocks.20.ln2.hook_normalized"):
        assert -1 <= rep.value("nfa.corr", hook=h) <= 1 and -1 <= rep.value("nfa.corr_sqrt", hook=h) <= 1
