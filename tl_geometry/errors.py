"""The exceptions tl_geometry raises on purpose.

Every error the library raises for a reason it can name is a :class:`TLGeometryError`, so a
caller (and the ``tl-geometry`` command line, which turns exactly these into exit status 2 with
a one-line reason) can tell "you asked for something that cannot be done" from a bug. Each
family also keeps the built-in base callers already catch:

- :class:`InputError` — a bad argument or input (a shape, a range, an unknown option value); the
  message says what was wrong and what is accepted. Also a ``ValueError``.
- :class:`UnknownNameError` — an unknown metric, model, release or published-table name; the
  message lists close matches. Also a ``KeyError``, whose ``str()`` here is the plain message
  (not the repr-quoted key a bare ``KeyError`` prints).
- :class:`InputTypeError` — an argument of the wrong type. Also a ``TypeError``.

Other named errors (``ModelNotAvailableError``, ``CorruptFileError``, ``CorpusDecodeError``,
``OutputExistsError``, ``HubUnavailableError``, ...) live next to the code that raises them and
derive from :class:`TLGeometryError` too. Anything else escaping the library (a ``RuntimeError``,
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

__all__ = ["TLGeometryError", "InputError", "UnknownNameError", "InputTypeError"]


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
