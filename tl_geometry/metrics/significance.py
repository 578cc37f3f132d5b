"""Which of several z-scores are significant: the chance band of a z against random subspaces, Holm's correction.

Used by the PGA readings and figures; pure functions on numbers (no model, no report).

A PGA z compares the readout subspace with n random subspaces. If the readout were just one more
random subspace (the null hypothesis), ρ_read and the n null ρ's would be exchangeable and, for
normal ρ's, z = (ρ_read − mean)/std would follow Student's t with n − 1 degrees of freedom scaled
by √(1 + 1/n) — whatever the points are. [`z_p_value`][tl_geometry.metrics.significance.z_p_value] is that two-sided p-value.

Testing one z per layer means testing many hypotheses; [`holm`][tl_geometry.metrics.significance.holm] adjusts the p-values (Holm's
step-down, 1979: controls the family-wise error rate, uniformly more powerful than Bonferroni, no
assumption on the dependence between layers). [`classify`][tl_geometry.metrics.significance.classify] then calls a hook "positive" or
"negative" only when its adjusted p is below α *and* z lies more than two standard errors from 0
(the standard error of z from [`tl_geometry.pga_score`][tl_geometry.metrics.pga.pga_score]: the sign must survive the sampling of
points and nulls too); anything else lies "inside" the chance band. These are our choices: the
paper reads |z| ≥ 2 as organized and gives no correction.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from tl_geometry.errors import InputError

__all__ = ["z_p_value", "z_threshold", "holm", "classify", "ALPHA"]

ALPHA = 0.05
"""Family-wise error rate of [`classify`][tl_geometry.metrics.significance.classify]."""


def _check_n(n_null: int) -> None:
    if isinstance(n_null, bool) or not isinstance(n_null, int) or n_null < 2:
        raise InputError(f"n_null must be an integer >= 2, got {n_null!r}")


def z_p_value(z: float, n_null: int) -> float:
    """Two-sided p-value of a z against ``n_null`` random subspaces, under exchangeability.

    p = 2·P(T > |z|/√(1 + 1/n)), T ~ Student's t with n − 1 degrees of freedom.

    Examples:
        >>> round(z_p_value(0.0, 100), 3), z_p_value(30.0, 100) < 1e-40
        (1.0, True)
    """
    _check_n(n_null)
    if not math.isfinite(z):
        return math.nan
    return float(2.0 * stats.t.sf(abs(z) / math.sqrt(1.0 + 1.0 / n_null), n_null - 1))


def z_threshold(p: float, n_null: int) -> float:
    """The |z| whose two-sided [`z_p_value`][tl_geometry.metrics.significance.z_p_value] is ``p`` (the edge of the chance band).

    Definition: |z| = t_{n−1}^{-1}(1 − p/2)·√(1 + 1/n), the inverse of ``z_p_value``.

    Examples:
        >>> round(z_threshold(0.05, 10**6), 2)
        1.96
    """
    _check_n(n_null)
    if not 0.0 < p <= 1.0:
        raise InputError(f"p must lie in (0, 1], got {p!r}")
    return float(stats.t.isf(p / 2.0, n_null - 1) * math.sqrt(1.0 + 1.0 / n_null))


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p-values (step-down; NaN p-values are left out of the count and stay NaN).

    p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j)) for the sorted p_(1) ≤ … ≤ p_(m).

    Examples:
        >>> holm([0.01, 0.04, 0.03]).round(3).tolist()
        [0.03, 0.06, 0.06]
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1:
        raise InputError(f"p_values must be a 1-D sequence, got shape {p.shape}")
    ok = np.isfinite(p)
    if ((p[ok] < 0) | (p[ok] > 1)).any():
        raise InputError("p-values must lie in [0, 1]")
    out = np.full_like(p, np.nan)
    idx = np.flatnonzero(ok)
    m = idx.size
    if m:
        order = idx[np.argsort(p[idx], kind="stable")]
        adj = np.minimum(1.0, (m - np.arange(m)) * p[order])
        out[order] = np.maximum.accumulate(adj)
    return out


def classify(z: float, stderr: float, p_adjusted: float, *, alpha: float = ALPHA) -> str:
    """``"positive"``, ``"negative"`` or ``"inside"`` (the chance band), as the module says.

    Rule (ours): ``"positive"`` when p_adjusted < alpha, z > 0 and |z| > 2·stderr; ``"negative"``
    likewise with z < 0; else ``"inside"``. p_adjusted is the Holm-adjusted two-sided p-value
    ([`holm`][tl_geometry.metrics.significance.holm]).

    A NaN standard error (unknown) does not block the call; a NaN p-value gives ``"inside"``.

    Examples:
        >>> classify(12.0, 1.5, 1e-9), classify(-4.0, 2.5, 1e-3), classify(1.7, 0.3, 0.4)
        ('positive', 'inside', 'inside')
    """
    if not (math.isfinite(p_adjusted) and p_adjusted < alpha):
        return "inside"
    if math.isfinite(stderr) and abs(z) <= 2.0 * stderr:
        return "inside"
    return "positive" if z > 0 else "negative"
