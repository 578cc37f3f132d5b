"""The crash-safe results files (JSON lines) of the job runner ([`run_jobs`][tl_geometry.runtime.jobs.run_jobs]).

A results file starts with one header line, ``{"tl_geometry_results": 1, ...}``, written
together with the file (it never exists without it). Each finished unit of work (a packing cell,
a training run, a model in a sweep) is then one record ``{"key": ..., "params": ...,
"status": "ok" | "error", ...}`` appended as a single line with one ``write`` followed by
``flush`` + ``fsync``. A process killed mid-write can leave at most one torn last line (one
without its newline); [`read_records`][tl_geometry.runtime.results_file.read_records] skips it and [`ResultsFile.repair`][tl_geometry.runtime.results_file.ResultsFile.repair] cuts it off,
so a unit's record appears whole or not at all. Re-running a job with the same file skips every
key already recorded as ``"ok"``.

Only a file this package wrote is ever appended to or repaired ([`check_results_file`][tl_geometry.runtime.results_file.check_results_file]):
one with the header, or one written before the header existed (every line a record with the
keys ``key`` / ``params`` / ``status``; such a file is used as it is, no header is added). Any
other file (a text file, another tool's JSON lines, a file with a bad line before its last) is
refused with [`NotAResultsFileError`][tl_geometry.runtime.results_file.NotAResultsFileError] and left byte-identical.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tl_geometry.errors import InputError, describe_os_error
from tl_geometry.io.outdir import OutputLock, OutputLockedError

logger = logging.getLogger(__name__)

HEADER_KEY = "tl_geometry_results"
"""The header's key; its value is the format version ([`RESULTS_FORMAT`][tl_geometry.runtime.results_file.RESULTS_FORMAT])."""
RESULTS_FORMAT = 1
"""Version of the results-file format this code writes and reads."""
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
    """What [`check_results_file`][tl_geometry.runtime.results_file.check_results_file] found: ``header`` (False: an older file without one),
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
        """[`check_results_file`][tl_geometry.runtime.results_file.check_results_file] of this file (None: it does not exist yet)."""
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
        before its last, is refused ([`NotAResultsFileError`][tl_geometry.runtime.results_file.NotAResultsFileError]) and left as it is.
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

        The first append of this object checks the file ([`check_results_file`][tl_geometry.runtime.results_file.check_results_file]) and cuts off
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


def lock_path(path: str | os.PathLike) -> Path:
    """The lock beside a results file: ``.<name>.lock`` in the same folder."""
    p = Path(path)
    return p.with_name(f".{p.name}.lock")


class ResultsFileInUseError(OutputLockedError):
    """Another live process is running jobs into the same results file."""


class ResultsFileLock(OutputLock):
    """One job runner per results file (``.<name>.lock`` beside it, an ``flock`` released by the
    kernel if the owner dies): a second sweep on the same file is refused before any work, never
    run beside the first (which would run every job twice and interleave their records)."""

    def __init__(self, results: str | os.PathLike):
        self.results = Path(results)
        self.path = lock_path(results)
        self._fd = None

    def _busy(self, who: str) -> ResultsFileInUseError:
        import errno

        return ResultsFileInUseError(
            errno.EEXIST,
            f"results file {self.results} is in use by another tl-geometry run ({who}); wait for it to "
            "finish (a rerun resumes it) or choose another results file",
        )
