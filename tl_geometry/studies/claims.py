"""The claims table of a study: every claim of the three papers that one model's rows can test.

Pure functions on report rows (``Row.to_dict()`` form): no model, no hook, no file. One
[`Claim`][tl_geometry.studies.claims.Claim] per (claim, model) with the number behind the verdict,
its standard error, the paper and section it comes from.

**The verdict rule (ours; the papers read |z| ≥ 2 without a correction).** A PGA z is compared
with the chance band of z against ``n_null`` random subspaces
([`z_p_value`][tl_geometry.metrics.significance.z_p_value]); a claim that scans a window of hooks
(the intermediate peak, the late minimum) corrects the p-values over the window with Holm's
step-down; a hook is then "positive" / "negative" only when its adjusted p < 0.05 **and** |z| > 2
standard errors. A difference (final recovery, the cross-model AOFE ratio) takes the normal p of
its stderr with the same |v| > 2 stderr. All of it is the one rule of the library,
[`verdicts`][tl_geometry.metrics.significance.verdicts]. A correlation (spectral blindness) is read
within / beyond 2 standard errors of 0 (it *holds* when no correlation is found). The verdict
words are ``holds`` / ``fails`` / ``undecided`` / ``not applicable``, and the ``test`` field says
which test decided.

Relative depth: ``hook_embed`` (and ``blocks.0.hook_resid_pre``) is 0, ``blocks.l.hook_resid_post``
is (l + 1)/n_layers, ``ln_final.*`` is 1. The windows (ours; the paper names layers, not
fractions): intermediate 0.25 ≤ depth ≤ 0.75; late 2/3 ≤ depth, the final hook excluded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from tl_geometry.metrics._capacity_forms import model_class_of
from tl_geometry.metrics.interaction import EFFICIENT_INTERVAL, in_efficient_interval
from tl_geometry.metrics.significance import ALPHA, Verdict, verdicts

__all__ = [
    "Claim",
    "CLAIMS",
    "VERDICTS",
    "relative_depth",
    "model_claims",
    "cross_model_claims",
    "convergence_claims",
]

VERDICTS = ("holds", "fails", "undecided", "not applicable")

PGA_PAPER = "Xu, Subspace PGA, arXiv 2605.17084"
INTERACTION_PAPER = "Sun et al., Law of Neural Interaction, arXiv 2605.27989"
CAPACITY_PAPER = "Guha, Representational Capacity, arXiv 2606.02765"

CLAIMS: dict[str, tuple[str, str, str]] = {
    "pga.embed_alignment": (
        PGA_PAPER,
        "layer profiles (no section number located; our reading)",
        "the embeddings are organized for the readout (z > 0 at depth 0)",
    ),
    "pga.mid_organisation": (
        PGA_PAPER,
        "Abstract (peak z = 9–24)",
        "intermediate layers are significantly organized for prediction (peak z = 9–24)",
    ),
    "pga.late_collapse": (
        PGA_PAPER,
        "Abstract (d ≤ 1024 lose it at late layers)",
        "d ≤ 1024: late (not final) layers lose the alignment (e.g. Pythia-410M ≈ −32)",
    ),
    "pga.late_preserved": (
        PGA_PAPER,
        "Abstract (d ≥ 2048 preserve it throughout)",
        "d ≥ 2048: late layers stay organized (z > 0)",
    ),
    "pga.final_recovery": (
        PGA_PAPER,
        "layer profiles (no section number located; our reading)",
        "d ≤ 1024: the final layer recovers from the late minimum",
    ),
    "pga.ccr5_restoration": (
        PGA_PAPER,
        "Abstract (removing the dominant directions restores alignment); CCR-5/10 in the text",
        "d ≥ 768: removing the top 5 principal directions (CCR-5) restores positive late z",
    ),
    "pga.spectral_blindness": (
        PGA_PAPER,
        "Abstract (neither spectral metrics nor loss curves capture it)",
        "spectral metrics (RankMe, α-ReQ) do not track the PGA profile",
    ),
    "interaction.efficient_interval": (
        INTERACTION_PAPER,
        "Abstract (an efficient interaction interval of R_D/W); interval [0.023, 0.047] from its TinyGPT sweep",
        "R_D/W = n_layers/d_model in the efficient interval [0.023, 0.047] goes with efficient interaction",
    ),
    "pga.convergence_readout": (
        PGA_PAPER,
        "cross-model convergence (no section number located; our reading of the claim)",
        "the readout subspace concentrates cross-model convergence (z of ρ_readout against random subspaces > 0)",
    ),
    "capacity.class": (
        CAPACITY_PAPER,
        "Abstract (two classes of models); Table 1",
        "class 1 (ε > 0.2): no near-orthogonal structure, capacity indeterminate; class 2 (ε < 0.1): a count",
    ),
}
"""Claim id → (paper, where in it, statement). Where no section number could be located in the
paper's text the entry says so (the abstract is cited where it states the claim)."""

MID_WINDOW = (0.25, 0.75)
LATE_START = 2.0 / 3.0


@dataclass(frozen=True)
class Claim:
    """One claim tested on one model.

    Attributes:
        model: the study label of the model.
        claim: the claim id (a key of ``CLAIMS``).
        verdict: one of ``VERDICTS``.
        value, stderr: the number behind the verdict and its standard error (NaN when none).
        where: the hook (or hooks) the number comes from.
        test: the test that decided, in words.
        paper, section, statement: where the claim comes from and what it says.
        caveat: why the number may not be the paper's quantity (the PGA library preset's readout
            caveat, ``tl_geometry.families.pga.readout_caveat``), else empty.
    """

    model: str
    claim: str
    verdict: str
    value: float
    stderr: float
    where: str
    test: str
    paper: str
    section: str
    statement: str
    caveat: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("value", "stderr"):
            v = d[k]
            d[k] = None if v is None or not math.isfinite(v) else float(v)
        return d


def relative_depth(hook: str | None, n_layers: int) -> float | None:
    """Where a hook sits between the embeddings (0) and the last block's output (1).

    Examples:
        >>> relative_depth("hook_embed", 4), relative_depth("blocks.1.hook_resid_post", 4)
        (0.0, 0.5)
        >>> relative_depth("blocks.2.hook_resid_pre", 4), relative_depth("ln_final.hook_normalized", 4)
        (0.5, 1.0)
    """
    if not hook or not n_layers:
        return None
    if hook in ("hook_embed", "hook_pos_embed") or hook.startswith("embed."):
        return 0.0
    if hook.startswith(("ln_final", "unembed")):
        return 1.0
    parts = hook.split(".")
    if len(parts) >= 3 and parts[0] == "blocks" and parts[1].isdigit():
        layer = int(parts[1])
        name = parts[-1]
        if name.endswith("resid_pre"):
            return layer / n_layers
        if name.endswith("resid_mid"):
            return (layer + 0.5) / n_layers
        return (layer + 1) / n_layers
    return None


def _claim(model: str, cid: str, verdict: str, value: float, se: float, where: str, test: str) -> Claim:
    paper, section, statement = CLAIMS[cid]
    return Claim(model, cid, verdict, float(value), float(se), where, test, paper, section, statement)


def _na(model: str, cid: str, why: str) -> Claim:
    return _claim(model, cid, "not applicable", math.nan, math.nan, "", why)


def _se(extras: Mapping[str, Any]) -> float:
    v = extras.get("stderr")
    return float(v) if isinstance(v, (int, float)) and v is not None else math.nan


def _profile(rows: Sequence[Mapping[str, Any]], ccr: int, n_layers: int) -> list[tuple[str, float, float, float, int]]:
    """``[(hook, depth, z, stderr, n_null)]`` of the ``pga.z`` rows at ``ccr``, by depth."""
    out = []
    for r in rows:
        ex = r.get("extras") or {}
        if r.get("metric") != "pga.z" or ex.get("ccr") != ccr:
            continue
        depth = relative_depth(r.get("hook"), n_layers)
        z = float(r["value"])
        if depth is None or not math.isfinite(z):
            continue
        out.append((r["hook"], depth, z, _se(ex), int(ex.get("n_null") or 0)))
    return sorted(out, key=lambda t: t[1])


def _window_verdicts(prof: Sequence[tuple[str, float, float, float, int]]) -> list[Verdict]:
    """The one rule per hook of a window (chance band at each row's n_null, Holm over the window, 2 stderr)."""
    if not prof:
        return []
    nulls = [n for _, _, _, _, n in prof]
    return list(
        verdicts(
            [z for _, _, z, _, _ in prof],
            [se for _, _, _, se, _ in prof],
            n_null=nulls if all(n >= 2 for n in nulls) else None,
        )
    )


def _window_calls(prof: Sequence[tuple[str, float, float, float, int]]) -> list[str]:
    """positive / negative / inconclusive per hook of a window, Holm-corrected over the window."""
    return [v.call for v in _window_verdicts(prof)]


def _test_words(m: int) -> str:
    corr = f"Holm over {m} hooks, " if m > 1 else ""
    return f"chance band of z at n_null ({corr}α = {ALPHA}) and |z| > 2 stderr"


def _decided_by(vs: Sequence[Verdict], i: int) -> str:
    """``; `` + the words of hook ``i``'s verdict (which test passed)."""
    return f"; at the hook shown: {vs[i].words}" if vs else ""


def _pga_claims(model: str, rows: Sequence[Mapping[str, Any]], n_layers: int, d: int) -> list[Claim]:
    out: list[Claim] = []
    ccr = 1 if _profile(rows, 1, n_layers) else 0
    prof = _profile(rows, ccr, n_layers)
    if not prof:
        why = "no pga.z rows in this run"
        return [
            _na(model, c, why)
            for c in (
                "pga.embed_alignment",
                "pga.mid_organisation",
                "pga.late_collapse",
                "pga.final_recovery",
                "pga.ccr5_restoration",
                "pga.spectral_blindness",
            )
        ]
    tag = f"CCR-{ccr}"
    # embeddings
    first = prof[0]
    if first[1] == 0.0:
        (v1,) = _window_verdicts([first])
        verdict = {"positive": "holds", "negative": "fails", "inconclusive": "undecided"}[v1.call]
        out.append(
            _claim(
                model,
                "pga.embed_alignment",
                verdict,
                first[2],
                first[3],
                f"{first[0]} ({tag})",
                _test_words(1) + _decided_by([v1], 0),
            )
        )
    else:
        out.append(
            _na(
                model,
                "pga.embed_alignment",
                "no hook at depth 0 in this run (the library preset measures blocks.*.hook_resid_post; "
                "options pga.preset=paper adds the embeddings)",
            )
        )
    # intermediate peak
    mid = [p for p in prof if MID_WINDOW[0] <= p[1] <= MID_WINDOW[1]]
    if mid:
        vs = _window_verdicts(mid)
        calls = [v.call for v in vs]
        best = max(range(len(mid)), key=lambda i: mid[i][2])
        if "positive" in calls:
            verdict = "holds"
            best = max((i for i, c in enumerate(calls) if c == "positive"), key=lambda i: mid[i][2])
        elif all(c == "negative" for c in calls):
            verdict = "fails"
        else:
            verdict = "undecided"
        h = mid[best]
        out.append(
            _claim(
                model,
                "pga.mid_organisation",
                verdict,
                h[2],
                h[3],
                f"peak at {h[0]} ({tag}; window depth {MID_WINDOW[0]}–{MID_WINDOW[1]}, {len(mid)} hooks)",
                _test_words(len(mid))
                + "; holds if any hook is positive, fails if all are negative"
                + _decided_by(vs, best),
            )
        )
    else:
        out.append(_na(model, "pga.mid_organisation", "no hook at intermediate depth"))
    # late window (final hook excluded)
    final = prof[-1]
    late = [p for p in prof[:-1] if p[1] >= LATE_START]
    late_min = min(late, key=lambda p: p[2]) if late else None
    if not late:
        out.append(_na(model, "pga.late_collapse", "no late hook before the final one"))
    elif d <= 1024 or d >= 2048:
        vs = _window_verdicts(late)
        calls = [v.call for v in vs]
        i_min = min(range(len(late)), key=lambda j: late[j][2])
        h = late[i_min]
        negative, all_positive = "negative" in calls, all(c == "positive" for c in calls)
        if d <= 1024:  # the paper: small models lose the alignment late
            cid, verdict = "pga.late_collapse", "holds" if negative else "fails" if all_positive else "undecided"
            rule = "holds if any late hook is negative, fails if all are positive"
        else:  # the paper: large models keep it
            cid, verdict = "pga.late_preserved", "fails" if negative else "holds" if all_positive else "undecided"
            rule = "holds if every late hook is positive, fails if any is negative"
        where = f"minimum at {h[0]} ({tag}; depth ≥ {LATE_START:.2f}, final excluded, {len(late)} hooks)"
        out.append(
            _claim(
                model, cid, verdict, h[2], h[3], where, _test_words(len(late)) + "; " + rule + _decided_by(vs, i_min)
            )
        )
    else:
        out.append(_na(model, "pga.late_collapse", f"d = {d}: between the paper's regimes (d ≤ 1024, d ≥ 2048)"))
    # final recovery
    if d > 1024:
        out.append(_na(model, "pga.final_recovery", f"d = {d} > 1024: the paper claims the recovery for d ≤ 1024"))
    elif late_min is None:
        out.append(_na(model, "pga.final_recovery", "no late hook before the final one"))
    else:
        diff = final[2] - late_min[2]
        se = math.hypot(final[3], late_min[3]) if math.isfinite(final[3]) and math.isfinite(late_min[3]) else math.nan
        (dv,) = verdicts([diff], [se], what="differences")
        verdict = {"positive": "holds", "negative": "fails", "inconclusive": "undecided"}[dv.call]
        out.append(
            _claim(
                model,
                "pga.final_recovery",
                verdict,
                diff,
                se,
                f"z({final[0]}) − z({late_min[0]}) ({tag})",
                "difference: normal p of its combined stderr and |v| > 2 stderr; " + dv.words,
            )
        )
    # CCR-5
    prof5 = _profile(rows, 5, n_layers)
    late5 = [p for p in prof5[:-1] if p[1] >= LATE_START]
    if d < 768:
        out.append(_na(model, "pga.ccr5_restoration", f"d = {d} < 768: the paper makes no claim here"))
    elif not late5:
        out.append(_na(model, "pga.ccr5_restoration", "no CCR-5 rows at late hooks in this run"))
    else:
        vs = _window_verdicts(late5)
        calls = [v.call for v in vs]
        i = min(range(len(late5)), key=lambda j: late5[j][2])
        h = late5[i]
        verdict = "holds" if all(c == "positive" for c in calls) else "fails" if "negative" in calls else "undecided"
        out.append(
            _claim(
                model,
                "pga.ccr5_restoration",
                verdict,
                h[2],
                h[3],
                f"late minimum at {h[0]} (CCR-5, {len(late5)} hooks)",
                _test_words(len(late5))
                + "; holds if every late hook is positive, fails if any is negative"
                + _decided_by(vs, i),
            )
        )
    out.append(_spectral_blindness(model, rows, prof, tag))
    return out


def _spectral_blindness(model: str, rows: Sequence[Mapping[str, Any]], prof, tag: str) -> Claim:
    calls = _window_calls(prof)
    if all(c == "inconclusive" for c in calls):
        return _claim(
            model,
            "pga.spectral_blindness",
            "undecided",
            math.nan,
            math.nan,
            "",
            "PGA z is inconclusive at every hook (chance band, Holm, 2 stderr): nothing for the spectral metrics to miss",
        )
    z_by_hook = {h: z for h, _, z, _, _ in prof}
    best: tuple[float, str, int] | None = None
    for metric in ("spectral.rankme", "spectral.alpha_req"):
        pairs = [
            (z_by_hook[r["hook"]], float(r["value"]))
            for r in rows
            if r.get("metric") == metric and r.get("hook") in z_by_hook
        ]
        pairs = [(a, b) for a, b in pairs if math.isfinite(b)]
        if len(pairs) < 6:
            continue
        from scipy.stats import spearmanr

        rho = float(spearmanr([a for a, _ in pairs], [b for _, b in pairs]).statistic)
        if math.isfinite(rho) and (best is None or abs(rho) > abs(best[0])):
            best = (rho, metric, len(pairs))
    if best is None:
        return _na(model, "pga.spectral_blindness", "fewer than 6 hooks with both PGA z and a spectral metric")
    rho, metric, n = best
    se = 1.0 / math.sqrt(n - 3)  # Fisher's approximation for a correlation of n points
    (rv,) = verdicts([rho], [se], what="correlations")
    verdict = "holds" if rv.call == "inconclusive" else "fails"
    return _claim(
        model,
        "pga.spectral_blindness",
        verdict,
        rho,
        se,
        f"Spearman of z ({tag}) with {metric} over {n} hooks (the larger |ρ| of RankMe, α-ReQ)",
        "holds if no correlation is found (the spectral profile does not track z), fails if one is; " + rv.words,
    )


def _one(rows: Sequence[Mapping[str, Any]], metric: str) -> Mapping[str, Any] | None:
    return next((r for r in rows if r.get("metric") == metric), None)


def _interaction_claim(model: str, rows: Sequence[Mapping[str, Any]]) -> Claim:
    ratio_row = _one(rows, "depth_width.ratio")
    aofe = [r for r in rows if r.get("metric") == "agop.aofe_ratio" and math.isfinite(float(r["value"]))]
    if ratio_row is None:
        return _na(model, "interaction.efficient_interval", "no depth_width row in this run")
    rdw = float(ratio_row["value"])
    lo, hi = (ratio_row.get("extras") or {}).get("interval") or EFFICIENT_INTERVAL
    inside = lo <= rdw <= hi
    if aofe:
        vals = np.array([float(r["value"]) for r in aofe])
        ses = np.array([_se(r.get("extras") or {}) for r in aofe])
        mean = float(vals.mean())
        se = float(np.sqrt(np.nansum(ses**2)) / len(ses)) if np.isfinite(ses).any() else math.nan
        where = f"R_D/W = {rdw:.4f} ({'inside' if inside else 'outside'} [{lo}, {hi}]); mean AOFE ratio over {len(aofe)} hooks"
    else:
        mean, se, where = (
            rdw,
            0.0,
            f"R_D/W = {rdw:.4f} ({'inside' if inside else 'outside'} [{lo}, {hi}]); no AGOP rows",
        )
    return _claim(
        model,
        "interaction.efficient_interval",
        "not applicable",
        mean,
        se,
        where,
        "a law across shapes at a fixed budget: one model cannot test it; the cross-model row compares models",
    )


def _capacity_claim(model: str, rows: Sequence[Mapping[str, Any]], published_eps: float | None) -> Claim:
    row = _one(rows, "epsilon.W_E")
    if row is None:
        return _na(model, "capacity.class", "no epsilon.W_E row in this run")
    eps = float(row["value"])
    ex = row.get("extras") or {}
    se = _se(ex)
    cls = ex.get("model_class") or model_class_of(eps)
    cap = _one(rows, "capacity.W_E")
    cex = (cap or {}).get("extras") or {}
    count = cex.get("log10_k")
    what = f"ε(W_E) = {eps:.5f}: {cls}" + (
        f", capacity 10^{float(count):.2f}" if isinstance(count, (int, float)) else ", capacity indeterminate"
    )
    if published_eps is None:
        return _claim(
            model,
            "capacity.class",
            "not applicable",
            eps,
            se,
            what + " (not in Table 1)",
            "the model is not in the paper's Table 1: class and count are reported, not compared",
        )
    pub_cls = model_class_of(published_eps)
    verdict = "holds" if pub_cls == cls else "fails"
    return _claim(
        model,
        "capacity.class",
        verdict,
        eps,
        se,
        what + f"; Table 1: ε = {published_eps} ({pub_cls})",
        "same class as Table 1 (ε is exact: its stderr is 0; class edges 0.1 and 0.2)",
    )


def model_claims(
    model: str,
    rows: Sequence[Mapping[str, Any]],
    *,
    n_layers: int,
    d_model: int,
    published_eps: float | None = None,
) -> list[Claim]:
    """Every per-model claim (``CLAIMS``) tested on one model's rows.

    Args:
        model: the model's study label (copied into each claim).
        rows: the model's report rows, ``Row.to_dict()`` form.
        n_layers, d_model: its shape (the claims' d-regimes and relative depths).
        published_eps: ε of the model in the capacity paper's Table 1, when it is there.
    """
    pga_claims = _pga_claims(model, rows, int(n_layers), int(d_model))
    caveat = next(
        (
            str(r["extras"]["readout_caveat"])
            for r in rows
            if r.get("metric", "").startswith("pga.") and (r.get("extras") or {}).get("readout_caveat")
        ),
        "",
    )
    if caveat:  # beside every PGA verdict of this model
        pga_claims = [replace(c, caveat=caveat) for c in pga_claims]
    return [
        *pga_claims,
        _interaction_claim(model, rows),
        _capacity_claim(model, rows, published_eps),
    ]


def cross_model_claims(claims: Sequence[Claim], ratios: Mapping[str, float], trained: Sequence[str]) -> list[Claim]:
    """The interaction law across the study's trained models: is the mean AOFE ratio higher for the
    models whose R_D/W lies in the efficient interval than for those outside? (Our reading of the
    law for models of different budgets and data: an indication, not the paper's fixed-budget test.)

    Args:
        claims: the per-model claims (their ``interaction.efficient_interval`` rows hold the mean AOFE ratio).
        ratios: model → R_D/W.
        trained: the models to compare (random-init controls left out).
    """
    rows = {c.model: c for c in claims if c.claim == "interaction.efficient_interval" and c.model in trained}
    inside = [
        m
        for m in rows
        if math.isfinite(ratios.get(m, math.nan)) and in_efficient_interval(ratios[m]) and math.isfinite(rows[m].value)
    ]
    outside = [m for m in rows if m not in inside and math.isfinite(rows[m].value)]
    if not inside or not outside:
        return [
            _na(
                "(all models)",
                "interaction.efficient_interval",
                "needs trained models both inside and outside [0.023, 0.047]; "
                f"inside: {inside or 'none'}, outside: {outside or 'none'}",
            )
        ]
    a = np.array([rows[m].value for m in inside])
    b = np.array([rows[m].value for m in outside])
    sa = np.array([rows[m].stderr for m in inside])
    sb = np.array([rows[m].stderr for m in outside])
    diff = float(a.mean() - b.mean())
    se = float(math.sqrt(np.nansum(sa**2) / len(a) ** 2 + np.nansum(sb**2) / len(b) ** 2))
    (dv,) = verdicts([diff], [se], what="differences")
    verdict = {"positive": "holds", "negative": "fails", "inconclusive": "undecided"}[dv.call]
    return [
        _claim(
            "(all models)",
            "interaction.efficient_interval",
            verdict,
            diff,
            se,
            f"mean AOFE ratio inside ({', '.join(inside)}) minus outside ({', '.join(outside)})",
            "difference: normal p of its combined stderr and |v| > 2 stderr; " + dv.words,
        )
    ]


def convergence_claims(rows: Sequence[Mapping[str, Any]], trained: Sequence[str]) -> list[Claim]:
    """Does the readout subspace concentrate the convergence of two trained models? One claim per pair.

    ``rows``: the study's convergence matrix (``tl_geometry.studies.convergence``). The z of ρ_readout
    against the random-subspace pairs at each depth is tested against its chance band
    ([`z_p_value`][tl_geometry.metrics.significance.z_p_value] at the rows' ``n_null``), Holm over the
    depths; holds if every depth is positive, fails if any is negative, else undecided. The number
    shown is the z at the last depth. (z has no stderr of its own here: its chance band is the test.)
    """
    out: list[Claim] = []
    pairs: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        if r["model_a"] in trained and r["model_b"] in trained and math.isfinite(r["z"]):
            pairs.setdefault((r["model_a"], r["model_b"]), []).append(r)
    for (a, b), rs in pairs.items():
        calls = [
            v.call
            for v in verdicts([float(r["z"]) for r in rs], [math.nan] * len(rs), n_null=[int(r["n_null"]) for r in rs])
        ]
        verdict = "holds" if all(c == "positive" for c in calls) else "fails" if "negative" in calls else "undecided"
        last = next((r for r in rs if r["depth"] == "last"), rs[-1])
        out.append(
            _claim(
                f"{a} vs {b}",
                "pga.convergence_readout",
                verdict,
                float(last["z"]),
                math.nan,
                ", ".join(
                    f"{r['depth']}: z = {r['z']:.2f}, ρ readout {r['rho_readout']:.3f} vs full {r['rho_full']:.3f}"
                    for r in rs
                ),
                f"chance band of z at n_null (Holm over {len(rs)} depths, α = {ALPHA}); "
                "holds if z > 0 at every depth, fails if < 0 at any",
            )
        )
    return out
