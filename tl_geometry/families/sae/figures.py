"""The SAE family's figure: SAE widths against the host's capacity bound."""

from __future__ import annotations

import math

import numpy as np

from tl_geometry.render.plotting import figure_title, pyplot, rows_once
from tl_geometry.render.readings import rows_of
from tl_geometry.report import GeometryReport, Row, layer_of


# ----------------------------------------------------------------------------- sae
def _sae_layer(row: Row) -> float:
    """Layer of an SAE row: its hook, else ``extras["hook_name"]``, else the id (``layer_12/...``)."""
    import re

    if row.layer is not None:
        return float(row.layer)
    ex = row.extras
    hook_layer = layer_of(ex["hook_name"]) if ex.get("hook_name") else None
    if hook_layer is not None:
        return float(hook_layer)
    m = re.search(r"(?:layer|blocks|l)[_.\-]?(\d+)", str(ex.get("sae_id", "")))
    return float(m.group(1)) if m else math.nan


def plot_sae_widths(report: GeometryReport):
    """Each SAE's width (log scale) by hook layer, against the model's capacity bound."""
    widths = rows_of(report, "sae.d_sae")
    if not widths:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 4.8))
    releases = sorted({str(r.extras.get("release", "?")) for r in widths})
    markers = "osD^vP*X"
    for i, rel in enumerate(releases):
        rs = [r for r in widths if str(r.extras.get("release", "?")) == rel]
        xs = []
        for r in rs:
            xs.append(_sae_layer(r))
        jitter = (i - (len(releases) - 1) / 2) * 0.15
        ax.scatter(
            np.array(xs, dtype=float) + jitter,
            [r.value for r in rs],
            marker=markers[i % len(markers)],
            s=30,
            alpha=0.8,
            label=rel if len(rel) < 40 else rel[:37] + "…",
        )
    wmax = max(r.value for r in widths)
    off_chart = []
    from tl_geometry.families.capacity.reading import capacity_status

    for mat, color in (("W_E", "tab:red"),):  # the paper's matrix only
        cap = rows_once(report, f"capacity.{mat}")
        if not cap:
            continue
        status, reason = capacity_status(cap[0])
        k = cap[0].value
        if status != "count":
            off_chart.append(f"{mat} capacity indeterminate: no count\n({reason[:70]})")
            continue
        # Our choice: a bound many orders above the widest SAE would flatten every point to one
        # line on a log axis; it is named in the corner instead.
        if math.isfinite(k) and k <= wmax * 1e4:
            ax.axhline(k, color=color, ls="--", lw=1.4, label=f"capacity from {mat} ε: k ≈ {k:.3g}")
        else:
            off_chart.append(f"{mat} capacity k ≈ {k:.3g} (off the chart)")
    if off_chart:
        ax.text(
            0.99,
            0.98,
            "\n".join(off_chart),
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize=8,
            bbox=dict(facecolor="white", alpha=0.8, edgecolor="grey"),
        )
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    d = report.provenance.get("d_model")
    if d:
        ax.axhline(float(d), color="grey", ls=":", lw=1, label=f"d_model = {int(d)}")
    ax.set_yscale("log")
    ax.set_xlabel("layer of the SAE's hook")
    ax.set_ylabel("SAE width d_sae (features, log scale)")
    ax.set_title(figure_title(report, "SAE widths vs the capacity bound"))
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig
