"""The one validation layer: argument checks shared by the pure functions, ``tg.analyze`` and the CLI.

Pure (no model code), so ``tl_geometry.metrics`` may use it. Every check raises a
[`TLGeometryError`][tl_geometry.errors.TLGeometryError] whose message names the argument, the value received
(its type for a wrong type) and what is accepted. The rules (our choices):

- **integers**: a Python or numpy integer; ``bool`` is not an integer and neither is a float,
  even an integral one (``n_null=2.0`` is refused: a float where a count is meant is a mistake
  more often than not);
- **real numbers**: an int or float (not a bool), finite unless the check says otherwise;
- **seeds**: integers in ``[0, 2**63 - 1]`` (what torch's and numpy's generators both take
  without overflow);
- **names**: a string is one name (``metrics="pga"`` is ``["pga"]``), a list of strings is many;
  duplicates are refused;
- **arrays** (`float_matrix`): a torch tensor or a numpy array of a floating dtype, with
  data (not ``meta``), of the stated number of dimensions, finite. Low-precision input
  (float16 / bfloat16) is upcast to float32 before any math (our choice, issue 21): tolerances
  that scale with ``eps(dtype) · max(N, d)`` are meaningless at bf16 (eps = 2⁻⁷), and the
  float32 answer is the one the user means.

A type problem raises `ArgumentError`, which is both an ``InputError`` (``ValueError``) and
an ``InputTypeError`` (``TypeError``), so handlers written for either keep working.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from tl_geometry.errors import InputError, InputTypeError

__all__ = [
    "ArgumentError",
    "SEED_MAX",
    "Check",
    "int_at_least",
    "real_in",
    "positive_real",
    "boolean",
    "nonneg_int_list",
    "integer",
    "real",
    "seed",
    "flag",
    "choice",
    "names",
    "float_matrix",
    "all_finite",
    "compute_dtype",
    "describe",
]

SEED_MAX = 2**63 - 1
"""The largest seed accepted (torch and numpy generators both take it)."""


class ArgumentError(InputError, InputTypeError):
    """An argument of the wrong type or value: both a ``ValueError`` and a ``TypeError``."""


def describe(value: Any) -> str:
    """A short description of a received value for an error message: its repr and type."""
    if isinstance(value, (Tensor, np.ndarray)):
        kind = "torch tensor" if isinstance(value, Tensor) else "numpy array"
        return f"a {kind} of shape {tuple(value.shape)} and dtype {value.dtype}"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def is_int(value: Any) -> bool:
    """A Python or numpy integer, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def is_real(value: Any) -> bool:
    """An int or float (Python or numpy), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


class Check:
    """What a value must be: ``accepts`` (words) and a test; ``problem(v)`` or ``check(v, name)``."""

    def __init__(self, accepts: str, test: Callable[[Any], bool], convert: Callable[[Any], Any] = lambda v: v):
        self.accepts, self.test, self.convert = accepts, test, convert

    def problem(self, value: Any) -> str | None:
        """None if ``value`` passes, else what is accepted."""
        try:
            return None if self.test(value) else self.accepts
        except Exception:  # noqa: BLE001 - a value the test cannot even compare is not accepted
            return self.accepts

    def __call__(self, value: Any, name: str, why: str = "") -> Any:
        """``value`` converted (int / float / bool), or `ArgumentError` naming ``name``
        (``why``: a reason added in parentheses)."""
        if self.problem(value) is not None:
            reason = f" ({why})" if why else ""
            raise ArgumentError(f"{name} must be {self.accepts}{reason}, got {describe(value)}")
        return self.convert(value)


def int_at_least(lo: int, *, none_ok: bool = False, hi: int | None = None) -> Check:
    """An integer ``>= lo`` (and ``<= hi``), or None when ``none_ok``."""
    words = f"an integer >= {lo}" + (f" and <= {hi}" if hi is not None else "") + (" or None" if none_ok else "")
    return Check(
        words,
        lambda v: (none_ok and v is None) or (is_int(v) and v >= lo and (hi is None or v <= hi)),
        lambda v: None if v is None else int(v),
    )


def real_in(
    lo: float = -math.inf,
    hi: float = math.inf,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
    none_ok: bool = False,
) -> Check:
    """A finite real number in the interval (bounds open or closed), or None when ``none_ok``."""
    left = "(" if lo_open else "["
    right = ")" if hi_open else "]"
    if lo == -math.inf and hi == math.inf:
        words = "a finite number"
    elif lo == 0 and lo_open and hi == math.inf:
        words = "a positive number (finite)"
    else:
        words = f"a finite number in {left}{lo:g}, {hi:g}{right}"
    words += " or None" if none_ok else ""

    def test(v: Any) -> bool:
        if none_ok and v is None:
            return True
        if not is_real(v) or not math.isfinite(float(v)):
            return False
        x = float(v)
        return (x > lo if lo_open else x >= lo) and (x < hi if hi_open else x <= hi)

    return Check(words, test, lambda v: None if v is None else float(v))


def positive_real(*, none_ok: bool = False) -> Check:
    """A finite number > 0 (or None when ``none_ok``)."""
    return real_in(0.0, lo_open=True, none_ok=none_ok)


SEED = Check(
    "a non-negative integer (at most 2**63 - 1)",
    lambda v: is_int(v) and 0 <= v <= SEED_MAX,
    int,
)
"""A seed: an integer in [0, `SEED_MAX`]."""

boolean = Check("True or False", lambda v: isinstance(v, (bool, np.bool_)), bool)


def nonneg_int_list(*, single_ok: bool = True) -> Check:
    """A non-empty list / tuple of integers >= 0 (or one such integer when ``single_ok``)."""

    def test(v: Any) -> bool:
        vals = [v] if single_ok and is_int(v) else v
        return isinstance(vals, (list, tuple)) and bool(vals) and all(is_int(c) and c >= 0 for c in vals)

    words = ("a non-negative integer or " if single_ok else "") + "a non-empty list of non-negative integers"
    return Check(words, test, lambda v: [int(v)] if is_int(v) else [int(c) for c in v])


# ------------------------------------------------------------------ direct calls
def integer(
    value: Any, name: str, *, lo: int | None = None, hi: int | None = None, none_ok: bool = False, why: str = ""
) -> Any:
    """``value`` as an int, refusing bools, floats, None (unless ``none_ok``) and values outside [lo, hi]."""
    if lo is None:
        c = Check(
            "an integer" + (f" <= {hi}" if hi is not None else "") + (" or None" if none_ok else ""),
            lambda v: (none_ok and v is None) or (is_int(v) and (hi is None or v <= hi)),
            lambda v: None if v is None else int(v),
        )
        return c(value, name, why)
    return int_at_least(lo, none_ok=none_ok, hi=hi)(value, name, why)


def real(
    value: Any,
    name: str,
    *,
    lo: float = -math.inf,
    hi: float = math.inf,
    lo_open: bool = False,
    hi_open: bool = False,
    none_ok: bool = False,
    why: str = "",
) -> Any:
    """``value`` as a finite float in the interval, refusing bools, strings, NaN and inf."""
    return real_in(lo, hi, lo_open=lo_open, hi_open=hi_open, none_ok=none_ok)(value, name, why)


def seed(value: Any, name: str = "seed") -> int:
    """A seed: an integer in [0, `SEED_MAX`]."""
    return SEED(value, name)


def flag(value: Any, name: str) -> bool:
    """A bool (numpy's included); 0/1, strings and None are refused."""
    return boolean(value, name)


def choice(value: Any, name: str, choices: Sequence[Any]) -> Any:
    """``value`` if it is one of ``choices``, else an error listing them."""
    ok = any(type(value) is type(c) and value == c for c in choices)
    if not ok:
        raise ArgumentError(f"{name} must be one of {', '.join(repr(c) for c in choices)}; got {describe(value)}")
    return value


def names(value: Any, name: str, *, allow_empty: bool = False) -> list[str]:
    """A list of names from one string or a sequence of strings; duplicates are refused."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, (bytes, bytearray)) or not isinstance(value, (list, tuple)):
        raise ArgumentError(f"{name} must be a name or a list of names (strings), got {describe(value)}")
    bad = [v for v in value if not isinstance(v, str) or not v.strip()]
    if bad:
        raise ArgumentError(f"{name} must hold non-empty strings; got {describe(bad[0])} in {list(value)!r}")
    if not value and not allow_empty:
        raise ArgumentError(f"{name} is empty; give at least one name")
    dupes = sorted({v for v in value if value.count(v) > 1})
    if dupes:
        raise ArgumentError(f"{name} names {dupes} more than once; give each name once")
    return list(value)


# ------------------------------------------------------------------ arrays
_LOW_PRECISION = (torch.float16, torch.bfloat16)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the math runs in for input of ``dtype``: float64 stays, everything else float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def reject_meta(x: Any, name: str) -> None:
    """Raise for a tensor that holds no data (``meta`` device).

    A meta tensor has a shape but no values; every metric would otherwise fail deep inside with
    a RuntimeError from ``.item()``.
    """
    if isinstance(x, Tensor) and x.is_meta:
        raise InputError(
            f"{name} is on the 'meta' device (a shape without data); move it to a real device "
            "first, e.g. x.to('cpu') or x.to('cuda')"
        )


FINITE_BLOCK = 1 << 22
"""Entries per block of [`all_finite`][tl_geometry.base._checks.all_finite]'s exact check (16 MiB of float32)."""


def all_finite(x: Tensor) -> bool:
    """Whether the tensor ``x`` holds no NaN and no ±inf, with no temporary of x's size.

    ``torch.isfinite(x).all()`` builds |x| and three boolean tensors of x's size, 1.75× a float32
    x (1.1 GiB beside Gemma-3-270M's 262,144 × 640 embedding, measured). Here one sum comes first:
    NaN and ±inf propagate through a sum, so a finite sum proves every entry finite. Only a sum that
    is not finite (a NaN or inf entry, or large finite entries that overflow the sum) is followed by
    the exact check, in blocks of ``FINITE_BLOCK`` entries along the first dimension (views of x,
    no copy). Integer and bool tensors are finite.

    Examples:
        >>> import torch
        >>> all_finite(torch.tensor([1.0, 2.0])), all_finite(torch.tensor([1.0, float("nan")]))
        (True, False)
        >>> all_finite(torch.tensor([3e38, 3e38]))  # the sum overflows; the entries are finite
        True
    """
    if not x.dtype.is_floating_point and not x.dtype.is_complex:
        return True
    if x.numel() == 0:
        return True
    if x.ndim == 0:
        return bool(torch.isfinite(x))
    if bool(torch.isfinite(x.sum())):
        return True
    step = max(1, FINITE_BLOCK // max(1, x[0].numel()))
    return all(bool(torch.isfinite(x[i : i + step]).all()) for i in range(0, x.shape[0], step))


def float_matrix(
    x: Any,
    name: str,
    *,
    ndim: int = 2,
    shape: str = "(N, d)",
    finite: bool = True,
    upcast: bool = True,
) -> Tensor:
    """``x`` as a floating torch tensor of ``ndim`` dimensions (a numpy array is converted, zero-copy).

    float16 / bfloat16 are upcast to float32 (``upcast``); float32 / float64 are kept. Refuses
    anything but a tensor or numpy array, integer / bool / complex dtypes, a ``meta`` tensor, the
    wrong number of dimensions and (``finite``) NaN or inf, with the shape and type received.
    """
    accepted = f"a {ndim}-D torch tensor or numpy array {shape}, of a floating dtype (float16/bfloat16/32/64)"
    if isinstance(x, np.ndarray):
        if x.dtype.kind != "f":
            raise ArgumentError(f"{name} must be {accepted}; got {describe(x)}")
        if x.ndim != ndim:
            raise ArgumentError(f"{name} must be {accepted}; got {describe(x)}")
        x = torch.from_numpy(np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("=")))  # native byte order
    elif not isinstance(x, Tensor):
        raise ArgumentError(f"{name} must be {accepted}; got {describe(x)}")
    reject_meta(x, name)
    if not x.dtype.is_floating_point or x.ndim != ndim:
        raise ArgumentError(f"{name} must be {accepted}; got {describe(x)}")
    x = x.detach()
    if upcast and x.dtype in _LOW_PRECISION:
        x = x.to(torch.float32)
    if finite and not all_finite(x):
        raise InputError(f"{name} contains NaN or inf (shape {tuple(x.shape)})")
    return x
