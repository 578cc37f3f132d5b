"""Figures of a [`GeometryReport`][tl_geometry.report.GeometryReport] (matplotlib, Agg backend).

Every ``plot_*`` function takes a report and returns a ``matplotlib.figure.Figure``, or ``None``
when the report has none of the rows it draws, so a report with only some families still
renders. Which figures exist is not listed here: each family declares its figures
([`tl_geometry.registry.FigureSpec`][tl_geometry.registry.FigureSpec], with the rows each reads) where its metrics are
registered, and [`figures`][tl_geometry.plotting.figures] / [`save_figures`][tl_geometry.plotting.save_figures] draw those of every registered family
([`tl_geometry.registry.families`][tl_geometry.registry.families]), plugins included. matplotlib is imported inside the
functions (the ``plot`` extra): without it, [`available`][tl_geometry.plotting.available] is false, drawing raises
[`PlotExtraMissingError`][tl_geometry.plotting.PlotExtraMissingError], and [`tl_geometry.html.render_into`][tl_geometry.html.render_into] writes the report without
figures after logging [`PLOT_EXTRA_NOTE`][tl_geometry.plotting.PLOT_EXTRA_NOTE] (the computed results are never lost to a missing extra).

The rows each figure reads are declared (``FigureSpec.rows``), and the rows' shape (per hook or
per model, extras keys) by the families' [`RowSpec`][tl_geometry.registry.RowSpec]: see
``tl_geometry/families/*.py`` and [`tl_geometry.registry.check_rows`][tl_geometry.registry.check_rows].
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from tl_geometry.errors import InputError, TLGeometryError
from tl_geometry.metrics._capacity_forms import CLASS1_ABOVE, CLASS2_BELOW
from tl_geometry.metrics.interaction import EFFICIENT_INTERVAL
from tl_geometry.metrics.significance import z_threshold
from tl_geometry.readings import closest_published, hook_position, pga_calls, published_models
from tl_geometry.report import GeometryReport, Row, layer_of

logger = logging.getLogger(__name__)

__all__ = [
    "available",
    "PLOT_EXTRA_NOTE",
    "PlotExtraMissingError",
    "histogram_of",
    "plot_cosine_histogram",
    "plot_capacity_curve",
    "plot_epsilon_by_layer",
    "plot_pga",
    "plot_spectral",
    "plot_aofe",
    "plot_sae_widths",
    "figures",
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


def _plt():
    try:
        import matplotlib
    except ImportError:
        raise PlotExtraMissingError(PLOT_EXTRA_NOTE) from None

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _log10_capacity(d: float, eps: np.ndarray) -> np.ndarray:
    """log10 of the full-form bound k = (d·exp((d^c ε²/C)^(1/b)))^(1/a), without overflow.

    Our choice: plot log10 k rather than k; for d in the thousands and ε near 1, k exceeds
    the float64 range. The constants are the package's single copy
    ([`tl_geometry.metrics.capacity.FORMS`][tl_geometry.metrics.capacity.FORMS]), through
    [`tl_geometry.metrics.capacity.log10_capacity`][tl_geometry.metrics.capacity.log10_capacity].
    """
    import warnings

    from tl_geometry.metrics.capacity import log10_capacity

    eps = np.asarray(eps, dtype=np.float64)
    out = np.full(eps.shape, np.nan)
    ok = (eps > 0) & (eps < 1)  # the bound is defined for ε in (0, 1) only
    if not ok.any():
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out[ok] = np.asarray(log10_capacity(d, eps[ok], form="full"), dtype=np.float64)
    return out


def _rows(report: GeometryReport, metric: str) -> list[Row]:
    return [r for r in report.rows if r.metric == metric]


def _once(report: GeometryReport, metric: str) -> list[Row]:
    """[the row] of a once-per-model metric (the one with most extras when merged reports repeat it)."""
    rows = _rows(report, metric)
    return [max(rows, key=lambda r: len([v for v in r.extras.values() if v is not None]))] if rows else []


def _n_layers(report: GeometryReport) -> int | None:
    n = report.provenance.get("n_layers")
    if n is not None:
        return int(n)
    layers = [r.layer for r in report.rows if r.layer is not None]
    return max(layers) + 1 if layers else None


def _by_layer(rows: list[Row], n_layers: int | None) -> tuple[np.ndarray, np.ndarray]:
    pts = sorted((hook_position(r, n_layers), r.value) for r in rows)
    pts = [(x, y) for x, y in pts if not math.isnan(x)]
    return np.array([p[0] for p in pts]), np.array([p[1] for p in pts])


def _layer_ticks(ax, xs: np.ndarray, n_layers: int | None, *, note: str = "") -> None:
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


def _title(report: GeometryReport, text: str) -> str:
    model = report.provenance.get("model")
    return f"{text} — {model}" if model else text


# ----------------------------------------------------------------------------- capacity
def histogram_of(extras: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """(counts, edges) of an ``epsilon.*`` row's ``extras["histogram"] = {"counts", "edges"}``
    (what the "epsilon" metric writes); None when absent or inconsistent."""
    h = extras.get("histogram")
    if not isinstance(h, dict) or h.get("counts") is None or h.get("edges") is None:
        return None
    counts = np.asarray(h["counts"], dtype=np.float64)
    edges = np.asarray(h["edges"], dtype=np.float64)
    if counts.ndim != 1 or edges.shape != (counts.shape[0] + 1,):
        logger.warning("ignoring a histogram with %s counts and %s edges", counts.shape, edges.shape)
        return None
    return counts, edges


def plot_cosine_histogram(report: GeometryReport):
    """Histogram of pairwise cosines of the W_E / W_U rows with μ and ε = μ + 2σ marked."""
    panels = []
    for mat in ("W_E", "W_U"):
        for row in _rows(report, f"epsilon.{mat}"):
            hist = histogram_of(dict(row.extras))
            if hist is not None:
                panels.append((mat, row, hist))
                break
    if not panels:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 4.2), squeeze=False)
    for ax, (mat, row, (counts, edges)) in zip(axes[0], panels):
        total = counts.sum()
        density = counts / (total * np.diff(edges)) if total > 0 else counts
        ax.stairs(density, edges, fill=True, alpha=0.6, color="tab:blue", label="pairwise cosines")
        mu = row.extras.get("mean")
        eps = row.value
        if mu is not None:
            ax.axvline(float(mu), color="black", ls="--", lw=1.2, label=f"μ = {float(mu):.3f}")
        ax.axvline(eps, color="tab:red", lw=1.8, label=f"ε = μ + 2σ = {eps:.3f}")
        ax.axvline(0, color="grey", lw=0.6)
        ax.set_xlabel("cosine similarity between two rows")
        ax.set_ylabel("density")
        n = row.extras.get("n_vectors")
        d = row.extras.get("d")
        sub = ", ".join(p for p in (f"n = {int(n)}" if n else "", f"d = {int(d)}" if d else "") if p)
        ax.set_title(f"{mat} cosines" + (f" ({sub})" if sub else ""))
        ax.legend(fontsize=8, loc="upper right")
    fig.suptitle(_title(report, "Pairwise cosine similarity of embedding rows"))
    fig.tight_layout()
    return fig


def plot_capacity_curve(report: GeometryReport, *, published=None):
    """log10 capacity vs ε at the model's d, with the model's W_E point and published models.

    As the paper reports capacity: the curve is solid where it is a count (Class 2, ε < 0.1)
    and dotted beyond (the formula only; the paper gives no count there); a model or published
    model without a count is marked on the ε axis as indeterminate, not placed on the curve.
    Only W_E, the paper's matrix, is placed (W_U when the report has no W_E).
    """
    from tl_geometry.readings import capacity_status

    eps_rows = _once(report, "epsilon.W_E") or _once(report, "epsilon.W_U")
    if not eps_rows:
        return None
    mat = eps_rows[0].metric.split(".", 1)[1]
    cap_rows = _once(report, f"capacity.{mat}")
    d = None
    for r in eps_rows + cap_rows:
        d = d or r.extras.get("d")
    d = d or report.provenance.get("d_model")
    if not d:
        return None
    d = float(d)
    plt = _plt()
    pubs = list(published if published is not None else published_models())
    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    grid = np.linspace(0.01, 0.995, 400)
    counted = grid < CLASS2_BELOW
    ax.axvspan(0, CLASS2_BELOW, color="tab:green", alpha=0.07)
    ax.axvspan(CLASS2_BELOW, CLASS1_ABOVE, color="tab:orange", alpha=0.07)
    ax.axvspan(CLASS1_ABOVE, 1.02, color="tab:red", alpha=0.05)
    for x, label in ((0.05, "Class 2:\ncount"), (0.15, "boundary:\nindeterminate"), (0.6, "Class 1: indeterminate")):
        ax.text(x, 0.97, label, transform=ax.get_xaxis_transform(), ha="center", va="top", fontsize=8, color="dimgray")
    curve_d = _log10_capacity(d, grid)
    ax.plot(grid[counted], curve_d[counted], color="black", lw=2, label=f"full-form capacity, d = {int(d)}")
    ax.plot(
        grid[~counted],
        curve_d[~counted],
        color="black",
        lw=1,
        ls=":",
        label="formula only (ε ≥ 0.1: the paper gives no count)",
    )
    ys_shown = [float(_log10_capacity(d, np.array([0.1]))[0])]
    pub_count = [m for m in pubs if m.epsilon < CLASS2_BELOW]
    pub_none = [m for m in pubs if m.epsilon >= CLASS2_BELOW]
    if pub_count:
        pe = np.array([m.epsilon for m in pub_count])
        pk = np.array([_log10_capacity(m.d_model, np.array([m.epsilon]))[0] for m in pub_count])
        ys_shown += pk.tolist()
        sc = ax.scatter(
            pe,
            pk,
            c=np.log2([m.d_model for m in pub_count]),
            cmap="viridis",
            s=22,
            alpha=0.8,
            label="published models (at their own d)",
            zorder=3,
        )
        cb = fig.colorbar(sc, ax=ax, pad=0.01)
        cb.set_label("log₂ d_model of the published model")
    if pub_none:
        ax.scatter(
            [m.epsilon for m in pub_none],
            [0.0] * len(pub_none),
            marker="|",
            s=120,
            color="grey",
            zorder=3,
            clip_on=False,
            label=f"published, indeterminate ({len(pub_none)} models)",
        )
    top = max(ys_shown) * 1.3
    for other in (1024, 4096, 16384):
        if other != int(d):
            curve = _log10_capacity(other, grid)
            ax.plot(grid[counted], curve[counted], color="grey", lw=0.8, ls=":")
            i = int(np.searchsorted(grid, CLASS2_BELOW)) - 1
            if curve[i] < top:
                ax.text(grid[i], curve[i], f"d={other} ", fontsize=7, color="grey", ha="right", va="bottom")
    labelled = set()
    for r in eps_rows:
        status, reason = (
            capacity_status(cap_rows[0])
            if cap_rows
            else (("count", "") if 0 < r.value < CLASS2_BELOW else ("indeterminate", "ε ≥ 0.1"))
        )
        y = _log10_capacity(d, np.array([r.value]))[0]
        if status != "count" or not np.isfinite(y):
            ax.axvline(
                min(max(r.value, 0.0), 1.0),
                color="tab:red",
                ls="--",
                label=f"this model {mat}: ε = {r.value:.3f}, capacity indeterminate",
            )
            continue
        ax.scatter(
            [r.value],
            [y],
            marker="*",
            s=260,
            color="tab:red",
            edgecolor="black",
            zorder=5,
            label=f"this model {mat}: ε = {r.value:.3f}, k ≈ 10^{y:.1f}",
        )
        if pubs:
            near = closest_published(r.value, pub_count or pubs)
            if near.name not in labelled and near.epsilon < CLASS2_BELOW:
                labelled.add(near.name)
                ny = _log10_capacity(near.d_model, np.array([near.epsilon]))[0]
                ax.annotate(
                    f"{near.name} ({near.epsilon:.3f})",
                    (near.epsilon, ny),
                    textcoords="offset points",
                    xytext=(6, 6),
                    ha="left",
                    fontsize=8,
                )
    for m in pub_count:
        if m.name == "Llama-2-7B" and m.name not in labelled:
            ax.annotate(
                f"{m.name} ({m.epsilon:.3f})",
                (m.epsilon, _log10_capacity(m.d_model, np.array([m.epsilon]))[0]),
                textcoords="offset points",
                xytext=(6, 6),
                fontsize=8,
            )
    ax.set_ylim(0, top)
    ax.set_xlim(0, 1.02)
    ax.set_xlabel(f"ε = μ + 2σ of pairwise cosines of {mat} rows (the paper: raw W_E)")
    ax.set_ylabel("capacity: log₁₀ k (near-orthogonal directions)")
    ax.set_title(_title(report, 'Capacity vs ε (capacity paper, full form, preset "paper")'))
    ax.legend(fontsize=7, loc="center right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_epsilon_by_layer(report: GeometryReport):
    """ε of the activations at each hook, with the class boundaries and ±1 standard error bars
    (``extras["stderr"]``, the jackknife over sequences) where the rows carry one."""
    rows = _rows(report, "epsilon_activations")
    if not rows:
        return None
    plt = _plt()
    n = _n_layers(report)
    xs, ys = _by_layer(rows, n)
    placed = sorted((r for r in rows if not math.isnan(hook_position(r, n))), key=lambda r: hook_position(r, n))
    err = np.array([float(r.extras.get("stderr") or 0.0) for r in placed])
    err = np.where(np.isfinite(err), err, 0.0)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    if err.any() and len(err) == len(ys):
        ax.errorbar(xs, ys, yerr=err, marker="o", ms=4, capsize=2, label="ε ± 1 standard error")
    else:
        ax.plot(xs, ys, marker="o", ms=4)
    ax.axhline(CLASS1_ABOVE, color="tab:red", ls="--", lw=1, label="ε = 0.2 (Class 1 above)")
    ax.axhline(CLASS2_BELOW, color="tab:green", ls="--", lw=1, label="ε = 0.1 (Class 2 below)")
    _layer_ticks(ax, xs, n)
    ax.set_ylabel("ε = μ + 2σ of activation cosines")
    ax.set_title(_title(report, "ε of the residual stream by layer"))
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- pga / spectral
def _se(row: Row) -> float:
    se = row.extras.get("stderr")
    return float(se) if isinstance(se, (int, float)) else float("nan")


def plot_pga(report: GeometryReport):
    """PGA z by layer (one line per CCR) and, when present, PC1 overlap vs the random k/d."""
    zrows = _rows(report, "pga.z")
    pc1 = _rows(report, "pga.pc1_overlap")
    if not zrows and not pc1:
        return None
    plt = _plt()
    n = _n_layers(report)
    ncols = int(bool(zrows)) + int(bool(pc1))
    fig, axes = plt.subplots(1, ncols, figsize=(7 * ncols, 4.4), squeeze=False)
    axes = list(axes[0])
    if zrows:
        ax = axes.pop(0)
        allx: list[float] = []
        for ccr, calls in pga_calls(zrows).items():
            rows = [r for r, _, _ in calls]
            xs, ys = _by_layer(rows, n)
            at = {float(hook_position(r, n)): (r, c) for r, c, _ in calls}
            se = np.array([_se(at[float(x)][0]) if float(x) in at else np.nan for x in xs])
            sig = np.array([at[float(x)][1] != "inside" if float(x) in at else False for x in xs])
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
        _layer_ticks(ax, np.array(allx), n)
        ax.set_ylabel("PGA z (readout vs random k-subspaces)")
        ax.set_title("Subspace PGA z by layer")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    if pc1:
        ax = axes.pop(0)
        xs, ys = _by_layer(pc1, n)
        ax.plot(xs, ys, marker="o", ms=3.5, color="tab:purple", label="PC1 in readout subspace")
        exp = pc1[0].extras.get("expected")
        if exp is not None:
            ax.axhline(float(exp), color="grey", ls="--", label=f"random direction: k/d = {float(exp):.3f}")
        _layer_ticks(ax, xs, n)
        ax.set_ylabel("‖V_kᵀ PC1‖² (fraction of PC1 in readout span)")
        ax.set_ylim(bottom=0)
        ax.set_title("PC1 migration into the readout subspace")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(_title(report, "Subspace PGA"))
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


def plot_spectral(report: GeometryReport):
    """RankMe, α-ReQ, isotropy and condition number of the activations by layer (2×2); the
    RankMe panel also draws the von Neumann effective rank (``rankme_eig``, p = λ/Σλ; not RankMe)
    (then the panel is titled for both) and the α-ReQ panel ``alpha_req_reptrix`` when present."""
    present = [(m, label, log) for m, label, log in _SPECTRAL if _rows(report, m)]
    if not present:
        return None
    plt = _plt()
    n = _n_layers(report)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), squeeze=False)
    flat = list(axes.flat)
    for ax, (metric, label, log) in zip(flat, present):
        xs, ys = _by_layer(_rows(report, metric), n)
        companion = _SPECTRAL_COMPANION.get(metric)
        other = _rows(report, companion[0]) if companion else []
        ax.plot(xs, ys, marker="o", ms=3.5, color="tab:green", label=companion[1] if companion and other else None)
        if companion and other:
            ox, oy = _by_layer(other, n)
            ax.plot(ox, oy, marker="s", ms=3, color="tab:olive", ls="--", label=companion[2])
            ax.legend(fontsize=7)
            label = _SPECTRAL_BOTH.get(metric, label)
        if log:
            ax.set_yscale("log")
        _layer_ticks(ax, xs, n)
        ax.xaxis.label.set_size(7)
        ax.set_title(label, fontsize=10)
        ax.grid(alpha=0.3)
    for ax in flat[len(present) :]:
        ax.axis("off")
    fig.suptitle(_title(report, "Spectrum of the activation covariance by layer"))
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- interaction
def _resid_pre_note(rows: list[Row]) -> str:
    """The axis note for points taken at block inputs only (``blocks.L.hook_resid_pre``)."""
    if rows and all((r.hook or "").endswith("hook_resid_pre") for r in rows):
        return "measured at the input of block L (blocks.L.hook_resid_pre), drawn at L − 1; no final point"
    return ""


def plot_aofe(report: GeometryReport):
    """AGOP AOFE ratio by layer with a ±1 standard error band (``extras["stderr"]``: the jackknife over
    probe groups), R_D/W in the title.

    The AOFE ratio of W_EᵀW_E (``wtw.aofe_ratio``, one per model: see
    [`tl_geometry.readings.wtw_name`][tl_geometry.readings.wtw_name]) is in the reading, not drawn. AGOP at
    ``blocks.L.hook_resid_pre`` (the "agop" metric's default) is drawn at L − 1, like every
    figure's residual-stream axis; the axis label then says so (there is no final point).
    """
    rows = _rows(report, "agop.aofe_ratio")
    if not rows:
        return None
    plt = _plt()
    n = _n_layers(report)
    fig, ax = plt.subplots(figsize=(8, 4.4))
    allx: list[float] = []
    by_space: dict[str, list[Row]] = {}
    for r in rows:
        by_space.setdefault(str(r.extras.get("space", "input")), []).append(r)
    for space, rs in sorted(by_space.items()):
        xs, ys = _by_layer(rs, n)
        allx.extend(xs)
        err = np.array(
            [
                float(r.extras.get("stderr") or 0.0)
                for r in sorted(rs, key=lambda r: hook_position(r, n))
                if not math.isnan(hook_position(r, n))
            ]
        )
        err = np.where(np.isfinite(err), err, 0.0)
        corr = ", bias-corrected" if {r.extras.get("estimator") for r in rs} == {"jackknife"} else ""
        band = err.any() and len(err) == len(ys)
        ax.plot(xs, ys, marker="o", ms=3.5, label=f"AGOP ({space} space{corr})")
        if band:
            ax.fill_between(xs, ys - err, ys + err, alpha=0.2, label="± 1 standard error (jackknife over probes)")
    ax.set_ylim(0, 1.05)
    _layer_ticks(ax, np.array(allx), n, note=_resid_pre_note(rows))
    ax.set_ylabel("AOFE ratio = off-diagonal ‖G‖²_F / ‖G‖²_F")
    title = "AOFE ratio by layer"
    dw = _rows(report, "depth_width.ratio")
    if dw:
        lo, hi = dw[0].extras.get("interval") or EFFICIENT_INTERVAL
        title += f"   (R_D/W = {dw[0].value:.4f}; efficient [{lo}, {hi}])"
    ax.set_title(_title(report, title), fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


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
    widths = _rows(report, "sae.d_sae")
    if not widths:
        return None
    plt = _plt()
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
    from tl_geometry.readings import capacity_status

    for mat, color in (("W_E", "tab:red"),):  # the paper's matrix only
        cap = _once(report, f"capacity.{mat}")
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
    ax.set_title(_title(report, "SAE widths vs the capacity bound"))
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig


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
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def figures(report: GeometryReport) -> dict[str, Any]:
    """``{name: Figure}`` for every declared figure the report has rows for (see [`figure_specs`][tl_geometry.plotting.figure_specs]).

    A figure that fails to draw is logged and skipped: one bad family must not cost the others.

    Raises:
        PlotExtraMissingError: matplotlib (the ``plot`` extra) is not installed.
    """
    _plt()  # one clear error up front, not one logged failure per figure
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
    """Draw [`figures`][tl_geometry.plotting.figures] and save each as ``out_dir/<name>.png``; returns ``{name: path}``."""
    plt = _plt()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, fig in figures(report).items():
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=dpi)
        plt.close(fig)
        paths[name] = path
    return paths
