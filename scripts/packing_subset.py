#!/usr/bin/env python
"""Regenerate cells of the capacity paper's optimized-packing grid with our optimizer.

    python scripts/packing_subset.py run out/packing             # every subset cell × seed, resumable
    python scripts/packing_subset.py run out/packing --cells 2000x32 2000x64 --seeds 0 1 2 [--p 20]
    python scripts/packing_subset.py write out/packing/*.jsonl   # → tl_geometry/data/packing_subset.json
    python scripts/packing_subset.py table                       # the shipped cells vs the authors' (markdown)

``run`` calls :func:`tl_geometry.families.capacity.packing.sweep` (the paper schedule of
:func:`tl_geometry.families.capacity.packing.paper_schedule`: Adam, 5,000 steps, lr 0.005 for d ≤ 1024,
p = min(int(m / ln d), 20) with m = 40 for k ≤ 4000) once per seed; each finished (cell, seed)
is appended at once to ``OUT/packing_subset.jsonl``, so a killed run continues where it stopped.
``--p`` overrides the penalty exponent (recorded in the cell's key; such runs are kept apart as
"variants"). ``write`` turns sweep files into the shipped data file that ``tl-geometry reproduce``
reads (per cell: ε* per seed and seconds; the torch version, thread count and git commit); cells
with fewer than ``--min-seeds`` seeds (default 3) are left out, variants need 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "tl_geometry" / "data" / "packing_subset.json"


def _cell(text: str) -> tuple[int, int]:
    k, _, d = text.lower().partition("x")
    return int(k), int(d)


def run(args) -> int:
    import torch

    from tl_geometry.families.capacity import packing
    from tl_geometry.families.capacity.checks import PACKING_SUBSET_CELLS, PACKING_SUBSET_SEEDS

    if args.threads:
        torch.set_num_threads(args.threads)
    cells = [_cell(c) for c in args.cells] if args.cells else list(PACKING_SUBSET_CELLS)
    seeds = args.seeds if args.seeds is not None else list(PACKING_SUBSET_SEEDS)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for s in seeds:
        packing.sweep(cells, out / "packing_subset.jsonl", kind="optimized", seed=s, p=args.p, device="cpu")
    return 0


def payload(records: list[dict], *, git_commit: str | None, threads: int | None, min_seeds: int = 3) -> dict:
    """The shipped JSON from sweep records (paper schedule → "cells", a p override → "variants")."""
    import torch

    from tl_geometry.families.capacity import packing

    cells: dict[tuple, dict] = {}
    for r in records:
        par = r.get("params", {})
        if r.get("status") != "ok" or par.get("kind") != "optimized" or par.get("steps") not in (None, 5000):
            continue
        key = (int(par["k"]), int(par["d"]), par.get("p"))
        sched = packing.paper_schedule(key[0], key[1])
        c = cells.setdefault(
            key,
            {
                "k": key[0],
                "d": key[1],
                "steps": sched["steps"],
                "lr": sched["lr"],
                "p": sched["p"] if key[2] is None else key[2],
                "eps": {},
                "seconds": {},
            },
        )
        c["eps"][str(par["seed"])] = float(r["eps"])
        c["seconds"][str(par["seed"])] = round(float(r.get("seconds", float("nan"))), 1)
    order = sorted(cells, key=lambda t: (t[0], t[1], t[2] or 0))
    for c in cells.values():
        c["eps"] = dict(sorted(c["eps"].items(), key=lambda kv: int(kv[0])))
        c["seconds"] = dict(sorted(c["seconds"].items(), key=lambda kv: int(kv[0])))
    return {
        "description": "ε* = max |cos| of k unit vectors in R^d after tl_geometry.families.capacity.packing.optimized_packing at the "
        "capacity paper's schedule (tl_geometry.families.capacity.packing.paper_schedule), one entry per seed; cells of the "
        "authors' optimized-packing grid. 'variants' override the penalty exponent p.",
        "generator": "scripts/packing_subset.py (tl_geometry.families.capacity.packing.sweep)",
        "git_commit": git_commit,
        "torch": torch.__version__,
        "device": "cpu",
        "threads": threads,
        "seconds": "wall time of each run (on a shared machine: read it as an upper bound)",
        "min_seeds": min_seeds,
        "cells": [cells[t] for t in order if t[2] is None and len(cells[t]["eps"]) >= min_seeds],
        "variants": [cells[t] for t in order if t[2] is not None and len(cells[t]["eps"]) >= 2],
    }


def write(args) -> int:
    from tl_geometry.runtime.jobs import read_records

    records = [r for f in args.files for r in read_records(f)]
    data = payload(records, git_commit=args.commit, threads=args.threads, min_seeds=args.min_seeds)
    Path(args.target).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    n = sum(len(c["eps"]) for c in data["cells"] + data["variants"])
    print(f"wrote {args.target}: {len(data['cells'])} cells, {len(data['variants'])} variants, {n} runs")
    return 0


def table(args) -> int:
    """Print the shipped subset as a markdown table: ours (mean ± sd, seeds) next to the authors' cell."""
    from tl_geometry.families.capacity import packing
    from tl_geometry.families.capacity.checks import (
        _packing_data,
        _packing_subset_rows,
        _packing_variant_rows,
        _shipped_subset,
        shipped_packing_subset,
    )
    from tl_geometry.runs.reproduction import fmt

    opt = {(int(k), int(d)): e for k, d, e in _packing_data("optimized")}
    data = _shipped_subset() or {}
    print("| k | d | p | our ε* per seed | ours mean ± sd | authors' cell | Δ | tolerance (3 sd·√(1+1/n)) | status |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in data.get("cells", []) + data.get("variants", []):
        if len(c["eps"]) < 2:
            continue
        s = packing.seed_spread(c["k"], c["d"], {int(k): v for k, v in c["eps"].items()})
        paper = opt[(c["k"], c["d"])]
        tol = packing.cell_tolerance(s.sd, s.n)
        seeds = ", ".join(f"{e:.4f} ({sd})" for sd, e in zip(s.seeds, s.eps))
        status = "reproduced" if abs(s.mean - paper) <= tol else "differs"
        print(
            f"| {c['k']} | {c['d']} | {c['p']:g} | {seeds} | {s.mean:.4f} ± {s.sd:.4f} | {paper:.4f} | "
            f"{(s.mean - paper) / paper:+.1%} | ±{tol:.4f} | {status} |"
        )
    rows = _packing_subset_rows(shipped_packing_subset(), opt, "shipped") + _packing_variant_rows(
        data.get("variants", []), opt, "shipped"
    )
    print()
    print("| fit | on our cells | on the authors' same cells | tolerance | status |")
    print("|---|---|---|---|---|")
    for r in rows:
        if r.id.startswith("capacity.packing.subset_fit."):
            tol = fmt(r.tolerance * abs(r.paper)) if r.tolerance is not None and r.paper is not None else "—"
            print(f"| {r.id.split('subset_fit.')[1]} | {fmt(r.ours)} | {fmt(r.paper)} | ±{tol} | {r.status} |")
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out")
    r.add_argument("--cells", nargs="+", default=None, metavar="KxD")
    r.add_argument("--seeds", nargs="+", type=int, default=None)
    r.add_argument("--p", type=float, default=None)
    r.add_argument("--threads", type=int, default=None)
    r.set_defaults(func=run)
    w = sub.add_parser("write")
    w.add_argument("files", nargs="+")
    w.add_argument("--target", default=str(TARGET))
    w.add_argument("--commit", default=None, help="git commit of the optimizer code that ran")
    w.add_argument("--threads", type=int, default=None, help="torch threads of the run")
    w.add_argument("--min-seeds", type=int, default=3, help="keep cells with at least this many seeds (variants: 2)")
    w.set_defaults(func=write)
    t = sub.add_parser("table")
    t.set_defaults(func=table)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
