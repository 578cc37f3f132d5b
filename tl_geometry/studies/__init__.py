"""A study across models: the report's metrics on every model, the same texts, side by side.

``tg.study(["smollm2-135m", "gemma-3-270m"], out="studies/two", controls=["random"])`` runs
[`tl_geometry.runs.pipeline.run_report`][tl_geometry.runs.pipeline.run_report] (no files) on each model —
the same rows a ``tl-geometry report`` of that model gives for the same settings — through the
package's resumable job runner ([`tl_geometry.runtime.jobs.run_jobs`][tl_geometry.runtime.jobs.run_jobs]: one JSON
line per finished model in ``out/study.jsonl``, one model in memory at a time, local or on Ray), then
writes

* ``study.json`` — one long table (a ``model`` column, every row's ``stderr``, its relative
  depth), the claims table, the convergence matrix, the settings and the models;
* ``study.md`` and a self-contained ``index.html`` (figures inlined);
* figures: ``profiles.png`` (per-layer profiles on relative depth, ± stderr bands),
  ``capacity_table1.png`` (each model's embedding ε among the capacity paper's Table 1),
  ``convergence.png`` (the cross-model convergence matrix).

What a model can be (``models``): a zoo name, a local file or model directory, any TransformerLens
name (hub), ``random:<model>`` (its random-init twin: same config, seeded weights), or a
**directory of checkpoints** — a directory whose entries are each a model directory or weights
file, ordered by the last integer in their names (the training step); each becomes one model,
labelled ``<dir>@<step>``. ``controls=["random"]`` adds every named model's random-init twin.

Rerunning with the same ``out`` reuses every finished model and runs the missing ones (a model
that failed is retried); a directory made with other settings is refused, nothing overwritten.
A model that fails to load or run is recorded with its error; the study goes on and says which.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tl_geometry.errors import InputError, InputTypeError
from tl_geometry.studies.job import _pooled_reps, _text_tokens, run_study_job, study_texts  # noqa: F401
from tl_geometry.studies.models import (  # noqa: F401
    CONTROLS,
    RANDOM_PREFIX,
    expand_models,
    load_study_model,
)
from tl_geometry.studies.result import (  # noqa: F401
    OUTPUT_FILES,
    RESULTS_FILE,
    SCHEMA_VERSION,
    SETTINGS_FILE,
    StudyModel,
    StudyResult,
    StudySettingsError,
)

logger = logging.getLogger(__name__)

__all__ = [
    "StudyModel",
    "StudyResult",
    "StudySettingsError",
    "expand_models",
    "load_study_model",
    "run_study_job",
    "study",
    "study_texts",
    "CONTROLS",
    "SETTINGS_FILE",
    "RESULTS_FILE",
    "OUTPUT_FILES",
]


def _settings(**kw: Any) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, **kw}


def _check_dir(out: Path, settings: Mapping[str, Any], force: bool) -> None:
    """Refuse a directory of another study or of other files (nothing written); ``force`` starts over."""
    path = out / SETTINGS_FILE
    from tl_geometry.io.outdir import LOCK_FILE
    from tl_geometry.runtime.results_file import lock_path

    ours = {SETTINGS_FILE, RESULTS_FILE, *OUTPUT_FILES, LOCK_FILE, lock_path(out / RESULTS_FILE).name}
    if path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StudySettingsError(f"{path} is not a study settings file ({exc}); use another --out") from None
        if old == settings:
            return
        diff = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
        if not force:
            raise StudySettingsError(
                f"study directory {out} was made with other settings (they differ in {diff}: "
                + "; ".join(f"{k}: was {old.get(k)!r}, now {settings.get(k)!r}" for k in diff[:4])
                + "); nothing was overwritten. Use another --out, or --force / force=True to start it over "
                "(removes only the study's own files)"
            )
        for name in (SETTINGS_FILE, RESULTS_FILE, *OUTPUT_FILES):
            (out / name).unlink(missing_ok=True)
        return
    others = sorted(p.name for p in out.iterdir() if p.name not in ours)
    if others:
        raise StudySettingsError(
            f"{out} is not empty and holds no study ({SETTINGS_FILE} is missing; found {others[:5]}); "
            "use a new or empty directory"
        )
    leftovers = [n for n in (RESULTS_FILE,) if (out / n).exists()]
    if leftovers and not force:
        raise StudySettingsError(
            f"{out} holds {leftovers} without {SETTINGS_FILE}: the settings of those results are unknown; "
            "use another --out, or --force to start over"
        )
    for n in leftovers:
        (out / n).unlink()


def _records(path: Path) -> dict[str, dict]:
    from tl_geometry.runtime.jobs import read_records

    last: dict[str, dict] = {}
    for rec in read_records(path):
        if rec.get("status") == "ok" or rec["key"] not in last or last[rec["key"]].get("status") != "ok":
            last[rec["key"]] = rec
    return last


def study(
    models: Sequence[str | os.PathLike],
    *,
    out: str | os.PathLike,
    controls: Sequence[str] = (),
    corpus: str | os.PathLike = "pydoc",
    corpus_encoding: str = "utf-8",
    n_seqs: int = 8,
    seq_len: int = 128,
    seed: int = 0,
    fast: bool = False,
    metrics: Sequence[str] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    n_texts: int = 64,
    convergence_k: int = 100,
    convergence_null: int = 50,
    loader: str | None = None,
    device: str = "cpu",
    processing: str = "tl",
    executor: str = "local",
    num_cpus: float = 1,
    force: bool = False,
    figures: bool = True,
    progress: bool = True,
) -> StudyResult:
    """Run the report's metrics on several models over the same texts and compare them.

    Args:
        models: zoo names, paths, hub names, ``random:<model>``, or directories of checkpoints
            (see the module docstring).
        out: the study directory (created; resumed when it holds a study of the same settings).
        controls: ``["random"]`` adds each model's random-init twin.
        corpus, corpus_encoding, n_seqs, seq_len, seed: the report's text batch, the same for every
            model (each with its own tokenizer).
        fast, metrics, options: as ``tl-geometry report`` (``fast``: its cheaper settings).
        n_texts: texts of the convergence matrix (passages of the corpus, drawn with ``seed``).
        convergence_k, convergence_null: readout dimension and random-subspace pairs of the matrix.
        loader: ``"package.module:function"`` called as ``function({"model": spec, "checkpoint",
            "device", "seed"})`` to load a model (default [`tl_geometry.models.load`][tl_geometry.models.load]).
        device: where models are loaded.
        processing: the weight processing every model is loaded with (``tl_geometry.models.load``):
            ``"tl"`` (default, as ``tl-geometry report``) or ``"none"`` (the unprocessed model: with
            ``options={"pga": {"preset": "paper"}}`` the PGA paper's protocol). Recorded in the settings.
        executor, num_cpus: ``"local"`` or ``"ray"`` (one Ray task per model, ``num_cpus`` each).
        force: start over in a directory of a study with other settings (only its own files are removed).
        figures: draw the PNG figures (needs matplotlib; the tables are written either way).
        progress: a progress bar over the models.

    Returns:
        A [`StudyResult`][tl_geometry.studies.StudyResult].

    Raises:
        InputError: bad models, controls, settings or corpus (before any model is loaded);
        StudySettingsError: ``out`` holds another study or other files.
    """
    from tl_geometry.base import _checks
    from tl_geometry.io.outdir import OutputLock, check_writable
    from tl_geometry.runs.pipeline import check_inputs, default_metrics, report_options
    from tl_geometry.runs.sweeps import _error_result
    from tl_geometry.runtime.jobs import EXECUTORS, ResultsFile, job_key, run_jobs

    entries = expand_models(models, controls)
    if executor not in EXECUTORS:
        raise InputError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    if str(corpus) == "random":
        raise InputError("a study compares models on text: corpus must be pydoc, shakespeare or a text file")
    _checks.integer(n_texts, "n_texts", lo=8)
    _checks.integer(convergence_k, "convergence_k", lo=1)
    _checks.integer(convergence_null, "convergence_null", lo=2)
    from tl_geometry.models import PROCESSING

    if processing not in PROCESSING:
        raise InputError(f"processing must be one of {sorted(PROCESSING)}, got {processing!r}")
    if loader is not None and not isinstance(loader, str):
        raise InputTypeError("loader must be a 'package.module:function' string (it is imported by name)")
    names = list(metrics) if metrics is not None else default_metrics()
    merged = report_options(fast=fast)
    run_opts = {n: {**merged.get(n, {}), **dict((options or {}).get(n, {}))} for n in names}
    check_inputs(
        corpus=corpus,
        n_seqs=n_seqs,
        seq_len=seq_len,
        seed=seed,
        names=names,
        options={k: v for k, v in run_opts.items() if v},
        device=device,
        max_memory_gb=None,
        corpus_encoding=corpus_encoding,
    )
    study_texts(corpus, n_texts=n_texts, seed=seed, encoding=corpus_encoding)  # enough passages, before any load
    corpus_s = os.fspath(corpus)
    settings = _settings(
        corpus=corpus_s,
        corpus_sha256=_file_digest(corpus_s),
        corpus_encoding=corpus_encoding,
        n_seqs=n_seqs,
        seq_len=seq_len,
        seed=seed,
        fast=bool(fast),
        metrics=list(metrics) if metrics is not None else None,
        options={k: dict(v) for k, v in (options or {}).items()},
        n_texts=n_texts,
        convergence_k=convergence_k,
        convergence_null=convergence_null,
        loader=loader,
        device=device,
        processing=processing,
    )
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise NotADirectoryError(f"study path {out_dir} exists and is not a directory")
    check_writable(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with OutputLock(out_dir):
        _check_dir(out_dir, settings, force)
        from tl_geometry.io.outfile import atomic_write_text

        atomic_write_text(out_dir / SETTINGS_FILE, json.dumps(settings, indent=1, sort_keys=True) + "\n")
        job_settings = {k: v for k, v in settings.items() if k not in ("schema_version", "corpus_sha256")}
        params = [
            {
                "label": e.label,
                "spec": e.spec,
                "control": e.control,
                "checkpoint": e.checkpoint,
                **job_settings,
                "metrics": names,
                "options": settings["options"],
            }
            for e in entries
        ]
        keys = [job_key(p) for p in params]
        rf = ResultsFile(out_dir / RESULTS_FILE)
        before = {k for k, r in _records(rf.path).items() if r.get("status") == "ok"}
        seconds: dict[str, Any] = {}
        for rec in run_jobs(
            params,
            run_study_job,
            rf,
            retry_errors=True,
            catch=True,
            on_error=_error_result,
            executor=executor,
            num_cpus=num_cpus,
            progress=progress,
            desc="study",
        ):
            if rec.get("status") == "ok":
                seconds[rec["params"]["label"]] = rec.get("seconds")
        records = _records(rf.path)
        from tl_geometry.studies.page import assemble, write_outputs

        result = assemble(entries, [records.get(k) for k in keys], settings, out=str(out_dir))
        ran = tuple(e.label for e, k in zip(entries, keys) if k not in before and e.label not in result.failed)
        reused = tuple(e.label for e, k in zip(entries, keys) if k in before)
        result = replace(result, ran=ran, reused=reused, seconds=seconds)
        write_outputs(result, settings, out_dir, figures=figures)
    return result


def _file_digest(corpus: str) -> str | None:
    """sha256 of a corpus file (a changed file is another study), None for a named source."""
    from tl_geometry.io.corpus import SOURCES

    if corpus in SOURCES:
        return None
    h = hashlib.sha256()
    with open(corpus, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
