"""Registered metrics of the interaction family: "agop", "wtw_aofe", "depth_width", "nfa".

Thin wrappers: they read the model through :mod:`tl_geometry.capture` (or the model-facing
loops in :mod:`tl_geometry.capture_agop`) and return :class:`GeometryReport` rows.
"""

from __future__ import annotations

from tl_geometry.capture_agop import agop, nfa
from tl_geometry.metrics.interaction import EFFICIENT_INTERVAL, depth_width_ratio, in_efficient_interval, wtw_aofe
from tl_geometry.registry import register_metric
from tl_geometry.report import GeometryReport

@register_metric("agop", needs="gradients", description="AGOP at hooks: AOFE, AOFE ratio, trace (arXiv 2605.27989)")
def agop_metric(model, tokens, *, hooks=None, **options) -> GeometryReport:
    """AGOP at hooks (default every resid_pre): agop.aofe, agop.aofe_ratio, agop.trace."""
    return agop(model, tokens, hooks=hooks, **options).to_report(model)


@register_metric("wtw_aofe", needs="weights", description="AOFE ratio of the embedding Gram WᵀW / vocab")
def wtw_aofe_metric(model, tokens=None, *, hooks=None, matrix: str = "W_E") -> GeometryReport:
    """AOFE ratio of WᵀW / n for W_E (vocab × d; or W_U transposed): row wtw.aofe_ratio."""
    from tl_geometry import capture

    if matrix not in ("W_E", "W_U"):
        raise ValueError(f"matrix must be 'W_E' or 'W_U', got {matrix!r}")
    W = capture.weight(model, matrix)
    W = W.T if matrix == "W_U" else W
    a = wtw_aofe(W)
    return GeometryReport.from_rows(
        [{"metric": "wtw.aofe_ratio", "value": float(a.ratio), "extras": {"aofe": float(a.aofe), "matrix": matrix}}],
        model=model,
    )


@register_metric("depth_width", needs="weights", description="R_D/W = n_layers/d_model vs the efficient interval")
def depth_width_metric(model, tokens=None, *, hooks=None) -> GeometryReport:
    """R_D/W and whether it lies in [0.023, 0.047]: row depth_width.ratio."""
    r = depth_width_ratio(model)
    return GeometryReport.from_rows(
        [{"metric": "depth_width.ratio", "value": r,
          "extras": {"in_interval": in_efficient_interval(r), "interval": list(EFFICIENT_INTERVAL)}}],
        model=model,
    )


@register_metric("nfa", needs="gradients", description="NFA: corr(W_in W_inᵀ, AGOP at the MLP input) per layer")
def nfa_metric(model, tokens, *, hooks=None, **options) -> GeometryReport:
    """Per layer: nfa.corr (vs AGOP) and nfa.corr_sqrt (vs AGOP^(1/2)) at blocks.{l}.ln2.hook_normalized."""
    if hooks is not None:
        raise ValueError("nfa chooses its own hooks (blocks.{l}.ln2.hook_normalized); pass layers=[...] instead")
    res = nfa(model, tokens, **options)
    rows = []
    for h, c in res.items():
        rows += [
            {"metric": "nfa.corr", "value": c.pearson, "hook": h, "extras": {"n_pairs": c.n_pairs, "power": 1.0}},
            {"metric": "nfa.corr_sqrt", "value": c.pearson_sqrt, "hook": h, "extras": {"n_pairs": c.n_pairs, "power": 0.5}},
        ]
    return GeometryReport.from_rows(rows, model=model)
