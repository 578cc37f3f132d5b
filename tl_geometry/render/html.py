"""The report a researcher reads: self-contained ``index.html``, ``report.md``, PNG figures.

[`write_outputs`][tl_geometry.render.html.write_outputs] is what ``tl-geometry report`` calls at the end of a run::

    out = tg.html.write_outputs(report, "reports/smollm2-135m")
    # reports/smollm2-135m/{report.json, report.md, index.html, *.png}

``index.html`` embeds every figure as a base64 PNG data URI, so the single file can be mailed
or attached; next to each figure it prints a short plain-language reading of the numbers and the
papers' published numbers ([`tl_geometry.render.readings`][tl_geometry.render.readings]). The sections and the figures in each are
the registered families' declarations ([`tl_geometry.registry.families`][tl_geometry.registry.families]: title, reading,
figures), plugins included; a section appears only when its rows are present; a report whose
provenance says it is partial (``partial``/``interrupted``) gets a banner.
"""

from __future__ import annotations

import base64
import html as _html
import os
from collections.abc import Mapping
from pathlib import Path

from tl_geometry.base.numbers import fmt_number
from tl_geometry.io.outdir import OutputExistsError, check_out_dir  # noqa: F401 - public here since 0.1
from tl_geometry.render.readings import axis_label, model_line, sections
from tl_geometry.report import GeometryReport, atomic_write_text, format_value, provenance_markdown

__all__ = [
    "OutputExistsError",
    "check_out_dir",
    "figure_data_uris",
    "render_html",
    "render_into",
    "render_markdown",
    "write_html",
    "write_outputs",
    "OUTPUT_FILES",
]

OUTPUT_FILES = ("report.json", "report.md", "index.html")


def _sections(report: GeometryReport, figures) -> list[tuple[str, list[str], list]]:
    """``[(title, sentences, [FigureSpec])]``: one section per declared family (in section
    order) that has sentences (its reading) or figures among ``figures`` (names)."""
    from tl_geometry import registry

    readings = sections(report)
    out = []
    for fam in registry.families():
        lines = readings.get(fam.section, []) if fam.read is not None else []
        shown = [f for f in fam.figures if f.name in figures]
        if lines or shown:
            out.append((fam.section, lines, shown))
    return out


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
.banner{background:#fff3cd;border:1px solid #e0c36c;padding:.6em 1em;border-radius:4px}
ul.reading li{margin:.25em 0} figure{margin:1em 0} figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#555;font-size:.9em}
table{border-collapse:collapse;font-size:.85em} td,th{border:1px solid #ddd;padding:2px 6px;text-align:left}
th{background:#f6f6f6} td.num{text-align:right;font-variant-numeric:tabular-nums}
details{margin-top:1em} .prov td:first-child{font-weight:600}
table.kv{font-size:1em;margin:1px 0} table.kv td:first-child{font-weight:400;color:#555}
"""


def _fmt(v: float) -> str:
    """A table cell of report.md / index.html: 4 significant digits (the one formatter)."""
    return fmt_number(v, 4)


def _partial_note(report: GeometryReport) -> str | None:
    """Banner text when provenance marks the run incomplete, else None.

    Recognized: ``status`` in {"interrupted", "partial", "running"} (what
    [`tl_geometry.runs.pipeline.run_report`][tl_geometry.runs.pipeline.run_report] records), or ``partial`` / ``interrupted`` flags;
    ``errors`` ({metric: message}) and ``missing_metrics`` are listed.
    """
    prov = report.provenance
    status = prov.get("status")
    if not (status in ("interrupted", "partial", "running") or prov.get("partial") or prov.get("interrupted")):
        return None
    why = {
        "interrupted": "the run was interrupted before every metric finished.",
        "running": "the run had not finished when this was written.",
        "partial": "some metrics failed.",
    }.get(str(status), "the run was interrupted or some metrics failed.")
    text = f"This report is partial: {why}"
    missing = prov.get("missing_metrics") or prov.get("missing") or []
    if missing:
        text += f" Missing: {', '.join(map(str, missing))}."
    errors = prov.get("errors") or {}
    if isinstance(errors, dict) and errors:
        text += " Errors: " + "; ".join(f"{k}: {v}" for k, v in errors.items()) + "."
    return text


def _esc(x) -> str:
    return _html.escape(str(x), quote=True)


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def write_html(report: GeometryReport, out_dir: str | os.PathLike, figures: Mapping[str, str | os.PathLike]) -> Path:
    """Write ``out_dir/index.html``: readings, embedded figures, provenance and the full table.

    Args:
        report: the results.
        out_dir: directory to write into (created if missing; existing ``index.html`` replaced).
        figures: ``{figure name: PNG path}`` as returned by
            [`tl_geometry.render.plotting.save_figures`][tl_geometry.render.plotting.save_figures]; each is embedded as a base64 data URI.

    Returns:
        The path of ``index.html``.

    Raises:
        FileNotFoundError: a figure path does not exist.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figs = {name: Path(p) for name, p in figures.items()}
    missing = [str(p) for p in figs.values() if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"figure files not found: {missing}")
    path = out / "index.html"
    atomic_write_text(path, render_html(report, {name: _data_uri(p) for name, p in figs.items()}))
    return path


def figure_data_uris(report: GeometryReport, *, dpi: int = 110) -> dict[str, str]:
    """``{figure name: PNG data URI}`` of every figure the report has rows for, drawn in memory."""
    import io

    from tl_geometry.render.plotting import available, figures, pyplot

    if not available():  # no plot extra: the report shows without figures
        return {}
    plt = pyplot()
    out = {}
    for name, fig in figures(report).items():
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi)
        plt.close(fig)
        out[name] = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
    return out


def _scoped_css(scope: str) -> str:
    """`_CSS` with every selector prefixed by ``scope`` (``body`` becomes the scope itself),
    so the report's style in a notebook applies to the report only."""
    out = []
    for rule in _CSS.split("}"):
        if "{" not in rule:
            continue
        sel, body = rule.split("{", 1)
        sels = [scope if x.strip() == "body" else f"{scope} {x.strip()}" for x in sel.split(",")]
        out.append(",".join(sels) + "{" + " ".join(body.split()) + "}")
    return "\n".join(out)


def notebook_html(report: GeometryReport) -> str:
    """[`GeometryReport._repr_html_`][tl_geometry.report.GeometryReport]: the page as a fragment, figures inline."""
    return render_html(report, figure_data_uris(report), fragment=True)


def render_html(report: GeometryReport, figures: Mapping[str, str], *, fragment: bool = False) -> str:
    """The report page as HTML text: readings, figures, provenance and the full table.

    Args:
        report: the results.
        figures: ``{figure name: image URI}`` (a PNG data URI, as [`figure_data_uris`][tl_geometry.render.html.figure_data_uris] gives).
        fragment: only the content, in a ``<div>`` with its own scoped style (what
            ``GeometryReport._repr_html_`` shows in a notebook) instead of a whole page.
    """
    figs = dict(figures)
    prov = dict(report.provenance)
    model = prov.get("model") or (report.rows[0].model if report.rows else "?")
    if fragment:
        parts = ['<div class="tl-geometry-report">', f"<style>{_scoped_css('.tl-geometry-report')}</style>"]
    else:
        parts = [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>Geometry report: {_esc(model)}</title>",
            f"<style>{_CSS}</style></head><body>",
        ]
    parts += [
        f"<h1>Geometry report: {_esc(model)}</h1>",
        "<p>How this model's latent space is organized, measured with "
        "<code>tl_geometry</code>: representational capacity (arXiv 2606.02765), Subspace PGA "
        "(arXiv 2605.17084) and the law of neural interaction (arXiv 2605.27989).</p>",
    ]
    line = model_line(report)
    if line:
        parts.append(f"<p><strong>Measured:</strong> {_esc(line)}</p>")
    note = _partial_note(report)
    if note:
        parts.append(f'<p class="banner"><strong>Partial results.</strong> {_esc(note)}</p>')
    used = set()
    secs = _sections(report, figs)
    for title, lines, shown in secs:
        parts.append(f"<h2>{_esc(title)}</h2>")
        if lines:
            parts.append('<ul class="reading">' + "".join(f"<li>{_esc(s)}</li>" for s in lines) + "</ul>")
        for spec in shown:
            used.add(spec.name)
            caption = spec.caption or spec.name
            parts.append(
                f'<figure><img src="{_esc(figs[spec.name])}" alt="{_esc(caption)}">'
                f"<figcaption>{_esc(caption)}</figcaption></figure>"
            )
    rest = [n for n in figs if n not in used]
    if rest:
        parts.append("<h2>Other figures</h2>")
        for name in rest:
            parts.append(
                f'<figure><img src="{_esc(figs[name])}" alt="{_esc(name)}"><figcaption>{_esc(name)}</figcaption></figure>'
            )
    if not secs and not figs:
        parts.append("<p>No rows of the built-in families; see the full table below.</p>")
    parts.append('<h2>Provenance</h2><table class="prov">')
    for k in sorted(prov):
        parts.append(f"<tr><td>{_esc(k)}</td><td>{_html_value(prov[k])}</td></tr>")
    parts.append("</table>")
    parts.append(f"<details><summary>All {len(report.rows)} rows</summary>")
    parts.append(f"<p>{_esc(LAYER_NOTE)}</p><table>")
    parts.append("<tr><th>hook</th><th>layer</th><th>metric</th><th>value</th><th>extras</th></tr>")
    n_layers = _n_layers(report)
    for r in report.rows:
        extras = {k: v for k, v in r.extras.items() if not isinstance(v, (list, dict))}
        parts.append(
            f"<tr><td>{_esc(r.hook or '')}</td><td>{_esc(axis_label(r, n_layers))}</td>"
            f'<td>{_esc(r.metric)}</td><td class="num">{_esc(_fmt(r.value))}</td>'
            f"<td>{_esc(_extras_text(extras))}</td></tr>"
        )
    parts.append("</table></details>" + ("</div>" if fragment else "</body></html>"))
    return "\n".join(parts)


LAYER_NOTE = (
    "layer as on the figures and in the readings: embed = the embeddings (hook_embed, "
    "blocks.0.hook_resid_pre), L = the output of block L (blocks.L.hook_resid_post, or "
    "blocks.L+1.hook_resid_pre, the next block's input), final = after the final norm."
)
"""Under the row tables: what the "layer" column holds (the figures' axis, not ``Row.layer``)."""


def _n_layers(report: GeometryReport) -> int | None:
    n = report.provenance.get("n_layers")
    try:
        return int(n) if n is not None else None
    except (TypeError, ValueError):
        return None


def _extras_text(extras: Mapping) -> str:
    """A row's plain extras as ``key = value; ...`` (no Python dict repr)."""
    return "; ".join(f"{k} = {format_value(v)}" for k, v in extras.items())


def _html_value(v) -> str:
    """A provenance value as HTML: a mapping as a nested key/value table, a list of mappings as
    one nested table per item, anything else as escaped text (`format_value`)."""
    if isinstance(v, Mapping) and v:
        rows = "".join(f"<tr><td>{_esc(k)}</td><td>{_html_value(x)}</td></tr>" for k, x in v.items())
        return f'<table class="kv">{rows}</table>'
    if isinstance(v, (list, tuple)) and any(isinstance(x, Mapping) for x in v):
        return "".join(_html_value(x) for x in v)
    return _esc(format_value(v))


def render_markdown(report: GeometryReport, figures: Mapping[str, str | os.PathLike] | None = None) -> str:
    """``report.md``: the readings per section with relative figure links, then the full table."""
    lines = [f"# Geometry report: {report.provenance.get('model', '?')}", ""]
    if model_line(report):
        lines += [f"Measured: {model_line(report)}", ""]
    note = _partial_note(report)
    if note:
        lines += [f"> **Partial results.** {note}", ""]
    figs = {n: Path(p).name for n, p in (figures or {}).items()}
    for title, sents, shown in _sections(report, figs):
        lines += [f"## {title}", ""] + [f"- {s}" for s in sents] + ([""] if sents else [])
        for spec in shown:
            lines += [f"![{spec.name}]({figs[spec.name]})", ""]
    lines += ["## Provenance", ""] + provenance_markdown(report.provenance)
    lines += [
        "",
        "## All rows",
        "",
        LAYER_NOTE,
        "",
        "| model | hook | layer | metric | value |",
        "|---|---|---|---|---|",
    ]
    n_layers = _n_layers(report)
    for r in report.rows:
        lines.append(f"| {r.model} | {r.hook or ''} | {axis_label(r, n_layers)} | {r.metric} | {_fmt(r.value)} |")
    return "\n".join(lines) + "\n"


def render_into(report: GeometryReport, folder: str | os.PathLike, *, figures: bool = True, dpi: int = 110) -> Path:
    """Write ``report.json``, the PNG figures (with ``figures``), ``report.md`` and ``index.html``
    straight into ``folder`` (no checks, no lock: [`write_outputs`][tl_geometry.render.html.write_outputs] wraps it). Returns index.html."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    report.to_json(folder / "report.json")
    figs = {}
    if figures:
        from tl_geometry.render import plotting

        if plotting.available():
            figs = plotting.save_figures(report, folder, dpi=dpi)
        else:  # the results are computed: write them without figures rather than lose them
            import logging

            logging.getLogger(__name__).warning(plotting.PLOT_EXTRA_NOTE)
    atomic_write_text(folder / "report.md", render_markdown(report, figs))
    return write_html(report, folder, figs)


def figure_files() -> tuple[str, ...]:
    """The PNG names this package writes: ``<figure>.png`` for every declared figure
    ([`tl_geometry.registry.families`][tl_geometry.registry.families], plugins included); needs no matplotlib."""
    from tl_geometry import registry

    return tuple(f.file for fam in registry.families() for f in fam.figures)


def write_outputs(
    report: GeometryReport,
    out_dir: str | os.PathLike,
    *,
    force: bool = False,
    dpi: int = 110,
    figures: bool = True,
    force_hint: str = "force=True",
) -> Path:
    """Write ``report.json``, ``report.md``, one PNG per figure and ``index.html`` into ``out_dir``.

    The files are drawn in ``out_dir/partial-run/`` and installed only when all are written, as
    a whole ([`tl_geometry.io.outdir.Staging`][tl_geometry.io.outdir.Staging], the protocol the report run uses too;
    [`tl_geometry.io.outdir.promote`][tl_geometry.io.outdir.promote]: a committed plan, then the moves, ``report.json``
    last), under the directory's lock ([`tl_geometry.io.outdir`][tl_geometry.io.outdir]): a failure, an interrupt or a
    kill before the commit leaves the previous report as it was; a kill after it is finished by
    the next run into ``out_dir``. Old and new figures never mix.

    Args:
        report: the results.
        out_dir: output directory (created).
        force: write into an existing non-empty directory, replacing the files named above and
            removing figure PNGs of ours that this report does not draw; other files are never
            deleted.
        dpi: figure resolution.
        figures: draw the PNGs (index.html and report.md are written either way).
        force_hint: how the refusal message spells ``force`` (the CLI passes ``"--force"``).

    Returns:
        The path of ``index.html``.

    Raises:
        OutputExistsError: ``out_dir`` exists and is not empty and ``force`` is false.
        OutputLockedError: another live run holds the directory's lock.
        OutputNotWritableError: the directory cannot be written.
    """
    from tl_geometry.io import outdir

    with outdir.Staging(out_dir, force=force, force_hint=force_hint, owned_figures=figure_files()) as run:
        render_into(report, run.start(), figures=figures, dpi=dpi)
        run.finish()
    return run.out / "index.html"
