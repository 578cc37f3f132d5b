"""Property-based suite (hypothesis) over the public functions.

Random shapes, dtypes (fp16, bf16, fp32, fp64), NaN/inf, zero rows, tiny N, huge k, wrong
devices (``meta`` tensors stand in for a device the data is not on; this machine has no GPU):
each call either returns a finite, documented answer that matches a slow reference written here,
or raises ``ValueError`` / ``TypeError``. A NaN or inf result is accepted only where the function
documents it **and** warns (``CapacityWarning``). Model-facing calls never leave a hook on the
model, whatever fails.

Budgets: ``max_examples`` is small (CI runs on 2 cores); ``derandomize=True`` makes every run try
the same cases, so a failure in CI reproduces locally.
"""

import math
import warnings

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tl_geometry as tg
from tests import helpers as H
from tl_geometry import capture

FAST = settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
OK_ERRORS = (ValueError, TypeError)


def _finite(x) -> bool:
    if isinstance(x, torch.Tensor):
        return bool(torch.isfinite(x).all())
    return math.isfinite(float(x))


# ----------------------------------------------------------------------------- strategies
@st.composite
def matrices(draw, min_rows=0, max_rows=10, min_cols=1, max_cols=6, allow_bad=True):
    """(tensor, kind): a random (n, d) matrix in a random dtype, sometimes with zero rows or NaN/inf."""
    n = draw(st.integers(min_rows, max_rows))
    d = draw(st.integers(min_cols, max_cols))
    dtype = draw(st.sampled_from(DTYPES))
    mag = st.floats(0.05, 20.0)
    vals = draw(st.lists(st.tuples(st.booleans(), mag), min_size=n * d, max_size=n * d))
    x = torch.tensor([(1 if s else -1) * m for s, m in vals], dtype=torch.float64).reshape(n, d)
    if n and draw(st.booleans()):  # zero some rows
        rows = draw(st.lists(st.integers(0, n - 1), max_size=n))
        x[rows] = 0.0
    kind = "clean"
    if allow_bad and n and draw(st.integers(0, 4)) == 0:
        i, j = draw(st.integers(0, n - 1)), draw(st.integers(0, d - 1))
        x[i, j] = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
        kind = "nonfinite"
    return x.to(dtype), kind


# ----------------------------------------------------------------------------- capacity family
def _ref_similarity(x: torch.Tensor):
    """Slow reference: all ordered pairs of unit rows, population mean/std, ε = μ + 2σ."""
    x = x.double()
    keep = x.norm(dim=1) > 0
    u = x[keep] / x[keep].norm(dim=1, keepdim=True)
    n = u.shape[0]
    cos = [float(u[i] @ u[j]) for i in range(n) for j in range(n) if i != j]
    mean = sum(cos) / len(cos)
    var = sum((c - mean) ** 2 for c in cos) / len(cos)
    return mean, math.sqrt(max(var, 0.0)), int((~keep).sum())


@FAST
@given(matrices())
def test_similarity_stats(mk):
    x, kind = mk
    n_nonzero = int((x.double().norm(dim=1) > 0).sum()) if kind == "clean" else None
    if kind == "nonfinite":
        with pytest.raises(ValueError, match="NaN or inf"):
            tg.similarity_stats(x, progress=False)
        return
    if n_nonzero < 2:
        with pytest.raises(ValueError):
            tg.similarity_stats(x, progress=False)
        return
    s = tg.similarity_stats(x, progress=False)
    mean, std, dropped = _ref_similarity(x)
    assert all(_finite(v) for v in (s.mean, s.std, s.epsilon))
    assert s.n_dropped == dropped and s.n_vectors == n_nonzero and s.d == x.shape[1]
    tol = 1e-6 if x.dtype in (torch.float32, torch.float64) else 1e-3  # ours upcasts; ref sees the same rounded inputs
    assert s.mean == pytest.approx(mean, abs=tol)
    assert s.std == pytest.approx(std, abs=max(tol, 1e-4 if x.dtype == torch.float32 else tol))
    assert s.epsilon == pytest.approx(s.mean + 2 * s.std, abs=1e-9)
    assert s.model_class in ("class1", "class2", "boundary")


def test_similarity_stats_bad_types():
    with pytest.raises(TypeError, match="floating point"):
        tg.similarity_stats(torch.ones(3, 2, dtype=torch.int64), progress=False)
    with pytest.raises(TypeError, match="torch tensor or numpy array"):
        tg.similarity_stats([[1.0, 0.0], [0.0, 1.0]], progress=False)
    with pytest.raises(ValueError, match="expected 2-D"):
        tg.similarity_stats(torch.ones(3), progress=False)


def test_similarity_stats_empty_names_the_problem():
    with pytest.raises(ValueError, match="need at least 2 non-zero rows"):
        tg.similarity_stats(torch.zeros(0, 3), progress=False)


FORMS = ["jl", "jl_random", "adjusted", "full"]


@FAST
@given(d=st.integers(1, 10**7), eps=st.one_of(st.floats(-0.5, 1.5), st.just(math.nan)), form=st.sampled_from(FORMS))
def test_capacity_is_finite_or_warned(d, eps, form):
    if not (0 < eps < 1) or math.isnan(eps):
        with pytest.raises(ValueError, match="eps must lie in"):
            tg.capacity(d, eps, form=form)
        return
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = float(tg.capacity(d, eps, form=form))
    assert not math.isnan(k) and k > 0
    if math.isinf(k):  # overflow is documented and warned about, with a log10 alternative
        assert any("overflows" in str(x.message) for x in w)
        assert math.isfinite(float(tg.log10_capacity(d, eps, form=form)))
    else:
        raw = 10 ** float(tg.log10_capacity(d, eps, form=form))
        if form == "full":  # the full form rounds up: k = ceil(raw)
            assert raw * (1 - 1e-9) <= k < raw + 1 + 1e-9 * raw
        else:
            assert k == pytest.approx(raw, rel=1e-6)


@FAST
@given(d=st.integers(2, 4096), eps=st.floats(0.01, 0.6), form=st.sampled_from(["jl", "jl_random", "adjusted"]))
def test_capacity_epsilon_inverts_capacity(d, eps, form):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = float(tg.capacity(d, eps, form=form))
        assume(math.isfinite(k) and k > (d if form == "adjusted" else 1) * (1 + 1e-9))
        back = float(tg.capacity_epsilon(k, d, form=form))
    assert back == pytest.approx(eps, rel=1e-6)


@FAST
@given(k=st.floats(-5, 1e12, allow_nan=False), d=st.integers(-3, 5000), form=st.sampled_from(FORMS))
def test_capacity_epsilon_finite_nan_warned_or_error(k, d, form):
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            e = float(tg.capacity_epsilon(k, d, form=form))
    except OK_ERRORS as exc:
        assert str(exc)
        assert k < 1 or d <= 0
        return
    if math.isnan(e):
        assert any("undefined" in str(x.message) for x in w)  # documented: below="nan", warned
    else:
        assert e >= 0


# ----------------------------------------------------------------------------- pga family
@FAST
@given(mk=matrices(min_rows=1, max_rows=12, min_cols=1, max_cols=8), k=st.integers(-1, 12))
def test_readout_basis(mk, k):
    W, kind = mk
    d, v = W.shape
    if kind == "nonfinite" or not (1 <= k < d and k <= v):
        with pytest.raises(ValueError):
            tg.readout_basis(W, k)
        return
    assume(int(torch.linalg.matrix_rank(W.double())) >= k)
    V = tg.readout_basis(W, k)
    assert V.shape == (d, k) and _finite(V)
    assert torch.allclose(V.double().T @ V.double(), torch.eye(k, dtype=torch.float64), atol=1e-5)


@FAST
@given(
    mk=matrices(min_rows=0, max_rows=12, min_cols=2, max_cols=6),
    k=st.integers(1, 8),
    n_null=st.integers(0, 5),
    ccr=st.integers(0, 2),
)
def test_pga_score_finite_or_clear_error(mk, k, n_null, ccr):
    Hm, kind = mk
    d = Hm.shape[1]
    Q = torch.linalg.qr(torch.randn(d, min(k, d), generator=torch.Generator().manual_seed(0), dtype=torch.float64))[0]
    try:
        s = tg.pga_score(Hm, Q, n_null=n_null, ccr=ccr, seed=0)
    except OK_ERRORS as exc:
        assert str(exc)
        return
    assert kind == "clean" and 2 <= n_null and k < d and Hm.shape[0] >= 3
    assert all(_finite(v) for v in (s.rho_read, s.null_mean, s.null_std, s.z))
    assert -1 - 1e-9 <= s.rho_read <= 1 + 1e-9
    assert s.z == pytest.approx((s.rho_read - s.null_mean) / s.null_std, rel=1e-6, abs=1e-9)


@FAST
@given(mk=matrices(min_rows=0, max_rows=12, min_cols=1, max_cols=6))
def test_spectral_metrics_finite_or_clear_error(mk):
    Hm, kind = mk
    try:
        s = tg.spectral_metrics(Hm)
    except OK_ERRORS as exc:
        assert str(exc)
        return
    assert kind == "clean"
    d = Hm.shape[1]
    for v in (s.rankme, s.isotropy, s.condition_number):
        assert _finite(v)
    assert 1 - 1e-6 <= s.rankme <= d + 1e-6
    assert 0 < s.isotropy <= 1 + 1e-6
    assert s.condition_number >= 1 - 1e-9
    assert s.alpha_req == s.alpha_req or s.n_kept < 2  # alpha needs two kept eigenvalues


# ----------------------------------------------------------------------------- interaction family
def _ref_aofe(G: torch.Tensor):
    G = G.double()
    S = (G + G.T) / 2
    n = S.shape[0]
    fro = sum(float(S[i, j]) ** 2 for i in range(n) for j in range(n))
    diag = sum(float(S[i, i]) ** 2 for i in range(n))
    return fro - diag, (fro - diag) / fro


@FAST
@given(
    n=st.integers(0, 6),
    m=st.integers(0, 6),
    dtype=st.sampled_from(DTYPES),
    seed=st.integers(0, 2**16),
    bad=st.sampled_from(["none", "none", "none", "nan", "zero"]),
)
def test_aofe(n, m, dtype, seed, bad):
    G = torch.randn(n, m, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)
    if bad == "nan" and G.numel():
        G[0, 0] = math.nan
    if bad == "zero":
        G.zero_()
    try:
        r = tg.aofe(G)
    except OK_ERRORS as exc:
        assert str(exc)
        assert n != m or n < 2 or bad in ("nan", "zero")
        return
    a, ratio = _ref_aofe(G)
    assert _finite(r.aofe) and _finite(r.ratio)
    assert float(r.aofe) == pytest.approx(a, rel=1e-9, abs=1e-9)
    assert float(r.ratio) == pytest.approx(ratio, rel=1e-9, abs=1e-12)
    assert -1e-12 <= float(r.ratio) <= 1 + 1e-12


@FAST
@given(mk=matrices(min_rows=0, max_rows=8, min_cols=1, max_cols=5))
def test_wtw_aofe(mk):
    W, kind = mk
    try:
        r = tg.wtw_aofe(W)
    except OK_ERRORS as exc:
        assert str(exc)
        return
    assert kind == "clean" and _finite(r.ratio)
    a, ratio = _ref_aofe(W.double().T @ W.double())
    assert float(r.ratio) == pytest.approx(ratio, rel=1e-6, abs=1e-9)


@FAST
@given(n_layers=st.integers(-2, 200), d_model=st.integers(-2, 10**5))
def test_depth_width_ratio(n_layers, d_model):
    cfg = {"n_layers": n_layers, "d_model": d_model}
    if n_layers < 1 or d_model < 1:
        with pytest.raises(ValueError, match=">= 1"):
            tg.depth_width_ratio(cfg)
        return
    assert tg.depth_width_ratio(cfg) == n_layers / d_model


# ----------------------------------------------------------------------------- wrong devices
META_CALLS = {
    "similarity_stats": lambda t: tg.similarity_stats(t, progress=False),
    "readout_basis": lambda t: tg.readout_basis(t, 2),
    "spectral_metrics": lambda t: tg.spectral_metrics(t),
    "aofe": lambda t: tg.aofe(t[:, :6] if t.shape[1] >= 6 else t),
    "pga_score": lambda t: tg.pga_score(t, torch.linalg.qr(torch.randn(6, 2))[0], n_null=3),
}


@pytest.mark.parametrize("name", sorted(META_CALLS))
def test_wrong_device_is_a_clear_error(name):
    t = torch.randn(6, 6).to("meta")
    with pytest.raises(OK_ERRORS, match="device|meta"):
        META_CALLS[name](t)


# ----------------------------------------------------------------------------- capture
def _n_hooks(model) -> int:
    """Hooks on the model's hook points (what tl_geometry adds), counted with PyTorch's own tables."""
    return sum(
        len(hp._forward_hooks) + len(hp._forward_pre_hooks) + len(hp._backward_hooks)
        for hp in {id(h): h for h in model.hook_dict.values()}.values()
    )


def _models():
    out = [("tiny", H.portable_tiny_model(2, 16))]
    try:
        from transformer_lens.model_bridge import TransformerBridge  # noqa: F401

        if H.has_hooked_transformer():  # on TL 4 tiny_model already is a bridge
            out.append(("bridge", H.portable_tiny_model(2, 16, bridge=True)))
    except ImportError:
        pass
    return out


MODELS = None


def models():
    global MODELS
    if MODELS is None:
        MODELS = _models()
        for _, m in MODELS:  # one forward first: a bridge sets up its own permanent hooks lazily
            with torch.inference_mode():
                m(torch.zeros(1, 4, dtype=torch.long))
    return MODELS


class Boom(Exception):
    pass


@SLOW
@given(which=st.integers(0, 1), fail_at=st.integers(0, 5), n_seqs=st.integers(1, 4), seq_len=st.integers(2, 10))
def test_hooks_never_left_after_consumer_error(which, fail_at, n_seqs, seq_len):
    name, model = models()[which % len(models())]
    before = _n_hooks(model)
    tokens = torch.randint(0, model.cfg.d_vocab, (n_seqs, seq_len), generator=torch.Generator().manual_seed(fail_at))
    hooks = capture.resid_hooks(model, "post")
    calls = {"n": 0}

    def consumer(h, acts):
        calls["n"] += 1
        if calls["n"] > fail_at:
            raise Boom("consumer failed")

    try:
        capture.run(model, tokens, hooks, consumer, batch_size=1, progress=False)
    except Boom:
        pass
    assert _n_hooks(model) == before


BAD_METRIC_CALLS = [
    ("pga", {"k": 10**6}),
    ("pga", {"n_null": 1}),
    ("epsilon_activations", {"max_points": 0}),
    ("spectral", {"hooks": ["blocks.99.hook_resid_post"]}),
    ("agop", {"n_probes": 1}),
    ("agop", {"hooks": ["no_such_hook"]}),
]


@SLOW
@given(which=st.integers(0, 1), case=st.sampled_from(BAD_METRIC_CALLS))
def test_registered_metrics_bad_options_raise_and_leave_no_hook(which, case):
    name, model = models()[which % len(models())]
    metric, opts = case
    assume(metric in tg.list_metrics())
    before = _n_hooks(model)
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 8), generator=torch.Generator().manual_seed(0))
    opts = dict(opts)
    hooks = opts.pop("hooks", None)
    with pytest.raises((ValueError, TypeError)) as info:
        tg.get_metric(metric)(model, tokens, hooks=hooks, progress=False, **opts)
    assert str(info.value)
    assert _n_hooks(model) == before


@SLOW
@given(
    which=st.integers(0, 1),
    max_points=st.integers(1, 80),
    n_seqs=st.integers(1, 5),
    seq_len=st.integers(2, 12),
    seed=st.integers(0, 1000),
)
def test_collect_respects_max_points(which, max_points, n_seqs, seq_len, seed):
    name, model = models()[which % len(models())]
    tokens = torch.randint(0, model.cfg.d_vocab, (n_seqs, seq_len), generator=torch.Generator().manual_seed(seed))
    hooks = capture.resid_hooks(model, "post")[:1]
    c = capture.collect(model, tokens, hooks, max_points=max_points, seed=seed, batch_size=2, progress=False)
    n_valid = n_seqs * seq_len  # no tokenizer: no BOS to drop
    assert c.n_points == min(max_points, n_valid)
    assert c.acts[hooks[0]].shape == (c.n_points, model.cfg.d_model)
    assert len({tuple(p) for p in c.positions.tolist()}) == c.n_points
    again = capture.collect(model, tokens, hooks, max_points=max_points, seed=seed, batch_size=3, progress=False)
    assert torch.equal(c.positions, again.positions)
    assert torch.allclose(c.acts[hooks[0]], again.acts[hooks[0]], atol=1e-5)


# ----------------------------------------------------------------------------- packing, bases
def _ref_max_abs_cos(x: torch.Tensor) -> float:
    u = x.double() / x.double().norm(dim=1, keepdim=True)
    n = u.shape[0]
    return max(abs(float(u[i] @ u[j])) for i in range(n) for j in range(n) if i != j)


@FAST
@given(k=st.integers(-1, 7), d=st.integers(-1, 5), trials=st.integers(0, 3), seed=st.integers(0, 100))
def test_random_packing(k, d, trials, seed):
    from tl_geometry.families.capacity import packing

    if k < 2 or d < 1 or trials < 1:
        with pytest.raises(ValueError, match="must be"):
            packing.random_packing(k, d, trials=trials, seed=seed, device="cpu")
        return
    v = packing.random_packing(k, d, trials=trials, seed=seed, device="cpu")
    # the same draws by hand: min over trials of the max |cos|
    gen = torch.Generator().manual_seed(seed)
    ref = min(_ref_max_abs_cos(torch.randn(k, d, generator=gen)) for _ in range(trials))
    assert math.isfinite(v) and 0 <= v <= 1 + 1e-6
    assert v == pytest.approx(ref, abs=1e-5)
    if d == 1:
        assert v == pytest.approx(1.0, abs=1e-6)  # on a line every pair is (anti)parallel


@FAST
@given(d=st.integers(-1, 8), k=st.integers(-1, 9), n=st.integers(1, 4), seed=st.integers(0, 100))
def test_haar_bases_orthonormal_and_seeded(d, k, n, seed):
    if not (1 <= k <= d):
        with pytest.raises(ValueError, match="need 1 <= k <= d"):
            tg.haar_bases(d, k, n, seed=seed)
        return
    Q = tg.haar_bases(d, k, n, seed=seed)
    assert Q.shape == (n, d, k) and _finite(Q)
    eye = torch.eye(k, dtype=Q.dtype).expand(n, k, k)
    assert torch.allclose(Q.transpose(1, 2) @ Q, eye, atol=1e-10)
    assert torch.equal(Q, tg.haar_bases(d, k, n, seed=seed))


@FAST
@given(mk=matrices(min_rows=0, max_rows=10, min_cols=2, max_cols=6), k=st.integers(1, 5))
def test_pc1_overlap_finite_or_clear_error(mk, k):
    Hm, kind = mk
    d = Hm.shape[1]
    V = torch.linalg.qr(torch.randn(d, min(k, d), generator=torch.Generator().manual_seed(1), dtype=torch.float64))[0]
    try:
        r = tg.pc1_overlap(Hm, V)
    except OK_ERRORS as exc:
        assert str(exc)
        return
    assert kind == "clean"
    assert 0 - 1e-9 <= r.overlap <= 1 + 1e-9 and r.expected == pytest.approx(V.shape[1] / d)
    assert _finite(r.overlap) and _finite(r.explained_variance)
