"""The registry's plugin phase, shared by its two halves (metrics in
``tl_geometry.registry``, families in
[`tl_geometry.registry.family_specs`][tl_geometry.registry.family_specs]): the table of registered
metrics, whether a registration is a built-in, which entry point is loading, and the discovery of
the built-ins (by name) and of the plugins (by entry point). Both halves import this module;
it imports neither, so the registry has no import circle.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Mapping
from typing import Any

from tl_geometry.errors import InputError

ENTRY_POINT_GROUP = "tl_geometry.metrics"

_REGISTRY: dict[str, Any] = {}
"""name -> [`MetricSpec`][tl_geometry.registry.MetricSpec] of every registered metric."""
_PLUGINS_LOADED = False
_LOADING_PLUGIN: str | None = None  # name of the entry point being loaded, if any
# True until tl_geometry.families (the built-ins) finished registering; its __init__ ends it.
# Anything registered afterwards (a notebook, a plugin) is not a built-in, whatever its module.
_BUILTIN_PHASE = True
# entry point being loaded -> [(table, name)] it registered (removed again if the plugin fails)
_REGISTERED_BY: dict[str, list[tuple[Any, str]]] = {}

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


def _admit(kind: str, name: str, module: str, table: Mapping[str, Any], overwrite: bool) -> tuple[bool, str | None]:
    """The plugin phase's verdict on registering the metric or family ``name`` from ``module`` now.

    A registration from outside tl_geometry first loads the built-ins, so that it never takes a
    built-in's name before they exist. Shared by [`register_metric`][tl_geometry.registry.register_metric] and
    [`register_family`][tl_geometry.registry.register_family]: the phase lives here only.

    Args:
        kind: ``"metric"`` or ``"family"`` (for the messages).
        table: the registered ones of that kind, by name.

    Returns:
        ``(builtin, plugin)``: whether the registration is a built-in (tl_geometry's own module,
        while the built-ins load, outside any plugin) and the entry point being loaded, if any.

    Raises:
        ValueError: a plugin replacing a built-in; a duplicate name without ``overwrite``.
    """
    if not _is_ours(module):
        load_builtins()
    builtin = _BUILTIN_PHASE and _LOADING_PLUGIN is None and _is_ours(module)
    existing = table.get(name)
    if existing is not None:
        if existing.builtin and not builtin:
            raise InputError(
                f"{kind} {name!r} is a tl_geometry built-in; a plugin cannot override it (choose another name)"
            )
        if builtin and not existing.builtin:  # a built-in always wins its own name
            warnings.warn(
                f"tl_geometry: {kind} {name!r} registered by {existing.source} is replaced by the built-in",
                RuntimeWarning,
                stacklevel=3,
            )
        elif not overwrite:
            raise InputError(
                f"{kind} {name!r} is already registered (by {existing.source}); pass overwrite=True to replace it"
            )
    if _LOADING_PLUGIN is not None:
        _REGISTERED_BY.setdefault(_LOADING_PLUGIN, []).append((table, name))
    return builtin, _LOADING_PLUGIN


def _forget(plugin: str) -> list[str]:
    """Remove everything the entry point ``plugin`` registered (its metrics and families): a
    plugin that fails is skipped whole, never half-registered. Returns what was removed."""
    removed = []
    for table, name in _REGISTERED_BY.pop(plugin, []):
        entry = table.get(name)
        if entry is not None and not entry.builtin and entry.source == plugin:
            del table[name]
            removed.append(name)
    return removed


def load_plugins(*, force: bool = False) -> list[str]:
    """Discover entry points in group ``tl_geometry.metrics`` (once unless ``force``).

    Returns the names of the entry points that loaded. Failures are warned about and skipped.
    """
    global _PLUGINS_LOADED, _LOADING_PLUGIN
    load_builtins()
    if _BUILTIN_PHASE and BUILTIN_FAMILIES in sys.modules:
        # asked while the built-ins are still registering (a lookup inside their import): the
        # plugins wait until every built-in name is taken, so that none can take one first
        return []
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
            removed = _forget(_LOADING_PLUGIN)
            undone = f"; what it had registered is removed ({', '.join(removed)})" if removed else ""
            warnings.warn(
                f"tl_geometry: skipping metric plugin {ep.name!r} ({ep.value}): {type(exc).__name__}: {exc}{undone}",
                RuntimeWarning,
                stacklevel=2,
            )
        finally:
            _LOADING_PLUGIN = None
    return loaded
