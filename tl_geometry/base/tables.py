"""DataFrame forms of tl_geometry's result types: ``result.to_pandas()`` on every one of them.

Every result dataclass a public ``tg.*`` function returns ([`SimilarityStats`][tl_geometry.metrics.capacity.SimilarityStats],
[`PGAScore`][tl_geometry.metrics.pga.PGAScore], [`AGOPResult`][tl_geometry.metrics.interaction.AGOPResult], ...) mixes in
[`Tabular`][tl_geometry.base.tables.Tabular]: ``to_pandas()`` gives a ``pandas.DataFrame`` with one row per unit the result
holds (one row for a single score, one per hook for an AGOP result, one per SAE, ...) and one
column per scalar field; tensors, histograms and other non-scalar fields are left out (they stay
on the object and in ``to_dict()``). [`to_pandas`][tl_geometry.base.tables.to_pandas] does the same for the dicts and lists some
functions return (``tg.pga_profile`` → ``{ccr: PGAScore}``, ``tg.sae.widths()`` → a list).

pandas is an optional dependency (``pip install 'tl-geometry[pandas]'``), imported only here,
inside the functions; without it these raise [`PandasNotInstalledError`][tl_geometry.base.tables.PandasNotInstalledError] naming the extra.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tl_geometry.errors import TLGeometryError

__all__ = ["PandasNotInstalledError", "Tabular", "records_of", "require_pandas", "to_pandas"]


class PandasNotInstalledError(ImportError, TLGeometryError):
    """``to_pandas()`` was called without pandas installed (the ``pandas`` extra)."""


def require_pandas():
    """The ``pandas`` module, or [`PandasNotInstalledError`][tl_geometry.base.tables.PandasNotInstalledError] naming the extra to install."""
    try:
        import pandas as pd
    except ImportError as exc:
        raise PandasNotInstalledError(
            "to_pandas() needs pandas, which is not installed: pip install 'tl-geometry[pandas]'"
        ) from exc
    return pd


_SKIP = object()


def _scalar(v: Any) -> Any:
    """A plain Python scalar for ``v``, or ``_SKIP`` for anything that is not one."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, numbers.Number):  # int, float, numpy scalars
        return v.item() if hasattr(v, "item") else v
    if isinstance(v, Path):
        return str(v)
    numel = getattr(v, "numel", None)  # a 0-d / one-element tensor
    if callable(numel) and getattr(v, "ndim", None) == 0:
        return v.item()
    return _SKIP


def flat_record(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """The scalar entries of ``d``; nested mappings flattened as ``"outer.inner"``; others dropped."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flat_record(v, f"{key}."))
            continue
        s = _scalar(v)
        if s is not _SKIP:
            out[key] = s
    return out


def _fields(obj: Any) -> dict[str, Any]:
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if hasattr(obj, "_asdict"):  # a NamedTuple
        return obj._asdict()
    raise TypeError(f"cannot tabulate {type(obj).__name__}")


class Tabular:
    """Mixin giving a result type ``to_pandas()``.

    A subclass with several units (hooks, SAEs, rows) overrides [`records`][tl_geometry.base.tables.Tabular.records]; the default is
    one record of the scalar fields of ``to_dict()`` (or of the dataclass fields).
    """

    def records(self) -> list[dict[str, Any]]:
        """One dict per table row: the scalar fields (nested mappings flattened as ``a.b``)."""
        return [flat_record(_fields(self))]

    def to_pandas(self):
        """This result as a ``pandas.DataFrame``: one row per [`records`][tl_geometry.base.tables.Tabular.records] entry.

        Raises:
            PandasNotInstalledError: pandas is missing (``pip install 'tl-geometry[pandas]'``).
        """
        pd = require_pandas()
        return pd.DataFrame.from_records(self.records())


def records_of(obj: Any) -> list[dict[str, Any]]:
    """The table rows of a result, or of a dict / list / tuple of results (see [`to_pandas`][tl_geometry.base.tables.to_pandas])."""
    if isinstance(obj, Tabular):
        return obj.records()
    return [flat_record(_fields(obj))]


def to_pandas(results: Any, *, key: str = "key"):
    """A ``pandas.DataFrame`` of a result, a list of results, or a dict of them.

    Args:
        results: anything with ``to_pandas()``/``records()`` (every result type here), a list or
            tuple of them (rows concatenated), or a mapping key → result (the key becomes column
            ``key``, first), e.g. ``tg.pga_profile(...)``'s ``{ccr: PGAScore}`` with ``key="ccr"``.
        key: the column name for a mapping's keys.

    Raises:
        PandasNotInstalledError: pandas is missing (``pip install 'tl-geometry[pandas]'``).
        TypeError: something that is not a result.

    Examples:
        >>> import torch
        >>> import tl_geometry as tg
        >>> from tl_geometry.base.tables import to_pandas
        >>> list(to_pandas({"I": tg.aofe(torch.eye(3))}, key="name").columns)
        ['name', 'aofe', 'ratio', 'frobenius2']
    """
    pd = require_pandas()
    if isinstance(results, Mapping):
        rows = [
            {key: _scalar(k) if _scalar(k) is not _SKIP else str(k), **r}
            for k, v in results.items()
            for r in records_of(v)
        ]
    elif isinstance(results, Sequence) and not isinstance(results, (str, bytes)) and not hasattr(results, "_asdict"):
        rows = [r for v in results for r in records_of(v)]
    else:
        rows = records_of(results)
    return pd.DataFrame.from_records(rows)
