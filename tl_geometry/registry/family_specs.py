"""Family registry: name -> family declaration (rows, figures, reading), for the rendering.

A **family** ([`FamilySpec`][tl_geometry.registry.FamilySpec], [`register_family`][tl_geometry.registry.register_family]) declares what a group of metrics
hands to the rendering: its rows ([`RowSpec`][tl_geometry.registry.RowSpec]: name, per hook or per model, the extras
keys every such row carries), its figures ([`FigureSpec`][tl_geometry.registry.FigureSpec]) and its reading (the section of
``report.md`` / ``index.html``). [`tl_geometry.render.plotting`][tl_geometry.render.plotting], [`tl_geometry.render.readings`][tl_geometry.render.readings] and
[`tl_geometry.render.html`][tl_geometry.render.html] iterate [`families`][tl_geometry.registry.families]; a plugin gets its figure and its section by
declaring them. [`check_rows`][tl_geometry.registry.check_rows] checks a report's rows against a declaration (the contract
test runs it on every built-in). This module imports neither matplotlib nor pandas.

The metric half, ``tl_geometry.registry``, re-exports every name here. The plugin phase of both
halves (whether a registration is a built-in, which entry point is loading, the discovery of the
built-ins and of the plugins) is [`tl_geometry.registry.phase`][tl_geometry.registry.phase]:
[`register_family`][tl_geometry.registry.register_family] asks it (``phase._admit``) exactly as
[`register_metric`][tl_geometry.registry.register_metric] does. This module does not import the
metric half.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tl_geometry.base.lazy import Lazy
from tl_geometry.errors import InputError, UnknownNameError
from tl_geometry.registry.phase import _REGISTRY, _admit, load_plugins

Per = Literal["hook", "model", "item"]
_PERS = ("hook", "model", "item")
_FIGURE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def _callable(obj: Any, what: str) -> Callable:
    if isinstance(obj, str):
        return Lazy(obj)
    if not callable(obj):
        raise InputError(f"{what} must be a callable or a 'module:attribute' string, got {obj!r}")
    return obj


def _names(obj: Any, what: str) -> tuple[str, ...]:
    if isinstance(obj, str):
        obj = (obj,)
    out = tuple(obj)
    if not all(isinstance(x, str) and x for x in out):
        raise InputError(f"{what} must be non-empty strings, got {obj!r}")
    return out


@dataclass(frozen=True)
class RowSpec:
    """One row name a family's metrics emit.

    Attributes:
        metric: the row's name as in `tl_geometry.Row.metric` (``"pga.z"``).
        per: ``"hook"`` (one row per hook, ``hook`` set), ``"model"`` (one per model, no hook)
            or ``"item"`` (one per listed item, e.g. an SAE, with its hook where known).
        extras: the ``extras`` keys every such row carries.
        optional: ``extras`` keys some such rows carry (under some options or inputs).
        description: one line for the docs.
        by: the registered metric that emits it; may be omitted when the family has one metric.
        when: empty when the metric always emits the row (with its default options); else the
            condition under which it does (``"SAE objects given in saes="``).
    """

    metric: str
    per: Per = "hook"
    extras: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    description: str = ""
    by: str | None = None
    when: str = ""

    def __post_init__(self):
        if not isinstance(self.metric, str) or not self.metric.strip():
            raise InputError(f"a row's metric must be a non-empty string, got {self.metric!r}")
        if self.per not in _PERS:
            raise InputError(f"row {self.metric!r}: per must be one of {_PERS}, got {self.per!r}")
        object.__setattr__(self, "extras", _names(self.extras, f"row {self.metric!r}: extras"))
        object.__setattr__(self, "optional", _names(self.optional, f"row {self.metric!r}: optional"))


@dataclass(frozen=True)
class FigureSpec:
    """One figure a family draws.

    Attributes:
        name: the figure's name; the file is ``<name>.png`` (letters, digits, ``_ . -``).
        draw: ``draw(report) -> matplotlib Figure | None`` (None when the report lacks its rows),
            or a ``"module:function"`` string imported on first use (see [`Lazy`][tl_geometry.base.lazy.Lazy]).
        caption: shown under the figure in ``index.html``.
        rows: the row names it reads (declared rows of some family).
    """

    name: str
    draw: Callable[[Any], Any] | str  # a str becomes a Lazy in __post_init__
    caption: str = ""
    rows: tuple[str, ...] = ()

    def __post_init__(self):
        if not isinstance(self.name, str) or not _FIGURE_NAME.match(self.name):
            raise InputError(f"a figure name must be letters, digits, '_', '.' or '-', got {self.name!r}")
        object.__setattr__(self, "draw", _callable(self.draw, f"figure {self.name!r}: draw"))
        object.__setattr__(self, "rows", _names(self.rows, f"figure {self.name!r}: rows"))

    @property
    def file(self) -> str:
        """The PNG's file name."""
        return f"{self.name}.png"


@dataclass(frozen=True)
class FamilySpec:
    """What a family of metrics declares to the rendering: rows, figures, reading.

    Attributes:
        name: registry key (``"capacity"``); [`tl_geometry.GeometryReport.plot`][tl_geometry.report.GeometryReport.plot] accepts it.
        title: the section title of the readings, ``report.md`` and ``index.html``
            (``"Capacity"``; default: the name). A section appears when the report has rows for
            it: sentences from ``read`` or one of ``figures``; a family with neither (``shape``)
            never has one.
        paper: the paper it implements (``"arXiv 2606.02765"``), for the docs.
        metrics: the registered metrics of the family.
        rows: every row name they emit ([`RowSpec`][tl_geometry.registry.RowSpec]).
        figures: its figures, in the order the section shows them.
        read: ``read(report) -> list[str]``: the section's sentences ([] when the report lacks its
            rows), or a ``"module:function"`` string.
        plot: the figure [`plot`][tl_geometry.report.GeometryReport.plot] draws for the family's name
            (default: the first).
        order: position of the section among the families (lower first; built-ins 10–60).
        checks: the module holding the family's reproduce checks (imported by
            [`tl_geometry.runs.reproduction`][tl_geometry.runs.reproduction] when the family is reproduced; each check registers itself).
        command: the module of the family's CLI sub-command (its ``add_parser(subparsers)`` is
            called by ``tl-geometry``'s parser).
        explain: ``explain(row) -> str``: why one of the family's rows is NaN, in words ("" when the
            family has nothing to say), or a ``"module:function"`` string; the summary table uses it.
        note: ``note(report) -> str | None``: a line for the summary when the family's metric ran
            but has no rows to show (the SAE comparison without SAEs), or a ``"module:function"``.
        labels: ``{row name: short label}`` the summary table shows instead of the description.
        report_options: ``{metric: options}`` the report passes to the family's metrics
            (our sizes for a report, where the functions' own defaults are the papers').
        fast_options: the same for ``report --fast``.
        not_in_default_report: ``{metric: why}`` for the family's metrics the report runs only
            when named in ``--metrics``.
        memory: ``memory(shape, *, n_seqs, seq_len, options) -> int``: the peak working set, in
            bytes beyond the loaded model and the report's captured activations, of the family's
            metrics in one report (``shape`` a [`tl_geometry.models.ModelShape`][tl_geometry.models.ModelShape] read before
            the load; ``options`` ``{metric: options}`` for those of its metrics the report runs,
            the family's report options merged with the user's), or a ``"module:function"``
            string. [`tl_geometry.runs.memory.estimate`][tl_geometry.runs.memory.estimate] takes the
            largest over the families being run (the metrics run one after another); a family
            without it adds nothing to the estimate.
        builtin, source: filled in by [`register_family`][tl_geometry.registry.register_family].

    The accumulator side of the contract is the metrics' own: an activation metric registered
    with ``plan=`` feeds from the report's shared forward pass ([`MetricPlan`][tl_geometry.registry.MetricPlan]);
    [`planned`][tl_geometry.registry.FamilySpec.planned] lists them.
    """

    name: str
    title: str = ""
    paper: str = ""
    metrics: tuple[str, ...] = ()
    rows: tuple[RowSpec, ...] = ()
    figures: tuple[FigureSpec, ...] = ()
    read: Callable[[Any], list[str]] | str | None = None  # a str becomes a Lazy in __post_init__
    plot: str | None = None
    order: float = 100.0
    checks: str | None = None
    command: str | None = None
    explain: Callable[[Any], str] | str | None = None  # a str becomes a Lazy in __post_init__
    note: Callable[[Any], str | None] | str | None = None
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    report_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, hash=False)
    fast_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, hash=False)
    not_in_default_report: Mapping[str, str] = field(default_factory=dict, hash=False)
    memory: Callable[..., int] | str | None = None  # a str becomes a Lazy in __post_init__
    builtin: bool = False
    source: str = ""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise InputError(f"family name must be a non-empty string, got {self.name!r}")
        metrics = _names(self.metrics, f"family {self.name!r}: metrics")
        object.__setattr__(self, "metrics", metrics)
        rows = []
        for r in self.rows:
            if not isinstance(r, RowSpec):
                raise InputError(f"family {self.name!r}: rows must be RowSpec objects, got {r!r}")
            if r.by is None:
                if len(metrics) != 1:
                    raise InputError(f"family {self.name!r}, row {r.metric!r}: say which metric emits it (by=...)")
                r = dataclasses.replace(r, by=metrics[0])
            elif r.by not in metrics:
                raise InputError(
                    f"family {self.name!r}, row {r.metric!r}: by={r.by!r} is not one of its metrics {metrics}"
                )
            rows.append(r)
        _unique([r.metric for r in rows], f"family {self.name!r}: row")
        object.__setattr__(self, "rows", tuple(rows))
        figures = tuple(self.figures)
        if not all(isinstance(f, FigureSpec) for f in figures):
            raise InputError(f"family {self.name!r}: figures must be FigureSpec objects")
        _unique([f.name for f in figures], f"family {self.name!r}: figure")
        object.__setattr__(self, "figures", figures)
        if self.read is not None:
            object.__setattr__(self, "read", _callable(self.read, f"family {self.name!r}: read"))
        for what in ("explain", "note", "memory"):
            if getattr(self, what) is not None:
                object.__setattr__(self, what, _callable(getattr(self, what), f"family {self.name!r}: {what}"))
        for what in ("checks", "command"):
            mod = getattr(self, what)
            if mod is not None and (not isinstance(mod, str) or not mod or ":" in mod):
                raise InputError(f"family {self.name!r}: {what} must be a module name ('package.module'), got {mod!r}")
        for what in ("report_options", "fast_options"):
            opts = getattr(self, what)
            bad = [m for m in opts if m not in metrics]
            if bad:
                raise InputError(f"family {self.name!r}: {what} name {bad}, which are not its metrics {metrics}")
            object.__setattr__(self, what, {m: dict(o) for m, o in opts.items()})
        bad = [m for m in self.not_in_default_report if m not in metrics]
        if bad:
            raise InputError(f"family {self.name!r}: not_in_default_report names {bad}, not its metrics {metrics}")
        object.__setattr__(self, "labels", dict(self.labels))
        object.__setattr__(self, "not_in_default_report", dict(self.not_in_default_report))
        if self.plot is not None and self.plot not in {f.name for f in figures}:
            raise InputError(f"family {self.name!r}: plot={self.plot!r} is not one of its figures")

    def row(self, name: str) -> RowSpec | None:
        """The declaration of row ``name``, or None."""
        return next((r for r in self.rows if r.metric == name), None)

    def rows_of(self, metric: str) -> tuple[RowSpec, ...]:
        """The rows the registered metric ``metric`` emits."""
        return tuple(r for r in self.rows if r.by == metric)

    def figure(self, name: str) -> FigureSpec | None:
        return next((f for f in self.figures if f.name == name), None)

    @property
    def plot_figure(self) -> FigureSpec | None:
        """The figure drawn for the family's name (`plot`, else the first), or None."""
        return self.figure(self.plot) if self.plot else (self.figures[0] if self.figures else None)

    @property
    def section(self) -> str:
        """The section title (``title``, else the name)."""
        return self.title or self.name

    @property
    def planned(self) -> tuple[str, ...]:
        """Its registered metrics that share the report's forward pass (registered with ``plan=``)."""
        return tuple(m for m in self.metrics if m in _REGISTRY and _REGISTRY[m].plan is not None)


def _unique(names: Sequence[str], what: str) -> None:
    seen = set()
    for n in names:
        if n in seen:
            raise InputError(f"{what} {n!r} is declared twice")
        seen.add(n)


_FAMILIES: dict[str, FamilySpec] = {}
_FAMILY_SEQ: dict[str, int] = {}


def _caller_module(depth: int = 2) -> str:
    try:
        return sys._getframe(depth).f_globals.get("__name__", "") or ""
    except ValueError:  # pragma: no cover - no such frame
        return ""


def register_family(spec: FamilySpec, *, overwrite: bool = False) -> FamilySpec:
    """Declare a family: its rows, figures and reading join the report's rendering.

    Call it where the family's metrics are registered (a plugin: in the module its entry point
    loads). Once registered, [`tl_geometry.render.plotting.save_figures`][tl_geometry.render.plotting.save_figures] draws its figures
    (``<name>.png``), ``index.html`` and ``report.md`` show its section with them, and
    [`tl_geometry.GeometryReport.plot`][tl_geometry.report.GeometryReport.plot] accepts its name.

    Args:
        spec: the declaration.
        overwrite: replace a family of the same name. A plugin can never replace a built-in.

    Returns:
        The registered spec (with ``builtin`` and ``source`` filled in).

    Raises:
        ValueError: a duplicate name without ``overwrite``; a built-in replaced by a plugin; a
            row name, figure name or section title another family already declares.

    Examples:
        >>> import tl_geometry as tg
        >>> spec = tg.register_family(tg.FamilySpec("my_doc_family", metrics=("my_doc_metric",),
        ...     rows=(tg.RowSpec("my_doc.norm", per="model"),)))
        >>> tg.get_family("my_doc_family").row("my_doc.norm").by
        'my_doc_metric'
        >>> tg.unregister_family("my_doc_family")
    """
    if not isinstance(spec, FamilySpec):
        raise InputError(f"register_family takes a FamilySpec, got {type(spec).__name__}")

    module = _caller_module()
    builtin, plugin = _admit("family", spec.name, module, _FAMILIES, overwrite)
    for other in _FAMILIES.values():
        if other.name == spec.name:
            continue
        rows = {r.metric for r in other.rows} & {r.metric for r in spec.rows}
        figs = {f.name for f in other.figures} & {f.name for f in spec.figures}
        if rows:
            raise InputError(f"family {spec.name!r}: rows {sorted(rows)} are already declared by family {other.name!r}")
        if figs:
            raise InputError(
                f"family {spec.name!r}: figures {sorted(figs)} are already declared by family {other.name!r}"
            )
        if spec.title and spec.title == other.title:
            raise InputError(f"family {spec.name!r}: section title {spec.title!r} is family {other.name!r}'s")
    spec = dataclasses.replace(spec, builtin=builtin, source=plugin or module or "?")
    _FAMILIES[spec.name] = spec
    _FAMILY_SEQ.setdefault(spec.name, len(_FAMILY_SEQ))
    return spec


def unregister_family(name: str) -> None:
    """Remove a non-built-in family (for tests and notebooks). Built-ins cannot be removed."""
    spec = _FAMILIES.get(name)
    if spec is None:
        raise UnknownNameError(_unknown_family(name))
    if spec.builtin:
        raise InputError(f"family {name!r} is a built-in and cannot be unregistered")
    del _FAMILIES[name]
    _FAMILY_SEQ.pop(name, None)


def _unknown_family(name: str) -> str:
    close = difflib.get_close_matches(str(name), list(_FAMILIES), n=3)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    return f"unknown family {name!r}{hint} Available: {', '.join(sorted(_FAMILIES))}"


def families() -> list[FamilySpec]:
    """Every registered family (built-ins and plugins), in section order (``order``, then registration)."""

    load_plugins()
    return sorted(_FAMILIES.values(), key=lambda f: (f.order, _FAMILY_SEQ.get(f.name, 0)))


def get_family(name: str) -> FamilySpec:
    """The [`FamilySpec`][tl_geometry.registry.FamilySpec] registered as ``name``.

    Raises:
        KeyError: unknown name; the message lists close matches and every family.
    """

    load_plugins()
    try:
        return _FAMILIES[name]
    except KeyError:
        raise UnknownNameError(_unknown_family(name)) from None


def family_of(metric: str) -> FamilySpec | None:
    """The family that lists the registered metric ``metric``, or None."""
    return next((f for f in families() if metric in f.metrics), None)


def check_rows(
    family: FamilySpec | str,
    rows: Any,
    *,
    metric: str | None = None,
    require_all: bool = True,
    strict_extras: bool = False,
) -> list[str]:
    """Problems of ``rows`` (a report or its rows) against a family's declaration; [] when none.

    Checked: every row's name is declared by the family (by ``metric``, when given); a per-hook
    row has a hook and a per-model row none; every declared extras key is present; with
    ``strict_extras``, no key outside ``extras`` and ``optional``; with ``require_all``, every
    declared row without a ``when`` (of ``metric``, when given) is emitted.
    """
    spec = get_family(family) if isinstance(family, str) else family
    rows = list(getattr(rows, "rows", rows))
    problems: set[str] = set()
    where = f"family {spec.name!r}" + (f", metric {metric!r}" if metric else "")
    for row in rows:
        decl = spec.row(row.metric)
        if decl is None:
            problems.add(f"{where}: row {row.metric!r} is not declared")
            continue
        if metric is not None and decl.by != metric:
            problems.add(f"{where}: row {row.metric!r} is declared as emitted by {decl.by!r}")
        if decl.per == "hook" and row.hook is None:
            problems.add(f"{where}: row {row.metric!r} is per hook but has no hook")
        if decl.per == "model" and row.hook is not None:
            problems.add(f"{where}: row {row.metric!r} is per model but has hook {row.hook!r}")
        extras = dict(row.extras)
        missing = [k for k in decl.extras if k not in extras]
        if missing:
            problems.add(f"{where}: row {row.metric!r} lacks declared extras {missing}")
        if strict_extras:
            extra = sorted(set(extras) - set(decl.extras) - set(decl.optional))
            if extra:
                problems.add(f"{where}: row {row.metric!r} carries undeclared extras {extra}")
    if require_all:
        emitted = {r.metric for r in rows}
        declared = spec.rows_of(metric) if metric is not None else spec.rows
        absent = [r.metric for r in declared if not r.when and r.metric not in emitted]
        if absent:
            problems.add(f"{where}: declared rows not emitted: {absent}")
    return sorted(problems)


def declared_rows(names: Iterable[str] | None = None) -> dict[str, tuple[FamilySpec, RowSpec]]:
    """``{row name: (family, row spec)}`` over every family (or only ``names``)."""
    out = {r.metric: (f, r) for f in families() for r in f.rows}
    return out if names is None else {n: out[n] for n in names if n in out}


def list_families() -> list[str]:
    """Names of the registered families, in section order (see [`families`][tl_geometry.registry.families])."""
    return [f.name for f in families()]
