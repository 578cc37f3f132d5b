"""Capacity family: exact similarity statistics, capacity forms, published table, metrics."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import torch

import tl_geometry as tg
from tl_geometry import capture
from tl_geometry.metrics.capacity import SimilarityAccumulator, model_class_of


# ----------------------------------------------------------------------------- references
def reference_stats(x: np.ndarray) -> tuple[float, float, float, list[float]]:
    """Slow and obvious: every ordered pair i != j of non-zero rows, one dot product each."""
    rows = [r / np.linalg.norm(r) for r in np.asarray(x, dtype=np.float64) if np.linalg.norm(r) > 0]
    cos = [float(np.dot(a, b)) for (i, a), (j, b) in itertools.product(enumerate(rows), repeat=2) if i != j]
    mean = sum(cos) / len(cos)
    var = sum((c - mean) ** 2 for c in cos) / len(cos)
    return mean, math.sqrt(var), mean + 2 * math.sqrt(var), cos


def paper_epsilon(x: torch.Tensor) -> float:
    """The paper's algorithm: normalize, full n x n matrix, std_mean of the off-diagonal."""
    u = torch.nn.functional.normalize(x.double(), dim=1)
    s = u @ u.T
    off = s[~torch.eye(len(u), dtype=torch.bool)]
    std, mean = torch.std_mean(off, unbiased=False)
    return float(mean + 2 * std)


def _matrix(n, d, *, shared=0.0, zeros=(), seed=0):
    g = np.random.default_rng(seed)
    x = g.standard_normal((n, d))
    if shared:
        x += shared * g.standard_normal(d)  # a common direction: large positive μ
    for z in zeros:
        x[z] = 0.0
    return x


CASES = [
    dict(n=40, d=8),
    dict(n=60, d=3, shared=2.0),
    dict(n=25, d=64),  # d > n
    dict(n=50, d=16, zeros=(0, 7, 49)),
    dict(n=45, d=5, shared=5.0, zeros=(3,)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
@pytest.mark.parametrize("block_size", [7, 16384])
def test_exact_against_all_pairs(case, block_size):
    x = _matrix(**case)
    mean, std, eps, _ = reference_stats(x)
    st = tg.similarity_stats(torch.from_numpy(x), block_size=block_size)
    assert st.mean == pytest.approx(mean, abs=1e-9)
    assert st.std == pytest.approx(std, abs=1e-9)
    assert st.epsilon == pytest.approx(eps, abs=1e-9)
    assert st.n_dropped == len(case.get("zeros", ()))
    assert st.n_vectors == case["n"] - st.n_dropped
    assert st.d == case["d"]
    assert st.model_class == model_class_of(eps)


def test_float32_input_matches_paper_algorithm_to_1e6():
    x = torch.from_numpy(_matrix(300, 24, shared=1.0)).float()
    assert tg.similarity_stats(x).epsilon == pytest.approx(paper_epsilon(x), abs=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_accepted_and_upcast(dtype):
    x = torch.from_numpy(_matrix(30, 6, shared=1.0)).to(dtype)
    mean, std, eps, _ = reference_stats(x.double().numpy())
    st = tg.similarity_stats(x)
    assert st.epsilon == pytest.approx(eps, abs=1e-9)


def test_numpy_input():
    x = _matrix(20, 4)
    assert tg.similarity_stats(x).epsilon == pytest.approx(reference_stats(x)[2], abs=1e-9)


def test_accumulator_split_equals_one_call():
    x = torch.from_numpy(_matrix(70, 9, shared=1.5, zeros=(10,)))
    acc = SimilarityAccumulator()
    for part in (x[:3], x[3:40], x[40:]):
        acc.update(part)
    a, b = acc.compute(), tg.similarity_stats(x)
    assert (a.mean, a.std, a.n_vectors, a.n_dropped) == pytest.approx(
        (b.mean, b.std, b.n_vectors, b.n_dropped), abs=1e-12
    )


# ----------------------------------------------------------------------------- known answers
def test_orthonormal_rows_have_zero_epsilon():
    st = tg.similarity_stats(torch.eye(5))
    assert (st.mean, st.std, st.epsilon, st.model_class) == (0.0, 0.0, 0.0, "class2")


def test_parallel_rows_have_epsilon_one():
    x = torch.tensor([[1.0, 2.0], [2.0, 4.0], [0.5, 1.0]])
    st = tg.similarity_stats(x)
    assert st.mean == pytest.approx(1.0) and st.std == pytest.approx(0.0, abs=1e-6)
    assert st.model_class == "class1"


def test_regular_simplex():
    n = 6  # n unit vectors in R^(n-1) with all cosines -1/(n-1)
    e = torch.eye(n, dtype=torch.float64)
    x = e - e.mean(0)
    st = tg.similarity_stats(x)
    assert st.mean == pytest.approx(-1 / (n - 1), abs=1e-12)
    assert st.std == pytest.approx(0.0, abs=1e-6)


def test_two_values_known_std():
    # 3 rows: u1 = u2, u3 orthogonal: ordered pair cosines {1, 1, 0, 0, 0, 0} -> μ = 1/3, σ = √2/3
    x = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    st = tg.similarity_stats(x)
    assert st.mean == pytest.approx(1 / 3) and st.std == pytest.approx(math.sqrt(2) / 3)


@pytest.mark.parametrize(
    "eps,cls", [(0.25, "class1"), (0.2, "boundary"), (0.15, "boundary"), (0.1, "boundary"), (0.05, "class2")]
)
def test_model_class_thresholds(eps, cls):
    assert model_class_of(eps) == cls


# ----------------------------------------------------------------------------- histogram, top pairs
def test_histogram_counts_every_ordered_pair():
    x = _matrix(120, 6, shared=0.5, zeros=(4,))
    _, _, _, cos = reference_stats(x)
    bins = 11
    st = tg.similarity_stats(torch.from_numpy(x), histogram=True, histogram_bins=bins, block_size=50, progress=False)
    counts, edges = st.histogram
    assert int(counts.sum()) == len(cos) == 119 * 118
    ref, ref_edges = np.histogram(np.clip(cos, -1, 1), bins=bins, range=(-1, 1))
    np.testing.assert_allclose(edges.numpy(), ref_edges)
    near_edge = sum(min(abs(c - e) for e in ref_edges) < 1e-5 for c in cos)
    assert np.abs(counts.numpy() - ref).sum() <= 2 * near_edge


def test_top_pairs_match_reference():
    x = _matrix(80, 5, zeros=(2,), seed=3)
    rows = {i: r / np.linalg.norm(r) for i, r in enumerate(x) if np.linalg.norm(r) > 0}
    ref = sorted(((float(rows[i] @ rows[j]), i, j) for i in rows for j in rows if i < j), reverse=True)[:5]
    st = tg.similarity_stats(torch.from_numpy(x), top_n=5, block_size=30, progress=False)
    assert [(i, j) for i, j, _ in st.top_pairs] == [(i, j) for _, i, j in ref]
    np.testing.assert_allclose([c for *_, c in st.top_pairs], [c for c, *_ in ref], atol=1e-6)


def test_to_dict_is_jsonable():
    import json

    st = tg.similarity_stats(
        torch.from_numpy(_matrix(20, 4)), histogram=True, histogram_bins=4, top_n=2, progress=False
    )
    d = json.loads(json.dumps(st.to_dict()))
    assert d["epsilon"] == st.epsilon and len(d["histogram"]["counts"]) == 4 and len(d["top_pairs"]) == 2


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("x", [torch.randn(5), torch.randn(2, 3, 4)])
def test_not_2d(x):
    with pytest.raises(ValueError, match="expected 2-D"):
        tg.similarity_stats(x)


@pytest.mark.parametrize("x", [torch.zeros(4, 3), torch.tensor([[1.0, 0.0], [0.0, 0.0]]), torch.ones(1, 3)])
def test_fewer_than_two_nonzero_rows(x):
    with pytest.raises(ValueError, match="at least 2 non-zero rows"):
        tg.similarity_stats(x)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nan_inf(bad):
    x = torch.randn(5, 3)
    x[3, 1] = bad
    with pytest.raises(ValueError, match="NaN or inf.*row 3"):
        tg.similarity_stats(x)


@pytest.mark.parametrize(
    "x", [torch.ones(3, 2, dtype=torch.int64), torch.ones(3, 2, dtype=torch.bool), np.ones((3, 2), dtype=np.int32)]
)
def test_integer_dtypes(x):
    with pytest.raises(TypeError, match="floating point"):
        tg.similarity_stats(x)


def test_not_a_tensor():
    with pytest.raises(TypeError, match="torch tensor or numpy array"):
        tg.similarity_stats([[1.0, 0.0], [0.0, 1.0]])


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(block_size=0), "block_size"),
        (dict(top_n=-1), "top_n"),
        (dict(histogram=True, histogram_bins=0), "histogram_bins"),
    ],
)
def test_bad_options(kw, match):
    with pytest.raises(ValueError, match=match):
        tg.similarity_stats(torch.randn(4, 3), **kw)


def test_accumulator_width_mismatch():
    acc = SimilarityAccumulator()
    acc.update(torch.randn(3, 4))
    with pytest.raises(ValueError, match="d = 5 columns"):
        acc.update(torch.randn(3, 5))


# ----------------------------------------------------------------------------- capacity forms
# The authors' constants, typed in from their code: full form from code/representational_capacity.py;
# adjusted and random-fit JL as code/vector_packing_graphs.py prints its fits (C = {:.4f}).
AUTHORS_FULL = (0.45809143, 1.0668005, 1.44738666, 0.97197234)
AUTHORS_ADJUSTED_C = 1.2934
AUTHORS_JL_RANDOM_C = 3.0295


def ref_capacity(d, eps, form):
    """Direct transcription of the paper's forms with the authors' constants."""
    if form == "jl":
        return math.exp(d * eps**2 / 8)
    if form == "jl_random":
        return math.exp(d * eps**2 / AUTHORS_JL_RANDOM_C)
    if form == "adjusted":
        return d * math.exp(d * eps**2 / AUTHORS_ADJUSTED_C)
    C, a, b, c = AUTHORS_FULL
    return math.ceil((d * math.exp((d**c * eps**2 / C) ** (1 / b))) ** (1 / a))


def authors_max_k(n, bounds):
    """``max_k`` of the authors' code/representational_capacity.py, verbatim but for names."""
    C, a, b, c = AUTHORS_FULL
    return np.ceil((n * np.exp((bounds**2 * n**c / C) ** (1 / b))) ** (1 / a))


def test_constants_are_the_authors():
    assert tg.FORMS["full"] == dict(zip("Cabc", AUTHORS_FULL))
    assert tg.FORMS["adjusted"] == {"C": AUTHORS_ADJUSTED_C}
    assert tg.FORMS["jl_random"] == {"C": AUTHORS_JL_RANDOM_C}
    assert tg.FORMS["jl"] == {"C": 8.0}


def test_constants_defined_once():
    """No module that computes capacities carries its own copy of the constants (the capacity
    family's checks.py and packing_cells.py only quote the published values as text, to compare the refit with them)."""
    from pathlib import Path

    root = Path(tg.__file__).parent
    copies = ("1.44738666", "0.458,", "0.458)", "1.0668005", "1.067,")
    hits = [
        p.relative_to(root).as_posix()
        for p in root.rglob("*.py")
        if any(c in p.read_text() for c in copies) and p.name not in ("checks.py", "packing_cells.py")
    ]
    assert hits == ["metrics/_capacity_forms.py"]


def _paper_digits(x: float) -> float:
    return float(f"{x:.2e}")


@pytest.mark.parametrize("name", sorted(tg.published_rows()))
def test_published_capacity_table_row(name):
    """Every row of the paper's Table 1 from tg.capacity, to the table's rounding.

    The table prints ε to 5 decimals and k to 3 significant digits; the authors computed k from
    the unrounded ε. So the published k must lie between the 3-digit roundings of
    k(ε − 5e-6) and k(ε + 5e-6) (k increases with ε). Indeterminate rows are ε ≥ 0.1.
    """
    row = tg.published_rows()[name]
    if row.capacity is None:
        assert row.epsilon >= 0.1
        est = tg.capacity_estimate(row.d_model, row.epsilon)
        assert est.k is None and est.status == "indeterminate"
        return
    assert row.epsilon < 0.1
    lo = tg.capacity(row.d_model, row.epsilon - 5e-6)
    hi = tg.capacity(row.d_model, row.epsilon + 5e-6)
    assert _paper_digits(lo) <= row.capacity <= _paper_digits(hi), (name, lo, hi, row.capacity)
    assert tg.capacity(row.d_model, row.epsilon) == pytest.approx(authors_max_k(row.d_model, row.epsilon), rel=1e-13)
    assert tg.capacity_estimate(row.d_model, row.epsilon).k == tg.capacity(row.d_model, row.epsilon)


def test_rounded_paper_constants_miss_the_table():
    """The 3-digit constants of the paper's text put Llama-2-70B at 8.36e15, outside the table's 8.15e15."""
    k = tg.capacity(8192, 0.09962, C=0.458, a=1.067, b=1.447, c=0.972)
    assert _paper_digits(k) == 8.36e15
    assert _paper_digits(tg.capacity(8192, 0.09962)) in (8.13e15, 8.14e15, 8.15e15)


def test_published_table_has_every_paper_row():
    rows = tg.published_rows()
    assert len(rows) == 45
    assert sum(r.capacity is None for r in rows.values()) == 14
    assert rows["Llama-2-7B"].capacity == 3.99e7 and rows["Qwen3-30B-A3B"].capacity == 5.67e5


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


@pytest.mark.parametrize("form", ["jl", "jl_random", "adjusted", "full"])
@pytest.mark.parametrize("d,eps", [(4096, 0.0645), (576, 0.3), (2048, 0.06329), (768, 0.15)])
def test_capacity_matches_formula(form, d, eps):
    assert _quiet(tg.capacity, d, eps, form=form) == pytest.approx(ref_capacity(d, eps, form), rel=1e-9)


def test_llama2_7b_published_numbers():
    assert tg.capacity(4096, 0.0645, form="full") == pytest.approx(4e7, rel=0.05)
    assert _quiet(tg.capacity, 4096, 0.0645, form="jl_random") == pytest.approx(277, abs=1)
    assert _quiet(tg.capacity, 4096, 0.0645, form="jl") == pytest.approx(8.4, abs=0.05)


def test_full_form_is_an_integer_ceiling():
    k = tg.capacity(1024, 0.1)
    assert k == math.ceil(k)


@pytest.mark.parametrize("form", ["jl", "jl_random", "adjusted"])
def test_capacity_epsilon_inverts_capacity(form):
    d = np.array([256, 1024, 4096])
    eps = np.array([0.3, 0.2, 0.1])
    k = _quiet(tg.capacity, d, eps, form=form)
    np.testing.assert_allclose(tg.capacity_epsilon(k, d, form=form), eps, rtol=1e-12)


def test_capacity_epsilon_inverts_full_up_to_ceil():
    for d, eps in [(4096, 0.0645), (576, 0.2), (2048, 0.1)]:
        k = tg.capacity(d, eps, form="full")
        assert tg.capacity_epsilon(k, d, form="full") == pytest.approx(eps, rel=1e-6)
        assert tg.capacity_epsilon(k - 1, d, form="full") <= eps


def test_vectorised_over_arrays():
    d = np.array([[512], [1024]])
    eps = np.array([0.1, 0.2, 0.3])
    k = tg.capacity(d, eps, form="adjusted")
    assert k.shape == (2, 3)
    assert k[1, 2] == pytest.approx(ref_capacity(1024, 0.3, "adjusted"))


def test_constants_overridable():
    assert tg.capacity(1000, 0.1, form="adjusted", C=2.0) == pytest.approx(1000 * math.exp(1000 * 0.01 / 2))
    assert tg.capacity_epsilon(1e5, 1000, form="jl", C=1.0) == pytest.approx(math.sqrt(math.log(1e5) / 1000))


def test_overflow_returns_inf_with_warning():
    with pytest.warns(tg.CapacityWarning, match="overflows"):
        assert math.isinf(tg.capacity(16384, 0.9, form="adjusted"))


def test_jl_below_d_is_vacuous_warning():
    with pytest.warns(tg.CapacityWarning, match="vacuous"):
        tg.capacity(4096, 0.0645, form="jl")


def test_log10_capacity_no_overflow():
    assert tg.log10_capacity(16384, 0.9, form="adjusted") == pytest.approx(
        (math.log(16384) + 16384 * 0.81 / AUTHORS_ADJUSTED_C) / math.log(10)
    )


@pytest.mark.parametrize("form", ["adjusted", "full"])
def test_capacity_epsilon_undefined_below_d(form):
    with pytest.warns(tg.CapacityWarning, match="undefined"):
        assert math.isnan(tg.capacity_epsilon(100, 1000, form=form))
    assert tg.capacity_epsilon(100, 1000, form=form, below="zero") == 0.0


@pytest.mark.parametrize("form", ["jl", "adjusted", "full"])
@pytest.mark.parametrize("d,eps", [(4096, 0.0645), (576, 0.3)])
def test_sensitivity_is_the_derivative(form, d, eps):
    h = 1e-6
    fd = (tg.log10_capacity(d, eps + h, form=form) - tg.log10_capacity(d, eps - h, form=form)) / (2 * h)
    assert tg.sensitivity(d, eps, form=form) == pytest.approx(fd, rel=1e-5)


@pytest.mark.parametrize("eps", [0.0, -0.1, 1.0, 1.5, float("nan")])
def test_bad_eps(eps):
    with pytest.raises(ValueError, match=r"eps must lie in \(0, 1\)"):
        tg.capacity(512, eps)


@pytest.mark.parametrize("d", [0, -3])
def test_bad_d(d):
    with pytest.raises(ValueError, match="d must be positive"):
        tg.capacity(d, 0.1)
    with pytest.raises(ValueError, match="d must be positive"):
        tg.capacity_epsilon(1000, d)


def test_bad_k_form_and_constants():
    with pytest.raises(ValueError, match="k must be >= 1"):
        tg.capacity_epsilon(0, 10)
    with pytest.raises(ValueError, match="unknown form"):
        tg.capacity(10, 0.1, form="jll")
    with pytest.raises(ValueError, match="only the constant C"):
        tg.capacity(10, 0.1, form="jl", a=1.0)
    with pytest.raises(ValueError, match="positive finite"):
        tg.capacity(10, 0.1, form="full", C=-1.0)
    with pytest.raises(ValueError, match="below must be"):
        tg.capacity_epsilon(10, 5, below="zeros")


# ----------------------------------------------------------------------------- published table
def test_published_table():
    table = tg.published()
    assert len(table) == 45
    assert table["Llama-2-7B"] == (4096, 0.0645)
    assert table["Gemma-3-270M"].d_model == 640
    assert tg.published()["Qwen3-0.6B"].epsilon == 0.25204  # tg.capacity is the formula; it carries no table
    assert all(0 < r.epsilon < 1 and r.d_model > 0 for r in table.values())


@pytest.mark.parametrize("name", ["llama-2-7b", "LLAMA_2_7B", "meta-llama/Llama-2-7b-hf", "Llama 2 7B"])
def test_published_lookup_is_tolerant(name):
    assert tg.published_epsilon(name) == (4096, 0.0645)


def test_published_lookup_unknown():
    with pytest.raises(KeyError, match="no published"):
        tg.published_epsilon("not-a-model-xyz")


# ----------------------------------------------------------------------------- models and metrics
def test_embedding_epsilon_of_a_model(any_tiny_model):
    W_E = capture.weight(any_tiny_model, "W_E")
    W_U = capture.weight(any_tiny_model, "W_U")
    assert tg.embedding_epsilon(any_tiny_model).epsilon == pytest.approx(reference_stats(W_E.numpy())[2], abs=1e-9)
    assert tg.embedding_epsilon(any_tiny_model, matrix="W_U").epsilon == pytest.approx(
        reference_stats(W_U.T.numpy())[2], abs=1e-9
    )
    m = torch.randn(10, 4)
    assert tg.embedding_epsilon(m).epsilon == tg.similarity_stats(m).epsilon
    with pytest.raises(ValueError, match="matrix must be"):
        tg.embedding_epsilon(any_tiny_model, matrix="W_Q")


def test_epsilon_and_capacity_metrics(tiny_model):
    rep = tg.get_metric("epsilon")(tiny_model)
    assert rep.metrics == {"epsilon.W_E", "epsilon.W_U"}
    st = tg.embedding_epsilon(tiny_model)
    row = rep.filter("epsilon.W_E").rows[0]
    assert row.value == st.epsilon and row.hook is None
    assert row.extras["n_vectors"] == 101 and row.extras["d"] == 32 and row.extras["model_class"] == st.model_class
    # Class 1 (d 32: ε ≈ 0.35): no count, the reason instead, whatever the form
    cap = tg.get_metric("capacity")(tiny_model, form="adjusted")
    r = cap.filter("capacity.W_E").rows[0]
    assert math.isnan(r.value)
    assert {k: r.extras[k] for k in ("form", "preset", "epsilon", "d", "status", "model_class")} == {
        "form": "adjusted",
        "preset": "paper",
        "epsilon": st.epsilon,
        "d": 32,
        "status": "indeterminate",
        "model_class": "class1",
    }
    assert "Class 1" in r.extras["reason"] and cap.provenance["capacity_preset"] == "paper"
    with pytest.raises(ValueError, match="matrices must be"):
        tg.get_metric("epsilon")(tiny_model, matrices=["W_K"])
    with pytest.raises(ValueError, match="histogram_rows"):
        tg.get_metric("epsilon")(tiny_model, histogram_rows=1)


@pytest.mark.needs_hooked
def test_capacity_metric_counts_a_class2_embedding():
    from tests.helpers import make_tiny_model

    model = make_tiny_model(d_model=1024, d_head=32, n_heads=2, d_mlp=32, n_layers=1, d_vocab=101)
    st = tg.embedding_epsilon(model)
    assert st.model_class == "class2"  # random rows at d = 1024: ε ≈ 2/√1024
    cap = tg.get_metric("capacity")(model, matrices=["W_E"])
    r = cap.filter("capacity.W_E").rows[0]
    assert r.value == pytest.approx(authors_max_k(1024, st.mean + 2 * st.std), rel=1e-12)
    assert r.extras["status"] == "count" and r.extras["reason"] == ""
    assert r.extras["k_3sigma"] == pytest.approx(authors_max_k(1024, st.mean + 3 * st.std), rel=1e-12)
    assert r.extras["matrix"] == "W_E" and r.extras["raw"] is None  # a LayerNorm model of unknown processing
    with pytest.raises(ValueError, match="accepted: \\['paper'\\]"):
        tg.get_metric("capacity")(model, preset="library")


def test_matrix_provenance_says_which_matrix_is_raw():
    from types import SimpleNamespace

    from tl_geometry.families.capacity import matrix_provenance

    def fake(norm, proc):
        m = SimpleNamespace(cfg=SimpleNamespace(normalization_type=norm))
        if proc is not None:
            m._tl_geometry_processing = proc
        return m

    on = {"fold_ln": True, "center_writing_weights": True, "center_unembed": True}
    off = {"fold_ln": False, "center_writing_weights": False, "center_unembed": False}
    assert matrix_provenance(fake("RMSPre", on), "W_E")["raw"] is True  # RMSNorm: never centered
    assert matrix_provenance(fake("LNPre", on), "W_E")["raw"] is False  # GPT-2 style, centered
    assert matrix_provenance(fake("LN", off), "W_E")["raw"] is True
    assert matrix_provenance(fake("LN", None), "W_E")["raw"] is None
    assert matrix_provenance(fake("RMSPre", on), "W_U")["raw"] is False
    assert matrix_provenance(fake("RMS", off), "W_U")["raw"] is True


def test_epsilon_metric_histogram(tiny_model):
    W_E = capture.weight(tiny_model, "W_E")
    full = tg.get_metric("epsilon")(tiny_model, matrices="W_E", histogram_rows=None, histogram_bins=9)
    h = full.rows[0].extras["histogram"]
    ref, edges = np.histogram(np.clip(reference_stats(W_E.numpy())[3], -1, 1), bins=9, range=(-1, 1))
    assert sum(h["counts"]) == 101 * 100 and np.abs(np.array(h["counts"]) - ref).sum() <= 4
    np.testing.assert_allclose(h["edges"], edges)
    sampled = tg.get_metric("epsilon")(tiny_model, matrices="W_E", histogram_rows=20, seed=3).rows[0].extras
    assert sampled["histogram_rows"] == 20 and sum(sampled["histogram"]["counts"]) == 20 * 19
    assert "histogram" not in tg.get_metric("epsilon")(tiny_model, histogram_rows=0).rows[0].extras
    from tl_geometry.families.capacity.figures import histogram_of

    counts, edges = histogram_of(dict(full.rows[0].extras))
    assert counts.sum() == 101 * 100


def test_epsilon_activations_metric(any_tiny_model, tiny_tokens):
    hooks = ["blocks.0.hook_resid_post", "blocks.2.hook_resid_post"]
    rep = tg.get_metric("epsilon_activations")(any_tiny_model, tiny_tokens, hooks=hooks, max_points=50, seed=1)
    got = capture.collect(any_tiny_model, tiny_tokens, hooks, max_points=50, seed=1, progress=False)
    for h in hooks:
        row = rep.filter("epsilon_activations", hook=h).rows[0]
        assert row.value == pytest.approx(reference_stats(got.acts[h].numpy())[2], abs=1e-6)
        assert row.layer == int(h.split(".")[1])
        assert row.extras["epsilon_W_E"] == pytest.approx(tg.embedding_epsilon(any_tiny_model).epsilon)
    default = tg.get_metric("epsilon_activations")(any_tiny_model, tiny_tokens, max_points=20)
    assert len(default) == any_tiny_model.cfg.n_layers
    with pytest.raises(ValueError, match="needs tokens"):
        tg.get_metric("epsilon_activations")(any_tiny_model, None)


# ----------------------------------------------------------------------------- property-based
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st_  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(
    n=st_.integers(2, 30),
    d=st_.integers(1, 12),
    shared=st_.floats(0, 5),
    seed=st_.integers(0, 2**16),
    n_zero=st_.integers(0, 3),
    block=st_.integers(1, 40),
)
def test_exactness_property(n, d, shared, seed, n_zero, block):
    x = _matrix(n + n_zero, d, shared=shared, zeros=range(n_zero), seed=seed)
    mean, std, eps, _ = reference_stats(x)
    got = tg.similarity_stats(torch.from_numpy(x), block_size=block)
    assert (got.mean, got.std, got.epsilon) == pytest.approx((mean, std, eps), abs=1e-6)
    assert got.n_dropped == n_zero


# ----------------------------------------------------------------------------- estimate, min_n, bad inputs
@pytest.mark.parametrize(
    "eps,cls", [(0.729, "class1"), (0.2016, "class1"), (0.2, "boundary"), (0.15, "boundary"), (0.1, "boundary")]
)
def test_estimate_is_indeterminate_outside_class2(eps, cls):
    est = tg.capacity_estimate(576, eps)
    assert est.k is None and est.status == "indeterminate" and not est.is_count
    assert est.model_class == cls and est.preset == "paper"
    assert ("Class 1" if cls == "class1" else "between the classes") in est.reason
    assert "indeterminate" in str(est)


def test_estimate_counts_class2_like_the_authors_code():
    est = tg.capacity_estimate(4096, 0.0645)
    assert est.status == "count" and est.reason == "" and est.model_class == "class2"
    assert est.k == pytest.approx(authors_max_k(4096, 0.0645), rel=1e-13)
    assert est.log10_k == pytest.approx(math.log10(est.k), abs=1e-6)


def test_estimate_three_sigma_as_the_authors_code():
    """embd_orthogonality_analysis.py: max_k(d, μ + 3σ) next to max_k(d, μ + 2σ), when μ + 2σ ≤ 0.1."""
    mu, sigma, d = 0.004, 0.0302, 4096
    est = tg.capacity_estimate(d, mean=mu, std=sigma)
    assert est.epsilon == pytest.approx(mu + 2 * sigma)
    assert est.epsilon_3sigma == pytest.approx(mu + 3 * sigma)
    assert est.k == pytest.approx(authors_max_k(d, mu + 2 * sigma), rel=1e-13)
    assert est.k_3sigma == pytest.approx(authors_max_k(d, mu + 3 * sigma), rel=1e-13)
    assert est.k_3sigma > est.k
    # no count at μ + 2σ → no μ + 3σ count either (the authors write "not estimatable")
    assert tg.capacity_estimate(d, mean=0.1, std=0.1).k_3sigma is None


def test_estimate_below_d_is_flagged():
    est = tg.capacity_estimate(4096, 0.0645, form="jl_random")
    assert est.k == pytest.approx(277, abs=1) and est.below_d and "below the formula's domain" in est.reason


@pytest.mark.parametrize(
    "args,kw,exc,match",
    [
        (("768", 0.05), {}, TypeError, "d must be a positive integer"),
        ((True, 0.05), {}, TypeError, "d must be a positive integer"),
        ((768.5, 0.05), {}, ValueError, "positive integer"),
        ((0, 0.05), {}, ValueError, "positive integer"),
        ((768, "0.05"), {}, TypeError, "epsilon must be"),
        ((768, 1.0), {}, ValueError, "< 1"),
        ((768, float("nan")), {}, ValueError, "finite"),
        ((768,), {}, ValueError, "give epsilon"),
        ((768,), {"mean": 0.01}, ValueError, "both mean and std"),
        ((768,), {"mean": 0.01, "std": -0.1}, ValueError, "std must be >= 0"),
        ((768, 0.5), {"mean": 0.01, "std": 0.02}, ValueError, "is not mean"),
        ((768, 0.05), {"preset": "library"}, ValueError, "accepted: \\['paper'\\]"),
        ((768, 0.05), {"form": "nope"}, ValueError, "unknown form"),
    ],
)
def test_estimate_bad_inputs(args, kw, exc, match):
    with pytest.raises(exc, match=match):
        tg.capacity_estimate(*args, **kw)


def test_estimate_to_dict_is_jsonable():
    import json

    json.dumps(tg.capacity_estimate(4096, mean=0.004, std=0.03).to_dict())
    json.dumps(tg.capacity_estimate(576, 0.729).to_dict())


def slow_min_n(k, eps, form):
    """Brute force: the first d = 1, 2, ... whose form ε(k, d) (0 for a log argument < 1) is ≤ ε, capped at k."""
    C = {"jl": 8.0, "jl_random": AUTHORS_JL_RANDOM_C, "adjusted": AUTHORS_ADJUSTED_C, "full": AUTHORS_FULL[0]}[form]
    for d in range(1, math.ceil(k) + 1):
        if form in ("jl", "jl_random"):
            e = math.sqrt(C * math.log(k) / d)
        elif form == "adjusted":
            e = math.sqrt(C * max(math.log(k / d), 0) / d)
        else:
            _, a, b, c = AUTHORS_FULL
            e = math.sqrt(C * max(math.log(k**a / d), 0) ** b / d**c)
        if e <= eps:
            return d
    return math.ceil(k)


@pytest.mark.parametrize("form", ["full", "adjusted", "jl", "jl_random"])
@pytest.mark.parametrize("k,eps", [(2000, 0.3), (32000, 0.0645), (5000, 0.2), (50, 0.9), (1, 0.5), (7.5, 0.01)])
def test_min_n_matches_brute_force(form, k, eps):
    assert tg.min_n(k, eps, form=form) == slow_min_n(k, eps, form)


def test_min_n_matches_the_authors_minimize_scalar():
    from scipy.optimize import minimize_scalar

    C, a, b, c = AUTHORS_FULL

    def authors_min_n(k, bounds):  # code/representational_capacity.py, names kept
        target = bounds**2 / C

        def equation(n):
            if n <= 0 or n >= k**a:
                return 1e6
            log_term = np.log(k**a / n)
            if log_term <= 0:
                return 1e6
            return ((log_term**b) * n ** (-c) - target) ** 2

        return np.ceil(minimize_scalar(equation, bounds=(1, k), method="bounded").x)

    for k, eps in [(32000, 0.0645), (128256, 0.05542), (1e6, 0.08), (100000, 0.03)]:
        n = tg.min_n(k, eps)
        assert n == authors_min_n(k, eps)
        assert tg.capacity(n, eps) >= k  # holds k at ε ...
        assert tg.capacity_epsilon(k, n - 1) > eps  # ... and one dimension less does not


@pytest.mark.parametrize(
    "args,exc,match",
    [
        (("32000", 0.1), TypeError, "k must be"),
        ((True, 0.1), TypeError, "k must be"),
        ((0.5, 0.1), ValueError, "k must be >= 1"),
        ((100, 0.0), ValueError, "epsilon must lie"),
        ((100, 1.2), ValueError, "epsilon must lie"),
        ((100, "0.1"), TypeError, "epsilon must be"),
    ],
)
def test_min_n_bad_inputs(args, exc, match):
    with pytest.raises(exc, match=match):
        tg.min_n(*args)


def test_capacity_below_d_warns_for_every_form():
    """capacity(768, 1e-12) is 507 < d: below the formula's domain, said with a warning."""
    with pytest.warns(tg.CapacityWarning, match="below the formula's domain"):
        assert tg.capacity(768, 1e-12) == 507
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tg.capacity(768, 0.01, form="adjusted") > 768  # the adjusted form never goes below d: no warning


@pytest.mark.parametrize("d", ["768", True, np.array(["768"]), np.array([True]), None, [1, "a"]])
def test_capacity_refuses_non_numeric_d(d):
    with pytest.raises(TypeError, match="d must be"):
        tg.capacity(d, 0.05)


@pytest.mark.parametrize("eps", ["0.05", False, np.array(["0.05"])])
def test_capacity_refuses_non_numeric_eps(eps):
    with pytest.raises(TypeError, match="eps must be"):
        tg.capacity(768, eps)
    with pytest.raises(TypeError, match="eps must be"):
        tg.log10_capacity(768, eps)


def test_capacity_epsilon_refuses_non_numeric_k():
    with pytest.raises(TypeError, match="k must be"):
        tg.capacity_epsilon("1e6", 768)
