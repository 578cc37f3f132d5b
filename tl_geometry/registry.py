"""Metric registry: name -> metric, and name -> family declaration, with entry-point plugins.

A metric is a callable ``fn(model, tokens, *, hooks=None, **options) -> GeometryReport``.
Built-ins register themselves when [`tl_geometry`][tl_geometry] is imported; third-party packages
add metrics through the entry-point group ``tl_geometry.metrics`` (each entry point names a
module or callable; loading it must call [`register_metric`][tl_geometry.registry.register_metric]). Plugins are discovered
lazily, once, on the first lookup; a plugin never overrides a built-in, and a plugin that fails
to load is warned about and skipped (the habit of TransformerLens's architecture plugins).

A **family** ([`FamilySpec`][tl_geometry.registry.FamilySpec], [`register_family`][tl_geometry.registry.register_family]) declares what a group of metrics
hands to the rendering: its rows ([`RowSpec`][tl_geometry.registry.RowSpec]: name, per hook or per model, the extras
keys every such row carries), its figures ([`FigureSpec`][tl_geometry.registry.FigureSpec]) and its reading (the section of
``report.md`` / ``index.html``). [`tl_geometry.plotting`][tl_geometry.plotting], [`tl_geometry.readings`][tl_geometry.readings] and
[`tl_geometry.html`][tl_geometry.html] iterate [`families`][tl_geometry.registry.families]; a plugin gets its figure and its section by
declaring them. [`check_rows`][tl_geometry.registry.check_rows] checks a report's rows against a declaration (the contract
test runs it on every built-in). This module imports neither matplotlib nor pandas.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import logging
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tl_geometry.errors import InputError, TLGeometryError, UnknownNameError

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "tl_geometry.metrics"
Needs = Literal["weights", "activations", "gradients"]
_NEEDS = ("weights", "activations", "gradients")


@dataclass
class MetricPlan:
    """An activation metric split into capture and compute, so that one forward pass feeds many.

    A metric registered with ``plan=`` returns one of these from ``plan(model, tokens, **options)``:
    its consumers of activations (``passes``: [`tl_geometry.capture.Pass`][tl_geometry.capture.activations.Pass] objects, each
    with its hooks, positions and ``update``) and ``finish()``, which computes the rows once the
    passes were fed. [`tl_geometry.analyze`][tl_geometry.analysis.analyze] builds the plans of every such metric, runs
    ONE [`tl_geometry.capture.run_shared`][tl_geometry.capture.activations.run_shared] over the tokens for all of them (per batch size),
    then calls each ``finish``; [`run`][tl_geometry.registry.MetricPlan.run] does the same for the metric alone. Each pass sees
    exactly the rows it would see alone, so the numbers do not depend on the sharing.

    Attributes:
        name: the metric's name (progress bars, errors).
        model, tokens: what the passes read.
        passes: the consumers.
        finish: ``() -> GeometryReport``.
        batch_size: sequences per forward pass (plans share a pass only with equal batch sizes).
        progress: show the capture's progress bar when run alone.
    """

    name: str
    model: Any
    tokens: Any
    passes: Sequence[Any]
    finish: Callable[[], Any]
    batch_size: int = 8
    progress: bool = True
    info: dict[str, Any] = field(default_factory=dict)

    def run(self):
        """Feed the passes with one forward pass of their own and return ``finish()``."""
        from tl_geometry import capture

        capture.run_shared(
            self.model, self.tokens, self.passes, batch_size=self.batch_size, progress=self.progress, desc=self.name
        )
        return self.finish()


@dataclass(frozen=True)
class MetricSpec:
    """A registered metric.

    Attributes:
        name: registry key.
        fn: ``fn(model, tokens, *, hooks=None, **options) -> GeometryReport``.
        needs: what the metric reads: ``"weights"`` (tokens ignored), ``"activations"`` at
            hooks, or ``"gradients"`` at hooks.
        description: one line for ``tl-geometry`` listings.
        builtin: True for metrics shipped with tl_geometry.
        source: module (or distribution) that registered it.
        plan: optional ``plan(model, tokens, *, hooks=None, **options) -> MetricPlan`` (same
            options as ``fn``): lets [`tl_geometry.analyze`][tl_geometry.analysis.analyze] feed this metric from a forward
            pass shared with the other activation metrics.
        options_of: for a metric that forwards ``**options`` to another function, that function:
            its keyword arguments are the options the metric accepts (checked before any work).
    """

    name: str
    fn: Callable
    needs: Needs
    description: str
    builtin: bool
    source: str
    plan: Callable | None = None
    options_of: Callable | None = None

    def __call__(self, model, tokens=None, *, hooks=None, **options):
        return self.checked(self.fn(model, tokens, hooks=hooks, **options))

    def checked(self, result: Any, what: str = "returned") -> Any:
        """``result`` if it is a [`GeometryReport`][tl_geometry.report.GeometryReport], else an error naming
        this metric, where it was registered and what it returned (a plugin returning ``None`` or a
        dict would otherwise fail later, far from its cause)."""
        # GeometryReport says what it is (a class attribute): the registry, below the report in the
        # layering, does not import it.
        if not getattr(type(result), "is_geometry_report", False):
            kind = "a plugin" if not self.builtin else "a built-in"
            raise MetricResultError(
                f"metric {self.name!r} ({kind} from {self.source}) {what} {type(result).__name__}"
                f"{'' if result is None else ' ' + repr(result)[:80]}; a metric must return a "
                "tl_geometry.GeometryReport (e.g. GeometryReport(rows=[Row(...)], provenance={}))"
            )
        return result

    def checked_plan(self, plan: Any) -> Any:
        """``plan`` if it is a [`MetricPlan`][tl_geometry.registry.MetricPlan], else an error naming this metric."""
        if not isinstance(plan, MetricPlan):
            raise MetricResultError(
                f"metric {self.name!r} (registered from {self.source}): its plan returned "
                f"{type(plan).__name__}; a plan must return a tl_geometry.registry.MetricPlan"
            )
        return plan


class MetricResultError(TLGeometryError):
    """A registered metric (usually a plugin) returned something that is not a report."""


_REGISTRY: dict[str, MetricSpec] = {}
_PLUGINS_LOADED = False
_LOADING_PLUGIN: str | None = None  # name of the entry point being loaded, if any
# True until tl_geometry.families (the built-ins) finished registering; its __init__ ends it.
# Anything registered afterwards (a notebook, a plugin) is not a built-in, whatever its module.
_BUILTIN_PHASE = True

BUILTIN_FAMILIES = "tl_geometry.families"
"""The package whose import registers the built-in metrics and families. It is imported on the first lookup (or the first registration from outside tl_geometry), not by ``import tl_geometry``: the package root is lazy, so importing the math loads no model-facing code. This string is the registry's one reference to the families (a discovery, like the plugins' entry points; the import-rule test allows exactly this one)."""


def _end_builtin_phase() -> None:
    global _BUILTIN_PHASE
    _BUILTIN_PHASE = False


def load_builtins() -> None:
    """Register the built-in families (import ``BUILTIN_FAMILIES``, ``"tl_geometry.families"``) unless done or under way."""
    if _BUILTIN_PHASE and BUILTIN_FAMILIES not in sys.modules:
        importlib.import_module(BUILTIN_FAMILIES)


def _is_ours(module: str) -> bool:
    return module == "tl_geometry" or module.startswith("tl_geometry.")


def register_metric(
    name: str,
    *,
    needs: Needs = "activations",
    description: str = "",
    overwrite: bool = False,
    plan: Callable | None = None,
    options_of: Callable | None = None,
):
    """Decorator registering ``fn(model, tokens, *, hooks=None, **options) -> GeometryReport``.

    Args:
        name: the registry key (non-empty string).
        needs: ``"weights"``, ``"activations"`` or ``"gradients"``.
        description: one line shown by ``tl-geometry metrics``; defaults to the first line of
            the function's docstring.
        overwrite: replace an existing metric of the same name. A plugin can never replace a
            built-in, even with ``overwrite=True``.
        plan: optional ``plan(model, tokens, *, hooks=None, **options) -> MetricPlan`` taking the
            same options as the metric: an activation metric that gives one shares the report's
            single forward pass instead of running its own (see [`MetricPlan`][tl_geometry.registry.MetricPlan]).
        options_of: when the metric forwards ``**options`` to another function, that function
            (its keyword arguments are the options checked by [`tl_geometry.analyze`][tl_geometry.analysis.analyze]).

    Raises:
        ValueError: empty name, unknown ``needs``, or a duplicate name without ``overwrite``.

    Examples:
        >>> import tl_geometry as tg
        >>> @tg.register_metric("my_doc_metric", needs="weights", overwrite=True)
        ... def my_metric(model, tokens, *, hooks=None):
        ...     return tg.GeometryReport.from_rows([], model=model)
        >>> "my_doc_metric" in tg.list_metrics()
        True
        >>> tg.unregister_metric("my_doc_metric")
    """
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"metric name must be a non-empty string, got {name!r}")
    if needs not in _NEEDS:
        raise InputError(f"needs must be one of {_NEEDS}, got {needs!r}")
    if plan is not None and (not callable(plan) or needs != "activations"):
        raise InputError("plan= must be a callable, and only metrics with needs='activations' take one")

    def decorator(fn: Callable) -> Callable:
        module = getattr(fn, "__module__", "") or ""
        if not _is_ours(module):
            load_builtins()  # a user's metric never takes a built-in's name before the built-ins exist
        builtin = _BUILTIN_PHASE and _LOADING_PLUGIN is None and _is_ours(module)
        existing = _REGISTRY.get(name)
        if existing is not None:
            if existing.builtin and not builtin:
                raise InputError(
                    f"metric {name!r} is a tl_geometry built-in; a plugin cannot override it (choose another name)"
                )
            if not overwrite:
                raise InputError(
                    f"metric {name!r} is already registered (by {existing.source}); pass overwrite=True to replace it"
                )
        doc = (fn.__doc__ or "").strip().splitlines()
        _REGISTRY[name] = MetricSpec(
            name=name,
            fn=fn,
            needs=needs,
            description=description or (doc[0] if doc else ""),
            builtin=builtin,
            source=_LOADING_PLUGIN or str(getattr(fn, "__module__", None) or "?"),
            plan=plan,
            options_of=options_of,
        )
        return fn

    return decorator


def planned_metric(
    name: str,
    *,
    needs: Needs = "activations",
    description: str = "",
    overwrite: bool = False,
    options_of: Callable | None = None,
):
    """Decorator on a plan function: one definition gives the registered metric, its plan and its eager call.

    Decorate ``plan(model, tokens, *, hooks=None, **options) -> MetricPlan``: the metric ``name``
    is registered with that plan (a report feeds it from the shared forward pass), and the
    decorator returns the **eager** function — the plan's signature and docstring, returning a
    [`GeometryReport`][tl_geometry.report.GeometryReport] from the plan's own pass
    ([`MetricPlan.run`][tl_geometry.registry.MetricPlan.run]). The plan stays reachable as
    ``eager.plan``. Nothing is declared twice: no eager twin passing every option one by one.

    Args:
        name, needs, description, overwrite, options_of: as [`register_metric`][tl_geometry.registry.register_metric]
            (``needs`` must be ``"activations"``: only activation metrics share a pass).
    """
    if needs != "activations":
        raise InputError(f"planned_metric {name!r}: only needs='activations' metrics have a plan, got {needs!r}")

    def decorator(plan: Callable) -> Callable:
        import functools
        import inspect

        @functools.wraps(plan)
        def eager(model, tokens=None, *args, **kwargs):
            return plan(model, tokens, *args, **kwargs).run()

        eager.__signature__ = inspect.signature(plan).replace(return_annotation="GeometryReport")  # type: ignore[attr-defined]
        eager.plan = plan  # type: ignore[attr-defined]
        register_metric(
            name, needs=needs, description=description, overwrite=overwrite, plan=plan, options_of=options_of
        )(eager)
        return eager

    return decorator


def unregister_metric(name: str) -> None:
    """Remove a non-built-in metric (for tests and notebooks). Built-ins cannot be removed."""
    spec = _REGISTRY.get(name)
    if spec is None:
        raise UnknownNameError(_unknown_message(name))
    if spec.builtin:
        raise InputError(f"metric {name!r} is a built-in and cannot be unregistered")
    del _REGISTRY[name]


def load_plugins(*, force: bool = False) -> list[str]:
    """Discover entry points in group ``tl_geometry.metrics`` (once unless ``force``).

    Returns the names of the entry points that loaded. Failures are warned about and skipped.
    """
    global _PLUGINS_LOADED, _LOADING_PLUGIN
    load_builtins()
    if _PLUGINS_LOADED and not force:
        return []
    _PLUGINS_LOADED = True
    from importlib.metadata import entry_points

    loaded = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        _LOADING_PLUGIN = f"{ep.name} ({ep.value})"
        try:
            obj = ep.load()
            # An entry point may name a module (registering at import) or a callable that
            # registers when called with no arguments.
            if callable(obj) and not isinstance(obj, type) and getattr(obj, "__name__", "") == "register":
                obj()
            loaded.append(ep.name)
        except Exception as exc:  # a broken plugin must not break the host
            warnings.warn(
                f"tl_geometry: skipping metric plugin {ep.name!r} ({ep.value}): {type(exc).__name__}: {exc}",
                RuntimeWarning,
                stacklevel=2,
            )
        finally:
            _LOADING_PLUGIN = None
    return loaded


def _unknown_message(name: str) -> str:
    close = difflib.get_close_matches(str(name), list(_REGISTRY), n=3)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    return f"unknown metric {name!r}{hint} Available: {', '.join(sorted(_REGISTRY))}"


def get_metric(name: str) -> MetricSpec:
    """Return the `MetricSpec` registered as ``name``.

    Raises:
        KeyError: unknown name; the message lists close matches and every available metric.
    """
    load_plugins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownNameError(_unknown_message(name)) from None


def list_metrics(*, needs: Needs | None = None) -> list[str]:
    """Sorted names of the registered metrics (built-ins and plugins), optionally by ``needs``."""
    load_plugins()
    return sorted(n for n, s in _REGISTRY.items() if needs is None or s.needs == needs)


def metric_specs() -> list[MetricSpec]:
    """All registered `MetricSpec` objects, sorted by name."""
    load_plugins()
    return [_REGISTRY[n] for n in sorted(_REGISTRY)]


# ----------------------------------------------------------------------------- families
Per = Literal["hook", "model", "item"]
_PERS = ("hook", "model", "item")
_FIGURE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Lazy:
    """A callable named ``"module:attribute"``, imported when first called (and looked up again
    on every call, so a monkeypatched attribute is seen). Lets a family declare a figure or a
    reading without importing matplotlib or the rendering modules at ``import tl_geometry``."""

    ref: str

    def __post_init__(self):
        if not isinstance(self.ref, str) or self.ref.count(":") != 1 or not all(self.ref.split(":")):
            raise InputError(f"a lazy reference is 'module:attribute', got {self.ref!r}")

    def resolve(self) -> Callable:
        module, attr = self.ref.split(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj

    def __call__(self, *args, **kwargs):
        return self.resolve()(*args, **kwargs)


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
            or a ``"module:function"`` string imported on first use (see [`Lazy`][tl_geometry.registry.Lazy]).
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
            [`tl_geometry.reproduction`][tl_geometry.reproduction] when the family is reproduced; each check registers itself).
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
        for what in ("explain", "note"):
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
    loads). Once registered, [`tl_geometry.plotting.save_figures`][tl_geometry.plotting.save_figures] draws its figures
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
    if not _is_ours(module):
        load_builtins()
    builtin = _BUILTIN_PHASE and _LOADING_PLUGIN is None and _is_ours(module)
    existing = _FAMILIES.get(spec.name)
    if existing is not None:
        if existing.builtin and not builtin:
            raise InputError(
                f"family {spec.name!r} is a tl_geometry built-in; a plugin cannot override it (choose another name)"
            )
        if not overwrite:
            raise InputError(
                f"family {spec.name!r} is already registered (by {existing.source}); pass overwrite=True to replace it"
            )
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
    spec = dataclasses.replace(spec, builtin=builtin, source=_LOADING_PLUGIN or module or "?")
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
