"""``tl-geometry report``: the main job (every metric on one model, written to reports/)."""

from __future__ import annotations

import sys

from tl_geometry.runs import cli_args
from tl_geometry.runs import request as request_mod


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("report", help="compute every metric on a model and write reports/<model>/")
    cli_args.add_model_text(p, n_seqs=8, seq_len=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--metrics",
        nargs="+",
        default=None,
        help="metric names (default: all but "
        + (", ".join(request_mod.not_in_default_report()) or "none")
        + ", which run only when named; see `tl-geometry metrics`)",
    )
    p.add_argument("--out", default=None, help="output directory (default reports/<model>)")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace the report in an existing output directory (only once the new one is whole)",
    )
    p.add_argument("--fast", action="store_true", help="cheaper settings: fewer null subspaces, probes and points")
    for option in request_mod.FLAGS:  # each reaches every metric being run that takes the keyword
        p.add_argument("--" + option.replace("_", "-"), type=int, default=None, help=request_mod.flag_help(option))
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
        help="refuse a model whose estimated peak memory (from its files, before loading) exceeds this "
        "(default: available RAM)",
    )
    p.add_argument(
        "--ignore-memory-check",
        action="store_true",
        help="run even when the memory estimate exceeds the limit (the estimate is still recorded in provenance)",
    )
    p.set_defaults(func=run)


def _spell(name: str) -> str:
    """How the CLI spells an argument in a message: ``n_seqs`` → ``--n-seqs``."""
    return "--" + name.replace("_", "-")


def request_from_args(args):
    """The checked [`ReportRequest`][tl_geometry.runs.request.ReportRequest] of ``tl-geometry report``'s flags (one check of
    each, naming the flag; before any model loads)."""
    from pathlib import Path

    from tl_geometry.models import display_name

    figures = _figures_or_note(args.no_figures)  # checked up front: the run's work is never lost to a missing extra
    out = Path(args.out) if args.out else Path("reports") / display_name(args.model).replace("/", "__")
    return request_mod.build_report(
        args.model,
        corpus=args.corpus,
        corpus_encoding=args.corpus_encoding,
        n_seqs=args.n_seqs,
        seq_len=args.seq_len,
        seed=args.seed,
        metrics=args.metrics,
        flags={option: getattr(args, option) for option in request_mod.FLAGS},
        fast=args.fast,
        capture=args.capture,
        device=args.device,
        max_memory_gb=args.max_memory_gb,
        ignore_memory_check=args.ignore_memory_check,
        out=out,
        force=args.force,
        force_hint="--force",
        figures=figures,
        spell=_spell,
    )


def run(args) -> int:
    from tl_geometry.runs import pipeline

    req = request_from_args(args)
    report = pipeline.run(req)
    out = req.out
    print(summary_table(report))
    print(f"\nwrote {out}/report.json, {out}/report.md, {out}/index.html" + (" and the figures" if req.figures else ""))
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
