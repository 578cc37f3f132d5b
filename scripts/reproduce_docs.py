#!/usr/bin/env python
"""Put the table of a ``tl-geometry reproduce`` run into ``docs/reproduce.md``.

    tl-geometry reproduce all --out out/repro          # the CPU run (minutes)
    python scripts/reproduce_docs.py out/repro         # rewrite the "Last CPU run" section, copy figures

Replaces the text between ``<!-- reproduce:begin -->`` and ``<!-- reproduce:end -->`` in
``docs/reproduce.md`` with the run's header and one table per family (the per-model rows of the
capacity paper's Table 1 folded into a collapsible block), and copies the run's figures to
``docs/img/reproduce_*.png``. It reads ``OUT/reproduce.json`` only (plain JSON, no pickle).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- reproduce:begin -->", "<!-- reproduce:end -->"


def section(data: dict, figures: list[str]) -> str:
    from tl_geometry.runs.reproduction import (
        EVIDENCE,
        EVIDENCE_MEANING,
        FAMILIES,
        ReproRow,
        _fmt_delta,
        fmt,
        fmt_paper,
        headline,
    )

    rows = [ReproRow.from_dict(r) for r in data["rows"]]
    total = sum(v or 0 for v in data["seconds_per_check"].values())
    out = [
        f"tl_geometry {data['tl_geometry_version']} at commit `{(data.get('git_commit') or 'unknown')[:12]}`, "
        f"size **{data['size']}**, device {data['device']}, finished {data['finished_utc']}; "
        f"{total:.0f} s of checks ({', '.join(f'{k} {v:.0f} s' for k, v in data['seconds_per_check'].items() if v and v >= 1)}).",
        "",
        f"**{len(rows)} rows — {headline(rows)}.**",
        "",
        *(f"* *{ev}*: {EVIDENCE_MEANING[ev]}" for ev in EVIDENCE),
        "",
    ]

    def line(r):
        note = f"[{r.preset}] {r.note}".strip() if r.preset else r.note
        return (
            f"| {r.figure.replace('|', '/')} | {fmt_paper(r)} | {fmt(r.ours)} | {_fmt_delta(r.delta)} | {r.status} | "
            f"{r.evidence} | {note.replace('|', '/')} |"
        )

    head = ["| figure | paper | ours | Δ | status | evidence | note |", "|---|---|---|---|---|---|---|"]
    for fam in FAMILIES:
        fr = [r for r in rows if r.family == fam]
        if not fr:
            continue
        table1 = [r for r in fr if r.id.startswith("capacity.table1.")]
        rest = [r for r in fr if r not in table1]
        out += [f"### {fam}", "", *head, *map(line, rest), ""]
        if table1:
            n_ok = sum(r.status == "reproduced" and r.evidence == "recomputed" for r in table1)
            n_hold = sum(r.status == "reproduced" and r.evidence == "consistency" for r in table1)
            out += [
                f"??? note \"Table 1, per model: {n_ok} counts recomputed, {n_hold} 'indeterminate' hold "
                f'(of {len(table1)})"',
                "",
            ]
            out += ["    " + x for x in (*head, *map(line, table1))]
            out.append("")
    for f in figures:
        out += [f"![{f}](img/{f})", ""]
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    run = Path(argv[0])
    data = json.loads((run / "reproduce.json").read_text(encoding="utf-8"))
    figures = []
    for png in sorted((run / "figures").glob("*.png")):
        name = f"reproduce_{png.name}"
        shutil.copyfile(png, ROOT / "docs" / "img" / name)
        figures.append(name)
    page = ROOT / "docs" / "reproduce.md"
    text = page.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"{page} has no {BEGIN} … {END} markers", file=sys.stderr)
        return 2
    a, rest = text.split(BEGIN, 1)
    _, b = rest.split(END, 1)
    page.write_text(a + BEGIN + "\n" + section(data, figures) + END + b, encoding="utf-8")
    print(f"wrote {page} ({len(data['rows'])} rows) and {len(figures)} figures")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
