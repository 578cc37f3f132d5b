"""CLI sub-commands. Each module defines ``add_parser(subparsers)``; :mod:`tl_geometry.cli`
discovers them all, so a family adds its command without touching cli.py."""
