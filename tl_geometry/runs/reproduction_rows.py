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
]

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
"""A row's status (see [`tl_geometry.runs.reproduction`][tl_geometry.runs.reproduction])."""
EVIDENCE = ("independent", "recomputed", "consistency", "measured")
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
):
    """Build a [`ReproRow`][tl_geometry.runs.reproduction_rows.ReproRow]; status from the tolerance unless given; ``why`` is appended when it differs."""
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


def published_row(id, figure, paper_text, ours, *, evidence, note="", preset="", sizes=None, why="", tol=None):
    """A row whose paper value and tolerance come from the printed text (see [`published_tolerance`][tl_geometry.runs.reproduction_rows.published_tolerance])."""
    paper, t = published_tolerance(paper_text)
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
    )


def families_with_checks() -> tuple[str, ...]:
    """The registered families that declare reproduce checks (``FamilySpec.checks``), in section order."""
    from tl_geometry import registry

    return tuple(f.name for f in registry.families() if f.checks)


_HEADLINE_WORDS = {"consistency": {"reproduced": "hold", "differs": "fail"}, "measured": {"measured": "shown"}}
"""How a status reads in the headline of each evidence class ("consistency" rows cannot fail: they hold or, if the code is wrong, fail)."""


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
    """ "independent: 6 reproduced, 1 differs; recomputed: 58 reproduced; consistency: 23 hold; measured: 11".

    Each evidence class is counted apart: a "consistency" row that holds is not a reproduction,
    and a "measured" row compares nothing.
    """
    parts = []
    for ev, per in evidence_counts(rows).items():
        words = _HEADLINE_WORDS.get(ev, {})
        parts.append(f"{ev}: " + ", ".join(f"{n} {words.get(s, s)}" for s, n in per.items()))
    return "; ".join(parts)
