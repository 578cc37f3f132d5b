"""``tl-geometry report``: the main job (every metric on one model, written to reports/)."""

from __future__ import annotations

import sys

from tl_geometry.base import _checks
from tl_geometry.errors import InputError
from tl_geometry.runs import cli_args


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("report", help="compute every metric on a model and write reports/<model>/")
    cli_args.add_model_text(p, n_seqs=8, seq_len=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--metrics",
        nargs="+",
        default=None,
        help="metric names (default: all but nfa, which runs only when named; see `tl-geometry metrics`)",
    )
    p.add_argument("--out", default=None, help="output directory (default reports/<model>)")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace the report in an existing output directory (only once the new one is whole)",
    )
    p.add_argument("--fast", action="store_true", help="cheaper settings: fewer null subspaces, probes and points")
    p.add_argument("--n-null", type=int, default=None, help="PGA null subspaces (report default 50; fast 20)")
    p.add_argument("--n-probes", type=int, default=None, help="AGOP/NFA gradient probes (report default 16; fast 4)")
    p.add_argument("--max-points", type=int, default=None, help="sampled token positions for PGA / ε at hooks")
    p.add_argument(
        "--no-figures",
        action="store_true",
        help="skip the PNG figures (report.json, report.md and index.html are still written)",
    )
    cli_args.add_device_threads(p)
    p.add_argument(
        "--capture",
        choices=("shared", "separate"),
        default="shared",
        help="shared (default): ONE forward pass over the corpus feeds pga, spectral and epsilon_activations; "
        "separate: one pass per metric (the same numbers, slower)",
    )
    p.add_argument(
        "--max-memory-gb",
        type=float,
        default=None,
        help="refuse a model whose estimated peak memory exceeds this (default: available RAM)",
    )
    p.set_defaults(func=run)


FLAG_CHECKS = {
    **cli_args.TEXT_SIZES,
    "n_null": _checks.int_at_least(2),
    "n_probes": _checks.int_at_least(2),
    "max_points": _checks.int_at_least(2),
}
"""What each size flag accepts (the one validation layer, `tl_geometry.base._checks`); the family
flags may be left out (their defaults are the report's), the rest is checked by the run."""


def run(args) -> int:
    from pathlib import Path

    from tl_geometry.runs.pipeline import run_report

    cli_args.check_flags(args, FLAG_CHECKS, optional=("n_null", "n_probes", "max_points"))
    options: dict[str, dict] = {}
    from tl_geometry.runs.pipeline import default_metrics

    running = list(args.metrics) if args.metrics else default_metrics()
    for flag, value, option, families in (
        ("--n-null", args.n_null, "n_null", ("pga",)),
        ("--n-probes", args.n_probes, "n_probes", ("agop", "nfa")),
        ("--max-points", args.max_points, "max_points", ("pga", "epsilon_activations")),
    ):
        if value is None:
            continue
        used = [m for m in families if m in running]  # a flag sets only the metrics being run
        if not used:
            raise InputError(
                f"{flag} applies to {' / '.join(families)}, none of which is being run (--metrics {' '.join(running)})"
            )
        for m in used:
            options.setdefault(m, {})[option] = value
    from tl_geometry.models import display_name

    figures = _figures_or_note(args.no_figures)  # checked up front: the run's work is never lost to a missing extra

    out = Path(args.out) if args.out else Path("reports") / display_name(args.model).replace("/", "__")
    report = run_report(
        args.model,
        corpus=args.corpus,
        corpus_encoding=args.corpus_encoding,
        n_seqs=args.n_seqs,
        seq_len=args.seq_len,
        seed=args.seed,
        metrics=args.metrics,
        options=options,
        fast=args.fast,
        out=out,
        force=args.force,
        figures=figures,
        device=args.device,
        max_memory_gb=args.max_memory_gb,
        force_hint="--force",
        capture=args.capture,
    )
    print(summary_table(report))
    print(f"\nwrote {out}/report.json, {out}/report.md, {out}/index.html" + (" and the figures" if figures else ""))
    status = report.provenance.get("status")
    if status != "complete":
        print(f"status: {status}; errors: {report.provenance.get('errors')}", file=sys.stderr)
        return 1
    return 0


def summary_table(report) -> str:
    """Header line (model, shape, tokens, time) and one line per metric (count, min, max)."""
    from tl_geometry.render.readings import summary_table as per_metric

    prov = report.provenance
    head = (
        f"{prov.get('model')}: n_layers={prov.get('n_layers')} d_model={prov.get('d_model')} "
        f"d_vocab={prov.get('d_vocab')}  tokens={prov.get('n_tokens')}  time={prov.get('total_s')}s"
    )
    return head + "\n\n" + per_metric(report)


def _figures_or_note(no_figures: bool) -> bool:
    """Whether to draw figures: not with ``--no-figures``, nor without matplotlib (then one line on
    stderr names the ``plot`` extra, and report.json / report.md / index.html are written without them)."""
    if no_figures:
        return False
    from tl_geometry.render.plotting import PLOT_EXTRA_NOTE, available

    if available():
        return True
    print(f"note: {PLOT_EXTRA_NOTE} (report.json, report.md and index.html are written)", file=sys.stderr)
    return False
