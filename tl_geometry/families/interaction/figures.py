"""The interaction family's figure (arXiv 2605.27989): the AOFE ratio by layer."""

from __future__ import annotations

import math

import numpy as np

from tl_geometry.metrics.interaction import EFFICIENT_INTERVAL
from tl_geometry.render.plotting import by_layer, figure_title, layer_ticks, n_layers_of, pyplot
from tl_geometry.render.readings import hook_position, rows_of
from tl_geometry.report import GeometryReport, Row


# ----------------------------------------------------------------------------- interaction
def _resid_pre_note(rows: list[Row]) -> str:
    """The axis note for points taken at block inputs only (``blocks.L.hook_resid_pre``)."""
    if rows and all((r.hook or "").endswith("hook_resid_pre") for r in rows):
        return "measured at the input of block L (blocks.L.hook_resid_pre), drawn at L − 1; no final point"
    return ""


def band_label(rows: list[Row]) -> tuple[str, str]:
    """(legend words, extras key) of the AOFE figure's band for these rows.

    Every row with a text jackknife (``n_text_groups`` ≥ 2): "over the text and the probes",
    ``stderr``. Otherwise the probe jackknife (``stderr_probes`` where the combined error is NaN,
    e.g. one sequence; ``stderr`` of rows made with ``text_groups=None``), said to be for these
    tokens only.
    """
    if rows and all(int(r.extras.get("n_text_groups") or 0) >= 2 for r in rows):
        k = int(rows[0].extras["n_text_groups"])
        return f"± 1 standard error over the text ({k} groups of sequences) and the probes", "stderr"
    if any("stderr_probes" in r.extras for r in rows) and not all(
        math.isfinite(float(r.extras.get("stderr", float("nan")))) for r in rows
    ):
        return "± 1 standard error over the probes only (these tokens; none over the text)", "stderr_probes"
    return "± 1 standard error over the probes only (these tokens; none over the text)", "stderr"


def plot_aofe(report: GeometryReport):
    """AGOP AOFE ratio by layer with a ±1 standard error band (``extras["stderr"]``), R_D/W in the title.

    The band's label says which error it is ([`band_label`][tl_geometry.families.interaction.figures.band_label]): over the text and the probes (the
    two jackknifes in quadrature, the default), or over the probes only (these tokens only:
    ``text_groups=None``, or one sequence, where the combined error is undefined and the band
    shows ``stderr_probes``).

    The AOFE ratio of W_EᵀW_E (``wtw.aofe_ratio``, one per model: see
    [`tl_geometry.families.interaction.reading.wtw_name`][tl_geometry.families.interaction.reading.wtw_name]) is in the reading, not drawn. AGOP at
    ``blocks.L.hook_resid_pre`` (the "agop" metric's default) is drawn at L − 1, like every
    figure's residual-stream axis; the axis label then says so (there is no final point).
    """
    rows = rows_of(report, "agop.aofe_ratio")
    if not rows:
        return None
    plt = pyplot()
    n = n_layers_of(report)
    fig, ax = plt.subplots(figsize=(8, 4.4))
    allx: list[float] = []
    by_space: dict[str, list[Row]] = {}
    for r in rows:
        by_space.setdefault(str(r.extras.get("space", "input")), []).append(r)
    for space, rs in sorted(by_space.items()):
        xs, ys = by_layer(rs, n)
        allx.extend(xs)
        ordered = [r for r in sorted(rs, key=lambda r: hook_position(r, n)) if not math.isnan(hook_position(r, n))]
        label, key = band_label(ordered)
        err = np.array([float(r.extras.get(key) or 0.0) for r in ordered])
        err = np.where(np.isfinite(err), err, 0.0)
        corr = ", bias-corrected" if {r.extras.get("estimator") for r in rs} == {"jackknife"} else ""
        band = err.any() and len(err) == len(ys)
        ax.plot(xs, ys, marker="o", ms=3.5, label=f"AGOP ({space} space{corr})")
        if band:
            ax.fill_between(xs, ys - err, ys + err, alpha=0.2, label=label)
    ax.set_ylim(0, 1.05)
    layer_ticks(ax, np.array(allx), n, note=_resid_pre_note(rows))
    ax.set_ylabel("AOFE ratio = off-diagonal ‖G‖²_F / ‖G‖²_F")
    title = "AOFE ratio by layer"
    dw = rows_of(report, "depth_width.ratio")
    if dw:
        lo, hi = dw[0].extras.get("interval") or EFFICIENT_INTERVAL
        title += f"   (R_D/W = {dw[0].value:.4f}; efficient [{lo}, {hi}])"
    ax.set_title(figure_title(report, title), fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
