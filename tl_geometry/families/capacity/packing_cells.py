"""The packing cells our optimizer reproduces (capacity paper, arXiv 2606.02765): the cells and seeds of the shipped subset, its file, and the reproduce rows comparing our seed spread with the authors' cells. Used by [`tl_geometry.families.capacity.checks`][tl_geometry.families.capacity.checks]."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterable

from tl_geometry.runs.reproduction import ReproRow, make_row

PACKING_SUBSET_CELLS = ((2000, 32), (2000, 64), (2000, 128), (2000, 256), (2000, 512), (4000, 32), (4000, 64))
"""The cells of the authors' optimized-packing grid (their optimized_packing.json) that we regenerate with our optimizer at the paper schedule, and the seeds run per cell. Each finished (cell, seed) is appended at once to ``OUT/packing_subset.jsonl``; the shipped results of an earlier run are ``tl_geometry/data/packing_subset.json`` (scripts/packing_subset.py)."""


PACKING_SUBSET_SEEDS = (0, 1, 2)


PACKING_SUBSET_FILE = "packing_subset.json"


PACKING_N_SD = 3.0
"""The tolerance of a packing cell in standard deviations ([`tl_geometry.families.capacity.packing.cell_tolerance`][tl_geometry.families.capacity.packing.cell_tolerance])."""


PACKING_FINDINGS = {
    (2000, 32): (
        "the published script does not regenerate the published cell: the schedule of the authors' "
        "optimized_packing_sweep.py (lr 0.005, p = int(40 / ln 32) = 11, 5,000 Adam steps; the same as "
        "tg.packing.paper_schedule) ends near 0.40 on every seed, and the authors' own optimize() run verbatim "
        "on CPU gives 0.4005 (issue 20). Script and JSON were added in one commit; the script's comment says its "
        "grid matches the JSON's and calls the data 'the original A100 run'. A loss power p = 20 instead of 11 "
        "reaches the published cell (the p = 20 row; issue 20: 0.3867, 0.3858), but p = 20 does not explain "
        "d = 64 (that row)"
    ),
    (2000, 64): (
        "the published schedule (p = int(40 / ln 64) = 9) ends near 0.249 on every seed, and p = 20 does not "
        "reach the published 0.2363 either (issue 20: 0.2526; the p = 20 row where shipped): no tried setting "
        "regenerates this cell"
    ),
}
"""What is known about the cells where the published data and the published script disagree."""


def _subset_cells(records: Iterable[dict]) -> dict[tuple[int, int], dict[int, float]]:
    """{(k, d): {seed: ε*}} of the paper-schedule records of a packing sweep file (no p override)."""
    out: dict[tuple[int, int], dict[int, float]] = {}
    for r in records:
        par = r.get("params", {})
        if r.get("status") != "ok" or par.get("kind") != "optimized" or par.get("p") is not None:
            continue
        if par.get("steps") not in (None, 5000):
            continue
        out.setdefault((int(par["k"]), int(par["d"])), {})[int(par["seed"])] = float(r["eps"])
    return out


def _shipped_subset() -> dict | None:
    """The shipped packing subset (``tl_geometry/data/packing_subset.json``), or None."""
    from importlib import resources

    try:
        f = resources.files("tl_geometry").joinpath(f"data/{PACKING_SUBSET_FILE}")
        if f.is_file():
            return json.loads(f.read_text(encoding="utf-8"))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover
        pass
    return None


def shipped_packing_subset() -> dict[tuple[int, int], dict[int, float]]:
    """{(k, d): {seed: ε*}} of the shipped packing subset (paper schedule), {} when absent."""
    data = _shipped_subset() or {}
    return {(int(c["k"]), int(c["d"])): {int(s): float(e) for s, e in c["eps"].items()} for c in data.get("cells", [])}


def _packing_variant_rows(variants: list[dict], opt: dict, source: str) -> list[ReproRow]:
    """Cells run with another penalty exponent p than the schedule's: does it reach the authors' cell?"""
    from tl_geometry.families.capacity import packing

    rows = []
    for v in variants:
        k, d, p = int(v["k"]), int(v["d"]), v["p"]
        by_seed = {int(s): float(e) for s, e in v["eps"].items()}
        if (k, d) not in opt or len(by_seed) < 2:
            continue
        s = packing.seed_spread(k, d, by_seed)
        tol = packing.cell_tolerance(s.sd, s.n, n_sd=PACKING_N_SD)
        sched = packing.paper_schedule(k, d)
        rows.append(
            make_row(
                f"capacity.packing.variant.k{k}_d{d}_p{p:g}",
                f"optimized packing ε*, k = {k}, d = {d}, with p = {p:g} instead of the schedule's {sched['p']}: "
                f"mean of our {s.n} seeds vs the authors' cell (optimized_packing.json)",
                opt[(k, d)],
                s.mean,
                tol / abs(opt[(k, d)]),
                evidence="exploratory",  # p chosen after the published schedule missed: a tuned probe
                preset=f"paper schedule except p = {p:g} (Adam, {sched['steps']:,} steps, lr {sched['lr']})",
                tol_basis={"kind": "stderr", "k": PACKING_N_SD, "se": [s.sd * math.sqrt(1 + 1 / s.n)]},
                sizes={
                    "seeds": list(s.seeds),
                    "eps": [round(e, 6) for e in s.eps],
                    "sd": s.sd,
                    "p": p,
                    "source": source,
                },
                note=f"ours {s.mean:.4f} ± {s.sd:.4f} (seeds {list(s.seeds)}); tolerance ±{tol:.4f}; {source}; "
                "exploratory: p was tuned after the published schedule missed this cell, so a match shows what "
                "could produce it, not a reproduction",
                why="this p does not reach the published cell either",
            )
        )
    return rows


def _packing_subset_rows(cells: dict[tuple[int, int], dict[int, float]], opt: dict, source: str) -> list[ReproRow]:
    """Our seed mean per cell vs the authors' cell, and the fits on our cells vs on theirs."""
    from tl_geometry.families.capacity import packing

    rows: list[ReproRow] = []
    spreads = {}
    for (k, d), by_seed in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if (k, d) not in opt or len(by_seed) < 2:
            continue
        s = packing.seed_spread(k, d, by_seed)
        spreads[(k, d)] = s
        tol = packing.cell_tolerance(s.sd, s.n, n_sd=PACKING_N_SD)
        sched = packing.paper_schedule(k, d)
        finding = PACKING_FINDINGS.get((k, d), "")
        rows.append(
            make_row(
                f"capacity.packing.subset.k{k}_d{d}",
                f"optimized packing ε*, k = {k}, d = {d}: mean of our {s.n} seeds vs the authors' cell "
                "(optimized_packing.json)",
                opt[(k, d)],
                s.mean,
                tol / abs(opt[(k, d)]),
                evidence="independent",
                preset=f"paper schedule (Adam, {sched['steps']:,} steps, lr {sched['lr']}, p {sched['p']})",
                tol_basis={"kind": "stderr", "k": PACKING_N_SD, "se": [s.sd * math.sqrt(1 + 1 / s.n)]},
                sizes={
                    "seeds": list(s.seeds),
                    "eps": [round(e, 6) for e in s.eps],
                    "sd": s.sd,
                    "sem": s.sem,
                    **sched,
                    "source": source,
                },
                note=f"ours {s.mean:.4f} ± {s.sd:.4f} (sd over seeds {list(s.seeds)}); tolerance "
                f"{PACKING_N_SD:g} sd·√(1 + 1/n) = ±{tol:.4f} (the authors' cell is one run); {source}",
                why=finding
                or "outside our seed spread: the published schedule ends above the authors' cell here too "
                "(see the k = 2000, d = 32 row)",
            )
        )
    if len(spreads) < 2:
        return rows
    keys = sorted(spreads)
    ours = [[k, d, spreads[(k, d)].mean] for k, d in keys]
    theirs = [[k, d, opt[(k, d)]] for k, d in keys]
    sd_diff = [spreads[c].sd * math.sqrt(1 + 1 / spreads[c].n) for c in keys]
    where = ", ".join(f"{k}/{d}" for k, d in keys)
    n_k = len({k for k, _ in keys})
    forms: list[tuple[str, tuple[str, ...]]] = [("adjusted", ("C", "mape"))]
    if n_k >= 2 and len(keys) >= 5:
        forms.append(("full", ("C", "a", "b", "c", "mape")))
    for form, names in forms:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f_ours, f_theirs = packing.fit(ours, form=form), packing.fit(theirs, form=form)
        noise = packing.fit_noise(theirs, sd_diff, form=form, draws=100 if form == "full" else 200, seed=0)
        for name in names:
            a = f_ours.params[name] if name in f_ours.params else f_ours.mape
            b = f_theirs.params[name] if name in f_theirs.params else f_theirs.mape
            label = "MAPE %" if name == "mape" else name
            rows.append(
                make_row(
                    f"capacity.packing.subset_fit.{form}.{name}",
                    f"{form}-form {label} fitted on our cell means vs on the same cells of the authors' "
                    f"optimized_packing.json (k/d = {where})",
                    b,
                    a,
                    PACKING_N_SD * noise[name] / abs(b) if b else None,
                    # a fit to the same cells the cell rows compare: its agreement follows from theirs
                    evidence="consistency",
                    preset="tg.packing.fit",
                    tol_basis={"kind": "stderr", "k": PACKING_N_SD, "se": [noise[name]]},
                    sizes={"cells": [list(c) for c in keys], "fit_noise_sd": noise[name], "source": source},
                    note="consistency, not a reproduction: a fit to the same cells as the cell rows above"
                    + ("; the 'paper' column is our own fit of the authors' cells" if name != "mape" else "")
                    + f"; tolerance {PACKING_N_SD:g} × the sd of the constant under the cells' seed noise "
                    f"(Monte Carlo, {100 if form == 'full' else 200} refits: ±{PACKING_N_SD * noise[name]:.3g}); "
                    + (
                        "the paper's fit on its whole grid: adjusted C = 1.293 (Sec. 3.3)"
                        if form == "adjusted"
                        else "the paper's fit on its whole grid: C, a, b, c = 0.458, 1.067, 1.447, 0.972 (Sec. 3.3)"
                    ),
                    why="the cells differ beyond their seed noise (see the cell rows)",
                )
            )
    if len(forms) == 1:
        rows.append(
            make_row(
                "capacity.packing.subset_fit.full",
                f"full form fitted on our cells vs the authors' same cells (k/d = {where})",
                None,
                None,
                None,
                evidence="consistency",
                status="not run (--full)",
                note=f"the full form's 4 constants need cells at ≥ 2 values of k and ≥ 5 cells; these span {n_k} "
                "value(s) of k (C and a trade off at one k); `tl-geometry reproduce capacity --full` runs "
                f"{len(PACKING_SUBSET_CELLS)} cells × {len(PACKING_SUBSET_SEEDS)} seeds",
            )
        )
    return rows
