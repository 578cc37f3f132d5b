"""Where a report's memory peaks: resident memory sampled every 20 ms through one report, each
metric's interval marked.

    python -m benchmarks.check_report_phases [--model smollm2-135m|gemma-3-270m|NAME] [--fast] [--small]

Runs ``tl_geometry.runs.pipeline.run_report(model, figures=False, out=None)`` in this process (a
fresh one: run it as its own command) while ``_util.PeakRSS`` samples its resident memory every
20 ms. Prints the load's peak (everything before the first metric), each metric's interval
and the peak inside it, the report's peak and when, and the estimate the report made before
loading (``provenance["memory"]``) beside the measured peak: the phase to look at when a model
misses the memory goal, or its estimate is below the measurement. ``--small``: the tiny byte-level
model, 2 × 32 tokens, three metrics (checks the script, not the model).

Found with it (2026-12-07, Gemma-3-270M ``report --fast``): ``wtw_aofe`` peaked 1.1 GiB above the
rest (``torch.isfinite`` of the 262,144 × 640 embedding) and AGOP's passes swung by 0.67 GiB
(TransformerLens's ``W_U.T.contiguous()`` per forward); docs/reliability.md, Memory.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks import _util  # noqa: E402

GiB = 2**30


def phase_peaks(samples, marks, t0: float) -> list[tuple[str, float, float, int | None]]:
    """(name, start s, end s, peak bytes) for the load (before the first mark's start) and each
    mark (name, end time, seconds), times from ``t0``: the largest sample (time, bytes) inside each
    interval, None when no sample fell in it (a phase shorter than the sampling interval)."""
    out = []
    starts = [end - sec for _, end, sec in marks]
    first = min(starts) if starts else float("inf")
    load = [r for t, r in samples if t < first]
    out.append(("(load and setup)", 0.0, (first if marks else samples[-1][0]) - t0, max(load, default=None)))
    for (name, end, _sec), start in zip(marks, starts, strict=True):
        inside = [r for t, r in samples if start <= t <= end]
        out.append((name, start - t0, end - t0, max(inside, default=None)))
    return out


def main(argv=None) -> int:
    ap = _util.make_parser(__doc__, repeats=False, small="the tiny byte-level model (checks the script)")
    ap.add_argument("--model", default="smollm2-135m", help="a zoo name or a path the report accepts")
    ap.add_argument("--fast", action="store_true", help="the report's --fast options")
    args = _util.parse_args(ap, argv)
    import tl_geometry.runs.analysis as analysis
    from tl_geometry.runs.pipeline import run_report

    marks: list[tuple[str, float, float]] = []
    original = analysis.iter_metrics

    def marked(*a, **k):  # each metric's end and seconds, as the pipeline receives them
        for item in original(*a, **k):
            marks.append((item[0], time.perf_counter(), float(item[2])))
            yield item

    kw: dict = {}
    if args.small:
        model = _util.byte_model()
        kw = dict(n_seqs=2, seq_len=32, metrics=["epsilon_activations", "spectral", "wtw_aofe"])
        label = "tiny byte-level model"
    else:
        model, label = args.model, args.model
    _util.print_environment(f"report phases: {label}{' --fast' if args.fast else ''}, no figures")
    analysis.iter_metrics = marked
    t0 = time.perf_counter()
    try:
        with _util.PeakRSS(0.02, keep=True) as mem:
            rep = run_report(model, fast=args.fast, figures=False, out=None, progress=False, **kw)
    finally:
        analysis.iter_metrics = original
    samples = mem.samples
    print("| phase | from s | to s | peak RSS GiB |\n|---|---|---|---|")
    for name, a, b, peak in phase_peaks(samples, marks, t0):
        print(f"| {name} | {a:.1f} | {b:.1f} | {'-' if peak is None else f'{peak / GiB:.3f}'} |")
    t_peak, peak = max(samples, key=lambda s: s[1])
    mem = rep.provenance.get("memory") or {}
    print(
        f"\npeak {peak / GiB:.3f} GiB at {t_peak - t0:.1f} s; the report's own estimate {mem.get('peak_gib')} GiB "
        f"(load {mem.get('load_gib')}, held {mem.get('held_gib')}, working {mem.get('working_gib')}), "
        f"measured by the report {mem.get('measured_peak_gib')} GiB; total {rep.provenance.get('total_s')} s"
    )
    _util.print_footer()
    return 0


if __name__ == "__main__":
    sys.exit(main())
