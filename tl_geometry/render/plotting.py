"""Figures of a [`GeometryReport`][tl_geometry.report.GeometryReport] (matplotlib, Agg backend).

Every ``plot_*`` function takes a report and returns a ``matplotlib.figure.Figure``, or ``None``
when the report has none of the rows it draws, so a report with only some families still
renders. Which figures exist is not listed here: each family declares its figures
([`tl_geometry.registry.FigureSpec`][tl_geometry.registry.FigureSpec], with the rows each reads) where its metrics are
registered, and [`figures`][tl_geometry.render.plotting.figures] / [`save_figures`][tl_geometry.render.plotting.save_figures] draw those of every registered family
([`tl_geometry.registry.families`][tl_geometry.registry.families]), plugins included. matplotlib is imported inside the
functions (the ``plot`` extra): without it, [`available`][tl_geometry.render.plotting.available] is false, drawing raises
[`PlotExtraMissingError`][tl_geometry.render.plotting.PlotExtraMissingError], and [`tl_geometry.render.html.render_into`][tl_geometry.render.html.render_into] writes the report without
figures after logging [`PLOT_EXTRA_NOTE`][tl_geometry.render.plotting.PLOT_EXTRA_NOTE] (the computed results are never lost to a missing extra).

The rows each figure reads are declared (``FigureSpec.rows``), and the rows' shape (per hook or
per model, extras keys) by the families' [`RowSpec`][tl_geometry.registry.RowSpec]: see
``tl_geometry/families/*.py`` and [`tl_geometry.registry.check_rows`][tl_geometry.registry.check_rows].
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tl_geometry.errors import InputError, TLGeometryError
from tl_geometry.render.readings import hook_position, one_row

if TYPE_CHECKING:
    from tl_geometry.report import GeometryReport
from tl_geometry.report import GeometryReport, Row

logger = logging.getLogger(__name__)

__all__ = [
    "available",
    "PLOT_EXTRA_NOTE",
    "PlotExtraMissingError",
    "figures",
    "pyplot",
    "rows_once",
    "n_layers_of",
    "by_layer",
    "layer_ticks",
    "figure_title",
    "figure_specs",
    "figure_for",
    "save_figures",
    "FIGURES",  # noqa: F822  (module __getattr__ below)
    "FAMILY_FIGURES",  # noqa: F822  (module __getattr__ below)
]


PLOT_EXTRA_NOTE = (
    "matplotlib is not installed, so no figures are drawn; install the plot extra: pip install 'tl-geometry[plot]'"
)
"""The one line a user without matplotlib sees (the CLI prints it, the library logs it)."""


class PlotExtraMissingError(TLGeometryError, ImportError):
    """A figure was asked for but matplotlib (the ``plot`` extra) is not installed."""


def available() -> bool:
    """Whether matplotlib (the ``plot`` extra) can be imported; checks without importing it."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def pyplot():
    try:
        import matplotlib
    except ImportError:
        raise PlotExtraMissingError(PLOT_EXTRA_NOTE) from None

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def rows_once(report: GeometryReport, metric: str) -> list[Row]:
    """[the row] of a once-per-model metric ([`one_row`][tl_geometry.render.readings.one_row]), or []."""
    row = one_row(report, metric)
    return [] if row is None else [row]


def n_layers_of(report: GeometryReport) -> int | None:
    n = report.provenance.get("n_layers")
    if n is not None:
        return int(n)
    layers = [r.layer for r in report.rows if r.layer is not None]
    return max(layers) + 1 if layers else None


def by_layer(rows: list[Row], n_layers: int | None) -> tuple[np.ndarray, np.ndarray]:
    pts = sorted((hook_position(r, n_layers), r.value) for r in rows)
    pts = [(x, y) for x, y in pts if not math.isnan(x)]
    return np.array([p[0] for p in pts]), np.array([p[1] for p in pts])


def layer_ticks(ax, xs: np.ndarray, n_layers: int | None, *, note: str = "") -> None:
    """Label -1 as 'embed' and n_layers as 'final'; integer ticks otherwise.

    The axis label explains only the special ticks the axis has (no "final" on an axis without
    a final point), then ``note`` (where the points were measured, when that is not obvious).
    """
    if len(xs) == 0:
        return
    lo, hi = int(np.nanmin(xs)), int(np.nanmax(xs))
    step = max(1, (hi - lo + 1) // 10)
    ticks = list(range(max(lo, 0), hi + 1, step))
    if lo < 0:  # "embed" at -1; drop a 0 tick next to it when ticks are spaced (the labels would collide)
        ticks = [-1] + [t for t in ticks if t != 0 or step == 1]
    if n_layers is not None and hi >= n_layers and n_layers not in ticks:
        ticks.append(n_layers)
    labels = ["embed" if t == -1 else ("final" if n_layers is not None and t == n_layers else str(t)) for t in ticks]
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels)
    special = (["embed = embeddings"] if lo < 0 else []) + (
        ["final = after the final norm"] if n_layers is not None and hi >= n_layers else []
    )
    label = "layer" + (f" ({', '.join(special)})" if special else "")
    ax.set_xlabel(label + (f"\n{note}" if note else ""))


def figure_title(report: GeometryReport, text: str) -> str:
    model = report.provenance.get("model")
    return f"{text} — {model}" if model else text


# ----------------------------------------------------------------------------- all
def figure_specs() -> list:
    """Every declared figure ([`tl_geometry.registry.FigureSpec`][tl_geometry.registry.FigureSpec]), family by family in section
    order (see [`tl_geometry.registry.families`][tl_geometry.registry.families])."""
    from tl_geometry import registry

    return [f for fam in registry.families() for f in fam.figures]


def _plot_names() -> dict[str, str]:
    """What [`GeometryReport.plot`][tl_geometry.report.GeometryReport.plot] accepts besides a figure name: ``{name: figure name}``.

    A family's name gives its [`plot_figure`][tl_geometry.registry.FamilySpec.plot_figure]; the name of
    one of its metrics gives the first of its figures that reads that metric's rows (e.g.
    ``"epsilon"`` → ``cosine_histogram``, ``"epsilon_activations"`` → ``epsilon_by_layer``,
    ``"agop"`` → ``aofe_ratio``). Family names win over metric names (``"capacity"``).
    """
    from tl_geometry import registry

    out: dict[str, str] = {}
    fams = registry.families()
    for fam in fams:
        for metric in fam.metrics:
            rows = {r.metric for r in fam.rows_of(metric)}
            fig = next((f for f in fam.figures if rows & set(f.rows)), None)
            if fig is not None:
                out[metric] = fig.name
    for fam in fams:
        if fam.plot_figure is not None:
            out[fam.name] = fam.plot_figure.name
    return out


def plot_report(report: GeometryReport, name: str):
    """[`GeometryReport.plot`][tl_geometry.report.GeometryReport.plot]: the figure ``name`` names, drawn."""
    spec = figure_for(name)
    fig = spec.draw(report)
    if fig is None:
        raise InputError(
            f"the report has no rows for the {name!r} figure ({spec.name}); its metrics: {sorted(report.metrics)}"
        )
    return fig


def figure_for(name: str):
    """The declared figure ([`tl_geometry.registry.FigureSpec`][tl_geometry.registry.FigureSpec]) [`GeometryReport.plot`][tl_geometry.report.GeometryReport.plot]
    draws for ``name``: a figure name, a family name or a metric name (see `FAMILY_FIGURES`).

    Raises:
        ValueError: an unknown name (lists the accepted ones).
    """
    specs = {f.name: f for f in figure_specs()}
    aliases = _plot_names()
    if not isinstance(name, str) or (name not in aliases and name not in specs):
        raise InputError(
            f"unknown figure family {name!r}; expected one of {sorted(aliases)} or a figure name {sorted(specs)}"
        )
    return specs[aliases.get(name, name)]


def __getattr__(name: str):
    # Views of the declarations, computed when read (plugin families included); not tables to edit.
    if name == "FIGURES":  # {figure name: (draw, caption)}
        return {f.name: (f.draw, f.caption) for f in figure_specs()}
    if name == "FAMILY_FIGURES":  # {family or metric name: figure name}, what GeometryReport.plot(name) draws
        return _plot_names()
    for spec in figure_specs():  # plot_pga, plot_aofe, ...: each family's declared figure, where it lives
        draw = spec.draw
        if getattr(draw, "ref", "").endswith(":" + name):
            return draw.resolve()  # type: ignore[union-attr]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def figures(report: GeometryReport) -> dict[str, Any]:
    """``{name: Figure}`` for every declared figure the report has rows for (see [`figure_specs`][tl_geometry.render.plotting.figure_specs]).

    A figure that fails to draw is logged and skipped: one bad family must not cost the others.

    Raises:
        PlotExtraMissingError: matplotlib (the ``plot`` extra) is not installed.
    """
    pyplot()  # one clear error up front, not one logged failure per figure
    out = {}
    for spec in figure_specs():
        try:
            fig = spec.draw(report)
        except Exception:  # noqa: BLE001 - rendering is best-effort per figure
            logger.exception("figure %s failed; skipping it", spec.name)
            continue
        if fig is not None:
            out[spec.name] = fig
    return out


def save_figures(report: GeometryReport, out_dir: str | os.PathLike, *, dpi: int = 110) -> dict[str, Path]:
    """Draw [`figures`][tl_geometry.render.plotting.figures] and save each as ``out_dir/<name>.png``; returns ``{name: path}``."""
    plt = pyplot()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, fig in figures(report).items():
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=dpi)
        plt.close(fig)
        paths[name] = path
    return paths
