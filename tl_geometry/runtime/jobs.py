"""The one resumable job runner, local or on Ray.

[`run_jobs`][tl_geometry.runtime.jobs.run_jobs] is the one resumable job runner of the package: every long job (packing cells,
toy and shape sweeps, model sweeps, PGA over checkpoints, ``reproduce``) hands it its units,
locally or as Ray tasks, and it writes each finished unit at once and skips the finished ones.

The results files it writes are [`tl_geometry.runtime.results_file`][tl_geometry.runtime.results_file]'s (its
names are re-exported here); the Ray executor is [`tl_geometry.runtime.ray_executor`][tl_geometry.runtime.ray_executor].
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from tl_geometry.errors import InputError
from tl_geometry.runtime.results_file import (  # noqa: F401  (re-exported: the results files of run_jobs)
    HEADER_KEY,
    RESULTS_FORMAT,
    NotAResultsFileError,
    ResultsFile,
    ResultsFileCheck,
    ResultsFileInUseError,
    ResultsFileLock,
    _run_unit,
    check_results_file,
    error_message,
    header_line,
    job_key,
    lock_path,
    read_records,
)

logger = logging.getLogger(__name__)

EXECUTORS = ("local", "ray")
"""Where [`run_jobs`][tl_geometry.runtime.jobs.run_jobs] runs the units: in this process, or each unit as a Ray task."""


def run_jobs(
    jobs: Iterable[Mapping[str, Any]],
    fn: Callable[[Mapping[str, Any]], Mapping[str, Any]],
    results: str | os.PathLike | ResultsFile | None,
    *,
    retry_errors: bool = False,
    catch: bool = False,
    progress: bool = True,
    desc: str = "jobs",
    executor: str = "local",
    num_cpus: float = 1,
    num_gpus: float = 0,
    on_error: Callable[[BaseException], Mapping[str, Any]] | None = None,
    ray_options: Mapping[str, Any] | None = None,
) -> Iterator[dict]:
    """Run ``fn(params)`` for each job not yet finished in ``results``; record each at once.

    Args:
        jobs: parameter dicts (JSON-able); their canonical JSON is the job key.
        fn: does one unit of work, returns a JSON-able dict of results.
        results: path of the JSON-lines file (or a [`ResultsFile`][tl_geometry.runtime.results_file.ResultsFile]); None: nothing is written
            and nothing resumed (every job runs).
        retry_errors: also re-run jobs recorded as "error".
        catch: record an exception as an "error" record and continue (else it propagates,
            after nothing is written for that job).
        progress, desc: tqdm bar over the jobs to run.
        executor: ``"local"`` (one job after another in this process) or ``"ray"`` (each job a Ray
            task with ``num_cpus`` / ``num_gpus``; uses a running Ray session or starts a local one).
            With Ray, ``fn`` is shipped to the workers by cloudpickle; only this process writes
            ``results``, so the file has a single writer whatever the cluster size; records come
            in the order the tasks finish.
        num_cpus, num_gpus: Ray resources per task.
        on_error: ``exception → result dict`` of an "error" record (default [`error_message`][tl_geometry.runtime.results_file.error_message]);
            with Ray, a task whose worker died is recorded through it too (when ``catch``).
        ray_options: more for the Ray executor ([`tl_geometry.runtime.ray_executor.run_ray`][tl_geometry.runtime.ray_executor.run_ray]):
            ``address``, ``runtime_env``, ``device`` (checked against the cluster's resources
            before anything is submitted), and ``actor_fn`` / ``group_by`` / ``shared`` for one
            actor per group of units.

    Yields:
        The record of each job run now (finished jobs are skipped, not yielded).

    Raises:
        ValueError: unknown executor; ``executor="ray"`` without ray installed.
    """
    if executor not in EXECUTORS:
        raise InputError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    on_error = on_error or error_message
    rf = results if isinstance(results, ResultsFile) or results is None else ResultsFile(results)
    lock = None if rf is None else ResultsFileLock(rf.path)
    if lock is not None:
        lock.results.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()  # a second runner on this file is refused here, before any work
    try:
        yield from _run_locked(
            rf, list(jobs), fn, catch, on_error, progress, desc, executor, retry_errors, num_cpus, num_gpus, ray_options
        )
    finally:
        if lock is not None:
            lock.release()


def _run_locked(
    rf, jobs, fn, catch, on_error, progress, desc, executor, retry_errors, num_cpus, num_gpus, ray_options
) -> Iterator[dict]:
    """The body of [`run_jobs`][tl_geometry.runtime.jobs.run_jobs], with the results file locked."""
    finished: set[str] = set()
    if rf is not None:
        if rf.repair():  # refuses (before any work) a file this package did not write
            logger.warning("%s: removed the torn last line left by an interrupted run", rf.path)
        finished = rf.finished_keys(include_errors=not retry_errors)
    todo = [j for j in jobs if job_key(j) not in finished]
    if rf is not None and len(todo) < len(jobs):
        logger.info("%s: %d of %d jobs already finished; resuming", rf.path, len(jobs) - len(todo), len(jobs))

    def record(params, status, result) -> dict:
        if rf is not None:
            rf.append(params, result, status=status)
        return {"key": job_key(params), "params": dict(params), "status": status, **result}

    if executor == "ray":
        yield from _run_ray(
            todo,
            fn,
            record,
            catch=catch,
            on_error=on_error,
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            progress=progress,
            desc=desc,
            **dict(ray_options or {}),
        )
        return
    from tqdm.auto import tqdm

    for params in tqdm(todo, desc=desc, disable=not progress):
        status, result = _run_unit(fn, params, catch, on_error)
        yield record(params, status, result)


def _run_ray(todo, fn, record, **kwargs) -> Iterator[dict]:
    """The Ray executor ([`tl_geometry.runtime.ray_executor.run_ray`][tl_geometry.runtime.ray_executor.run_ray]): resources checked, tasks or actors."""
    from tl_geometry.runtime.ray_executor import run_ray

    return run_ray(todo, fn, record, **kwargs)
