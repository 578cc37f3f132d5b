"""The markdown of a reproduce run (``OUT/reproduce.md``) and the value formats its tables use.

[`ReproduceResult.to_markdown`][tl_geometry.runs.reproduction.ReproduceResult.to_markdown] renders with [`markdown`][tl_geometry.runs.reproduction_markdown.markdown];
``scripts/reproduce_docs.py`` builds the docs' table from the same cells ([`fmt`][tl_geometry.runs.reproduction_markdown.fmt],
[`fmt_paper`][tl_geometry.runs.reproduction_markdown.fmt_paper], the Δ column and [`EVIDENCE_MEANING`][tl_geometry.runs.reproduction_markdown.EVIDENCE_MEANING]).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tl_geometry.base.numbers import fmt_number
from tl_geometry.runs.reproduction_rows import EVIDENCE, ReproRow, families_with_checks, headline

__all__ = ["fmt", "fmt_paper", "EVIDENCE_MEANING", "markdown"]


def fmt(x: Any) -> str:
    """A value for the table ([`fmt_number`][tl_geometry.base.numbers.fmt_number]): 6 significant digits,
    scientific (4 digits) from 10⁶ and below 10⁻³, an integer with its thousands separated, ``None`` as "—"."""
    return fmt_number(x, 6, sci_digits=3, big=1e6, none="—", ints="grouped")


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
    "independent": "our simulation, training or measurement gives the paper's number, which was never an input nor a "
    "target chosen after seeing it (the only rows counted as reproduced)",
    "exploratory": "a probe tuned after a published setting missed: what could produce the paper's number, not a "
    "reproduction",
    "recomputed": "a closed formula re-evaluated on the paper's printed inputs (or a fit of the authors' data)",
    "consistency": "a rule or arithmetic applied to printed numbers, or a fit to the same cells other rows compare: cannot fail unless our code is wrong or those rows differ",
    "measured": "ours, with no paper value to compare (a reference for other models in parentheses)",
}
"""One line per evidence class for the tables' legend."""


def _reclassified_lines(items: list[dict]) -> list[str]:
    """The rows whose evidence class changed (``meta["reclassified"]``), one bullet each, or nothing."""
    if not items:
        return []
    out = ["Rows reclassified so that no label flatters (class before → now):", ""]
    out += [f"* `{x['id']}`: {x['before']} → {x['now']} ({x['why']})" for x in items]
    return out + [""]


def markdown(rows: Iterable[ReproRow], meta: dict) -> str:
    """``OUT/reproduce.md``: the run's header and headline, the evidence legend, one table per family
    (in section order) and the wall time per check."""
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
        *_reclassified_lines(meta.get("reclassified") or []),
        "Δ = (ours − paper) / |paper|; *reproduced* means |Δ| within the row's tolerance (default: one unit of "
        "the last digit the paper printed).",
        "",
    ]
    for fam in families_with_checks():
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
