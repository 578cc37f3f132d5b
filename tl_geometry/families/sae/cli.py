"""``tl-geometry sae``: published SAE widths (sae_lens) and their comparison with the capacity bound.

    tl-geometry sae widths [--model M] [--release R ...] [--config cache|hub|none] [--json PATH] [--all]
    tl-geometry sae compare --model M [--release R ...] [--sae PATH|REPO:ID ...] [--form full]
                            [--out report.json] [--figure widths.png]

``--model`` for ``compare`` is a model name in the capacity paper's published ε table
(``gemma-2-2b``, ``meta-llama/Llama-3.1-8B``, ...) or, when it is not there, a name that
``tl_geometry.models.load`` knows (its ε is then measured from W_E).
"""

from __future__ import annotations

import json
from collections import Counter

from tl_geometry.errors import InputError, TLGeometryError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("sae", help="SAE widths from sae_lens vs the capacity bound")
    sub = p.add_subparsers(dest="sae_command", required=True)

    w = sub.add_parser("widths", help="list SAE widths of sae_lens's pretrained directory")
    w.add_argument("--model", default=None, help="only SAEs of this model (sae_lens model name)")
    w.add_argument("--release", action="append", default=None, help="only this release (repeatable)")
    w.add_argument(
        "--config",
        choices=("cache", "hub", "none"),
        default="cache",
        help="read SAE configs from the local HF cache (default), the hub, or not at all",
    )
    w.add_argument("--json", default=None, help="write every row as JSON to this path")
    w.add_argument("--all", action="store_true", help="print every SAE, not one line per release")
    w.add_argument("--force", action="store_true", help="replace an existing --json file")
    w.set_defaults(func=_widths)

    c = sub.add_parser("compare", help="SAE widths against the model's capacity bound (+ figure)")
    c.add_argument("--model", required=True, help="published-table name or a tl_geometry.models name")
    c.add_argument("--release", action="append", default=None, help="only this release (repeatable)")
    c.add_argument(
        "--sae",
        "--sae-path",
        dest="sae_path",
        action="append",
        default=None,
        metavar="PATH|REPO:ID",
        help="an SAE to measure (repeatable): a directory saved by sae_lens, or REPO:ID of a Hugging "
        "Face repository in the local cache (loaded with SAE.from_pretrained, offline)",
    )
    c.add_argument("--form", default="full", choices=("full", "adjusted", "jl", "jl_random"))
    c.add_argument("--config", choices=("cache", "hub", "none"), default="cache")
    c.add_argument("--out", default=None, help="write the GeometryReport JSON here")
    c.add_argument("--figure", default=None, help="write the widths-vs-bound figure here (png/pdf/svg)")
    c.add_argument("--force", action="store_true", help="replace existing --out / --figure files")
    c.set_defaults(func=_compare)


def _widths(args) -> int:
    from tl_geometry.families import sae
    from tl_geometry.io import outdir

    if args.json:
        outdir.check_out_file(args.json, force=args.force, what="--json file")
    rows = sae.widths(args.model, releases=args.release, config=args.config)
    summary = sae.width_summary(rows)
    if args.json:
        text = json.dumps({"summary": summary, "rows": [r.to_dict() for r in rows]}, indent=1)
        outdir.write_file(args.json, text, force=args.force, what="--json file")
    if args.all:
        for r in rows:
            print(f"{r.release}\t{r.sae_id}\t{r.model}\t{r.hook_name or ''}\t{r.d_sae or ''}\t{r.width_source}")
    else:
        by_release: dict[str, list] = {}
        for r in rows:
            by_release.setdefault(r.release, []).append(r)
        print(f"{'release':<52} {'model':<30} {'n':>5}  widths (source)")
        for rel, rs in by_release.items():
            ws = sorted({r.d_sae for r in rs if r.d_sae})
            src = Counter(r.width_source for r in rs)
            wtxt = ", ".join(f"{w:,}" for w in ws[:6]) + (" ..." if len(ws) > 6 else "") or "?"
            print(f"{rel:<52} {rs[0].model:<30} {len(rs):>5}  {wtxt} ({', '.join(f'{k} {v}' for k, v in src.items())})")
    print(f"{summary['n']} SAEs; width source: {summary['by_source']}")
    if summary["unknown"]:
        print("unknown width: " + ", ".join(f"{k} ({len(v)})" for k, v in summary["unknown"].items()))
    return 0


def _compare(args) -> int:
    from tl_geometry.families import sae
    from tl_geometry.io import outdir

    if args.out:  # checked before any model is loaded
        outdir.check_out_file(args.out, force=args.force, what="report file")
    if args.figure:
        outdir.check_out_file(args.figure, force=args.force, what="figure file")
    target = args.model
    if sae.published_host(args.model) is None:
        from tl_geometry import models

        try:
            target = models.load(args.model)
        except (TLGeometryError, OSError) as exc:  # unknown to both the table and the zoo: one-line reason
            raise InputError(
                f"{args.model!r} is neither in the published ε table nor loadable by tl_geometry.models "
                f"({type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]})"
            ) from exc
    rep = sae.compare(target, releases=args.release, saes=args.sae_path, form=args.form, config=args.config)
    eps = rep.filter("epsilon.W_E").rows[0]
    cap = rep.filter("capacity.W_E").rows[0]
    ce = cap.extras
    cap_text = f"{cap.value:.4g}" if ce.get("status", "count") == "count" else f"indeterminate ({ce.get('reason')})"
    print(
        f"model {rep.provenance.get('model')}: d_model {eps.extras.get('d')}, ε(W_E) = {eps.value:.5f} "
        f"({eps.extras.get('epsilon_source')}, {eps.extras.get('model_class')}), "
        f"capacity ({args.form} form, preset {ce.get('preset', 'paper')}) = {cap_text}"
    )

    def key(r):
        return (r.extras.get("release"), r.extras.get("sae_id"))

    d_sae = {key(r): r.value for r in rep.filter("sae.d_sae").rows}
    shared = {key(r): r.value for r in rep.filter("sae.shared_ratio").rows}
    by_release: dict[str | None, list] = {}
    for r in rep.filter("sae.capacity_ratio").rows:
        by_release.setdefault(r.extras.get("release"), []).append(r)
    tied = next((r.extras.get("tied") for r in rep.filter("sae.shared_ratio").rows), None)
    shared_head = "max (V+d_sae)/k" if tied is True else "max (2V+d_sae)/k" if tied is False else "max shared/k"
    if not by_release:
        from tl_geometry.families.sae.reading import no_sae_note

        print(no_sae_note(rep, hint="pass --sae PATH|REPO:ID") or "no SAE to compare")
    else:
        print(f"{'release':<52} {'n':>5} {'max d_sae':>10} {'max d_sae/k':>12} {shared_head:>16}  verdict")
    for rel, rs in by_release.items():
        ratio = max((r.value for r in rs), default=float("nan"))
        share = max((shared[key(r)] for r in rs), default=float("nan"))
        verdicts = sorted({str(r.extras.get("verdict")) for r in rs})
        print(
            f"{rel:<52} {len(rs):>5} {max(d_sae[key(r)] for r in rs):>10,.0f} {ratio:>12.4g} "
            f"{share:>16.4g}  {', '.join(verdicts)}"
        )
    _explain_nan(rep)
    table = sae.comparison.decoder_table(rep)  # the measured SAEs (--sae): decoder ε, class, capacity status
    if table:
        print(table)
    print(
        f"{rep.provenance.get('sae_n')} SAEs with a width; {rep.provenance.get('sae_n_unknown_width')} of unknown width skipped"
    )
    print(
        "shared ratio (capacity paper, Eq. 2): (2V + d_sae) / k for untied hosts, (V + d_sae) / k for tied ones"
        + ("" if tied is not None else "; tied unknown for this host: not computed")
    )
    if args.out:
        outdir.write_file(args.out, rep.to_json(), force=args.force, what="report file")
        print(f"report: {args.out}")
    if args.figure:
        from tl_geometry.render.plotting import pyplot

        pyplot()  # the one place that picks matplotlib's backend (Agg outside Jupyter)
        with outdir.output_file(args.figure, force=args.force, what="figure file") as tmp:
            sae.plot_sae_widths(rep, path=tmp)
        print(f"figure: {args.figure}")
    return 0


def _explain_nan(rep) -> None:
    """Print, under the table, why a column reads nan (each distinct reason once)."""
    from tl_geometry.render.readings import nan_reason

    columns = {"sae.capacity_ratio": "d_sae/k", "sae.shared_ratio": "shared/k"}
    seen: dict[str, list[str]] = {}
    for metric, col in columns.items():
        for r in rep.filter(metric).rows:
            why = nan_reason(r)
            if why and col not in seen.setdefault(why, []):
                seen[why].append(col)
    for why, cols in seen.items():
        print(f"nan in {' and '.join(cols)}: {why}")
