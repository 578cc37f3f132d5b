"""Capacity bounds k(d, ε) of the capacity paper (Guha, arXiv 2606.02765), their inverse, and
the paper's published ε table.

The paper fits ε*(k, d), the smallest achievable worst-case |cos| of k unit vectors in R^d,
with three forms (its Eq. for JL, the "adjusted" and the "full" form)::

    jl        ε = sqrt(C ln k / d)                   C = 8 (proven) or 3.029 ("jl_random")
    adjusted  ε = sqrt(C ln(k/d) / d)                C = 1.293
    full      ε = sqrt(C ln(k^a/d)^b / d^c)          C, a, b, c = 0.458, 1.067, 1.447, 0.972

Solved for k (the capacity: how many near-orthogonal directions fit at tolerance ε)::

    jl        k = exp(d ε² / C)
    adjusted  k = d · exp(d ε² / C)
    full      k = ceil((d · exp((d^c ε² / C)^(1/b)))^(1/a))

The public functions are re-exported by :mod:`tl_geometry.metrics.capacity`.
"""

from __future__ import annotations

import json
import math
import warnings
from importlib import resources
from typing import NamedTuple

import numpy as np

__all__ = [
    "FORMS",
    "capacity",
    "capacity_epsilon",
    "sensitivity",
    "published",
    "published_epsilon",
    "PublishedEpsilon",
]

#: Constants of each form as published (capacity paper, Table of fits).
FORMS: dict[str, dict[str, float]] = {
    "jl": {"C": 8.0},
    "jl_random": {"C": 3.029},
    "adjusted": {"C": 1.293},
    "full": {"C": 0.458, "a": 1.067, "b": 1.447, "c": 0.972},
}


class CapacityWarning(RuntimeWarning):
    """A bound that is vacuous (below d), overflows to inf, or is undefined (nan)."""


__all__.append("CapacityWarning")


def _constants(form: str, overrides: dict) -> dict[str, float]:
    if form not in FORMS:
        raise ValueError(f"unknown form {form!r}; expected one of {sorted(FORMS)}")
    params = dict(FORMS[form])
    if form in ("jl", "jl_random"):
        params["C"] = overrides.get("C") if overrides.get("C") is not None else params["C"]
        extra = [k for k, v in overrides.items() if v is not None and k != "C"]
        if extra:
            raise ValueError(f"form {form!r} has only the constant C; got overrides for {extra}")
    else:
        for k, v in overrides.items():
            if v is None:
                continue
            if k not in params:
                raise ValueError(f"form {form!r} has constants {sorted(params)}; got an override for {k!r}")
            params[k] = float(v)
    for k, v in params.items():
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"constant {k} must be a positive finite number, got {v}")
    return params


def _scalar_or_array(x: np.ndarray, scalar: bool):
    return float(x) if scalar else x


def _check_eps(eps) -> np.ndarray:
    """ε as a float64 array; every entry must lie in (0, 1)."""
    eps = np.asarray(eps, dtype=np.float64)
    if not np.all(np.isfinite(eps)) or np.any(eps <= 0) or np.any(eps >= 1):
        raise ValueError(f"eps must lie in (0, 1), got {eps if eps.ndim else float(eps)}")
    return eps


def _check_d(d) -> np.ndarray:
    d = np.asarray(d, dtype=np.float64)
    if not np.all(np.isfinite(d)) or np.any(d <= 0):
        raise ValueError(f"d must be positive (the dimension), got {d if d.ndim else float(d)}")
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
            ``"jl_random"`` (C = 3.029, fitted on random packings).
        C, a, b, c: override the published constants of the form.

    Returns:
        k as a float (an ndarray for array input). ``inf`` where it overflows float64 (with a
        :class:`CapacityWarning`). JL values below d are returned as computed but warned
        about as vacuous (d orthogonal directions always fit).

    Raises:
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
    if form in ("jl", "jl_random") and np.any(k < d):
        warnings.warn(
            f"capacity({form}) < d for some (d, eps): the JL bound is vacuous there "
            "(d exactly orthogonal directions always fit)",
            CapacityWarning,
            stacklevel=2,
        )
    return _scalar_or_array(k, scalar)


def log10_capacity(d, eps, *, form: str = "full", C=None, a=None, b=None, c=None):
    """log10 of :func:`capacity` without overflow (no ``ceil`` for the full form)."""
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
    """Inverse of :func:`capacity`: the tolerance ε at which k directions fit in R^d.

    ``ε = sqrt(C ln k / d)`` (JL), ``sqrt(C ln(k/d) / d)`` (adjusted),
    ``sqrt(C ln(k^a/d)^b / d^c)`` (full).

    Args:
        k: number of directions (≥ 1; array accepted).
        d: dimension (> 0; broadcast with ``k``).
        form: see :func:`capacity`.
        below: what to return where the k/d forms are undefined (the log argument k/d or
            k^a/d is < 1, i.e. roughly k ≤ d): ``"nan"`` (default, with a
            :class:`CapacityWarning`) or ``"zero"`` (the paper's convention when fitting:
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
        raise ValueError(f"below must be 'nan' or 'zero', got {below!r}")
    scalar = np.ndim(k) == 0 and np.ndim(d) == 0
    d = _check_d(d)
    k = np.asarray(k, dtype=np.float64)
    if not np.all(np.isfinite(k)) or np.any(k < 1):
        raise ValueError(f"k must be >= 1 (a number of directions), got {k if k.ndim else float(k)}")
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

    Analytic derivative of :func:`log10_capacity` (the full form without ``ceil``):
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


# ----------------------------------------------------------------------------- published table
class PublishedEpsilon(NamedTuple):
    """One row of the capacity paper's Table 1 (published, not recomputed here)."""

    d_model: int
    epsilon: float


_PUBLISHED: dict[str, PublishedEpsilon] | None = None


def published() -> dict[str, PublishedEpsilon]:
    """The capacity paper's published ε table (Table 1): model name → (d_model, ε).

    These are **published values** (Guha, arXiv 2606.02765), shipped as data in
    ``tl_geometry/data/published_epsilon.json`` so that bounds can be compared without weights.

    Examples:
        >>> import tl_geometry as tg
        >>> tg.published()["Llama-2-7B"]
        PublishedEpsilon(d_model=4096, epsilon=0.0645)
    """
    global _PUBLISHED
    if _PUBLISHED is None:
        text = resources.files("tl_geometry").joinpath("data/published_epsilon.json").read_text()
        rows = json.loads(text)["models"]
        _PUBLISHED = {r["name"]: PublishedEpsilon(int(r["d_model"]), float(r["epsilon"])) for r in rows}
    return dict(_PUBLISHED)


def _norm_name(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum() or ch == ".")


def published_epsilon(name: str) -> PublishedEpsilon:
    """Look up a published ε by model name, ignoring case, '-', '_' and spaces.

    Also accepts a Hugging Face id (``"meta-llama/Llama-2-7b-hf"`` → ``Llama-2-7B``): the part
    after '/' and a trailing ``-hf`` are ignored.

    Raises:
        KeyError: no match; the message lists close names.
    """
    import difflib

    table = published()
    key = str(name).split("/")[-1]
    candidates = [key]
    for suffix in ("-hf", "_hf", "-base", "-instruct", "-it", "-pt", "_pt"):
        if key.lower().endswith(suffix):
            candidates.append(key[: -len(suffix)])
    norm = {_norm_name(n): n for n in table}
    for cand in candidates:
        hit = norm.get(_norm_name(cand))
        if hit is not None:
            return table[hit]
    close = difflib.get_close_matches(str(name), list(table), n=3, cutoff=0.4)
    raise KeyError(f"no published ε for {name!r}; close names: {close}; see tl_geometry.published() for all {len(table)}")


# ``tg.capacity`` is the function; the issue also spells the table as ``tg.capacity.published()``.
capacity.published = published  # type: ignore[attr-defined]
capacity.published_epsilon = published_epsilon  # type: ignore[attr-defined]
