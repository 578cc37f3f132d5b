"""The SAE family's reproduce checks: a trained SAE's decoder ε next to the host's capacity. Registers itself with [`tl_geometry.runs.reproduction.check`][tl_geometry.runs.reproduction.check]."""

from __future__ import annotations

import math

from tl_geometry.runs.reproduction import Context, ReproRow, check, make_row


# ----------------------------------------------------------------------------- sae
@check(
    "sae.shared",
    "Qwen3-30B-A3B: (2V + d_sae) / capacity with the largest published SAE (Sec. 3.1, Eq. 2)",
    evidence="measured",
    heavy=True,
)
def _sae_shared(ctx: Context) -> list[ReproRow]:
    import tl_geometry as tg

    rep = tg.sae.compare("Qwen3-30B-A3B", config="none")
    rows = [r for r in rep.rows if r.metric == "sae.shared_ratio" and math.isfinite(r.value)]
    if not rows:
        return [
            make_row(
                "sae.qwen3_30b.shared_ratio",
                "shared ratio of Qwen3-30B-A3B's SAEs (ours; not in the paper)",
                None,
                None,
                None,
                evidence="measured",
                status="measured",
                note="no Qwen3-30B-A3B SAE with a known width in this sae_lens",
            )
        ]
    top = max(rows, key=lambda r: r.value)
    ex = top.extras
    k, V, tied = float(ex["capacity"]), int(ex["d_vocab"]), ex.get("tied")
    d_sae = int(
        next(
            r.value
            for r in rep.rows
            if r.metric == "sae.d_sae"
            and r.hook == top.hook
            and r.extras.get("sae_id") == ex.get("sae_id")
            and r.extras.get("release") == ex.get("release")
        )
    )
    counted = "V (tied)" if tied is True else "2V (untied)" if tied is False else "unknown"
    sizes = {
        "release": ex.get("release"),
        "sae_id": ex.get("sae_id"),
        "d_sae": d_sae,
        "d_vocab": V,
        "capacity": k,
        "tied": tied,
        "tied_source": ex.get("tied_source"),
    }
    # the paper defines the ratio (Eq. 2) but prints none for Qwen3-30B-A3B: this row is ours
    unknown = (
        "; whether Qwen3-30B-A3B ties its embeddings is not known to this run (tied_source: "
        f"{ex.get('tied_source')}); Eq. 2 counts 2V for an untied model, V for a tied one"
    )
    return [
        make_row(
            "sae.qwen3_30b.shared_ratio",
            f"(2V + d_sae) / k, Qwen3-30B-A3B (V = {V:,}, k = {k:.3g}) with its largest published SAE (d_sae = {d_sae:,}); "
            "Eq. 2 of Sec. 3.1 (ours; the paper prints no value for this model)",
            None,
            float(top.value),
            None,
            evidence="measured",
            status="measured",
            preset=f"{ex.get('preset', 'paper')} (sae.compare)",
            sizes=sizes,
            note=f"vocabulary counted as {counted}" + (unknown if tied is None else ""),
        )
    ]
