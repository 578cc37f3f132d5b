"""The capacity family's reading (arXiv 2606.02765): the sentences of its report section, and the published-model lookups they use."""

from __future__ import annotations

import math
from collections.abc import Iterable

from tl_geometry.base.numbers import fmt_number
from tl_geometry.families.capacity.hosts import PublishedHost, published_hosts
from tl_geometry.metrics._capacity_forms import CLASS1_ABOVE
from tl_geometry.metrics.significance import verdicts
from tl_geometry.render.readings import hook_position, one_row, rows_of, spread, where_of
from tl_geometry.report import GeometryReport, Row

PublishedModel = PublishedHost
"""A published model as the readings use it (name, d_model, ε, ...): the table's one record type."""


def published_models() -> list[PublishedModel]:
    """Published ε of 45 models (capacity paper, Table 1), in the table's order
    ([`tl_geometry.families.capacity.hosts.published_hosts`][tl_geometry.families.capacity.hosts.published_hosts])."""
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
        row = one_row(report, f"epsilon.{mat}")
        if row is None:
            continue
        eps = row.value
        d = row.extras.get("d") or report.provenance.get("d_model")
        std = row.extras.get("std")
        mu = row.extras.get("mean")
        detail = (
            f" (μ = {fmt_number(mu)}, σ = {fmt_number(std)}" + (f", d = {int(d)})" if d else ")")
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
                    f"{mat}: ε = {fmt_number(eps)}{detail}: {cls}, like {like.name} ({like.epsilon:.3f}, d = {like.d_model}) "
                    f"in the capacity paper"
                )
                text += (
                    "."
                    if like.name == near.name
                    else f"; the closest published ε is {near.name}'s ({near.epsilon:.3f})."
                )
            else:
                text = f"{mat}: ε = {fmt_number(eps)}{detail}: {cls}, like {near.name} ({near.epsilon:.3f}) in the capacity paper."
            text += f" Measured on the {note}."
        else:
            text = (
                f"{mat}: ε = {fmt_number(eps)}{detail}: {cls} ({note}); not compared with the capacity paper's "
                "table, whose ε is of the input embedding W_E."
            )
        meaning = {
            "Class 1": " Class 1 (ε > 0.2): many pairs of rows are far from orthogonal; no near-orthogonal structure.",
            "Class 2": " Class 2 (ε < 0.1): near-orthogonal rows, as in most large models of the paper.",
            "boundary": " Between the classes (0.1 ≤ ε ≤ 0.2).",
        }[cls]
        out.append(text + meaning)
        cap = one_row(report, f"capacity.{mat}")
        if cap is not None:
            d = cap.extras.get("d", d)
            form = cap.extras.get("form", "full")
            preset = cap.extras.get("preset", "paper")
            status, reason = capacity_status(cap)
            if status == "indeterminate":
                out.append(f'{mat}: capacity indeterminate, not a count: {reason} ({form} form, preset "{preset}").')
                continue
            ratio = f" ≈ {fmt_number(cap.value / float(d))} × d" if d else ""
            ref = (
                ""
                if mat == "W_U" and one_row(report, "capacity.W_E")
                else ("; the paper reports ≈ 4×10⁷ for Llama-2-7B (d = 4096, ε = 0.0645)")
            )
            k3 = cap.extras.get("k_3sigma")
            three = (
                f"; at μ + 3σ (the authors' upper figure) k ≈ {fmt_number(k3)}"
                if k3 is not None and math.isfinite(k3)
                else ""
            )
            below = (
                " This is below d: the formula's domain ends there (d orthogonal directions always fit)."
                if cap.extras.get("below_d")
                else ""
            )
            out.append(
                f"{mat}: capacity k ≈ {fmt_number(cap.value)} near-orthogonal directions{ratio} ({form} form, preset "
                f'"{preset}"){three}{ref}.{below}'
            )
    acts = sorted(rows_of(report, "epsilon_activations"), key=lambda r: hook_position(r))
    if acts:
        lo = min(acts, key=lambda r: r.value)
        hi = max(acts, key=lambda r: r.value)
        n1 = sum(epsilon_class(r.value) == "Class 1" for r in acts)
        ses = [r.extras.get("stderr") for r in acts]
        sure = ""
        if n1 and all(isinstance(v, (int, float)) and math.isfinite(v) for v in ses):
            # the one verdict rule: above the class edge beyond the noise, Holm over the hooks scanned
            vs = verdicts([r.value for r in acts], [float(v) for v in ses], reference=CLASS1_ABOVE)  # type: ignore[arg-type]
            sure = (
                f" ({sum(v.call == 'positive' for v in vs)} of them above 0.2 beyond the noise: normal p, "
                f"Holm over {len(acts)} hooks, and more than 2 standard errors)"
            )
        out.append(
            f"Activations: ε ranges from {fmt_number(lo.value)} ({where_of(lo)}) to {fmt_number(hi.value)} "
            f"({where_of(hi)}){spread(acts, lo, hi)}; {n1} of {len(acts)} hooks are Class 1 (ε > 0.2){sure}."
        )
        above = [r for r in acts if r.value > 1.0]
        if above:
            out.append(f"ε > 1 at {len(above)} of {len(acts)} hooks: {EPS_ABOVE_ONE}")
    return out


EPS_ABOVE_ONE = (
    "ε = μ + 2σ of the pairwise cosines is a mean plus two standard deviations, not a cosine, so it is not "
    "bounded by 1. Above 1 it says the activations share a common direction (a positive mean cosine μ) and "
    "spread around it: μ = 0.5 with σ = 0.3 already gives 1.1, although no cosine exceeds 1. It is read as "
    "Class 1 (no near-orthogonal structure), as any ε > 0.2."
)
"""Why ε of activations can exceed 1, where it is shown (the capacity reading and the ε-by-layer figure)."""


def explain_nan(row: Row) -> str:
    """Why a ``capacity.*`` row is NaN: an indeterminate count and its reason ("" otherwise; the
    family's ``explain`` for [`tl_geometry.render.readings.nan_reason`][tl_geometry.render.readings.nan_reason])."""
    if not row.metric.startswith("capacity."):
        return ""
    status, why = capacity_status(row)
    if status != "indeterminate":
        return ""
    return f"indeterminate, not a count ({why})" if why else "indeterminate, not a count"
