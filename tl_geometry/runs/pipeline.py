"""The main job: ``tl-geometry report`` as a Python function.

model → corpus tokens → every metric (one at a time, the report saved after each so an
interrupted run keeps its partial results, marked) → ``report.json`` + ``report.md`` (+ figures
and ``index.html`` when [`tl_geometry.render.html`][tl_geometry.render.html] is available) in ``out``.
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

logger = logging.getLogger(__name__)


def report_options(*, fast: bool = False) -> dict[str, dict[str, Any]]:
    """Options per metric for the report (``fast``: ``report --fast``), as each family declares them
    (``FamilySpec.report_options`` / ``fast_options``). Our choices, sized so that the SmolLM2-135M report
    stays within minutes on a 2-core CPU (benchmarks/bench_report.py). The functions' own defaults stay
    the papers' (e.g. ``tg.pga``: 2048 points, 100 nulls): PGA cost grows with points² × nulls × CCR
    levels × layers, so the report halves points and nulls."""
    from tl_geometry import registry

    out: dict[str, dict[str, Any]] = {}
    for fam in registry.families():
        for metric, opts in (fam.fast_options if fast else fam.report_options).items():
            out[metric] = dict(opts)
    return out


def not_in_default_report() -> dict[str, str]:
    """``{metric: why}``: registered metrics the report runs only when named in ``metrics=`` /
    ``--metrics``, as each family declares them (``FamilySpec.not_in_default_report``; our choice)."""
    from tl_geometry import registry

    return {m: why for fam in registry.families() for m, why in fam.not_in_default_report.items()}


def __getattr__(name: str) -> Any:
    # Views of the families' declarations (read-only; edit the declaration, not these).
    if name == "REPORT_OPTIONS":
        return report_options()
    if name == "FAST_OPTIONS":
        return report_options(fast=True)
    if name == "NOT_IN_DEFAULT_REPORT":
        return not_in_default_report()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_metrics() -> list[str]:
    """The metrics a report runs by default: every registered one except those of [`not_in_default_report`][tl_geometry.runs.pipeline.not_in_default_report]."""
    from tl_geometry.registry import list_metrics

    left_out = not_in_default_report()
    return [n for n in list_metrics() if n not in left_out]


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


def check_model_memory(model: Any, max_memory_gb: float | None) -> int | None:
    """Refuse a model named by ``model`` whose estimated peak memory exceeds ``max_memory_gb`` GiB
    (default: the available RAM), before loading it. Every source is estimated: a zoo model or
    local path from its files' tensor sizes ([`tl_geometry.models.peek`][tl_geometry.models.peek]), a hub name from its
    TransformerLens config. Returns the estimate in bytes (None: nothing could be read, e.g. a hub
    name offline; the load then says what is wrong)."""
    from tl_geometry.models import peek

    limit = None if max_memory_gb is None else int(max_memory_gb * 2**30)
    shape = peek(model)
    if shape is not None:
        need = shape.memory_bytes()
        avail = limit if limit is not None else available_memory_bytes()
        if avail is not None and need > avail:
            what = "--max-memory-gb / max_memory_gb" if limit is not None else "the available RAM"
            raise InputError(
                f"model {model} needs about {need / 2**30:.2f} GiB (estimated from its files: "
                f"{shape.n_params:,} parameters) but {what} allows {avail / 2**30:.2f} GiB; "
                "use a smaller model, raise the limit or use a machine with more memory"
            )
        return need
    cfg = config_for(str(model)) if isinstance(model, str) else None
    return None if cfg is None else check_memory(cfg, limit_bytes=limit)


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
    """Every check of [`run_report`][tl_geometry.runs.pipeline.run_report]'s inputs that needs no model (cheap; before any load).

    Returns the corpus texts (read once here, so an iterator is not consumed twice).

    Raises:
        ValueError / TypeError / KeyError: naming the input and what is accepted.
    """
    from tl_geometry.base import _checks
    from tl_geometry.io import corpus as corpus_mod
    from tl_geometry.registry import get_metric
    from tl_geometry.runs.analysis import check_options

    _checks.integer(n_seqs, "n_seqs", lo=1)
    _checks.integer(seq_len, "seq_len", lo=2)
    _checks.seed(seed)
    if not names:
        raise InputError("no metrics chosen; pass metrics=None for all, or names from `tl-geometry metrics`")
    for n in names:
        get_metric(n)  # unknown names fail before any work, listing valid ones
    dupes = sorted({n for n in names if list(names).count(n) > 1})
    if dupes:
        raise InputError(f"metrics named more than once: {dupes}")
    check_options(names, options)
    _checks.real(max_memory_gb, "max_memory_gb", lo=0.0, lo_open=True, none_ok=True, why="GiB")
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InputError(f"device {device!r} is not a torch device ('cpu', 'cuda', 'cuda:1', 'mps'): {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {device!r}: CUDA is not available on this machine; use device='cpu'")
    if isinstance(corpus, (str, os.PathLike)) and str(corpus) not in corpus_mod.SOURCES and not Path(corpus).is_file():
        path = Path(corpus)
        what = "is a directory" if path.is_dir() else "does not exist"
        raise InputError(
            f"corpus {str(corpus)!r}: no such source, and as a file path it {what}; accepted: "
            f"{', '.join(corpus_mod.SOURCES)} or a path to a text file (UTF-8 unless corpus_encoding / --corpus-encoding says otherwise)"
        )
    docs = corpus_mod.texts(corpus, encoding=corpus_encoding)  # a file's encoding errors, too
    if not any(t.strip() for t in docs):
        raise InputError(f"corpus {corpus if isinstance(corpus, (str, os.PathLike)) else 'given'} holds no text")
    return docs


def _write_progress(report: GeometryReport, folder: Path) -> None:
    """report.json, report.md and index.html (no figures), all marked with the run's status."""
    from tl_geometry.render.html import render_into

    render_into(report, folder, figures=False)


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
    progress: bool = True,
    force_hint: str = "force=True",
    capture: str = "shared",
) -> GeometryReport:
    """Compute every (or the chosen) registered metric on a model and real text.

    Every input is checked before the model is loaded ([`check_inputs`][tl_geometry.runs.pipeline.check_inputs], and ``out``:
    not a file, writable, not in use by another run, empty unless ``force``).

    Args:
        model: a name (``"smollm2-135m"`` offline, or any TL name with the hub) or a model.
        corpus, n_seqs, seq_len, seed: the text batch (see [`tl_geometry.io.corpus.tokens`][tl_geometry.io.corpus.tokens]).
        corpus_encoding: the encoding of a text-file corpus (default UTF-8, decoded strictly).
        metrics: registry names (default: [`default_metrics`][tl_geometry.runs.pipeline.default_metrics], every registered metric but
            those in [`not_in_default_report`][tl_geometry.runs.pipeline.not_in_default_report], recorded in ``provenance["left_out"]``).
        options: per-metric options overriding the report defaults.
        fast: cheaper defaults (fewer null subspaces / probes / points).
        out: directory for report.json / report.md / figures / index.html (None: don't write).
        force: replace the report files of an existing ``out`` (only once the new report is
            whole; other files are kept).
        figures: draw the PNG figures (index.html and report.md are written either way).
        max_memory_gb: refuse a named model whose estimated peak memory (from its config, before
            loading) exceeds this (default: the available RAM).
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
    from tqdm.auto import tqdm

    from tl_geometry.io import corpus as corpus_mod
    from tl_geometry.io import outdir
    from tl_geometry.models import load
    from tl_geometry.render.html import figure_files, render_into
    from tl_geometry.runs.analysis import CAPTURE_MODES, check_options, iter_metrics, merged, takes_option

    names = list(metrics) if metrics is not None else default_metrics()
    if capture not in CAPTURE_MODES:
        raise InputError(f"capture must be one of {CAPTURE_MODES}, got {capture!r}")
    docs = check_inputs(
        corpus=corpus,
        n_seqs=n_seqs,
        seq_len=seq_len,
        seed=seed,
        names=names,
        options=options or {},
        device=device,
        max_memory_gb=max_memory_gb,
        corpus_encoding=corpus_encoding,
    )
    base = report_options(fast=fast)
    run_options: dict[str, dict[str, Any]] = {}
    for name in names:
        opts = dict(base.get(name, {}))
        opts.update((options or {}).get(name, {}))
        if takes_option(name, "progress"):  # analyze(progress=False) below would silence them
            opts.setdefault("progress", progress)
        if opts:
            run_options[name] = opts
    check_options(names, run_options)  # the report defaults merged with the user's
    if isinstance(model, (str, os.PathLike)):
        check_model_memory(model, max_memory_gb)
    out_dir: Path | None = None
    work: Path | None = None
    lock = None
    created = False
    if out is not None:
        out_dir, created, lock = outdir.prepare(out, force=force, force_hint=force_hint)
    finished = False
    try:
        if out_dir is not None:
            work = outdir.new_work_dir(out_dir)
        t0 = time.perf_counter()
        model = load(model, device=device)
        load_s = time.perf_counter() - t0
        tokens = corpus_mod.tokens(model, docs, n_seqs=n_seqs, seq_len=seq_len, seed=seed)
        prov = {
            "corpus": corpus
            if isinstance(corpus, str)
            else str(corpus)
            if isinstance(corpus, os.PathLike)
            else "custom",
            "corpus_encoding": corpus_encoding,
            "n_seqs": n_seqs,
            "seq_len": seq_len,
            "seed": seed,
            "fast": fast,
            "load_s": round(load_s, 2),
            "left_out": {n: why for n, why in not_in_default_report().items() if n not in names},
        }
        parts: list[GeometryReport] = []
        errors: dict[str, str] = {}

        def current(status: str) -> GeometryReport:
            done = {n for p in parts for n in p.provenance.get("metrics", [])} | set(errors)
            extra = {"missing_metrics": [n for n in names if n not in done]} if status != "complete" else {}
            return GeometryReport.merge(*parts, **prov, status=status, errors=errors, metrics=names, **extra)

        try:
            if work is not None:
                _write_progress(current("running"), work)
            bar = tqdm(total=len(names), desc="report", disable=not progress)
            info: dict[str, Any] = {}
            # one shared forward pass feeds every planned activation metric (capture="shared"),
            # then the metrics finish one by one, the report saved after each
            for name, result, seconds in iter_metrics(
                model, tokens, names, run_options, progress=False, capture=capture, capture_info=info
            ):
                if info:
                    prov["capture"] = {k: v for k, v in info.items() if k != "_seconds"}
                bar.set_description(f"report: {name}")
                if isinstance(result, BaseException):  # keep going: one failing metric must not lose the others
                    logger.error("metric %s failed", name, exc_info=result)
                    errors[name] = f"{type(result).__name__}: {result}"
                else:
                    parts.append(merged(model, tokens, [result], [name], {name: seconds}))
                bar.update(1)
                if work is not None:
                    _write_progress(current("running"), work)
            bar.close()
        except KeyboardInterrupt:
            if work is not None and out_dir is not None:  # work lies in out_dir
                _write_progress(current("interrupted"), work)
                if (out_dir / "report.json").exists():
                    logger.warning(
                        "interrupted: the previous report in %s is kept unchanged; this run's partial "
                        "results are in %s (marked 'interrupted')",
                        out_dir,
                        work,
                    )
                else:
                    outdir.promote(work, out_dir, owned_figures=figure_files())
                    logger.warning("interrupted: the partial results are in %s (marked 'interrupted')", out_dir)
            finished = True  # what was computed is on disk; do not remove the directory
            raise
        timings = {}
        for p in parts:
            timings.update(p.provenance.get("timings_s", {}))
        if "_seconds" in info:
            timings["capture"] = info["_seconds"]
        prov["timings_s"] = timings
        prov["total_s"] = round(time.perf_counter() - t0, 2)
        report = current("partial" if errors else "complete")
        if work is not None and out_dir is not None:
            render_into(report, work, figures=figures)
            outdir.promote(work, out_dir, owned_figures=figure_files())
        finished = True
        return report
    finally:
        if lock is not None:
            if not finished and work is not None and not any(work.iterdir()):
                work.rmdir()
            lock.release()
            if not finished and work is not None and out_dir is not None and not work.exists():
                outdir.cleanup_created(out_dir, created)
