"""Capacity bounds k(d, ε) of the capacity paper (Guha, arXiv 2606.02765), their inverse, and
the paper's ε classes.

The paper's published table (Table 1) is data, read by [`tl_geometry.families.capacity.hosts`][tl_geometry.families.capacity.hosts].

The paper fits ε*(k, d), the smallest achievable worst-case |cos| of k unit vectors in R^d,
with three forms (its Eq. for JL, the "adjusted" and the "full" form)::

    jl        ε = sqrt(C ln k / d)                   C = 8 (proven) or 3.0295 ("jl_random")
    adjusted  ε = sqrt(C ln(k/d) / d)                C = 1.2934
    full      ε = sqrt(C ln(k^a/d)^b / d^c)          C, a, b, c = 0.45809143, 1.0668005, 1.44738666, 0.97197234

The constants are defined once, here ([`FORMS`][tl_geometry.metrics.capacity.FORMS]), at the precision of the authors' code:
the full form's C, a, b, c are those of ``code/representational_capacity.py`` (which produced the
paper's capacity table); the adjusted and random-fit JL constants are the authors' fits as their
``code/vector_packing_graphs.py`` prints them (``C = {:.4f}``). The paper's text rounds them to
3–4 digits (C = 0.458, a = 1.067, ...): with those, capacities come out 0.2–2.8 % high
(Llama-2-70B 8.36e15 instead of the published 8.15e15).

Solved for k (the capacity: how many near-orthogonal directions fit at tolerance ε)::

    jl        k = exp(d ε² / C)
    adjusted  k = d · exp(d ε² / C)
    full      k = ceil((d · exp((d^c ε² / C)^(1/b)))^(1/a))

The public functions are re-exported by [`tl_geometry.metrics.capacity`][tl_geometry.metrics.capacity].
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from numbers import Integral, Real
from typing import Any, Literal

import numpy as np

from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError, InputTypeError

__all__ = [
    "FORMS",
    "capacity",
    "capacity_epsilon",
    "sensitivity",
    "CLASS1_ABOVE",
    "CLASS2_BELOW",
    "PRESETS",
    "model_class_of",
    "CapacityEstimate",
    "capacity_estimate",
    "min_n",
]

FORMS: dict[str, dict[str, float]] = {
    "jl": {"C": 8.0},
    "jl_random": {"C": 3.0295},
    "adjusted": {"C": 1.2934},
    "full": {"C": 0.45809143, "a": 1.0668005, "b": 1.44738666, "c": 0.97197234},
}
"""Constants of each form, at the precision of the authors' code (see the module docstring). The single definition in the package: everything else (plots, readings, SAE ratios) imports it."""


class CapacityWarning(RuntimeWarning):
    """A bound that is vacuous (below d), overflows to inf, or is undefined (nan)."""


__all__.append("CapacityWarning")


def _constants(form: str, overrides: dict) -> dict[str, float]:
    if form not in FORMS:
        raise InputError(f"unknown form {form!r}; expected one of {sorted(FORMS)}")
    params = dict(FORMS[form])
    if form in ("jl", "jl_random"):
        if overrides.get("C") is not None:
            params["C"] = overrides["C"]
        extra = [k for k, v in overrides.items() if v is not None and k != "C"]
        if extra:
            raise InputError(f"form {form!r} has only the constant C; got overrides for {extra}")
    else:
        for k, v in overrides.items():
            if v is None:
                continue
            if k not in params:
                raise InputError(f"form {form!r} has constants {sorted(params)}; got an override for {k!r}")
            params[k] = float(v)
    for k, v in params.items():
        if not (math.isfinite(v) and v > 0):
            raise InputError(f"constant {k} must be a positive finite number, got {v}")
    return params


def _scalar_or_array(x: np.ndarray, scalar: bool):
    return float(x) if scalar else x


def _numeric(x, name: str, accepted: str) -> np.ndarray:
    """``x`` as a float64 array, refusing what numpy would silently convert (str, bool, objects)."""
    if isinstance(x, (str, bytes, bool, np.bool_)):
        raise InputTypeError(f"{name} must be {accepted}, got {type(x).__name__} {x!r}")
    arr = np.asarray(x)
    if arr.dtype.kind not in "iuf":
        raise InputTypeError(f"{name} must be {accepted}, got an array of dtype {arr.dtype}")
    return arr.astype(np.float64)


def _check_eps(eps) -> np.ndarray:
    """ε as a float64 array; every entry must lie in (0, 1)."""
    eps = _numeric(eps, "eps", "a number in (0, 1) or an array of them")
    if not np.all(np.isfinite(eps)) or np.any(eps <= 0) or np.any(eps >= 1):
        raise InputError(f"eps must lie in (0, 1), got {eps if eps.ndim else float(eps)}")
    return eps


def _check_d(d) -> np.ndarray:
    d = _numeric(d, "d", "a positive number (the dimension) or an array of them")
    if not np.all(np.isfinite(d)) or np.any(d <= 0):
        raise InputError(f"d must be positive (the dimension), got {d if d.ndim else float(d)}")
    return d


def capacity(d, eps, *, form: str = "full", C=None, a=None, b=None, c=None):
    """Capacity bound: how many near-orthogonal unit vectors fit in R^d at tolerance ε.

    Capacity paper (arXiv 2606.02765): ``k = exp(dε²/C)`` (JL), ``k = d·exp(dε²/C)``
    (adjusted) and ``k = ceil((d·exp((d^c ε²/C)^(1/b)))^(1/a))`` (full, the paper's
    ``ceil`` semantics).

    Args:
        d: dimension (int or numpy array, broadcast with ``eps``).
        eps: tolerance ε in (0, 1) (float or array), e.g. an embedding's μ + 2σ.
        form: ``"full"`` (default), ``"adjusted"``, ``"jl"`` (C = 8, the proven constant) or
            ``"jl_random"`` (C = 3.0295, fitted on random packings).
        C, a, b, c: override the published constants of the form.

    This is the **pure formula**, for any ε in (0, 1): it does not apply the paper's rule that
    only Class-2 embeddings (ε < 0.1) have a capacity. For a model's capacity as the paper
    reports it (a count, or "indeterminate" with the reason) use [`capacity_estimate`][tl_geometry.metrics.capacity.capacity_estimate].

    Returns:
        k as a float (an ndarray for array input). ``inf`` where it overflows float64 (with a
        [`CapacityWarning`][tl_geometry.metrics.capacity.CapacityWarning]). Values below d (any form; e.g. ``capacity(768, 1e-12)`` is
        507) are returned as computed with a [`CapacityWarning`][tl_geometry.metrics.capacity.CapacityWarning]: they lie below the
        formula's domain (d exactly orthogonal directions always fit; the fits used k > d).

    Raises:
        TypeError: d or ε is a string, a bool, or a non-numeric array.
        ValueError: ε ≤ 0 or ≥ 1, d ≤ 0, unknown form, bad constants.

    Examples:
        >>> import tl_geometry as tg
        >>> f"{tg.capacity(4096, 0.0645, form='full'):.2g}"
        '4e+07'
        >>> round(tg.capacity(4096, 0.0645, form="jl_random"))
        277
    """
    params = _constants(form, {"C": C, "a": a, "b": b, "c": c})
    scalar = np.ndim(d) == 0 and np.ndim(eps) == 0
    d = _check_d(d)
    eps = _check_eps(eps)
    with np.errstate(over="ignore"):
        if form in ("jl", "jl_random"):
            k = np.exp(d * eps**2 / params["C"])
        elif form == "adjusted":
            k = d * np.exp(d * eps**2 / params["C"])
        else:
            x = (d ** params["c"] * eps**2 / params["C"]) ** (1.0 / params["b"])
            # log-space: k = exp((ln d + x) / a), then ceil as the paper does
            k = np.ceil(np.exp((np.log(d) + x) / params["a"]))
    if np.any(np.isinf(k)):
        warnings.warn(
            f"capacity({form}) overflows float64 for some (d, eps): returned inf; "
            "use log10 via tl_geometry.metrics.capacity.log10_capacity for such values",
            CapacityWarning,
            stacklevel=2,
        )
    if np.any(k < d):
        warnings.warn(
            f"capacity({form}) < d for some (d, eps): the bound is vacuous there, below the "
            "formula's domain (d exactly orthogonal directions always fit; the fits used k > d)",
            CapacityWarning,
            stacklevel=2,
        )
    return _scalar_or_array(k, scalar)


def log10_capacity(d, eps, *, form: str = "full", C=None, a=None, b=None, c=None):
    """log10 of [`capacity`][tl_geometry.metrics.capacity.capacity] without overflow (no ``ceil`` for the full form).

    Definition (arXiv 2606.02765): log10 k = log10 d + d·ε²/(C·ln 10) for the JL forms
    (k ≤ d·exp(dε²/C)); the 4-parameter forms likewise in log space, so d = 16,384 at ε = 0.4
    gives a finite log10 where k itself overflows float64."""
    params = _constants(form, {"C": C, "a": a, "b": b, "c": c})
    scalar = np.ndim(d) == 0 and np.ndim(eps) == 0
    d = _check_d(d)
    eps = _check_eps(eps)
    if form in ("jl", "jl_random"):
        ln_k = d * eps**2 / params["C"]
    elif form == "adjusted":
        ln_k = np.log(d) + d * eps**2 / params["C"]
    else:
        ln_k = (np.log(d) + (d ** params["c"] * eps**2 / params["C"]) ** (1.0 / params["b"])) / params["a"]
    return _scalar_or_array(ln_k / math.log(10), scalar)


__all__.append("log10_capacity")


def capacity_epsilon(k, d, *, form: str = "full", below: str = "nan", C=None, a=None, b=None, c=None):
    """Inverse of [`capacity`][tl_geometry.metrics.capacity.capacity]: the tolerance ε at which k directions fit in R^d.

    ``ε = sqrt(C ln k / d)`` (JL), ``sqrt(C ln(k/d) / d)`` (adjusted),
    ``sqrt(C ln(k^a/d)^b / d^c)`` (full).

    Args:
        k: number of directions (≥ 1; array accepted).
        d: dimension (> 0; broadcast with ``k``).
        form: see [`capacity`][tl_geometry.metrics.capacity.capacity].
        below: what to return where the k/d forms are undefined (the log argument k/d or
            k^a/d is < 1, i.e. roughly k ≤ d): ``"nan"`` (default, with a
            [`CapacityWarning`][tl_geometry.metrics.capacity.CapacityWarning]) or ``"zero"`` (the paper's convention when fitting:
            k ≤ d vectors can be exactly orthogonal).

    Returns:
        ε as a float (ndarray for array input).

    Raises:
        ValueError: k < 1, d ≤ 0, unknown form or ``below``.

    Examples:
        >>> import tl_geometry as tg
        >>> round(tg.capacity_epsilon(277, 4096, form="jl_random"), 4)
        0.0645
    """
    params = _constants(form, {"C": C, "a": a, "b": b, "c": c})
    if below not in ("nan", "zero"):
        raise InputError(f"below must be 'nan' or 'zero', got {below!r}")
    scalar = np.ndim(k) == 0 and np.ndim(d) == 0
    d = _check_d(d)
    k = _numeric(k, "k", "a number >= 1 (a count of directions) or an array of them")
    if not np.all(np.isfinite(k)) or np.any(k < 1):
        raise InputError(f"k must be >= 1 (a number of directions), got {k if k.ndim else float(k)}")
    k, d = np.broadcast_arrays(k, d)
    if form in ("jl", "jl_random"):
        arg = np.log(k)
        num = params["C"] * arg
        den = d
    elif form == "adjusted":
        arg = np.log(k) - np.log(d)
        num = params["C"] * np.clip(arg, 0, None)
        den = d
    else:
        arg = params["a"] * np.log(k) - np.log(d)
        num = params["C"] * np.clip(arg, 0, None) ** params["b"]
        den = d ** params["c"]
    eps = np.sqrt(num / den)
    bad = arg < 0
    if np.any(bad):
        if below == "nan":
            warnings.warn(
                f"capacity_epsilon({form}) is undefined where k is too small relative to d "
                "(log argument < 1, roughly k <= d): returned nan; pass below='zero' for the paper's "
                "convention (exact orthogonality, ε = 0)",
                CapacityWarning,
                stacklevel=2,
            )
            eps = np.where(bad, np.nan, eps)
        else:
            eps = np.where(bad, 0.0, eps)
    return _scalar_or_array(eps, scalar)


def sensitivity(d, eps, *, form: str = "full", C=None, a=None, b=None, c=None):
    """d(log10 k)/dε at (d, ε): how many decades of capacity one unit of ε is worth.

    Analytic derivative of [`log10_capacity`][tl_geometry.metrics.capacity.log10_capacity] (the full form without ``ceil``):
    JL/adjusted ``2dε / (C ln 10)``; full ``(2/(a b ln 10)) (d^c/C)^(1/b) ε^(2/b − 1)``.
    Multiply by a change in ε (e.g. 0.01) to get the change in log10 k.

    Examples:
        >>> import tl_geometry as tg
        >>> round(tg.sensitivity(4096, 0.0645, form="jl"), 1)
        28.7
    """
    params = _constants(form, {"C": C, "a": a, "b": b, "c": c})
    scalar = np.ndim(d) == 0 and np.ndim(eps) == 0
    d = _check_d(d)
    eps = _check_eps(eps)
    ln10 = math.log(10)
    if form in ("jl", "jl_random", "adjusted"):
        out = 2 * d * eps / (params["C"] * ln10)
    else:
        A, B = params["a"], params["b"]
        out = (2.0 / (A * B * ln10)) * (d ** params["c"] / params["C"]) ** (1.0 / B) * eps ** (2.0 / B - 1.0)
    return _scalar_or_array(out, scalar)


# ----------------------------------------------------------------------------- classes, estimate
CLASS1_ABOVE = 0.2
"""Capacity paper (Sec. 2): Class 1 has ε > 0.2 (no near-orthogonal structure), Class 2 ε < 0.1."""
CLASS2_BELOW = 0.1

PRESETS = ("paper",)
"""Presets of [`capacity_estimate`][tl_geometry.metrics.capacity.capacity_estimate]. Only the paper's rule exists: see its docstring."""


def model_class_of(epsilon: float) -> str:
    """The paper's classes: ε > 0.2 → "class1", ε < 0.1 → "class2", else "boundary".

    Raises:
        InputError: ε is NaN or infinite (no class; "boundary" would be a silent answer).
        InputTypeError: ε is not a real number.
    """
    epsilon = _real(epsilon, "epsilon", "a number (ε = μ + 2σ)")
    if epsilon > CLASS1_ABOVE:
        return "class1"
    if epsilon < CLASS2_BELOW:
        return "class2"
    return "boundary"


@dataclass(frozen=True)
class CapacityEstimate(Tabular):
    """A model's capacity as the capacity paper reports it: a count, or indeterminate and why.

    Attributes:
        d: dimension (d_model).
        epsilon: ε = μ + 2σ used.
        form: capacity form (see [`capacity`][tl_geometry.metrics.capacity.capacity]).
        preset: the rule that decided count vs indeterminate (``"paper"``).
        k: the count (float, possibly ``inf`` where it overflows float64), or None when
            ``status == "indeterminate"``.
        status: ``"count"`` or ``"indeterminate"``.
        reason: why there is no count (empty for a plain count; a note for a count below d).
        model_class: ``"class1"``, ``"boundary"`` or ``"class2"`` ([`model_class_of`][tl_geometry.metrics.capacity.model_class_of]).
        log10_k: log10 of the count without overflow (None when indeterminate).
        below_d: the count is below d, i.e. below the formula's domain (JL forms at small ε).
        mean, std: μ and σ when known.
        epsilon_3sigma: μ + 3σ when μ, σ are known (the authors' "exaggerated" ε).
        k_3sigma: capacity at μ + 3σ (same form), only where there is a count at μ + 2σ,
            as in the authors' ``embd_orthogonality_analysis.py``.
    """

    d: int
    epsilon: float
    form: str
    preset: str
    k: float | None
    status: Literal["count", "indeterminate"]
    reason: str
    model_class: str
    log10_k: float | None = None
    below_d: bool = False
    mean: float | None = None
    std: float | None = None
    epsilon_3sigma: float | None = None
    k_3sigma: float | None = None

    @property
    def is_count(self) -> bool:
        return self.status == "count"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        if self.k is None:
            return f"indeterminate ({self.reason})"
        return f"k ≈ {self.k:.3g} ({self.form} form, ε = {self.epsilon:.5f}, d = {self.d})"


def _real(x, name: str, accepted: str) -> float:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, Real):
        raise InputTypeError(f"{name} must be {accepted}, got {type(x).__name__} {x!r}")
    x = float(x)
    if not math.isfinite(x):
        raise InputError(f"{name} must be finite, got {x}")
    return x


def _dimension(d) -> int:
    if isinstance(d, (bool, np.bool_)) or not isinstance(d, Real):
        raise InputTypeError(f"d must be a positive integer (the dimension), got {type(d).__name__} {d!r}")
    if not isinstance(d, Integral):
        if not (math.isfinite(float(d)) and float(d).is_integer()):
            raise InputError(f"d must be a positive integer (the dimension), got {d!r}")
    d = int(d)
    if d < 1:
        raise InputError(f"d must be a positive integer (the dimension), got {d}")
    return d


def _indeterminate_reason(epsilon: float, model_class: str) -> str | None:
    if model_class == "class1":
        return (
            f"ε = {epsilon:.5g} > {CLASS1_ABOVE} (Class 1): the embedding has no near-orthogonal structure, "
            "so the capacity paper reports the capacity as indeterminate, not a count"
        )
    if model_class == "boundary":
        return (
            f"{CLASS2_BELOW} ≤ ε = {epsilon:.5g} ≤ {CLASS1_ABOVE} (between the classes): the authors' code "
            f"gives a count only for ε < {CLASS2_BELOW} (Class 2); indeterminate"
        )
    if epsilon <= 0:
        return f"ε = {epsilon:.5g} ≤ 0 is outside the formula's domain (0, 1)"
    return None


def capacity_estimate(
    d,
    epsilon=None,
    *,
    mean=None,
    std=None,
    preset: str = "paper",
    form: str = "full",
) -> CapacityEstimate:
    """A model's capacity as the capacity paper reports it: a count only for Class 2 (ε < 0.1).

    Capacity paper (arXiv 2606.02765), Appendix D and the authors' ``code/repr_cap_table.py``:
    ``max_k(d_model, ε)`` for ε < 0.1, "indeterminate" otherwise. So a Class-1 (ε > 0.2) or
    boundary (0.1 ≤ ε ≤ 0.2) embedding gets ``k=None``, ``status="indeterminate"`` and the
    reason, never a number. When μ and σ are given, also the authors' μ + 3σ ("exaggerated")
    ε and its capacity (``code/embd_orthogonality_analysis.py``).

    Presets: only ``"paper"``. We found no better rule to offer beside it: the paper's 0.1 cut
    sits in an empty gap of its table (no model between ε = 0.0996 and 0.2016), and a count
    for the boundary or Class 1 is exactly what the paper says the formula cannot give.
    [`capacity`][tl_geometry.metrics.capacity.capacity] remains the pure formula for any ε.

    Ours: ε = 0.1 exactly is indeterminate (``repr_cap_table.py`` tests ``eps < 0.1``; the
    authors' ``embd_orthogonality_analysis.py`` tests ``> 0.1`` and would count it); ε ≤ 0 is
    indeterminate (outside the formula's domain); a count below d is kept and flagged
    ``below_d`` (the paper itself quotes JL's 277 < 4096 for Llama-2-7B).

    Args:
        d: dimension (a positive integer; strings and bools are refused).
        epsilon: ε = μ + 2σ; may be omitted when ``mean`` and ``std`` are given.
        mean, std: μ and σ of the pairwise cosines (σ ≥ 0).
        preset: ``"paper"``.
        form: ``"full"`` (the paper's table), ``"adjusted"``, ``"jl"``, ``"jl_random"``.

    Returns:
        [`CapacityEstimate`][tl_geometry.metrics.capacity.CapacityEstimate].

    Raises:
        TypeError: non-numeric d, ε, μ or σ.
        ValueError: d < 1, ε ≥ 1, σ < 0, ε given and ≠ μ + 2σ, only one of μ/σ, unknown
            preset or form.

    Examples:
        >>> import tl_geometry as tg
        >>> e = tg.capacity_estimate(4096, 0.0645)
        >>> e.status, f"{e.k:.3g}"
        ('count', '3.99e+07')
        >>> e = tg.capacity_estimate(576, 0.729)
        >>> e.status, e.k, e.model_class
        ('indeterminate', None, 'class1')
    """
    if preset not in PRESETS:
        raise InputError(f"unknown preset {preset!r}; accepted: {list(PRESETS)}")
    if form not in FORMS:
        raise InputError(f"unknown form {form!r}; expected one of {sorted(FORMS)}")
    d = _dimension(d)
    if (mean is None) != (std is None):
        raise InputError("give both mean and std (μ and σ of the pairwise cosines), or neither")
    if mean is not None:
        mean = _real(mean, "mean", "a number (μ)")
        std = _real(std, "std", "a number >= 0 (σ)")
        if std < 0:
            raise InputError(f"std must be >= 0, got {std}")
        if not -1.0 <= mean <= 1.0:
            raise InputError(f"mean must be in [-1, 1] (a mean of cosines), got {mean}")
        if std > 1.0:
            raise InputError(f"std must be <= 1 (a standard deviation of cosines), got {std}")
        if epsilon is None:
            epsilon = mean + 2 * std
        elif not math.isclose(_real(epsilon, "epsilon", "a number"), mean + 2 * std, rel_tol=1e-9, abs_tol=1e-12):
            raise InputError(f"epsilon = {epsilon} is not mean + 2 std = {mean + 2 * std}")
    if epsilon is None:
        raise InputError("give epsilon, or mean and std")
    epsilon = _real(epsilon, "epsilon", "a number (ε = μ + 2σ)")
    if epsilon >= 1:
        raise InputError(f"epsilon must be < 1 (a cosine bound), got {epsilon}")
    if epsilon < -1:
        raise InputError(f"epsilon must be >= -1 (a cosine bound), got {epsilon}")
    cls = model_class_of(epsilon)
    eps3 = None if mean is None else mean + 3 * std
    common = dict(
        d=d, epsilon=epsilon, form=form, preset=preset, model_class=cls, mean=mean, std=std, epsilon_3sigma=eps3
    )
    why = _indeterminate_reason(epsilon, cls)
    if why is not None:
        return CapacityEstimate(k=None, status="indeterminate", reason=why, **common)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CapacityWarning)
        k = float(capacity(d, epsilon, form=form))
        log10_k = float(log10_capacity(d, epsilon, form=form))
        k3 = float(capacity(d, eps3, form=form)) if eps3 is not None and 0 < eps3 < 1 else None
    below = k < d
    reason = ""
    if below:
        reason = f"k = {k:.4g} < d = {d}: below the formula's domain (d orthogonal directions always fit)"
    elif math.isinf(k):
        reason = "k overflows float64; see log10_k"
    return CapacityEstimate(k=k, status="count", reason=reason, log10_k=log10_k, below_d=below, k_3sigma=k3, **common)


def _epsilon_of(k: float, d: float, form: str) -> float:
    """ε(k, d) of the form, 0 where its log argument is < 1 (the paper's fitting convention)."""
    C = FORMS[form]["C"]
    if form in ("jl", "jl_random"):
        return math.sqrt(C * math.log(k) / d)
    if form == "adjusted":
        return math.sqrt(C * max(math.log(k / d), 0.0) / d)
    p = FORMS[form]
    return math.sqrt(C * max(p["a"] * math.log(k) - math.log(d), 0.0) ** p["b"] / d ** p["c"])


def min_n(k, epsilon, *, form: str = "full") -> int:
    """The smallest dimension d that holds k directions at tolerance ε (inverse in d).

    The authors' ``min_n(k, bounds)`` (``code/representational_capacity.py``): the d at which
    the form's ε(k, d) equals ε, rounded up. ε(k, d) decreases in d, so this is the smallest
    integer d with ε(k, d) ≤ ε. The authors find it with ``scipy.optimize.minimize_scalar``
    over (1, k); we bisect over the integers, exactly. Never more than ceil(k): k orthogonal
    directions always fit in d = k (the authors' search interval ends there too).

    Args:
        k: number of directions (≥ 1).
        epsilon: tolerance in (0, 1).
        form: see [`capacity`][tl_geometry.metrics.capacity.capacity].

    Raises:
        TypeError: non-numeric k or ε.
        ValueError: k < 1, ε outside (0, 1), unknown form.

    Examples:
        >>> import tl_geometry as tg
        >>> tg.min_n(32000, 0.0645)   # Llama-2-7B's vocabulary at its ε
        1039
    """
    if form not in FORMS:
        raise InputError(f"unknown form {form!r}; expected one of {sorted(FORMS)}")
    k = _real(k, "k", "a number >= 1 (a count of directions)")
    if k < 1:
        raise InputError(f"k must be >= 1, got {k}")
    epsilon = _real(epsilon, "epsilon", "a number in (0, 1)")
    if not 0 < epsilon < 1:
        raise InputError(f"epsilon must lie in (0, 1), got {epsilon}")
    hi = max(1, math.ceil(k))
    if _epsilon_of(k, hi, form) > epsilon:
        return hi
    lo = 0  # invariant: ε(k, lo) > ε or lo == 0; ε(k, hi) ≤ ε
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _epsilon_of(k, mid, form) <= epsilon:
            hi = mid
        else:
            lo = mid
    return hi
