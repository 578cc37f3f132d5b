"""The PGA and spectral families' readings (arXiv 2605.17084): per-CCR calls of each layer's z, and the spectral section."""

from __future__ import annotations

import math
from collections.abc import Iterable

from tl_geometry.base.numbers import fmt_number
from tl_geometry.metrics import significance
from tl_geometry.render.readings import as_float, pm, rows_of, spread, where_of
from tl_geometry.report import GeometryReport, Row


def pga_calls(rows: Iterable[Row]) -> dict[int, list[tuple[Row, str, float]]]:
    """Per CCR level, each ``pga.z`` row with its call and Holm-adjusted p.

    The call is the one rule, [`tl_geometry.metrics.significance.verdicts`][tl_geometry.metrics.significance.verdicts]
    over the hooks of that CCR level: ``"positive"`` or ``"negative"`` when z lies outside the
    chance band at the run's ``n_null`` after Holm's correction over the hooks (family-wise
    α = 0.05) *and* more than two standard errors (``extras["stderr"]``) from 0;
    ``"inconclusive"`` otherwise. A report written without ``n_null`` falls back to the normal p of
    z over its stderr.
    """
    return {ccr: [(r, v.call, v.p_adjusted) for r, v in group] for ccr, group in pga_verdicts(rows).items()}


def pga_verdicts(rows: Iterable[Row]) -> dict[int, list[tuple[Row, significance.Verdict]]]:
    """Per CCR level, each ``pga.z`` row with its [`Verdict`][tl_geometry.metrics.significance.Verdict] (see [`pga_calls`][tl_geometry.families.pga.reading.pga_calls])."""
    by_ccr: dict[int, list[Row]] = {}
    for r in rows:
        by_ccr.setdefault(int(r.extras.get("ccr", 0)), []).append(r)
    out: dict[int, list[tuple[Row, significance.Verdict]]] = {}
    for ccr, group in sorted(by_ccr.items()):
        nulls = [r.extras.get("n_null") for r in group]
        ok = all(_usable_n_null(n) for n in nulls)
        vs = significance.verdicts(
            [float(r.value) for r in group],
            [as_float(r.extras.get("stderr")) for r in group],
            n_null=nulls if ok else None,  # type: ignore[arg-type]
        )
        out[ccr] = list(zip(group, vs, strict=True))
    return out


def _usable_n_null(n: object) -> bool:
    """Whether a row's ``n_null`` can set a chance band (an integer ≥ 2; a report written without
    one, or a hand-edited one, falls back to the normal p)."""
    return isinstance(n, int) and not isinstance(n, bool) and n >= 2


def _method_words(rows) -> str:
    """How the rows' standard errors were computed, in words (their ``stderr_method``)."""
    methods = {str(r.extras.get("stderr_method", "")).split(":")[0] for r in rows}
    words = {
        "influence": "null subspaces jackknifed, groups of points by their first-order (influence) effect",
        "jackknife": "jackknife over the null subspaces and over groups of points, each refit",
        "none": "none computed (stderr='none')",
    }
    return "; ".join(words.get(m, m or "unknown") for m in sorted(methods))


def read_pga(report: GeometryReport) -> list[str]:
    """Significant PGA z per CCR (Holm over hooks, beyond 2 standard errors), ρ_read, PC1 overlap vs k/d.

    Never calls a value inside the chance band a peak ([`pga_calls`][tl_geometry.families.pga.reading.pga_calls])."""
    out = []
    zrows = rows_of(report, "pga.z")
    for ccr, calls in pga_calls(zrows).items():
        m = len(calls)
        pos = [r for r, c, _ in calls if c == "positive"]
        neg = [r for r, c, _ in calls if c == "negative"]
        if pos:
            best = max(pos, key=lambda r: r.value)
            head = (
                f"PGA CCR-{ccr}: z is significantly positive at {len(pos)} of {m} hooks, "
                f"peak z = {pm(best)} at {where_of(best)}"
            )
        elif not any(math.isfinite(as_float(r.value)) for r, _, _ in calls):
            head = f"PGA CCR-{ccr}: no finite z at any of {m} hooks"
        else:
            nulls = [r.extras.get("n_null") for r, _, _ in calls]
            v = significance.extreme(  # the largest finite z (NaN never is) and its verdict
                [as_float(r.value) for r, _, _ in calls],
                [as_float(r.extras.get("stderr")) for r, _, _ in calls],
                kind="max",
                n_null=nulls if all(_usable_n_null(n) for n in nulls) else None,  # type: ignore[arg-type]
            )
            top = calls[v.index][0]
            why = "lies inside the chance band" if not v.chance else "lies within 2 standard errors of 0"
            head = f"PGA CCR-{ccr}: no hook is significantly positive (the largest, z = {pm(top)} at {where_of(top)}, {why})"
        if neg:
            low = min(neg, key=lambda r: r.value)
            head += f"; significantly negative at {len(neg)} of {m} hooks (lowest z = {pm(low)} at {where_of(low)})"
        else:
            head += "; no hook is significantly negative"
        out.append(head + ".")
    if zrows:
        n_null = zrows[0].extras.get("n_null")
        band = ""
        if isinstance(n_null, int) and n_null >= 2:
            m = max(len(c) for c in pga_calls(zrows).values())
            band = (
                f" At n_null = {n_null}, a random subspace gives |z| < "
                f"{fmt_number(significance.z_threshold(0.05, n_null))} in 95 % of draws; the strictest Holm step over "
                f"{m} hooks needs |z| > {fmt_number(significance.z_threshold(0.05 / m, n_null))}."
            )
        out.append(
            "Significance: against random subspaces (t test of exchangeability), Holm-corrected over the hooks "
            "of each CCR level (family-wise α = 0.05), and |z| more than 2 standard errors "
            f"(stderr: {_method_words(zrows)})." + band
        )
    if zrows:
        presets = sorted({str(r.extras.get("preset", "library")) for r in zrows})
        procs = sorted({str(r.extras.get("processing", "unknown")) for r in zrows})
        if "paper" in presets and procs == ["none"]:
            out.append("Preset 'paper': the unprocessed model (raw hidden states and raw W_U), as the paper.")
        else:
            out.append(
                f"Preset {', '.join(repr(p) for p in presets)}, weight processing {', '.join(repr(p) for p in procs)}: "
                "the paper uses the unprocessed model (preset 'paper'); TransformerLens's processing changes the "
                "readout subspace and can flip the sign of z."
            )
        caveats = sorted({str(r.extras["readout_caveat"]) for r in zrows if r.extras.get("readout_caveat")})
        out.extend(f"Caveat: {c}." for c in caveats)
        out.append(
            "Paper: intermediate layers peak at z = 9–24 (Pythia 70M–6.9B, Phi-1.5, OLMo-1B, "
            "Gemma-2-2B); models with d ≤ 1024 can go negative at late layers (Pythia-410M down to "
            "z ≈ −32) and removing the top 5–10 PCs restores positive z for d ≥ 768."
        )
    pc1 = rows_of(report, "pga.pc1_overlap")
    if pc1:
        exp = pc1[0].extras.get("expected")
        hi = max(pc1, key=lambda r: r.value)
        tail = f" (a random direction: k/d = {fmt_number(exp)})" if exp is not None else ""
        out.append(f"PC1 overlap with the readout subspace peaks at {fmt_number(hi.value)} at {where_of(hi)}{tail}.")
    return out


RANK_NAMES = {
    "spectral.rankme": "RankMe (Garrido et al.: exp of the entropy of p = s/Σs, singular values s = √λ)",
    "spectral.rankme_eig": "von Neumann effective rank (exp of the entropy of p = λ/Σλ, covariance eigenvalues "
    "λ; row rankme_eig, not RankMe)",
}
"""The two entropy ranks of the "spectral" metric, named with what each is (readings, figures, the terminal summary). Only the first is RankMe; the second is kept under the row name ``rankme_eig`` for saved reports."""


def read_spectral(report: GeometryReport) -> list[str]:
    """Ranges of RankMe, α-ReQ, isotropy over the hooks."""
    out = []
    names = {
        "spectral.rankme": RANK_NAMES["spectral.rankme"],
        "spectral.rankme_eig": RANK_NAMES["spectral.rankme_eig"],
        "spectral.alpha_req": "α-ReQ (eigenvalue decay; least squares over all ranks)",
        "spectral.alpha_req_reptrix": "α-ReQ as reptrix fits it (1/i-weighted, ranks 11–100)",
        "spectral.isotropy": "isotropy (1 = isotropic)",
        "spectral.condition_number": "condition number",
    }
    for metric, label in names.items():
        rows = rows_of(report, metric)
        if not rows:
            continue
        lo = min(rows, key=lambda r: r.value)
        hi = max(rows, key=lambda r: r.value)
        out.append(
            f"{label}: {fmt_number(lo.value)} ({where_of(lo)}) to {fmt_number(hi.value)} ({where_of(hi)}){spread(rows, lo, hi)}."
        )
    return out
