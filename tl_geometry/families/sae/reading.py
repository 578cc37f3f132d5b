"""The SAE family's reading: SAE widths and decoder ε next to the host's capacity bound."""

from __future__ import annotations

import math

from tl_geometry.base.numbers import fmt_number
from tl_geometry.render.readings import NO_COUNT, rows_of
from tl_geometry.report import GeometryReport, Row


def no_sae_note(report: GeometryReport, *, hint: str = "") -> str | None:
    """Why a report in which the "sae" metric ran has no SAE rows; None when it did not run or has rows.

    Read from the provenance the metric writes: ``sae_skipped`` (sae_lens missing), ``sae_n``
    (SAEs compared), ``sae_n_unknown_width`` (SAEs of the model whose width is unknown) and
    ``sae_lens_version``. ``hint`` replaces the default "how to compare your own SAE".
    """
    prov = report.provenance
    if any(r.metric.startswith("sae.") for r in report.rows):
        return None
    if prov.get("sae_skipped"):
        return f"No SAE comparison: {prov['sae_skipped']}"
    if "sae_n" not in prov or prov.get("sae_n"):
        return None
    model = prov.get("model") or "this model"
    ver = prov.get("sae_lens_version")
    where = f"sae_lens{' ' + str(ver) if ver else ''}'s directory of pretrained SAEs"
    unknown = int(prov.get("sae_n_unknown_width") or 0)
    if unknown:
        return (
            f"{where[0].upper() + where[1:]} lists {unknown} SAE(s) for {model}, none with a known width, so "
            "none is compared with the capacity bound."
        )
    return (
        f"No published SAE exists for {model} in {where}, so there is no SAE width to compare with the capacity "
        "bound. To compare your own SAE: "
        + (hint or "`tl-geometry sae compare --model M --sae PATH`, or tg.sae.compare(model, saes=[...])")
        + "."
    )


def read_sae(report: GeometryReport) -> list[str]:
    """SAE widths against the capacity bound."""
    widths = rows_of(report, "sae.d_sae")
    ratios = rows_of(report, "sae.capacity_ratio")
    if not widths and not ratios:
        none = no_sae_note(report)
        return [none] if none else []
    out = []
    if widths:
        releases = sorted({str(r.extras.get("release", "?")) for r in widths})
        ws = sorted(r.value for r in widths)
        out.append(
            f"{len(widths)} SAEs from {len(releases)} release(s) ({', '.join(releases[:4])}"
            f"{', …' if len(releases) > 4 else ''}): widths {fmt_number(ws[0])} to {fmt_number(ws[-1])} features."
        )
    finite = [r for r in ratios if math.isfinite(r.value)]
    if finite:
        hi = max(finite, key=lambda r: r.value)
        over = sum(r.value > 1 for r in finite)
        preset = hi.extras.get("preset", "paper")
        out.append(
            f"Width / capacity: up to {fmt_number(hi.value)} ({hi.extras.get('sae_id', hi.hook or '?')}); "
            f"{over} of {len(finite)} SAEs ask for more near-orthogonal features than the capacity allows "
            f'(preset "{preset}").'
        )
        shared = [r for r in rows_of(report, "sae.shared_ratio") if math.isfinite(r.value)]
        if shared:
            top = max(shared, key=lambda r: r.value)
            tied = top.extras.get("tied")
            how = "(V + d_sae) / k, tied embeddings" if tied else "(2V + d_sae) / k, untied embeddings"
            out.append(f"Shared with the vocabulary (capacity paper, Eq. 2: {how}): up to {fmt_number(top.value)}.")
    elif ratios:
        why = next((str(r.extras.get("reason")) for r in ratios if r.extras.get("reason")), "")
        out.append(
            "The capacity is indeterminate for this model"
            + (f" ({why})" if why else " (ε ≥ 0.1: the paper gives no count)")
            + ", so SAE widths cannot be compared with it."
        )
    return out


def explain_nan(row: Row) -> str:
    """Why an SAE ratio is NaN, from its ``verdict`` and reason ("" otherwise; the family's
    ``explain`` for [`tl_geometry.render.readings.nan_reason`][tl_geometry.render.readings.nan_reason])."""
    verdict = row.extras.get("verdict")
    if verdict == "indeterminate":
        why = row.extras.get("reason") or NO_COUNT
        return f"indeterminate: the host's capacity k is not a count, so there is nothing to divide by ({why})"
    if row.extras.get("status") == "indeterminate":
        return ""  # an indeterminate count says more than a missing tied= / d_vocab=: nan_reason words it
    if verdict == "tied unknown":
        return "not computed: whether the host ties its embedding and unembedding is unknown (pass tied=)"
    if verdict == "d_vocab unknown":
        return "not computed: the host's vocabulary size is unknown (pass d_vocab=)"
    return ""
