"""Metric registry: name -> metric, with entry-point plugins; the family declarations re-exported.

A metric is a callable ``fn(model, tokens, *, hooks=None, **options) -> GeometryReport``.
Built-ins register themselves when [`tl_geometry`][tl_geometry] is imported; third-party packages
add metrics through the entry-point group ``tl_geometry.metrics`` (each entry point names a
module or callable; loading it must call [`register_metric`][tl_geometry.registry.register_metric]). Plugins are discovered
lazily, once, on the first lookup; a plugin never overrides a built-in, and a plugin that fails
to load is warned about and skipped (the habit of TransformerLens's architecture plugins).

A **family** ([`FamilySpec`][tl_geometry.registry.FamilySpec], [`register_family`][tl_geometry.registry.register_family]) declares what a group of metrics
hands to the rendering: its rows, figures and reading. Its half of the registry is
[`tl_geometry.registry.family_specs`][tl_geometry.registry.family_specs]; every name of it is re-exported here
(``tl_geometry.registry.FamilySpec``, ...). The plugin phase of both halves (built-in or plugin,
the entry point loading, the discovery of the built-ins) is
[`tl_geometry.registry.phase`][tl_geometry.registry.phase], re-exported here.
This module imports neither matplotlib nor pandas.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tl_geometry.errors import InputError, TLGeometryError, UnknownNameError
from tl_geometry.registry.family_specs import (  # noqa: F401  (the family half, re-exported: tl_geometry.registry.FamilySpec, ...)
    _FAMILIES,
    _FAMILY_SEQ,
    FamilySpec,
    FigureSpec,
    Lazy,
    Per,
    RowSpec,
    check_rows,
    declared_rows,
    families,
    family_of,
    get_family,
    list_families,
    register_family,
    unregister_family,
)
from tl_geometry.registry.phase import (  # noqa: F401  (the plugin phase: tl_geometry.registry.load_plugins, ...)
    _REGISTRY,
    BUILTIN_FAMILIES,
    ENTRY_POINT_GROUP,
    _admit,
    _end_builtin_phase,
    _is_ours,
    load_builtins,
    load_plugins,
)

logger = logging.getLogger(__name__)

Needs = Literal["weights", "activations", "gradients"]
_NEEDS = ("weights", "activations", "gradients")


@dataclass
class MetricPlan:
    """An activation metric split into capture and compute, so that one forward pass feeds many.

    A metric registered with ``plan=`` returns one of these from ``plan(model, tokens, **options)``:
    its consumers of activations (``passes``: [`tl_geometry.capture.Pass`][tl_geometry.capture.activations.Pass] objects, each
    with its hooks, positions and ``update``) and ``finish()``, which computes the rows once the
    passes were fed. [`tl_geometry.analyze`][tl_geometry.runs.analysis.analyze] builds the plans of every such metric, runs
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
            options as ``fn``): lets [`tl_geometry.analyze`][tl_geometry.runs.analysis.analyze] feed this metric from a forward
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
        if not self.builtin:
            return self._check_plugin_rows(result, what)
        return result

    def _check_plugin_rows(self, result: Any, what: str) -> Any:
        """A plugin's rows: well typed (a row of the wrong type would break the report's JSON and
        render far from its cause), and never a built-in's row name (a plugin cannot speak for a
        built-in family). Raised here, the metric fails alone: the report carries the others and
        says ``status: partial``."""
        builtin_rows = {name for name, (fam, _) in declared_rows().items() if fam.builtin}
        for i, row in enumerate(getattr(result, "rows", ())):
            where = f"metric {self.name!r} (a plugin from {self.source}) {what} row {i}"
            name = getattr(row, "metric", None)
            if not isinstance(name, str) or not name:
                raise MetricResultError(f"{where}: its metric name must be a non-empty string, got {name!r}")
            if name in builtin_rows:
                raise MetricResultError(
                    f"{where}: {name!r} is a built-in row name; a plugin names its rows after itself "
                    f"(e.g. '{self.name}.{name.rpartition('.')[2]}')"
                )
            value = getattr(row, "value", None)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise MetricResultError(f"{where} {name!r}: value must be a number, got {value!r:.60}")
            hook = getattr(row, "hook", None)
            if hook is not None and not isinstance(hook, str):
                raise MetricResultError(f"{where} {name!r}: hook must be a string or None, got {hook!r:.60}")
            layer = getattr(row, "layer", None)
            if layer is not None and (isinstance(layer, bool) or not isinstance(layer, numbers.Integral)):
                raise MetricResultError(f"{where} {name!r}: layer must be an int or None, got {layer!r:.60}")
            if not isinstance(getattr(row, "extras", None), Mapping):
                raise MetricResultError(f"{where} {name!r}: extras must be a mapping")
        # NumPy numbers (np.float32, np.int64) are numbers: stored as Python ones, so the JSON holds
        rows = tuple(
            dataclasses.replace(r, value=float(r.value), layer=None if r.layer is None else int(r.layer))
            for r in result.rows
        )
        return dataclasses.replace(result, rows=rows)

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
            (its keyword arguments are the options checked by [`tl_geometry.analyze`][tl_geometry.runs.analysis.analyze]).

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
        builtin, plugin = _admit("metric", name, module, _REGISTRY, overwrite)
        doc = (fn.__doc__ or "").strip().splitlines()
        _REGISTRY[name] = MetricSpec(
            name=name,
            fn=fn,
            needs=needs,
            description=description or (doc[0] if doc else ""),
            builtin=builtin,
            source=plugin or str(getattr(fn, "__module__", None) or "?"),
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
