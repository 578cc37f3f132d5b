"""The models of a sweep: how a job's model is loaded and kept for the next job of the same model.

A sweep job names its model ([`tl_geometry.runs.sweeps.SweepJob`][tl_geometry.runs.sweeps.SweepJob]): a name for
[`tl_geometry.models.load`][tl_geometry.models.load], or a ``"package.module:function"`` loader imported by name
(never evaluated). [`ModelSlot`][tl_geometry.runs.model_slot.ModelSlot] keeps the last job's model for the next job of
the same model ([`load_key`][tl_geometry.runs.model_slot.load_key]) and returns its memory when it is dropped.
[`tl_geometry.runs.sweeps`][tl_geometry.runs.sweeps] re-exports every name here.
"""

from __future__ import annotations

import gc
import importlib
import os
import re
import sys
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from tl_geometry.errors import InputError
from tl_geometry.runtime.jobs import job_key

__all__ = ["ModelSlot", "load_key", "model_key"]

_LOADER_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
"""What a loader string looks like: ``"package.module:function"``."""


def _resolve_loader(spec: str) -> Callable[[dict], Any]:
    """Import ``"package.module:function"`` (by name, never evaluated).

    The module is looked up on ``sys.path`` and then in the current directory, whatever started
    the process (``python -m`` puts the current directory on ``sys.path``, the ``tl-geometry``
    script does not; a Ray worker has its own). A Ray cluster started by [`sweep`][tl_geometry.runs.sweeps.sweep] gives its
    workers the driver's current directory on ``PYTHONPATH``
    ([`tl_geometry.runtime.ray_executor.local_runtime_env`][tl_geometry.runtime.ray_executor.local_runtime_env]); on a remote cluster, ship it with
    ``runtime_env={"working_dir": ...}`` (``--working-dir``), the workers' current directory.
    """
    if not _LOADER_RE.match(spec):
        raise InputError(f"loader must look like 'package.module:function', got {spec!r}")
    mod_name, fn_name = spec.split(":")
    cwd = os.getcwd()
    added = cwd not in {os.path.abspath(p or os.curdir) for p in sys.path}
    if added:
        sys.path.append(cwd)  # last: installed modules win, as with python -m
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise InputError(
            f"cannot import loader module {mod_name!r}: {exc} (looked on sys.path and in {cwd}; on a Ray cluster "
            "pass runtime_env={'working_dir': ...} / --working-dir with the module in it)"
        ) from exc
    finally:
        if added:
            sys.path.remove(cwd)
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise InputError(f"loader {spec!r}: {mod_name} has no callable {fn_name!r}")
    return fn


def _load_model(job: dict, loader: Callable[[dict], Any] | None):
    if loader is not None:
        return loader(job)
    if job.get("loader"):
        return _resolve_loader(job["loader"])(job)
    from tl_geometry import models

    kwargs: dict[str, Any] = {"device": job.get("device", "cpu")}
    ckpt = job.get("checkpoint")
    if ckpt is not None:
        if models.canonical_name(job["model"]) in models.ZOO:
            raise InputError(
                f"{job['model']!r} is an offline zoo model without training checkpoints; drop checkpoint={ckpt!r}"
            )
        # TransformerLens names checkpoints by training step (Pythia, Stanford CRFM): checkpoint_value.
        try:
            kwargs["checkpoint_value"] = int(ckpt)
        except (TypeError, ValueError):
            raise InputError(
                f"checkpoint must be a training step (int) for hub models, got {ckpt!r}; "
                "use a loader for other checkpoint schemes"
            ) from None
    return models.load(job["model"], **kwargs)


def _weak(model: Any) -> Callable[[], Any] | None:
    """A weak reference to ``model`` (None when the object takes none)."""
    try:
        return weakref.ref(model)
    except TypeError:
        return None


def _free_memory(ref: Callable[[], Any] | None = None) -> None:
    """Return a dropped model's memory. ``ref``: a weak reference taken before the last strong one was
    dropped; when it is already dead, reference counting has freed the model and the full garbage
    collection is skipped. Our choice: ``gc.collect()`` walks every object of the process (torch,
    TransformerLens, transformers), 0.3 s per job here, 89 % of a tiny job's time in a sweep; it runs
    only when the model is still alive, i.e. held by reference cycles."""
    if ref is None or ref() is not None:
        gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # pragma: no cover - freeing memory must never fail a job
        pass


_LOAD_FIELDS = ("model", "checkpoint", "loader", "device")
"""The job fields that decide which model is loaded: jobs equal in these share one load."""


def load_key(params: Mapping[str, Any]) -> str:
    """The part of a job's key that names its model (model, checkpoint, loader, device)."""
    return job_key({k: params.get(k) for k in _LOAD_FIELDS})


def model_key(params: Mapping[str, Any]) -> str:
    """The model of a job without its checkpoint: a Ray sweep runs one actor per model key."""
    return job_key({k: params.get(k) for k in _LOAD_FIELDS if k != "checkpoint"})


def _named(model: Any, job: Mapping[str, Any]) -> Any:
    if not getattr(model, "_tl_geometry_name", None):
        try:  # rows carry the job's model name, not the config's ("custom" for a built model)
            model._tl_geometry_name = job["model"]
        except AttributeError:  # pragma: no cover - a model refusing attributes keeps its own name
            pass
    return model


class ModelSlot:
    """The model of the last job, kept for the next job of the same model ([`load_key`][tl_geometry.runs.model_slot.load_key]).

    A sweep orders its jobs by model, so each (model, checkpoint) is loaded once however many
    seeds or corpora it runs; the previous model is dropped (and memory returned) before the next
    one loads. ``loads`` counts the loads.
    """

    def __init__(self, loader: Callable[[dict], Any] | None = None):
        self.loader = loader
        self.key: str | None = None
        self.model: Any = None
        self.loads = 0

    def get(self, job: Mapping[str, Any]) -> Any:
        key = load_key(job)
        if self.model is None or key != self.key:
            self.clear()
            self.model = _named(_load_model(dict(job), self.loader), job)
            self.key = key
            self.loads += 1
        return self.model

    def clear(self) -> None:
        if self.model is not None:
            ref = _weak(self.model)
            self.model, self.key = None, None
            _free_memory(ref)
