"""Intrinsic dimension (ID) of a point cloud: TwoNN and GRIDE, from nearest-neighbour distance ratios.

The representation-geometry literature profiles the hidden layers of a transformer by the ID of
each layer's point cloud (Valeriani et al., "The geometry of hidden representations of large
transformer models", NeurIPS 2023). Both estimators here assume the density is locally constant
on a d-dimensional manifold over the neighbourhoods they use; both take a point cloud ``x`` (N, d)
and return a frozen dataclass with the estimate and its standard error.

* **TwoNN** (Facco, d'Errico, Rodriguez & Laio, "Estimating the intrinsic dimension of datasets by
  a minimal neighborhood information", Sci. Rep. 7, 12140, 2017): with r1, r2 each point's
  distances to its first and second nearest neighbours, μ = r2/r1 follows the Pareto law
  F(μ) = 1 − μ^(−d), μ ≥ 1. The paper sorts the μ_i, discards the largest fraction, and fits
  −log(1 − F_emp(μ_(i))) = d · log μ_(i) by least squares through the origin, with
  F_emp(μ_(i)) = i / N. See [`twonn`][tl_geometry.metrics.intrinsic_dimension.twonn].
* **GRIDE** (Denti, Doimo, Laio & Mira, "The generalized ratios intrinsic dimension estimator",
  Sci. Rep. 12, 20005, 2022): μ = r_{n2}/r_{n1} for neighbour orders n1 < n2 has density
  f(μ) = d (μ^d − 1)^(n2−n1−1) / (B(n2−n1, n1) μ^((n2−1)d+1)), μ > 1, and d is its maximum
  likelihood estimate; n2 = 2·n1 at n1 = 1, 2, 4, … gives the ID as a function of scale. See
  [`gride`][tl_geometry.metrics.intrinsic_dimension.gride] and
  [`gride_scaling`][tl_geometry.metrics.intrinsic_dimension.gride_scaling].

The reference implementations followed (and tested against) are scikit-dimension 0.5's
``skdim.id.TwoNN`` / ``skdim.id.GRIDE`` (``skdim/id/_TwoNN.py``, ``skdim/id/_GRIDE.py``) and
DADApy's ``IdEstimation.compute_id_2NN`` / ``return_id_scaling_gride`` (``dadapy/id_estimation.py``,
helpers ``_neg_dloglik_did``, ``_filter_mus``, ``_fisher_info_scaling`` in
``dadapy/_utils/utils.py``). Where they differ, or where we chose, the docstrings say so.

**Neighbours** ([`neighbor_distances`][tl_geometry.metrics.intrinsic_dimension.neighbor_distances]):
exact Euclidean distances, in float64 whatever the input dtype. Candidates come from a chunked
float64 ``‖a‖² + ‖b‖² − 2a·b`` search on the centered points (``max_memory_mb`` bounds each
chunk), then the distances to the best k + 4 candidates are recomputed as ‖x_i − x_j‖ from the
uncentered float64 points and re-sorted, so rounding of the fast formula (which loses relative
precision for neighbours much closer than the cloud's radius) never reaches the ratios. A point
is never its own neighbour (excluded by index), so a duplicate of it is found at distance 0.

**Standard errors** (our choice: the references treat the N ratios as independent, and they
are not). Points that are each other's neighbours share distances (a mutual nearest-neighbour
pair has the same r1), so their μ are correlated, and the independent-ratio errors (skdim's
GRIDE ``error_``, DADApy's Fisher-information error, a plain bootstrap of the μ) are too small:
across 40 fresh samples of a 5-dimensional Gaussian (N = 1000) the spread of the estimates was
1.34× the mean independent-ratio error for TwoNN and 1.75× for GRIDE at n1 = 16. Every
``stderr`` here is that error times √(design effect), with the design effect
Var(Σ_i s_i) / Σ_i s_i² of the estimator's per-point score s_i and the variance of the sum
taken over neighbouring pairs: Σ_i s_i² + 2 Σ_{i~j} s_i s_j, i ~ j when one is among the other's
first n2 neighbours (n2 = 2 for TwoNN) — a neighbourhood (Conley-type) HAC estimate. Measured
calibration on the same 40 samples: spread / mean stderr = 1.11 (TwoNN fit), 1.09 (TwoNN MLE),
1.08, 1.00, 1.05 (GRIDE n1 = 1, 4, 16). The uncorrected errors stay in ``stderr_iid`` /
``stderr_mle_iid`` / ``stderr_fisher``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from tl_geometry import _checks
from tl_geometry.errors import InputError
from tl_geometry.metrics.thread_choice import ThreadChoice, resolve
from tl_geometry.tables import Tabular

__all__ = [
    "TwoNNResult",
    "GrideResult",
    "GrideScaling",
    "DuplicatePointsWarning",
    "twonn",
    "gride",
    "gride_scaling",
    "neighbor_distances",
    "DEFAULT_DISCARD_FRACTION",
    "DEFAULT_N_BOOTSTRAP",
    "DEFAULT_MAX_MEMORY_MB",
    "DEFAULT_RANGE_MAX",
    "MIN_POINTS",
    "TWONN_STDERR",
    "TWONN_MLE_STDERR",
    "GRIDE_STDERR",
]

DEFAULT_DISCARD_FRACTION = 0.1
"""Fraction of the largest μ TwoNN leaves out of the fit (Facco et al. 2017; skdim's default, DADApy's ``mu_fraction=0.9``)."""
DEFAULT_N_BOOTSTRAP = 200
"""Bootstrap resamples of the μ values behind the standard error of the TwoNN fit."""
DEFAULT_MAX_MEMORY_MB = 256.0
"""Memory bound (MiB) of one chunk of the neighbour search."""
DEFAULT_RANGE_MAX = 64
"""Largest neighbour order of [`gride_scaling`][tl_geometry.metrics.intrinsic_dimension.gride_scaling] (DADApy's and skdim's default)."""
MIN_POINTS = 3
"""Fewest points accepted: each point needs two neighbours."""

_MARGIN = 4  # candidates beyond k, re-ranked after their distances are recomputed
_REFINE_RATIO = 100.0  # recompute a row's distances exactly when (‖x_i‖² + ‖x_j‖²) / r² exceeds this

TWONN_STDERR = "bootstrap over points (their μ values; B resamples, seeded) x sqrt(neighbourhood design effect)"
"""How `TwoNNResult.stderr` is computed (recorded in every result)."""
TWONN_MLE_STDERR = "d / sqrt(n_kept) (censored-Pareto Fisher information) x sqrt(neighbourhood design effect)"
"""How `TwoNNResult.stderr_mle` is computed."""
GRIDE_STDERR = "1 / sqrt(observed Fisher information) (DADApy, skdim) x sqrt(neighbourhood design effect)"
"""How `GrideResult.stderr` is computed."""


class DuplicatePointsWarning(UserWarning):
    """Some points had a duplicate (distance 0 to their nearest neighbour) and were dropped."""


# ----------------------------------------------------------------------------- results
@dataclass(frozen=True)
class TwoNNResult(Tabular):
    """TwoNN intrinsic dimension of one point cloud (Facco et al. 2017).

    Attributes:
        dimension: the paper's estimate: slope of the least-squares line through the origin of
            −log(1 − i/N) on log μ_(i), i = 1 … n_kept (skdim ``TwoNN()``; DADApy
            ``compute_id_2NN(algorithm="base")``).
        stderr: standard error of ``dimension``: ``stderr_iid`` · √``design_effect``
            ([`TWONN_STDERR`][tl_geometry.metrics.intrinsic_dimension.TWONN_STDERR]).
        dimension_mle: maximum-likelihood estimate with the discarded μ treated as censored:
            (n_kept − 1) / (Σ_{i ≤ n_kept} log μ_(i) + (N − n_kept) log μ_(n_kept)); at
            ``discard_fraction=0`` it is (N − 1) / Σ log μ_i (skdim ``TwoNN(method="mle")``;
            DADApy's ``algorithm="ml"`` is the ``discard_fraction=0`` value).
        stderr_mle: ``stderr_mle_iid`` · √``design_effect``.
        n_points: N, the points whose μ entered (after subsampling and dropping duplicates).
        n_kept: μ values in the fit: int(N · (1 − discard_fraction)) (fewer by one at
            ``discard_fraction=0``, see [`twonn`][tl_geometry.metrics.intrinsic_dimension.twonn]).
        n_total: rows of the input.
        n_duplicates: points dropped because their nearest neighbour was at distance 0.
        discard_fraction: as given.
        scale: mean of the first- and second-neighbour distances over the N points (DADApy's
            ``intrinsic_dim_scale``): the length scale the estimate probes.
        n_bootstrap, seed: of the bootstrap (and of the subsample when ``max_points`` applied).
        stderr_iid: the bootstrap standard deviation of the fit (μ treated as independent).
        stderr_mle_iid: dimension_mle / √n_kept (μ treated as independent).
        design_effect: Var(Σ s_i) / Σ s_i² of the censored-MLE scores with first- and
            second-neighbour pairs' covariances (module docstring); about 1.4 on a 5-D Gaussian cloud.
        stderr_method, stderr_mle_method: how the standard errors were computed.
    """

    dimension: float
    stderr: float
    dimension_mle: float
    stderr_mle: float
    n_points: int
    n_kept: int
    n_total: int
    n_duplicates: int
    discard_fraction: float
    scale: float
    n_bootstrap: int
    seed: int
    stderr_iid: float = float("nan")
    stderr_mle_iid: float = float("nan")
    design_effect: float = 1.0
    stderr_method: str = TWONN_STDERR
    stderr_mle_method: str = TWONN_MLE_STDERR
    estimator: str = "twonn"


@dataclass(frozen=True)
class GrideResult(Tabular):
    """GRIDE intrinsic dimension at one pair of neighbour orders (Denti et al. 2022).

    Attributes:
        dimension: the maximum-likelihood d (root of the score, see [`gride`][tl_geometry.metrics.intrinsic_dimension.gride]).
        stderr: ``stderr_fisher`` · √``design_effect`` ([`GRIDE_STDERR`][tl_geometry.metrics.intrinsic_dimension.GRIDE_STDERR]).
        n1, n2: the neighbour orders, μ = r_{n2} / r_{n1}.
        n_points: points with a defined μ (after subsampling and dropping duplicates).
        n_used: of those, the μ values in the likelihood (after DADApy's outlier cut).
        n_total: rows of the input.
        n_duplicates: points dropped because r_{n1} = 0.
        n_outliers: μ values dropped by the outlier cut (0 when ``drop_outliers=False``).
        scale: mean of r_{n1} and r_{n2} over the n_points points (DADApy's ``rs_scaling``).
        seed: of the subsample (when ``max_points`` applied).
        stderr_fisher: 1 / √(observed Fisher information) at ``dimension``: the error DADApy and
            skdim report (ratios treated as independent).
        design_effect: Var(Σ s_i) / Σ s_i² of the per-ratio scores with the covariances of pairs
            within n2 neighbours of each other (module docstring).
        stderr_method: how ``stderr`` was computed.
    """

    dimension: float
    stderr: float
    n1: int
    n2: int
    n_points: int
    n_used: int
    n_total: int
    n_duplicates: int
    n_outliers: int
    scale: float
    seed: int
    stderr_fisher: float = float("nan")
    design_effect: float = 1.0
    stderr_method: str = GRIDE_STDERR
    estimator: str = "gride"


@dataclass(frozen=True)
class GrideScaling(Tabular):
    """GRIDE at n1 = 1, 2, 4, … with n2 = 2·n1: the ID as a function of scale.

    ``to_pandas()`` has one row per scale. ``estimates[i].scale`` is the length scale of row i.

    Attributes:
        estimates: one [`GrideResult`][tl_geometry.metrics.intrinsic_dimension.GrideResult] per scale, n1 ascending.
        range_max: the largest neighbour order allowed (n2 ≤ min(range_max, N − 1)).
    """

    estimates: tuple[GrideResult, ...]
    range_max: int

    def records(self) -> list[dict[str, Any]]:
        """One row per scale."""
        return [r for e in self.estimates for r in e.records()]

    def __iter__(self) -> Iterator[GrideResult]:
        return iter(self.estimates)

    def __len__(self) -> int:
        return len(self.estimates)

    @property
    def dimensions(self) -> list[float]:
        """The estimates, n1 ascending."""
        return [e.dimension for e in self.estimates]

    @property
    def stderrs(self) -> list[float]:
        """Their standard errors."""
        return [e.stderr for e in self.estimates]

    @property
    def n1s(self) -> list[int]:
        """The n1 of each scale (n2 = 2·n1)."""
        return [e.n1 for e in self.estimates]


# ----------------------------------------------------------------------------- neighbours
def _points(x: Any, max_points: int | None, seed: int) -> tuple[Tensor, int]:
    """``x`` checked (2-D, floating, finite, N ≥ MIN_POINTS), subsampled to ``max_points`` rows."""
    t = _checks.float_matrix(x, "x", shape="(N, d): one point per row")
    n_total = t.shape[0]
    if max_points is not None and n_total > max_points:
        g = torch.Generator().manual_seed(seed)
        keep = torch.randperm(n_total, generator=g)[:max_points].sort().values
        t = t[keep.to(t.device)]
    if t.shape[0] < MIN_POINTS:
        raise InputError(
            f"x has {t.shape[0]} point(s); intrinsic dimension needs at least {MIN_POINTS} "
            "(each point needs two neighbours)"
        )
    return t, n_total


def neighbor_distances(
    x: Any, k: int, *, max_memory_mb: float = DEFAULT_MAX_MEMORY_MB, threads: ThreadChoice | None = None
) -> Tensor:
    """Exact Euclidean distances from each point to its k nearest other points, ascending.

    Args:
        x: points (N, d), a torch tensor or numpy array of a floating dtype.
        k: neighbours per point, 1 ≤ k ≤ N − 1.
        max_memory_mb: bound on the memory of one chunk of rows of the search (at least one
            row is processed at a time, whatever the bound).
        threads: the [`ThreadChoice`][tl_geometry.metrics.thread_choice.ThreadChoice] of the neighbour
            search's products (default: torch's setting).

    Returns:
        float64 tensor (N, k) on ``x``'s device: column j − 1 holds the distance to the j-th
        nearest neighbour. A point is not its own neighbour; a duplicate of it is, at 0.

    Raises:
        InputError: x not 2-D, not floating, NaN or inf; k out of range.

    Examples:
        >>> neighbor_distances(torch.tensor([[0.0], [1.0], [3.0]]), 2).tolist()
        [[1.0, 3.0], [1.0, 2.0], [2.0, 3.0]]
    """
    t = _checks.float_matrix(x, "x", shape="(N, d): one point per row")
    n = t.shape[0]
    k = _checks.integer(k, "k", lo=1, hi=max(n - 1, 1), why=f"neighbours of each of the N={n} points")
    if n < 2:
        raise InputError(f"x has {n} point(s); neighbours need at least 2")
    mem = _checks.real(max_memory_mb, "max_memory_mb", lo=0.0, lo_open=True)
    return _neighbors(t, k, mem, threads)[0]


def _neighbors(t: Tensor, k: int, max_memory_mb: float, threads: ThreadChoice | None = None) -> tuple[Tensor, Tensor]:
    """(distances, indices) of each point's k nearest other points, ascending; float64 / int64."""
    n, d = t.shape
    x64 = t.to(torch.float64)
    xc = x64 - x64.mean(0)
    sq = (xc * xc).sum(1)
    m = min(n - 1, k + _MARGIN)
    # per row of a chunk: a row of squared distances and top-k's copies
    chunk = max(1, int(max_memory_mb * 2**20 // (8 * (2 * n + 4 * m))))
    # rows refined together: their m difference vectors within the same bound, and cache-sized
    sub = max(1, min(64, int(max_memory_mb * 2**20 // (8 * m * max(d, 1)))))
    out = torch.empty(n, k, dtype=torch.float64, device=t.device)
    out_idx = torch.empty(n, k, dtype=torch.int64, device=t.device)
    with resolve(threads).kernel("dense", t.device):
        for s in range(0, n, chunk):
            e = min(n, s + chunk)
            d2 = torch.addmm(sq[s:e, None] + sq[None, :], xc[s:e], xc.T, alpha=-2.0)
            rows = torch.arange(e - s, device=t.device)
            d2[rows, rows + s] = math.inf  # never its own neighbour
            vals, cand = torch.topk(d2, m, dim=1, largest=False, sorted=False)
            del d2
            # ‖a‖² + ‖b‖² − 2a·b errs by ~eps·(‖a‖² + ‖b‖²): recompute rows where that is not
            # ≪ r² (and every row with a distance ≤ 0: duplicates) from the differences
            big = sq[s:e] + sq[cand].amax(1)
            need = (big > _REFINE_RATIO * vals.amin(1)).nonzero().flatten()
            dist = vals.clamp_min(0.0).sqrt()
            for j in range(0, len(need), sub):
                r = need[j : j + sub]
                diff = x64[s + r, None, :] - x64[cand[r]]
                dist[r] = torch.linalg.vector_norm(diff, dim=2)
            srt = dist.sort(dim=1)
            out[s:e] = srt.values[:, :k]
            out_idx[s:e] = cand.gather(1, srt.indices[:, :k])
    return out, out_idx


def _drop_duplicates(r_near: np.ndarray, what: str, stacklevel: int) -> tuple[np.ndarray, int]:
    """Mask of points whose ``r_near`` > 0, and the count dropped (warned); refuses all-duplicates."""
    ok = r_near > 0
    n_dup = int((~ok).sum())
    if n_dup == len(r_near):
        raise InputError(
            f"all {len(r_near)} points coincide with a neighbour ({what} = 0 for every point: "
            "all points identical or every point duplicated); intrinsic dimension needs distinct points"
        )
    if n_dup:
        warnings.warn(
            DuplicatePointsWarning(
                f"dropping {n_dup} of {len(r_near)} points with {what} = 0 (duplicate points); "
                "the estimate uses the other points"
            ),
            stacklevel=stacklevel,
        )
    return ok, n_dup


def _design_effect(score: np.ndarray, used: np.ndarray, idx: np.ndarray, window: int) -> float:
    """Var(Σ s) with neighbour covariances over Σ s²: the variance inflation from dependent points.

    ``score``: each point's score contribution (entries where ``used`` is False are ignored);
    ``idx``: each point's nearest-neighbour indices. Var(Σ s) = Σ_i s_i² + 2 Σ_{i~j} s_i s_j over
    unordered pairs with j among the first ``window`` neighbours of i or i among j's (a
    neighbourhood HAC / Conley-type estimate). Falls back to 1 if that sum is not positive.
    """
    s = np.where(used, score - score[used].mean(), 0.0)
    n = len(s)
    i = np.repeat(np.arange(n, dtype=np.int64), window)
    j = idx[:, :window].reshape(-1).astype(np.int64)
    key = np.unique(np.minimum(i, j) * n + np.maximum(i, j))
    a, b = key // n, key % n
    iid = float((s * s).sum())
    var = iid + 2.0 * float((s[a] * s[b]).sum())
    return var / iid if var > 0 and iid > 0 else 1.0


# ----------------------------------------------------------------------------- TwoNN
def _twonn_fit(log_mu_sorted: np.ndarray, n: int, n_fit: int) -> np.ndarray:
    """Slope through the origin of −log(1 − i/N) on the first n_fit sorted log μ (rows = resamples)."""
    xs = log_mu_sorted[..., :n_fit]
    y = -np.log1p(-np.arange(1, n_fit + 1) / n)
    return (xs * y).sum(-1) / (xs * xs).sum(-1)


def twonn(
    x: Any,
    *,
    discard_fraction: float = DEFAULT_DISCARD_FRACTION,
    n_bootstrap: int = DEFAULT_N_BOOTSTRAP,
    seed: int = 0,
    max_points: int | None = None,
    max_memory_mb: float = DEFAULT_MAX_MEMORY_MB,
    threads: ThreadChoice | None = None,
) -> TwoNNResult:
    """TwoNN intrinsic dimension (Facco et al., Sci. Rep. 7, 12140, 2017).

    For each point, μ_i = r2_i / r1_i (distances to its second and first nearest neighbours,
    Euclidean). On a d-dimensional manifold with locally constant density, μ is Pareto:
    F(μ) = 1 − μ^(−d), μ ≥ 1, so −log(1 − F(μ)) = d log μ. The definition here is the
    paper's and scikit-dimension's (``skdim.id.TwoNN._twonn``, identical in DADApy's
    ``_compute_id_2NN(algorithm="base")``):

    1. sort the N ratios, keep the n_kept = int(N · (1 − discard_fraction)) smallest;
    2. F_emp(μ_(i)) = i / N (N, not n_kept, in the denominator);
    3. ``dimension`` = Σ x_i y_i / Σ x_i² with x_i = log μ_(i), y_i = −log(1 − i/N), i ≤ n_kept
       (least squares through the origin).

    ``dimension_mle`` is the maximum-likelihood estimate of the same Pareto law with the
    discarded ratios treated as right-censored at μ_(n_kept) (log μ is exponential with rate d;
    keeping the smallest n_kept of N is Type-II censoring), in its unbiased form
    (n_kept − 1) / (Σ_{i ≤ n_kept} log μ_(i) + (N − n_kept) log μ_(n_kept)): skdim's
    ``method="mle"``. At ``discard_fraction=0`` it is (N − 1) / Σ log μ_i, DADApy's
    ``algorithm="ml"`` (which ignores the discard fraction) and GRIDE at n1 = 1, n2 = 2.

    Our choices (the papers and references give no uncertainty, or differ):

    * ``stderr_iid`` of the fit: a bootstrap over points. The N ratios are resampled with
      replacement ``n_bootstrap`` times (numpy ``default_rng(seed)``), steps 1–3 are redone on
      each resample, and the standard deviation (ddof = 1) of the slopes is taken. Ratios are
      not recomputed (a resampled duplicate would be its own neighbour at distance 0).
    * ``stderr_mle_iid`` = dimension_mle / √n_kept: the inverse square root of the Fisher
      information n_kept / d² of the censored likelihood (d / √N without censoring).
    * both are multiplied by √``design_effect`` for the dependence of neighbouring points'
      ratios (module docstring), computed from the censored-MLE per-point scores
      (1/d − log μ_i for a kept ratio, −log μ_(n_kept) for a censored one) over pairs where one
      point is among the other's two nearest neighbours. The fit's influence is, like the MLE
      score, a monotone function of log μ, so the same inflation is applied to it (checked by
      the calibration test, 1.11 measured).
    * duplicates: a point whose nearest neighbour is at distance 0 has no μ; it is dropped with a
      [`DuplicatePointsWarning`][tl_geometry.metrics.intrinsic_dimension.DuplicatePointsWarning]
      naming the count (as skdim does), and N counts the remaining points. All points
      duplicated is an error.
    * ``discard_fraction=0``: the largest ratio has F_emp = 1 and an infinite y, so the fit uses
      the N − 1 smallest (skdim returns NaN there; DADApy switches to the MLE).

    Args:
        x: points (N, d): a torch tensor or numpy array, float16/bfloat16 (upcast to float32),
            float32 or float64; distances are computed in float64.
        discard_fraction: fraction of the largest μ left out of the fit, in [0, 1).
        n_bootstrap: bootstrap resamples for ``stderr`` (≥ 2).
        seed: seeds the bootstrap and the subsample.
        max_points: if N exceeds it, a seeded uniform subsample of that many points is used
            (``n_total`` keeps the input's N). None: all points.
        max_memory_mb: memory bound of one chunk of the exact neighbour search.
        threads: the [`ThreadChoice`][tl_geometry.metrics.thread_choice.ThreadChoice] of the neighbour
            search's products (default: torch's setting).

    Returns:
        A [`TwoNNResult`][tl_geometry.metrics.intrinsic_dimension.TwoNNResult].

    Raises:
        InputError: x not 2-D / not floating / NaN or inf, fewer than 3 points, all points
            duplicated, discard_fraction outside [0, 1), or fewer than 2 ratios kept.

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> x = torch.randn(2000, 3, generator=g, dtype=torch.float64) @ torch.randn(3, 20, generator=g, dtype=torch.float64)
        >>> r = twonn(x)
        >>> abs(r.dimension - 3) < 4 * r.stderr, r.n_kept
        (True, 1800)
    """
    frac = _checks.real(discard_fraction, "discard_fraction", lo=0.0, hi=1.0, hi_open=True)
    n_boot = _checks.integer(n_bootstrap, "n_bootstrap", lo=2)
    seed = _checks.seed(seed)
    max_points = _checks.integer(max_points, "max_points", lo=MIN_POINTS, none_ok=True)
    mem = _checks.real(max_memory_mb, "max_memory_mb", lo=0.0, lo_open=True)
    t, n_total = _points(x, max_points, seed)
    dist, idx = _neighbors(t, 2, mem, threads)
    r_all, idx_np = dist.cpu().numpy(), idx.cpu().numpy()
    ok, n_dup = _drop_duplicates(r_all[:, 0], "the distance to the nearest neighbour", 3)
    r = r_all[ok]
    n = len(r)
    log_mu_pt = np.log(r[:, 1] / r[:, 0])
    log_mu = np.sort(log_mu_pt)
    n_keep = int(n * (1 - frac))
    if n_keep < 2:
        raise InputError(
            f"discard_fraction={frac:g} keeps int({n} * (1 - {frac:g})) = {n_keep} of the {n} ratios; "
            "TwoNN needs at least 2: use more points or a smaller discard_fraction"
        )
    n_fit = min(n_keep, n - 1)
    dim = float(_twonn_fit(log_mu, n, n_fit))
    cut = log_mu[n_keep - 1]
    mle = (n_keep - 1) / (log_mu[:n_keep].sum() + (n - n_keep) * cut)
    # per-point score of the censored likelihood: 1/d − log μ if kept, −log μ_(n_kept) if censored
    kept = np.zeros(n, dtype=bool)
    kept[np.argsort(log_mu_pt, kind="stable")[:n_keep]] = True
    score = np.zeros(len(r_all))
    score[ok] = np.where(kept, 1.0 / mle - log_mu_pt, -cut)
    deff = _design_effect(score, ok, idx_np, 2)

    rng = np.random.default_rng(seed)
    boot = np.empty(n_boot)
    step = max(1, (1 << 24) // n)  # resamples per batch: ≤ 16M numbers at a time
    for b in range(0, n_boot, step):
        nb = min(step, n_boot - b)
        sample = np.sort(log_mu[rng.integers(0, n, size=(nb, n))], axis=1)
        boot[b : b + nb] = _twonn_fit(sample, n, n_fit)
    se_boot = float(np.std(boot, ddof=1))
    se_fisher = float(mle / math.sqrt(n_keep))
    return TwoNNResult(
        dimension=dim,
        stderr=se_boot * math.sqrt(deff),
        dimension_mle=float(mle),
        stderr_mle=se_fisher * math.sqrt(deff),
        stderr_iid=se_boot,
        stderr_mle_iid=se_fisher,
        design_effect=deff,
        n_points=n,
        n_kept=n_fit,
        n_total=n_total,
        n_duplicates=n_dup,
        discard_fraction=frac,
        scale=float(r.mean()),
        n_bootstrap=n_boot,
        seed=seed,
    )


# ----------------------------------------------------------------------------- GRIDE
def _gride_score(d: float, log_mu: np.ndarray, n1: int, n2: int) -> float:
    """d log L / dd with DADApy's (N − 1) log d term; log μ / (1 − μ^(−d)) → 1/d at μ = 1."""
    n = len(log_mu)
    s = (n - 1) / d - (n2 - 1) * log_mu.sum()
    if n2 - n1 - 1:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = log_mu / -np.expm1(-d * log_mu)
        ratio = np.where(log_mu > 0, ratio, 1.0 / d)
        s += (n2 - n1 - 1) * ratio.sum()
    return float(s)


def _gride_point_scores(d: float, log_mu: np.ndarray, n1: int, n2: int) -> np.ndarray:
    """Each ratio's term of the score: 1/d + (n2−n1−1) log μ / (1 − μ^(−d)) − (n2−1) log μ."""
    s = 1.0 / d - (n2 - 1) * log_mu
    if n2 - n1 - 1:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = log_mu / -np.expm1(-d * log_mu)
        s = s + (n2 - n1 - 1) * np.where(log_mu > 0, ratio, 1.0 / d)
    return s


def _gride_fisher(d: float, log_mu: np.ndarray, n1: int, n2: int) -> float:
    """Observed information −d² log L / dd² = N/d² + (n2−n1−1) Σ (log μ / (2 sinh(d log μ / 2)))²."""
    info = len(log_mu) / d**2
    if n2 - n1 - 1:
        with np.errstate(divide="ignore", invalid="ignore"):
            t = log_mu / (2 * np.sinh(d * log_mu / 2))
        t = np.where(log_mu > 0, t, 1.0 / d)
        info += (n2 - n1 - 1) * float((t * t).sum())
    return info


def _gride_from_distances(
    r: np.ndarray, idx: np.ndarray, n1: int, n2: int, drop_outliers: bool, n_total: int, seed: int
) -> GrideResult:
    from scipy.optimize import brentq

    r_n1, r_n2 = r[:, n1 - 1], r[:, n2 - 1]
    ok, n_dup = _drop_duplicates(r_n1, f"the distance to neighbour n1={n1}", 4)
    r_n1, r_n2 = r_n1[ok], r_n2[ok]
    n_points = len(r_n1)
    mu = r_n2 / r_n1
    keep = np.ones(n_points, dtype=bool)
    if drop_outliers:
        q95, q50 = np.percentile(mu, [95, 50])
        keep = mu < 20 * (q95 - q50) + q50
        if not keep.any():  # every μ equal (q95 = q50 = μ): nothing is an outlier
            keep[:] = True
        mu = mu[keep]
    n_out = n_points - len(mu)
    if len(mu) < 2:
        raise InputError(f"GRIDE (n1={n1}, n2={n2}) has {len(mu)} ratio(s) left; it needs at least 2 distinct points")
    log_mu = np.log(mu)
    if not (log_mu > 0).any():
        raise InputError(
            f"GRIDE (n1={n1}, n2={n2}): every point has r_n2 = r_n1 (μ = 1), so the likelihood has no "
            "maximum; the points are degenerate (e.g. all equidistant)"
        )
    hi = 1.0
    while _gride_score(hi, log_mu, n1, n2) > 0:  # score → −n1 Σ log μ < 0 as d → ∞
        hi *= 2.0
    lo = min(1e-8, hi / 2)
    dim = float(brentq(_gride_score, lo, hi, args=(log_mu, n1, n2), xtol=1e-12, rtol=1e-13, maxiter=500))
    info = _gride_fisher(dim, log_mu, n1, n2)
    used = np.zeros(len(r), dtype=bool)
    used[np.flatnonzero(ok)[keep]] = True
    score = np.zeros(len(r))
    score[used] = _gride_point_scores(dim, log_mu, n1, n2)
    deff = _design_effect(score, used, idx, n2)
    se_fisher = float(1.0 / math.sqrt(info))
    return GrideResult(
        dimension=dim,
        stderr=se_fisher * math.sqrt(deff),
        stderr_fisher=se_fisher,
        design_effect=deff,
        n1=n1,
        n2=n2,
        n_points=n_points,
        n_used=len(mu),
        n_total=n_total,
        n_duplicates=n_dup,
        n_outliers=n_out,
        scale=float((r_n1.mean() + r_n2.mean()) / 2),
        seed=seed,
    )


def _gride_args(max_points: Any, seed: Any, max_memory_mb: Any) -> tuple[int | None, int, float]:
    return (
        _checks.integer(max_points, "max_points", lo=MIN_POINTS, none_ok=True),
        _checks.seed(seed),
        _checks.real(max_memory_mb, "max_memory_mb", lo=0.0, lo_open=True),
    )


def gride(
    x: Any,
    *,
    n1: int = 1,
    n2: int | None = None,
    drop_outliers: bool = True,
    seed: int = 0,
    max_points: int | None = None,
    max_memory_mb: float = DEFAULT_MAX_MEMORY_MB,
    threads: ThreadChoice | None = None,
) -> GrideResult:
    """GRIDE intrinsic dimension at neighbour orders (n1, n2) (Denti et al., Sci. Rep. 12, 20005, 2022).

    For each point, μ = r_{n2} / r_{n1}, its distances to the n2-th and n1-th nearest
    neighbours. With locally constant density on a d-dimensional manifold, μ has density

        f(μ | d) = d (μ^d − 1)^(n2−n1−1) / (B(n2−n1, n1) · μ^((n2−1)d+1)),   μ > 1

    (Denti et al. 2022, eq. 3; Pareto at n1 = 1, n2 = 2). The estimate maximizes the
    log-likelihood as DADApy writes it (``_neg_loglik``): (N − 1) log d +
    (n2−n1−1) Σ log(μ^d − 1) − ((n2−1)d + 1) Σ log μ − N log B, i.e. with (N − 1) in place of N
    in the first term, which makes it unbiased at n1 = 1 (there it is (N − 1) / Σ log μ, the
    TwoNN MLE). The log-likelihood is concave in d; the root of its derivative

        (N − 1)/d + (n2−n1−1) Σ log μ / (1 − μ^(−d)) − (n2−1) Σ log μ = 0

    is bracketed (the score is +∞ at d → 0 and −n1 Σ log μ < 0 at d → ∞) and solved by
    ``scipy.optimize.brentq`` to 1e-12. ``stderr`` = 1/√I with I the observed Fisher information
    N/d² + (n2−n1−1) Σ (log μ)² μ^(−d) / (1 − μ^(−d))² (DADApy's ``_fisher_info_scaling``) times
    √``design_effect`` (our choice, for the dependence of neighbouring ratios: module
    docstring); the uncorrected value is ``stderr_fisher``.

    Follows DADApy (``return_id_scaling_gride`` → ``_compute_id_gride_single_scale``) and skdim
    (``skdim.id.GRIDE``), including DADApy's outlier cut (``_filter_mus``; ``drop_outliers``):
    ratios μ ≥ q50 + 20 (q95 − q50) (percentiles of μ, numpy's linear interpolation) are left out,
    "very likely overlapping datapoints". Where we differ:

    * duplicates (r_{n1} = 0, no ratio) are dropped with a
      [`DuplicatePointsWarning`][tl_geometry.metrics.intrinsic_dimension.DuplicatePointsWarning]
      naming the count, before the cut (as skdim; DADApy replaces zero distances by float64 eps,
      which makes μ huge, and the cut then drops it: the same points go);
    * ties μ = 1 with r_{n1} > 0 are kept, with the exact limit log μ / (1 − μ^(−d)) → 1/d
      (DADApy nudges μ = 1 by 10 eps and clamps 1 − μ^(−d) below 2e-7: the same to that
      precision; skdim drops ties);
    * the root is found to 1e-12 by Brent's method (DADApy: bisection on [0.001, 1000] to 1e-7);
    * the Fisher information is summed over the ratios that entered the likelihood (as skdim;
      DADApy sums over all N ratios, before the outlier cut).

    Args:
        x: points (N, d), as for [`twonn`][tl_geometry.metrics.intrinsic_dimension.twonn].
        n1: order of the nearer neighbour, ≥ 1.
        n2: order of the farther neighbour, n1 < n2 ≤ N − 1; None: 2·n1.
        drop_outliers: apply DADApy's outlier cut on μ.
        seed: seeds the subsample (``max_points``).
        max_points: if N exceeds it, a seeded uniform subsample of that many points.
        max_memory_mb: memory bound of one chunk of the exact neighbour search.
        threads: the [`ThreadChoice`][tl_geometry.metrics.thread_choice.ThreadChoice] of the neighbour
            search's products (default: torch's setting).

    Returns:
        A [`GrideResult`][tl_geometry.metrics.intrinsic_dimension.GrideResult].

    Raises:
        InputError: bad x (as [`twonn`][tl_geometry.metrics.intrinsic_dimension.twonn]), n2 ≤ n1,
            n2 > N − 1, all points duplicated, or fewer than 2 ratios left.

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> x = torch.randn(2000, 3, generator=g, dtype=torch.float64) @ torch.randn(3, 20, generator=g, dtype=torch.float64)
        >>> r = gride(x, n1=4)
        >>> (r.n1, r.n2), abs(r.dimension - 3) < 4 * r.stderr
        ((4, 8), True)
    """
    max_points, seed, mem = _gride_args(max_points, seed, max_memory_mb)
    n1 = _checks.integer(n1, "n1", lo=1)
    if n2 is None:
        n2 = 2 * n1
    n2 = _checks.integer(n2, "n2", lo=n1 + 1, why=f"n2 > n1 = {n1}")
    flag = _checks.flag(drop_outliers, "drop_outliers")
    t, n_total = _points(x, max_points, seed)
    if n2 > t.shape[0] - 1:
        raise InputError(f"n2={n2} needs at least n2 + 1 = {n2 + 1} points, x has N={t.shape[0]}")
    dist, idx = _neighbors(t, n2, mem, threads)
    return _gride_from_distances(dist.cpu().numpy(), idx.cpu().numpy(), n1, n2, flag, n_total, seed)


def gride_scaling(
    x: Any,
    *,
    range_max: int = DEFAULT_RANGE_MAX,
    drop_outliers: bool = True,
    seed: int = 0,
    max_points: int | None = None,
    max_memory_mb: float = DEFAULT_MAX_MEMORY_MB,
    threads: ThreadChoice | None = None,
) -> GrideScaling:
    """GRIDE at increasing scale: n1 = 1, 2, 4, …, n2 = 2·n1 ≤ min(range_max, N − 1).

    DADApy's ``return_id_scaling_gride(range_max)``: with max_rank = min(N, range_max) it
    estimates at (2^i, 2^(i+1)) for 2^(i+1) ≤ max_rank; we cap max_rank at N − 1 (the most
    neighbours a point has; skdim does the same). One neighbour search serves every scale. Each
    estimate is [`gride`][tl_geometry.metrics.intrinsic_dimension.gride] at its (n1, n2);
    its ``scale`` is the mean of r_{n1} and r_{n2} (DADApy's ``rs_scaling``), so the ID can be
    plotted against a length. Duplicates (r_{n1} = 0) are dropped per scale, so ``n_points`` can
    grow with n1.

    Args:
        x: points (N, d), as for [`twonn`][tl_geometry.metrics.intrinsic_dimension.twonn].
        range_max: largest neighbour order, ≥ 2.
        drop_outliers, seed, max_points, max_memory_mb, threads: as for [`gride`][tl_geometry.metrics.intrinsic_dimension.gride].

    Returns:
        A [`GrideScaling`][tl_geometry.metrics.intrinsic_dimension.GrideScaling].

    Raises:
        InputError: bad x, range_max < 2, or a scale at which fewer than 2 ratios are left.

    Examples:
        >>> x = torch.randn(500, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        >>> gride_scaling(x, range_max=16).n1s
        [1, 2, 4, 8]
    """
    max_points, seed, mem = _gride_args(max_points, seed, max_memory_mb)
    range_max = _checks.integer(range_max, "range_max", lo=2)
    flag = _checks.flag(drop_outliers, "drop_outliers")
    t, n_total = _points(x, max_points, seed)
    max_rank = min(range_max, t.shape[0] - 1)
    n_steps = int(math.log2(max_rank))
    while 2**n_steps > max_rank:  # guard float log2 at exact powers
        n_steps -= 1
    while 2 ** (n_steps + 1) <= max_rank:
        n_steps += 1
    dist, idx = _neighbors(t, 2**n_steps, mem, threads)
    r, idx_np = dist.cpu().numpy(), idx.cpu().numpy()
    estimates = []
    for i in range(n_steps):
        n1, n2 = 2**i, 2 ** (i + 1)
        estimates.append(_gride_from_distances(r, idx_np, n1, n2, flag, n_total, seed))
    return GrideScaling(estimates=tuple(estimates), range_max=range_max)
