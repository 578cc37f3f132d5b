"""``tl-geometry`` command line.

Shared sub-commands live in [`tl_geometry.commands`][tl_geometry.commands] (one module each, ``add_parser(subparsers)``);
a family's own command lives in its folder and is declared (``FamilySpec.command``, e.g.
``tl_geometry.families.capacity.cli``). Both are discovered here, so a family (a plugin too) adds its
command without touching this file.
Bad arguments (a [`TLGeometryError`][tl_geometry.errors.TLGeometryError], or a path that is missing, exists
or cannot be written) exit with status 2 and a one-line reason; any other exception is a bug and
propagates with its traceback. The machine's faults are one line too, never a traceback: a full
disk or quota (exit status 1), a name too long or a read-only file system (2), a closed pipe
(``| head``: quiet, 141), Ctrl-C (130) and SIGTERM (143) at any moment, start-up included — a
signal takes the same path as Ctrl-C, so a report's lock and ``partial-run/`` are cleaned up.
An output stream that cannot encode a character (``PYTHONIOENCODING=ascii``) prints an escape
instead, never losing a finished run.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import os
import pkgutil
import signal
import sys

EXIT_USAGE = 2
"""Exit status for a usage error: a [`TLGeometryError`][tl_geometry.errors.TLGeometryError] or a path problem."""
PATH_ERRORS: tuple[type[OSError], ...] = (
    FileNotFoundError,
    FileExistsError,
    NotADirectoryError,
    IsADirectoryError,
    PermissionError,
)
"""Path problems the user fixes (a missing input, an existing or unwritable output); exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    import tl_geometry
    from tl_geometry import commands

    parser = argparse.ArgumentParser(
        prog="tl-geometry",
        description="Geometry of a TransformerLens model's latent space (capacity, Subspace PGA, AGOP/AOFE).",
    )
    parser.add_argument("--version", action="version", version=f"tl-geometry {tl_geometry.__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more (-v info, -vv debug)")
    from tl_geometry import registry

    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    found = {info.name: f"tl_geometry.commands.{info.name}" for info in pkgutil.iter_modules(commands.__path__)}
    found.update({fam.name: fam.command for fam in registry.families() if fam.command})  # declared by a family
    for name in sorted(found):
        if name.startswith("_"):
            continue
        module = importlib.import_module(found[name])
        if hasattr(module, "add_parser"):
            module.add_parser(sub)
    return parser


#: errno -> exit status of the machine's faults: one line each, never a traceback.
OS_FAULTS = {
    errno.ENOSPC: 1,
    errno.EDQUOT: 1,
    errno.EFBIG: 1,
    errno.EIO: 1,
    errno.EMFILE: 1,
    errno.ENAMETOOLONG: EXIT_USAGE,
    errno.EROFS: EXIT_USAGE,
    errno.ELOOP: EXIT_USAGE,
}


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is, so that the cleanup of Ctrl-C runs (a report's lock
    and ``partial-run/`` removed, the previous report kept)."""


def _on_sigterm(signum, frame):  # pragma: no cover - exercised in a subprocess test
    raise _Terminated()


def _encodable_streams() -> None:
    """Let stdout / stderr write what their encoding cannot (``PYTHONIOENCODING=ascii``: ε) as an
    escape instead of raising after the work is done."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", "strict") == "strict":
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # pragma: no cover - a stream that cannot be changed
                pass


def _quiet_stdout() -> None:
    """After stdout failed (closed pipe, full device): point it at /dev/null, so the interpreter's
    final flush does not print a second error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # pragma: no cover
        pass


def main(argv: list[str] | None = None) -> int:
    """The ``tl-geometry`` entry point: returns the exit status (see the module docstring)."""
    _encodable_streams()
    previous = None
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread (a test calling main from a thread): leave signals alone
        pass
    try:
        try:
            status = _main(argv)
            sys.stdout.flush()  # a full device or a closed pipe shows here, inside the handlers
            return status
        except KeyboardInterrupt as exc:  # start-up (imports) or a command that did not catch it
            what = "terminated" if isinstance(exc, _Terminated) else "interrupted"
            print(f"tl-geometry: {what}", file=sys.stderr)
            return 143 if isinstance(exc, _Terminated) else 130
        except BrokenPipeError:  # `tl-geometry ... | head`: the reader left; nothing to say
            _quiet_stdout()
            return 141
        except OSError as exc:
            if exc.errno not in OS_FAULTS:
                raise
            from tl_geometry.errors import describe_os_error

            if exc.errno == errno.ENOSPC and exc.filename is None:
                _quiet_stdout()  # stdout itself (`> /dev/full`)
            print(f"tl-geometry: error: {' '.join(describe_os_error(exc).split())}", file=sys.stderr)
            return OS_FAULTS[exc.errno]
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    from tl_geometry.errors import TLGeometryError, describe_os_error
    from tl_geometry.runtime.threads import using_threads

    usage_errors: tuple[type[Exception], ...] = (TLGeometryError, *PATH_ERRORS)
    try:
        with using_threads(getattr(args, "threads", None)):  # --threads of report / pga / agop
            return int(args.func(args) or 0)
    except usage_errors as exc:
        # Only the library's own errors and path problems are the user's to fix; anything else
        # (a RuntimeError, an AssertionError, a bare ValueError from a dependency) is a bug and
        # propagates with its traceback (exit status 1) instead of passing for a usage error.
        # an OSError in words with its path ("data.txt: it does not exist"), never "[Errno 2] ..."
        text = describe_os_error(exc) if isinstance(exc, OSError) else str(exc)
        print(f"tl-geometry {args.command}: error: {' '.join(text.split())}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        what = "terminated" if isinstance(exc, _Terminated) else "interrupted"
        print(f"tl-geometry {args.command}: {what}", file=sys.stderr)
        return 143 if isinstance(exc, _Terminated) else 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
