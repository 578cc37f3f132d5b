"""``tl-geometry`` command line.

Shared sub-commands live in [`tl_geometry.commands`][tl_geometry.commands] (one module each, ``add_parser(subparsers)``);
a family's own command lives in its folder and is declared (``FamilySpec.command``, e.g.
``tl_geometry.families.capacity.cli``). Both are discovered here, so a family (a plugin too) adds its
command without touching this file.
Bad arguments (a [`TLGeometryError`][tl_geometry.errors.TLGeometryError], or a path that is missing, exists
or cannot be written) exit with status 2 and a one-line reason; any other exception is a bug and
propagates with its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
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


def main(argv: list[str] | None = None) -> int:
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
    except KeyboardInterrupt:
        print(f"tl-geometry {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
