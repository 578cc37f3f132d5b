"""The models of a study: names, files, random-init twins and directories of checkpoints, expanded and loaded."""

from __future__ import annotations

import gc
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tl_geometry.errors import InputError, InputTypeError
from tl_geometry.studies.result import StudyModel

logger = logging.getLogger(__name__)


CONTROLS = ("random",)
RANDOM_PREFIX = "random:"
_STEP = re.compile(r"(\d+)(?!.*\d)")


def _label(spec: str) -> str:
    from tl_geometry.models import display_name

    return display_name(spec)


def _checkpoints(path: Path) -> list[tuple[int, Path]] | None:
    """``[(step, entry)]`` when ``path`` is a directory of checkpoints (not itself a model), else None."""
    if not path.is_dir() or (path / "config.json").is_file():
        return None
    found = []
    for p in sorted(path.iterdir()):
        if p.name.startswith("."):
            continue
        is_model = (p.is_dir() and (p / "config.json").is_file()) or (
            p.is_file() and p.suffix.lower() in (".gguf", ".safetensors")
        )
        m = _STEP.search(p.name)
        if is_model and m:
            found.append((int(m.group(1)), p))
    if not found:
        return None
    steps = [s for s, _ in found]
    if len(set(steps)) != len(steps):
        dup = sorted({s for s in steps if steps.count(s) > 1})
        raise InputError(f"checkpoint directory {path}: several entries have the step number(s) {dup}")
    return sorted(found)


def expand_models(models: Sequence[str | os.PathLike], controls: Sequence[str] = ()) -> list[StudyModel]:
    """The study's models: checkpoint directories expanded, ``controls`` added after each model.

    Raises:
        InputError: no models, a bad entry, an unknown control, two models with one label.
    """
    if isinstance(models, (str, os.PathLike)):
        models = [models]
    if not isinstance(models, Sequence) or not models:
        raise InputError("models must be a non-empty list of model names or paths")
    controls = list(controls or ())
    bad = [c for c in controls if c not in CONTROLS]
    if bad:
        raise InputError(f"unknown controls {bad}; accepted: {list(CONTROLS)}")
    out: list[StudyModel] = []
    for m in models:
        if not isinstance(m, (str, os.PathLike)) or not str(m).strip():
            raise InputTypeError(f"each model must be a non-empty name or path, got {m!r}")
        spec = os.fspath(m).strip()
        if spec.startswith(RANDOM_PREFIX):
            base = spec[len(RANDOM_PREFIX) :].strip()
            if not base:
                raise InputError(f"{spec!r}: name the model after 'random:', e.g. random:smollm2-135m")
            out.append(StudyModel(f"{_label(base)} (random init)", base, control="random"))
            continue
        ckpts = _checkpoints(Path(spec).expanduser()) if os.path.isdir(os.path.expanduser(spec)) else None
        if ckpts is not None:
            group = Path(spec).expanduser().resolve().name
            out.extend(StudyModel(f"{group}@{step}", str(p), checkpoint=step, group=group) for step, p in ckpts)
            continue
        out.append(StudyModel(_label(spec), spec))
        if "random" in controls:
            out.append(StudyModel(f"{_label(spec)} (random init)", spec, control="random"))
    labels = [m.label for m in out]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise InputError(f"models named more than once in the study: {dup}")
    return out


def _resolve(spec: str | None):
    if not spec:
        return None
    from tl_geometry.runs.sweeps import _resolve_loader

    return _resolve_loader(spec)


def load_study_model(params: Mapping[str, Any]):
    """Load one study model (a job's ``spec``, ``control``, ``device``, ``loader``), named by its label.

    A random-init twin loads the model and replaces it by
    [`tl_geometry.models.random_like`][tl_geometry.models.random_like] (seeded by the study's seed);
    the trained weights are freed before the twin is measured.
    """
    import torch

    from tl_geometry import models

    spec, device = params["spec"], params.get("device", "cpu")
    loader = _resolve(params.get("loader"))
    processing = params.get("processing", "tl")
    if loader is not None:
        job = {"model": spec, "checkpoint": params.get("checkpoint"), "device": device, "seed": params["seed"]}
        model = loader({**job, "processing": processing})
    else:
        from tl_geometry.runs.pipeline import check_model_memory

        check_model_memory(spec, None)
        model = models.load(spec, device=device, processing=processing)
    if params.get("control") == "random":
        twin = _random_twin(model, int(params["seed"]))
        del model
        gc.collect()
        model = twin
        # freshly initialised weights: nothing was folded or centred (recorded in the rows' provenance),
        # and the final norm's weight that would scale W_U is all ones (no readout caveat)
        model._tl_geometry_final_norm_w = torch.ones(int(model.cfg.d_model))
        models._record_processing(model, "none", dict(models.PROCESSING["none"]))
    model._tl_geometry_name = params["label"]
    return model


def _random_twin(model: Any, seed: int):
    """[`tl_geometry.models.random_like`][tl_geometry.models.random_like], also for a model whose
    tokenizer TransformerLens would not accept at construction (it is attached afterwards)."""
    from tl_geometry import models

    tok = getattr(model, "tokenizer", None)
    try:
        return models.random_like(model, seed=seed)
    except AssertionError:  # TL asserts on tokenizers that are not transformers' classes
        model.tokenizer = None
        try:
            twin = models.random_like(model, seed=seed)
        finally:
            model.tokenizer = tok
        twin.tokenizer = tok
        return twin
