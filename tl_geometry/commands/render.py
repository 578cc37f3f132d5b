"""``tl-geometry render``: turn a saved ``report.json`` into figures, ``report.md`` and ``index.html``.

Useful after an interrupted run (the partial report is kept and marked), to re-draw a report
computed elsewhere, or to put several reports on one page::

    tl-geometry render reports/smollm2-135m/report.json --out reports/smollm2-135m-html

Several reports are combined only when they do not measure the same thing: two files holding
rows of one metric for one model (two runs of the same model, e.g. a full run and a ``--fast``
one) are refused, since their layers would be drawn as one zig-zag line under one run's
provenance. The page's status is the worst of the inputs' (a partial input makes it partial),
and every input's provenance is kept under ``sources``.

A report whose ``schema_version`` is newer than this version reads (1) is refused, naming the
file, rather than drawn as if its fields meant what they mean here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tl_geometry.errors import InputError

if TYPE_CHECKING:
    from tl_geometry.report import GeometryReport


#: The figure resolutions render accepts: a 11 x 7 inch figure at 600 dpi is 28 megapixels.
MIN_DPI, MAX_DPI = 10, 600


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "render", help="render saved report.json file(s) into PNG figures, report.md and index.html"
    )
    p.add_argument(
        "reports",
        nargs="+",
        help="report.json file(s); several are combined when they hold different models or metrics "
        "(two runs of the same model are refused)",
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--force", action="store_true", help="write into an existing non-empty directory (other files are kept)"
    )
    p.add_argument("--dpi", type=int, default=110, help=f"figure resolution, {MIN_DPI} to {MAX_DPI} (default 110)")
    p.add_argument(
        "--no-figures",
        action="store_true",
        help="skip the PNG figures (report.json, report.md and index.html are still written; needs no matplotlib)",
    )
    p.set_defaults(func=run)


_STATUS_ORDER = ("interrupted", "running", "partial", "complete")
"""Worst first: the combined report takes the worst status of its inputs."""


def combine(reports, paths) -> GeometryReport:
    """One report from several, refusing two that hold the same metric for the same model.

    Raises:
        ValueError: a file given twice, or two reports with rows of one (model, metric).
    """
    from tl_geometry.report import GeometryReport

    resolved = [str(Path(p).resolve()) for p in paths]
    twice = sorted({p for p in paths if resolved.count(str(Path(p).resolve())) > 1})
    if twice:
        raise InputError(f"report file(s) given more than once: {twice}")
    if len(reports) == 1:
        return reports[0]
    owner: dict[tuple[str, str], str] = {}
    for rep, path in zip(reports, paths):
        keys = {(r.model, r.metric) for r in rep.rows}
        clash = sorted(k for k in keys if k in owner)
        if clash:
            other = owner[clash[0]]
            metrics = sorted({m for _, m in clash})
            shown = ", ".join(metrics[:4]) + (f" and {len(metrics) - 4} more" if len(metrics) > 4 else "")
            raise InputError(
                f"{other} and {path} both hold {shown} for model {clash[0][0]}: they are separate runs of the "
                f"same model and would be drawn as one; render each into its own --out "
                f"(several reports are combined only when their models or metrics differ)"
            )
        for k in keys:
            owner[k] = path
    statuses = [rep.provenance.get("status") for rep in reports]
    known = [s for s in statuses if s in _STATUS_ORDER]
    errors: dict = {}
    for rep in reports:
        errors.update(rep.provenance.get("errors") or {})
    sources = [{"file": path, **dict(rep.provenance)} for rep, path in zip(reports, paths)]
    merged = GeometryReport.merge(*reports)
    # A field the inputs disagree on (corpus, seed, n_layers, ...) is not the page's: keep it
    # only under sources, never one run's value for all.
    prov = {}
    for key in merged.provenance:
        values = [rep.provenance[key] for rep in reports if key in rep.provenance]
        if all(v == values[0] for v in values):
            prov[key] = values[0]
    prov["sources"] = sources
    prov["model"] = ", ".join(dict.fromkeys(str(rep.provenance.get("model", "?")) for rep in reports))
    prov["errors"] = errors
    if known:
        prov["status"] = min(known, key=_STATUS_ORDER.index)
    if known and prov["status"] != "complete":
        prov["missing_metrics"] = sorted({m for rep in reports for m in rep.provenance.get("missing_metrics") or []})
        prov["partial_sources"] = [p for p, s in zip(paths, statuses) if s not in (None, "complete")]
    for field in ("timings_s", "total_s", "load_s"):  # one run's numbers would be read as the page's
        prov.pop(field, None)
    return GeometryReport(rows=merged.rows, provenance=prov)


def run(args) -> int:
    import json

    from tl_geometry.commands.report import _figures_or_note
    from tl_geometry.io.outdir import check_out_dir, check_writable
    from tl_geometry.render.html import write_outputs
    from tl_geometry.render.readings import summary_table
    from tl_geometry.report import GeometryReport

    if not MIN_DPI <= args.dpi <= MAX_DPI:
        raise InputError(
            f"--dpi must be from {MIN_DPI} to {MAX_DPI}, got {args.dpi} (a figure at --dpi 100000 would need "
            "tens of gigabytes)"
        )
    check_out_dir(args.out, force=args.force, force_hint="--force")  # refuse before reading anything
    check_writable(args.out)
    reports = []
    for path in args.reports:
        try:
            reports.append(GeometryReport.from_json(path))
        except json.JSONDecodeError as exc:
            raise InputError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
        except InputError as exc:  # e.g. a schema_version newer than this version reads
            raise InputError(f"{path}: {exc}") from None
    report = combine(reports, list(args.reports))
    figures = _figures_or_note(args.no_figures)
    index = write_outputs(report, args.out, force=args.force, dpi=args.dpi, figures=figures, force_hint="--force")
    print(summary_table(report))
    print(
        f"\nwrote {index.parent}/report.json, report.md, index.html and {len(list(index.parent.glob('*.png')))} figure(s)"
    )
    status = report.provenance.get("status")
    if status not in (None, "complete"):
        print(f"status: {status} (the page carries a partial-results banner)", file=sys.stderr)
    return 0
