"""``tl-geometry study MODEL... --out DIR``: the report's metrics on several models, side by side.

    tl-geometry study smollm2-135m gemma-3-270m --controls random --fast --out studies/two
    tl-geometry study runs/trajectory/checkpoints --fast --metrics pga spectral --out studies/traj

Writes ``DIR/study.json`` (one long table with a ``model`` column and every stderr; the claims
table; the convergence matrix), ``study.md``, a self-contained ``index.html`` and figures; each
finished model is appended to ``DIR/study.jsonl`` at once, and a rerun reuses it. Exit status 1
when a model failed (the others are in the study), 2 for bad arguments.
"""

from __future__ import annotations

import sys

from tl_geometry.base import _checks
from tl_geometry.runs import cli_args


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "study",
        help="the report's metrics on several models (and their random-init twins, or checkpoints), "
        "side by side, with a claims table",
    )
    p.add_argument(
        "models",
        nargs="+",
        help="zoo names, local files or model directories, hub names, random:<model>, or a directory of "
        "checkpoints (one model per entry, ordered by the step number in its name)",
    )
    p.add_argument("--out", required=True, help="the study directory (resumed when it holds this study)")
    p.add_argument(
        "--controls", nargs="+", choices=["random"], default=[], help="random: add each model's random-init twin"
    )
    p.add_argument("--corpus", default="pydoc", help="'pydoc' (default), 'shakespeare' or a text file")
    p.add_argument("--corpus-encoding", default="utf-8")
    p.add_argument("--n-seqs", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--metrics", nargs="+", default=None, help="metric names (default: the report's)")
    p.add_argument("--fast", action="store_true", help="the report's cheaper settings (fewer nulls, probes, points)")
    p.add_argument(
        "--option",
        action="append",
        default=None,
        metavar="METRIC.NAME=VALUE",
        help="a metric option, e.g. pga.preset=paper (repeatable; values parsed as JSON)",
    )
    p.add_argument("--n-texts", type=int, default=64, help="texts of the convergence matrix (default 64)")
    p.add_argument(
        "--processing",
        choices=["tl", "none"],
        default="tl",
        help="weight processing of every model: tl (default, as report) or none (with --option "
        "pga.preset=paper: the PGA paper's protocol)",
    )
    p.add_argument("--loader", default=None, help="'package.module:function' that loads a model from its job dict")
    p.add_argument("--executor", choices=["local", "ray"], default="local")
    p.add_argument("--num-cpus", type=float, default=1, help="Ray: CPUs per model")
    p.add_argument(
        "--force", action="store_true", help="start over in a directory of a study with other settings (its files only)"
    )
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    cli_args.add_device_threads(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from tl_geometry.commands._sweep_models import _parse_options
    from tl_geometry.studies import study

    cli_args.check_flags(
        args,
        {"n_seqs": _checks.int_at_least(1), "seq_len": _checks.int_at_least(2), "n_texts": _checks.int_at_least(8)},
    )
    result = study(
        args.models,
        out=args.out,
        controls=args.controls,
        corpus=args.corpus,
        corpus_encoding=args.corpus_encoding,
        n_seqs=args.n_seqs,
        seq_len=args.seq_len,
        seed=args.seed,
        fast=args.fast,
        metrics=args.metrics,
        options=_parse_options(args.option) or None,
        n_texts=args.n_texts,
        loader=args.loader,
        device=args.device,
        processing=args.processing,
        executor=args.executor,
        num_cpus=args.num_cpus,
        force=args.force,
        figures=not args.no_figures,
    )
    print(summary(result))
    print(f"\nwrote {args.out}/study.json, study.md, index.html" + ("" if args.no_figures else " and the figures"))
    if result.failed:
        for label, err in result.failed.items():
            print(f"FAILED {label}: {err}", file=sys.stderr)
        return 1
    return 0


def summary(result) -> str:
    """One line per model (ran / reused / failed) and the claims, one line each."""
    lines = []
    for m in result.models:
        state = (
            f"failed: {result.failed[m.label]}"
            if m.label in result.failed
            else "ran"
            if m.label in result.ran
            else "reused"
            if m.label in result.reused
            else "ok"
        )
        secs = (result.seconds or {}).get(m.label)
        lines.append(f"{m.label:<40} {state}" + (f" ({secs['total']:.0f} s)" if secs else ""))
    lines.append("")
    for c in result.claims:
        val = (
            "" if c["value"] is None else f"{c['value']:.3g}" + ("" if c["stderr"] is None else f" ± {c['stderr']:.2g}")
        )
        lines.append(f"{c['claim']:<32} {c['model']:<28} {c['verdict']:<15} {val}" + (" ⚠" if c.get("caveat") else ""))
    if any(c.get("caveat") for c in result.claims):
        lines.append("⚠ PGA under the library preset with a readout caveat (fold_ln; see study.md's notes)")
    return "\n".join(lines)
