"""The capacity family's figures (arXiv 2606.02765): cosine histogram, capacity curve, ε by layer."""

from __future__ import annotations

import logging
import math
import textwrap

import numpy as np

from tl_geometry.families.capacity.reading import EPS_ABOVE_ONE, closest_published, published_models
from tl_geometry.metrics._capacity_forms import CLASS1_ABOVE, CLASS2_BELOW
from tl_geometry.render.plotting import by_layer, figure_title, layer_ticks, n_layers_of, pyplot, rows_once
from tl_geometry.render.readings import hook_position, rows_of
from tl_geometry.report import GeometryReport

logger = logging.getLogger(__name__)


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
        for row in rows_of(report, f"epsilon.{mat}"):
            hist = histogram_of(dict(row.extras))
            if hist is not None:
                panels.append((mat, row, hist))
                break
    if not panels:
        return None
    plt = pyplot()
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
    fig.suptitle(figure_title(report, "Pairwise cosine similarity of embedding rows"))
    fig.tight_layout()
    return fig


def plot_capacity_curve(report: GeometryReport, *, published=None):
    """log10 capacity vs ε at the model's d, with the model's W_E point and published models.

    As the paper reports capacity: the curve is solid where it is a count (Class 2, ε < 0.1)
    and dotted beyond (the formula only; the paper gives no count there); a model or published
    model without a count is marked on the ε axis as indeterminate, not placed on the curve.
    Only W_E, the paper's matrix, is placed (W_U when the report has no W_E).
    """
    from tl_geometry.families.capacity.reading import capacity_status

    eps_rows = rows_once(report, "epsilon.W_E") or rows_once(report, "epsilon.W_U")
    if not eps_rows:
        return None
    mat = eps_rows[0].metric.split(".", 1)[1]
    cap_rows = rows_once(report, f"capacity.{mat}")
    d = None
    for r in eps_rows + cap_rows:
        d = d or r.extras.get("d")
    d = d or report.provenance.get("d_model")
    if not d:
        return None
    d = float(d)
    plt = pyplot()
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
    ax.set_title(figure_title(report, 'Capacity vs ε (capacity paper, full form, preset "paper")'))
    ax.legend(fontsize=7, loc="center right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_epsilon_by_layer(report: GeometryReport):
    """ε of the activations at each hook, with the class boundaries and ±1 standard error bars
    (``extras["stderr"]``, the jackknife over sequences) where the rows carry one."""
    rows = rows_of(report, "epsilon_activations")
    if not rows:
        return None
    plt = pyplot()
    n = n_layers_of(report)
    xs, ys = by_layer(rows, n)
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
    layer_ticks(ax, xs, n)
    ax.set_ylabel("ε = μ + 2σ of activation cosines")
    ax.set_title(figure_title(report, "ε of the residual stream by layer"))
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    n_above = sum(float(r.value) > 1.0 for r in rows)
    if n_above:
        ax.axhline(1.0, color="0.4", ls=":", lw=0.8)
        caption = f"ε > 1 at {n_above} of {len(rows)} hooks: {EPS_ABOVE_ONE}"
        fig.text(0.01, 0.01, textwrap.fill(caption, 150), fontsize=6.5, va="bottom", ha="left")
        fig.tight_layout(rect=(0, 0.1, 1, 1))
    else:
        fig.tight_layout()
    return fig
