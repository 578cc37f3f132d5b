"""CLI sub-commands. Each module defines ``add_parser(subparsers)``; [`tl_geometry.cli`][tl_geometry.cli]
discovers them all, so a family adds its command without touching cli.py."""
