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
  [`gride`][tl_geometry.metrics.gride.gride] and
  [`gride_scaling`][tl_geometry.metrics.gride.gride_scaling] (in [`tl_geometry.metrics.gride`][tl_geometry.metrics.gride],
  re-exported here).

The reference implementations followed (and tested against) are scikit-dimension 0.5's
``skdim.id.TwoNN`` / ``skdim.id.GRIDE`` (``skdim/id/_TwoNN.py``, ``skdim/id/_GRIDE.py``) and
DADApy's ``IdEstimation.compute_id_2NN`` / ``return_id_scaling_gride`` (``dadapy/id_estimation.py``,
helpers ``_neg_dloglik_did``, ``_filter_mus``, ``_fisher_info_scaling`` in
``dadapy/_utils/utils.py``). Where they differ, or where we chose, the docstrings say so.

**Neighbours** ([`tl_geometry.metrics.neighbors`][tl_geometry.metrics.neighbors], re-exported here): exact
Euclidean distances in float64, a point never its own neighbour (a duplicate of it is found at 0).

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
from dataclasses import dataclass
from typing import Any

import numpy as np

from tl_geometry.base import _checks
from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError
from tl_geometry.metrics.gride import DEFAULT_RANGE_MAX, GRIDE_STDERR, GrideResult, GrideScaling, gride, gride_scaling
from tl_geometry.metrics.neighbors import (
    DEFAULT_MAX_MEMORY_MB,
    MIN_POINTS,
    DuplicatePointsWarning,
    _check_ties,
    _design_effect,
    _drop_duplicates,
    _neighbors,
    _points,
    neighbor_distances,
)
from tl_geometry.metrics.thread_choice import ThreadChoice

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
    "DUPLICATES",
    "one_copy_per_vector",
]

DEFAULT_DISCARD_FRACTION = 0.1
"""Fraction of the largest μ TwoNN leaves out of the fit (Facco et al. 2017; skdim's default, DADApy's ``mu_fraction=0.9``)."""
DEFAULT_N_BOOTSTRAP = 200
"""Bootstrap resamples of the μ values behind the standard error of the TwoNN fit."""

TWONN_STDERR = "bootstrap over points (their μ values; B resamples, seeded) x sqrt(neighbourhood design effect)"
"""How `TwoNNResult.stderr` is computed (recorded in every result)."""
TWONN_MLE_STDERR = "d / sqrt(n_kept) (censored-Pareto Fisher information) x sqrt(neighbourhood design effect)"
"""How `TwoNNResult.stderr_mle` is computed."""


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
        tie_fraction: share of the N points with μ = 1 exactly (r2 = r1: lattice or quantized
            data); above 5 % a ``LatticeWarning``, above 50 % refused (``neighbors.LATTICE_*``).
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
    tie_fraction: float = 0.0


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
      [`DuplicatePointsWarning`][tl_geometry.metrics.neighbors.DuplicatePointsWarning]
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
        >>> import torch
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
    ties = _check_ties(r[:, 1] / r[:, 0], "TwoNN", 3)
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
        tie_fraction=ties,
    )


DUPLICATES = ("drop_all", "one_copy")
"""What the intrinsic dimension does with repeated points (``duplicates=``; recorded in every row).

* ``"drop_all"`` (the estimators' own rule, our default): a point whose nearest neighbour is at
  distance 0 has no neighbour ratio, so **every** copy of a repeated vector is dropped (counted in
  ``n_duplicates``). At the embeddings of a token cloud this keeps only tokens seen once (SmolLM2,
  1,016 points: 253 left, TwoNN 12.9 ± 5.1).
* ``"one_copy"``: one copy of each distinct vector is kept ([`one_copy_per_vector`][tl_geometry.metrics.intrinsic_dimension.one_copy_per_vector])
  and the estimators see distinct points only (SmolLM2's embeddings: TwoNN 7.6). Neither is the
  papers' choice: they do not say (Valeriani et al. use sequence means, where repeats are rare).
"""


def one_copy_per_vector(x: Any) -> Any:
    """The indices (ascending) of the first copy of each distinct row of ``x``, an (N, D) array or tensor.

    Exact equality (every coordinate); the order of the kept rows is the order of ``x``.

    Examples:
        >>> import torch
        >>> one_copy_per_vector(torch.tensor([[1.0, 2], [3, 4], [1, 2], [5, 6], [3, 4]])).tolist()
        [0, 1, 3]
    """
    import torch

    t = torch.as_tensor(x)
    if t.ndim != 2:
        raise InputError(f"x must be a 2-D (points, features) array, got shape {tuple(t.shape)}")
    if t.shape[0] == 0:
        return torch.zeros(0, dtype=torch.long)
    _, inverse = torch.unique(t, dim=0, return_inverse=True)
    first = torch.full((int(inverse.max()) + 1,), t.shape[0], dtype=torch.long)
    first.scatter_reduce_(0, inverse, torch.arange(t.shape[0]), reduce="amin")
    return torch.sort(first).values
