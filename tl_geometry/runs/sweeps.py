"""Crash-safe, resumable sweeps of metrics over many models, locally or on Ray.

``sweep(jobs, metrics=..., out="results.jsonl")`` runs every *job* (one model: a name for
[`tl_geometry.models.load`][tl_geometry.models.load] or a ``"module:function"`` loader, a checkpoint, a corpus) through
[`tl_geometry.analyze`][tl_geometry.runs.analysis.analyze] and appends the job's rows to ``out`` as **one** JSON line (one
``write`` + ``fsync``, see [`tl_geometry.runtime.jobs`][tl_geometry.runtime.jobs]): a job's rows appear whole or not at all.

* Rerunning with the same ``out`` skips the jobs already recorded as ``"ok"``.
* A job that raises is recorded as ``"error"`` with its message and traceback; it is retried only
  with ``retry_errors=True``.
* Between jobs the model is dropped and memory is returned (``gc.collect()``, CUDA cache).
* ``executor="ray"`` submits each job as a Ray task (``num_cpus`` / ``num_gpus`` per task); only
  the driver writes ``out``, so the file has a single writer whatever the cluster size. The rows
  are the same as with the local executor: each job is a pure function of its parameters.

The loop itself (skip the finished keys, run each job locally or on Ray, append its record at
once) is the package's one job runner, [`tl_geometry.runtime.jobs.run_jobs`][tl_geometry.runtime.jobs.run_jobs]; this module says what
one job is ([`run_job`][tl_geometry.runs.sweeps.run_job]) and what a sweep returns; how a job's model is loaded
and kept for the next job of the same model is [`tl_geometry.runs.model_slot`][tl_geometry.runs.model_slot] (re-exported here).
[`check_outputs`][tl_geometry.runs.sweeps.check_outputs] is every sweep command's check of its output files
(``tl-geometry sweep models`` and the experiments a family declares, e.g. ``sweep shape``).

The job key is the canonical JSON of the job's parameters **plus** the metrics and options, so
changing the metrics re-runs the job instead of silently reusing old rows.

Examples:
    >>> import tl_geometry as tg                                   # doctest: +SKIP
    >>> jobs = [tg.SweepJob("smollm2-135m"), tg.SweepJob("smollm2-135m", seed=1)]  # doctest: +SKIP
    >>> summary = tg.sweep(jobs, metrics=["shape"], out="results.jsonl")  # doctest: +SKIP
    >>> summary.report().to_pandas()                               # doctest: +SKIP
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tl_geometry.base import _checks
from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError, InputTypeError
from tl_geometry.runs.model_slot import (  # noqa: F401  (the models of a sweep, re-exported: sweeps.ModelSlot, ...)
    _LOADER_RE,
    ModelSlot,
    _free_memory,
    _load_model,
    _named,
    _resolve_loader,
    _weak,
    load_key,
    model_key,
)
from tl_geometry.runtime.jobs import EXECUTORS, ResultsFile, job_key, read_records, run_jobs

logger = logging.getLogger(__name__)

__all__ = [
    "SweepJob",
    "SweepSummary",
    "SweepRunner",
    "ModelSlot",
    "sweep",
    "sweep_report",
    "run_job",
    "load_key",
    "model_key",
    "tokens_fingerprint",
    "EXECUTORS",
    "FORCE_HELP",
    "check_outputs",
]

_JOB_FIELDS = ("model", "checkpoint", "corpus", "n_seqs", "seq_len", "seed", "loader", "device")


@dataclass(frozen=True)
class SweepJob:
    """One unit of a sweep: which model to load and which tokens to feed it.

    Attributes:
        model: a name for [`tl_geometry.models.load`][tl_geometry.models.load] (or passed to ``loader``).
        checkpoint: a training checkpoint (step or revision) handed to the loader; None = final.
        corpus: a [`tl_geometry.io.corpus.tokens`][tl_geometry.io.corpus.tokens] source (``"pydoc"``, ``"shakespeare"``, a
            text-file path), or ``"random"``: uniform token ids drawn with ``seed`` (for models
            without a tokenizer).
        n_seqs: sequences in the token batch.
        seq_len: tokens per sequence.
        seed: seeds the corpus sample and every sampled quantity of the metrics.
        loader: ``"package.module:function"``, called as ``function(job_dict)`` and returning a
            model; None uses [`tl_geometry.models.load`][tl_geometry.models.load]. Imported by name: never evaluated.
        device: where the model is loaded.
    """

    model: str
    checkpoint: str | int | None = None
    corpus: str = "pydoc"
    n_seqs: int = 8
    seq_len: int = 128
    seed: int = 0
    loader: str | None = None
    device: str = "cpu"

    def __post_init__(self):
        if not isinstance(self.model, str) or not self.model.strip():
            raise InputError(f"SweepJob.model must be a non-empty string, got {self.model!r}")
        if self.loader is not None and not (isinstance(self.loader, str) and _LOADER_RE.match(self.loader)):
            raise InputError(f"SweepJob.loader must look like 'package.module:function', got {self.loader!r}")
        for name in ("n_seqs", "seq_len"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"SweepJob.{name} must be a positive int, got {v!r}")
        _checks.seed(self.seed, "SweepJob.seed")
        if not isinstance(self.corpus, str):
            raise InputError(
                f"SweepJob.corpus must be a string (source name or path), got {type(self.corpus).__name__}"
            )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def coerce(cls, job: SweepJob | str | Mapping[str, Any]) -> SweepJob:
        """A job from a [`SweepJob`][tl_geometry.runs.sweeps.SweepJob], a model name, or a dict of its fields."""
        if isinstance(job, cls):
            return job
        if isinstance(job, str):
            return cls(model=job)
        if isinstance(job, Mapping):
            unknown = sorted(set(job) - set(_JOB_FIELDS))
            if unknown:
                raise InputError(f"unknown job fields {unknown}; accepted: {list(_JOB_FIELDS)}")
            return cls(**dict(job))
        raise InputTypeError(f"a job must be a SweepJob, a model name or a dict, got {type(job).__name__}")


@dataclass(frozen=True)
class SweepSummary(Tabular):
    """What one call of [`sweep`][tl_geometry.runs.sweeps.sweep] did.

    Attributes:
        out: the results file.
        ran: keys of the jobs run now that finished ``"ok"``.
        failed: key → error message of the jobs run now that failed.
        skipped: keys already finished in ``out`` (not run again).
    """

    out: str
    ran: tuple[str, ...] = ()
    failed: Mapping[str, str] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()

    def report(self):
        """Every ``"ok"`` row in ``out`` (this run and earlier ones) as one GeometryReport."""
        return sweep_report(self.out)

    def to_dict(self) -> dict:
        return {"out": self.out, "ran": list(self.ran), "failed": dict(self.failed), "skipped": list(self.skipped)}

    def to_pandas(self):
        """Every ``"ok"`` row of the sweep (this run and earlier ones) as a DataFrame:
        ``self.report().to_pandas()``, one row per metric × hook × job."""
        from tl_geometry.base.tables import require_pandas

        require_pandas()
        return self.report().to_pandas()


def sweep_report(out: str | Path):
    """The rows of every ``"ok"`` record of a sweep results file, merged into one report.

    Each row's extras gain the job's ``checkpoint`` / ``seed`` / ``corpus`` (when not already set)
    so rows of different jobs of the same model stay apart.
    """
    from tl_geometry.report import GeometryReport, Row

    rows, seen = [], set()
    for rec in read_records(out):
        if rec.get("status") != "ok" or "rows" not in rec or rec.get("key") in seen:
            continue
        seen.add(rec["key"])
        params = rec.get("params", {})
        for r in rec["rows"]:
            row = Row.from_dict(r)
            extras = dict(row.extras)
            for k in ("checkpoint", "seed", "corpus"):
                extras.setdefault(f"job_{k}", params.get(k))
            rows.append(Row(row.model, row.hook, row.layer, row.metric, row.value, extras))
    return GeometryReport(rows=tuple(rows), provenance={"sweep_results": str(out)})


def _job_tokens(model: Any, job: dict):
    import torch

    if job["corpus"] == "random":
        d_vocab = int(model.cfg.d_vocab)
        g = torch.Generator().manual_seed(int(job["seed"]))
        return torch.randint(0, d_vocab, (job["n_seqs"], job["seq_len"]), generator=g)
    from tl_geometry.io import corpus

    return corpus.tokens(model, job["corpus"], n_seqs=job["n_seqs"], seq_len=job["seq_len"], seed=job["seed"])


def _accepts_seed(fn: Callable) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "seed" in params


class SweepRunner:
    """``runner(params)`` runs one sweep job; with ``reuse_models`` it keeps the model between jobs
    of the same model ([`ModelSlot`][tl_geometry.runs.model_slot.ModelSlot]). The local executor builds one; a Ray sweep builds one
    in each model's actor (``SweepRunner(loader, hooks, reuse_models, tokens)``, the tokens read
    from the object store)."""

    def __init__(
        self,
        loader: Callable[[dict], Any] | None = None,
        hooks: Sequence[str] | None = None,
        reuse_models: bool = True,
        tokens: Any = None,
    ):
        self.loader, self.hooks, self.tokens = loader, hooks, tokens
        self.slot = ModelSlot(loader) if reuse_models else None

    def __call__(self, params: Mapping[str, Any]) -> dict:
        return run_job(params, loader=self.loader, hooks=self.hooks, slot=self.slot, tokens=self.tokens)

    def close(self) -> None:
        if self.slot is not None:
            self.slot.clear()


def run_job(
    params: Mapping[str, Any],
    *,
    loader: Callable[[dict], Any] | None = None,
    hooks: Sequence[str] | None = None,
    slot: ModelSlot | None = None,
    tokens: Any = None,
) -> dict:
    """Run one sweep job (the body of both executors): load, analyze, free.

    Args:
        params: the job fields of [`SweepJob`][tl_geometry.runs.sweeps.SweepJob] plus ``metrics`` (list of names or None)
            and ``options`` (per-metric keyword options).
        loader: overrides the job's loader (a Python callable; not part of the job key).
        hooks: hook names for every activation/gradient metric (default: each metric's own).
        slot: a [`ModelSlot`][tl_geometry.runs.model_slot.ModelSlot] that keeps the model for the next job of the same model
            (None: load, and free after the job).
        tokens: (batch, pos) token ids for every job instead of the job's corpus sample.

    Returns:
        ``{"rows": [...], "provenance": {...}, "elapsed_s": float}`` (JSON-able).
    """
    from tl_geometry.registry import get_metric
    from tl_geometry.runs.analysis import analyze

    t0 = time.perf_counter()
    job = {k: params[k] for k in _JOB_FIELDS if k in params}
    metrics = params.get("metrics")
    options = params.get("options") or {}
    model = slot.get(job) if slot is not None else _named(_load_model(job, loader), job)
    ref = _weak(model) if slot is None else None
    try:
        names = list(metrics) if metrics is not None else None
        needs_tokens = names is None or any(get_metric(n).needs != "weights" for n in names)
        if not needs_tokens:
            tokens = None
        elif tokens is None:
            tokens = _job_tokens(model, job)
        # Metrics that sample (pga, agop, ...) take the job's seed unless options say otherwise.
        opts = {}
        for n in names or []:
            o = dict(options.get(n, {}))
            if "seed" not in o and _accepts_seed(get_metric(n).fn):
                o["seed"] = job["seed"]
            if o:
                opts[n] = o
        report = analyze(
            model,
            tokens,
            metrics=names,
            hooks=hooks,
            options=opts or None,
            progress=False,
            seed=job["seed"],
            corpus=job["corpus"],
            checkpoint=job.get("checkpoint"),
        )
        result: dict[str, Any] = {
            "rows": [r.to_dict() for r in report.rows],
            "provenance": dict(report.provenance),
        }
    finally:
        del model
        if slot is None:
            _free_memory(ref)
    result["elapsed_s"] = round(time.perf_counter() - t0, 3)
    return result


def tokens_fingerprint(tokens: Any) -> str:
    """``"sha256:<16 hex>:BxP"`` of a token tensor: part of the job key of a sweep given ``tokens=``."""
    import hashlib

    import torch

    if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.dtype.is_floating_point:
        raise InputError(
            f"tokens must be a 2-D integer tensor (batch, pos), got "
            f"{getattr(tokens, 'shape', type(tokens).__name__)} {getattr(tokens, 'dtype', '')}"
        )
    t = tokens.detach().to("cpu", torch.int64).contiguous()
    digest = hashlib.sha256(t.numpy().tobytes()).hexdigest()[:16]
    return f"sha256:{digest}:{t.shape[0]}x{t.shape[1]}"


def _error_result(exc: BaseException) -> dict:
    return {
        "error": f"{type(exc).__name__}: {exc}",
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:],
    }


def sweep(
    jobs: Iterable[SweepJob | str | Mapping[str, Any]],
    metrics: Sequence[str] | None = None,
    out: str | Path = "results.jsonl",
    *,
    executor: str = "local",
    retry_errors: bool = False,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    hooks: Sequence[str] | None = None,
    loader: Callable[[dict], Any] | None = None,
    num_cpus: float = 1,
    num_gpus: float = 0,
    progress: bool = True,
    reuse_models: bool = True,
    tokens: Any = None,
    address: str | None = None,
    runtime_env: Mapping[str, Any] | None = None,
) -> SweepSummary:
    """Run ``metrics`` on every job's model; append each job's rows to ``out`` as it finishes.

    Args:
        jobs: [`SweepJob`][tl_geometry.runs.sweeps.SweepJob] objects, model names, or dicts of SweepJob fields.
        metrics: registry names (None: every registered metric).
        out: JSON-lines results file; created if missing, resumed if present.
        executor: ``"local"`` (one job after another in this process) or ``"ray"`` (each job a Ray
            task; uses a running Ray session or starts a local one).
        retry_errors: re-run jobs recorded as failed (otherwise they are skipped like done ones).
        options: per-metric keyword options, e.g. ``{"pga": {"n_null": 20}}``. A metric that
            takes ``seed`` gets the job's seed unless its options set one.
        hooks: hook names for every activation/gradient metric.
        loader: a Python callable ``loader(job_dict) -> model`` used for every job (overrides the
            jobs' ``loader`` strings; not part of the job key). With Ray it is shipped to workers
            by cloudpickle.
        num_cpus, num_gpus: Ray resources requested per task (per actor with ``reuse_models``).
            Checked against ``ray.cluster_resources()`` before anything is submitted: more GPUs
            or CPUs than the cluster has, or a job with ``device="cuda"`` and ``num_gpus=0``,
            is an error, not a task that waits forever.
        progress: tqdm bar over jobs.
        reuse_models: load each (model, checkpoint) once and run all its jobs (seeds, corpora)
            on it: the jobs are ordered by model; with Ray, one actor per model runs all of that
            model's jobs. The loader must then depend only on the job's model, checkpoint,
            loader and device (not on its seed). False: every job loads its own model (and, on
            Ray, is its own task). The rows are the same either way.
        tokens: a (batch, pos) token tensor used by every job instead of its corpus sample
            (``corpus``, ``n_seqs``, ``seq_len`` are then ignored); its fingerprint
            ([`tokens_fingerprint`][tl_geometry.runs.sweeps.tokens_fingerprint]) is part of the job key. With Ray it is put in the object
            store once and read by every actor.
        address: Ray only: the cluster to connect to (``"auto"``, ``"ray://host:10001"``);
            default: a running session, else a fresh local cluster.
        runtime_env: Ray only: the runtime environment, e.g. ``{"working_dir": "."}`` to ship the
            directory of a ``loader`` module to the workers (their current directory).

    Returns:
        A [`SweepSummary`][tl_geometry.runs.sweeps.SweepSummary]; ``summary.report()`` reads every finished row back.

    Raises:
        ValueError: unknown executor, duplicate jobs, a results path that is a directory, bad
            job fields, ``ray`` requested but not installed.
        KeyError: an unknown metric name (before any job runs).
    """
    from tl_geometry.registry import get_metric

    if executor not in EXECUTORS:
        raise InputError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    if isinstance(jobs, (str, SweepJob)) or isinstance(jobs, Mapping):
        jobs = [jobs]
    job_objs = [SweepJob.coerce(j) for j in jobs]
    if not job_objs:
        raise InputError("jobs is empty; pass at least one model name or SweepJob")
    if metrics is not None:
        metrics = _checks.names(list(metrics) if isinstance(metrics, tuple) else metrics, "metrics")
        for m in metrics:
            get_metric(m)  # unknown names fail now, not in every job
    options = {k: dict(v) for k, v in (options or {}).items()}
    if metrics is not None:
        extra = sorted(set(options) - set(metrics))
        if extra:
            raise InputError(f"options given for metrics not being run: {extra}")
    if _checks.real_in(0.0).problem(num_cpus) or _checks.real_in(0.0).problem(num_gpus):
        raise _checks.ArgumentError(
            f"num_cpus and num_gpus must be >= 0 (finite numbers), got {num_cpus!r}, {num_gpus!r}"
        )
    from tl_geometry.registry import list_metrics
    from tl_geometry.runs.analysis import check_options

    check_options(metrics if metrics is not None else list_metrics(), options)  # values, before any job
    if executor != "ray" and (address is not None or runtime_env is not None):
        raise InputError("address and runtime_env are for executor='ray'")
    if runtime_env is not None and not isinstance(runtime_env, Mapping):
        raise InputTypeError(
            f"runtime_env must be a mapping (e.g. {{'working_dir': '.'}}), got {type(runtime_env).__name__}"
        )
    cuda = next((j.device for j in job_objs if str(j.device).startswith("cuda")), None)
    if executor == "ray":
        from tl_geometry.runtime.ray_executor import check_resources

        # the device/GPU mismatch needs no cluster: refuse it before starting one
        check_resources(num_cpus, num_gpus, device=cuda, resources={"CPU": float("inf"), "GPU": float("inf")})
    extra_key = {"tokens": tokens_fingerprint(tokens)} if tokens is not None else {}

    params_list = [{**j.to_dict(), "metrics": metrics, "options": options, **extra_key} for j in job_objs]
    keys = [job_key(p) for p in params_list]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise InputError(f"duplicate jobs in the sweep: {dup[:3]}")

    rf = ResultsFile(out)
    finished = rf.finished_keys(include_errors=not retry_errors)
    skipped = tuple(k for k in keys if k in finished)

    if reuse_models:  # the jobs of one model together, in their first-appearance order
        order: dict[str, int] = {}
        for p in params_list:
            order.setdefault(load_key(p), len(order))
        params_list.sort(key=lambda p: order[load_key(p)])

    ray_options: dict[str, Any] = {"address": address, "runtime_env": runtime_env, "device": cuda}
    runner = None
    if executor == "ray" and reuse_models:
        fn: Callable = functools.partial(run_job, loader=loader, hooks=hooks)  # unused: the actors run
        ray_options.update(
            actor_fn=functools.partial(SweepRunner, loader, hooks, True),
            group_by=model_key,
            shared=(tokens,) if tokens is not None else (),
        )
    elif executor == "ray":
        fn = functools.partial(run_job, loader=loader, hooks=hooks, tokens=tokens)
    else:
        fn = runner = SweepRunner(loader, hooks, reuse_models, tokens)

    ran: list[str] = []
    failed: dict[str, str] = {}
    try:
        for rec in run_jobs(
            params_list,
            fn,
            rf,
            retry_errors=retry_errors,
            catch=True,
            on_error=_error_result,
            executor=executor,
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            progress=progress,
            desc="sweep",
            ray_options=ray_options if executor == "ray" else None,
        ):
            if rec["status"] == "ok":
                ran.append(rec["key"])
            else:  # run_jobs has logged it
                failed[rec["key"]] = rec["error"]
    finally:
        if runner is not None:
            runner.close()
    return SweepSummary(out=str(rf.path), ran=tuple(ran), failed=failed, skipped=skipped)


FORCE_HELP = "replace an existing --figure / --csv file (the --out results file is resumed, never replaced)"
"""--force of the sweep commands: the figure / CSV only; a results file is always resumed, never replaced."""


def check_outputs(args: Any, *extra: str) -> None:
    """Every sweep command's output checks, before any work: ``args.out`` is a results file this
    package wrote (resumed) or a new path; the files of the flags named in ``extra`` (``"figure"``,
    ``"csv"``) are new paths, or ``args.force``. See [`tl_geometry.io.outdir`][tl_geometry.io.outdir] and
    [`tl_geometry.runtime.jobs.check_results_file`][tl_geometry.runtime.jobs.check_results_file].

    Raises:
        tl_geometry.io.outdir.OutputExistsError: an existing ``--figure`` / ``--csv`` file without ``--force``.
        tl_geometry.runtime.results_file.NotAResultsFileError: ``--out`` exists and is not a results
            file of this package (left as it is).
    """
    from tl_geometry.io import outdir
    from tl_geometry.runtime.jobs import check_results_file

    outdir.check_out_file(args.out, exists_ok=True, what="results file")
    check_results_file(args.out)  # refuses a file we did not write, and leaves it as it is
    for flag in extra:
        path = getattr(args, flag, None)
        if path:
            outdir.check_out_file(path, force=args.force, what=f"--{flag} file")
