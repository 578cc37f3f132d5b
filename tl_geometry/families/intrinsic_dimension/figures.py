"""The intrinsic-dimension family's figure: the ID profile by layer (TwoNN, GRIDE per scale) and the ID against scale."""

from __future__ import annotations

import math

import numpy as np

from tl_geometry.render.plotting import by_layer, figure_title, layer_ticks, n_layers_of, pyplot
from tl_geometry.render.readings import as_float, hook_position, rows_of
from tl_geometry.report import GeometryReport, Row

__all__ = ["plot_id_profile", "inflation_note"]


def _se(row: Row) -> float:
    return as_float(row.extras.get("stderr"))


def inflation_note(rows: list[Row]) -> str:
    """The title's words for GRIDE errors at a calibrated scale (rows naming a ``stderr_calibration``):
    which n1, the factor on the jackknife and the calibration's name; "" when no row names one."""
    found: dict[int, tuple[float, str]] = {}
    for r in rows:
        label = str(r.extras.get("stderr_calibration") or "")
        if label:
            found[int(r.extras.get("n1", 0))] = (as_float(r.extras.get("stderr_inflation")), label)
    if not found:
        return ""
    parts = [f"n1 = {n1}: stderr × {f:g}" for n1, (f, _) in sorted(found.items())]
    labels = sorted({lab for _, lab in found.values() if lab})
    return "\n" + "; ".join(parts) + " (calibrated" + (f": {', '.join(labels)}" if labels else "") + ")"


def plot_id_profile(report: GeometryReport):
    """Left: TwoNN ID by layer (±2 standard errors) and GRIDE at each scale n1. Right: GRIDE ID
    against the length scale at the first, the TwoNN-peak and the last hook. None without ID rows."""
    tw = rows_of(report, "id.twonn")
    gr = rows_of(report, "id.gride")
    if not tw and not gr:
        return None
    plt = pyplot()
    n = n_layers_of(report)
    ncols = 2 if gr else 1
    fig, axes = plt.subplots(1, ncols, figsize=(6.6 * ncols, 4.4), squeeze=False)
    ax = axes[0][0]
    allx: list[float] = []
    if tw:
        xs, ys = by_layer(tw, n)
        at = {float(hook_position(r, n)): r for r in tw}
        se = np.array([_se(at[float(x)]) for x in xs])
        ax.errorbar(
            xs,
            ys,
            yerr=2 * np.nan_to_num(se),
            color="black",
            marker="o",
            ms=4,
            lw=1.6,
            capsize=2,
            label="TwoNN (Facco et al. 2017), ±2 stderr",
        )
        allx.extend(xs)
    n1s = sorted({int(r.extras.get("n1", 0)) for r in gr})
    cmap = plt.get_cmap("viridis")
    for i, n1 in enumerate(n1s):
        rows = [r for r in gr if int(r.extras.get("n1", 0)) == n1]
        xs, ys = by_layer(rows, n)
        ax.plot(xs, ys, lw=1.0, alpha=0.8, color=cmap(i / max(1, len(n1s) - 1)), label=f"GRIDE n1={n1}, n2={2 * n1}")
        allx.extend(xs)
    layer_ticks(ax, np.array(allx), n)
    ax.set_ylabel("intrinsic dimension")
    ax.set_ylim(bottom=0)
    ax.set_title(figure_title(report, "Intrinsic dimension by layer"))
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    if gr:
        ax = axes[0][1]
        hooks: list[str] = [r.hook for r in sorted(tw, key=lambda r: hook_position(r, n)) if r.hook]
        peak = max(tw, key=lambda r: r.value).hook if tw else None
        chosen: list[str] = list(dict.fromkeys(h for h in (*hooks[:1], peak, *hooks[-1:]) if h))
        if not chosen:
            chosen = list(dict.fromkeys(r.hook for r in gr if r.hook))[:3]
        for h in chosen:
            rows = sorted((r for r in gr if r.hook == h), key=lambda r: int(r.extras.get("n1", 0)))
            sc = np.array([float(r.extras.get("scale", math.nan)) for r in rows])
            ys = np.array([r.value for r in rows])
            se = np.array([_se(r) for r in rows])
            tag = " (TwoNN peak)" if h == peak else ""
            ax.errorbar(sc, ys, yerr=2 * np.nan_to_num(se), marker="o", ms=3.5, capsize=2, label=f"{h}{tag}")
        ax.set_xscale("log")
        ax.set_xlabel("length scale: mean distance to the n1-th and n2-th neighbours")
        ax.set_ylabel("GRIDE intrinsic dimension")
        ax.set_ylim(bottom=0)
        note = inflation_note(gr)
        ax.set_title("ID against scale (GRIDE, n2 = 2·n1)" + note, fontsize=9 if note else None)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig
