"""Output directories of reports: the writability check, the lock and the swap.

A report never writes its files straight over the ones a person may be reading:

1. [`prepare`][tl_geometry.outdir.prepare] checks the directory *before any expensive work*: not a file, empty or
   ``force``, writable (a probe file is created and removed).
2. [`OutputLock`][tl_geometry.outdir.OutputLock] holds ``out/.tl-geometry.lock`` (an ``fcntl.flock`` lock holding the
   owner's pid) for the whole run, so a second run into the same directory is refused with the
   owner's pid. The kernel drops the lock when its process dies, even by ``SIGKILL``, so a
   lock left by a dead process is taken over without asking.
3. The run writes into the work directory ``out/partial-run/`` (`WORK_DIR`), marked as
   unfinished in every file, after each metric.
4. [`promote`][tl_geometry.outdir.promote] installs the finished files as a whole, in two phases: it commits by
   writing the plan (files to move, our stale figures to remove) atomically to
   ``out/partial-run/.promote.json``, then removes our figures that the new report no longer
   draws, moves the files into ``out`` one ``os.replace`` at a time (``report.json`` last) and
   removes the work directory. Other files in ``out`` are never touched.

A run that stops before the commit (interrupted, killed) leaves the previous report in ``out``
exactly as it was; its own results stay in ``out/partial-run/``, marked. A run killed after the
commit is finished by the next run into ``out`` ([`recover`][tl_geometry.outdir.recover], called by [`prepare`][tl_geometry.outdir.prepare] under
the lock), so the directory holds the complete old report or the complete new one, never a mix
of their figures (``tests/unit/test_outdir_files.py`` kills a run at every step and checks).

Single output files (``--out report.json``, ``--figure``, ``--json``, ``--csv``) go through
[`check_out_file`][tl_geometry.outdir.check_out_file] before any work and [`write_file`][tl_geometry.outdir.write_file] / [`output_file`][tl_geometry.outdir.output_file] at the end:
an existing file is refused without ``force``, and the file appears whole (a temporary file
beside it, then one rename) or not at all.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from tl_geometry.errors import InputError, WordsOSError, describe_os_error

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
]

LOCK_FILE = ".tl-geometry.lock"
WORK_DIR = "partial-run"
_LAST = ("report.md", "index.html", "report.json")
"""Written last by [`promote`][tl_geometry.outdir.promote]: a reader that sees the new report.json sees every other new file."""


class OutputExistsError(WordsOSError, FileExistsError, InputError):
    """The output directory exists and is not empty; pass ``force=True`` (``--force``) to write into it.

    A [`InputError`][tl_geometry.errors.InputError] (so a ``ValueError``) too: the CLI reports it as a
    bad argument (exit code 2).
    """


class OutputNotWritableError(WordsOSError, PermissionError, InputError):
    """The output directory (or the folder it would be created in) cannot be written."""


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


def _probe(folder: Path) -> None:
    """Create and remove a file in ``folder`` (os.access is wrong for root, ACLs, read-only mounts)."""
    fd, tmp = _mkstemp(folder)
    os.close(fd)
    Path(tmp).unlink(missing_ok=True)  # (a run holding the lock may have cleared a probe)


_PROBE_PREFIX = ".tl-geometry-probe."


def _clear_probes(out: Path) -> None:
    """Remove empty probe files a killed run left in ``out`` (only ours: by name, and empty)."""
    for p in out.glob(_PROBE_PREFIX + "*"):
        try:
            if p.is_file() and not p.is_symlink() and p.stat().st_size == 0:
                p.unlink(missing_ok=True)
        except OSError:
            pass


def _mkstemp(folder: Path):
    import tempfile

    return tempfile.mkstemp(dir=folder, prefix=_PROBE_PREFIX)


def check_writable(out_dir: str | os.PathLike) -> Path:
    """Raise [`OutputNotWritableError`][tl_geometry.outdir.OutputNotWritableError] unless files can be created in ``out_dir``.

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
        raise OutputPathError(f"output path {out}: {folder} exists and is not a directory (a file, not a folder)")
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
            f"cannot write to the {what}: {describe_os_error(exc)}; choose another --out / out= or fix its permissions",
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
    refused); finishes a committed promotion a killed run left ([`recover`][tl_geometry.outdir.recover]); empty or ``force``. On any refusal nothing is left behind.
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
    [`recover`][tl_geometry.outdir.recover], which the next run into ``out`` calls under the lock) the complete new one:

    1. *commit*: the plan (files to move, stale figures to remove) is written atomically to
       ``work/.promote.json`` ([`MANIFEST`][tl_geometry.outdir.MANIFEST]). Until it exists nothing in ``out`` was touched:
       a killed run leaves the old report as it was.
    2. *roll forward*: the stale figures are removed and the files moved one ``os.replace`` at a
       time (``report.json`` last, so a reader of it sees the old one until every other file is
       new), then the manifest and ``work`` are removed. Each step can be repeated, so
       [`recover`][tl_geometry.outdir.recover] finishes a killed phase 2 from the manifest.

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
    before its commit) is left for [`new_work_dir`][tl_geometry.outdir.new_work_dir] to replace; a manifest that is not a
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


# ---------------------------------------------------------------------------------------------
# Single output files (--out FILE, --figure FILE, --json FILE, --csv FILE)


def _nearest_existing(path: Path) -> Path:
    folder = path
    while not os.path.lexists(folder):
        if folder.parent == folder:
            break
        folder = folder.parent
    return folder


def check_out_file(
    path: str | os.PathLike,
    *,
    force: bool = False,
    force_hint: str = "--force",
    what: str = "output file",
    exists_ok: bool = False,
) -> Path:
    """Every check on an output file that needs no work; call it before anything expensive.

    Refused: ``path`` is a directory or another non-regular file (a device, a pipe); ``path``
    exists and neither ``force`` nor ``exists_ok`` (a resumable results file) is given; a
    folder on the way is a file; the folder it goes into (or the nearest existing one, where
    missing folders would be created) cannot be written (a probe file is created and removed).
    Nothing is created or changed.

    Raises:
        OutputExistsError: the file exists (pass ``force_hint``).
        OutputPathError: a directory where a file is wanted, or a file where a folder is.
        OutputNotWritableError: the folder cannot be written.
    """
    out = Path(path)
    if str(path) == "" or out.name in ("", ".", ".."):
        raise OutputPathError(f"{what} {str(path)!r} is not a file name")
    if out.is_dir():
        raise OutputPathError(f"{what} {out} is a directory; give a file path (e.g. {out / 'out.json'})")
    if os.path.lexists(out):
        if out.exists() and not out.is_file():
            raise OutputPathError(f"{what} {out} exists and is not a regular file; give another path")
        if not (force or exists_ok):
            raise OutputExistsError(
                errno.EEXIST, f"{what} {out} already exists; pass {force_hint} to replace it, or choose another path"
            )
    folder = _nearest_existing(out.parent)
    if not folder.is_dir():
        raise OutputPathError(f"{what} {out}: {folder} is a file, not a folder")
    try:
        _probe(folder)
    except OSError as exc:
        where = f"the folder {folder}" + ("" if folder == out.parent else f" (where {out.parent} would be created)")
        raise OutputNotWritableError(
            exc.errno or errno.EACCES, f"cannot write the {what} {out}: {where}: {describe_os_error(exc)}"
        ) from None
    return out


class OutputPathError(WordsOSError, NotADirectoryError, InputError):
    """An output path of the wrong kind: a directory where a file is wanted, a file where a folder is."""


def _temp_for(path: Path):
    """A new empty temporary file beside ``path`` whose name ends in ``path.name`` (so its suffix,
    which matplotlib reads as the format, is the same); mode as ``open(path, "w")`` would give."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tl-geometry-tmp.", suffix=f".{path.name}")
    os.chmod(tmp, 0o666 & ~current_umask())
    return fd, Path(tmp)


def _install(tmp: Path, path: Path, *, force: bool, what: str, force_hint: str) -> None:
    """Put the finished ``tmp`` at ``path``: replace (``force``) or link without replacing."""
    if force:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # fails if path appeared meanwhile: never replaces a file
    except FileExistsError:
        raise OutputExistsError(
            errno.EEXIST, f"{what} {path} already exists; pass {force_hint} to replace it, or choose another path"
        ) from None
    except OSError:  # a file system without hard links
        if os.path.lexists(path):
            raise OutputExistsError(
                errno.EEXIST, f"{what} {path} already exists; pass {force_hint} to replace it, or choose another path"
            ) from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


def _writing_error(exc: OSError, path: Path, what: str) -> OutputNotWritableError:
    return OutputNotWritableError(exc.errno or errno.EIO, f"cannot write the {what} {path}: {describe_os_error(exc)}")


def write_file(
    path: str | os.PathLike,
    data: str | bytes,
    *,
    force: bool = False,
    what: str = "output file",
    force_hint: str = "--force",
) -> Path:
    """Write ``data`` to ``path`` atomically: a temporary file beside it, then one rename.

    Without ``force`` an existing file is never replaced (even one that appears while writing);
    missing folders are created. Errors say what happened in words, with ``path`` (never the
    temporary name); the temporary file is removed on any failure.
    """
    with output_file(path, force=force, what=what, force_hint=force_hint) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)


class output_file:
    """``with output_file(path, force=...) as tmp:`` write ``tmp`` (any way: ``savefig``,
    ``to_csv``, ...); on a clean exit it becomes ``path`` atomically (see [`write_file`][tl_geometry.outdir.write_file]).

    The checks of [`check_out_file`][tl_geometry.outdir.check_out_file] run on entry; an exception inside the block removes
    the temporary file and leaves ``path`` as it was.
    """

    def __init__(
        self, path: str | os.PathLike, *, force: bool = False, what: str = "output file", force_hint="--force"
    ):
        self.path = Path(path)
        self.force, self.what, self.force_hint = force, what, force_hint
        self.tmp: Path | None = None

    def __enter__(self) -> Path:
        check_out_file(self.path, force=self.force, what=self.what, force_hint=self.force_hint)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, self.tmp = _temp_for(self.path)
            os.close(fd)
        except OSError as exc:
            raise _writing_error(exc, self.path, self.what) from None
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        tmp, self.tmp = self.tmp, None
        assert tmp is not None
        try:
            if exc_type is None:
                try:
                    _install(tmp, self.path, force=self.force, what=self.what, force_hint=self.force_hint)
                except OutputExistsError:
                    raise
                except OSError as err:
                    raise _writing_error(err, self.path, self.what) from None
        finally:
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, InputError):
            raise _writing_error(exc, self.path, self.what) from None


def check_figure_dir(
    folder: str | os.PathLike, names: Iterable[str], *, force: bool = False, force_hint: str = "--force"
) -> Path:
    """Checks for writing the files ``names`` into ``folder`` (created if missing): not a file,
    writable, and none of ``names`` there already unless ``force``."""
    out = Path(folder)
    if os.path.lexists(out) and not out.is_dir():
        raise OutputPathError(f"figure folder {out} exists and is not a folder")
    there = sorted(n for n in names if os.path.lexists(out / n))
    if there and not force:
        shown = ", ".join(there[:4]) + (f" and {len(there) - 4} more" if len(there) > 4 else "")
        raise OutputExistsError(
            errno.EEXIST, f"{out} already holds {shown}; pass {force_hint} to replace them, or choose another folder"
        )
    try:
        check_writable(out)
    except NotADirectoryError as exc:
        raise OutputPathError(str(exc)) from None
    return out


def write_files(folder: str | os.PathLike, draw, *, force: bool = False, force_hint: str = "--force") -> dict:
    """Draw files into a temporary folder inside ``folder`` with ``draw(tmp_folder) -> {key: path}``,
    then move each into ``folder`` (replacing only with ``force``); returns ``{key: final path}``."""
    import tempfile

    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out, prefix=".tl-geometry-tmp."))
    except OSError as exc:
        raise _writing_error(exc, out, "figure folder") from None
    try:
        drawn = draw(tmp)
        final = {}
        for key, p in drawn.items():
            dest = out / Path(p).name
            try:
                _install(Path(p), dest, force=force, what="figure", force_hint=force_hint)
            except OutputExistsError:
                raise
            except OSError as exc:
                raise _writing_error(exc, dest, "figure") from None
            final[key] = dest
        return final
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically: a unique temp file in the same folder, then rename.

    A reader (or a crash) sees the old file or the new one, never half of one. Shared by the
    report, the HTML/markdown outputs and the results-file repair. The file gets the mode a
    plain ``open(path, "w")`` would give (0666 less the umask), not the temp file's 0600.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~current_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def current_umask() -> int:
    """The process umask, read without changing it where Linux allows (``/proc/self/status``)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: read it by setting it, then put it back at once
    os.umask(mask)
    return mask
