"""The rows of a reproduce run: one published figure next to ours ([`ReproRow`][tl_geometry.runs.reproduction_rows.ReproRow]).

The checks of [`tl_geometry.runs.reproduction`][tl_geometry.runs.reproduction] build their rows with
[`make_row`][tl_geometry.runs.reproduction_rows.make_row] (the status from a tolerance) or
[`published_row`][tl_geometry.runs.reproduction_rows.published_row] (value and tolerance from the printed text,
[`published_tolerance`][tl_geometry.runs.reproduction_rows.published_tolerance]). A row's vocabulary is
[`STATUSES`][tl_geometry.runs.reproduction_rows.STATUSES] and [`EVIDENCE`][tl_geometry.runs.reproduction_rows.EVIDENCE]
(their meaning is in [`tl_geometry.runs.reproduction`][tl_geometry.runs.reproduction]). Every name here is also
importable from ``tl_geometry.runs.reproduction``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from tl_geometry.errors import InputError

__all__ = [
    "STATUSES",
    "EVIDENCE",
    "ReproRow",
    "is_num",
    "published_tolerance",
    "make_row",
    "published_row",
    "RECLASSIFIED",
    "reclassified",
    "supported_tolerance",
    "printed_unit",
]

STATUSES = (
    "reproduced",
    "differs",
    "measured",
    "needs a GPU",
    "needs the hub",
    "needs a package",
    "skipped (tiny)",
    "not run (--full)",
    "error",
)
"""A row's status (see [`tl_geometry.runs.reproduction`][tl_geometry.runs.reproduction])."""
EVIDENCE = ("independent", "exploratory", "recomputed", "consistency", "measured")
"""What a row proves (see [`tl_geometry.runs.reproduction`][tl_geometry.runs.reproduction])."""


@dataclass(frozen=True)
class ReproRow:
    """One published figure next to ours.

    Attributes:
        id: stable identifier (``family.check.item``).
        family: a family that declares checks ("capacity", "pga", "intrinsic_dimension", "interaction", "sae", or a plugin's).
        figure: what the paper published, and where.
        paper: the published value (a number, or text such as a range).
        ours: our value (a number, text, or None when not run).
        tolerance: relative tolerance on Δ for "reproduced" (None: not a numeric comparison).
        status: one of [`STATUSES`][tl_geometry.runs.reproduction_rows.STATUSES].
        evidence: what the row proves, one of [`EVIDENCE`][tl_geometry.runs.reproduction_rows.EVIDENCE]: "independent" (our simulation,
            training or measurement gives the paper's number, its comparison value never an input nor
            a target chosen after seeing it), "exploratory" (a probe tuned after a published setting
            missed: it shows what could produce the paper's number, not that we reproduce it),
            "recomputed" (a closed formula
            re-evaluated on the paper's printed inputs), "consistency" (cannot fail unless the code is
            wrong or the rows it follows differ: a rule or arithmetic applied to printed numbers, or
            a fit to the same cells other rows compare), "measured" (ours; no paper value to compare,
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
        if self.family not in families_with_checks():
            raise InputError(f"family must be one of {families_with_checks()}, got {self.family!r}")
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
        if is_num(self.paper) and is_num(self.ours) and self.paper != 0:
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


def is_num(x: Any) -> bool:
    """Whether ``x`` is a finite real number (not a bool)."""
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
    if not (is_num(ours) and is_num(paper)):
        return "differs"
    return "reproduced" if abs(float(ours) - float(paper)) <= tol * abs(float(paper)) * (1 + 1e-9) else "differs"


def make_row(
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
    tol_basis=None,
):
    """Build a [`ReproRow`][tl_geometry.runs.reproduction_rows.ReproRow]; status from the tolerance unless given; ``why`` is appended when it differs.

    ``tol_basis`` says what uncertainty the tolerance comes from (kept in ``sizes["tolerance_basis"]``;
    [`supported_tolerance`][tl_geometry.runs.reproduction_rows.supported_tolerance] reads it):
    ``{"kind": "printed digits", "printed": "3.99e7"}``, ``{"kind": "stderr", "k": 2, "se": [...]}``
    (absolute standard errors of the two sides, combined in quadrature), ``{"kind": "absolute",
    "atol": 1e-3, "why": ...}`` or ``{"kind": "grid", "grid": [...]}`` (a location on the grid run)."""
    family = id.split(".", 1)[0]
    if tol_basis is not None:
        sizes = {**(sizes or {}), "tolerance_basis": dict(tol_basis)}
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


def published_row(id, figure, paper_text, ours, *, evidence, note="", preset="", sizes=None, why="", tol=None):
    """A row whose paper value and tolerance come from the printed text (see [`published_tolerance`][tl_geometry.runs.reproduction_rows.published_tolerance])."""
    paper, t = published_tolerance(paper_text)
    if tol is None and _significant_digits(paper_text) == 1:
        note = (f"{note}; " if note else "") + (
            f"only the leading digit of {paper_text} is checked (±{t:.0%}): the paper truncates rather than "
            "rounds, so half a unit would fail correct values"
        )
    return make_row(
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
        tol_basis={"kind": "printed digits", "printed": str(paper_text)} if tol is None else None,
    )


def _significant_digits(text: str) -> int:
    mant = str(text).strip().lower().partition("e")[0].lstrip("+-")
    digits = mant.replace(".", "").lstrip("0")
    return len(digits) or 1


def printed_unit(x: float) -> float:
    """One unit of the last digit of ``x`` as Python prints it (``repr``), relative to |x|.

    Examples:
        >>> printed_unit(2e20), round(printed_unit(1.293), 6)
        (0.5, 0.000773)
    """
    return published_tolerance(repr(float(x)).replace("e+", "e"))[1]


def supported_tolerance(row: ReproRow) -> float | None:
    """The largest relative tolerance the row's stated uncertainty supports (None: nothing stated).

    By ``row.sizes["tolerance_basis"]`` (see [`make_row`][tl_geometry.runs.reproduction_rows.make_row]):
    printed digits → one unit of the last printed digit (plus ``inputs_rounding``, the rounding of
    the printed inputs carried through the formula, where stated); stderr → k·√(Σ se²)/|paper| with k ≤ 3;
    absolute → atol/|paper|; grid → just under the distance from the paper's value to the second
    nearest grid point (the tolerance may admit one grid point only). A row with no basis and a
    numeric paper value is held to one unit of the digits its paper value prints with.
    """
    if row.tolerance is None or not is_num(row.paper) or float(row.paper) == 0:
        return None
    paper = abs(float(row.paper))
    basis = (row.sizes or {}).get("tolerance_basis")
    if not basis:
        return printed_unit(float(row.paper))
    kind = basis.get("kind")
    if kind == "printed digits":  # plus, where stated, the rounding of the printed inputs carried through
        return published_tolerance(basis["printed"])[1] + float(basis.get("inputs_rounding", 0.0))
    if kind == "stderr":
        k = float(basis.get("k", 2.0))
        if k > 3.0:
            return 0.0  # more than 3 standard errors is not a tolerance the noise supports
        se = [float(x) for x in basis["se"]]
        return k * math.sqrt(sum(x * x for x in se)) / paper
    if kind == "absolute":
        return float(basis["atol"]) / paper
    if kind == "grid":
        d = sorted(abs(float(g) - paper) / paper for g in basis["grid"])
        return d[1] * (1 - 1e-9) if len(d) > 1 else math.inf
    raise InputError(f"unknown tolerance basis {kind!r} (row {row.id!r})")


RECLASSIFIED: tuple[tuple[str, str, str, str], ...] = (
    (
        "capacity.packing.variant.*_p20",
        "independent",
        "exploratory",
        "p = 20 was chosen after the published schedule missed the authors' cell: a tuned probe",
    ),
    (
        "capacity.packing.subset_fit.*",
        "independent",
        "consistency",
        "fits to the same cells whose means the cell rows already compare; the adjusted form's C 'paper' "
        "column is our own fit of the authors' cells, and its MAPE matches whenever the cells share a shape",
    ),
    (
        "interaction.toy.peak_T",
        "independent",
        "independent",
        "merged with interaction.toy.interior_peak (the same bit counted twice): reproduced only if the "
        "test-loss peak is interior and within the grid tolerance of T = 500",
    ),
)
"""(row id pattern, class before, class now, why): the rows issue 35 reclassified or merged; a run lists the ones it has in ``meta["reclassified"]``."""


def reclassified(rows: Iterable[ReproRow]) -> list[dict[str, str]]:
    """The rows of a run whose class changed (or that were merged), with the class before and why."""
    from fnmatch import fnmatchcase

    out = []
    for r in rows:
        for pat, before, now, why in RECLASSIFIED:
            if fnmatchcase(r.id, pat):
                out.append({"id": r.id, "before": before, "now": r.evidence, "expected": now, "why": why})
                break
    return out


def families_with_checks() -> tuple[str, ...]:
    """The registered families that declare reproduce checks (``FamilySpec.checks``), in section order."""
    from tl_geometry import registry

    return tuple(f.name for f in registry.families() if f.checks)


_HEADLINE_WORDS = {
    "exploratory": {"reproduced": "match (tuned: not counted)", "differs": "miss"},
    "recomputed": {"reproduced": "match", "differs": "differ"},
    "consistency": {"reproduced": "hold", "differs": "follow a difference"},
    "measured": {"measured": "shown"},
}
"""How a status reads in the headline of each evidence class: only "independent" rows are called reproduced ("consistency" rows hold, or miss only where the code is wrong or where the rows they follow differ: "follow a difference", the note says which)."""


def evidence_counts(rows: Iterable[ReproRow]) -> dict[str, dict[str, int]]:
    """{evidence class: {status: n}} in [`EVIDENCE`][tl_geometry.runs.reproduction_rows.EVIDENCE] / `STATUSES` order, non-empty only."""
    rows = list(rows)
    out: dict[str, dict[str, int]] = {}
    for ev in EVIDENCE:
        per = {s: sum(r.evidence == ev and r.status == s for r in rows) for s in STATUSES}
        per = {s: n for s, n in per.items() if n}
        if per:
            out[ev] = per
    return out


def headline(rows: Iterable[ReproRow]) -> str:
    """ "reproduced (independent rows only): 6 of 7 compared; independent: 6 reproduced, 1 differs;
    exploratory: 1 match (tuned: not counted); recomputed: 58 match; consistency: 23 hold; measured: 11 shown".

    Each evidence class is counted apart and only ``independent`` rows count as reproduced: a
    recomputed row that matches re-evaluates the paper's own inputs, an exploratory one was tuned
    after seeing the paper's number, a "consistency" row follows from others, and a "measured"
    row compares nothing.
    """
    rows = list(rows)
    ind = [r for r in rows if r.evidence == "independent" and r.status in ("reproduced", "differs")]
    n_rep = sum(r.status == "reproduced" for r in ind)
    parts = [f"reproduced (independent rows only): {n_rep} of {len(ind)} compared"]
    for ev, per in evidence_counts(rows).items():
        words = _HEADLINE_WORDS.get(ev, {})
        parts.append(f"{ev}: " + ", ".join(f"{n} {words.get(s, s)}" for s, n in per.items()))
    return "; ".join(parts)
