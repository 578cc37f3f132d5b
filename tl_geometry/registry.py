"""Metric registry: name -> metric, with entry-point plugins.

A metric is a callable ``fn(model, tokens, *, hooks=None, **options) -> GeometryReport``.
Built-ins register themselves when :mod:`tl_geometry` is imported; third-party packages
add metrics through the entry-point group ``tl_geometry.metrics`` (each entry point names a
module or callable; loading it must call :func:`register_metric`). Plugins are discovered
lazily, once, on the first lookup; a plugin never overrides a built-in, and a plugin that fails
to load is warned about and skipped (the habit of TransformerLens's architecture plugins).
"""

from __future__ import annotations

import difflib
import logging
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "tl_geometry.metrics"
Needs = Literal["weights", "activations", "gradients"]
_NEEDS = ("weights", "activations", "gradients")


@dataclass
class MetricPlan:
    """An activation metric split into capture and compute, so that one forward pass feeds many.

    A metric registered with ``plan=`` returns one of these from ``plan(model, tokens, **options)``:
    its consumers of activations (``passes``: :class:`tl_geometry.capture.Pass` objects, each
    with its hooks, positions and ``update``) and ``finish()``, which computes the rows once the
    passes were fed. :func:`tl_geometry.analyze` builds the plans of every such metric, runs
    ONE :func:`tl_geometry.capture.run_shared` over the tokens for all of them (per batch size),
    then calls each ``finish``; :meth:`run` does the same for the metric alone. Each pass sees
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

        capture.run_shared(self.model, self.tokens, self.passes, batch_size=self.batch_size,
                           progress=self.progress, desc=self.name)
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
            options as ``fn``): lets :func:`tl_geometry.analyze` feed this metric from a forward
            pass shared with the other activation metrics.
    """

    name: str
    fn: Callable
    needs: Needs
    description: str
    builtin: bool
    source: str
    plan: Callable | None = None

    def __call__(self, model, tokens=None, *, hooks=None, **options):
        return self.fn(model, tokens, hooks=hooks, **options)


_REGISTRY: dict[str, MetricSpec] = {}
_PLUGINS_LOADED = False
_LOADING_PLUGIN: str | None = None  # name of the entry point being loaded, if any
# True while `import tl_geometry` registers the built-ins; the package __init__ ends it. Anything
# registered afterwards (a notebook, a plugin) is not a built-in, whatever its module.
_BUILTIN_PHASE = True


def _end_builtin_phase() -> None:
    global _BUILTIN_PHASE
    _BUILTIN_PHASE = False


def register_metric(
    name: str,
    *,
    needs: Needs = "activations",
    description: str = "",
    overwrite: bool = False,
    plan: Callable | None = None,
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
            single forward pass instead of running its own (see :class:`MetricPlan`).

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
        raise ValueError(f"metric name must be a non-empty string, got {name!r}")
    if needs not in _NEEDS:
        raise ValueError(f"needs must be one of {_NEEDS}, got {needs!r}")
    if plan is not None and (not callable(plan) or needs != "activations"):
        raise ValueError("plan= must be a callable, and only metrics with needs='activations' take one")

    def decorator(fn: Callable) -> Callable:
        module = getattr(fn, "__module__", "") or ""
        builtin = _BUILTIN_PHASE and _LOADING_PLUGIN is None and (
            module == "tl_geometry" or module.startswith("tl_geometry.")
        )
        existing = _REGISTRY.get(name)
        if existing is not None:
            if existing.builtin and not builtin:
                raise ValueError(
                    f"metric {name!r} is a tl_geometry built-in; a plugin cannot override it "
                    "(choose another name)"
                )
            if not overwrite:
                raise ValueError(
                    f"metric {name!r} is already registered (by {existing.source}); "
                    "pass overwrite=True to replace it"
                )
        doc = (fn.__doc__ or "").strip().splitlines()
        _REGISTRY[name] = MetricSpec(
            name=name,
            fn=fn,
            needs=needs,
            description=description or (doc[0] if doc else ""),
            builtin=builtin,
            source=_LOADING_PLUGIN or getattr(fn, "__module__", "?"),
            plan=plan,
        )
        return fn

    return decorator


def unregister_metric(name: str) -> None:
    """Remove a non-built-in metric (for tests and notebooks). Built-ins cannot be removed."""
    spec = _REGISTRY.get(name)
    if spec is None:
        raise KeyError(_unknown_message(name))
    if spec.builtin:
        raise ValueError(f"metric {name!r} is a built-in and cannot be unregistered")
    del _REGISTRY[name]


def load_plugins(*, force: bool = False) -> list[str]:
    """Discover entry points in group ``tl_geometry.metrics`` (once unless ``force``).

    Returns the names of the entry points that loaded. Failures are warned about and skipped.
    """
    global _PLUGINS_LOADED, _LOADING_PLUGIN
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
                f"tl_geometry: skipping metric plugin {ep.name!r} ({ep.value}): "
                f"{type(exc).__name__}: {exc}",
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
    """Return the :class:`MetricSpec` registered as ``name``.

    Raises:
        KeyError: unknown name; the message lists close matches and every available metric.
    """
    load_plugins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(_unknown_message(name)) from None


def list_metrics(*, needs: Needs | None = None) -> list[str]:
    """Sorted names of the registered metrics (built-ins and plugins), optionally by ``needs``."""
    load_plugins()
    return sorted(n for n, s in _REGISTRY.items() if needs is None or s.needs == needs)


def metric_specs() -> list[MetricSpec]:
    """All registered :class:`MetricSpec` objects, sorted by name."""
    load_plugins()
    return [_REGISTRY[n] for n in sorted(_REGISTRY)]
