"""``tl-geometry reproduce``: the papers' published numbers next to ours.

    tl-geometry reproduce [capacity|pga|interaction|sae|all ...] [--tiny | --full] [--out DIR]
                          [--check ID ...] [--device cpu] [--fresh] [--list] [--no-progress]

Writes ``DIR/reproduce.md`` (one table row per published figure: paper | ours | Δ | status |
evidence | note; the headline counts each evidence class apart), ``DIR/reproduce.json`` (the same with version, commit, presets, sizes and wall time per
check) and figures under ``DIR/figures/``. A killed run continues where it stopped when run
again with the same ``--out``. Exit status: 0 when every check ran (whatever it found),
1 when a check raised (its row has status "error"), 2 for bad arguments.
"""

from __future__ import annotations

import sys


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("reproduce", help="run the papers' published figures and write a side-by-side table")
    p.add_argument(
        "families",
        nargs="*",
        default=["all"],
        metavar="FAMILY",
        help="a family that declares checks (capacity, pga, intrinsic_dimension, interaction, sae) or all (default all)",
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument(
        "--size",
        choices=["tiny", "cpu", "full"],
        default=None,
        help="tiny (seconds, model rows skipped), cpu (default, minutes) or full (the papers' sizes, for a GPU)",
    )
    size.add_argument(
        "--full", dest="size", action="store_const", const="full", help="the papers' sizes (same as --size full)"
    )
    size.add_argument(
        "--tiny", dest="size", action="store_const", const="tiny", help="seconds-sized (same as --size tiny)"
    )
    p.add_argument("--out", default="reproduce", help="output folder (default ./reproduce; reused to resume)")
    p.add_argument("--check", nargs="+", default=None, metavar="ID", help="only these checks (see --list)")
    p.add_argument("--device", default="cpu", help="device for the experiments (cpu, cuda, ...)")
    p.add_argument("--fresh", action="store_true", help="ignore earlier results in --out instead of resuming")
    p.add_argument("--list", action="store_true", help="list the checks and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def run(args) -> int:
    from tl_geometry.runs.reproduction import fmt, list_checks, reproduce

    if args.list:
        for c in list_checks(args.families):
            flags = " [offline model]" if c.uses_model else (" [sae_lens]" if c.heavy else "")
            print(f"{c.id:<28}{c.title}{flags}")
        return 0
    from pathlib import Path

    from tl_geometry.io import outdir
    from tl_geometry.runs.reproduction import RESULTS_NAME
    from tl_geometry.runtime.jobs import check_results_file

    out = Path(args.out)  # checked before any work: a folder (created), writable, its resume file ours
    if out.exists() and not out.is_dir():
        raise outdir.OutputPathError(f"--out {out} is a file; give a folder (it is created if missing)")
    outdir.check_writable(out)
    check_results_file(out / RESULTS_NAME)  # a file we did not write is refused, --fresh or not
    res = reproduce(
        args.families,
        out=args.out,
        size=args.size or "cpu",
        checks=args.check,
        device=args.device,
        fresh=args.fresh,
        progress=not args.no_progress,
    )
    print(f"{len(res.rows)} rows — {res.headline()}")
    print(
        "  independent: our simulation/training/measurement gives the paper's number; recomputed: a formula on "
        "the paper's printed inputs; consistency: follows from printed numbers or other rows; measured: ours, nothing to compare"
    )
    for r in res.rows:
        if r.status in ("differs", "error"):
            print(f"  {r.status:<8} {r.id}: paper {fmt(r.paper)}, ours {fmt(r.ours)} — {r.note}")
    print(f"the table: {res.out / 'reproduce.md'} (rows with presets, sizes and times: {res.out / 'reproduce.json'})")
    if res.n_errors:
        bad = sorted({r.id for r in res.rows if r.status == "error"})
        print(
            f"tl-geometry reproduce: {res.n_errors} check(s) failed: {', '.join(bad)}; run again to retry them",
            file=sys.stderr,
        )
        return 1
    return 0
