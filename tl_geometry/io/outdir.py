"""Output directories of reports: the writability check, the lock and the swap.

A report never writes its files straight over the ones a person may be reading:

1. [`prepare`][tl_geometry.io.outdir.prepare] checks the directory *before any expensive work*: not a file, empty or
   ``force``, writable (a probe file is created and removed).
2. [`OutputLock`][tl_geometry.io.outdir.OutputLock] holds ``out/.tl-geometry.lock`` (an ``fcntl.flock`` lock holding the
   owner's pid) for the whole run, so a second run into the same directory is refused with the
   owner's pid. The kernel drops the lock when its process dies, even by ``SIGKILL``, so a
   lock left by a dead process is taken over without asking.
3. The run writes into the work directory ``out/partial-run/`` (`WORK_DIR`), marked as
   unfinished in every file, after each metric.
4. [`promote`][tl_geometry.io.outdir.promote] installs the finished files as a whole, in two phases: it commits by
   writing the plan (files to move, our stale figures to remove) atomically to
   ``out/partial-run/.promote.json``, then removes our figures that the new report no longer
   draws, moves the files into ``out`` one ``os.replace`` at a time (``report.json`` last) and
   removes the work directory. Other files in ``out`` are never touched.

[`Staging`][tl_geometry.io.outdir.Staging] is the protocol as one object (prepare and lock → work directory →
promote → release, and the clean-up of a run that did not finish): the report run
([`tl_geometry.runs.pipeline`][tl_geometry.runs.pipeline]) and [`tl_geometry.render.html.write_outputs`][tl_geometry.render.html.write_outputs] both use it.

A run that stops before the commit (interrupted, killed) leaves the previous report in ``out``
exactly as it was; its own results stay in ``out/partial-run/``, marked. A run killed after the
commit is finished by the next run into ``out`` ([`recover`][tl_geometry.io.outdir.recover], called by [`prepare`][tl_geometry.io.outdir.prepare] under
the lock), so the directory holds the complete old report or the complete new one, never a mix
of their figures (``tests/unit/io/test_outdir_files.py`` kills a run at every step and checks).

Single output files (``--out report.json``, ``--figure``, ``--json``, ``--csv``) go through
[`check_out_file`][tl_geometry.io.outdir.check_out_file] before any work and [`write_file`][tl_geometry.io.outdir.write_file] / [`output_file`][tl_geometry.io.outdir.output_file] at the end:
an existing file is refused without ``force``, and the file appears whole (a temporary file
beside it, then one rename) or not at all. They, the output-path errors and the writability probe
are defined in [`tl_geometry.io.outfile`][tl_geometry.io.outfile] and re-exported here.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from tl_geometry.errors import InputError, WordsOSError, describe_os_error
from tl_geometry.io.outfile import (
    _PROBE_PREFIX,
    OutputExistsError,
    OutputNotWritableError,
    OutputPathError,
    atomic_write_text,
    check_figure_dir,
    check_out_file,
    check_writable,
    current_umask,
    output_file,
    write_file,
    write_files,
)

__all__ = [
    "LOCK_FILE",
    "WORK_DIR",
    "OutputExistsError",
    "OutputLockedError",
    "OutputNotWritableError",
    "OutputLock",
    "check_out_dir",
    "OutputPathError",
    "check_figure_dir",
    "check_out_file",
    "output_file",
    "check_writable",
    "recover",
    "write_file",
    "write_files",
    "prepare",
    "promote",
    "Staging",
    "atomic_write_text",
    "current_umask",
]
"""The public names; the output-file ones (``check_out_file``, ``write_file``, ...) are defined in
[`tl_geometry.io.outfile`][tl_geometry.io.outfile] and re-exported here."""

LOCK_FILE = ".tl-geometry.lock"
WORK_DIR = "partial-run"
_LAST = ("report.md", "index.html", "report.json")
"""Written last by [`promote`][tl_geometry.io.outdir.promote]: a reader that sees the new report.json sees every other new file."""


class OutputLockedError(WordsOSError, FileExistsError, InputError):
    """Another live process is writing a report into the same directory."""


def check_out_dir(out_dir: str | os.PathLike, *, force: bool = False, force_hint: str = "force=True") -> Path:
    """Refuse a non-empty existing ``out_dir`` unless ``force`` (call it before a long run).

    Args:
        force_hint: how the caller spells "force" in the message (``"--force"`` in the CLI).

    Raises:
        OutputExistsError: ``out_dir`` exists, is not empty, and ``force`` is false.
        NotADirectoryError: ``out_dir`` exists and is a file.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"output path {out} exists and is not a directory")
    if out.is_dir() and any(p.name != LOCK_FILE for p in out.iterdir()) and not force:
        unfinished = " (it holds an unfinished run in partial-run/)" if (out / WORK_DIR).exists() else ""
        raise OutputExistsError(
            f"output directory {out} already exists and is not empty{unfinished}; pass {force_hint} to "
            f"replace the report files in it (other files are never deleted)"
        )
    return out


def _clear_probes(out: Path) -> None:
    """Remove empty probe files a killed run left in ``out`` (only ours: by name, and empty)."""
    for p in out.glob(_PROBE_PREFIX + "*"):
        try:
            if p.is_file() and not p.is_symlink() and p.stat().st_size == 0:
                p.unlink(missing_ok=True)
        except OSError:
            pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _read_owner(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition("=")
        out[k.strip()] = v.strip()
    return out


class OutputLock:
    """``out/.tl-geometry.lock``: one report run (or render) per output directory.

    Acquire with ``with OutputLock(out):`` (or `acquire` / `release`). The file holds
    ``pid=``, ``host=`` and ``started=`` lines for the message a second run gets. Where
    ``fcntl`` exists the lock is an ``flock`` on the file (released by the kernel when the owner
    dies); elsewhere the pid is checked for liveness and a dead owner's lock is taken over.

    Raises:
        OutputLockedError: a live process holds the lock.
    """

    def __init__(self, out_dir: str | os.PathLike):
        self.path = Path(out_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> OutputLock:
        fcntl: ModuleType | None
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            fcntl = None
        for _ in range(20):
            if fcntl is None:  # pragma: no cover
                fd = self._acquire_by_pid()
            else:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    self._refuse()
                # The previous owner may have unlinked the file between our open and flock.
                try:
                    same = os.path.samestat(os.fstat(fd), os.stat(self.path))
                except FileNotFoundError:
                    same = False
                if not same:
                    os.close(fd)
                    continue
            text = f"pid={os.getpid()}\nhost={socket.gethostname()}\nstarted={time.strftime('%Y-%m-%dT%H:%M:%S')}\n"
            os.ftruncate(fd, 0)
            os.pwrite(fd, text.encode(), 0)
            self._fd = fd
            return self
        raise OutputLockedError(errno.EEXIST, f"could not take the lock {self.path} (it kept changing); try again")

    def _acquire_by_pid(self) -> int:  # pragma: no cover - used where fcntl is missing
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            owner = _read_owner(self.path)
            pid = owner.get("pid", "")
            if pid.isdigit() and _pid_alive(int(pid)) and owner.get("host") in (None, "", socket.gethostname()):
                self._refuse()
            self.path.unlink(missing_ok=True)  # a dead owner's lock: take it over
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)

    def _refuse(self):
        owner = _read_owner(self.path)
        who = f"pid {owner.get('pid', '?')}"
        if owner.get("host"):
            who += f" on {owner['host']}"
        if owner.get("started"):
            who += f", started {owner['started']}"
        raise self._busy(who)

    def _busy(self, who: str) -> OutputLockedError:
        """The error a second run gets (``who``: the owner's pid, host and start); a lock on
        something other than an output directory words it for its own object."""
        return OutputLockedError(
            errno.EEXIST,
            f"output directory {self.path.parent} is in use by another tl-geometry run ({who}); "
            f"wait for it to finish or choose another output directory",
        )

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # before unlocking: a waiter re-checks the inode
        finally:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def prepare(
    out_dir: str | os.PathLike, *, force: bool = False, force_hint: str = "force=True"
) -> tuple[Path, bool, OutputLock]:
    """Every check on ``out_dir`` that needs no model, then the lock; returns ``(out, created, lock)``.

    Checks (in order): not a file; writable; creates the directory (``created`` says whether it
    was made here, so a failed run can remove it again); takes the lock (a live owner is
    refused); finishes a committed promotion a killed run left ([`recover`][tl_geometry.io.outdir.recover]); empty or ``force``. On any refusal nothing is left behind.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"output path {out} exists and is not a directory")
    check_writable(out)
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputNotWritableError(
            exc.errno or errno.EACCES, f"cannot create output directory {out}: {describe_os_error(exc)}"
        ) from None
    lock = OutputLock(out)
    try:
        lock.acquire()
    except BaseException:
        cleanup_created(out, created)
        raise
    try:
        if recover(out):  # a killed run had committed its report: finish moving it in first
            import logging

            logging.getLogger(__name__).warning("%s: finished installing the report of an interrupted run", out)
        _clear_probes(out)
        check_out_dir(out, force=force, force_hint=force_hint)
    except BaseException:
        lock.release()
        cleanup_created(out, created)
        raise
    return out, created, lock


def new_work_dir(out: Path) -> Path:
    """A fresh, empty ``out/partial-run/`` (a previous unfinished run's is replaced). Hold the lock."""
    work = out / WORK_DIR
    if work.is_symlink() or work.is_file():
        work.unlink()
    elif work.exists():
        shutil.rmtree(work)
    work.mkdir()
    return work


MANIFEST = ".promote.json"
"""In the work directory: the list of moves and removals of a promotion (its commit record)."""


def promote(work: Path, out: Path, *, owned_figures: Iterable[str] = ()) -> list[str]:
    """Move every file of ``work`` into ``out`` (``report.json`` last) and remove ``work``: all or nothing.

    ``owned_figures`` are file names this package writes (the figure PNGs): those present in
    ``out`` but not in ``work`` belong to an older report and are removed, so no figure of an
    older run sits next to the new report. Any other file in ``out`` is kept.

    Two phases, so that a kill at any instant leaves the complete old report or (after
    [`recover`][tl_geometry.io.outdir.recover], which the next run into ``out`` calls under the lock) the complete new one:

    1. *commit*: the plan (files to move, stale figures to remove) is written atomically to
       ``work/.promote.json`` ([`MANIFEST`][tl_geometry.io.outdir.MANIFEST]). Until it exists nothing in ``out`` was touched:
       a killed run leaves the old report as it was.
    2. *roll forward*: the stale figures are removed and the files moved one ``os.replace`` at a
       time (``report.json`` last, so a reader of it sees the old one until every other file is
       new), then the manifest and ``work`` are removed. Each step can be repeated, so
       [`recover`][tl_geometry.io.outdir.recover] finishes a killed phase 2 from the manifest.

    Returns the names moved.
    """
    names = sorted(p.name for p in work.iterdir() if p.is_file() and not p.name.startswith("."))
    order = [n for n in names if n not in _LAST] + [n for n in _LAST if n in names]
    stale = sorted(n for n in set(owned_figures) - set(names) if (out / n).is_file())
    atomic_write_text(work / MANIFEST, json.dumps({"format": 1, "move": order, "remove": stale}))
    _roll_forward(work, out, order, stale)
    return order


def _roll_forward(work: Path, out: Path, move: list[str], remove: list[str]) -> None:
    for name in remove:
        (out / name).unlink(missing_ok=True)
    for name in move:
        if (work / name).exists():  # else moved before a kill
            os.replace(work / name, out / name)
    (work / MANIFEST).unlink(missing_ok=True)  # the promotion is complete
    shutil.rmtree(work, ignore_errors=True)


def _plain_names(value) -> list[str] | None:
    if not isinstance(value, list):
        return None
    ok = all(isinstance(n, str) and n and "/" not in n and "\\" not in n and not n.startswith(".") for n in value)
    return value if ok else None


def recover(out: str | os.PathLike) -> bool:
    """Finish a promotion that a killed run committed (``out/partial-run/.promote.json``); hold the lock.

    Returns whether there was one to finish. A work directory without a manifest (a run killed
    before its commit) is left for [`new_work_dir`][tl_geometry.io.outdir.new_work_dir] to replace; a manifest that is not a
    promotion plan of ours (not JSON, a name with a path separator) is ignored, nothing moved.
    """
    out = Path(out)
    work = out / WORK_DIR
    manifest = work / MANIFEST
    if work.is_symlink() or not manifest.is_file():
        return False
    try:
        plan = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    if not isinstance(plan, dict) or plan.get("format") != 1:
        return False
    move, remove = _plain_names(plan.get("move")), _plain_names(plan.get("remove"))
    if move is None or remove is None or not all(n.endswith(".png") for n in remove):
        return False
    _roll_forward(work, out, move, remove)
    return True


def cleanup_created(out: Path, created: bool) -> None:
    """Remove ``out`` again when this run created it and left nothing in it."""
    if created:
        try:
            out.rmdir()
        except OSError:
            pass


class Staging:
    """The output-directory protocol, written once: [`prepare`][tl_geometry.io.outdir.prepare] (checks and the lock, on
    construction: call it before any expensive work) → [`start`][tl_geometry.io.outdir.Staging.start] (a fresh work
    directory) → [`finish`][tl_geometry.io.outdir.Staging.finish] (promote it into ``out``) → [`close`][tl_geometry.io.outdir.Staging.close] (release).

    Use it as ``with Staging(out, ...) as run:``; leaving the block without `finish` (an error)
    cleans up: the work directory is removed (kept when ``keep_unfinished`` and it holds files:
    a report run's partial results, marked) and ``out`` too when this run created it and it is
    empty. [`interrupted`][tl_geometry.io.outdir.Staging.interrupted] ends an interrupted run instead.

    Args:
        out_dir: the output directory.
        force, force_hint: see [`prepare`][tl_geometry.io.outdir.prepare].
        owned_figures: the figure files this package writes (see [`promote`][tl_geometry.io.outdir.promote]).
        keep_unfinished: keep a non-empty work directory of an unfinished run.
    """

    def __init__(
        self,
        out_dir: str | os.PathLike,
        *,
        force: bool = False,
        force_hint: str = "force=True",
        owned_figures: Iterable[str] = (),
        keep_unfinished: bool = False,
    ):
        self.out, self.created, self.lock = prepare(out_dir, force=force, force_hint=force_hint)
        self.owned = tuple(owned_figures)
        self.keep_unfinished = keep_unfinished
        self.work: Path | None = None
        self.done = False

    def start(self) -> Path:
        """A fresh, empty work directory (``out/partial-run/``) to write into; returns it."""
        self.work = self.out / WORK_DIR
        self.work = new_work_dir(self.out)
        return self.work

    def finish(self) -> list[str]:
        """Install the work directory's files into ``out`` as a whole ([`promote`][tl_geometry.io.outdir.promote])."""
        if self.work is None:
            raise RuntimeError("Staging.finish() before start()")
        moved = promote(self.work, self.out, owned_figures=self.owned)
        self.done = True
        return moved

    def interrupted(self) -> bool:
        """End an interrupted run whose partial files (marked) are in the work directory: into
        ``out`` when it held no report (returns True), else kept in the work directory and the
        previous report left as it was (returns False)."""
        self.done = True  # what was computed is on disk: nothing is removed
        if self.work is None or (self.out / "report.json").exists():
            return False
        promote(self.work, self.out, owned_figures=self.owned)
        return True

    def close(self) -> None:
        """Release the lock, after cleaning up a run that did not finish."""
        try:
            if not self.done and self.work is not None:
                if not self.keep_unfinished:
                    shutil.rmtree(self.work, ignore_errors=True)
                elif self.work.is_dir() and not any(self.work.iterdir()):
                    self.work.rmdir()
        finally:
            self.lock.release()
            if not self.done and (self.work is None or not self.work.exists()):
                cleanup_created(self.out, self.created)

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
