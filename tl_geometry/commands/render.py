"""``tl-geometry render``: turn a saved ``report.json`` into figures, ``report.md`` and ``index.html``.

Useful after an interrupted run (the partial report is kept and marked), to re-draw a report
computed elsewhere, or to merge several reports into one page::

    tl-geometry render reports/smollm2-135m/report.json --out reports/smollm2-135m-html
"""

from __future__ import annotations


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("render", help="render saved report.json file(s) into PNG figures, report.md and index.html")
    p.add_argument("reports", nargs="+", help="report.json file(s); several are merged into one report")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--force", action="store_true", help="write into an existing non-empty directory (other files are kept)")
    p.add_argument("--dpi", type=int, default=110, help="figure resolution (default 110)")
    p.set_defaults(func=run)


def run(args) -> int:
    import json

    from tl_geometry.html import check_out_dir, write_outputs
    from tl_geometry.readings import summary_table
    from tl_geometry.report import GeometryReport

    if args.dpi < 10:
        raise ValueError(f"--dpi must be at least 10, got {args.dpi}")
    check_out_dir(args.out, force=args.force)  # refuse before reading anything
    reports = []
    for path in args.reports:
        try:
            reports.append(GeometryReport.from_json(path))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    report = reports[0] if len(reports) == 1 else GeometryReport.merge(*reports)
    index = write_outputs(report, args.out, force=args.force, dpi=args.dpi)
    print(summary_table(report))
    print(f"\nwrote {index.parent}/report.json, report.md, index.html and {len(list(index.parent.glob('*.png')))} figure(s)")
    return 0
