"""The PGA and spectral families' figures (arXiv 2605.17084): z by layer per CCR, and the spectral metrics by layer."""

from __future__ import annotations

import numpy as np

from tl_geometry.families.pga.reading import pga_calls
from tl_geometry.metrics.significance import z_threshold
from tl_geometry.render.plotting import by_layer, figure_title, layer_ticks, n_layers_of, pyplot
from tl_geometry.render.readings import hook_position, rows_of
from tl_geometry.report import GeometryReport, Row


# ----------------------------------------------------------------------------- pga / spectral
def _se(row: Row) -> float:
    se = row.extras.get("stderr")
    return float(se) if isinstance(se, (int, float)) else float("nan")


def plot_pga(report: GeometryReport):
    """PGA z by layer (one line per CCR) and, when present, PC1 overlap vs the random k/d."""
    zrows = rows_of(report, "pga.z")
    pc1 = rows_of(report, "pga.pc1_overlap")
    if not zrows and not pc1:
        return None
    plt = pyplot()
    n = n_layers_of(report)
    ncols = int(bool(zrows)) + int(bool(pc1))
    fig, axes = plt.subplots(1, ncols, figsize=(7 * ncols, 4.4), squeeze=False)
    axes = list(axes[0])
    if zrows:
        ax = axes.pop(0)
        allx: list[float] = []
        for ccr, calls in pga_calls(zrows).items():
            rows = [r for r, _, _ in calls]
            xs, ys = by_layer(rows, n)
            at = {float(hook_position(r, n)): (r, c) for r, c, _ in calls}
            se = np.array([_se(at[float(x)][0]) if float(x) in at else np.nan for x in xs])
            sig = np.array([at[float(x)][1] != "inconclusive" if float(x) in at else False for x in xs])
            allx.extend(xs)
            label = f"CCR-{ccr}" + (" (no PCs removed)" if ccr == 0 else f" (top {ccr} PCs removed)")
            (line,) = ax.plot(xs, ys, lw=1.2, label=label)
            color = line.get_color()
            if np.isfinite(se).any():
                ax.errorbar(xs, ys, yerr=2 * np.nan_to_num(se), fmt="none", ecolor=color, elinewidth=0.8, capsize=2)
            ax.scatter(np.asarray(xs)[sig], np.asarray(ys)[sig], s=18, color=color, zorder=3)
            ax.scatter(np.asarray(xs)[~sig], np.asarray(ys)[~sig], s=18, facecolors="white", edgecolors=color, zorder=3)
        ax.axhline(0, color="black", lw=0.8)
        n_null = zrows[0].extras.get("n_null")
        if isinstance(n_null, int) and n_null >= 2:
            t95 = z_threshold(0.05, n_null)
            ax.axhspan(
                -t95, t95, color="grey", alpha=0.12, label=f"chance band: random subspace, 95 % (|z| < {t95:.2f})"
            )
            m = max(len(c) for c in pga_calls(zrows).values())
            tb = z_threshold(0.05 / m, n_null)
            for sgn in (-1, 1):
                ax.axhline(
                    sgn * tb,
                    color="grey",
                    ls="--",
                    lw=0.8,
                    label=None if sgn < 0 else f"Holm's strictest step, {m} hooks",
                )
        ax.plot([], [], "o", color="grey", ms=4, label="filled: significant; error bars ±2 stderr")
        layer_ticks(ax, np.array(allx), n)
        ax.set_ylabel("PGA z (readout vs random k-subspaces)")
        ax.set_title("Subspace PGA z by layer")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    if pc1:
        ax = axes.pop(0)
        xs, ys = by_layer(pc1, n)
        ax.plot(xs, ys, marker="o", ms=3.5, color="tab:purple", label="PC1 in readout subspace")
        exp = pc1[0].extras.get("expected")
        if exp is not None:
            ax.axhline(float(exp), color="grey", ls="--", label=f"random direction: k/d = {float(exp):.3f}")
        layer_ticks(ax, xs, n)
        ax.set_ylabel("‖V_kᵀ PC1‖² (fraction of PC1 in readout span)")
        ax.set_ylim(bottom=0)
        ax.set_title("PC1 migration into the readout subspace")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(figure_title(report, "Subspace PGA"))
    fig.tight_layout()
    return fig


_SPECTRAL = (
    ("spectral.rankme", "RankMe (Garrido et al.): p = s/Σs, s = √λ", False),
    ("spectral.alpha_req", "α-ReQ (power-law decay α)", False),
    ("spectral.isotropy", "isotropy (Σλ)²/(d·Σλ²)", False),
    ("spectral.condition_number", "condition number λ_max/λ_min", True),
)


_SPECTRAL_COMPANION: dict[str, tuple[str, str, str]] = {
    "spectral.rankme": (
        "spectral.rankme_eig",
        "RankMe (Garrido et al.): p = s/Σs, s = √λ",
        "von Neumann effective rank: p = λ/Σλ (rankme_eig)",
    ),
    "spectral.alpha_req": (
        "spectral.alpha_req_reptrix",
        "least squares, all ranks",
        "reptrix: 1/i-weighted, ranks 11–100",
    ),
}
"""A second definition drawn on the same panel when present: metric → (companion, labels)."""


_SPECTRAL_BOTH = {
    "spectral.rankme": "entropy effective ranks: RankMe and von Neumann",
}
"""A panel's title when it draws both definitions."""


def _error_bars(ax, rows: list[Row], xs, ys, n: int | None, color: str) -> None:
    """±2 standard errors at each point whose row carries a finite ``stderr`` (none drawn for exact rows)."""
    at = {float(hook_position(r, n)): _se(r) for r in rows}
    se = np.array([at.get(float(x), float("nan")) for x in xs])
    if np.isfinite(se).any() and np.nanmax(se) > 0:
        ax.errorbar(xs, ys, yerr=2 * np.nan_to_num(se), fmt="none", ecolor=color, elinewidth=0.8, capsize=2)


def plot_spectral(report: GeometryReport):
    """RankMe, α-ReQ, isotropy and condition number of the activations by layer (2×2); the
    RankMe panel also draws the von Neumann effective rank (``rankme_eig``, p = λ/Σλ; not RankMe)
    (then the panel is titled for both) and the α-ReQ panel ``alpha_req_reptrix`` when present."""
    present = [(m, label, log) for m, label, log in _SPECTRAL if rows_of(report, m)]
    if not present:
        return None
    plt = pyplot()
    n = n_layers_of(report)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), squeeze=False)
    flat = list(axes.flat)
    for ax, (metric, label, log) in zip(flat, present):
        xs, ys = by_layer(rows_of(report, metric), n)
        companion = _SPECTRAL_COMPANION.get(metric)
        other = rows_of(report, companion[0]) if companion else []
        ax.plot(xs, ys, marker="o", ms=3.5, color="tab:green", label=companion[1] if companion and other else None)
        _error_bars(ax, rows_of(report, metric), xs, ys, n, "tab:green")
        if companion and other:
            ox, oy = by_layer(other, n)
            ax.plot(ox, oy, marker="s", ms=3, color="tab:olive", ls="--", label=companion[2])
            _error_bars(ax, other, ox, oy, n, "tab:olive")
            ax.legend(fontsize=7)
            label = _SPECTRAL_BOTH.get(metric, label)
        if log:
            ax.set_yscale("log")
        layer_ticks(ax, xs, n)
        ax.xaxis.label.set_size(7)
        ax.set_title(label, fontsize=10)
        ax.grid(alpha=0.3)
    for ax in flat[len(present) :]:
        ax.axis("off")
    fig.suptitle(figure_title(report, "Spectrum of the activation covariance by layer (error bars ±2 stderr)"))
    fig.tight_layout()
    return fig
