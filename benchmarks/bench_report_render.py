"""Benchmark: the cost of rendering a report, against drawing the same figures one by one.

    python -m benchmarks.bench_report_render [--layers 30] [--dpi 110] [--repeats 3] [--small]

A SmolLM2-sized synthetic report (``_util.synthetic_report``: 30 layers, CCR 0/1/5, every family):

* ours: ``tl_geometry.render.html.write_outputs`` (JSON + markdown + every PNG + index.html);
* reference: every figure function of ``tl_geometry.render.plotting.FIGURES`` called and saved with
  ``fig.savefig(..., dpi=)`` one after the other, plus the JSON and markdown: the best *simple* way
  to get the same files (matplotlib's own save, nothing shared);
* floor: the plain JSON + markdown dump the pipeline writes without figures.

Warm-up, ``--repeats`` (≥ 3) rounds in rotating order, best and median; the per-figure seconds of the
last reference run. ``--small``: 6 layers at dpi 50.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks import _util


def main(argv=None) -> None:
    ap = _util.make_parser(__doc__)
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--dpi", type=int, default=110)
    args = _util.parse_args(ap, argv)
    if args.small:
        args.layers, args.dpi = 6, 50
    plt = _util.headless_pyplot()
    from tl_geometry.render import plotting
    from tl_geometry.render.html import write_outputs

    _util.print_environment("report rendering: write_outputs against figure-by-figure savefig")
    report = _util.synthetic_report(n_layers=args.layers)
    per_fig: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)

        def plain():
            report.to_json(out / "plain.json")
            (out / "plain.md").write_text(report.to_markdown())

        def reference():
            plain()
            for name, (fn, _) in plotting.FIGURES.items():
                t0 = time.perf_counter()
                fig = fn(report)
                if fig is not None:
                    fig.savefig(out / f"{name}.png", dpi=args.dpi)
                    plt.close(fig)
                per_fig[name] = time.perf_counter() - t0

        def ours():
            return write_outputs(report, out / "out", dpi=args.dpi, force=True)

        t = _util.bench({"ours": ours, "reference": reference, "floor": plain}, repeats=args.repeats)
        size = t["ours"].value.stat().st_size
    print(f"report: {len(report)} rows, {args.layers} layers, dpi {args.dpi}")
    _util.print_table(
        [
            ("ours: write_outputs (all)", t["ours"], f"index.html {size / 1e6:.2f} MB"),
            ("reference: each figure + savefig, JSON, markdown", t["reference"]),
            ("floor: plain JSON + markdown", t["floor"]),
        ]
    )
    _util.print_ratios(
        t["ours"], t["reference"], t["floor"], reference_name="figure by figure", floor_name="plain dump"
    )
    for name, s in per_fig.items():
        print(f"  figure {name:<18} {s:6.2f} s (last reference run)")
    _util.print_footer()


if __name__ == "__main__":
    main()
