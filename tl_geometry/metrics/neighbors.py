"""The exact nearest neighbours of a point cloud, shared by the intrinsic-dimension estimators (TwoNN, GRIDE and their jackknife).

[`neighbor_distances`][tl_geometry.metrics.neighbors.neighbor_distances]: exact Euclidean distances, in float64 whatever the input dtype. Candidates come from a chunked
float64 ``‖a‖² + ‖b‖² − 2a·b`` search on the centered points (``max_memory_mb`` bounds each
chunk), then the distances to the best k + 4 candidates are recomputed as ‖x_i − x_j‖ from the
uncentered float64 points and re-sorted, so rounding of the fast formula (which loses relative
precision for neighbours much closer than the cloud's radius) never reaches the ratios. A point
is never its own neighbour (excluded by index), so a duplicate of it is found at distance 0.

Also here: the validation and seeded subsample of the points, the dropping of duplicates
(distance 0 to a neighbour, with a [`DuplicatePointsWarning`][tl_geometry.metrics.neighbors.DuplicatePointsWarning]),
and the neighbourhood design effect of a sum of per-point scores (see
[`tl_geometry.metrics.intrinsic_dimension`][tl_geometry.metrics.intrinsic_dimension], "Standard errors").
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import torch
from torch import Tensor

from tl_geometry.base import _checks
from tl_geometry.errors import InputError
from tl_geometry.metrics.thread_choice import ThreadChoice, resolve

__all__ = ["neighbor_distances", "DuplicatePointsWarning", "DEFAULT_MAX_MEMORY_MB", "MIN_POINTS"]

DEFAULT_MAX_MEMORY_MB = 256.0
"""Memory bound (MiB) of one chunk of the neighbour search."""
MIN_POINTS = 3
"""Fewest points accepted: each point needs two neighbours."""

_MARGIN = 4  # candidates beyond k, re-ranked after their distances are recomputed
_REFINE_RATIO = 100.0  # recompute a row's distances exactly when (‖x_i‖² + ‖x_j‖²) / r² exceeds this


class DuplicatePointsWarning(UserWarning):
    """Some points had a duplicate (distance 0 to their nearest neighbour) and were dropped."""


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


#: Above this share of ratios μ = 1 exactly (r2 = r1: a lattice, quantized values) an ID estimate
#: is refused: the estimators assume a continuous density, and ties drive them to infinity (an
#: evenly spaced line gave TwoNN = 61,431). Above `LATTICE_WARN` the estimate is kept and warned.
LATTICE_REFUSE = 0.5
LATTICE_WARN = 0.05


class LatticeWarning(UserWarning):
    """Many points have equal neighbour distances (lattice or quantized data): the intrinsic
    dimension estimate is biased upward."""


def _check_ties(mu: np.ndarray, what: str, stacklevel: int) -> float:
    """The share of ratios ``mu`` equal to 1 (to 1e-9); refused above `LATTICE_REFUSE`, warned
    above `LATTICE_WARN`."""
    ties = float(np.mean(np.abs(mu - 1.0) <= 1e-9)) if len(mu) else 0.0
    if ties > LATTICE_REFUSE:
        raise InputError(
            f"{what}: {ties:.0%} of the points have equal neighbour distances (μ = 1): a lattice or quantized "
            "point cloud (e.g. evenly spaced points), where TwoNN / GRIDE, which assume a continuous density, "
            "have no finite estimate; measure distinct, non-gridded points (or add a small jitter on purpose)"
        )
    if ties > LATTICE_WARN:
        warnings.warn(
            LatticeWarning(
                f"{what}: {ties:.0%} of the points have equal neighbour distances (μ = 1: lattice or quantized "
                "data); the estimate is biased upward"
            ),
            stacklevel=stacklevel,
        )
    return ties


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
