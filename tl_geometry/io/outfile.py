"""Output files: every check before any work, then an atomic write (the file appears whole or not at all).

Single output files (``--out report.json``, ``--figure``, ``--json``, ``--csv``) go through
[`check_out_file`][tl_geometry.io.outdir.check_out_file] before any work and [`write_file`][tl_geometry.io.outdir.write_file] /
[`output_file`][tl_geometry.io.outdir.output_file] at the end: an existing file is refused without ``force``, and the
file appears whole (a temporary file beside it, then one rename) or not at all. A set of figures
goes through [`check_figure_dir`][tl_geometry.io.outdir.check_figure_dir] and [`write_files`][tl_geometry.io.outdir.write_files];
[`atomic_write_text`][tl_geometry.io.outdir.atomic_write_text] is the plain atomic write the report files use.

The errors of the output paths and the writability probe ([`check_writable`][tl_geometry.io.outdir.check_writable]: a
file is created and removed, as ``os.access`` is wrong for root, ACLs and read-only mounts) live
here too: the output directories of [`tl_geometry.io.outdir`][tl_geometry.io.outdir] (the lock and the swap)
build on them, and it re-exports every public name of this module.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from tl_geometry.errors import InputError, WordsOSError, describe_os_error

__all__ = [
    "OutputExistsError",
    "OutputNotWritableError",
    "OutputPathError",
    "atomic_write_text",
    "check_figure_dir",
    "check_out_file",
    "check_writable",
    "current_umask",
    "output_file",
    "write_file",
    "write_files",
]


class OutputExistsError(WordsOSError, FileExistsError, InputError):
    """The output directory exists and is not empty; pass ``force=True`` (``--force``) to write into it.

    A [`InputError`][tl_geometry.errors.InputError] (so a ``ValueError``) too: the CLI reports it as a
    bad argument (exit code 2).
    """


class OutputNotWritableError(WordsOSError, PermissionError, InputError):
    """The output directory (or the folder it would be created in) cannot be written."""


class OutputPathError(WordsOSError, NotADirectoryError, InputError):
    """An output path of the wrong kind: a directory where a file is wanted, a file where a folder is."""


def _probe(folder: Path) -> None:
    """Create and remove a file in ``folder`` (os.access is wrong for root, ACLs, read-only mounts)."""
    fd, tmp = _mkstemp(folder)
    os.close(fd)
    Path(tmp).unlink(missing_ok=True)  # (a run holding the lock may have cleared a probe)


_PROBE_PREFIX = ".tl-geometry-probe."


def _mkstemp(folder: Path):
    import tempfile

    return tempfile.mkstemp(dir=folder, prefix=_PROBE_PREFIX)


def check_writable(out_dir: str | os.PathLike) -> Path:
    """Raise [`OutputNotWritableError`][tl_geometry.io.outdir.OutputNotWritableError] unless files can be created in ``out_dir``.

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
    ``to_csv``, ...); on a clean exit it becomes ``path`` atomically (see [`write_file`][tl_geometry.io.outdir.write_file]).

    The checks of [`check_out_file`][tl_geometry.io.outdir.check_out_file] run on entry; an exception inside the block removes
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
