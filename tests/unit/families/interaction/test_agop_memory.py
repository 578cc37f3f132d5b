"""AGOP over the text and under a memory budget: the text jackknife, its coverage over fresh draws,
hook chunks, the batch from ``memory_mb``, the one-sequence case and the working-set formula."""

import dataclasses
import math
import warnings

import pytest
import torch

import tl_geometry as tg
from tests.helpers import make_tiny_model, run_with_leaf
from tl_geometry.families.interaction import agop, agop_report
from tl_geometry.families.interaction.memory import (
    GRAPH_FLOATS,
    agop_graph_bytes,
    agop_plan,
    agop_working_set_bytes,
    hook_chunks,
)
from tl_geometry.metrics.interaction import ONE_TEXT_GROUP_NOTE, agop_state_bytes, aofe

pytestmark = pytest.mark.usefixtures("one_thread")

HOOKS = ["blocks.1.hook_resid_pre", "blocks.2.hook_resid_pre"]


def _tokens(n_seq, seq_len=16, seed=0):
    return torch.randint(0, 101, (n_seq, seq_len), generator=torch.Generator().manual_seed(seed))


def _scal(G):
    a = aofe(G)
    return [float(a.aofe), float(a.ratio), float(torch.trace(G))]


def _jk(reps):
    t = torch.tensor(reps, dtype=torch.float64)
    G = t.shape[0]
    return ((G - 1) / G * ((t - t.mean(0)) ** 2).sum(0)).sqrt().tolist()


# ----------------------------------------------------------------------------- the text jackknife
def _per_sequence_grams(model, tok, h, P, seed):
    """Slow reference: per sequence b, Σ_p g gᵀ with g = ∂(u_{b,p}·F_b)/∂a by autograd on a leaf at
    h, the logit probes u drawn from sequence b's own generator (tg.capture.probe_seed), probe by probe."""
    out = []
    for b in range(tok.shape[0]):
        gen = torch.Generator().manual_seed(tg.capture.probe_seed(seed, b))
        Mb = torch.zeros(model.cfg.d_model, model.cfg.d_model, dtype=torch.float64)
        for _ in range(P):
            logits, leaf = run_with_leaf(model, tok[b : b + 1], h)
            u = torch.randn(logits.shape[1:], generator=gen)[None]
            (g,) = torch.autograd.grad((u * logits).sum(), leaf)
            Mb += g[0].double().T @ g[0].double()
        out.append(Mb)
    return out


@pytest.mark.needs_hooked
def test_text_jackknife_equals_a_slow_leave_one_sequence_out_reference():
    """G without sequence b from the other sequences' sums; the jackknife of AOFE, ratio and trace
    over the 5 leave-one-out estimates; the rows' error is it and the probe part in quadrature."""
    model = make_tiny_model()
    tok, P, seed, h = _tokens(5), 4, 3, HOOKS[1]
    res = agop(model, tok, hooks=[h], n_probes=P, seed=seed, probes="logits", text_groups=5, progress=False)
    s = res[h]
    M, n = _per_sequence_grams(model, tok, h, P, seed), tok.shape[1]
    total = sum(M)
    torch.testing.assert_close(res.matrices[h].double(), total / (P * n * 5), rtol=1e-4, atol=1e-7)
    want = _jk([_scal((total - Mb) / (P * n * 4)) for Mb in M])
    got = [s.aofe_stderr_text, s.ratio_stderr_text, s.trace_stderr_text]
    assert got == pytest.approx(want, rel=1e-4)
    assert s.n_text_groups == 5 and s.stderr_note == ""
    probes = (s.aofe_stderr_probes, s.ratio_stderr_probes, s.trace_stderr_probes)
    combined = [math.hypot(a, b) for a, b in zip(got, probes)]
    assert [s.aofe_stderr, s.ratio_stderr, s.trace_stderr] == pytest.approx(combined, rel=1e-12)
    assert min(probes) > 0


@pytest.mark.needs_hooked
def test_text_groups_hold_whole_sequences_and_batches_change_nothing():
    """6 sequences in 3 text groups of 2: the same numbers whatever the batch (probes are drawn per
    sequence), and the text jackknife is the one that leaves out each pair of sequences."""
    model = make_tiny_model()
    tok, P, seed, h = _tokens(6), 4, 1, HOOKS[0]
    kw = dict(hooks=HOOKS, n_probes=P, seed=seed, text_groups=3, probes="logits", progress=False)
    one, four = agop(model, tok, batch_size=1, **kw), agop(model, tok, batch_size=4, **kw)
    assert one.provenance["agop_batch_size"] == 1 and four.provenance["agop_batch_size"] == 4
    for hk in HOOKS:
        torch.testing.assert_close(one.matrices[hk], four.matrices[hk], rtol=1e-5, atol=1e-7)
        a, b = one[hk].to_dict(), four[hk].to_dict()
        for k in a:
            assert a[k] == (b[k] if isinstance(b[k], str) else pytest.approx(b[k], rel=1e-4, abs=1e-9)), k
        assert one[hk].n_text_groups == 3
    M, n = _per_sequence_grams(model, tok, h, P, seed), tok.shape[1]
    total = sum(M)
    want = _jk([_scal((total - M[2 * j] - M[2 * j + 1]) / (P * n * 4)) for j in range(3)])
    got = [four[h].aofe_stderr_text, four[h].ratio_stderr_text, four[h].trace_stderr_text]
    assert got == pytest.approx(want, rel=1e-4)


@pytest.mark.needs_hooked
def test_combined_error_covers_fresh_text_and_the_probe_error_does_not():
    """A model of text: 60 independent draws of 8 random-token sequences (fresh probes each). Over 30
    independent pairs, |x₁ − x₂| < 1.96 √(se₁² + se₂²) for AOFE, ratio and trace at two hooks: the
    combined error covers ≥ 90 % of the 180 pairs and its standardized spread is calibrated; the
    probe-only error (the error for fixed tokens) covers far fewer (measured: 0.93 against 0.55)."""
    model = make_tiny_model()
    vals: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for draw in range(60):
        res = agop(model, _tokens(8, seed=1000 + draw), hooks=HOOKS, n_probes=8, seed=draw, progress=False)
        for h in HOOKS:
            s = res[h]
            for name, v, c, p in (
                ("aofe", s.aofe, s.aofe_stderr, s.aofe_stderr_probes),
                ("ratio", s.ratio_debiased, s.ratio_stderr, s.ratio_stderr_probes),
                ("trace", s.trace, s.trace_stderr, s.trace_stderr_probes),
            ):
                vals.setdefault((h, name), []).append((v, c, p))
    cover = {"combined": [], "probes": []}
    for key, rows in vals.items():
        t = torch.tensor(rows, dtype=torch.float64)
        d = t[0::2, 0] - t[1::2, 0]
        for i, which in ((1, "combined"), (2, "probes")):
            se = (t[0::2, i] ** 2 + t[1::2, i] ** 2).sqrt()
            cover[which] += (d.abs() < 1.96 * se).tolist()
        sd = float((d / (t[0::2, 1] ** 2 + t[1::2, 1] ** 2).sqrt()).std())
        assert 0.6 <= sd <= 1.4, (key, sd)
    combined = sum(cover["combined"]) / len(cover["combined"])
    probes = sum(cover["probes"]) / len(cover["probes"])
    assert combined >= 0.90, combined
    assert probes < 0.80, probes


@pytest.mark.needs_hooked
def test_one_sequence_has_no_error_over_the_text():
    model = make_tiny_model()
    res = agop(model, _tokens(1), hooks=HOOKS[:1], n_probes=4, progress=False)
    s = res[HOOKS[0]]
    assert s.n_text_groups == 1 and s.stderr_note == ONE_TEXT_GROUP_NOTE
    assert math.isnan(s.ratio_stderr) and math.isnan(s.ratio_stderr_text) and s.ratio_stderr_probes > 0
    rows = agop_report(res).rows
    for r in rows:
        assert math.isnan(r.extras["stderr"]) and r.extras["stderr_probes"] > 0
        assert r.extras["stderr_note"] == ONE_TEXT_GROUP_NOTE
        assert r.extras["stderr_method"].startswith("undefined over the text (one sequence)")
    # text_groups=None: the probe error alone, said to be for these tokens only
    alone = agop_report(agop(model, _tokens(3), hooks=HOOKS[:1], n_probes=4, text_groups=None, progress=False))
    for r in alone.rows:
        assert r.extras["stderr"] == r.extras["stderr_probes"] and math.isnan(r.extras["stderr_text"])
        assert r.extras["stderr_method"] == "jackknife over 4 probe groups (these tokens only: no error over the text)"
        assert r.extras["n_text_groups"] == 0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(text_groups=1), "text_groups must be None"),
        (dict(text_groups=True), "text_groups must be None"),
        (dict(memory_mb=0), "memory_mb must be a positive number"),
        (dict(state_mb=float("nan")), "state_mb must be a positive number"),
        (dict(batch_size=0), "batch_size must be None"),
    ],
)
def test_agop_budget_bad_input(tiny_model, tiny_tokens, kwargs, match):
    with pytest.raises(ValueError, match=match):
        agop(tiny_model, tiny_tokens[:2], hooks=HOOKS, n_probes=2, progress=False, **kwargs)


def test_accumulator_text_group_bad_input():
    acc = tg.AGOPAccumulator(4, 2, text_groups=3)
    g = torch.randn(5, 3)
    with pytest.raises(ValueError, match=r"text_group must be an integer in \[0, 3\)"):
        acc.update(g, probe=0, key="h")
    with pytest.raises(ValueError, match=r"text_group must be an integer in \[0, 3\)"):
        acc.update(g, probe=0, key="h", text_group=3)
    with pytest.raises(ValueError, match="has no text groups"):
        tg.AGOPAccumulator(4, 2).update(g, probe=0, key="h", text_group=0)
    with pytest.raises(ValueError, match="text_groups must be None"):
        tg.AGOPAccumulator(4, 2, text_groups=0)


# ----------------------------------------------------------------------------- memory
@pytest.mark.needs_hooked
def test_hook_chunks_give_the_same_numbers():
    """state_mb so small that every hook is its own chunk (4 passes over the text): the same
    probes, so the same AGOPs and statistics as one chunk, to float32 rounding."""
    model = make_tiny_model()
    tok = _tokens(4)
    hooks = ["blocks.0.hook_resid_pre", *HOOKS, "blocks.2.ln2.hook_normalized"]
    kw = dict(hooks=hooks, n_probes=4, seed=2, progress=False)
    whole = agop(model, tok, **kw)
    tiny = agop(model, tok, state_mb=agop_state_bytes(32, 1) / 2**20, **kw)
    assert whole.provenance["agop_hook_chunks"] == 1 and tiny.provenance["agop_hook_chunks"] == 4
    for h in hooks:
        torch.testing.assert_close(whole.matrices[h], tiny.matrices[h], rtol=1e-6, atol=1e-8)
        a, b = whole[h].to_dict(), tiny[h].to_dict()
        for k in a:
            assert a[k] == (b[k] if isinstance(b[k], str) else pytest.approx(b[k], rel=1e-5, abs=1e-12)), (h, k)
    lean = agop(model, tok, keep_matrices=False, **kw)
    assert lean.matrices == {} and lean.stats[hooks[0]].ratio == pytest.approx(whole.stats[hooks[0]].ratio)


def test_hook_chunks_pack_consecutive_hooks_under_the_budget():
    per = agop_state_bytes(10, 1) / 2**20
    assert hook_chunks([10] * 5, 2 * per) == [[0, 1], [2, 3], [4]]
    assert hook_chunks([10] * 3, 100 * per) == [[0, 1, 2]]
    assert hook_chunks([10, 40, 10], 2 * per) == [[0], [1], [2]]  # a hook over the budget runs alone


def test_plan_known_answers_and_the_working_set():
    shape = dict(n_layers=30, d_mlp=1536, n_heads=9, n_kv_heads=3, seq_len=128, d_vocab=49152)
    one = agop_graph_bytes(d_model=576, **shape)
    per_token = 30 * (16 * 576 + 8 * 1536 + 3 * 9 * 128) + 49152
    assert one == 4 * (576 * 1536 + 128 * per_token) + GRAPH_FLOATS["fixed_bytes"]  # one weight's copy at a time
    kept = agop_graph_bytes(d_model=576, **shape, weights_by_reference=False)
    copies = 30 * (576 * 64 * (2 * 9 + 2 * 3) + 3 * 576 * 1536)  # Q, O, K, V and the gated MLP's 3
    assert kept == 4 * (copies + 128 * per_token) + GRAPH_FLOATS["fixed_bytes"]
    assert agop_graph_bytes(d_model=576, **shape, batch=3) - one == 2 * 4 * 128 * per_token
    plan = agop_plan(d_model=576, n_hooks=30, n_seqs=8, **shape)  # SmolLM2-135M, report settings
    assert plan.batch_size == 1 and plan.n_chunks == 1 and plan.over_budget == ""  # one sequence fits 512 MiB
    assert plan.state_bytes == 16 * (576 * 577 // 2) * 4 * 30  # packed upper triangles of 16 groups' sums
    assert plan.working_set_bytes == plan.graph_bytes + plan.state_bytes + 4 * 576**2 * 8
    assert agop_working_set_bytes(576, 30, n_seqs=8, **shape) == plan.working_set_bytes
    wide = agop_plan(d_model=1536, n_hooks=60, **shape)  # a 1B-class width: the sums are bounded
    assert wide.state_bytes <= 1024 * 2**20 and wide.hooks_per_chunk == 14 and wide.n_chunks == 5
    assert agop_state_bytes(1536, 60) / 2**30 == pytest.approx(4.22, abs=0.01)  # what one chunk would hold
    roomy = agop_plan(d_model=64, n_hooks=4, memory_mb=4096, n_seqs=8, **{**shape, "d_vocab": 500})
    assert roomy.batch_size == 8 and roomy.over_budget == ""
    with pytest.raises(ValueError, match="memory_mb must be a positive number"):
        agop_plan(d_model=64, n_hooks=4, memory_mb=-1, **shape)
    with pytest.raises(ValueError, match="n_hooks"):
        agop_plan(d_model=64, n_hooks=0, **shape)


def _saved_bytes(model, tokens, hooks, by_reference=False):
    """Bytes autograd holds for backward after one AGOP forward (parameters and buffers excluded):
    the tensors saved for backward that are still alive while the logits are (a graph cut off below
    the lowest hook is freed during the forward). ``by_reference``: the weight copies go through
    the probe passes' matcher first (`tl_geometry.capture.saved_weights`), as in `agop`."""
    import gc
    import weakref

    from tl_geometry.capture import saved_weights

    own = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    refs = []
    matcher = saved_weights._Matcher(model, saved_weights.MIN_NUMEL) if by_reference else None

    def pack(t):
        r = matcher.pack(t) if matcher is not None else t
        if isinstance(r, torch.Tensor) and r.untyped_storage().data_ptr() not in own:
            refs.append(weakref.ref(r))
        return r

    def unpack(r):
        return matcher.unpack(r) if matcher is not None else r

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack), tg.capture.frozen_parameters(model):
        with (
            tg.capture.grad_capture(model, [*hooks, "unembed.hook_in"], cut=True, last="unembed.hook_in"),
            torch.enable_grad(),
        ):
            logits = model(tokens)
    gc.collect()
    alive = {}
    for r in refs:
        t = r()
        if t is not None:
            alive[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    del logits
    return sum(alive.values())


@pytest.mark.needs_hooked
@pytest.mark.parametrize(
    "shape",
    [
        dict(act_fn="gelu", normalization_type="LN"),
        dict(
            act_fn="silu",
            gated_mlp=True,
            normalization_type="RMS",
            positional_embedding_type="rotary",
            n_key_value_heads=2,
            d_model=64,
            d_head=16,
            d_mlp=128,
        ),
    ],
)
@pytest.mark.parametrize("by_reference", [True, False])
def test_graph_bound_covers_what_autograd_saves(shape, by_reference):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make_tiny_model(**shape)
    for seq_len in (8, 48):
        tok = torch.randint(0, 101, (2, seq_len), generator=torch.Generator().manual_seed(0))
        saved = _saved_bytes(model, tok, tg.capture.resid_hooks(model, "pre"), by_reference)
        c = model.cfg
        bound = agop_graph_bytes(
            n_layers=c.n_layers,
            d_model=c.d_model,
            d_mlp=c.d_mlp,
            n_heads=c.n_heads,
            seq_len=seq_len,
            d_vocab=c.d_vocab,
            batch=2,
            weights_by_reference=by_reference,
        )
        assert saved <= bound, (seq_len, saved, bound)


@pytest.mark.needs_hooked
def test_the_cut_keeps_no_graph_below_the_lowest_hook():
    model = make_tiny_model()
    tok = _tokens(2)
    low = _saved_bytes(model, tok, ["blocks.0.hook_resid_pre"])
    high = _saved_bytes(model, tok, ["blocks.2.hook_resid_pre"])
    assert high < low  # a chunk of late hooks holds the graph of the layers above it only


@pytest.mark.needs_hooked
def test_batch_comes_from_the_budget_and_is_recorded():
    model = make_tiny_model()
    tok = _tokens(6)
    big = agop(model, tok, hooks=HOOKS, n_probes=2, progress=False)
    assert big.provenance["agop_batch_size"] == 6 and big.provenance["agop_memory_mb"] == 512.0
    one_mib = agop(model, tok, hooks=HOOKS, n_probes=2, progress=False, memory_mb=4.2)
    assert one_mib.provenance["agop_batch_size"] < 6
    for h in HOOKS:
        assert one_mib[h].ratio == pytest.approx(big[h].ratio, rel=1e-5)
    rep = tg.get_metric("agop")(model, tok, hooks=HOOKS, n_probes=2, progress=False)
    assert rep.provenance["agop_batch_size"] == 6 and rep.provenance["agop_text_groups"] == 6


def test_wtw_aofe_in_row_blocks_equals_the_float64_gram():
    """More rows than one block (ROW_CHUNK): the blocked float64 Gram equals W64ᵀW64 / n."""
    from tl_geometry.metrics.aofe import ROW_CHUNK, wtw_aofe

    W = torch.randn(2 * ROW_CHUNK + 37, 6, generator=torch.Generator().manual_seed(0)) + 0.3
    W64 = W.double()
    want = aofe(W64.T @ W64 / W.shape[0])
    got = wtw_aofe(W)
    assert float(got.ratio) == pytest.approx(float(want.ratio), rel=1e-12)
    assert float(got.aofe) == pytest.approx(float(want.aofe), rel=1e-12)


# ----------------------------------------------------------------------------- probes per backward pass
def test_probe_batch_known_answers():
    """SmolLM2-135M at report settings: one 128-token sequence per pass leaves 512 MiB − its graph
    bound for probes; each one more holds 4 · 128 · (30 · 576 + 16 · 576 + 8 · 1536 + 3 · 9 · 128)
    bytes; 16 probes in passes of even size. A batch of 8 × 128 tokens has PASS_ROWS rows already."""
    from tl_geometry.families.interaction.memory import PASS_ROWS

    shape = dict(n_layers=30, d_mlp=1536, n_heads=9, n_kv_heads=3, seq_len=128, d_vocab=49152)
    plan = agop_plan(d_model=576, n_hooks=30, n_seqs=8, n_probes=16, **shape)
    per = 4 * 128 * (30 * 576 + 16 * 576 + 8 * 1536 + 3 * 9 * 128)
    assert plan.probe_bytes == per
    most = 1 + (512 * 2**20 - plan.graph_bytes) // per  # 6
    assert most == 6 and plan.probe_batch == math.ceil(16 / math.ceil(16 / most)) == 6
    assert plan.working_set_bytes == plan.graph_bytes + 5 * per + plan.state_bytes + 4 * 576**2 * 8
    assert agop_plan(d_model=576, n_hooks=30, n_seqs=8, **shape).probe_batch == 1  # no n_probes: one per pass
    assert agop_plan(d_model=576, n_hooks=30, n_seqs=8, n_probes=16, memory_mb=400, **shape).probe_batch == 1
    assert agop_plan(d_model=576, n_hooks=30, n_seqs=8, n_probes=4, **shape).probe_batch == 4
    small = dict(shape, d_vocab=500, n_layers=2)
    assert agop_plan(d_model=64, n_hooks=2, n_seqs=8, n_probes=16, **small).probe_batch == 1  # 8 × 128 rows
    assert 8 * 128 == PASS_ROWS
    assert agop_plan(d_model=64, n_hooks=2, n_seqs=1, n_probes=16, **small).probe_batch == 8  # 1 × 128 rows
    with pytest.raises(ValueError, match="n_probes"):
        agop_plan(d_model=64, n_hooks=2, n_probes=0, **small)


@pytest.mark.needs_hooked
def test_probes_per_pass_change_nothing(monkeypatch):
    """Readout probes taken 1, 3 or 8 per backward pass (autograd's batched gradients): the same
    draws in the same order, so the same AGOPs and statistics, to float32 rounding; the probe
    batch is recorded. Logit probes always take one per pass."""
    from tl_geometry.capture import backward
    from tl_geometry.families.interaction.memory import agop_plan_for

    model = make_tiny_model()
    tok = _tokens(2, seq_len=12)
    kw = dict(hooks=HOOKS, n_probes=8, seed=4, text_groups=2, progress=False)
    seen = []
    real = backward._probe_vjps

    def spy(outs, xs, **k):
        seen.append(int(outs.shape[0]))
        return real(outs, xs, **k)

    monkeypatch.setattr(backward, "_probe_vjps", spy)
    runs = {}
    for pb in (1, 3, 8):
        monkeypatch.setattr(
            "tl_geometry.families.interaction.agop_plan_for",
            lambda *a, _pb=pb, **k: dataclasses.replace(agop_plan_for(*a, **k), probe_batch=_pb),
        )
        seen.clear()
        runs[pb] = agop(model, tok, **kw)
        assert runs[pb].provenance["agop_probe_batch"] == pb
        passes = [min(pb, 8 - i) for i in range(0, 8, pb)]  # per batch of sequences
        assert seen == passes * math.ceil(tok.shape[0] / runs[pb].provenance["agop_batch_size"])
    for pb in (3, 8):
        for h in HOOKS:
            A, B = runs[1].matrices[h], runs[pb].matrices[h]
            assert float((A - B).abs().max()) <= 1e-5 * float(A.abs().max())  # float32 rounding of the sums
            a, b = runs[1][h].to_dict(), runs[pb][h].to_dict()
            for k in a:
                assert a[k] == (b[k] if isinstance(b[k], str) else pytest.approx(b[k], rel=1e-4, abs=1e-10)), (pb, k)
    seen.clear()
    logits = agop(model, tok, probes="logits", **kw)
    assert logits.provenance["agop_probe_batch"] == 1 and set(seen) == {1}


def test_probe_batch_bad_input(tiny_model, tiny_tokens):
    from tl_geometry.capture import backward

    mask = torch.ones_like(tiny_tokens, dtype=torch.bool)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="probe_batch must be a positive integer"):
            backward.probe_gradients(
                tiny_model, tiny_tokens, HOOKS, mask, lambda *a: None, n_probes=2, seed=0, batch_size=2, probe_batch=bad
            )


@pytest.mark.needs_hooked
def test_a_model_without_batched_backward_falls_back_to_one_probe_per_pass(monkeypatch):
    """Where autograd's batched gradients fail (an op without a batching rule), the pass is drawn
    again probe by probe: the same numbers as one probe per pass from the start."""
    from tl_geometry.families.interaction.memory import agop_plan_for

    model = make_tiny_model()
    tok = _tokens(2, seq_len=12)
    kw = dict(hooks=HOOKS, n_probes=5, seed=6, text_groups=2, progress=False)
    plain = agop(model, tok, **kw)
    real = torch.autograd.grad

    def no_batching(*a, **k):
        if k.get("is_grads_batched"):
            raise RuntimeError("Batching rule not implemented for aten::something")
        return real(*a, **k)

    monkeypatch.setattr(torch.autograd, "grad", no_batching)
    monkeypatch.setattr(
        "tl_geometry.families.interaction.agop_plan_for",
        lambda *a, **k: dataclasses.replace(agop_plan_for(*a, **k), probe_batch=3),
    )
    fell_back = agop(model, tok, **kw)
    for h in HOOKS:
        A, B = plain.matrices[h], fell_back.matrices[h]
        assert float((A - B).abs().max()) <= 1e-6 * float(A.abs().max())
    # the provenance records what the passes took, not what the plan asked for
    assert plain.provenance["agop_probe_batch"] == 1 and fell_back.provenance["agop_probe_batch"] == 1


@pytest.mark.needs_hooked
def test_probes_per_pass_are_off_by_default_and_follow_the_plan_when_on(monkeypatch):
    """BATCH_PROBES False (the default): one probe per pass whatever the plan allows; True: the
    plan's probe_batch (one 12-token sequence a batch, 8 probes: 8 per pass)."""
    from tl_geometry.families.interaction import memory

    model = make_tiny_model()
    tok = _tokens(2, seq_len=12)
    kw = dict(hooks=HOOKS, n_probes=8, seed=4, batch_size=1, progress=False)
    assert memory.BATCH_PROBES is False
    assert agop(model, tok, **kw).provenance["agop_probe_batch"] == 1
    monkeypatch.setattr(memory, "BATCH_PROBES", True)
    assert agop(model, tok, **kw).provenance["agop_probe_batch"] == 8


@pytest.mark.needs_hooked
def test_agop_hands_the_freed_group_sums_back_to_the_os(monkeypatch):
    """Once the group sums are freed the heap is trimmed (one call per agop with the model's own
    layout; copies_as_views adds its own when it moved weights)."""
    from tl_geometry.capture import backward
    from tl_geometry.models import hf_loading

    calls = []
    monkeypatch.setattr(hf_loading, "release_memory", lambda: calls.append(1))
    monkeypatch.setattr(backward, "COPIES_AS_VIEWS", False)
    agop(make_tiny_model(), _tokens(2, seq_len=12), hooks=HOOKS, n_probes=2, progress=False)
    assert calls == [1]


def test_the_declaration_counts_the_unembeddings_second_copy_where_it_exceeds_the_graph():
    """The family's memory declaration: agop's plan, with the graph's share replaced by the
    unembedding (4 · d_vocab · d_model) where that is larger (the layout's restore holds two W_U,
    the sums and no graph); a small vocabulary leaves the plan as it is."""
    from tl_geometry.families.interaction.memory import _shape_keywords, report_working_set_bytes
    from tl_geometry.models import ModelShape

    opts = {"agop": {"n_probes": 16}}
    for vocab in (49152, 262144):  # SmolLM2's vocabulary, Gemma-3's
        shape = ModelShape(
            30, 576, 134_515_008, 2048, "gguf", 28_311_552, vocab, 1536, d_q=576, d_kv=192, gated_mlp=True
        )
        kw = _shape_keywords(shape, 128)
        plan = agop_plan(d_model=576, n_hooks=30, n_seqs=8, n_groups=8, text_groups=8, **kw)
        got = report_working_set_bytes(shape, n_seqs=8, seq_len=128, options=opts)
        unembed = 4 * vocab * 576
        assert got == plan.working_set_bytes + max(0, unembed - plan.graph_bytes)
        assert (got > plan.working_set_bytes) == (vocab == 262144)  # 576 MiB > the graph; 108 MiB < it
