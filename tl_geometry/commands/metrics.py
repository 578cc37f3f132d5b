"""``tl-geometry metrics``: list registered metrics (built-ins and plugins)."""

from __future__ import annotations


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("metrics", help="list registered metrics (built-ins and plugins)")
    p.set_defaults(func=run)


def run(args) -> int:
    from tl_geometry.registry import metric_specs

    for spec in metric_specs():
        origin = "built-in" if spec.builtin else f"plugin {spec.source}"
        print(f"{spec.name:24s} {spec.needs:12s} {origin:20s} {spec.description}")
    return 0
