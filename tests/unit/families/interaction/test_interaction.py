"""Interaction family: AOFE, AGOP (probes, exact, output space), NFA, depth/width, metrics."""

import itertools
import math
import types

import numpy as np
import pytest
import torch

import tl_geometry as tg
from tests.helpers import make_tiny_model, run_with_leaf
from tl_geometry.families.interaction import reading as interaction_reading  # noqa: E402
from tl_geometry.metrics.interaction import AGOPAccumulator, projection_matrix

HOOKS = ["blocks.1.hook_resid_pre", "blocks.2.hook_resid_pre"]


pytestmark = pytest.mark.usefixtures("one_thread")  # many small passes: see conftest


# ----------------------------------------------------------------------------- references
def ref_aofe(G):
    G = G.double()
    S = (G + G.T) / 2
    n = S.shape[0]
    off = sum(float(S[i, j]) ** 2 for i in range(n) for j in range(n) if i != j)
    tot = sum(float(S[i, j]) ** 2 for i in range(n) for j in range(n))
    return off, off / tot


def ref_agop_exact(model, tokens, hook):
    """Slow reference: J row by row with one backward per logit, G = mean_{b,t} J_{b,t}ᵀ J_{b,t}."""
    d = model.cfg.d_model
    G = torch.zeros(d, d, dtype=torch.float64)
    n = 0
    for b in range(tokens.shape[0]):
        logits, leaf = run_with_leaf(model, tokens[b : b + 1], hook)
        logits = logits[0]  # (T, V)
        T, V = logits.shape
        rows = []
        for t, v in itertools.product(range(T), range(V)):
            (g,) = torch.autograd.grad(logits[t, v], leaf, retain_graph=True)
            rows.append(g[0].double())  # (T, d): ∂F_{t,v}/∂a_{s}
        J = torch.stack(rows)  # (T·V, T, d)
        for s in range(T):
            G += J[:, s].T @ J[:, s]
            n += 1
    return G / n


# ----------------------------------------------------------------------------- AOFE
def test_aofe_diagonal_is_zero():
    a = tg.aofe(torch.diag(torch.tensor([1.0, 2.0, 3.0, 4.0])))
    assert float(a.aofe) == 0.0 and float(a.ratio) == 0.0
    assert float(a.frobenius2) == pytest.approx(30.0)


@pytest.mark.parametrize("n", [2, 3, 7, 16])
def test_aofe_rank_one_all_equal(n):
    assert float(tg.aofe(torch.full((n, n), 2.5)).ratio) == pytest.approx((n * n - n) / (n * n))


def test_aofe_matches_reference_and_symmetrizes():
    g = torch.Generator().manual_seed(1)
    G = torch.randn(6, 6, generator=g)
    a = tg.aofe(G)
    off, ratio = ref_aofe(G)
    assert float(a.aofe) == pytest.approx(off, rel=1e-12)
    assert float(a.ratio) == pytest.approx(ratio, rel=1e-12)
    assert float(tg.aofe((G + G.T) / 2).ratio) == pytest.approx(float(a.ratio), rel=1e-6)
    assert a.to_dict()["ratio"] == pytest.approx(ratio)


@pytest.mark.parametrize(
    "G, exc, match",
    [
        ([[1.0, 0.0], [0.0, 1.0]], TypeError, "torch tensor"),
        (torch.ones(3), ValueError, "square 2-D"),
        (torch.ones(2, 3), ValueError, "square 2-D"),
        (torch.ones(1, 1), ValueError, "at least 2"),
        (torch.tensor([[1.0, float("nan")], [0.0, 1.0]]), ValueError, "non-finite"),
        (torch.zeros(3, 3), ValueError, "all zero"),
    ],
)
def test_aofe_bad_input(G, exc, match):
    with pytest.raises(exc, match=match):
        tg.aofe(G)


def test_wtw_aofe_matches_reference():
    W = torch.randn(50, 5, generator=torch.Generator().manual_seed(2))
    gram = sum(torch.outer(w, w) for w in W.double()) / 50
    assert float(tg.wtw_aofe(W).ratio) == pytest.approx(ref_aofe(gram)[1], rel=1e-10)
    with pytest.raises(ValueError, match="2-D"):
        tg.wtw_aofe(torch.ones(4))


# ----------------------------------------------------------------------------- depth / width
def test_depth_width_ratio_tiny(tiny_model):
    assert tg.depth_width_ratio(tiny_model) == 3 / 32
    assert tg.depth_width_ratio(tiny_model.cfg) == 3 / 32
    assert tg.depth_width_ratio({"n_layers": 30, "d_model": 576}) == pytest.approx(0.0521, abs=1e-4)
    assert tg.depth_width_ratio(types.SimpleNamespace(n_layers=5, d_model=120)) == pytest.approx(0.0417, abs=1e-4)
    assert tg.in_efficient_interval(5 / 120) and not tg.in_efficient_interval(30 / 576)
    assert tg.in_efficient_interval(0.023) and tg.in_efficient_interval(0.047)


@pytest.mark.parametrize(
    "obj, match",
    [
        ({"n_layers": 3}, "need n_layers and d_model"),
        ({"n_layers": 0, "d_model": 8}, ">= 1"),
        ({"n_layers": 2.5, "d_model": 8}, "integers"),
        (object(), "need n_layers"),
    ],
)
def test_depth_width_ratio_bad(obj, match):
    with pytest.raises(ValueError, match=match):
        tg.depth_width_ratio(obj)


# ----------------------------------------------------------------------------- AGOP accumulator
def test_accumulator_matches_per_probe_reference():
    g = torch.Generator().manual_seed(3)
    P, N, d = 6, 10, 4
    grads = [torch.randn(N, d, generator=g) for _ in range(P)]
    acc = AGOPAccumulator(P, n_groups=P)
    for p, x in enumerate(grads):
        acc.update("h", p, x[:4])
        acc.update("h", p, x[4:])  # two batches of positions
    G, s = acc.compute("h")
    per = torch.stack([x.double().T @ x.double() / N for x in grads])
    ref = per.mean(0)
    torch.testing.assert_close(G.double(), ref, rtol=1e-5, atol=1e-6)
    se = math.sqrt(sum(float(((q - ref) ** 2).sum()) for q in per) / (P - 1) / P)
    assert s.stderr == pytest.approx(se, rel=1e-5)
    assert s.n_positions == N and s.n_probes == P
    tr = per.diagonal(dim1=1, dim2=2).sum(1)
    assert s.trace_stderr == pytest.approx(float(tr.std() / math.sqrt(P)), rel=1e-5)  # jackknife of a mean


def test_accumulator_bad_input():
    with pytest.raises(ValueError, match="n_probes must be >= 2"):
        AGOPAccumulator(1)
    acc = AGOPAccumulator(4)
    with pytest.raises(ValueError, match="non-finite"):
        acc.update("h", 0, torch.tensor([[float("inf"), 0.0]]))


# ----------------------------------------------------------------------------- AGOP on models
def test_captured_gradient_equals_autograd(tiny_model, tiny_tokens):
    """Our one-probe estimate equals g gᵀ with g from torch.autograd.grad on the same activation."""
    tok = tiny_tokens[:2]
    res = tg.agop(tiny_model, tok, hooks=HOOKS, n_probes=2, seed=5, progress=False, probes="logits")
    gens = [torch.Generator().manual_seed(tg.capture.probe_seed(5, b)) for b in range(2)]  # one per sequence
    # HOOKS[0] is upstream of HOOKS[1]: capture each in its own forward so each is a leaf
    Gs = {h: 0 for h in HOOKS}
    us = [torch.stack([torch.randn(16, 101, generator=g) for g in gens]) for _ in range(2)]
    for h in HOOKS:
        for u in us:
            logits, leaf = run_with_leaf(tiny_model, tok, h)
            (g,) = torch.autograd.grad((u * logits).sum(), leaf)
            g = g.reshape(-1, 32).double()
            Gs[h] = Gs[h] + g.T @ g
    for h in HOOKS:
        torch.testing.assert_close(res.matrices[h].double(), Gs[h] / (2 * 32), rtol=1e-4, atol=1e-6)


def _leaf_grads(model, tok, h, scalar_of_logits):
    """∂ scalar_of_logits(logits) / ∂ activation at h, the activation made a leaf (slow reference)."""
    logits, leaf = run_with_leaf(model, tok, h)
    (g,) = torch.autograd.grad(scalar_of_logits(logits), leaf)
    return g


def test_readout_probes_are_logit_probes_mapped_through_W_U(tiny_model, tiny_tokens):
    """A readout probe v = S z is the logit probe u = (W_U W_Uᵀ)⁻¹-lifted v (W_U u = v): the gradient of
    u·F equals ours, and E[v vᵀ] = W_U W_Uᵀ = E[(W_U u)(W_U u)ᵀ] for u ~ N(0, I) (same law)."""
    tok = tiny_tokens[:2]
    res = tg.agop(tiny_model, tok, hooks=HOOKS, n_probes=3, seed=7, progress=False)
    assert res.provenance["agop_probes"] == "readout"
    W = tiny_model.W_U.detach().double()  # (d, V)
    C = W @ W.T
    S = tg.capture.readout_factor(tiny_model.W_U)
    torch.testing.assert_close(S @ S.T, C)  # the law: Cov(S z) = W_U W_Uᵀ
    gens = [torch.Generator().manual_seed(tg.capture.probe_seed(7, b)) for b in range(2)]  # one per sequence
    vs = [torch.stack([torch.randn(16, 32, generator=g) for g in gens]) @ S.float().T for _ in range(3)]
    lift = torch.linalg.solve(C, W).float()  # u = vᵀ C⁻¹ W_U: W_U uᵀ = v
    for h in HOOKS:
        G = 0
        for v in vs:
            u = v @ lift
            g = _leaf_grads(tiny_model, tok, h, lambda logits, u=u: (u * logits).sum()).reshape(-1, 32).double()
            G = G + g.T @ g
        torch.testing.assert_close(res.matrices[h].double(), G / (3 * 32), rtol=1e-4, atol=1e-6)


def test_readout_factor_of_a_rank_deficient_readout():
    W = torch.randn(6, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)  # d=6 > vocab=3
    S = tg.capture.readout_factor(W)
    torch.testing.assert_close(S @ S.T, W @ W.T)
    assert S.shape == (6, 6) and S.dtype == torch.float64


@pytest.mark.parametrize(
    "W, match",
    [
        (torch.ones(4), r"W_U must be a 2-D tensor \(d_model, d_vocab\), got torch.Size\(\[4\]\)"),
        (torch.tensor([[1.0, float("nan")]]), "W_U contains NaN or inf"),
        ([[1.0]], "W_U must be a 2-D tensor"),
    ],
)
def test_readout_factor_bad_input(W, match):
    with pytest.raises(ValueError, match=match):
        tg.capture.readout_factor(W)


@pytest.mark.needs_hooked
def test_soft_capped_logits_fall_back_to_logit_probes(tiny_tokens):
    """tanh soft-capping makes the logits non-linear in unembed.hook_in: the logit probes are used,
    drawn exactly as probes="logits" draws them."""
    model = make_tiny_model(output_logits_soft_cap=2.0)
    kw = dict(hooks=HOOKS, n_probes=2, seed=1, progress=False)
    auto = tg.agop(model, tiny_tokens[:2], **kw)
    forced = tg.agop(model, tiny_tokens[:2], probes="logits", **kw)
    assert auto.provenance["agop_probes"] == forced.provenance["agop_probes"] == "logits"
    for h in HOOKS:
        torch.testing.assert_close(auto.matrices[h], forced.matrices[h], rtol=0, atol=0)


def test_exact_matches_slow_reference(tiny_model):
    tok = torch.randint(0, 101, (2, 4), generator=torch.Generator().manual_seed(4))
    h = "blocks.1.hook_resid_pre"
    res = tg.agop(tiny_model, tok, hooks=[h], exact=True, progress=False)
    torch.testing.assert_close(res.matrices[h].double(), ref_agop_exact(tiny_model, tok, h), rtol=1e-4, atol=1e-6)
    assert res.exact and res[h].stderr == 0.0 and res[h].n_positions == 8


@pytest.mark.parametrize("probes", ["readout", "logits"])
def test_probe_estimator_converges_and_stderr_covers(tiny_model, probes):
    tok = torch.randint(0, 101, (12, 16), generator=torch.Generator().manual_seed(0))
    ex = tg.agop(tiny_model, tok, hooks=HOOKS, exact=True, progress=False)
    est = tg.agop(tiny_model, tok, hooks=HOOKS, n_probes=256, seed=1, progress=False, probes=probes)
    assert est.provenance["agop_probes"] == probes
    for h in HOOKS:
        err = float((est.matrices[h] - ex.matrices[h]).norm())
        rel = err / float(ex.matrices[h].norm())
        assert rel < 0.05, (h, rel)
        assert err < 3 * est[h].stderr, (h, err, est[h].stderr)  # the reported error covers the truth
        assert est[h].rel_stderr < 0.05
        assert abs(est[h].ratio - ex[h].ratio) < 4 * est[h].ratio_stderr + 1e-3
    few = tg.agop(tiny_model, tok, hooks=HOOKS, n_probes=8, seed=1, progress=False, probes=probes)
    assert all(few[h].stderr > est[h].stderr for h in HOOKS)  # fewer probes, larger reported error
    # few probes: the plug-in AOFE ratio is biased upwards, the jackknife-corrected one much less
    runs = [tg.agop(tiny_model, tok, hooks=HOOKS, n_probes=8, seed=s, progress=False, probes=probes) for s in range(4)]
    for h in HOOKS:
        plug = sum(r[h].ratio for r in runs) / 4 - ex[h].ratio
        deb = sum(r[h].ratio_debiased for r in runs) / 4 - ex[h].ratio
        assert plug > 0 and abs(deb) < plug, (h, plug, deb)
        # the AOFE (what the agop.aofe row carries): quadratic in G, so the correction is unbiased
        plug = sum(r[h].aofe for r in runs) / 4 - ex[h].aofe
        deb = sum(r[h].aofe_debiased for r in runs) / 4 - ex[h].aofe
        assert plug > 0 and abs(deb) < plug, (h, plug, deb)
    assert ex[HOOKS[0]].ratio_debiased == ex[HOOKS[0]].ratio


@pytest.mark.needs_hooked
def test_agop_drops_bos(monkeypatch):
    from tl_geometry.capture import hooks

    monkeypatch.setattr(hooks, "bos_token_id", lambda model: 0)  # valid_mask's own lookup
    model = make_tiny_model()
    tok = torch.randint(1, 101, (3, 8), generator=torch.Generator().manual_seed(0))
    tok[:, 0] = 0
    res = tg.agop(model, tok, hooks=HOOKS[:1], n_probes=2, progress=False)
    assert res[HOOKS[0]].n_positions == 3 * 7
    ex = tg.agop(model, tok, hooks=HOOKS[:1], exact=True, progress=False)
    assert ex[HOOKS[0]].n_positions == 3 * 7
    full = tg.agop(model, tok[:, 1:], hooks=HOOKS[:1], exact=True, progress=False)
    assert full[HOOKS[0]].n_positions == 3 * 7


def test_agop_batches_agree(tiny_model, tiny_tokens):
    """Batching the tokens changes nothing in exact mode (memory is bounded by batch_size)."""
    a = tg.agop(tiny_model, tiny_tokens[:4, :8], hooks=HOOKS[:1], exact=True, progress=False)
    b = tg.agop(tiny_model, tiny_tokens[:4, :8], hooks=HOOKS[:1], exact=True, batch_size=1, progress=False)
    torch.testing.assert_close(a.matrices[HOOKS[0]], b.matrices[HOOKS[0]])


def test_agop_on_bridge_and_hooked(any_tiny_model, tiny_tokens):
    res = tg.agop(
        any_tiny_model,
        tiny_tokens[:2],
        hooks=["blocks.0.hook_resid_pre", "blocks.2.hook_resid_pre"],
        n_probes=4,
        progress=False,
    )
    for s in res.stats.values():
        assert 0 < s.ratio < 1 and s.trace > 0 and math.isfinite(s.stderr)
    assert res.provenance["agop_probes"] == "readout"  # both have unembed.hook_in


def test_output_space_exact_reference_and_probes(tiny_model, tiny_tokens):
    tok = tiny_tokens[:3, :6]
    h = "blocks.0.hook_resid_pre"
    ex = tg.agop(tiny_model, tok, space="output", exact=True, projection_dim=8, progress=False)
    P = projection_matrix(8, 101, seed=0)
    ref = torch.zeros(8, 8, dtype=torch.float64)
    for b in range(3):
        logits, leaf = run_with_leaf(tiny_model, tok[b : b + 1], h)
        y = logits[0, -1] @ P.T
        PJ = torch.stack([torch.autograd.grad(y[k], leaf, retain_graph=True)[0].flatten() for k in range(8)])
        ref += PJ.double() @ PJ.double().T
    torch.testing.assert_close(ex.matrices[h].double(), ref / 3, rtol=1e-4, atol=1e-6)
    assert ex.matrices[h].shape == (8, 8) and ex.space == "output"
    est = tg.agop(tiny_model, tok, space="output", n_probes=400, projection_dim=8, progress=False)
    err = float((est.matrices[h] - ex.matrices[h]).norm())
    assert err / float(ex.matrices[h].norm()) < 0.15 and err < 3 * est[h].stderr


@pytest.mark.needs_hooked
def test_agop_train_mode_restored():
    model = make_tiny_model()
    tok = torch.randint(0, 101, (2, 6), generator=torch.Generator().manual_seed(0))
    ref = tg.agop(model, tok, hooks=HOOKS[:1], n_probes=3, progress=False)
    model.train()
    res = tg.agop(model, tok, hooks=HOOKS[:1], n_probes=3, progress=False)
    assert model.training
    torch.testing.assert_close(res.matrices[HOOKS[0]], ref.matrices[HOOKS[0]])


@pytest.mark.needs_hooked
def test_agop_bf16_model_computed_in_float32():
    model = make_tiny_model(dtype=torch.bfloat16)
    ref = make_tiny_model()
    ref.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    tok = torch.randint(0, 101, (2, 6), generator=torch.Generator().manual_seed(0))
    a = tg.agop(model, tok, hooks=HOOKS[:1], exact=True, progress=False)
    b = tg.agop(ref, tok, hooks=HOOKS[:1], exact=True, progress=False)
    assert a.matrices[HOOKS[0]].dtype == torch.float32
    torch.testing.assert_close(a.matrices[HOOKS[0]], b.matrices[HOOKS[0]], rtol=1e-4, atol=1e-6)
    assert model.cfg.dtype == torch.bfloat16  # the caller's model is untouched


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_probes=1), "n_probes must be >= 2"),
        (dict(hooks=["unembed.hook_out"]), "past the unembedding"),
        (dict(hooks=["blocks.0.attn.hook_pattern"]), r"\(batch, pos, d\)"),
        (dict(space="middle"), "space must be"),
        (dict(space="output", hooks=HOOKS), "one hook"),
        (dict(hooks=["blocks.9.hook_resid_pre"]), "unknown hook"),
        (dict(batch_size=0), "batch_size"),
        (dict(probes="vocab"), r"probes must be one of \('readout', 'logits'\)"),
    ],
)
def test_agop_bad_input(tiny_model, tiny_tokens, kwargs, match):
    with pytest.raises(ValueError, match=match):
        tg.agop(tiny_model, tiny_tokens[:2], **{"n_probes": 2, "progress": False, **kwargs})


def test_agop_tokens_longer_than_n_ctx(tiny_model):
    with pytest.raises(ValueError, match="n_ctx"):
        tg.agop(tiny_model, torch.zeros(1, 65, dtype=torch.long), n_probes=2, progress=False)


@pytest.mark.needs_hooked
def test_agop_non_finite_gradient():
    model = make_tiny_model()
    with torch.no_grad():
        model.blocks[2].mlp.W_out[0, 0] = float("nan")
    with pytest.raises(ValueError, match="non-finite"):
        tg.agop(model, torch.zeros(1, 4, dtype=torch.long), hooks=HOOKS[:1], n_probes=2, progress=False)


def test_agop_exact_refuses_large(tiny_model, monkeypatch):
    from tl_geometry.capture import backward as _agop

    monkeypatch.setattr(_agop, "EXACT_MAX_ENTRIES", 10)
    with pytest.raises(ValueError, match="exact=True needs"):
        tg.agop(tiny_model, torch.zeros(1, 4, dtype=torch.long), hooks=HOOKS[:1], exact=True, progress=False)


# ----------------------------------------------------------------------------- NFA
def test_nfa_correlation_known_answers_and_reference():
    import scipy.linalg

    g = torch.Generator().manual_seed(6)
    W = torch.randn(6, 9, generator=g, dtype=torch.float64)
    gram = W @ W.T
    c = tg.nfa_correlation(W, gram)
    assert c.pearson == pytest.approx(1.0) and c.n_pairs == 15
    c2 = tg.nfa_correlation(W, gram @ gram)  # G = (W Wᵀ)² → G^(1/2) = W Wᵀ
    assert c2.pearson_sqrt == pytest.approx(1.0, abs=1e-8)
    G = torch.randn(6, 6, generator=g, dtype=torch.float64)
    G = G @ G.T
    c3 = tg.nfa_correlation(W, G)
    iu = np.triu_indices(6, 1)
    assert c3.pearson == pytest.approx(np.corrcoef(gram.numpy()[iu], G.numpy()[iu])[0, 1], rel=1e-10)
    root = np.real(scipy.linalg.sqrtm(G.numpy()))
    assert c3.pearson_sqrt == pytest.approx(np.corrcoef(gram.numpy()[iu], root[iu])[0, 1], rel=1e-6)


@pytest.mark.parametrize(
    "W, G, match",
    [
        (torch.ones(4), torch.eye(4), "2-D"),
        (torch.ones(3, 5), torch.eye(4), "input rows"),
        (torch.ones(2, 5), torch.eye(2), "d >= 3"),
        (torch.randn(3, 5), torch.eye(3), "constant"),
    ],
)
def test_nfa_correlation_bad(W, G, match):
    with pytest.raises(ValueError, match=match):
        tg.nfa_correlation(W, G)


def test_nfa_on_tiny_model(tiny_model, tiny_tokens):
    out = tg.nfa(tiny_model, tiny_tokens[:2], layers=[0, 2], n_probes=4, progress=False)
    assert list(out) == ["blocks.0.ln2.hook_normalized", "blocks.2.ln2.hook_normalized"]
    assert all(-1 <= c.pearson <= 1 and -1 <= c.pearson_sqrt <= 1 for c in out.values())
    with pytest.raises(ValueError, match="layers"):
        tg.nfa(tiny_model, tiny_tokens[:2], layers=[7])


# ----------------------------------------------------------------------------- registered metrics
def test_registered_metrics(tiny_model, tiny_tokens):
    assert {"agop", "wtw_aofe", "depth_width", "nfa"} <= set(tg.list_metrics())
    rep = tg.analyze(
        tiny_model,
        tiny_tokens[:2],
        metrics=["agop", "wtw_aofe", "depth_width"],
        options={"agop": {"n_probes": 3, "progress": False}},
        progress=False,
    )
    for h in tg.capture.resid_hooks(tiny_model, "pre"):
        for m in ("agop.aofe", "agop.aofe_ratio", "agop.trace"):
            row = [r for r in rep.rows if r.metric == m and r.hook == h]
            assert len(row) == 1 and row[0].extras["n_probes"] == 3 and "stderr" in row[0].extras
            assert row[0].extras["space"] == "input" and row[0].layer == int(h.split(".")[1])
    assert rep.value("wtw.aofe_ratio") == pytest.approx(float(tg.wtw_aofe(tiny_model.W_E).ratio))
    assert rep.value("depth_width.ratio") == 3 / 32
    assert [r for r in rep.rows if r.metric == "depth_width.ratio"][0].extras["in_interval"] is False
    nfa = tg.get_metric("nfa")(tiny_model, tiny_tokens[:2], layers=[1], n_probes=2, progress=False)
    assert nfa.metrics == {"nfa.corr", "nfa.corr_sqrt"}
    with pytest.raises(ValueError, match="matrix must be"):
        tg.get_metric("wtw_aofe")(tiny_model, matrix="W_Q")


# ----------------------------------------------------------------------------- CLI
def test_cli_agop_on_tiny_model(tiny_model, tiny_tokens, monkeypatch, tmp_path, capsys):
    from tl_geometry.cli import main

    monkeypatch.setattr(tg.models, "load", lambda name, **kw: tiny_model)
    monkeypatch.setattr(tg.corpus, "tokens", lambda model, source, **kw: tiny_tokens[: kw["n_seqs"], : kw["seq_len"]])
    out = tmp_path / "agop.json"
    rc = main(
        ["agop", "--layers", "0", "2", "--n-probes", "3", "--n-seqs", "2", "--seq-len", "8", "--nfa", "--out", str(out)]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "R_D/W = 3/32" in text and "blocks.2.hook_resid_pre" in text and "nfa.corr_sqrt" in text
    rep = tg.GeometryReport.from_json(out)
    assert {"agop.aofe_ratio", "depth_width.ratio", "wtw.aofe_ratio", "nfa.corr"} <= rep.metrics
    row = next(r for r in rep.rows if r.metric == "agop.aofe_ratio")
    assert row.extras["n_text_groups"] == 2 and row.extras["stderr"] >= row.extras["stderr_probes"]


@pytest.mark.parametrize(
    "argv, msg",
    [
        (["agop", "--hooks", "x", "--layers", "1"], "not both"),
        (["agop", "--n-probes", "1"], "--n-probes must be an integer >= 2"),
        (["agop", "--memory-mb", "0"], "--memory-mb must be a positive number"),
        (["agop", "--state-mb", "-1"], "--state-mb must be a positive number"),
        (["agop", "--text-groups", "1"], "--text-groups must be 0 (none) or an integer >= 2"),
        (["agop", "--batch-size", "0"], "--batch-size must be an integer >= 1 or None"),
    ],
)
def test_cli_agop_bad_args(argv, msg, capsys):
    from tl_geometry.cli import main

    assert main(argv) == 2
    assert msg in capsys.readouterr().err


# ----------------------------------------------------------------------------- the authors' toy statistics
def test_offdiag_pearson_equals_corrcoef_on_all_offdiagonal_entries():
    g = torch.Generator().manual_seed(11)
    A, B = torch.randn(7, 7, generator=g, dtype=torch.float64), torch.randn(7, 7, generator=g, dtype=torch.float64)
    off = ~np.eye(7, dtype=bool)
    ref = np.corrcoef(A.numpy()[off], B.numpy()[off])[0, 1]  # both triangles, not symmetrized
    assert tg.offdiag_pearson(A, B) == pytest.approx(ref, rel=1e-12)
    assert tg.offdiag_pearson(A, 3 * A - 2) == pytest.approx(1.0) and tg.offdiag_pearson(A, -A) == pytest.approx(-1.0)
    # for symmetric matrices it is nfa_correlation's power-1 Pearson (i < j entries)
    W = torch.randn(7, 4, generator=g, dtype=torch.float64)
    S = B @ B.T
    assert tg.offdiag_pearson(W @ W.T, S) == pytest.approx(tg.nfa_correlation(W, S).pearson, rel=1e-12)
    assert tg.offdiag_pearson(A.float(), B.float()) == pytest.approx(ref, rel=1e-5)


@pytest.mark.parametrize(
    "A, B, match",
    [
        (torch.eye(3), torch.eye(4), "same shape"),
        (torch.ones(3), torch.eye(3), "square"),
        (torch.eye(3), torch.ones(3, 3), "constant"),
        (torch.full((3, 3), float("nan")), torch.eye(3), "non-finite"),
    ],
)
def test_offdiag_pearson_bad(A, B, match):
    with pytest.raises(ValueError, match=match):
        tg.offdiag_pearson(A, B)


def test_weighted_mean_cos2_reference_and_known_answers():
    g = torch.Generator().manual_seed(12)
    V = torch.randn(6, 3, generator=g, dtype=torch.float64)  # rows v_i
    G = V @ V.T
    num = den = 0.0
    for i, j in itertools.product(range(6), repeat=2):
        if i != j:
            w = float(V[i].norm() ** 2 * V[j].norm() ** 2)
            cos2 = float(V[i] @ V[j]) ** 2 / w
            num, den = num + w * cos2, den + w
    assert float(tg.weighted_mean_cos2(G)) == pytest.approx(num / den, rel=1e-12)
    assert float(tg.weighted_mean_cos2(torch.diag(torch.tensor([1.0, 2.0, 3.0])))) == 0.0  # orthogonal
    v = torch.randn(5, 1, generator=g)
    assert float(tg.weighted_mean_cos2(v @ v.T)) == pytest.approx(1.0, rel=1e-6)  # all parallel
    # the authors' expression, transcribed
    d = torch.diagonal(G)
    theirs = ((G**2).sum() - (d**2).sum()) / (d.sum() ** 2 - (d**2).sum())
    assert float(tg.weighted_mean_cos2(G)) == pytest.approx(float(theirs), rel=1e-12)
    with pytest.raises(ValueError, match="two positive diagonal"):
        tg.weighted_mean_cos2(torch.diag(torch.tensor([1.0, 0.0, 0.0])))


def _their_pearson(x, y):
    x, y = np.asarray(x, float) - np.mean(x), np.asarray(y, float) - np.mean(y)
    return float((x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum()))


def _their_spearman(x, y):
    def rank(a):
        r = np.empty(len(a))
        r[np.argsort(a)] = np.arange(len(a))
        return r

    return _their_pearson(rank(np.asarray(x)), rank(np.asarray(y)))


def test_loss_correlations_against_their_functions_and_scipy():
    import scipy.stats

    rng = np.random.default_rng(0)
    sizes = np.repeat([3, 10, 100, 500, 1000, 5000, 20000], 5)
    loss = rng.normal(size=sizes.size)
    a = loss * 0.5 + rng.normal(size=sizes.size)
    b = rng.normal(size=sizes.size)
    out = {(c.metric, c.regime): c for c in tg.loss_correlations(loss, {"a": a, "b": b}, sizes=sizes)}
    for name, x in (("a", a), ("b", b)):
        c = out[(name, "all")]
        assert c.n == sizes.size
        assert c.pearson == pytest.approx(_their_pearson(x, loss), rel=1e-12)
        assert c.spearman == pytest.approx(_their_spearman(x, loss), rel=1e-12)  # no ties
        big = sizes >= 1000
        c = out[(name, "size >= 1000")]
        assert c.n == big.sum() and c.pearson == pytest.approx(scipy.stats.pearsonr(x[big], loss[big])[0], rel=1e-10)
    tied = tg.loss_correlations([1, 2, 3, 4], {"t": [0, 0, 1, 1]})
    assert [c.regime for c in tied] == ["all"]
    assert tied[0].spearman == pytest.approx(scipy.stats.spearmanr([0, 0, 1, 1], [1, 2, 3, 4])[0])
    nan = tg.loss_correlations([1.0, 2.0, 3.0, 4.0], {"x": [1.0, float("nan"), 3.0, 5.0]})[0]
    assert nan.n == 3 and math.isfinite(nan.pearson)
    assert math.isnan(tg.loss_correlations([1, 2], {"x": [1, 2]})[0].pearson)  # fewer than 3 runs


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(metrics={}), "at least one"),
        (dict(metrics={"x": [1, 2]}), "'x' has 2"),
        (dict(metrics={"x": [1, 2, 3]}, sizes=[1]), "sizes has 1"),
    ],
)
def test_loss_correlations_bad(kw, match):
    with pytest.raises(ValueError, match=match):
        tg.loss_correlations([1.0, 2.0, 3.0], **kw)


def test_aofe_ratio_row_is_bias_corrected(tiny_model, tiny_tokens):

    res = tg.agop(tiny_model, tiny_tokens[:2], hooks=HOOKS, n_probes=4, seed=1, progress=False)
    rep = tg.agop_report(res, tiny_model)
    for h in HOOKS:
        (row,) = [r for r in rep.rows if r.metric == "agop.aofe_ratio" and r.hook == h]
        s = res[h]
        assert row.value == s.ratio_debiased and row.value != s.ratio
        assert row.extras["ratio_plugin"] == s.ratio and row.extras["estimator"] == "jackknife"
        (row,) = [r for r in rep.rows if r.metric == "agop.aofe" and r.hook == h]
        assert row.value == s.aofe_debiased and row.value != s.aofe
        assert row.extras["aofe_plugin"] == s.aofe and row.extras["estimator"] == "jackknife"
    line = next(s for s in interaction_reading.read_interaction(rep) if s.startswith("AGOP AOFE ratio"))
    assert "bias-corrected" in line and "plug-in ratio in extras" in line
    ex = tg.agop_report(tg.agop(tiny_model, tiny_tokens[:1, :6], hooks=HOOKS[:1], exact=True, progress=False))
    (row,) = [r for r in ex.rows if r.metric == "agop.aofe_ratio"]
    assert row.extras["estimator"] == "exact" and row.value == row.extras["ratio_plugin"]
    (row,) = [r for r in ex.rows if r.metric == "agop.aofe"]
    assert row.extras["estimator"] == "exact" and row.value == row.extras["aofe_plugin"]
    assert "exact AGOP" in interaction_reading.read_interaction(ex)[0]


def _ratio_row(hook, estimator, **extras):
    ex = {"estimator": estimator, "n_probes": 4, "stderr": 0.01, "n_text_groups": 0, **extras}
    return {"metric": "agop.aofe_ratio", "hook": hook, "value": 0.4, "extras": ex}


@pytest.mark.parametrize(
    "rows, words",
    [
        # probe rows beside an exact one (two reports merged): named, with the probes' error
        (
            [
                _ratio_row("blocks.0.hook_resid_pre", "jackknife", stderr_probes=0.01),
                _ratio_row("blocks.1.hook_resid_pre", "exact"),
            ],
            ["bias-corrected where estimated with probes, exact elsewhere", "errors over the probes only"],
        ),
        # a plug-in ratio (a HookAGOP built without the correction) with text groups
        (
            [_ratio_row("blocks.0.hook_resid_pre", "plugin", stderr_probes=0.01, n_text_groups=4)],
            ["plug-in ratio of the probe estimate, biased upwards", "errors over the text and the probes"],
        ),
        ([_ratio_row("blocks.0.hook_resid_pre", "exact")], ["exact AGOP"]),
    ],
)
def test_aofe_ratio_reading_names_estimator_and_error(rows, words):
    line = interaction_reading.read_interaction(tg.GeometryReport.from_rows(rows))[0]
    assert all(w in line for w in words), line
    if words == ["exact AGOP"]:
        assert "errors over" not in line
