"""Checks shared by the metric families (pure; no model code)."""

from __future__ import annotations

from torch import Tensor

from tl_geometry.errors import InputError


def reject_meta(x: Tensor, name: str) -> None:
    """Raise ValueError for a tensor that holds no data (``meta`` device).

    A meta tensor has a shape but no values; every metric would otherwise fail deep inside with
    a RuntimeError from ``.item()``.
    """
    if isinstance(x, Tensor) and x.is_meta:
        raise InputError(
            f"{name} is on the 'meta' device (a shape without data); move it to a real device "
            "first, e.g. x.to('cpu') or x.to('cuda')"
        )
