"""The float32 ε kernel (float32 block Grams of centred unit rows, accumulated in float64) against
float64 references on adversarial inputs; overflow-safe norms; NaN/inf refused in the float32 path."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import tl_geometry as tg
from tl_geometry.errors import InputError
from tl_geometry.metrics import _gram
from tl_geometry.metrics.capacity import SimilarityAccumulator, model_class_of

REL = 1e-7  # the accuracy: ε, σ relative; μ relative to the spread max(|μ|, σ) (μ can be ~0)


def pairwise_reference(x: np.ndarray) -> tuple[float, float, float]:
    """Every ordered pair i != j, float64, two passes (mean, then squared deviations): no Gram moments."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1)
    u = x[norms > 0] / norms[norms > 0, None]
    n = len(u)
    pairs = n * (n - 1)
    total = 0.0
    for a in range(0, n, 2000):
        c = u[a : a + 2000] @ u.T
        c[np.arange(len(c)), a + np.arange(len(c))] = 0.0
        total += c.sum()
    mean = total / pairs
    ss = 0.0
    for a in range(0, n, 2000):
        c = u[a : a + 2000] @ u.T - mean
        c[np.arange(len(c)), a + np.arange(len(c))] = 0.0
        ss += (c * c).sum()
    std = math.sqrt(ss / pairs)
    return mean, std, mean + 2 * std


def _close(got, ref, rel=REL):
    mean, std, eps = ref
    assert abs(got.epsilon - eps) <= rel * abs(eps), (got.epsilon, eps)
    assert abs(got.std - std) <= rel * std, (got.std, std)
    assert abs(got.mean - mean) <= rel * max(abs(mean), std), (got.mean, mean)


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


N, D = 5000, 48


def _case(name: str) -> torch.Tensor:
    g = _gen(1)
    v = torch.randn(D, generator=g)
    if name == "random":
        return torch.randn(N, D, generator=g)
    if name == "shared direction":  # μ ≈ 0.5: the mixed path itself (no float64 recompute)
        return torch.randn(N, D, generator=g) + v
    if name == "dominant mean":  # σ ≪ μ: cancellation in σ² = E[cos²] − μ², float64 recompute
        return 0.05 * torch.randn(N, D, generator=g) + v
    if name == "nearly parallel":
        return v + 1e-2 * torch.randn(N, D, generator=g)
    raise AssertionError(name)


@pytest.mark.parametrize("name", ["random", "shared direction", "dominant mean", "nearly parallel"])
@pytest.mark.parametrize("block_size", [1024, 4096])
def test_float32_input_matches_the_pairwise_float64_reference(name, block_size):
    x = _case(name)
    got = tg.similarity_stats(x, block_size=block_size, progress=False)
    _close(got, pairwise_reference(x.numpy()))


def test_mixed_path_is_used_for_float32_and_trusted_where_well_conditioned():
    x = _case("shared direction")
    acc = SimilarityAccumulator()
    for a in range(0, N, 1250):
        acc.update(x[a : a + 1250])
    assert acc.state is not None and acc.state.mixed_blocks == 4
    st = acc.compute()
    assert not acc.needs_float64
    _close(st, pairwise_reference(x.numpy()))


def test_mixed_path_asks_for_float64_when_sigma_cancels():
    x = _case("dominant mean")
    acc = SimilarityAccumulator(precision="mixed")
    acc.update(x)
    acc.compute()
    assert acc.needs_float64
    acc64 = SimilarityAccumulator(precision="float64")
    acc64.update(x)
    acc64.compute()
    assert acc64.state is not None and acc64.state.mixed_blocks == 0 and not acc64.needs_float64


def test_float64_input_stays_float64():
    acc = SimilarityAccumulator()
    acc.update(_case("random").double())
    assert acc.state is not None and acc.state.mixed_blocks == 0


def gram_reference(x: torch.Tensor) -> tuple[float, float, float]:
    """Float64 Gram moments of the unit rows (DESIGN's identities), for inputs too large for the
    pairwise reference; σ² = second − μ² loses about log10(κ) of float64's digits (κ = second / σ²),
    so it is refused for κ ≥ 1e4 (nearly parallel rows) where the pairwise reference is needed."""
    u = x.double()
    u = u / u.norm(dim=1, keepdim=True)
    n = u.shape[0]
    s, G = u.sum(0), u.T @ u
    mean = (float(s @ s) - n) / (n * (n - 1))
    second = (float((G * G).sum()) - n) / (n * (n - 1))
    std = math.sqrt(second - mean * mean)
    assert second / std**2 < 1e4, "gram_reference is for well-conditioned inputs only"
    return mean, std, mean + 2 * std


def test_gram_reference_equals_the_pairwise_reference():
    x = _case("shared direction")
    a, b = gram_reference(x), pairwise_reference(x.numpy())
    assert a == pytest.approx(b, rel=1e-10)


def test_million_rows_against_a_float64_reference():
    x = torch.randn(1_000_000, 16, generator=_gen(2)) + 0.5  # κ ≈ 2
    got = tg.similarity_stats(x, progress=False)
    _close(got, gram_reference(x))


def test_mixed_split_equals_one_call():
    x = _case("shared direction")
    acc = SimilarityAccumulator(precision="mixed")
    for part in (x[:1500], x[1500:1501], x[1501:]):
        acc.update(part)
    _close(acc.compute(), pairwise_reference(x.numpy()))


def test_zero_rows_dropped_in_the_mixed_path():
    x = _case("random").clone()
    x[[3, 700, 4999]] = 0.0
    st = tg.similarity_stats(x, progress=False, precision="mixed")
    assert (st.n_vectors, st.n_dropped) == (N - 3, 3)
    _close(st, pairwise_reference(x.numpy()))


@pytest.mark.parametrize("scale", [1e200, 1e-200, 1e-160, 1e150])
def test_float64_rows_of_any_scale_give_the_same_epsilon(scale):
    x = torch.randn(300, 12, generator=_gen(3), dtype=torch.float64) + 0.7
    ref = pairwise_reference(x.numpy())
    st = tg.similarity_stats(x * scale, progress=False)
    _close(st, ref, rel=1e-12)
    assert st.n_dropped == 0


@pytest.mark.parametrize("scale", [1e30, 1e-30])
def test_float32_rows_whose_norm_overflows_in_float32(scale):
    x = torch.randn(2048, 12, generator=_gen(4)) + 0.7
    ref = pairwise_reference(x.numpy())
    st = tg.similarity_stats(x * scale, progress=False, precision="mixed")
    _close(st, ref)


def test_mixed_scale_rows_in_one_block():
    x = torch.randn(300, 12, generator=_gen(5), dtype=torch.float64)
    ref = pairwise_reference(x.numpy())
    y = x.clone()
    y[::2] *= 1e200
    y[1::3] *= 1e-200
    _close(tg.similarity_stats(y, progress=False), ref, rel=1e-12)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nan_inf_refused_in_the_float32_path_naming_the_row(bad):
    x = torch.randn(4096, 8, generator=_gen(6))
    x[3000, 5] = bad
    with pytest.raises(InputError, match="first at row 3000"):
        tg.similarity_stats(x, progress=False, precision="mixed", block_size=2048)


def _fast_state(x: torch.Tensor, workers: int) -> _gram.GramState:
    state = _gram.GramState(x.shape[1], torch.device("cpu"))
    edges = [0, 20000, 40000, x.shape[0]]
    for a, b in zip(edges, edges[1:]):
        assert _gram.add_block_mixed(state, x[a:b], a, workers=workers) == (b - a, b - a)
    return state


def test_fast_pass_gives_the_same_bits_on_any_number_of_threads(monkeypatch):
    # rows not a multiple of the step or the ?syrk part: partial steps and parts on every path (the last
    # block is 3 parts, the last of them short, so 3 workers take the parallel path in every block)
    x = torch.randn(40_000 + 3 * _gram.PART_ROWS - 500, 40, generator=_gen(7)) + 0.4
    workers: list[int] = []
    real = _gram.parallel_map
    monkeypatch.setattr(_gram, "parallel_map", lambda fn, items, n: workers.append(n) or real(fn, items, n))
    one, three = _fast_state(x, 1), _fast_state(x, 3)
    assert one.mixed_blocks == three.mixed_blocks == 3 and one.n == three.n == x.shape[0]
    assert workers == [1, 1, 1, 3, 3, 3]  # the fast pass ran, on 3 workers
    assert three.local.R.shape == (_gram.PART_ROWS, 40)
    assert torch.equal(one.C, three.C) and torch.equal(one.sr, three.sr) and torch.equal(one.c, three.c)
    acc = SimilarityAccumulator(precision="mixed")
    acc.state = three
    acc.n_total = three.n
    _close(acc.compute(), gram_reference(x))  # 64k rows: the pairwise reference took 25 s


def test_bits_do_not_depend_on_the_cut_into_blocks_of_whole_parts():
    # parts go into the state in order: one call, or blocks of 1, 2 or 3 parts, on 1 or 3 workers
    x = torch.randn(6 * _gram.PART_ROWS + 1000, 24, generator=_gen(12)) + 0.3

    def state(block: int, workers: int) -> _gram.GramState:
        st = _gram.GramState(24, torch.device("cpu"))
        for a in range(0, x.shape[0], block):
            _gram.add_block_mixed(st, x[a : a + block], a, workers=workers)
        return st

    ref = state(x.shape[0], 1)
    for block, workers in [(x.shape[0], 3), (_gram.PART_ROWS, 2), (2 * _gram.PART_ROWS, 3), (3 * _gram.PART_ROWS, 1)]:
        st = state(block, workers)
        assert torch.equal(st.C, ref.C) and torch.equal(st.sr, ref.sr), (block, workers)
    # and the result through similarity_stats, which hands contiguous float32 rows over in one block
    acc = SimilarityAccumulator(precision="mixed")
    acc.state, acc.n_total = ref, ref.n
    assert tg.similarity_stats(x, progress=False).epsilon == acc.compute().epsilon


def test_fewer_parts_than_workers_run_in_turn_on_every_blas_thread(monkeypatch):
    # a chunk of fewer parts than workers (one part of 300-wide rows on 2 workers): the parts run in turn,
    # each ?syrk on the workers' BLAS threads (OpenBLAS's threaded ?syrk has other bits: float32 rounding)
    x = torch.randn(_gram.PART_ROWS, 300, generator=_gen(13)) + 0.2
    seen: list[tuple[str, int]] = []
    real_map, real_blas = _gram.parallel_map, _gram._blas_threads
    monkeypatch.setattr(_gram, "parallel_map", lambda fn, items, n: seen.append(("pool", n)) or real_map(fn, items, n))
    monkeypatch.setattr(_gram, "_blas_threads", lambda n: seen.append(("blas", n)) or real_blas(n))
    states = []
    for workers in (1, 2):
        st = _gram.GramState(300, torch.device("cpu"))
        assert _gram.add_block_mixed(st, x, 0, workers=workers) == (x.shape[0], x.shape[0])
        states.append(st)
    assert seen == [("blas", 1), ("pool", 1), ("blas", 2), ("pool", 1)]
    assert torch.equal(states[0].sr, states[1].sr)  # the sums are not BLAS work
    assert torch.allclose(states[0].C, states[1].C, rtol=1e-6, atol=1e-6 * float(states[0].C.abs().max()))


def test_grams_too_wide_for_the_memory_bound_run_in_turn():
    # parallel parts hold `workers` d² Grams at once: beyond HELD_BYTES the parts run in turn
    assert _gram._parallel_parts(8, 2, 640) and not _gram._parallel_parts(1, 2, 640)
    assert not _gram._parallel_parts(8, 2, 16384) and _gram._parallel_parts(8, 1, 16384)
    assert _gram.chunk_rows(2, 16384) == 2 * _gram.PART_ROWS  # never under the workers' parts
    assert _gram.chunk_rows(2, 8192) == 4 * _gram.PART_ROWS  # 4 Grams of 256 MiB


@pytest.mark.parametrize("d", [16, 640, 2048, 4096, 16384])
def test_default_blocks_are_whole_parts(d):
    rows = _gram.default_block_rows(d, torch.float32)
    assert rows * 4 * d <= _gram.BLOCK_BYTES or rows == _gram.MIXED_MIN_ROWS
    assert rows % _gram.PART_ROWS == 0 if rows >= _gram.PART_ROWS else rows == _gram.BLOCK_BYTES // (4 * d)
    for w in (1, 2, 3, 8):
        assert _gram.chunk_rows(w) % (_gram.PART_ROWS * w) == 0 and _gram.chunk_rows(w) >= _gram.MIXED_MAX_ROWS


def test_fast_pass_sums_equal_float64_sums_of_its_float32_residuals():
    # Σ r_i (64-row float32 sums) and C (float32 ?syrk) against float64 sums of the same float32 residuals
    x = torch.randn(5000, 24, generator=_gen(8)) * torch.linspace(0.1, 10.0, 24)
    state = _gram.GramState(24, torch.device("cpu"))
    _gram.add_block_mixed(state, x, 0)
    u = x.double() / x.double().norm(dim=1, keepdim=True)
    r = (u.float() - state.c32).double()  # the float32 residuals to rounding
    assert torch.allclose(state.sr, r.sum(0), rtol=0, atol=5e-4)
    assert torch.allclose(state.C, r.T @ r, rtol=1e-5, atol=5e-4)


@pytest.mark.parametrize("bad_row", [100, 17_000, 29_999])
def test_a_rejected_block_leaves_the_accumulator_as_it_was(bad_row):
    good = torch.randn(3000, 16, generator=_gen(9))
    acc = SimilarityAccumulator(precision="mixed")
    acc.update(good)
    before = (acc.n_total, acc.state.n, acc.state.C.clone(), acc.state.sr.clone())
    block = torch.randn(30_000, 16, generator=_gen(10))
    block[bad_row, 3] = float("nan")
    with pytest.raises(InputError, match=f"first at row {3000 + bad_row}"):
        acc.update(block)
    assert (acc.n_total, acc.state.n) == before[:2]
    assert torch.equal(acc.state.C, before[2]) and torch.equal(acc.state.sr, before[3])


def test_blas_threads_are_restored_after_overlapping_calls_and_errors():
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_info

    def blas_threads():  # numpy's own BLAS (another library loaded later is not the kernel's concern)
        return sorted(
            i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas" and "numpy" in i["filepath"]
        )

    before = blas_threads()
    assert before
    x = torch.randn(40_000, 16, generator=_gen(11))
    with ThreadPoolExecutor(3) as pool:  # concurrent scans (they take turns on the BLAS limit)
        eps = list(pool.map(lambda _: tg.similarity_stats(x, progress=False).epsilon, range(6)))
    assert len(set(eps)) == 1 and blas_threads() == before
    bad = x.clone()
    bad[30_000, 2] = float("nan")
    with pytest.raises(InputError, match="first at row 30000"):
        tg.similarity_stats(bad, progress=False)
    assert blas_threads() == before
    with _gram._blas_threads(1):
        assert set(blas_threads()) == {1}
    assert blas_threads() == before


def test_bad_precision():
    with pytest.raises(InputError, match="precision"):
        SimilarityAccumulator(precision="half")


@pytest.mark.parametrize("eps", [float("nan"), float("inf"), -float("inf")])
def test_model_class_of_refuses_non_finite(eps):
    with pytest.raises(InputError, match="finite"):
        model_class_of(eps)


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(mean=-2.0, std=0.1), r"mean must be in \[-1, 1\]"),
        (dict(mean=1.5, std=0.1), r"mean must be in \[-1, 1\]"),
        (dict(mean=0.0, std=1.5), r"std must be <= 1"),
        (dict(epsilon=-1.5), "epsilon must be >= -1"),
    ],
)
def test_capacity_estimate_refuses_impossible_moments(kw, match):
    with pytest.raises(InputError, match=match):
        tg.capacity_estimate(640, **kw)
