"""The shape sweep's records read back: the best shape per budget and the sweep's figure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tl_geometry.errors import InputError

__all__ = ["frontier", "plot_sweep"]


def frontier(records: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Best run per budget: budget, n_layers, d_model, alpha (= R_D/W of the best), test_ce."""
    best: dict[float, Mapping] = {}
    for r in records:
        b = r["params"]["budget"]
        if b not in best or r["test_ce"] < best[b]["test_ce"]:
            best[b] = r
    return [
        {
            "budget": b,
            "n_layers": r["params"]["n_layers"],
            "d_model": r["params"]["d_model"],
            "alpha": r["r_dw"],
            "test_ce": r["test_ce"],
        }
        for b, r in sorted(best.items())
    ]


def plot_sweep(records: Sequence[Mapping[str, Any]], path: Any = None):
    """Left: test CE vs R_D/W per budget, efficient interval shaded. Right: frontier α* per budget."""
    from tl_geometry.render.plotting import pyplot

    plt = pyplot()  # the Agg backend, or Jupyter's inline one (one place decides)

    from tl_geometry.metrics.interaction import EFFICIENT_INTERVAL

    if not records:
        raise InputError("no sweep records to plot")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    a1.axvspan(*EFFICIENT_INTERVAL, color="0.85", label="efficient interval")
    for b in sorted({r["params"]["budget"] for r in records}):
        rs = sorted((r for r in records if r["params"]["budget"] == b), key=lambda r: r["r_dw"])
        a1.plot([r["r_dw"] for r in rs], [r["test_ce"] for r in rs], "o-", label=f"{b / 1e6:g}M")
    a1.set_xscale("log")
    a1.set_xlabel("R_D/W = depth / d_model")
    a1.set_ylabel("test cross-entropy (nats/byte)")
    a1.legend(fontsize=8)
    fr = frontier(records)
    a2.axhspan(*EFFICIENT_INTERVAL, color="0.85")
    a2.plot([f["budget"] for f in fr], [f["alpha"] for f in fr], "o-")
    a2.set_xscale("log")
    a2.set_xlabel("parameter budget")
    a2.set_ylabel("α* (best R_D/W)")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
