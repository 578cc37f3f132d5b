"""Plain-language readings of a [`GeometryReport`][tl_geometry.report.GeometryReport].

Each ``read_*`` function looks for the rows of one family (by the declared row names, e.g.
``"epsilon.W_E"``, ``"pga.z"``, ``"agop.aofe_ratio"``) and returns a list of short sentences that
put the measured numbers next to the papers' published ones. A family whose rows are absent
returns ``[]``, so every section of the HTML/markdown report is optional. Each family declares
its reading and its section title ([`tl_geometry.registry.FamilySpec`][tl_geometry.registry.FamilySpec]); [`sections`][tl_geometry.readings.sections]
iterates the declarations, so a plugin family's reading gets its section too.

Our choices (the papers do not phrase their results this way):

* the model "like" a measured ε is the published model (capacity paper, Table 1) whose ε is
  closest, preferring one in the same class;
* PGA layers are summarized by their peak z and the layers with z < 0, per CCR;
* the depth/width ratio is compared with the efficient interval [0.023, 0.047] found on
  byte-level TinyGPT (interaction paper); a model outside it is not "wrong", only outside the
  range the paper measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from tl_geometry.hosts import PublishedHost, published_hosts
from tl_geometry.metrics import significance
from tl_geometry.metrics._capacity_forms import CLASS1_ABOVE, CLASS2_BELOW  # noqa: F401  (defined once, there)
from tl_geometry.metrics.interaction import EFFICIENT_INTERVAL  # defined once, there
from tl_geometry.report import GeometryReport, Row

__all__ = [
    "PublishedModel",
    "published_models",
    "epsilon_class",
    "closest_published",
    "closest_width",
    "hook_position",
    "axis_label",
    "hook_label",
    "nan_reason",
    "sections",
    "section_readers",
    "model_line",
    "summary_table",
    "read_capacity",
    "capacity_status",
    "read_pga",
    "read_spectral",
    "RANK_NAMES",
    "read_interaction",
    "wtw_name",
    "read_sae",
    "no_sae_note",
    "spread",
]

PublishedModel = PublishedHost
"""A published model as the readings use it (name, d_model, ε, ...): the table's one record type."""


def published_models() -> list[PublishedModel]:
    """Published ε of 45 models (capacity paper, Table 1), in the table's order
    ([`tl_geometry.hosts.published_hosts`][tl_geometry.hosts.published_hosts])."""
    return list(published_hosts().values())


def epsilon_class(eps: float) -> str:
    """Capacity-paper class for display: "Class 1" (ε > 0.2), "Class 2" (ε < 0.1), else "boundary"."""
    from tl_geometry.metrics.capacity import model_class_of

    return {"class1": "Class 1", "class2": "Class 2"}.get(model_class_of(eps), "boundary")


def closest_published(eps: float, models: Iterable[PublishedModel] | None = None) -> PublishedModel:
    """The published model whose ε is closest to ``eps``, preferring the same class."""
    models = list(models if models is not None else published_models())
    same = [m for m in models if epsilon_class(m.epsilon) == epsilon_class(eps)] or models
    return min(same, key=lambda m: abs(m.epsilon - eps))


def closest_width(eps: float, d: float, models: Iterable[PublishedModel] | None = None) -> PublishedModel:
    """The published model of the same class as ``eps`` whose d_model is closest to ``d`` (in log ratio).

    Our choice for "like X": a model of similar width and the same class is the most telling
    comparison (SmolLM2-135M, d = 576, ε = 0.73 → Gemma-3-270M, d = 640, ε = 0.416).
    """
    models = list(models if models is not None else published_models())
    same = [m for m in models if epsilon_class(m.epsilon) == epsilon_class(eps)] or models
    return min(same, key=lambda m: (abs(math.log(m.d_model / float(d))), abs(m.epsilon - eps)))


def hook_position(row: Row, n_layers: int | None = None) -> float:
    """x position of a row's hook on a by-layer axis: embed → -1, blocks.L → L, final → n_layers.

    ``blocks.L.hook_resid_pre`` is the residual stream before block L, i.e. ``blocks.{L-1}``'s
    output: it sits at L − 1 (``blocks.0.hook_resid_pre``, the embeddings, at −1). The final
    norm's hooks (``ln_final.*``, ``unembed.hook_in``) sit at n_layers.
    """
    hook = row.hook or ""
    if row.layer is not None:
        return float(row.layer) - (1.0 if hook.endswith("hook_resid_pre") else 0.0)
    if hook.startswith(("ln_final", "unembed")):
        return float(n_layers) if n_layers is not None else math.nan
    if "embed" in hook:
        return -1.0
    if n_layers is not None:
        return float(n_layers)
    return math.nan


def axis_label(row: Row, n_layers: int | None = None) -> str:
    """A row's tick on the figures' layer axis: ``"embed"``, ``"final"``, ``"L"`` or ``""`` (no hook).

    The same place as [`hook_position`][tl_geometry.readings.hook_position]: ``blocks.L.hook_resid_pre`` (the input of block L)
    is ``"L − 1"``, ``blocks.0.hook_resid_pre`` and ``hook_embed`` are ``"embed"``, the final
    norm's hooks ``"final"``. What the figures, the readings and the report's row table print.
    """
    hook = row.hook or ""
    if not hook and row.layer is None:
        return ""
    if hook.startswith(("ln_final", "unembed")):
        return "final"
    x = hook_position(row, n_layers)
    if math.isnan(x):
        return hook
    if x < 0:
        return "embed"
    if n_layers is not None and x >= n_layers:
        return "final"
    return str(int(x))


def hook_label(row: Row, n_layers: int | None = None) -> str:
    """Where a row was measured, in the figures' words: ``"embed"``, ``"layer 3"``, ``"final"``.

    A ``hook_resid_pre`` row also names its hook, since its place on the axis (L − 1, the output
    of the previous block) differs from the block index L in its name and in ``Row.layer``:
    ``"layer 1, blocks.2.hook_resid_pre"``, ``"embed, blocks.0.hook_resid_pre"``.
    """
    tick = axis_label(row, n_layers)
    if not tick:
        return "model"
    text = tick if tick in ("embed", "final") or tick == row.hook else f"layer {tick}"
    if (row.hook or "").endswith("hook_resid_pre"):
        text += f", {row.hook}"
    return text


def _fmt(v: float, digits: int = 3) -> str:
    if v is None or not math.isfinite(v):
        return str(v)
    if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
        return f"{v:.{digits - 1}e}"
    return f"{v:.{digits}g}"


def _rows(report: GeometryReport, metric: str) -> list[Row]:
    return [r for r in report.rows if r.metric == metric]


def _one(report: GeometryReport, metric: str) -> Row | None:
    """The row of a once-per-model metric; when merged reports repeat it (e.g. ``epsilon.W_E``
    from both the epsilon metric and the SAE comparison), the one with the most extras."""
    rows = _rows(report, metric)
    return max(rows, key=lambda r: len([v for v in r.extras.values() if v is not None])) if rows else None


def _where(row: Row) -> str:
    return hook_label(row)


# ----------------------------------------------------------------------------- families
def capacity_status(row: Row) -> tuple[str, str]:
    """(status, reason) of a ``capacity.*`` row: "count" or "indeterminate".

    Rows written by the capacity metric carry ``extras["status"]``; for older rows (a number
    whatever ε) the paper's rule is applied here: a count only for a finite value at ε < 0.1.
    """
    from tl_geometry.metrics._capacity_forms import _indeterminate_reason, model_class_of

    ex = row.extras
    if ex.get("status") in ("count", "indeterminate"):
        return ex["status"], str(ex.get("reason") or "")
    eps = ex.get("epsilon")
    if eps is not None:
        why = _indeterminate_reason(float(eps), model_class_of(float(eps)))
        if why is not None:
            return "indeterminate", why
    if row.value is None or not math.isfinite(row.value):
        return "indeterminate", "no finite count"
    return "count", ""


def _matrix_note(row: Row, mat: str) -> str:
    raw = row.extras.get("raw")
    if mat == "W_E":
        if raw is True:
            return "raw W_E, the paper's matrix"
        if raw is False:
            return (
                "W_E as processed by TransformerLens (center_writing_weights), not the raw checkpoint "
                "the paper measured; `tl-geometry capacity PATH` reads the raw one"
            )
        return "W_E"
    if raw is False:
        return (
            "W_U as processed by TransformerLens (" + str(row.extras.get("raw_why", "fold_ln / center_unembed")) + ")"
        )
    return "W_U"


def read_capacity(report: GeometryReport) -> list[str]:
    """ε of W_E / W_U and their capacity as the paper reports it, with the closest published model.

    Only W_E, the paper's matrix (its ε is of the raw input embedding), is compared with the
    published table; W_U's ε is given with its class and no comparison. A capacity is read as a
    count only where the paper gives one (Class 2, ε < 0.1); elsewhere it is indeterminate, with
    the reason and the preset.
    """
    out = []
    for mat in ("W_E", "W_U"):
        row = _one(report, f"epsilon.{mat}")
        if row is None:
            continue
        eps = row.value
        d = row.extras.get("d") or report.provenance.get("d_model")
        std = row.extras.get("std")
        mu = row.extras.get("mean")
        detail = (
            f" (μ = {_fmt(mu)}, σ = {_fmt(std)}" + (f", d = {int(d)})" if d else ")")
            if mu is not None and std is not None
            else ""
        )
        cls = epsilon_class(eps)
        note = _matrix_note(row, mat)
        if mat == "W_E":
            near = closest_published(eps)
            if d:
                like = closest_width(eps, d)
                text = (
                    f"{mat}: ε = {_fmt(eps)}{detail}: {cls}, like {like.name} ({like.epsilon:.3f}, d = {like.d_model}) "
                    f"in the capacity paper"
                )
                text += (
                    "."
                    if like.name == near.name
                    else f"; the closest published ε is {near.name}'s ({near.epsilon:.3f})."
                )
            else:
                text = f"{mat}: ε = {_fmt(eps)}{detail}: {cls}, like {near.name} ({near.epsilon:.3f}) in the capacity paper."
            text += f" Measured on the {note}."
        else:
            text = (
                f"{mat}: ε = {_fmt(eps)}{detail}: {cls} ({note}); not compared with the capacity paper's "
                "table, whose ε is of the input embedding W_E."
            )
        meaning = {
            "Class 1": " Class 1 (ε > 0.2): many pairs of rows are far from orthogonal; no near-orthogonal structure.",
            "Class 2": " Class 2 (ε < 0.1): near-orthogonal rows, as in most large models of the paper.",
            "boundary": " Between the classes (0.1 ≤ ε ≤ 0.2).",
        }[cls]
        out.append(text + meaning)
        cap = _one(report, f"capacity.{mat}")
        if cap is not None:
            d = cap.extras.get("d", d)
            form = cap.extras.get("form", "full")
            preset = cap.extras.get("preset", "paper")
            status, reason = capacity_status(cap)
            if status == "indeterminate":
                out.append(f'{mat}: capacity indeterminate, not a count: {reason} ({form} form, preset "{preset}").')
                continue
            ratio = f" ≈ {_fmt(cap.value / float(d))} × d" if d else ""
            ref = (
                ""
                if mat == "W_U" and _one(report, "capacity.W_E")
                else ("; the paper reports ≈ 4×10⁷ for Llama-2-7B (d = 4096, ε = 0.0645)")
            )
            k3 = cap.extras.get("k_3sigma")
            three = (
                f"; at μ + 3σ (the authors' upper figure) k ≈ {_fmt(k3)}"
                if k3 is not None and math.isfinite(k3)
                else ""
            )
            below = (
                " This is below d: the formula's domain ends there (d orthogonal directions always fit)."
                if cap.extras.get("below_d")
                else ""
            )
            out.append(
                f"{mat}: capacity k ≈ {_fmt(cap.value)} near-orthogonal directions{ratio} ({form} form, preset "
                f'"{preset}"){three}{ref}.{below}'
            )
    acts = sorted(_rows(report, "epsilon_activations"), key=lambda r: hook_position(r))
    if acts:
        lo = min(acts, key=lambda r: r.value)
        hi = max(acts, key=lambda r: r.value)
        n1 = sum(epsilon_class(r.value) == "Class 1" for r in acts)
        ses = [r.extras.get("stderr") for r in acts]
        sure = (
            f" ({sum(r.value - 2 * float(r.extras['stderr']) > CLASS1_ABOVE for r in acts)} of them by more than"
            " 2 standard errors)"
            if n1 and all(isinstance(v, (int, float)) and math.isfinite(v) for v in ses)
            else ""
        )
        out.append(
            f"Activations: ε ranges from {_fmt(lo.value)} ({_where(lo)}) to {_fmt(hi.value)} "
            f"({_where(hi)}){spread(acts, lo, hi)}; {n1} of {len(acts)} hooks are Class 1 (ε > 0.2){sure}."
        )
    return out


def _float(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def pga_calls(rows: Iterable[Row]) -> dict[int, list[tuple[Row, str, float]]]:
    """Per CCR level, each ``pga.z`` row with its call and Holm-adjusted p.

    The call is [`tl_geometry.metrics.significance.classify`][tl_geometry.metrics.significance.classify]: ``"positive"`` or
    ``"negative"`` when z is significant against random subspaces after Holm's correction over the
    hooks of that CCR level (family-wise α = 0.05) *and* lies more than two standard errors
    (``extras["stderr"]``) from 0; ``"inside"`` the chance band otherwise. The p of a row is its
    ``extras["p_value"]``, or recomputed from z and ``n_null`` (reports written before it existed).
    """
    by_ccr: dict[int, list[Row]] = {}
    for r in rows:
        by_ccr.setdefault(int(r.extras.get("ccr", 0)), []).append(r)
    out: dict[int, list[tuple[Row, str, float]]] = {}
    for ccr, group in sorted(by_ccr.items()):
        ps = []
        for r in group:
            p = _float(r.extras.get("p_value"))
            n_null = r.extras.get("n_null")
            if not math.isfinite(p) and isinstance(n_null, int) and n_null >= 2:
                p = significance.z_p_value(float(r.value), n_null)
            ps.append(p)
        adj = significance.holm(ps)
        out[ccr] = [
            (r, significance.classify(float(r.value), _float(r.extras.get("stderr")), float(a)), float(a))
            for r, a in zip(group, adj, strict=True)
        ]
    return out


def _pm(row: Row) -> str:
    se = _float(row.extras.get("stderr"))
    return f"{_fmt(row.value)} ± {_fmt(se, 2)}" if math.isfinite(se) else _fmt(row.value)


def spread(rows: list[Row], lo: Row, hi: Row) -> str:
    """Whether the largest minus the smallest value of ``rows`` exceeds its noise, as a clause.

    Our choice: hi − lo is called a difference only when it exceeds z*·√(se_hi² + se_lo²), with
    z* the two-sided 5 % normal quantile Bonferroni-corrected over the N(N − 1)/2 pairs of hooks
    (the extremes are selected from all pairs). Hooks measured on the same sample are positively
    correlated, so √(se_hi² + se_lo²) overstates the difference's error: the test is conservative.
    Empty when the rows carry no finite ``extras["stderr"]`` or are exact.
    """
    from statistics import NormalDist

    se = [v for v in (hi.extras.get("stderr"), lo.extras.get("stderr")) if isinstance(v, (int, float))]
    if hi is lo or len(se) < 2 or not all(math.isfinite(v) for v in se):
        return ""
    if hi.extras.get("stderr_method") == "exact" or not any(se):
        return ""
    n = len(rows)
    z = NormalDist().inv_cdf(1 - 0.025 / max(1, n * (n - 1) // 2))
    comb = math.hypot(se[0], se[1])
    method = str(hi.extras.get("stderr_method", "standard error"))
    if hi.value - lo.value > z * comb:
        return f" (a difference of {(hi.value - lo.value) / comb:.1f} combined standard errors; {method})"
    return (
        f" (within {z:.1f} combined standard errors, the Bonferroni bound over {n * (n - 1) // 2} pairs of hooks: "
        f"no difference between hooks is claimed; {method})"
    )


def read_pga(report: GeometryReport) -> list[str]:
    """Significant PGA z per CCR (Holm over hooks, beyond 2 standard errors), ρ_read, PC1 overlap vs k/d.

    Never calls a value inside the chance band a peak ([`pga_calls`][tl_geometry.readings.pga_calls])."""
    out = []
    zrows = _rows(report, "pga.z")
    for ccr, calls in pga_calls(zrows).items():
        m = len(calls)
        pos = [r for r, c, _ in calls if c == "positive"]
        neg = [r for r, c, _ in calls if c == "negative"]
        if pos:
            best = max(pos, key=lambda r: r.value)
            head = (
                f"PGA CCR-{ccr}: z is significantly positive at {len(pos)} of {m} hooks, "
                f"peak z = {_pm(best)} at {_where(best)}"
            )
        else:
            top = max((r for r, _, _ in calls), key=lambda r: r.value)
            head = (
                f"PGA CCR-{ccr}: no hook is significantly positive (the largest, z = {_pm(top)} at "
                f"{_where(top)}, lies inside the chance band)"
            )
        if neg:
            low = min(neg, key=lambda r: r.value)
            head += f"; significantly negative at {len(neg)} of {m} hooks (lowest z = {_pm(low)} at {_where(low)})"
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
                f"{_fmt(significance.z_threshold(0.05, n_null))} in 95 % of draws; the strictest Holm step over "
                f"{m} hooks needs |z| > {_fmt(significance.z_threshold(0.05 / m, n_null))}."
            )
        out.append(
            "Significance: against random subspaces (t test of exchangeability), Holm-corrected over the hooks "
            "of each CCR level (family-wise α = 0.05), and |z| more than 2 standard errors "
            "(stderr: jackknife over the null subspaces and over groups of points)." + band
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
        out.append(
            "Paper: intermediate layers peak at z = 9–24 (Pythia 70M–6.9B, Phi-1.5, OLMo-1B, "
            "Gemma-2-2B); models with d ≤ 1024 can go negative at late layers (Pythia-410M down to "
            "z ≈ −32) and removing the top 5–10 PCs restores positive z for d ≥ 768."
        )
    pc1 = _rows(report, "pga.pc1_overlap")
    if pc1:
        exp = pc1[0].extras.get("expected")
        hi = max(pc1, key=lambda r: r.value)
        tail = f" (a random direction: k/d = {_fmt(exp)})" if exp is not None else ""
        out.append(f"PC1 overlap with the readout subspace peaks at {_fmt(hi.value)} at {_where(hi)}{tail}.")
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
        rows = _rows(report, metric)
        if not rows:
            continue
        lo = min(rows, key=lambda r: r.value)
        hi = max(rows, key=lambda r: r.value)
        out.append(
            f"{label}: {_fmt(lo.value)} ({_where(lo)}) to {_fmt(hi.value)} ({_where(hi)}){spread(rows, lo, hi)}."
        )
    return out


_RESID_PRE_AXIS = (
    "AGOP is taken at the input of every block (blocks.L.hook_resid_pre), drawn at layer L − 1 (the "
    "previous block's output): embed = blocks.0.hook_resid_pre, the embeddings; the last point is the "
    "input of the last block, and the last block's output is not measured (no final point)."
)
"""What the AOFE figure's axis means when AGOP was taken where the "agop" metric takes it by default."""


def wtw_name(row: Row, d_model: Any = None) -> str:
    """What a ``wtw.aofe_ratio`` row is the AOFE ratio of, with the Gram's shape.

    The "wtw_aofe" metric takes the Gram WᵀW / n of a matrix whose rows are vectors
    ([`tl_geometry.metrics.interaction.wtw_aofe`][tl_geometry.metrics.interaction.wtw_aofe]): W_E (d_vocab × d_model) by default, so
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
    rows = _rows(report, "agop.aofe_ratio")
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
        out.append(
            f"AGOP AOFE ratio (off-diagonal share of ‖G‖²_F; 0 = no interaction between coordinates, "
            f"→1 = all mass off-diagonal; {which}): mean {_fmt(sum(vals) / len(vals))} over {len(vals)} hooks, "
            f"from {_fmt(lo.value)} ({_where(lo)}) to {_fmt(hi.value)} ({_where(hi)}){spread(rows, lo, hi)}."
        )
        if all((r.hook or "").endswith("hook_resid_pre") for r in rows):
            out.append(_RESID_PRE_AXIS)
    for r in _rows(report, "wtw.aofe_ratio"):
        out.append(f"{wtw_name(r, report.provenance.get('d_model'))}, from the weights only: {_fmt(r.value)}.")
    dw = _one(report, "depth_width.ratio")
    if dw is not None:
        low, high = dw.extras.get("interval") or EFFICIENT_INTERVAL
        inside = dw.extras.get("in_interval", low <= dw.value <= high)
        where = "inside" if inside else ("above" if dw.value > high else "below")
        out.append(
            f"R_D/W = n_layers / d_model = {_fmt(dw.value)}: {where} the efficient interval "
            f"[{low}, {high}] found on byte-level TinyGPT (best shapes α* = 0.023–0.047 for 1M–10M parameters)."
        )
    return out


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
    widths = _rows(report, "sae.d_sae")
    ratios = _rows(report, "sae.capacity_ratio")
    if not widths and not ratios:
        none = no_sae_note(report)
        return [none] if none else []
    out = []
    if widths:
        releases = sorted({str(r.extras.get("release", "?")) for r in widths})
        ws = sorted(r.value for r in widths)
        out.append(
            f"{len(widths)} SAEs from {len(releases)} release(s) ({', '.join(releases[:4])}"
            f"{', …' if len(releases) > 4 else ''}): widths {_fmt(ws[0])} to {_fmt(ws[-1])} features."
        )
    finite = [r for r in ratios if math.isfinite(r.value)]
    if finite:
        hi = max(finite, key=lambda r: r.value)
        over = sum(r.value > 1 for r in finite)
        preset = hi.extras.get("preset", "paper")
        out.append(
            f"Width / capacity: up to {_fmt(hi.value)} ({hi.extras.get('sae_id', hi.hook or '?')}); "
            f"{over} of {len(finite)} SAEs ask for more near-orthogonal features than the capacity allows "
            f'(preset "{preset}").'
        )
        shared = [r for r in _rows(report, "sae.shared_ratio") if math.isfinite(r.value)]
        if shared:
            top = max(shared, key=lambda r: r.value)
            tied = top.extras.get("tied")
            how = "(V + d_sae) / k, tied embeddings" if tied else "(2V + d_sae) / k, untied embeddings"
            out.append(f"Shared with the vocabulary (capacity paper, Eq. 2: {how}): up to {_fmt(top.value)}.")
    elif ratios:
        why = next((str(r.extras.get("reason")) for r in ratios if r.extras.get("reason")), "")
        out.append(
            "The capacity is indeterminate for this model"
            + (f" ({why})" if why else " (ε ≥ 0.1: the paper gives no count)")
            + ", so SAE widths cannot be compared with it."
        )
    return out


def section_readers() -> dict[str, Callable[[Any], list[str]]]:
    """``{section title: read}`` of every registered family that declares a reading, in section
    order ([`tl_geometry.registry.families`][tl_geometry.registry.families]; each family's ``read`` and ``title``)."""
    from tl_geometry import registry

    return {fam.section: fam.read for fam in registry.families() if callable(fam.read)}  # Lazy or function


def __getattr__(name: str):
    if name == "SECTION_READERS":  # a view of the declarations (see section_readers), not a table to edit
        return section_readers()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def sections(report: GeometryReport) -> dict[str, list[str]]:
    """``{section title: sentences}`` for every declared family with rows in ``report`` (others
    omitted). A reading that raises is logged and skipped: one bad family must not cost the others."""
    out = {}
    for title, fn in section_readers().items():
        try:
            lines = fn(report)
        except Exception:  # noqa: BLE001 - rendering is best-effort per section
            import logging

            logging.getLogger(__name__).exception("reading %r failed; skipping its section", title)
            continue
        if lines:
            out[title] = list(lines)
    return out


def model_line(report: GeometryReport) -> str:
    """One line about what was measured: shape, text, time (from provenance and ``shape.*`` rows)."""
    prov = dict(report.provenance)
    for r in report.rows:
        if r.metric.startswith("shape."):
            prov.setdefault(r.metric.split(".", 1)[1], int(r.value))
    parts = []
    shape = []
    if prov.get("n_layers") is not None:
        shape.append(f"{int(prov['n_layers'])} layers")
    if prov.get("d_model") is not None:
        shape.append(f"d_model {int(prov['d_model'])}")
    if prov.get("d_vocab") is not None:
        shape.append(f"vocabulary {int(prov['d_vocab']):,}")
    if shape:
        parts.append(", ".join(shape))
    tokens = prov.get("tokens_shape")
    if tokens:
        corpus = prov.get("corpus")
        parts.append(f"{tokens[0]} × {tokens[1]} tokens" + (f" of {corpus}" if corpus else ""))
    if prov.get("total_s") is not None:
        parts.append(f"computed in {float(prov['total_s']):.0f} s")
    if prov.get("weight_processing"):
        on = [k for k, v in dict(prov["weight_processing"]).items() if v]
        if on:
            parts.append("weights processed with " + ", ".join(on))
        elif prov.get("processing") == "none":
            parts.append("unprocessed weights (raw hidden states and W_U)")
    return "; ".join(parts) + ("." if parts else "")


def nan_reason(row: Row) -> str:
    """Why a row's value is NaN, in words (``""`` for a finite value).

    From what the row records: a capacity row's status and reason ([`capacity_status`][tl_geometry.readings.capacity_status]),
    an SAE ratio's ``verdict`` and ``reason``, any ``extras["reason"]``; else its declared
    description says what the row is and that it records no reason.
    """
    v = row.value
    if v is None or not isinstance(v, float) or not math.isnan(v):
        return ""
    ex = row.extras
    if row.metric.startswith("capacity."):
        status, why = capacity_status(row)
        if status == "indeterminate":
            return f"indeterminate, not a count ({why})" if why else "indeterminate, not a count"
    verdict = ex.get("verdict")
    why = str(ex.get("reason") or "ε ≥ 0.1: the capacity paper gives no count")
    if verdict == "indeterminate":
        return f"indeterminate: the host's capacity k is not a count, so there is nothing to divide by ({why})"
    if ex.get("status") == "indeterminate":
        return f"indeterminate, not a count ({why})"
    if verdict == "tied unknown":
        return "not computed: whether the host ties its embedding and unembedding is unknown (pass tied=)"
    if verdict == "d_vocab unknown":
        return "not computed: the host's vocabulary size is unknown (pass d_vocab=)"
    if ex.get("reason"):
        return str(ex["reason"])
    from tl_geometry import registry

    spec = registry.declared_rows([row.metric]).get(row.metric)
    what = f" ({spec[1].description})" if spec and spec[1].description else ""
    return f"not a number; the row records no reason{what}"


def _descriptions() -> dict[str, str]:
    """``{row name: one line}``: the declared descriptions, with the two ranks' names."""
    from tl_geometry import registry

    out = {name: spec.description for name, (_, spec) in registry.declared_rows().items()}
    out.update(RANK_NAMES)
    return out


def _count_or_fmt(v: float) -> str:
    """A whole number below 10⁷ in full (``d_mlp`` 1536, not 1.54e+03); anything else as `_fmt`."""
    return str(int(v)) if math.isfinite(v) and v == int(v) and abs(v) < 1e7 else _fmt(v)


def _stderr_cell(rows: list[Row]) -> str:
    """The summary's stderr column: "exact", the median standard error of the rows, or "—" (none recorded)."""
    if rows and all(r.extras.get("stderr_method") == "exact" for r in rows):
        return "exact"
    se = sorted(v for r in rows if isinstance(v := r.extras.get("stderr"), (int, float)) and math.isfinite(v))
    if not se:
        return "—"
    med = se[len(se) // 2]
    return ("" if len(se) == 1 else "~") + _fmt(med, 2)


def summary_table(report: GeometryReport, *, width: int = 60) -> str:
    """A plain-text table to print after a run: per row name its count, min, max, standard error
    ("exact", the median over the rows as "~x", or "—" when none is recorded) and what it is;
    then, for every row name with a NaN value, why (e.g. an indeterminate capacity and its reason),
    and for a metric that ran without rows, why it has none (an SAE comparison without SAEs).

    Args:
        report: the results.
        width: the "what" column is cut to this many characters (0: no such column).
    """
    stats: dict[str, list[Row]] = {}
    for r in report.rows:
        stats.setdefault(r.metric, []).append(r)
    notes = []
    none = no_sae_note(report)
    if none:
        notes.append(f"sae: {none}")
    if not stats:
        return "(empty report)" + "".join(f"\n{n}" for n in notes)
    what = _descriptions() if width else {}
    w = max(len(m) for m in stats)
    head = f"{'metric':<{w}}  {'n':>4}  {'min':>10}  {'max':>10}  {'stderr':>10}"
    lines = [head + ("  what" if what else ""), ""]  # the rule under the header, sized below
    nan_lines = []
    for m in sorted(stats):
        rows = stats[m]
        vals = [r.value for r in rows if math.isfinite(r.value)] or [math.nan]
        desc = what.get(m, "")
        if len(desc) > width:
            desc = desc[: width - 1] + "…"
        line = (
            f"{m:<{w}}  {len(rows):>4}  {_count_or_fmt(min(vals)):>10}  {_count_or_fmt(max(vals)):>10}  "
            f"{_stderr_cell(rows):>10}"
        )
        lines.append((line + "  " + desc).rstrip() if what else line)
        nans = [r for r in rows if isinstance(r.value, float) and math.isnan(r.value)]
        reasons = list(dict.fromkeys(nan_reason(r) for r in nans))
        for why in reasons:
            n = sum(nan_reason(r) == why for r in nans)
            count = f"{n} of {len(rows)} rows are nan" if len(rows) > 1 else "is nan"
            nan_lines.append(f"  {m} {count}: {why}")
    lines[1] = "-" * max(len(line) for line in lines)
    if nan_lines:
        lines += ["", "nan, why:"] + nan_lines
    if notes:
        lines += [""] + notes
    return "\n".join(lines)
