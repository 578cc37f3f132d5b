"""The one number formatter: a value as the tables and readings show it.

Every text a person reads (a family's reading, ``report.md``, ``reproduce.md``, a study's page)
formats its numbers with [`fmt_number`][tl_geometry.base.numbers.fmt_number]; the places differ
only in the keywords they pass (how many digits, where scientific notation starts, what a missing
value reads), each documented where it is passed.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any, Literal

__all__ = ["fmt_number"]


def fmt_number(
    v: Any,
    digits: int = 3,
    *,
    sci_digits: int | None = None,
    big: float = 1e5,
    small: float = 1e-3,
    none: str = "None",
    nonfinite: str | None = None,
    below_one: Literal["significant", "decimals"] = "significant",
    ints: Literal["number", "plain", "grouped"] = "number",
) -> str:
    """``v`` as text: ``digits`` significant digits, scientific notation for magnitudes at or
    above ``big`` or (non-zero) below ``small``.

    Args:
        v: a number (Python or NumPy); ``None`` and any other value (a string, a bool) pass as
            ``none`` and ``str(v)``.
        digits: significant digits (``f"{v:.{digits}g}"``).
        sci_digits: digits after the point in scientific notation (``f"{v:.{sci_digits}e}"``);
            ``digits - 1`` (the same significant digits) by default.
        big: scientific notation at or above this magnitude.
        small: scientific notation below this magnitude (0 is always ``"0"``).
        none: what ``None`` reads.
        nonfinite: what NaN and ±inf read; ``None``: ``"nan"``, ``"inf"``, ``"-inf"``.
        below_one: ``"decimals"``: a magnitude under 1 (and not scientific) with ``digits``
            decimals (``0.500``) instead of ``digits`` significant digits (``0.5``).
        ints: an integer as a number like any other (``"number"``), as it is (``"plain"``), or
            with thousands separated below 10⁷ and 3 significant digits from there
            (``"grouped"``: ``12,345``, ``1.23e+08``).

    Examples:
        >>> fmt_number(0.123456), fmt_number(123456.0), fmt_number(0.0001234), fmt_number(float("nan"))
        ('0.123', '1.23e+05', '1.23e-04', 'nan')
        >>> fmt_number(0.5, 3, below_one="decimals"), fmt_number(None, none="—"), fmt_number(12345, ints="grouped")
        ('0.500', '—', '12,345')
    """
    if v is None:
        return none
    if isinstance(v, bool) or not isinstance(v, Real):
        return str(v)
    if isinstance(v, Integral) and ints != "number":
        if ints == "plain":
            return str(v)
        n = int(v)
        return f"{n:,}" if abs(n) < 10**7 else f"{n:.3g}"
    if not math.isfinite(v):
        return str(v) if nonfinite is None else nonfinite
    if v != 0 and (abs(v) >= big or abs(v) < small):
        return f"{v:.{digits - 1 if sci_digits is None else sci_digits}e}"
    if below_one == "decimals" and abs(v) < 1:
        return f"{v:.{digits}f}"
    return f"{v:.{digits}g}"
