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

**One verdict rule.** [`verdicts`][tl_geometry.metrics.significance.verdicts] is the rule every
reading, reproduce claim and study claim calls; [`extreme`][tl_geometry.metrics.significance.extreme]
is the same rule for the peak (a maximum) or the minimum of a window of hooks. A value is called
``"positive"`` or ``"negative"`` only when all three tests pass:

1. **chance**: its two-sided p is small — the chance band of z at the run's ``n_null``
   ([`z_p_value`][tl_geometry.metrics.significance.z_p_value]) for a PGA z, else the normal p of
   (value − reference)/stderr;
2. **family**: that p stays below α after Holm's correction over the family of values scanned
   (a peak over 15 hooks is the maximum of 15 values: reading it alone, uncorrected, calls a
   random profile "organized" most of the time);
3. **stderr**: |value − reference| > 2·stderr (the sign survives the sampling of points, text and
   nulls; an unknown, NaN stderr is said so and does not block).

Anything else is ``"inconclusive"``, and the verdict's ``words`` say which test passed and which
failed. The old rule (|v| > 2·stderr alone) decided a 15-hook peak of pure noise in most draws;
tests/unit/metrics/test_significance.py simulates it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from tl_geometry.errors import InputError

__all__ = ["z_p_value", "z_threshold", "holm", "classify", "Verdict", "verdicts", "extreme", "CALLS", "ALPHA"]

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

    The same tests as [`verdicts`][tl_geometry.metrics.significance.verdicts] for a caller that has
    its Holm-adjusted p already; the library itself calls ``verdicts`` (the one rule, with words).

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


CALLS = ("positive", "negative", "inconclusive")
"""The three calls of a [`Verdict`][tl_geometry.metrics.significance.Verdict]."""


@dataclass(frozen=True)
class Verdict:
    """The call on one value of a family, with every test behind it.

    Attributes:
        call: ``"positive"``, ``"negative"`` or ``"inconclusive"`` (``CALLS``).
        value, stderr, reference: the value, its standard error (NaN: unknown) and the value of no effect.
        p: the two-sided p of the value alone (chance band at ``n_null``, or normal).
        p_adjusted: p after Holm's correction over the ``m`` values of the family.
        m: how many values the family scanned (1: no correction).
        n_null: the null subspaces behind the chance band, or None (a normal p from the stderr).
        chance: p_adjusted < α (tests 1 and 2 of the module).
        beyond_stderr: |value − reference| > 2·stderr (True, and said so, when the stderr is unknown
            and the chance band decides alone).
        index: the value's place in the family (``extreme``: the maximum's or minimum's).
        words: the call and which test passed, in words.
    """

    call: str
    value: float
    stderr: float
    reference: float
    p: float
    p_adjusted: float
    m: int
    n_null: int | None
    chance: bool
    beyond_stderr: bool
    index: int
    words: str

    @property
    def decided(self) -> bool:
        """True when the call is positive or negative."""
        return self.call != "inconclusive"


def _fmt(x: float) -> str:
    if not math.isfinite(x):
        return "nan"
    return f"{x:.2g}" if abs(x) < 1e-3 and x != 0 else f"{x:.3g}"


def _words(v: Verdict, alpha: float, k: float, what: str) -> str:
    test = f"chance band at n_null = {v.n_null}" if v.n_null is not None else "normal p of the value over its stderr"
    fam = f", Holm over {v.m} {what}: {_fmt(v.p_adjusted)}" if v.m > 1 else ""
    chance = f"{test}: p = {_fmt(v.p)}{fam} {'<' if v.chance else '≥'} {alpha} ({'passed' if v.chance else 'failed'})"
    d = abs(v.value - v.reference)
    if math.isfinite(v.stderr):
        se = f"|v − {_fmt(v.reference)}| = {_fmt(d)} {'>' if v.beyond_stderr else '≤'} {k:g}·stderr = {_fmt(k * v.stderr)} ({'passed' if v.beyond_stderr else 'failed'})"
    else:
        se = "stderr unknown (not tested)"
    return f"{v.call}: {chance}; {se}"


def verdicts(
    values: Sequence[float],
    stderrs: Sequence[float],
    *,
    n_null: int | Sequence[int] | None = None,
    reference: float = 0.0,
    alpha: float = ALPHA,
    k: float = 2.0,
    what: str = "hooks",
) -> tuple[Verdict, ...]:
    """The call on each value of one family (the module's rule: chance, Holm over the family, k·stderr).

    Args:
        values: the family (one value per hook scanned, or one value alone).
        stderrs: their standard errors (NaN: unknown).
        n_null: the PGA chance band — z against ``n_null`` random subspaces (one for all, or one per
            value). None: the normal two-sided p of (value − reference)/stderr (a NaN stderr gives
            "inconclusive").
        reference: the value of no effect (0 for a z or a difference; a class edge for ε).
            With ``n_null`` it must be 0 (the chance band is a band of z around 0).
        alpha: the family-wise error rate.
        k: the stderr multiple of test 3 (2 by default).
        what: the family's unit in the words ("hooks", "pairs of hooks").

    Examples:
        >>> v = verdicts([0.92], [0.3], n_null=100)[0]
        >>> v.call, v.beyond_stderr, round(v.p, 2)
        ('inconclusive', True, 0.36)
        >>> [v.call for v in verdicts([8.0, 0.5, -6.0], [0.4, 0.4, 0.5], n_null=100)]
        ['positive', 'inconclusive', 'negative']
    """
    v = np.asarray(values, dtype=np.float64)
    se = np.asarray(stderrs, dtype=np.float64)
    if v.ndim != 1 or se.shape != v.shape:
        raise InputError(f"values and stderrs must be 1-D of the same length, got shapes {v.shape} and {se.shape}")
    if not 0.0 < alpha < 1.0:
        raise InputError(f"alpha must lie in (0, 1), got {alpha!r}")
    if not (math.isfinite(k) and k >= 0):
        raise InputError(f"k must be a finite number >= 0, got {k!r}")
    if not math.isfinite(reference):
        raise InputError(f"reference must be a finite number, got {reference!r}")
    nulls: list[int | None]
    if n_null is None:
        nulls = [None] * v.size
    else:
        if reference != 0.0:
            raise InputError(f"the chance band of z is around 0: reference must be 0 with n_null, got {reference!r}")
        nulls = [n_null] * v.size if isinstance(n_null, int) else list(n_null)
        if len(nulls) != v.size:
            raise InputError(f"n_null must be one integer or one per value ({v.size}), got {len(nulls)}")
        for n in nulls:
            _check_n(n)  # type: ignore[arg-type]
    ps = []
    for x, s, n in zip(v, se, nulls, strict=True):
        if n is not None:
            ps.append(z_p_value(float(x), n))
        elif math.isfinite(x) and math.isfinite(s) and s > 0:
            ps.append(float(2.0 * stats.norm.sf(abs(x - reference) / s)))
        elif math.isfinite(x) and s == 0:  # exact: decided by its sign alone
            ps.append(0.0 if x != reference else 1.0)
        else:
            ps.append(math.nan)
    adj = holm(ps) if v.size else np.array([])
    out = []
    m = int(np.isfinite(np.asarray(ps, dtype=np.float64)).sum()) if v.size else 0
    for i, (x, s, n, p, a) in enumerate(zip(v, se, nulls, ps, adj, strict=True)):
        chance = bool(math.isfinite(a) and a < alpha)
        beyond = bool(abs(x - reference) > k * s) if math.isfinite(s) else True
        call = "inconclusive"
        if chance and beyond and math.isfinite(x):
            call = "positive" if x > reference else "negative" if x < reference else "inconclusive"
        ver = Verdict(
            call, float(x), float(s), float(reference), float(p), float(a), max(m, 1), n, chance, beyond, i, ""
        )
        out.append(_replace_words(ver, alpha, k, what))
    return tuple(out)


def _replace_words(v: Verdict, alpha: float, k: float, what: str) -> Verdict:
    from dataclasses import replace

    return replace(v, words=_words(v, alpha, k, what))


def extreme(
    values: Sequence[float],
    stderrs: Sequence[float],
    *,
    kind: str,
    n_null: int | Sequence[int] | None = None,
    reference: float = 0.0,
    alpha: float = ALPHA,
    k: float = 2.0,
    what: str = "hooks",
) -> Verdict:
    """The call on the maximum (``kind="max"``, a peak) or minimum (``kind="min"``) of a window.

    The extreme of m values is chosen after seeing them, so it is tested as one of the m:
    [`verdicts`][tl_geometry.metrics.significance.verdicts] over the whole window (Holm over m; its
    first step is Bonferroni, m·p, which bounds the chance that the extreme of m null values is
    called), and the verdict of the extreme is returned (``index`` says which value it was). The
    words begin with "max over m" / "min over m".

    Examples:
        >>> v = extreme([0.1, 0.92, -0.3], [0.3, 0.3, 0.3], kind="max", n_null=100)
        >>> v.index, v.call, v.words.startswith("max over 3 hooks")
        (1, 'inconclusive', True)
    """
    if kind not in ("max", "min"):
        raise InputError(f"kind must be 'max' or 'min', got {kind!r}")
    vs = verdicts(values, stderrs, n_null=n_null, reference=reference, alpha=alpha, k=k, what=what)
    finite = [x for x in vs if math.isfinite(x.value)]
    if not finite:
        raise InputError("extreme needs at least one finite value")
    pick = max(finite, key=lambda x: x.value) if kind == "max" else min(finite, key=lambda x: x.value)
    from dataclasses import replace

    return replace(pick, words=f"{kind} over {pick.m} {what} — {pick.words}")
