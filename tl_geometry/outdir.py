"""Output directories of reports: the writability check, the lock and the swap.

A report never writes its files straight over the ones a person may be reading:

1. :func:`prepare` checks the directory *before any expensive work*: not a file, empty or
   ``force``, writable (a probe file is created and removed).
2. :class:`OutputLock` holds ``out/.tl-geometry.lock`` (an ``fcntl.flock`` lock holding the
   owner's pid) for the whole run, so a second run into the same directory is refused with the
   owner's pid. The kernel drops the lock when its process dies, even by ``SIGKILL``, so a
   lock left by a dead process is taken over without asking.
3. The run writes into the work directory ``out/partial-run/`` (:data:`WORK_DIR`), marked as
   unfinished in every file, after each metric.
4. :func:`promote` moves the finished files into ``out`` one ``os.replace`` at a time,
   ``report.json`` last, removes our figures that the new report no longer draws, and removes
   the work directory. Other files in ``out`` are never touched.

A run that stops before step 4 (interrupted, killed) leaves the previous report in ``out``
exactly as it was; its own results stay in ``out/partial-run/``, marked.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from tl_geometry.errors import InputError

__all__ = [
    "LOCK_FILE",
    "WORK_DIR",
    "OutputExistsError",
    "OutputLockedError",
    "OutputNotWritableError",
    "OutputLock",
    "check_out_dir",
    "check_writable",
    "prepare",
    "promote",
]

LOCK_FILE = ".tl-geometry.lock"
WORK_DIR = "partial-run"
#: Written last by :func:`promote`: a reader that sees the new report.json sees every other new file.
_LAST = ("report.md", "index.html", "report.json")


class OutputExistsError(FileExistsError, InputError):
    """The output directory exists and is not empty; pass ``force=True`` (``--force``) to write into it.

    A :class:`~tl_geometry.errors.InputError` (so a ``ValueError``) too: the CLI reports it as a
    bad argument (exit code 2).
    """


class OutputNotWritableError(PermissionError, InputError):
    """The output directory (or the folder it would be created in) cannot be written."""


class OutputLockedError(FileExistsError, InputError):
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


def _probe(folder: Path) -> None:
    """Create and remove a file in ``folder`` (os.access is wrong for root, ACLs, read-only mounts)."""
    fd, tmp = _mkstemp(folder)
    os.close(fd)
    os.unlink(tmp)


def _mkstemp(folder: Path):
    import tempfile

    return tempfile.mkstemp(dir=folder, prefix=".tl-geometry-probe.")


def check_writable(out_dir: str | os.PathLike) -> Path:
    """Raise :class:`OutputNotWritableError` unless files can be created in ``out_dir``.

    When ``out_dir`` does not exist yet, its nearest existing parent must be a writable folder.
    Nothing is left behind.
    """
    out = Path(out_dir)
    folder = out
    while not folder.exists():
        if folder.parent == folder:
            break
        folder = folder.parent
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"output path {out}: {folder} exists and is not a directory")
    try:
        _probe(folder)
    except OSError as exc:
        what = (
            "output directory"
            if folder == out
            else f"folder {folder} (where the output directory {out} would be created)"
        )
        raise OutputNotWritableError(
            exc.errno or errno.EACCES,
            f"cannot write to the {what}: {exc.strerror or exc}; choose another --out / out= or fix its permissions",
        ) from None
    return out


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

    Acquire with ``with OutputLock(out):`` (or :meth:`acquire` / :meth:`release`). The file holds
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
        raise OutputLockedError(
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
    refused); empty or ``force``. On any refusal nothing is left behind.
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
            exc.errno or errno.EACCES, f"cannot create output directory {out}: {exc.strerror or exc}"
        ) from None
    lock = OutputLock(out)
    try:
        lock.acquire()
    except BaseException:
        cleanup_created(out, created)
        raise
    try:
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


def promote(work: Path, out: Path, *, owned_figures: Iterable[str] = ()) -> list[str]:
    """Move every file of ``work`` into ``out`` (``report.json`` last) and remove ``work``.

    ``owned_figures`` are file names this package writes (the figure PNGs): those present in
    ``out`` but not in ``work`` belong to an older report and are removed, so no figure of an
    older run sits next to the new report. Any other file in ``out`` is kept.

    Returns the names moved.
    """
    names = sorted(p.name for p in work.iterdir() if p.is_file() and not p.name.startswith("."))
    order = [n for n in names if n not in _LAST] + [n for n in _LAST if n in names]
    for stale in sorted(set(owned_figures) - set(names)):
        (out / stale).unlink(missing_ok=True)
    for name in order:
        os.replace(work / name, out / name)
    shutil.rmtree(work, ignore_errors=True)
    return order


def cleanup_created(out: Path, created: bool) -> None:
    """Remove ``out`` again when this run created it and left nothing in it."""
    if created:
        try:
            out.rmdir()
        except OSError:
            pass
