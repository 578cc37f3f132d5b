"""Cost of rendering a report: write_outputs (JSON + markdown + PNGs + index.html) for a
SmolLM2-sized report (30 layers, CCR 0/1/5, every family), against the plain JSON + markdown
dump the pipeline writes without figures.

    python benchmarks/bench_report_render.py [--layers 30] [--dpi 110]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tests.helpers


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=30)
    p.add_argument("--dpi", type=int, default=110)
    args = p.parse_args()

    from tests import helpers as sr
    from tl_geometry import plotting
    from tl_geometry.html import write_outputs

    report = sr.make_report(n_layers=args.layers)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        report.to_json(Path(tmp) / "plain.json")
        (Path(tmp) / "plain.md").write_text(report.to_markdown())
        plain = time.perf_counter() - t0

        per_fig = {}
        import matplotlib.pyplot as plt

        for name, (fn, _) in plotting.FIGURES.items():
            t = time.perf_counter()
            fig = fn(report)
            if fig is not None:
                fig.savefig(Path(tmp) / f"{name}.png", dpi=args.dpi)
                plt.close(fig)
            per_fig[name] = time.perf_counter() - t

        t0 = time.perf_counter()
        index = write_outputs(report, Path(tmp) / "out", dpi=args.dpi)
        full = time.perf_counter() - t0
        size = index.stat().st_size

    print(f"report: {len(report)} rows, {args.layers} layers, dpi {args.dpi}")
    for name, s in per_fig.items():
        print(f"  figure {name:<18} {s:6.2f} s")
    print(f"plain JSON + markdown : {plain:7.3f} s")
    print(f"write_outputs (all)   : {full:7.3f} s   index.html {size / 1e6:.2f} MB")
    print(f"ratio full / plain    : {full / plain:7.1f} x")


if __name__ == "__main__":
    main()
