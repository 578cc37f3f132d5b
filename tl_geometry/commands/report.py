"""``tl-geometry report``: the main job (every metric on one model, written to reports/)."""

from __future__ import annotations

import sys


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("report", help="compute every metric on a model and write reports/<model>/")
    p.add_argument("--model", default="smollm2-135m", help="offline 'smollm2-135m' (default) or any TransformerLens model name")
    p.add_argument("--corpus", default="pydoc", help="'pydoc' (default), 'shakespeare' or a text file")
    p.add_argument("--n-seqs", type=int, default=8, help="sequences of text (default 8)")
    p.add_argument("--seq-len", type=int, default=128, help="tokens per sequence (default 128)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--metrics", nargs="+", default=None, help="metric names (default: all; see `tl-geometry metrics`)")
    p.add_argument("--out", default=None, help="output directory (default reports/<model>)")
    p.add_argument("--force", action="store_true", help="overwrite report files in an existing output directory")
    p.add_argument("--fast", action="store_true", help="cheaper settings: fewer null subspaces, probes and points")
    p.add_argument("--no-figures", action="store_true", help="skip PNG figures and index.html")
    p.add_argument("--device", default="cpu")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from tl_geometry.pipeline import run_report

    if args.n_seqs < 1 or args.seq_len < 2:
        raise ValueError(f"--n-seqs must be >= 1 and --seq-len >= 2 (got {args.n_seqs}, {args.seq_len})")
    out = Path(args.out) if args.out else Path("reports") / args.model.replace("/", "__")
    report = run_report(
        args.model, corpus=args.corpus, n_seqs=args.n_seqs, seq_len=args.seq_len, seed=args.seed,
        metrics=args.metrics, fast=args.fast, out=out, force=args.force, figures=not args.no_figures,
        device=args.device,
    )
    print(summary_table(report))
    print(f"\nwrote {out}/report.json, {out}/report.md" + ("" if args.no_figures else f" (and figures in {out}/)"))
    status = report.provenance.get("status")
    if status != "complete":
        print(f"status: {status}; errors: {report.provenance.get('errors')}", file=sys.stderr)
        return 1
    return 0


def summary_table(report) -> str:
    """A compact text table: one line per (metric, hook) with the value."""
    prov = report.provenance
    head = (
        f"{prov.get('model')}: n_layers={prov.get('n_layers')} d_model={prov.get('d_model')} "
        f"d_vocab={prov.get('d_vocab')}  tokens={prov.get('n_tokens')}  time={prov.get('total_s')}s"
    )
    lines = [head, "-" * len(head)]
    for r in report.rows:
        where = r.hook or ""
        extra = ""
        if "ccr" in r.extras:
            extra = f" (ccr={r.extras['ccr']})"
        lines.append(f"{r.metric:28s} {where:32s} {r.value:>14.6g}{extra}")
    return "\n".join(lines)
