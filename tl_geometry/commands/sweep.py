"""``tl-geometry sweep``: long, resumable experiments.

    tl-geometry sweep models ...   the metrics over many models / checkpoints / seeds (``_sweep_models``)
    tl-geometry sweep shape ...    declared by the interaction family (its ``sweeps.py``)
    tl-geometry sweep toy ...      declared by the interaction family

``models`` is shared (``tl_geometry.commands._sweep_models``); every other
experiment belongs to a family and lives in its folder: the family's command module (its
``FamilySpec.command``) names them in ``SWEEPS``, a mapping ``{name: builder(subparsers)}``
(the interaction family: [`tl_geometry.families.interaction.sweeps.SWEEPS`][tl_geometry.families.interaction.sweeps.SWEEPS]).
[`experiments`][tl_geometry.commands.sweep.experiments] collects them, so a family (a plugin too) adds an
experiment without touching this file. Every sweep checks its outputs before any work with
[`tl_geometry.runs.sweeps.check_outputs`][tl_geometry.runs.sweeps.check_outputs].
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping

from tl_geometry.commands import _sweep_models
from tl_geometry.errors import InputError

SHARED: dict[str, Callable] = {"models": _sweep_models.build}
"""The experiments of no family: name → ``builder(subparsers)``."""


def experiments() -> dict[str, Callable]:
    """Every experiment of ``tl-geometry sweep``: name → ``builder(subparsers)``.

    The shared ones ([`SHARED`][tl_geometry.commands.sweep.SHARED]), then those of every registered
    family whose command module (``FamilySpec.command``) has ``SWEEPS``, the built-ins first. A
    plugin's experiment whose name is taken is skipped with a warning (a plugin never replaces
    a built-in's command).

    Raises:
        InputError: a family's ``SWEEPS`` is not a mapping of non-empty names to callables, or two
            built-ins name the same experiment.
    """
    from tl_geometry import registry

    found: dict[str, Callable] = dict(SHARED)
    owner = dict.fromkeys(SHARED, "tl-geometry")
    fams = sorted((f for f in registry.families() if f.command), key=lambda f: not f.builtin)
    for fam in fams:
        sweeps = getattr(importlib.import_module(str(fam.command)), "SWEEPS", None)
        if sweeps is None:
            continue
        if not isinstance(sweeps, Mapping) or not all(
            isinstance(k, str) and k.strip() and callable(v) for k, v in sweeps.items()
        ):
            raise InputError(
                f"family {fam.name!r}: {fam.command}.SWEEPS must map experiment names to "
                f"builder(subparsers) functions, got {sweeps!r}"
            )
        for name, build in sweeps.items():
            if name in found:
                msg = f"family {fam.name!r}: sweep experiment {name!r} is already {owner[name]}'s"
                if fam.builtin:
                    raise InputError(msg)
                warnings.warn(f"tl_geometry: {msg}; skipped", RuntimeWarning, stacklevel=2)
                continue
            found[name], owner[name] = build, f"family {fam.name!r}"
    return found


def add_parser(subparsers) -> None:
    builders = experiments()
    p = subparsers.add_parser("sweep", help="long resumable experiments: " + ", ".join(builders))
    sub = p.add_subparsers(dest="sweep_command", required=True, metavar="EXPERIMENT")
    for build in builders.values():
        build(sub)
