"""The exceptions tl_geometry raises on purpose.

Every error the library raises for a reason it can name is a [`TLGeometryError`][tl_geometry.errors.TLGeometryError], so a
caller (and the ``tl-geometry`` command line, which turns exactly these into exit status 2 with
a one-line reason) can tell "you asked for something that cannot be done" from a bug. Each
family also keeps the built-in base callers already catch:

- [`InputError`][tl_geometry.errors.InputError] — a bad argument or input (a shape, a range, an unknown option value); the
  message says what was wrong and what is accepted. Also a ``ValueError``.
- [`UnknownNameError`][tl_geometry.errors.UnknownNameError] — an unknown metric, model, release or published-table name; the
  message lists close matches. Also a ``KeyError``, whose ``str()`` here is the plain message
  (not the repr-quoted key a bare ``KeyError`` prints).
- [`InputTypeError`][tl_geometry.errors.InputTypeError] — an argument of the wrong type. Also a ``TypeError``.

Other named errors (``ModelNotAvailableError``, ``CorruptFileError``, ``CorpusDecodeError``,
``OutputExistsError``, ``HubUnavailableError``, ...) live next to the code that raises them and
derive from [`TLGeometryError`][tl_geometry.errors.TLGeometryError] too. Anything else escaping the library (a ``RuntimeError``,
an ``AssertionError``, ...) is a bug: please report it.

Examples:
    >>> from tl_geometry.errors import InputError, TLGeometryError
    >>> try:
    ...     raise InputError("k must be >= 1, got 0")
    ... except ValueError as exc:  # old-style handlers keep working
    ...     isinstance(exc, TLGeometryError), str(exc)
    (True, 'k must be >= 1, got 0')
    >>> str(UnknownNameError("unknown metric 'pgaa'; close matches: ['pga']"))
    "unknown metric 'pgaa'; close matches: ['pga']"
"""

from __future__ import annotations

import errno as _errno

__all__ = ["TLGeometryError", "InputError", "UnknownNameError", "InputTypeError", "describe_os_error"]


class TLGeometryError(Exception):
    """Base of every error tl_geometry raises deliberately (a usage or data problem, not a bug)."""


class InputError(TLGeometryError, ValueError):
    """A bad argument or input: the message names what was wrong and what is accepted."""


class UnknownNameError(TLGeometryError, KeyError):
    """An unknown metric / model / release / table name; the message lists close matches.

    ``str()`` is the message itself: ``KeyError.__str__`` would print its repr, in quotes.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class InputTypeError(TLGeometryError, TypeError):
    """An argument of the wrong type (the message names the accepted types)."""


_OS_WORDS = {
    _errno.ENOENT: "it does not exist",
    _errno.EEXIST: "it already exists",
    _errno.EACCES: "permission denied",
    _errno.EPERM: "the operation is not permitted (permissions, a read-only or special file system)",
    _errno.ENOTDIR: "a part of the path is a file, not a folder",
    _errno.EISDIR: "it is a directory",
    _errno.EROFS: "the file system is read-only",
    _errno.ENOSPC: "the disk is full",
    _errno.EDQUOT: "the disk quota is exceeded",
    _errno.ENAMETOOLONG: "the name is too long",
    _errno.EXDEV: "it is on another file system",
    _errno.ENOTEMPTY: "the folder is not empty",
    _errno.EBUSY: "it is in use",
}
"""Plain words for the errors a file operation meets (instead of ``[Errno N] ...``)."""


def describe_os_error(exc: OSError) -> str:
    """An ``OSError`` in words, without the ``[Errno N]`` prefix or a temporary file's name.

    Our own ``OSError`` subclasses (whose ``str`` is already a sentence) are returned as they are.

    Examples:
        >>> import errno
        >>> describe_os_error(PermissionError(errno.EACCES, "Permission denied", "/x/.f.123.tmp"))
        'permission denied'
        >>> describe_os_error(FileNotFoundError(errno.ENOENT, "No such file or directory", "data.txt"))
        'data.txt: it does not exist'
    """
    if isinstance(exc, TLGeometryError):
        return str(exc)
    words = _OS_WORDS.get(exc.errno) if exc.errno is not None else None
    if words is None:
        words = (exc.strerror or str(exc) or type(exc).__name__).strip()
        words = words[:1].lower() + words[1:]
    name = exc.filename
    if name is not None and not _is_temporary(str(name)):
        return f"{name}: {words}"
    return words


def _is_temporary(name: str) -> bool:
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    return base.startswith(".") and (base.endswith(".tmp") or ".tl-geometry" in base)


class WordsOSError(TLGeometryError, OSError):
    """A file problem: an ``OSError`` whose ``str`` is its message alone (no ``[Errno N]`` prefix; ``errno`` is
    kept). The base of the output-path errors of [`tl_geometry.io.outdir`][tl_geometry.io.outdir]."""

    def __str__(self) -> str:
        return self.strerror if self.errno is not None and self.strerror else super().__str__()
