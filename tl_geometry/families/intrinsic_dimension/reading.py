"""The intrinsic-dimension family's reading: where the ID profile peaks, and whether the peak exceeds its noise."""

from __future__ import annotations

import math

from tl_geometry.base.numbers import fmt_number
from tl_geometry.metrics.significance import verdicts
from tl_geometry.render.readings import hook_position, pm, rows_of, spread, where_of
from tl_geometry.report import GeometryReport, Row

__all__ = ["read_id", "profile_shape"]


def profile_shape(rows: list[Row], n_layers: int | None = None, *, k: float = 2.0) -> str:
    """``"peaked"`` when the largest ID is significantly above both the first and the last hook's (the
    rise-and-fall of Valeriani et al. 2023), ``"monotone"`` when the peak is at an end and the ends
    differ, else ``"flat within noise"``.

    Our rule, the library's one ([`verdicts`][tl_geometry.metrics.significance.verdicts]): the peak
    is the maximum of the hooks, chosen after seeing them, so "peaked" tests the 2·(N − 2)
    differences of every interior hook from both ends together (normal p of the combined stderr,
    Holm over all of them, and more than ``k`` combined standard errors); "monotone" tests the one
    difference of the two ends."""
    if len(rows) < 3:
        return "too few hooks"
    rows = sorted(rows, key=lambda r: hook_position(r, n_layers))
    top = max(rows, key=lambda r: r.value)
    first, last = rows[0], rows[-1]

    def diffs(pairs: list[tuple[Row, Row]]) -> list[str]:
        return [
            v.call
            for v in verdicts(
                [a.value - b.value for a, b in pairs],
                [math.hypot(_se(a), _se(b)) for a, b in pairs],
                k=k,
                what="differences",
            )
        ]

    if top is not first and top is not last:
        interior = rows[1:-1]
        calls = diffs([(h, e) for h in interior for e in (first, last)])
        i = interior.index(top)
        if calls[2 * i] == calls[2 * i + 1] == "positive":
            return "peaked"
        return "flat within noise"
    other = last if top is first else first
    return "monotone" if diffs([(top, other)]) == ["positive"] else "flat within noise"


def read_id(report: GeometryReport) -> list[str]:
    """The section's sentences: the TwoNN range over the hooks (with its noise), the profile's shape,
    and GRIDE's scale dependence at the peak."""
    tw = rows_of(report, "id.twonn")
    if not tw:
        return []
    n = report.provenance.get("n_layers")
    n = int(n) if n is not None else None
    lo = min(tw, key=lambda r: r.value)
    hi = max(tw, key=lambda r: r.value)
    d = report.provenance.get("d_model")
    width = f", in a residual stream of width {int(d)}" if isinstance(d, (int, float)) else ""
    out = [
        f"TwoNN intrinsic dimension (Facco et al. 2017) ranges from {pm(lo)} ({where_of(lo)}) to {pm(hi)} "
        f"({where_of(hi)}) over {len(tw)} hooks{spread(tw, lo, hi)}{width}."
    ]
    shape = profile_shape(tw, n)
    words = {
        "peaked": "rises from the embeddings to a peak inside the network and falls towards the output, "
        "beyond its noise at both ends (Holm over the interior-minus-end differences and 2 standard errors): the profile Valeriani et al. (2023) report for large transformers",
        "monotone": "is monotone beyond its noise (its largest value is at an end), not the rise-and-fall "
        "Valeriani et al. (2023) report",
        "flat within noise": "shows no peak beyond the noise of its ends (Holm over the interior-minus-end differences and 2 standard errors)",
        "too few hooks": "has too few hooks for a shape",
    }
    out.append(f"The profile {words[shape]}.")
    gr = [r for r in rows_of(report, "id.gride") if r.hook == hi.hook]
    if len(gr) >= 2:
        gr.sort(key=lambda r: int(r.extras.get("n1", 0)))
        a, b = gr[0], gr[-1]
        out.append(
            f"At {where_of(hi)}, GRIDE gives {pm(a)} at n1 = {a.extras.get('n1')} and {pm(b)} at n1 = "
            f"{b.extras.get('n1')} (length scale {fmt_number(float(a.extras.get('scale', math.nan)))} to "
            f"{fmt_number(float(b.extras.get('scale', math.nan)))}): the ID depends on the scale it is measured at"
            + (
                " within noise"
                if verdicts([a.value - b.value], [math.hypot(_se(a), _se(b))], what="differences")[0].call
                == "inconclusive"
                else ""
            )
            + "."
        )
    return out


def _se(r: Row) -> float:
    """The row's standard error, 0 when it has none (no noise claimed to hide a difference)."""
    v = r.extras.get("stderr")
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else 0.0
