"""The first-order (influence) standard error of PGA z (``stderr="influence"``): against the literal
refit it expands, on known answers and invariances, and z alone (``stderr="none"``)."""

import math

import numpy as np
import pytest
import torch

import tl_geometry as tg
from tl_geometry.errors import InputError
from tl_geometry.metrics import _pga_influence
from tl_geometry.metrics._spearman import make_pairs, pair_endpoints

from .test_pga import _setup


def _separated(N, d, k, n_null, seed, decay=3.0):
    """Points with a well-separated spectrum (eigenvalue ratio e^(2/decay) between neighbours) and an offset."""
    g = torch.Generator().manual_seed(seed)
    V = tg.readout_basis(torch.randn(d, 3 * d, generator=g), k)
    H = torch.randn(N, d, generator=g, dtype=torch.float64) * torch.exp(-torch.arange(d) / decay) + 0.3
    return H, V, tg.haar_bases(d, k, n_null, seed=seed + 1)


# The expansion drops terms of relative order n_g/N = 1/G (the deleted fraction) against the
# first-order ones, so at G = 20 the influence error should sit within a few times 1/G = 5 % of
# the refit; measured: 0.97–1.04 on these inputs. We allow 2/G = 10 %.
TOL = 0.10


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("ccr", [0, 1, 3])
def test_influence_agrees_with_the_literal_refit(seed, ccr):
    """Every null expanded / refit (refit_nulls = n_null): the same quantity, to first order."""
    H, V, B = _separated(300, 16, 3, 12, seed)
    a = tg.pga_score(H, V, ccr=ccr, null_bases=B, stderr="influence", refit_nulls=12, n_groups=20)
    b = tg.pga_score(H, V, ccr=ccr, null_bases=B, stderr="jackknife", refit_nulls=12, n_groups=20)
    assert a.z == b.z and a.stderr_null == b.stderr_null
    assert a.stderr_points == pytest.approx(b.stderr_points, rel=TOL)
    assert a.stderr_rho == pytest.approx(b.stderr_rho, rel=TOL)
    assert a.stderr_method.startswith("influence") and b.stderr_method.startswith("jackknife")


@pytest.mark.parametrize("ccr", [0, 1])
def test_influence_with_fixed_directions_agrees_with_the_fixed_jackknife(ccr):
    """refit_nulls=0: only the deleted pairs (ranks, centering, directions of the full sample) — the
    first-order version of the per-group-sums jackknife, which is exact Pearson over the pairs left."""
    H, V, B = _setup(200, 16, 3, 20)
    a = tg.pga_score(H, V, ccr=ccr, null_bases=B, stderr="influence", refit_nulls=0, n_groups=20)
    b = tg.pga_score(H, V, ccr=ccr, null_bases=B, stderr="jackknife", refit_nulls=0, n_groups=20)
    assert a.stderr_points == pytest.approx(b.stderr_points, rel=0.05)
    assert a.stderr_rho == pytest.approx(b.stderr_rho, rel=0.05)
    assert "held fixed" in a.stderr_method


@pytest.mark.parametrize("seed", [0, 1])
def test_the_re_estimated_directions_matter_and_are_captured(seed):
    """At CCR-1 on a cloud whose top two variances are close (sd 3 and 2.5 over a floor of 0.5), the
    removed direction moves with the sample: holding it fixed misses much of the error (measured
    0.28–0.58 of the refit's), the influence error follows the refit (0.96–0.97)."""
    d, k = 16, 3
    g = torch.Generator().manual_seed(seed)
    V = tg.readout_basis(torch.randn(d, 3 * d, generator=g), k)
    sd = torch.full((d,), 0.5)
    sd[0], sd[1] = 3.0, 2.5
    Q = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0]
    H = (torch.randn(300, d, generator=g, dtype=torch.float64) * sd) @ Q.T
    B = tg.haar_bases(d, k, 12, seed=seed + 1)
    infl = tg.pga_score(H, V, ccr=1, null_bases=B, refit_nulls=12, n_groups=20)
    refit = tg.pga_score(H, V, ccr=1, null_bases=B, stderr="jackknife", refit_nulls=12, n_groups=20)
    fixed = tg.pga_score(H, V, ccr=1, null_bases=B, stderr="jackknife", refit_nulls=0, n_groups=20)
    assert fixed.stderr_points < 0.7 * refit.stderr_points
    assert infl.stderr_points == pytest.approx(refit.stderr_points, rel=TOL)


def test_stderr_none_gives_the_same_z_bit_for_bit_and_nan_errors():
    H, V, B = _setup(120, 16, 3, 10)
    for ccr in (0, 1, 5):
        ref = tg.pga_score(H, V, ccr=ccr, null_bases=B)
        for off in ("none", False, None):
            s = tg.pga_score(H, V, ccr=ccr, null_bases=B, stderr=off)
            assert s.z == ref.z and s.rho_read == ref.rho_read and torch.equal(s.null_rhos, ref.null_rhos)
            assert all(math.isnan(v) for v in (s.stderr, s.stderr_null, s.stderr_points, s.stderr_rho))
            assert s.stderr_method == "none" and s.n_groups == 0 and s.to_dict()["stderr_method"] == "none"
        assert tg.pga_score(H, V, ccr=ccr, null_bases=B, stderr="jackknife").z == ref.z
    assert tg.pga_score(H, V, null_bases=B, stderr=True).stderr_method == tg.metrics.pga.STDERR_METHOD


@pytest.mark.parametrize("bad", ["bootstrap", "Influence", 1, 0, 2.5, ["none"]])
def test_bad_stderr_is_refused(bad):
    H, V, B = _setup(30, 8, 2, 5)
    with pytest.raises(InputError, match=r"stderr must be 'influence' \(the default\), 'jackknife'"):
        tg.pga_score(H, V, null_bases=B, stderr=bad)


def test_permuting_the_points_changes_nothing():
    """Shuffling the rows of H (and their group labels with them) leaves z and every error as they were."""
    H, V, B = _setup(90, 12, 3, 8)
    labels = torch.arange(90) % 6
    perm = torch.randperm(90, generator=torch.Generator().manual_seed(5))
    for ccr in (0, 1):
        a = tg.pga_score(H, V, ccr=ccr, null_bases=B, groups=labels, refit_nulls=8)
        b = tg.pga_score(H[perm], V, ccr=ccr, null_bases=B, groups=labels[perm], refit_nulls=8)
        assert b.z == pytest.approx(a.z, rel=1e-9)
        assert b.stderr_points == pytest.approx(a.stderr_points, rel=1e-6)
        assert b.stderr_rho == pytest.approx(a.stderr_rho, rel=1e-6)


def test_a_readout_that_holds_the_points_has_a_small_rho_error():
    """Known answer: H inside the readout subspace gives ρ_read ≈ 1 for every sample of points, so
    its point-sample error is tiny; z is large and its error finite."""
    g = torch.Generator().manual_seed(0)
    V = tg.readout_basis(torch.randn(32, 80, generator=g), 8)
    H = torch.randn(200, 8, generator=g) @ V.T + 0.01 * torch.randn(200, 32, generator=g)
    s = tg.pga_score(H, V, n_null=20, ccr=0)
    assert s.rho_read > 0.99 and s.stderr_rho < 1e-3 and s.z > 5 and math.isfinite(s.stderr)


def test_block_chunked_and_dense_pair_sums_agree(monkeypatch):
    """The three ways of forming C V (blocks of the pair vector, the dense N × N matrix, chunks of pairs)."""
    H, V, B = _separated(150, 12, 3, 6, 0)
    blocks = tg.pga_score(H, V, ccr=1, null_bases=B, refit_nulls=6)
    monkeypatch.setattr(_pga_influence, "BLOCK_PRODUCTS", False)
    dense = tg.pga_score(H, V, ccr=1, null_bases=B, refit_nulls=6)
    monkeypatch.setattr(_pga_influence, "DENSE_MAX_POINTS", 0)
    chunked = tg.pga_score(H, V, ccr=1, null_bases=B, refit_nulls=6)
    assert chunked.stderr_points == pytest.approx(dense.stderr_points, rel=1e-9)
    assert blocks.stderr_points == pytest.approx(dense.stderr_points, rel=1e-9)
    assert blocks.stderr_rho == pytest.approx(dense.stderr_rho, rel=1e-9) and blocks.z == dense.z


def test_cells_from_the_sort_equal_the_gathered_cells(monkeypatch):
    """The cells carried in the sort's low bits give the numbers of the gather, bit for bit."""
    H, V, B = _separated(120, 12, 3, 6, 2)
    packed = tg.pga_score(H, V, ccr=1, null_bases=B, refit_nulls=3)
    monkeypatch.setattr(_pga_influence, "_packed_fits", lambda m, shift: False)
    gathered = tg.pga_score(H, V, ccr=1, null_bases=B, refit_nulls=3)
    assert packed.to_dict() == gathered.to_dict()


@pytest.mark.parametrize("n", [7, 256, 300, 600])
def test_block_products_equal_the_explicit_matrix(n):
    """C V from the blocks against C built pair by pair from the endpoints (one block, exact
    multiples of the block, a short last block)."""
    pairs = make_pairs(n, None, 0)
    g = np.random.default_rng(n)
    c, Vt = g.standard_normal(pairs.n_pairs), torch.from_numpy(g.standard_normal((n, 3)))
    i, j = pair_endpoints(pairs)
    C = np.zeros((n, n))
    C[i, j] = c
    C += C.T
    ctx = _pga_influence.InfluenceContext.__new__(_pga_influence.InfluenceContext)
    ctx.pairs, ctx.shared = pairs, {}
    np.testing.assert_allclose(ctx._apply_blocks(c, Vt).numpy(), C @ Vt.numpy(), rtol=1e-12, atol=1e-12)


def test_general_path_equals_the_fast_path(monkeypatch):
    """The pair-order path (ties, or not on CPU) gives the same numbers as the CPU fast path without ties."""
    H, V, B = _separated(120, 12, 3, 6, 1)
    fast = tg.pga_score(H, V, ccr=1, null_bases=B, refit_nulls=3)
    monkeypatch.setattr(_pga_influence, "_packable", lambda y: False)
    slow = tg.pga_score(H, V, ccr=1, null_bases=B, refit_nulls=3)
    assert slow.z == fast.z
    assert slow.stderr_points == pytest.approx(fast.stderr_points, rel=1e-9)
    assert slow.stderr_rho == pytest.approx(fast.stderr_rho, rel=1e-9)


def test_ties_and_subsampled_pairs_run():
    H, V, B = _setup(80, 12, 3, 6)
    H = torch.cat([H, H[:10]])  # duplicated points: tied similarities
    s = tg.pga_score(H, V, ccr=1, null_bases=B)
    assert math.isfinite(s.stderr) and s.stderr > 0
    s = tg.pga_score(H, V, ccr=1, null_bases=B, max_pairs=1000)
    assert s.pairs_subsampled and math.isfinite(s.stderr) and s.stderr > 0


def _slow_smoothed(vs, w):
    m = len(vs)
    h = max(1, math.ceil(math.sqrt(m)))
    out = np.empty(m)
    for j in range(m):
        lo, hi = max(j - h, 0), min(j + h, m - 1)
        span = vs[hi] - vs[lo]
        out[j] = ((hi - lo) / (m * span) if span > 0 else 0.0) * (w[j] - w[lo : hi + 1].mean())
    return out


@pytest.mark.parametrize("m", [3, 8, 20, 500, 2001])
def test_smoothed_rank_derivative_equals_the_slow_window(m):
    rng = np.random.default_rng(m)
    vs, w = np.sort(rng.normal(size=m)), rng.normal(size=m)
    vs[m // 2] = vs[m // 2 - 1]  # a tie: a zero-width span somewhere when m is small
    np.testing.assert_allclose(_pga_influence._smoothed_weights(vs, w), _slow_smoothed(vs, w), atol=1e-12)


@pytest.mark.parametrize("chunk", [7, 64, 1 << 15])
def test_smoothed_weights_in_chunks_with_a_flat_run_and_a_given_cumulative_sum(monkeypatch, chunk):
    """Middle windows in chunks of any size, a run of equal values longer than a window (zero
    density there), the caller's cumulative sum and output vector: the slow window's numbers."""
    monkeypatch.setattr(_pga_influence, "_CHUNK", chunk)
    rng = np.random.default_rng(chunk)
    m = 3000  # h = 55: windows of 111 values
    vs, w = np.sort(rng.normal(size=m)), rng.normal(size=m)
    vs[1000:1200] = vs[1000]
    cw = np.concatenate([[0.0], np.cumsum(w)])
    out = np.full(m, np.nan)
    got = _pga_influence._smoothed_weights(vs, w, cw, out=out)
    assert got is out
    slow = _slow_smoothed(vs, w)
    assert (slow[1100:1110] == 0).all()  # the flat run's middle
    np.testing.assert_allclose(got, slow, atol=1e-12)
    np.testing.assert_allclose(_pga_influence._smoothed_weights(vs, w), slow, atol=1e-12)


@pytest.mark.parametrize("chunk", [5, 333])
def test_the_per_view_passes_in_chunks_give_the_same_error(monkeypatch, chunk):
    """The per-view sums (term 1, T^y, T^x) and the window means run chunk by chunk: any chunk size
    gives the one-chunk numbers (to rounding) and the same z."""
    H, V, B = _separated(160, 12, 3, 8, 3)  # 12,720 pairs: one chunk by default
    one = tg.pga_profile(H, V, ccrs=[0, 2], null_bases=B, refit_nulls=3)
    monkeypatch.setattr(_pga_influence, "_CHUNK", chunk)
    many = tg.pga_profile(H, V, ccrs=[0, 2], null_bases=B, refit_nulls=3)
    for c in (0, 2):
        assert many[c].z == one[c].z
        assert many[c].stderr_points == pytest.approx(one[c].stderr_points, rel=1e-11)
        assert many[c].stderr_rho == pytest.approx(one[c].stderr_rho, rel=1e-11)
