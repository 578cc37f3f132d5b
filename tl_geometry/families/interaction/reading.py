"""The interaction family's reading (arXiv 2605.27989): AOFE, W^T W and the depth/width ratio against the efficient interval."""

from __future__ import annotations

from typing import Any

from tl_geometry.base.numbers import fmt_number
from tl_geometry.metrics.interaction import EFFICIENT_INTERVAL  # defined once, there
from tl_geometry.render.readings import one_row, rows_of, spread, where_of
from tl_geometry.report import GeometryReport, Row

_RESID_PRE_AXIS = (
    "AGOP is taken at the input of every block (blocks.L.hook_resid_pre), drawn at layer L − 1 (the "
    "previous block's output): embed = blocks.0.hook_resid_pre, the embeddings; the last point is the "
    "input of the last block, and the last block's output is not measured (no final point)."
)
"""What the AOFE figure's axis means when AGOP was taken where the "agop" metric takes it by default."""


def wtw_name(row: Row, d_model: Any = None) -> str:
    """What a ``wtw.aofe_ratio`` row is the AOFE ratio of, with the Gram's shape.

    The "wtw_aofe" metric takes the Gram WᵀW / n of a matrix whose rows are vectors
    ([`tl_geometry.metrics.interaction.wtw_aofe`][tl_geometry.metrics.aofe.wtw_aofe]): W_E (d_vocab × d_model) by default, so
    W_EᵀW_E, d_model × d_model; with ``matrix="W_U"`` TransformerLens's W_U (d_model × d_vocab)
    is transposed first, so W_U W_Uᵀ. The ratio is scale-free: the 1/n does not change it.
    """
    mat = str(row.extras.get("matrix") or "W_E")
    gram = {"W_E": "W_EᵀW_E", "W_U": "W_U W_Uᵀ"}.get(mat, f"{mat}ᵀ{mat}")
    vectors = {"W_E": "token embeddings, the rows of W_E", "W_U": "unembedding vectors, the columns of W_U"}.get(
        mat, f"rows of {mat}"
    )
    d = f"{int(d_model)} × {int(d_model)}" if d_model else "d_model × d_model"
    return f"AOFE ratio of {gram}, {d} (the second moment of the {vectors})"


def read_interaction(report: GeometryReport) -> list[str]:
    """AOFE ratio by layer and the depth/width ratio against the efficient interval."""
    out = []
    rows = rows_of(report, "agop.aofe_ratio")
    if rows:
        vals = [r.value for r in rows]
        hi = max(rows, key=lambda r: r.value)
        lo = min(rows, key=lambda r: r.value)
        ests = {r.extras.get("estimator") for r in rows}
        if ests == {"jackknife"}:
            which = "bias-corrected (delete-a-group jackknife over the probe groups; plug-in ratio in extras)"
        elif ests == {"exact"}:
            which = "exact AGOP"
        elif ests <= {"jackknife", "exact"}:
            which = "bias-corrected where estimated with probes, exact elsewhere; plug-in ratio in extras"
        else:
            which = "plug-in ratio of the probe estimate, biased upwards with few probes"
        if ests != {"exact"}:
            if all(int(r.extras.get("n_text_groups") or 0) >= 2 for r in rows):
                which += "; errors over the text and the probes"
            elif any("stderr_probes" in r.extras for r in rows):
                which += "; errors over the probes only (these tokens, not a fresh draw of text)"
        out.append(
            f"AGOP AOFE ratio (off-diagonal share of ‖G‖²_F; 0 = no interaction between coordinates, "
            f"→1 = all mass off-diagonal; {which}): mean {fmt_number(sum(vals) / len(vals))} over {len(vals)} hooks, "
            f"from {fmt_number(lo.value)} ({where_of(lo)}) to {fmt_number(hi.value)} ({where_of(hi)}){spread(rows, lo, hi)}."
        )
        if all((r.hook or "").endswith("hook_resid_pre") for r in rows):
            out.append(_RESID_PRE_AXIS)
    for r in rows_of(report, "wtw.aofe_ratio"):
        out.append(f"{wtw_name(r, report.provenance.get('d_model'))}, from the weights only: {fmt_number(r.value)}.")
    dw = one_row(report, "depth_width.ratio")
    if dw is not None:
        low, high = dw.extras.get("interval") or EFFICIENT_INTERVAL
        inside = dw.extras.get("in_interval", low <= dw.value <= high)
        where = "inside" if inside else ("above" if dw.value > high else "below")
        out.append(
            f"R_D/W = n_layers / d_model = {fmt_number(dw.value)}: {where} the efficient interval "
            f"[{low}, {high}] found on byte-level TinyGPT (best shapes α* = 0.023–0.047 for 1M–10M parameters)."
        )
    return out
