"""Plain-language readings of a [`GeometryReport`][tl_geometry.report.GeometryReport].

Each ``read_*`` function looks for the rows of one family (by the declared row names, e.g.
``"epsilon.W_E"``, ``"pga.z"``, ``"agop.aofe_ratio"``) and returns a list of short sentences that
put the measured numbers next to the papers' published ones. A family whose rows are absent
returns ``[]``, so every section of the HTML/markdown report is optional. Each family declares
its reading and its section title ([`tl_geometry.registry.FamilySpec`][tl_geometry.registry.FamilySpec]); [`sections`][tl_geometry.render.readings.sections]
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
from collections.abc import Callable
from typing import Any

from tl_geometry.base.numbers import fmt_number
from tl_geometry.report import GeometryReport, Row

__all__ = [
    "hook_position",
    "axis_label",
    "hook_label",
    "nan_reason",
    "sections",
    "section_readers",
    "model_line",
    "summary_table",
    "spread",
    "pm",
    "where_of",
    "rows_of",
    "one_row",
    "as_float",
    "NO_COUNT",
]


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

    The same place as [`hook_position`][tl_geometry.render.readings.hook_position]: ``blocks.L.hook_resid_pre`` (the input of block L)
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


def rows_of(report: GeometryReport, metric: str) -> list[Row]:
    """The rows of ``report`` named ``metric``, in report order (the one lookup of readings and figures)."""
    return [r for r in report.rows if r.metric == metric]


def one_row(report: GeometryReport, metric: str) -> Row | None:
    """The row of a once-per-model metric; when merged reports repeat it (e.g. ``epsilon.W_E``
    from both the epsilon metric and the SAE comparison), the one with the most extras."""
    rows = rows_of(report, metric)
    return max(rows, key=lambda r: len([v for v in r.extras.values() if v is not None])) if rows else None


def where_of(row: Row) -> str:
    return hook_label(row)


def section_readers() -> dict[str, Callable[[Any], list[str]]]:
    """``{section title: read}`` of every registered family that declares a reading, in section
    order ([`tl_geometry.registry.families`][tl_geometry.registry.families]; each family's ``read`` and ``title``)."""
    from tl_geometry import registry

    return {fam.section: fam.read for fam in registry.families() if callable(fam.read)}  # Lazy or function


def __getattr__(name: str):
    if name == "SECTION_READERS":  # a view of the declarations (see section_readers), not a table to edit
        return section_readers()
    from tl_geometry import registry

    for fam in registry.families():  # read_capacity, read_pga, ...: each family's declared reading, where it lives
        if isinstance(fam.read, registry.Lazy) and fam.read.ref.endswith(":" + name):
            return fam.read.resolve()
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


NO_COUNT = "ε ≥ 0.1: the capacity paper gives no count"
"""Why an indeterminate capacity has no count, when a row records no reason of its own."""


def nan_reason(row: Row) -> str:
    """Why a row's value is NaN, in words (``""`` for a finite value).

    From what the row records: first the words of the family that declares the row
    (``FamilySpec.explain``: a capacity row's status and reason,
    [`tl_geometry.families.capacity.reading.explain_nan`][tl_geometry.families.capacity.reading.explain_nan]; an SAE ratio's ``verdict`` and reason,
    [`tl_geometry.families.sae.reading.explain_nan`][tl_geometry.families.sae.reading.explain_nan]), then an indeterminate ``status``, any
    ``extras["reason"]``; else its declared description says what the row is and that it records no reason.
    """
    v = row.value
    if v is None or not isinstance(v, float) or not math.isnan(v):
        return ""
    ex = row.extras
    from tl_geometry import registry

    found = registry.declared_rows([row.metric]).get(row.metric)
    if found is not None and callable(found[0].explain):
        why_family = found[0].explain(row)  # the family's own words (capacity: an indeterminate count)
        if why_family:
            return str(why_family)
    if ex.get("status") == "indeterminate":
        return f"indeterminate, not a count ({ex.get('reason') or NO_COUNT})"
    if ex.get("reason"):
        return str(ex["reason"])
    what = f" ({found[1].description})" if found and found[1].description else ""
    return f"not a number; the row records no reason{what}"


def _descriptions() -> dict[str, str]:
    """``{row name: one line}``: the declared descriptions, where a family gives a shorter label (``FamilySpec.labels``) that one."""
    from tl_geometry import registry

    out = {name: spec.description for name, (_, spec) in registry.declared_rows().items()}
    for fam in registry.families():
        out.update(fam.labels)
    return out


def _count_or_fmt(v: float) -> str:
    """A whole number below 10⁷ in full (``d_mlp`` 1536, not 1.54e+03); anything else as `fmt_number`."""
    return str(int(v)) if math.isfinite(v) and v == int(v) and abs(v) < 1e7 else fmt_number(v)


def _stderr_cell(rows: list[Row]) -> str:
    """The summary's stderr column: "exact", the median standard error of the rows, or "—" (none recorded)."""
    if rows and all(r.extras.get("stderr_method") == "exact" for r in rows):
        return "exact"
    se = sorted(v for r in rows if isinstance(v := r.extras.get("stderr"), (int, float)) and math.isfinite(v))
    if not se:
        return "—"
    med = se[len(se) // 2]
    return ("" if len(se) == 1 else "~") + fmt_number(med, 2)


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
    from tl_geometry import registry

    for fam in registry.families():  # a family's word on a metric that ran without rows (sae: no SAE given)
        note = fam.note(report) if callable(fam.note) else None
        if note:
            notes.append(f"{fam.name}: {note}")
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


def as_float(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def pm(row: Row) -> str:
    se = as_float(row.extras.get("stderr"))
    return f"{fmt_number(row.value)} ± {fmt_number(se, 2)}" if math.isfinite(se) else fmt_number(row.value)


def spread(rows: list[Row], lo: Row, hi: Row) -> str:
    """Whether any two hooks of ``rows`` differ beyond their noise, as a clause.

    Our choice, the library's one verdict rule
    ([`verdicts`][tl_geometry.metrics.significance.verdicts]) over the family of every pair of
    hooks: a pair is called different only when the normal p of its difference over
    √(se_a² + se_b²) survives Holm's correction over the N(N − 1)/2 pairs and the difference
    exceeds 2 combined standard errors. Holm's first step is Bonferroni, so the bound shown is
    z*, the two-sided 5 % normal quantile Bonferroni-corrected over the pairs. The clause names the
    pair that differs most in standard errors (not necessarily ``hi`` and ``lo``: the extremes of the
    values may have the largest errors), and says "no difference between hooks is claimed" only
    when no pair differs. Hooks measured on the same sample are positively correlated, so
    √(se_a² + se_b²) overstates a difference's error: the test is conservative. Empty when the rows
    carry no finite ``extras["stderr"]`` or are exact.
    """
    from statistics import NormalDist

    from tl_geometry.metrics.significance import verdicts

    def se_of(r: Row) -> float | None:
        v = r.extras.get("stderr")
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None

    usable = [r for r in rows if se_of(r) is not None and math.isfinite(float(r.value))]
    if hi is lo or len(usable) < 2 or hi.extras.get("stderr_method") == "exact":
        return ""
    if not any(se_of(r) for r in usable):
        return ""
    n = len(usable)
    pairs = n * (n - 1) // 2
    z = NormalDist().inv_cdf(1 - 0.025 / max(1, pairs))
    cand = [
        (a, b) if a.value <= b.value else (b, a)
        for i, a in enumerate(usable)
        for b in usable[i + 1 :]
        if math.hypot(se_of(a) or 0.0, se_of(b) or 0.0) > 0
    ]
    vs = verdicts(
        [float(b.value) - float(a.value) for a, b in cand],
        [math.hypot(se_of(a) or 0.0, se_of(b) or 0.0) for a, b in cand],
        what="pairs of hooks",
    )
    best, best_pair, decided = -1.0, None, False
    for (a, b), v in zip(cand, vs, strict=True):
        t = abs(v.value) / v.stderr
        if t > best:
            best, best_pair, decided = t, (a, b), v.decided
    method = str(hi.extras.get("stderr_method", "standard error"))
    if best_pair is not None and decided:
        a, b = best_pair
        return (
            f" ({where_of(b)} and {where_of(a)} differ by {best:.1f} combined standard errors, beyond the "
            f"Bonferroni bound of {z:.1f} over {pairs} pairs of hooks (Holm's first step) and 2 standard errors; {method})"
        )
    return (
        f" (every pair of hooks within {z:.1f} combined standard errors, the Bonferroni bound over {pairs} pairs of hooks: "
        f"no difference between hooks is claimed; {method})"
    )
