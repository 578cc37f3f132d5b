"""The one resumable job runner (local or Ray) and its crash-safe results files (JSON lines).

Each finished unit of work (a packing cell, a training run, a model in a sweep) is one record
``{"key": ..., "status": "ok" | "error", ...}`` appended as a single line with one ``write``
followed by ``flush`` + ``fsync``. A process killed mid-write can leave at most one torn last
line; :func:`read_records` ignores (and :meth:`ResultsFile.repair` removes) a line that does not
parse, so a unit's record appears whole or not at all. Re-running a job with the same file
skips every key already recorded as ``"ok"``.

:func:`run_jobs` is the one resumable job runner of the package: every long job (packing cells,
toy and shape sweeps, model sweeps, PGA over checkpoints, ``reproduce``) hands it its units,
locally or as Ray tasks, and it writes each finished unit at once and skips the finished ones.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from tl_geometry.errors import InputError
from tl_geometry.report import atomic_write_text

logger = logging.getLogger(__name__)


def job_key(params: Mapping[str, Any]) -> str:
    """Canonical string key of a unit of work: its parameters as sorted compact JSON."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)


def read_records(path: str | os.PathLike) -> list[dict]:
    """All complete records in ``path`` (missing file → []); a torn line is skipped with a warning."""
    p = Path(path)
    if not p.exists():
        return []
    out = []
    with p.open("r", encoding="utf-8", errors="replace") as f:  # garbage bytes: a bad line, not a crash
        for i, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                logger.warning("%s: ignoring torn/invalid line %d", p, i)
                continue
            if isinstance(rec, dict):
                out.append(rec)
    return out


class ResultsFile:
    """An append-only JSON-lines file of finished units of work.

    Examples:
        >>> import tempfile, os
        >>> rf = ResultsFile(os.path.join(tempfile.mkdtemp(), "r.jsonl"))
        >>> rf.append({"k": 1}, {"value": 0.5})
        >>> rf.done({"k": 1}), rf.done({"k": 2})
        (True, False)
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if self.path.exists() and self.path.is_dir():
            raise InputError(f"results path {self.path} is a directory; pass a file path ending in .jsonl")

    def records(self) -> list[dict]:
        return read_records(self.path)

    def finished_keys(self, *, include_errors: bool = False) -> set[str]:
        """Keys recorded as "ok" (and as "error" too with ``include_errors``)."""
        return {r["key"] for r in self.records() if "key" in r and (r.get("status", "ok") == "ok" or include_errors)}

    def done(self, params: Mapping[str, Any], *, include_errors: bool = False) -> bool:
        return job_key(params) in self.finished_keys(include_errors=include_errors)

    def repair(self) -> int:
        """Rewrite the file without torn lines (atomically); returns the number removed."""
        if not self.path.exists():
            return 0
        lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
        good = []
        for line in lines:
            if not line.strip():
                continue
            try:
                json.loads(line)
                good.append(line)
            except json.JSONDecodeError:
                pass
        removed = len([l for l in lines if l.strip()]) - len(good)
        if removed:
            atomic_write_text(self.path, "".join(g + "\n" for g in good))
        return removed

    def append(self, params: Mapping[str, Any], result: Mapping[str, Any], *, status: str = "ok") -> None:
        """Append one record atomically (one write, flushed and fsynced)."""
        if status not in ("ok", "error"):
            raise InputError(f"status must be 'ok' or 'error', got {status!r}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # A torn last line (from a kill) would glue onto our record: start on a fresh line.
        needs_newline = False
        if self.path.exists() and self.path.stat().st_size > 0:
            with self.path.open("rb") as f:
                f.seek(-1, os.SEEK_END)
                needs_newline = f.read(1) != b"\n"
        rec = {"key": job_key(params), "params": dict(params), "status": status, **dict(result)}
        line = json.dumps(rec, sort_keys=True, default=str, allow_nan=True)
        data = ("\n" if needs_newline else "") + line + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, data.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)


#: Where :func:`run_jobs` runs the units: in this process, or each unit as a Ray task.
EXECUTORS = ("local", "ray")


def error_message(exc: BaseException) -> dict:
    """The default result of a failed unit: ``{"error": "Type: message"}``."""
    return {"error": f"{type(exc).__name__}: {exc}"}


def _run_unit(fn, params, catch: bool, on_error) -> tuple[str, dict]:
    """(status, result) of one unit: the body of both executors (a Ray task runs exactly this)."""
    if not catch:
        return "ok", dict(fn(params))
    try:
        return "ok", dict(fn(params))
    except Exception as exc:
        logger.exception("job %s failed", job_key(params))
        return "error", dict(on_error(exc))


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
        results: path of the JSON-lines file (or a :class:`ResultsFile`); None: nothing is written
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
        on_error: ``exception → result dict`` of an "error" record (default :func:`error_message`);
            with Ray, a task whose worker died is recorded through it too (when ``catch``).
        ray_options: more for the Ray executor (:func:`tl_geometry.ray_executor.run_ray`):
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
    jobs = list(jobs)
    finished: set[str] = set()
    if rf is not None:
        removed = rf.repair()
        if removed:
            logger.warning("%s: removed %d torn line(s) left by an interrupted run", rf.path, removed)
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
    """The Ray executor (:func:`tl_geometry.ray_executor.run_ray`): resources checked, tasks or actors."""
    from tl_geometry.ray_executor import run_ray

    return run_ray(todo, fn, record, **kwargs)
