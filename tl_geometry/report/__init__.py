"""GeometryReport: one long table of results plus provenance.

Every metric returns a [`GeometryReport`][tl_geometry.report.GeometryReport]. A row is one number: (model, hook, layer,
metric, value, extras). ``metric`` is a dotted name such as ``"pga.z"`` or ``"epsilon.W_E"``;
``extras`` holds JSON-able details (ccr, k, null statistics, ...). Provenance records where the
numbers came from (model, TransformerLens version, weight processing, dtype, corpus, tokens,
seed, package version).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tl_geometry.base.lazy import Lazy
from tl_geometry.base.numbers import fmt_number
from tl_geometry.errors import InputError, UnknownNameError
from tl_geometry.io.outdir import atomic_write_text, current_umask  # noqa: F401  (defined once, there)

SCHEMA_VERSION = 1


def _jsonable(x: Any) -> Any:
    """Convert tensors / numpy scalars / tuples into JSON-able Python values."""
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else str(x)  # "nan", "inf", "-inf"
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if hasattr(x, "tolist"):  # torch tensors and numpy arrays / scalars
        return _jsonable(x.tolist())
    if hasattr(x, "item"):
        return _jsonable(x.item())
    return str(x)


def _float(x: Any) -> float:
    if isinstance(x, str):
        return float(x)  # "nan" / "inf" written by _jsonable
    if hasattr(x, "item"):
        x = x.item()
    return float(x)


@dataclass(frozen=True)
class Row:
    """One number in a report."""

    model: str
    hook: str | None
    layer: int | None
    metric: str
    value: float
    extras: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "hook": self.hook,
            "layer": self.layer,
            "metric": self.metric,
            "value": _jsonable(float(self.value)),
            "extras": _jsonable(dict(self.extras)),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Row:
        """A row from `to_dict`'s form; InputError naming the problem for anything else."""
        if not isinstance(d, Mapping):
            raise InputError(f"a report row must be a JSON object, got {type(d).__name__}")
        missing = [k for k in ("model", "metric", "value") if k not in d]
        if missing:
            raise InputError(f"a report row lacks {missing}; a row has model, hook, layer, metric, value, extras")
        if not isinstance(d["metric"], str) or not d["metric"]:
            raise InputError(f"a report row's metric must be a non-empty string, got {d['metric']!r}")
        name = d["metric"]
        if not isinstance(d["model"], str):
            raise InputError(f"row {name!r}: model must be a string, got {d['model']!r}")
        if d.get("hook") is not None and not isinstance(d["hook"], str):
            raise InputError(f"row {name!r}: hook must be a string or null, got {d['hook']!r}")
        layer = d.get("layer")
        if layer is not None and (isinstance(layer, bool) or not isinstance(layer, int) or layer < 0):
            raise InputError(f"row {name!r}: layer must be a whole number >= 0 or null, got {layer!r}")
        if isinstance(d["value"], bool):
            raise InputError(f"row {name!r}: value must be a number (or 'nan'/'inf'), got {d['value']!r}")
        try:
            value = _float(d["value"])
        except (TypeError, ValueError):
            raise InputError(
                f"row {d['metric']!r}: value must be a number (or 'nan'/'inf'), got {d['value']!r}"
            ) from None
        extras = d.get("extras") or {}
        if not isinstance(extras, Mapping):
            raise InputError(f"row {d['metric']!r}: extras must be a JSON object, got {type(extras).__name__}")
        return cls(
            model=d["model"],
            hook=d.get("hook"),
            layer=d.get("layer"),
            metric=d["metric"],
            value=value,
            extras=dict(extras),
        )


def check_schema_version(version: Any) -> int:
    """``version`` when this code reads reports of that schema version, else [`InputError`][tl_geometry.errors.InputError].

    Examples:
        >>> check_schema_version(1)
        1
    """
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InputError(f"schema_version must be a whole number from 1 to {SCHEMA_VERSION}, got {version!r}")
    if version > SCHEMA_VERSION:
        raise InputError(
            f"the report has schema_version {version}, newer than this tl-geometry reads (1 to {SCHEMA_VERSION}); "
            "upgrade tl-geometry to read it"
        )
    return version


def layer_of(hook: str | None) -> int | None:
    """Layer index parsed from a hook name (``blocks.3.hook_resid_post`` → 3), else None."""
    if not hook:
        return None
    parts = hook.split(".")
    if len(parts) > 1 and parts[0] == "blocks" and parts[1].isdigit():
        return int(parts[1])
    return None


@dataclass(frozen=True)
class GeometryReport:
    """Results of one or more metrics on one or more models.

    Attributes:
        rows: the long table, one [`Row`][tl_geometry.report.Row] per number.
        provenance: where the numbers came from (model name, TL version, weight processing,
            dtype, corpus, number of tokens, seed, package version, ...).
    """

    is_geometry_report = True
    """Marks the class for the registry's check of what a metric returned (``MetricSpec.checked``, which does not import this module)."""

    rows: tuple[Row, ...] = ()
    provenance: Mapping[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ building
    @classmethod
    def from_rows(
        cls,
        rows: Iterable[Row | Mapping[str, Any]],
        *,
        model: Any = None,
        provenance: Mapping[str, Any] | None = None,
        **extra_provenance: Any,
    ) -> GeometryReport:
        """Build a report; ``model`` (a model or a name) fills provenance via `provenance_of`."""
        prov: dict[str, Any] = {}
        if model is not None:
            prov.update(provenance_of(model))
        prov.update(provenance or {})
        prov.update(extra_provenance)
        out = []
        for r in rows:
            if isinstance(r, Row):
                out.append(r)
            else:
                r = dict(r)
                r.setdefault("model", prov.get("model", "?"))
                r.setdefault("hook", None)
                r.setdefault("layer", layer_of(r["hook"]))
                r.setdefault("extras", {})
                out.append(Row(**r))
        return cls(rows=tuple(out), provenance=_jsonable(prov))

    @staticmethod
    def merge(*reports: GeometryReport, **provenance: Any) -> GeometryReport:
        """Concatenate rows; provenance is the union (later reports win), plus ``provenance``."""
        rows: list[Row] = []
        prov: dict[str, Any] = {}
        for r in reports:
            rows.extend(r.rows)
            prov.update(r.provenance)
        prov.update(_jsonable(provenance))
        return GeometryReport(rows=tuple(rows), provenance=prov)

    def filter(
        self, metric: str | None = None, *, prefix: str | None = None, hook: str | None = None
    ) -> GeometryReport:
        """Rows whose metric equals ``metric`` / starts with ``prefix`` / whose hook is ``hook``."""
        rows = [
            r
            for r in self.rows
            if (metric is None or r.metric == metric)
            and (prefix is None or r.metric.startswith(prefix))
            and (hook is None or r.hook == hook)
        ]
        return replace(self, rows=tuple(rows))

    def value(self, metric: str, hook: str | None = None, **extras: Any) -> float:
        """The single value of ``metric`` (at ``hook``, matching ``extras``); KeyError if not one."""
        hits = [
            r
            for r in self.rows
            if r.metric == metric
            and (hook is None or r.hook == hook)
            and all(r.extras.get(k) == v for k, v in extras.items())
        ]
        if len(hits) != 1:
            raise UnknownNameError(
                f"expected one row for metric={metric!r} hook={hook!r} {extras or ''}, found {len(hits)}; "
                f"metrics present: {sorted(self.metrics)}"
            )
        return hits[0].value

    @property
    def metrics(self) -> set[str]:
        return {r.metric for r in self.rows}

    def __len__(self) -> int:
        return len(self.rows)

    # ------------------------------------------------------------------ output
    def to_dict(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "provenance": _jsonable(dict(self.provenance)),
            "rows": [r.to_dict() for r in self.rows],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GeometryReport:
        """A report from `to_dict`'s form.

        ``schema_version`` must be one this version reads (1 to `SCHEMA_VERSION`; absent is
        read as 1): a report from a newer tl-geometry is refused rather than read (or rendered)
        as if its fields meant what they mean here.
        """
        if not isinstance(d, Mapping) or "rows" not in d:
            raise InputError("not a GeometryReport dict: missing 'rows'")
        check_schema_version(d.get("schema_version", 1))
        if not isinstance(d["rows"], (list, tuple)):
            raise InputError(f"a GeometryReport's 'rows' must be a list of row objects, got {type(d['rows']).__name__}")
        provenance = d.get("provenance") or {}
        if not isinstance(provenance, Mapping) or not all(isinstance(k, str) for k in provenance):
            raise InputError(
                f"a GeometryReport's 'provenance' must be a JSON object with string keys, got {type(provenance).__name__}"
            )
        rows = []
        for i, r in enumerate(d["rows"]):
            try:
                rows.append(Row.from_dict(r))
            except InputError as exc:
                raise InputError(f"row {i}: {exc}") from None
        return cls(rows=tuple(rows), provenance=dict(provenance))

    def to_json(self, path: str | os.PathLike | None = None, *, indent: int = 2) -> str:
        """Serialize to JSON; with ``path``, also write it atomically (temp file + rename)."""
        text = json.dumps(self.to_dict(), indent=indent, sort_keys=True, allow_nan=False)
        if path is not None:
            atomic_write_text(path, text)
        return text

    @classmethod
    def from_json(cls, path_or_text: str | os.PathLike) -> GeometryReport:
        """Read a report written by [`to_json`][tl_geometry.report.GeometryReport.to_json] (a path, or the JSON text itself)."""
        s = str(path_or_text)
        if s.lstrip().startswith("{"):
            return cls.from_dict(json.loads(s))
        p = Path(path_or_text)
        if not p.exists():
            raise FileNotFoundError(f"no such report file: {p}")
        return cls.from_dict(json.loads(p.read_text()))

    def to_pandas(self):
        """Long table as a ``pandas.DataFrame`` (columns model, hook, layer, metric, value, + extras).

        Raises:
            PandasNotInstalledError: pandas is missing (``pip install 'tl-geometry[pandas]'``).
        """
        from tl_geometry.base.tables import require_pandas

        pd = require_pandas()

        records = []
        for r in self.rows:
            rec = {"model": r.model, "hook": r.hook, "layer": r.layer, "metric": r.metric, "value": r.value}
            for k, v in r.extras.items():
                if isinstance(v, (int, float, str, bool)) or v is None:
                    rec[k] = v
            records.append(rec)
        df = pd.DataFrame.from_records(
            records, columns=None if records else ["model", "hook", "layer", "metric", "value"]
        )
        if len(df):
            df["layer"] = df["layer"].astype("Int64")
        return df

    def to_markdown(self, *, digits: int = 4) -> str:
        """A markdown document: provenance list (nested values as nested lists,
        `provenance_markdown`), then one table of all rows, each value with ``digits`` significant
        digits ([`fmt_number`][tl_geometry.base.numbers.fmt_number]; scientific from 10⁵ and below 10^-digits)."""
        lines = ["# Geometry report", ""]
        lines += provenance_markdown(self.provenance)
        lines += ["", "| model | hook | layer | metric | value |", "|---|---|---|---|---|"]
        for r in self.rows:
            lines.append(
                f"| {r.model} | {r.hook or ''} | {'' if r.layer is None else r.layer} | {r.metric} | {fmt_number(r.value, digits, small=10 ** (-digits))} |"
            )
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        models = sorted({r.model for r in self.rows})
        return f"GeometryReport({len(self.rows)} rows, metrics={sorted(self.metrics)}, models={models})"

    # ------------------------------------------------------------------ notebooks
    def _repr_html_(self) -> str:
        """Jupyter's rich display: the same content as ``index.html`` (readings, the family
        figures as inline PNGs, provenance, all rows), rendered by [`tl_geometry.render.html.render_html`][tl_geometry.render.html.render_html]."""
        return _NOTEBOOK_HTML(self)

    def plot(self, family: str):
        """A matplotlib figure of one family: a family's name (``"capacity"``, ``"pga"``,
        ``"spectral"``, ``"interaction"``, ``"sae"``, or a plugin's), a metric's name (the first
        of its family's figures that reads its rows: ``"epsilon"``, ``"epsilon_activations"``,
        ``"agop"``, ...), or a declared figure name (e.g. ``"cosine_histogram"``); the families
        declare their figures ([`tl_geometry.registry.register_family`][tl_geometry.registry.register_family]).

        Raises:
            ValueError: an unknown name (lists the accepted ones), or no rows for that figure.
        """
        return _PLOT(self, family)


# The report is drawn by the render room, above this one: reached by declared name only.
_NOTEBOOK_HTML = Lazy("tl_geometry.render.html:notebook_html")
_PLOT = Lazy("tl_geometry.render.plotting:plot_report")


def _nested(v: Any) -> bool:
    """A value shown as a nested list or table: a mapping, or a list holding one."""
    return isinstance(v, Mapping) or (isinstance(v, (list, tuple)) and any(isinstance(x, Mapping) for x in v))


def format_value(v: Any) -> str:
    """A provenance or extras value as a person reads it (not a Python repr).

    ``None`` → ``none``, booleans → ``true`` / ``false``, floats to 6 significant digits, a list
    of plain values joined with ``", "`` (``none`` when empty), strings as they are; a mapping
    (inline, where no nesting is possible) as ``key: value; key: value``.

    Examples:
        >>> format_value({"mode": "shared", "forward_passes": 1, "metrics": ["pga", "spectral"]})
        'mode: shared; forward_passes: 1; metrics: pga, spectral'
        >>> format_value([64, 128]), format_value(None), format_value(0.1234567)
        ('64, 128', 'none', '0.123457')
    """
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return fmt_number(v, 6, big=math.inf, small=0.0)  # never forced into scientific notation
    if isinstance(v, Mapping):
        return "; ".join(f"{k}: {format_value(x)}" for k, x in v.items()) if v else "none"
    if isinstance(v, (list, tuple)):
        return ", ".join(format_value(x) for x in v) if v else "none"
    return str(v)


def provenance_markdown(prov: Mapping[str, Any], *, indent: int = 0) -> list[str]:
    """Markdown list lines of ``prov``, keys sorted: ``- **key**: value``, a nested mapping as a
    nested list under its key, a list of mappings as numbered sub-lists (e.g. ``sources``)."""
    pad = " " * indent
    lines = []
    for k in sorted(prov, key=str) if indent == 0 else prov:
        v = prov[k]
        key = f"**{k}**" if indent == 0 else str(k)
        if not _nested(v) or not v:
            lines.append(f"{pad}- {key}: {format_value(v)}")
        elif isinstance(v, Mapping):
            lines.append(f"{pad}- {key}:")
            lines += provenance_markdown(v, indent=indent + 2)
        else:
            lines.append(f"{pad}- {key}:")
            for i, item in enumerate(v, 1):
                if isinstance(item, Mapping) and item:
                    lines.append(f"{pad}  - {i}:")
                    lines += provenance_markdown(item, indent=indent + 4)
                else:
                    lines.append(f"{pad}  - {i}: {format_value(item)}")
    return lines


def model_name(model: Any) -> str:
    """A display name for a model (a string passes through); [`tl_geometry.models.model_name_of`][tl_geometry.models.model_name_of]."""
    from tl_geometry.models import model_name_of

    return model_name_of(model)


def transformer_lens_version(module: Any = None) -> str:
    """The installed TransformerLens version (TL 3.x and 4.x have no ``__version__``: read the
    distribution's metadata), or ``"unknown"``."""
    from importlib import metadata

    for dist in ("transformer-lens", "transformer_lens"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    version = getattr(module, "__version__", None)
    return str(version) if version else "unknown"


def provenance_of(model: Any) -> dict[str, Any]:
    """Provenance fields of a model: name, the file it was loaded from (``model_path``, for a zoo
    model or a local path), class, TL version, shape, dtype, weight processing."""
    from tl_geometry import __version__

    prov: dict[str, Any] = {"model": model_name(model), "tl_geometry_version": __version__}
    if isinstance(model, str):
        return prov
    try:
        import transformer_lens

        prov["transformer_lens_version"] = transformer_lens_version(transformer_lens)
    except ImportError:  # pragma: no cover
        pass
    path = getattr(model, "_tl_geometry_path", None)  # the file a zoo model or a local path was loaded from
    if path:
        prov["model_path"] = str(path)
    cfg = getattr(model, "cfg", None)
    prov["model_class"] = type(model).__name__
    if cfg is not None:
        for key in ("n_layers", "d_model", "d_vocab", "n_ctx", "n_heads", "d_mlp"):
            if getattr(cfg, key, None) is not None:
                prov[key] = getattr(cfg, key)
        dtype = getattr(cfg, "dtype", None)
        prov["dtype"] = str(dtype) if dtype is not None else None
    processing = getattr(model, "_tl_geometry_processing", None)
    if processing is None:
        # HookedTransformer.from_pretrained records what it did on the config (TL 3.x).
        processing = {
            k: getattr(cfg, attr)
            for k, attr in (
                ("fold_ln", "layer_norm_folding"),
                ("center_writing_weights", "center_writing_weights"),
                ("center_unembed", "center_unembed"),
            )
            if cfg is not None and hasattr(cfg, attr)
        }
    prov["weight_processing"] = processing
    from tl_geometry.models import processing_name

    prov["processing"] = processing_name(model)  # "tl", "none", "custom" or "unknown"
    return prov
