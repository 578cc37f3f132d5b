"""Delete-a-group jackknife standard errors of the intrinsic-dimension estimators (TwoNN, Facco et al. 2017; GRIDE, Denti et al. 2022): se = √((G − 1)/G · Σ_g (θ_(g) − θ̄)²) with θ_(g) the exact estimate without group g."""

from __future__ import annotations

from tl_geometry.metrics.gride import DEFAULT_RANGE_MAX, _gride_score
from tl_geometry.metrics.intrinsic_dimension import DEFAULT_DISCARD_FRACTION, _twonn_fit
from tl_geometry.metrics.neighbors import DEFAULT_MAX_MEMORY_MB, _neighbors, _points

__all__ = ["IDJackknife", "id_jackknife"]

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from tl_geometry.base import _checks
from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError
from tl_geometry.metrics.thread_choice import ThreadChoice


# ----------------------------------------------------------------------------- grouped jackknife
@dataclass(frozen=True)
class IDJackknife(Tabular):
    """Delete-a-group jackknife standard errors of TwoNN and of GRIDE at each scale.

    Attributes:
        twonn_stderr: of [`TwoNNResult.dimension`][tl_geometry.metrics.intrinsic_dimension.TwoNNResult].
        gride_stderr: of GRIDE's dimension at each n1 of ``n1s`` (n2 = 2·n1).
        n1s: the GRIDE scales.
        n_groups: G, the groups left out one at a time.
        method: how the errors were computed.
    """

    twonn_stderr: float
    gride_stderr: tuple[float, ...]
    n1s: tuple[int, ...]
    n_groups: int
    method: str = "delete-a-group jackknife: se = sqrt((G-1)/G · Σ_g (θ_(g) − θ̄)²), θ_(g) re-estimated without group g"

    def records(self) -> list[dict[str, Any]]:
        """One row per estimator and scale."""
        rows = [{"estimator": "twonn", "n1": None, "stderr": self.twonn_stderr}]
        rows += [{"estimator": "gride", "n1": n1, "stderr": se} for n1, se in zip(self.n1s, self.gride_stderr)]
        return [{**r, "n_groups": self.n_groups, "method": self.method} for r in rows]


def _twonn_dimension(r1: np.ndarray, r2: np.ndarray, frac: float) -> float:
    """TwoNN's fit (as [`twonn`][tl_geometry.metrics.intrinsic_dimension.twonn]) from r1, r2; duplicates dropped quietly."""
    ok = r1 > 0
    log_mu = np.sort(np.log(r2[ok] / r1[ok]))
    n = len(log_mu)
    n_keep = int(n * (1 - frac))
    if n_keep < 2:
        return math.nan
    return float(_twonn_fit(log_mu, n, min(n_keep, n - 1)))


def _gride_dimension(r_n1: np.ndarray, r_n2: np.ndarray, n1: int, n2: int, drop_outliers: bool) -> float:
    """GRIDE's maximum-likelihood d (as [`gride`][tl_geometry.metrics.gride.gride]); NaN when undefined."""
    from scipy.optimize import brentq

    ok = r_n1 > 0
    mu = r_n2[ok] / r_n1[ok]
    if drop_outliers and len(mu):
        q95, q50 = np.percentile(mu, [95, 50])
        keep = mu < 20 * (q95 - q50) + q50
        mu = mu[keep] if keep.any() else mu
    if len(mu) < 2:
        return math.nan
    log_mu = np.log(mu)
    if not (log_mu > 0).any():
        return math.nan
    hi = 1.0
    while _gride_score(hi, log_mu, n1, n2) > 0:
        hi *= 2.0
    return float(brentq(_gride_score, min(1e-8, hi / 2), hi, args=(log_mu, n1, n2), xtol=1e-12, rtol=1e-13))


def id_jackknife(
    x: Any,
    groups: Any,
    *,
    discard_fraction: float = DEFAULT_DISCARD_FRACTION,
    range_max: int = DEFAULT_RANGE_MAX,
    drop_outliers: bool = True,
    max_memory_mb: float = DEFAULT_MAX_MEMORY_MB,
    threads: ThreadChoice | None = None,
) -> IDJackknife:
    """Standard errors of TwoNN and GRIDE (every scale of [`gride_scaling`][tl_geometry.metrics.gride.gride_scaling])
    from a delete-a-group jackknife: each estimate is recomputed without group g, for every g, and
    se = √((G − 1)/G · Σ_g (θ_(g) − θ̄)²) (Efron's grouped jackknife; TwoNN: Facco et al. 2017,
    GRIDE: Denti et al. 2022).

    Our choice, for point clouds whose points are not independent draws: token positions of one
    sequence share a context, so a fresh sample of *text* moves the estimate more than the
    neighbourhood errors of [`twonn`][tl_geometry.metrics.intrinsic_dimension.twonn] /
    [`gride`][tl_geometry.metrics.gride.gride] say (1.8× for TwoNN and 2–5× for
    GRIDE across pydoc samples on SmolLM2-135M, docs/intrinsic_dimension.md). With ``groups``
    made of whole sequences ([`tl_geometry.metrics.jackknife.group_labels`][tl_geometry.metrics.jackknife.group_labels]),
    the jackknife covers that. Leaving a group out changes the other points' neighbours: each
    remaining point takes its nearest neighbours among the remaining points, from one exact search
    of 2·max_rank + 8 candidates per point, and points whose candidates run out are searched again
    exactly among the remaining points, so every replicate is the exact estimate on its subset.

    Args:
        x: points (N, d), as for [`twonn`][tl_geometry.metrics.intrinsic_dimension.twonn] (all of
            them: no subsample here).
        groups: (N,) integer group label per point; at least 2 distinct labels.
        discard_fraction, range_max, drop_outliers, max_memory_mb, threads: as for
            [`twonn`][tl_geometry.metrics.intrinsic_dimension.twonn] and
            [`gride_scaling`][tl_geometry.metrics.gride.gride_scaling].

    Returns:
        An [`IDJackknife`][tl_geometry.metrics.id_jackknife.IDJackknife].

    Raises:
        InputError: bad x, groups not of length N or with fewer than 2 labels, bad options.
    """
    frac = _checks.real(discard_fraction, "discard_fraction", lo=0.0, hi=1.0, hi_open=True)
    range_max = _checks.integer(range_max, "range_max", lo=2)
    flag = _checks.flag(drop_outliers, "drop_outliers")
    mem = _checks.real(max_memory_mb, "max_memory_mb", lo=0.0, lo_open=True)
    t, _ = _points(x, None, 0)
    n = t.shape[0]
    g = np.asarray(groups.cpu() if isinstance(groups, Tensor) else groups).reshape(-1)
    if g.shape[0] != n:
        raise InputError(f"groups has {g.shape[0]} labels for N={n} points; one label per point is accepted")
    labels = np.unique(g)
    if len(labels) < 2:
        raise InputError(f"groups has {len(labels)} distinct label(s); a jackknife needs at least 2")
    max_rank = min(range_max, n - 1)
    n_steps = max(1, int(math.floor(math.log2(max_rank))))
    while 2**n_steps > max_rank:
        n_steps -= 1
    need = max(2, 2**n_steps)
    n1s = tuple(2**i for i in range(n_steps))
    cand_k = min(n - 1, 2 * need + 8)
    dist, idx = _neighbors(t, cand_k, mem, threads)
    dist_np, idx_np = dist.cpu().numpy(), idx.cpu().numpy()
    reps = []
    for lab in labels:
        keep = g != lab
        rows = np.flatnonzero(keep)
        if len(rows) < need + 1:
            reps.append([math.nan] * (1 + len(n1s)))
            continue
        valid = keep[idx_np[rows]]  # (n_keep, cand_k): candidate still present
        enough = valid.sum(1) >= need
        # first `need` valid candidates per row (candidates are sorted by distance)
        order = np.argsort(~valid, axis=1, kind="stable")[:, :need]
        r = np.take_along_axis(dist_np[rows], order, axis=1)
        short = np.flatnonzero(~enough)
        if len(short):  # candidates ran out: search these rows again among the remaining points
            sub = t[torch.as_tensor(rows)].to(torch.float64)
            q = sub[torch.as_tensor(short)]
            d2 = torch.cdist(q, sub)
            d2[torch.arange(len(short)), torch.as_tensor(short)] = math.inf
            r[short] = torch.topk(d2, need, dim=1, largest=False).values.cpu().numpy()
        est = [_twonn_dimension(r[:, 0], r[:, 1], frac)]
        est += [_gride_dimension(r[:, n1 - 1], r[:, 2 * n1 - 1], n1, 2 * n1, flag) for n1 in n1s]
        reps.append(est)
    arr = np.asarray(reps, dtype=np.float64)
    G = arr.shape[0]
    se = np.sqrt((G - 1) / G * np.nansum((arr - np.nanmean(arr, axis=0)) ** 2, axis=0))
    return IDJackknife(twonn_stderr=float(se[0]), gride_stderr=tuple(float(v) for v in se[1:]), n1s=n1s, n_groups=G)
