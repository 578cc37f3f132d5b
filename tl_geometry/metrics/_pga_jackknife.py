"""Standard errors of the Subspace PGA z-score (arXiv 2605.17084; the paper reports z without one): our jackknives.

z is a sampled number twice over — n_null random subspaces and N sampled points. The null part
is a delete-one jackknife over the nulls; the point part a delete-a-group jackknife over the
points, at CCR ≥ 1 with the removed principal directions re-estimated without each group
(``_refit_jackknife``). Used by ``tl_geometry.metrics.pga``; see its ``PGAScore``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch
from torch import Tensor

from tl_geometry.metrics._spearman import RankedReference, cosine_similarities, make_pairs
from tl_geometry.metrics.jackknife import jackknife_se
from tl_geometry.metrics.thread_choice import ThreadChoice, parallel_map

__all__: list[str] = []


def _jackknife_se(values: np.ndarray) -> float:
    """[`tl_geometry.metrics.jackknife.jackknife_se`][tl_geometry.metrics.jackknife.jackknife_se] of 1-D leave-one-out values (NaN if any is NaN)."""
    v = torch.as_tensor(np.asarray(values, dtype=np.float64)).reshape(-1, 1)
    return math.nan if v.shape[0] < 2 else float(jackknife_se(v)[0])


def _null_jackknife_z(rho: float, nulls: np.ndarray) -> float:
    """Standard error of z = (ρ − mean)/std from the null draw: delete-one jackknife over the nulls."""
    n = nulls.shape[0]
    if n < 3:
        return math.nan
    c = nulls - nulls.mean()
    mean_lo = nulls.mean() - c / (n - 1)  # mean without null q
    ss_lo = (c**2).sum() - c**2 - c**2 / (n - 1)  # Σ (ρ − mean_lo)² without null q
    z_lo = (rho - mean_lo) / np.sqrt(ss_lo / (n - 2))
    return _jackknife_se(z_lo)


def _top_directions(X: Tensor, start: Tensor, c: int, iters: int = 20) -> Tensor:
    """Top-``c`` right singular vectors (rows) of X by subspace iteration warm-started at ``start``
    (rows: the full sample's principal directions), with a Rayleigh–Ritz step."""
    V = start.T.contiguous()  # (d, p)
    for _ in range(iters):
        V, _ = torch.linalg.qr(X.T @ (X @ V))
    Y = X @ V
    evals, evecs = torch.linalg.eigh(Y.T @ Y)
    return (V @ evecs[:, torch.argsort(evals, descending=True)[:c]]).T


def _refit_jackknife(H, Vh, readout, bases, scores, ccrs, groups, max_pairs, seed, n_sub, threads: ThreadChoice):
    """Point-sample stderr with each deleted group refit (``stderr="jackknife"``, the check of the influence error).

    Deleting group g: re-center the remaining points, re-estimate their top-c principal directions
    (warm-started subspace iteration; none at CCR-0), remove them, and recompute the reference
    ranks, ρ_read and the ρ of the first ``n_sub`` null subspaces from scratch (a re-sort each).
    z₋g = (ρ_read,₋g − m₋g)/s with m₋g = m + mean over those nulls of (ρ_q,₋g − ρ_q) (paired: the
    shift of the null mean, estimated with little noise from a few nulls) and s the full null std;
    with ``n_sub`` = n_null, z₋g is recomputed in full from the refit nulls (mean and std).
    """
    H64 = H.to(torch.float64)
    R = readout.to(torch.float64)
    cmax = max(ccrs)
    start = Vh[: min(cmax + 5, Vh.shape[0])]
    sub = bases[:n_sub].to(H64.device, torch.float64)
    full = n_sub == bases.shape[0]

    def one(g: int) -> dict[int, tuple[float, np.ndarray]]:
        Hg = H64[torch.from_numpy(groups.group != g).to(H64.device)]
        Hg = Hg - Hg.mean(0, keepdim=True)
        P = _top_directions(Hg, start.to(Hg.dtype), cmax) if cmax else Hg[:0]
        pairs = make_pairs(Hg.shape[0], max_pairs, seed)
        out = {}
        for c in ccrs:
            X = Hg - (Hg @ P[:c].T) @ P[:c] if c else Hg
            ref = RankedReference.from_values(cosine_similarities(X, pairs))
            rho = ref.spearman(cosine_similarities(X @ R, pairs))
            nulls = np.array([ref.spearman(cosine_similarities(X @ B, pairs)) for B in sub])
            out[c] = (rho, nulls)
        return out

    with threads.kernel("sort", H.device):
        cpu = H.device.type == "cpu"
        reps = parallel_map(one, range(groups.n_groups), threads.workers() if cpu else 1)
    out = {}
    for c in ccrs:
        s = scores[c]
        rho_g = np.array([r[c][0] for r in reps])
        nulls_g = np.stack([r[c][1] for r in reps])  # (G, n_sub)
        if full:
            z_g = (rho_g - nulls_g.mean(1)) / nulls_g.std(1, ddof=1)
        else:
            shift = nulls_g.mean(1) - float(s.null_rhos[:n_sub].mean())
            z_g = (rho_g - (s.null_mean + shift)) / s.null_std
        se_pts = _jackknife_se(z_g)
        out[c] = dataclasses.replace(
            s,
            stderr=float(math.hypot(s.stderr_null, se_pts)),
            stderr_points=se_pts,
            stderr_rho=_jackknife_se(rho_g),
            n_groups=groups.n_groups,
        )
    return out
