"""The one validation layer (issue 23, issue 21 part 3): each case the adversarial trial found, and
the dtype / numpy acceptance of the pure functions.

Every bad input gives a TLGeometryError naming what was wrong, before any model is loaded when it
comes from the command line; low-precision and numpy input give the float32 answer.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import tl_geometry as tg
from tl_geometry.base import _checks
from tl_geometry.cli import main
from tl_geometry.errors import TLGeometryError


@pytest.fixture(scope="module")
def pga_data():
    g = torch.Generator().manual_seed(0)
    V = tg.readout_basis(torch.randn(16, 100, generator=g), 4)
    H = torch.randn(60, 16, generator=g)
    return H, V


# ------------------------------------------------------------------ the layer itself
@pytest.mark.parametrize(
    "value, ok",
    [
        (3, True),
        (np.int64(3), True),
        (True, False),
        (2.0, False),
        (2.7, False),
        ("3", False),
        (None, False),
        (1, False),
    ],
)
def test_integer_refuses_bools_floats_and_strings(value, ok):
    if ok:
        assert _checks.integer(value, "n", lo=2) == 3 and type(_checks.integer(value, "n", lo=2)) is int
    else:
        with pytest.raises(TLGeometryError, match=r"n must be an integer >= 2, got"):
            _checks.integer(value, "n", lo=2)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, 0, True, "1", None])
def test_positive_real_refuses_nan_inf_bool_and_non_positive(value):
    with pytest.raises(TLGeometryError, match="x must be a positive number"):
        _checks.real(value, "x", lo=0.0, lo_open=True)


def test_seed_refuses_overflowing_values():
    assert _checks.seed(2**63 - 1) == 2**63 - 1
    for bad in (2**63, 2**70, -1, 1.0):
        with pytest.raises(TLGeometryError, match="seed must be a non-negative integer"):
            _checks.seed(bad)


def test_names_one_string_is_one_name_and_duplicates_are_refused():
    assert _checks.names("pga", "metrics") == ["pga"]
    with pytest.raises(TLGeometryError, match=r"names \['pga'\] more than once"):
        _checks.names(["pga", "pga"], "metrics")
    with pytest.raises(TLGeometryError, match="must hold non-empty strings"):
        _checks.names(["pga", 3], "metrics")


def test_argument_error_is_both_value_and_type_error():
    with pytest.raises(ValueError):
        _checks.integer("x", "n")
    with pytest.raises(TypeError):
        _checks.integer("x", "n")


# ------------------------------------------------------------------ pga_score (silent / tracebacks)
def test_pga_score_fractional_ccr_refused_not_truncated(pga_data):
    H, V = pga_data
    with pytest.raises(TLGeometryError, match=r"ccr must be an integer >= 0 .*got 1\.5"):
        tg.pga_score(H, V, ccr=1.5, n_null=4)
    with pytest.raises(TLGeometryError, match="ccrs must be"):
        tg.pga_profile(H, V, ccrs=(0, 1.5), n_null=4)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(max_pairs=0), "max_pairs must be an integer >= 1 or None"),
        (dict(max_pairs=-1), "max_pairs must be an integer >= 1 or None"),
        (dict(memory_mb=float("nan")), "memory_mb must be a positive number"),
        (dict(memory_mb=0), "memory_mb must be a positive number"),
        (dict(n_null=2.7), "n_null must be an integer >= 2"),
        (dict(n_null=True), "n_null must be an integer >= 2"),
        (dict(seed=2**70), "seed must be a non-negative integer"),
        (dict(n_groups=2.0), "n_groups must be an integer >= 2"),
    ],
)
def test_pga_score_bad_scalars(pga_data, kw, match):
    H, V = pga_data
    with pytest.raises(TLGeometryError, match=match):
        tg.pga_score(H, V, **{"ccr": 0, "n_null": 4, **kw})


def test_shape_errors_name_the_type_received():
    with pytest.raises(TLGeometryError) as e:
        tg.spectral_metrics(np.zeros((300, 64, 2), dtype=np.float32))
    msg = str(e.value)
    assert "numpy array of shape (300, 64, 2)" in msg and "2-D torch tensor or numpy array" in msg
    with pytest.raises(TLGeometryError, match=r"got \[\[1.0\]\] \(list\)"):
        tg.aofe([[1.0]])
    with pytest.raises(TLGeometryError, match="floating dtype.*int64"):
        tg.pga_score(torch.ones(20, 4, dtype=torch.int64), torch.eye(4)[:, :2])


# ------------------------------------------------------------------ analyze / registry
def test_analyze_bare_string_is_one_metric_name():
    # "pga" is read as one name (not 'p', 'g', 'a'): the refusal is about the missing tokens
    with pytest.raises(TLGeometryError, match=r"metrics \['pga'\] need tokens"):
        tg.analyze(object(), metrics="pga", progress=False)


def test_analyze_duplicate_metrics_refused():
    with pytest.raises(TLGeometryError, match=r"metrics names \['pga'\] more than once"):
        tg.analyze(object(), metrics=["pga", "pga"], progress=False)


@pytest.mark.parametrize("returned", [None, {"z": 1.0}, 3.0])
def test_plugin_returning_wrong_type_is_named(returned):
    @tg.register_metric("_t_wrong_type", needs="weights", overwrite=True)
    def bad(model, tokens, *, hooks=None):
        return returned

    try:
        with pytest.raises(TLGeometryError, match=r"metric '_t_wrong_type' \(a plugin from .*\) returned") as e:
            tg.analyze(object(), metrics=["_t_wrong_type"], progress=False)
        assert "must return a tl_geometry.GeometryReport" in str(e.value)
        with pytest.raises(TLGeometryError, match="_t_wrong_type"):
            tg.get_metric("_t_wrong_type")(object())
    finally:
        tg.unregister_metric("_t_wrong_type")


# ------------------------------------------------------------------ corpus
@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(seed=2**70), "seed must be a non-negative integer"),
        (dict(n_seqs=2.9), "n_seqs must be an integer >= 1, got 2.9"),
        (dict(seq_len=True), "seq_len must be an integer >= 2"),
        (dict(prepend_bos="yes"), "prepend_bos must be True or False"),
    ],
)
def test_corpus_tokens_bad_arguments(kw, match):
    with pytest.raises(TLGeometryError, match=match):
        tg.corpus.tokens(None, "pydoc", **kw)


# ------------------------------------------------------------------ CLI: refused before any load
def _no_load(*args, **kwargs):
    raise AssertionError("the model was loaded before the arguments were checked")


@pytest.mark.parametrize(
    "argv, match",
    [
        (["pga", "--max-pairs", "0"], "--max-pairs must be an integer >= 1 or None, got 0"),
        (["pga", "--max-pairs", "-1"], "--max-pairs must be an integer >= 1 or None, got -1"),
        (["pga", "--k", "0"], "--k must be an integer >= 1"),
        (["pga", "--k", "576"], "--k must satisfy 1 <= k < d_model=576"),
        (["pga", "--batch-size", "0"], "--batch-size must be an integer >= 1"),
        (["pga", "--n-seqs", "0"], "--n-seqs must be an integer >= 1"),
        (["pga", "--layers", "99"], "--layers 99 out of range: model smollm2-135m has n_layers=30"),
        (["pga", "--layers", "-1"], "--layers (each value) must be an integer >= 0"),
        (["pga", "--ccr", "0", "-2"], "--ccr (each value) must be an integer >= 0"),
        (["pga", "--n-null", "1"], "--n-null must be an integer >= 2"),
        (["pga", "--seed", "-3"], "--seed must be a non-negative integer"),
        (["pga", "--corpus", "/nonexistent/c.txt"], "unknown corpus source"),
        (["agop", "--layers", "99"], "--layers 99 out of range"),
        (["agop", "--batch-size", "0"], "--batch-size must be an integer >= 1"),
        (["agop", "--n-seqs", "0"], "--n-seqs must be an integer >= 1"),
        (["agop", "--n-probes", "1"], "--n-probes must be an integer >= 2"),
        (["agop", "--device", "cuda:7"], "not available"),
    ],
)
def test_pga_agop_check_arguments_before_loading(argv, match, monkeypatch, capsys):
    from tl_geometry import models

    monkeypatch.setattr(models, "load", _no_load)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "\n" not in err


@pytest.mark.parametrize(
    "argv, match",
    [
        (["sweep", "toy", "--steps", "0"], "steps must be an integer >= 1"),
        (["sweep", "toy", "--sizes", "0"], "sizes must be"),
        (["sweep", "shape", "--lr", "nan", "--dry-run"], "lr must be a positive number"),
        (["sweep", "shape", "--lr", "inf", "--dry-run"], "lr must be a positive number"),
        (["sweep", "shape", "--budgets", "nan", "--dry-run"], "each of budgets must be a positive number"),
        (["sweep", "shape", "--budgets", "nan"], "each of budgets must be a positive number"),
        (["sweep", "shape", "--steps", "0", "--dry-run"], "steps must be an integer >= 1"),
    ],
)
def test_sweep_bad_numbers_refused_before_work(argv, match, tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "\n" not in err
    assert not out.exists()


# ------------------------------------------------------------------ --max-memory-gb on every source
def test_max_memory_applies_to_the_offline_model(monkeypatch, tmp_path, capsys):
    from tl_geometry import models

    monkeypatch.setattr(models, "load", _no_load)
    assert main(["report", "--metrics", "shape", "--max-memory-gb", "0.01", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "needs about" in err and "134,515,008 parameters" in err and "0.01 GiB" in err


def test_max_memory_applies_to_a_local_directory(tmp_path):
    from safetensors.torch import save_file

    from tl_geometry.runs import pipeline

    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 16, "n_positions": 64}))
    save_file({"a": torch.zeros(1000, 16), "b": torch.zeros(16, 16)}, str(d / "model.safetensors"))
    shape = tg.models.peek(str(d))
    assert (shape.n_layers, shape.d_model, shape.n_params) == (2, 16, 1000 * 16 + 16 * 16)
    from tl_geometry.runs import memory

    need = memory.estimate(shape).peak_bytes  # a report's estimate from the shape (tests/unit/runs/test_memory.py)
    assert pipeline.check_model_memory(str(d), 2.0) == need
    with pytest.raises(TLGeometryError, match=r"needs about .* \(estimated from its files: 16,256 parameters"):
        pipeline.check_model_memory(str(d), need / 2**30 / 2)


# ------------------------------------------------------------------ dtypes and numpy (issue 21 part 3)
def test_numpy_big_endian_and_non_contiguous_arrays_are_accepted():
    x = np.random.default_rng(0).standard_normal((50, 6))
    ref = tg.spectral_metrics(torch.from_numpy(x)).rankme
    assert tg.spectral_metrics(x.astype(">f8")).rankme == ref
    assert tg.spectral_metrics(np.asfortranarray(x)).rankme == pytest.approx(ref, rel=1e-12)


def test_pga_bf16_and_f16_no_false_rank_error():
    g = torch.Generator().manual_seed(0)
    V = tg.readout_basis(torch.randn(64, 200, generator=g), 8)
    for dtype, n in ((torch.bfloat16, 300), (torch.float16, 1100)):
        H = (torch.randn(n, 64, generator=g) * 3).to(dtype)
        low = tg.pga_score(H, V, n_null=6, ccr=1, max_pairs=20_000)
        ref = tg.pga_score(H.float(), V, n_null=6, ccr=1, max_pairs=20_000)  # the same rounded data
        assert low.z == ref.z and low.rho_read == ref.rho_read


def _reference_offdiag_pearson(A, B):
    """Slow reference: every i != j entry, Pearson's r by the textbook formula."""
    a = [float(A[i, j]) for i in range(A.shape[0]) for j in range(A.shape[1]) if i != j]
    b = [float(B[i, j]) for i in range(B.shape[0]) for j in range(B.shape[1]) if i != j]
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    num = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    return num / math.sqrt(sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b))


def test_pure_functions_accept_numpy_and_every_float_dtype():
    g = torch.Generator().manual_seed(1)
    H = torch.randn(120, 12, generator=g) @ torch.randn(12, 12, generator=g)
    G = H.T @ H / 120
    V = tg.readout_basis(torch.randn(12, 40, generator=g), 3)
    calls = {
        "pga_score": lambda x, G_: tg.pga_score(x, V, n_null=4, ccr=1).z,
        "pc1_overlap": lambda x, G_: tg.pc1_overlap(x, V).overlap,
        "spectral_metrics": lambda x, G_: tg.spectral_metrics(x).rankme,
        "similarity_stats": lambda x, G_: tg.similarity_stats(x).epsilon,
        "wtw_aofe": lambda x, G_: float(tg.wtw_aofe(x).ratio),
        "aofe": lambda x, G_: float(tg.aofe(G_).ratio),
        "weighted_mean_cos2": lambda x, G_: float(tg.weighted_mean_cos2(G_)),
        "offdiag_pearson": lambda x, G_: tg.offdiag_pearson(G_, x[:12]),
        "nfa_correlation": lambda x, G_: tg.nfa_correlation(x.T[:, :40], G_).pearson,
    }
    for name, f in calls.items():
        base = f(H, G)
        assert f(H.numpy(), G.numpy()) == pytest.approx(base, rel=1e-6, abs=1e-9), name
        assert f(H.double(), G.double()) == pytest.approx(base, rel=1e-5, abs=1e-7), name
        for dtype in (torch.bfloat16, torch.float16):
            # exactly the float32 answer on the rounded data: nothing lost beyond the input's rounding
            assert f(H.to(dtype), G.to(dtype)) == f(H.to(dtype).float(), G.to(dtype).float()), (name, dtype)
    assert tg.offdiag_pearson(G.numpy(), (G @ G).numpy()) == pytest.approx(
        _reference_offdiag_pearson(G, G @ G), rel=1e-9
    )


# ----------------------------------------------------------------------------- all_finite
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(0,), (7,), (50, 3), (4, 6, 5)])
def test_all_finite_equals_isfinite_all(dtype, shape, monkeypatch):
    """``all_finite`` == ``torch.isfinite(x).all()`` (the slow reference) on clean tensors, one NaN /
    +inf / −inf anywhere, +inf and −inf together (a NaN sum), finite entries whose sum overflows,
    and non-contiguous views; with blocks of 4 entries so that the exact path spans several blocks."""
    monkeypatch.setattr(_checks, "FINITE_BLOCK", 4)
    gen = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(shape, generator=gen).to(dtype)
    cases = [x, x.transpose(0, -1) if x.ndim > 1 else x.flip(0)]
    n = x.numel()
    for pos in {0, n // 2, n - 1} if n else set():
        for bad in (float("nan"), float("inf"), -float("inf")):
            y = x.clone().reshape(-1)
            y[pos] = bad
            cases.append(y.reshape(shape))
    if n >= 2:
        both = x.clone().reshape(-1)
        both[0], both[-1] = float("inf"), -float("inf")
        cases.append(both.reshape(shape))
        huge = torch.full(shape, torch.finfo(dtype).max, dtype=dtype)  # finite, the sum overflows
        cases += [huge, huge.transpose(0, -1) if huge.ndim > 1 else huge]
    for c in cases:
        assert _checks.all_finite(c) == bool(torch.isfinite(c).all())
    assert _checks.all_finite(torch.tensor(float("nan"), dtype=dtype)) is False  # 0-d
    assert _checks.all_finite(torch.arange(5)) is True  # integers are finite


def test_float_matrix_refuses_a_non_finite_entry_past_the_first_block(monkeypatch):
    monkeypatch.setattr(_checks, "FINITE_BLOCK", 8)
    x = torch.randn(40, 3)
    x[37, 2] = float("nan")
    with pytest.raises(TLGeometryError, match=r"contains NaN or inf \(shape \(40, 3\)\)"):
        _checks.float_matrix(x, "x")
