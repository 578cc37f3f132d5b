"""The main job: ``tl-geometry report`` as a Python function.

One request, four jobs: **check** ([`tl_geometry.runs.request.build_report`][tl_geometry.runs.request.build_report]: every option
once, into a frozen [`ReportRequest`][tl_geometry.runs.request.ReportRequest]; then the model's estimated memory and the output
directory, before any load) → **load** (the model and the corpus tokens) → **measure** (every metric,
one at a time, the report saved after each so an interrupted run keeps its partial results,
marked) → **write** (``report.json`` + ``report.md`` + figures + ``index.html`` in ``out``,
through the one output-directory protocol, [`tl_geometry.io.outdir.Staging`][tl_geometry.io.outdir.Staging]).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tl_geometry.errors import InputError
from tl_geometry.report import GeometryReport
from tl_geometry.runs.request import (  # noqa: F401 - public here since 0.1 (they live in runs.request)
    ReportRequest,
    build_report,
    default_metrics,
    not_in_default_report,
    report_options,
)

logger = logging.getLogger(__name__)


def __getattr__(name: str) -> Any:
    # Views of the families' declarations (read-only; edit the declaration, not these).
    if name == "REPORT_OPTIONS":
        return report_options()
    if name == "FAST_OPTIONS":
        return report_options(fast=True)
    if name == "NOT_IN_DEFAULT_REPORT":
        return not_in_default_report()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def available_memory_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:  # pragma: no cover
        return None


def check_memory(cfg: Any, *, limit_bytes: int | None = None) -> int:
    """Refuse a model whose estimated peak memory exceeds ``limit_bytes`` (default: available RAM)."""
    from tl_geometry.models import estimate_memory_bytes

    need = estimate_memory_bytes(cfg)
    limit = limit_bytes if limit_bytes is not None else available_memory_bytes()
    if limit is not None and need > limit:
        raise InputError(
            f"model {getattr(cfg, 'model_name', '?')} needs about {need / 2**30:.1f} GiB "
            f"(estimated from its config) but only {limit / 2**30:.1f} GiB is available; "
            "use a smaller model or a machine with more memory"
        )
    return need


def model_memory(
    model: Any,
    *,
    n_seqs: int = 8,
    seq_len: int = 128,
    metrics: Any = None,
    options: Any = None,
    agop_batch: int | None = None,
) -> Any:
    """The [`tl_geometry.runs.memory.MemoryEstimate`][tl_geometry.runs.memory.MemoryEstimate] of a report on ``model`` (a zoo
    name or local path: from its files, [`tl_geometry.models.peek`][tl_geometry.models.peek]; a model: from its
    parameters); None when its shape cannot be read cheaply (a hub name)."""
    from tl_geometry.models import is_model, peek
    from tl_geometry.runs import memory

    shape = memory.shape_of_model(model) if is_model(model) else peek(model)
    if shape is None:
        return None
    return memory.estimate(
        shape, n_seqs=n_seqs, seq_len=seq_len, metrics=metrics, options=options, agop_batch=agop_batch
    )


def check_model_memory(
    model: Any,
    max_memory_gb: float | None,
    *,
    n_seqs: int = 8,
    seq_len: int = 128,
    metrics: Any = None,
    options: Any = None,
    agop_batch: int | None = None,
    ignore: bool = False,
) -> int | None:
    """Refuse a model named by ``model`` whose estimated peak memory for a report of ``n_seqs`` ×
    ``seq_len`` tokens exceeds ``max_memory_gb`` GiB (default: the available RAM), before loading
    it; ``ignore`` only estimates. Every source is estimated: a zoo model or local path from its
    files' tensor sizes ([`model_memory`][tl_geometry.runs.pipeline.model_memory]), a hub name from its TransformerLens
    config. Returns the estimate in bytes (None: nothing could be read, e.g. a hub name offline;
    the load then says what is wrong)."""
    limit = None if max_memory_gb is None else int(max_memory_gb * 2**30)
    est = model_memory(model, n_seqs=n_seqs, seq_len=seq_len, metrics=metrics, options=options, agop_batch=agop_batch)
    if est is not None:
        avail = limit if limit is not None else available_memory_bytes()
        if avail is not None and est.peak_bytes > avail and not ignore:
            what = "--max-memory-gb / max_memory_gb" if limit is not None else "the available RAM"
            gib = 2**30
            raise InputError(
                f"model {model} needs about {est.peak_gib:.2f} GiB for a report of {n_seqs} x {seq_len} tokens "
                f"(estimated from its files: {est.file_params:,} parameters, {est.n_params:,} in TransformerLens, "
                f"{est.weights_bytes / gib:.2f} GiB of weights; loading {est.load_bytes / gib:.2f} GiB, "
                f"then the model {est.held_bytes / gib:.2f} GiB and the report's working set "
                f"{est.working_bytes / gib:.2f} GiB, beside the process's {est.process_bytes / gib:.2f} GiB) "
                f"but {what} allows {avail / gib:.2f} GiB; use a smaller model or fewer / shorter sequences, "
                "raise the limit, or pass --ignore-memory-check (ignore_memory_check=True) to run it anyway"
            )
        return est.peak_bytes
    cfg = config_for(str(model)) if isinstance(model, str) else None
    if cfg is None:
        return None
    if ignore:
        from tl_geometry.models import estimate_memory_bytes

        return estimate_memory_bytes(cfg)
    return check_memory(cfg, limit_bytes=limit)


def config_for(name: str) -> Any:
    """The TransformerLens config of a hub model name without loading weights (None if unknown
    here, e.g. offline and not cached; the load itself then reports the problem)."""
    from tl_geometry.io import hub
    from tl_geometry.models import ZOO, canonical_name, is_path

    if canonical_name(name) in ZOO or is_path(name):
        return None  # the offline zoo is small by construction; a local file is checked by load()
    if not hub.offline() and not hub.reachable(3.0):
        return None  # the hub client would retry for ~25 s: let load() fail fast and say why
    try:
        from transformer_lens.loading_from_pretrained import get_pretrained_model_config

        with hub.quiet():
            return get_pretrained_model_config(name)
    except Exception:  # noqa: BLE001 - any failure means "cannot estimate": let load() explain
        return None


def check_inputs(
    *,
    corpus: Any,
    n_seqs: int,
    seq_len: int,
    seed: int,
    names: Sequence[str],
    options: Mapping[str, Mapping[str, Any]],
    device: Any,
    max_memory_gb: float | None,
    corpus_encoding: str = "utf-8",
) -> list[str]:
    """Every check of a report's inputs that needs no model (what [`build_report`][tl_geometry.runs.request.build_report] checks);
    returns the corpus texts. For callers that do not keep the request (``tg.study``).

    Raises:
        ValueError / TypeError / KeyError: naming the input and what is accepted.
    """
    req = build_report(
        corpus=corpus,
        corpus_encoding=corpus_encoding,
        n_seqs=n_seqs,
        seq_len=seq_len,
        seed=seed,
        metrics=list(names),
        options=options,
        device=device,
        max_memory_gb=max_memory_gb,
    )
    return list(req.docs)


def run_report(
    model: Any = "smollm2-135m",
    *,
    corpus: Any = "pydoc",
    corpus_encoding: str = "utf-8",
    n_seqs: int = 8,
    seq_len: int = 128,
    seed: int = 0,
    metrics: Sequence[str] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    fast: bool = False,
    out: str | os.PathLike | None = None,
    force: bool = False,
    figures: bool = True,
    device: str = "cpu",
    max_memory_gb: float | None = None,
    ignore_memory_check: bool = False,
    progress: bool = True,
    force_hint: str = "force=True",
    capture: str = "shared",
) -> GeometryReport:
    """Compute every (or the chosen) registered metric on a model and real text.

    Every input is checked once, before the model is loaded, into a
    [`ReportRequest`][tl_geometry.runs.request.ReportRequest] ([`build_report`][tl_geometry.runs.request.build_report]); then the model's estimated
    memory and ``out`` (not a file, writable, not in use by another run, empty unless
    ``force``); [`run`][tl_geometry.runs.pipeline.run] does the rest.

    Args:
        model: a name (``"smollm2-135m"`` offline, or any TL name with the hub) or a model.
        corpus, n_seqs, seq_len, seed: the text batch (see [`tl_geometry.io.corpus.tokens`][tl_geometry.io.corpus.tokens]).
        corpus_encoding: the encoding of a text-file corpus (default UTF-8, decoded strictly).
        metrics: registry names (default: [`default_metrics`][tl_geometry.runs.request.default_metrics], every registered metric but
            those in [`not_in_default_report`][tl_geometry.runs.request.not_in_default_report], recorded in ``provenance["left_out"]``).
        options: per-metric options over the defaults, which are `tg.analyze`'s too (one source:
            the families' ``report_options``, [`report_options`][tl_geometry.runs.request.report_options]).
        fast: cheaper defaults (the families' ``fast_options``: fewer null subspaces / probes / points).
        out: directory for report.json / report.md / figures / index.html (None: don't write).
        force: replace the report files of an existing ``out`` (only once the new report is
            whole; other files are kept).
        figures: draw the PNG figures (index.html and report.md are written either way).
        max_memory_gb: refuse a named model whose estimated peak memory (from its files, before
            loading: [`tl_geometry.runs.memory.estimate`][tl_geometry.runs.memory.estimate]) exceeds this (default: the available RAM).
        ignore_memory_check: run even when the estimate exceeds it (the estimate is still recorded in
            ``provenance["memory"]``, with the measured peak).
        progress: progress bars (False: none, the metrics' own included).
        force_hint: how a refusal spells ``force`` (the CLI passes ``"--force"``).
        capture: ``"shared"`` (default: one forward pass over the corpus feeds pga, spectral and
            epsilon_activations) or ``"separate"`` (one pass per metric; same numbers), recorded
            in ``provenance["capture"]``.

    Returns:
        The merged report. ``provenance["status"]`` is "complete", or "partial" when a metric
        failed (its error is in ``provenance["errors"]``).

    Writing: the run writes into ``out/partial-run/`` after every metric (every file marked
    "running"), and moves the finished files into ``out`` at the end. An interrupted run marks
    them "interrupted" and re-raises ``KeyboardInterrupt``: into ``out`` when ``out`` held no
    report, else they stay in ``out/partial-run/`` and the previous report is kept as it was.
    A killed run leaves the previous report as it was and its own in ``out/partial-run/``.
    """
    req = build_report(
        model,
        corpus=corpus,
        corpus_encoding=corpus_encoding,
        n_seqs=n_seqs,
        seq_len=seq_len,
        seed=seed,
        metrics=metrics,
        options=options,
        fast=fast,
        progress=progress,
        capture=capture,
        device=device,
        max_memory_gb=max_memory_gb,
        ignore_memory_check=ignore_memory_check,
        out=out,
        force=force,
        force_hint=force_hint,
        figures=figures,
    )
    return run(req)


def run(req: ReportRequest) -> GeometryReport:
    """Run a checked report request: the checks that need the file system or the model's files
    (its memory estimate, the output directory and its lock) → load → measure → write."""
    if isinstance(req.model, (str, os.PathLike)):
        check_model_memory(req.model, req.max_memory_gb, ignore=req.ignore_memory_check, **_memory_args(req))
    if req.out is None:
        return _load_measure_write(req, None)
    from tl_geometry.io import outdir
    from tl_geometry.render.html import figure_files

    staging = outdir.Staging(
        req.out, force=req.force, force_hint=req.force_hint, owned_figures=figure_files(), keep_unfinished=True
    )
    with staging:
        return _load_measure_write(req, staging)


def _memory_args(req: ReportRequest) -> dict[str, Any]:
    """What the memory estimate reads of a request: the text batch, the metrics and their options."""
    return {
        "n_seqs": req.n_seqs,
        "seq_len": req.seq_len,
        "metrics": req.metrics,
        "options": {m: dict(o) for m, o in req.request.options.items()},
    }


def _load(req: ReportRequest) -> tuple[Any, Any, float]:
    """The model (on the request's device), the corpus tokens, and the seconds the model took to load."""
    from tl_geometry.io import corpus as corpus_mod
    from tl_geometry.models import load

    t0 = time.perf_counter()
    model = load(req.model, device=req.device)
    load_s = time.perf_counter() - t0
    tokens = corpus_mod.tokens(model, list(req.docs), n_seqs=req.n_seqs, seq_len=req.seq_len, seed=req.seed)
    return model, tokens, load_s


class _Results:
    """What the run has measured so far, and the report it makes at any moment (``current``)."""

    def __init__(self, req: ReportRequest, model: Any, tokens: Any, load_s: float):
        self.names = req.metrics
        self.model, self.tokens = model, tokens
        self.parts: list[GeometryReport] = []
        self.errors: dict[str, str] = {}
        self.capture: dict[str, Any] = {}
        self.prov: dict[str, Any] = {
            "corpus": req.corpus_label,
            "corpus_encoding": req.corpus_encoding,
            "n_seqs": req.n_seqs,
            "seq_len": req.seq_len,
            "seed": req.seed,
            "fast": req.request.fast,
            "load_s": round(load_s, 2),
            "left_out": req.left_out(),
        }

    def add(self, name: str, result: GeometryReport | BaseException, seconds: float) -> None:
        from tl_geometry.runs.analysis import merged

        if self.capture:
            self.prov["capture"] = {k: v for k, v in self.capture.items() if k != "_seconds"}
        if isinstance(result, BaseException):  # keep going: one failing metric must not lose the others
            logger.error("metric %s failed", name, exc_info=result)
            self.errors[name] = f"{type(result).__name__}: {result}"
        else:
            self.parts.append(merged(self.model, self.tokens, [result], [name], {name: seconds}))

    def current(self, status: str) -> GeometryReport:
        done = {n for p in self.parts for n in p.provenance.get("metrics", [])} | set(self.errors)
        extra = {"missing_metrics": [n for n in self.names if n not in done]} if status != "complete" else {}
        return GeometryReport.merge(
            *self.parts, **self.prov, status=status, errors=self.errors, metrics=self.names, **extra
        )

    def final(self, t0: float) -> GeometryReport:
        timings = {}
        for p in self.parts:
            timings.update(p.provenance.get("timings_s", {}))
        if "_seconds" in self.capture:
            timings["capture"] = self.capture["_seconds"]
        self.prov["timings_s"] = timings
        self.prov["total_s"] = round(time.perf_counter() - t0, 2)
        from tl_geometry.runs.memory import peak_rss_bytes

        peak = peak_rss_bytes()
        if peak is not None and isinstance(self.prov.get("memory"), dict):
            self.prov["memory"]["measured_peak_gib"] = round(peak / 2**30, 3)  # this process's, loading included
        return self.current("partial" if self.errors else "complete")


def _write_progress(report: GeometryReport, folder: Path | None) -> None:
    """report.json, report.md and index.html (no figures), all marked with the run's status."""
    if folder is None:
        return
    from tl_geometry.render.html import render_into

    render_into(report, folder, figures=False)


def _measure(req: ReportRequest, results: _Results, work: Path | None) -> None:
    """Every metric of the request (one shared forward pass feeds the planned activation metrics,
    then they finish one by one), the report saved into ``work`` after each."""
    from tqdm.auto import tqdm

    from tl_geometry.runs.analysis import iter_metrics

    _write_progress(results.current("running"), work)
    bar = tqdm(total=len(req.metrics), desc="report", disable=not req.request.progress)
    for name, result, seconds in iter_metrics(
        results.model, results.tokens, req.request, progress=False, capture_info=results.capture
    ):
        bar.set_description(f"report: {name}")
        results.add(name, result, seconds)
        bar.update(1)
        _write_progress(results.current("running"), work)
    bar.close()


def _interrupted(results: _Results, staging: Any) -> None:
    """Mark the partial results "interrupted"; into ``out`` when it held no report, else beside it."""
    if staging is None or staging.work is None:
        return
    _write_progress(results.current("interrupted"), staging.work)
    if staging.interrupted():
        logger.warning("interrupted: the partial results are in %s (marked 'interrupted')", staging.out)
    else:
        logger.warning(
            "interrupted: the previous report in %s is kept unchanged; this run's partial "
            "results are in %s (marked 'interrupted')",
            staging.out,
            staging.work,
        )


def _load_measure_write(req: ReportRequest, staging: Any) -> GeometryReport:
    work = staging.start() if staging is not None else None
    t0 = time.perf_counter()
    try:
        estimate = model_memory(req.model, **_memory_args(req))
    except Exception:  # noqa: BLE001 - the estimate is a record, never a reason to fail
        estimate = None
    model, tokens, load_s = _load(req)
    if estimate is None:  # a hub name: estimated from the model now built
        estimate = model_memory(model, **_memory_args(req))
    results = _Results(req, model, tokens, load_s)
    results.prov["memory"] = {
        **(estimate.provenance() if estimate is not None else {}),
        "checked": not req.ignore_memory_check,
        "max_memory_gb": req.max_memory_gb,
    }
    try:
        _measure(req, results, work)
    except KeyboardInterrupt:
        _interrupted(results, staging)
        raise
    report = results.final(t0)
    if staging is not None:
        from tl_geometry.render.html import render_into

        render_into(report, staging.work, figures=req.figures)
        staging.finish()
    return report
