"""The one resumable job runner (local or Ray) and its crash-safe results files (JSON lines).

A results file starts with one header line, ``{"tl_geometry_results": 1, ...}``, written
together with the file (it never exists without it). Each finished unit of work (a packing cell,
a training run, a model in a sweep) is then one record ``{"key": ..., "params": ...,
"status": "ok" | "error", ...}`` appended as a single line with one ``write`` followed by
``flush`` + ``fsync``. A process killed mid-write can leave at most one torn last line (one
without its newline); [`read_records`][tl_geometry.runtime.jobs.read_records] skips it and [`ResultsFile.repair`][tl_geometry.runtime.jobs.ResultsFile.repair] cuts it off,
so a unit's record appears whole or not at all. Re-running a job with the same file skips every
key already recorded as ``"ok"``.

Only a file this package wrote is ever appended to or repaired ([`check_results_file`][tl_geometry.runtime.jobs.check_results_file]):
one with the header, or one written before the header existed (every line a record with the
keys ``key`` / ``params`` / ``status``; such a file is used as it is, no header is added). Any
other file (a text file, another tool's JSON lines, a file with a bad line before its last) is
refused with [`NotAResultsFileError`][tl_geometry.runtime.jobs.NotAResultsFileError] and left byte-identical.

[`run_jobs`][tl_geometry.runtime.jobs.run_jobs] is the one resumable job runner of the package: every long job (packing cells,
toy and shape sweeps, model sweeps, PGA over checkpoints, ``reproduce``) hands it its units,
locally or as Ray tasks, and it writes each finished unit at once and skips the finished ones.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tl_geometry.errors import InputError, describe_os_error

logger = logging.getLogger(__name__)

HEADER_KEY = "tl_geometry_results"
"""The header's key; its value is the format version ([`RESULTS_FORMAT`][tl_geometry.runtime.jobs.RESULTS_FORMAT])."""
RESULTS_FORMAT = 1
"""Version of the results-file format this code writes and reads."""
RECORD_KEYS = ("key", "params", "status")
"""The keys every record has (how a file written before the header existed is recognised)."""


class NotAResultsFileError(InputError):
    """A path given as a results file holds something this package did not write; it is left as it is."""


def job_key(params: Mapping[str, Any]) -> str:
    """Canonical string key of a unit of work: its parameters as sorted compact JSON."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)


def _is_record(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("key"), str)
        and isinstance(obj.get("params"), dict)
        and obj.get("status") in ("ok", "error")
    )


@dataclass(frozen=True)
class ResultsFileCheck:
    """What [`check_results_file`][tl_geometry.runtime.jobs.check_results_file] found: ``header`` (False: an older file without one),
    the records, and ``torn_at`` (byte offset of a torn last line, else None)."""

    header: bool
    records: tuple[dict, ...]
    torn_at: int | None


_EXPECTED = (
    f'expected a first line {{"{HEADER_KEY}": {RESULTS_FORMAT}, ...}} (or, in a file from before that header, '
    "a record), then one JSON record per line with the keys key, params and status. The file was left "
    "unchanged: choose another --out / results path, or move the file away"
)


def _refuse(path: Path, what: str) -> NotAResultsFileError:
    return NotAResultsFileError(f"{path} is not a results file written by tl-geometry ({what}); {_EXPECTED}")


def check_results_file(path: str | os.PathLike) -> ResultsFileCheck | None:
    """Read ``path`` and decide whether this package wrote it; None when it does not exist.

    Accepted: a header line then records; or (a file from before the header) records only. In
    both, the last line may be torn: no newline at its end and not parseable (what a kill
    mid-``write`` leaves). Everything else is refused.

    Raises:
        NotAResultsFileError: a directory, an empty file, a header of another format version, or
            a line (other than a torn last one) that is not one of our records; the message
            names the path, the line and what was expected.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise _refuse(p, "it is a directory") from None
    except OSError as exc:
        raise NotAResultsFileError(f"cannot read the results file {p}: {describe_os_error(exc)}") from None
    if not data.strip():
        raise _refuse(p, "it is empty")
    lines = data.split(b"\n")
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline:
        lines = lines[:-1]
    header = False
    records: list[dict] = []
    torn_at = None
    offset = 0
    for i, raw in enumerate(lines, 1):
        start, offset = offset, offset + len(raw) + 1
        last = i == len(lines)
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            obj = _UNPARSED
        if i == 1 and isinstance(obj, dict) and HEADER_KEY in obj:
            if obj[HEADER_KEY] != RESULTS_FORMAT:
                raise _refuse(p, f"its format is {obj[HEADER_KEY]!r}; this tl-geometry reads format 1")
            header = True
            continue
        if _is_record(obj):
            records.append(obj)
            continue
        if obj is _UNPARSED and last and not ends_with_newline and (header or records):
            torn_at = start  # a torn last line of a file that is ours
            continue
        shown = raw[:60].decode("utf-8", errors="replace")
        what = "is not JSON" if obj is _UNPARSED else "is not a record"
        raise _refuse(p, f"line {i}, {shown!r}{'...' if len(raw) > 60 else ''}, {what}")
    return ResultsFileCheck(header=header, records=tuple(records), torn_at=torn_at)


_UNPARSED = object()


def read_records(path: str | os.PathLike) -> list[dict]:
    """All complete records in ``path`` (missing file → []); a torn last line is skipped with a warning.

    Raises:
        NotAResultsFileError: ``path`` is not a results file this package wrote.
    """
    found = check_results_file(path)
    if found is None:
        return []
    if found.torn_at is not None:
        logger.warning("%s: ignoring a torn last line (an interrupted write)", path)
    return [dict(r) for r in found.records]


def header_line() -> str:
    """The first line of a new results file."""
    from tl_geometry import __version__

    return json.dumps({HEADER_KEY: RESULTS_FORMAT, "written_by": f"tl-geometry {__version__}"}, sort_keys=True)


class ResultsFile:
    """An append-only JSON-lines file of finished units of work (see the module docstring).

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
        self._checked = False

    def check(self) -> ResultsFileCheck | None:
        """[`check_results_file`][tl_geometry.runtime.jobs.check_results_file] of this file (None: it does not exist yet)."""
        return check_results_file(self.path)

    def records(self) -> list[dict]:
        return read_records(self.path)

    def finished_keys(self, *, include_errors: bool = False) -> set[str]:
        """Keys recorded as "ok" (and as "error" too with ``include_errors``)."""
        return {r["key"] for r in self.records() if r["status"] == "ok" or include_errors}

    def done(self, params: Mapping[str, Any], *, include_errors: bool = False) -> bool:
        return job_key(params) in self.finished_keys(include_errors=include_errors)

    def repair(self) -> int:
        """Cut off a torn last line of this (our) file; returns the number of lines removed (0 or 1).

        Nothing else is ever removed or rewritten: a file that is not ours, or has a bad line
        before its last, is refused ([`NotAResultsFileError`][tl_geometry.runtime.jobs.NotAResultsFileError]) and left as it is.
        """
        found = self.check()
        if found is None or found.torn_at is None:
            return 0
        try:
            os.truncate(self.path, found.torn_at)
        except OSError as exc:
            raise NotAResultsFileError(
                f"cannot repair the results file {self.path}: {describe_os_error(exc)}"
            ) from None
        return 1

    def _create(self) -> None:
        """Create the file holding only its header, atomically and without replacing anything."""
        from tl_geometry.io.outdir import write_file

        write_file(self.path, header_line() + "\n", force=False, what="results file")

    def append(self, params: Mapping[str, Any], result: Mapping[str, Any], *, status: str = "ok") -> None:
        """Append one record atomically (one write, flushed and fsynced); creates the file with its header.

        The first append of this object checks the file ([`check_results_file`][tl_geometry.runtime.jobs.check_results_file]) and cuts off
        a torn last line, so a record never lands after a torn one.

        Raises:
            NotAResultsFileError: the file exists and is not ours; it is left as it is.
        """
        if status not in ("ok", "error"):
            raise InputError(f"status must be 'ok' or 'error', got {status!r}")
        if not self._checked or not self.path.exists():
            if self.check() is None:
                self._create()
            else:
                self.repair()
            self._checked = True
        rec = {"key": job_key(params), "params": dict(params), "status": status, **dict(result)}
        line = json.dumps(rec, sort_keys=True, default=str, allow_nan=True)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        except OSError as exc:
            raise NotAResultsFileError(
                f"cannot append to the results file {self.path}: {describe_os_error(exc)}"
            ) from None
        try:
            # a file from before the header may lack its last newline: start on a fresh line
            size = os.fstat(fd).st_size
            needs_newline = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
            os.write(fd, (("\n" if needs_newline else "") + line + "\n").encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)


EXECUTORS = ("local", "ray")
"""Where [`run_jobs`][tl_geometry.runtime.jobs.run_jobs] runs the units: in this process, or each unit as a Ray task."""


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
        results: path of the JSON-lines file (or a [`ResultsFile`][tl_geometry.runtime.jobs.ResultsFile]); None: nothing is written
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
        on_error: ``exception → result dict`` of an "error" record (default [`error_message`][tl_geometry.runtime.jobs.error_message]);
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
    jobs = list(jobs)
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
