"""A study's tables, figures and pages: ``study.json``, ``study.md``, ``index.html`` and the PNGs.

Everything here is a function of the finished job records and the settings (no timings), so a
study killed mid-way and rerun writes the same bytes as one that ran straight through.
"""

from __future__ import annotations

import base64
import html as _html
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tl_geometry.base.numbers import fmt_number
from tl_geometry.studies.claims import Claim, convergence_claims, cross_model_claims, model_claims, relative_depth
from tl_geometry.studies.result import OUTPUT_FILES, SCHEMA_VERSION, StudyModel, StudyResult

__all__ = ["assemble", "write_outputs", "render_markdown", "render_html", "draw_figures", "PROFILE_PANELS"]

PROFILE_PANELS: tuple[tuple[str, int | None, str], ...] = (
    ("pga.z", 0, "PGA z, CCR-0"),
    ("pga.z", 1, "PGA z, CCR-1"),
    ("pga.z", 5, "PGA z, CCR-5"),
    ("epsilon_activations", None, "ε of activations (μ + 2σ)"),
    ("id.twonn", None, "intrinsic dimension (TwoNN)"),
    ("agop.aofe_ratio", None, "AOFE ratio (AGOP)"),
    ("spectral.rankme", None, "RankMe"),
    ("spectral.alpha_req", None, "α-ReQ"),
)
"""(metric, CCR level or None, title) of each panel of ``profiles.png``."""


def _published_eps(m: StudyModel) -> float | None:
    if m.control is not None or m.checkpoint is not None:
        return None
    from tl_geometry.families.capacity.hosts import find_host

    for name in (m.label, m.spec):
        try:
            host = find_host(name)
        except Exception:  # noqa: BLE001 - a name that is no host is simply not in Table 1
            host = None
        if host is not None:
            return float(host.epsilon)
    return None


def _stderr(extras: Mapping[str, Any]) -> float | None:
    v = extras.get("stderr")
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def assemble(
    entries: Sequence[StudyModel], records: Sequence[Mapping[str, Any] | None], settings: Mapping[str, Any], *, out: str
) -> StudyResult:
    """The study's tables from its models' job records (None: not run)."""
    from tl_geometry.studies.convergence import convergence_matrix

    rows: list[dict] = []
    claims: list[Claim] = []
    failed: dict[str, str] = {}
    reps: dict[str, Any] = {}
    shapes: dict[str, tuple[int, int]] = {}
    ratios: dict[str, float] = {}
    for m, rec in zip(entries, records):
        if rec is None:
            failed[m.label] = "not run"
            continue
        if rec.get("status") != "ok":
            failed[m.label] = str(rec.get("error", "failed"))
            continue
        prov = rec.get("provenance") or {}
        n_layers, d_model = int(prov.get("n_layers") or 0), int(prov.get("d_model") or 0)
        shapes[m.label] = (n_layers, d_model)
        for r in rec["rows"]:
            ex = r.get("extras") or {}
            rows.append(
                {
                    "model": r["model"],
                    "hook": r["hook"],
                    "layer": r["layer"],
                    "relative_depth": relative_depth(r["hook"], n_layers),
                    "metric": r["metric"],
                    "value": r["value"] if isinstance(r["value"], (int, float)) else None,
                    "stderr": _stderr(ex),
                    "control": m.control,
                    "checkpoint": m.checkpoint,
                    "extras": ex,
                }
            )
            if r["metric"] == "depth_width.ratio":
                ratios[m.label] = float(r["value"])
        claims.extend(
            model_claims(m.label, rec["rows"], n_layers=n_layers, d_model=d_model, published_eps=_published_eps(m))
        )
        if rec.get("reps"):
            reps[m.label] = rec["reps"]
    trained = [m.label for m in entries if m.control is None and m.label in shapes]
    claims.extend(cross_model_claims(claims, ratios, trained))
    conv = (
        convergence_matrix(
            reps, k=int(settings["convergence_k"]), n_null=int(settings["convergence_null"]), seed=int(settings["seed"])
        )
        if len(reps) >= 2
        else []
    )
    claims.extend(convergence_claims(conv, trained))
    return StudyResult(
        out,
        tuple(entries),
        tuple(rows),
        tuple(c.to_dict() for c in claims),
        tuple(conv),
        failed,
    )


# ----------------------------------------------------------------------------- figures
def _styles(models: Sequence[StudyModel]) -> dict[str, dict[str, Any]]:
    """Colour and line style per model: a trajectory's checkpoints on viridis by step, other
    models on tab10, a random-init twin dashed in its model's colour."""
    from matplotlib import colormaps

    out: dict[str, dict[str, Any]] = {}
    tab = colormaps["tab10"]
    viridis = colormaps["viridis"]
    groups: dict[str, list[StudyModel]] = {}
    for m in models:
        if m.group:
            groups.setdefault(m.group, []).append(m)
    base_colors: dict[str, Any] = {}
    i = 0
    for m in models:
        if m.group:
            members = groups[m.group]
            j = members.index(m)
            out[m.label] = {"color": viridis(j / max(1, len(members) - 1)), "ls": "-"}
            continue
        if m.spec not in base_colors:
            base_colors[m.spec] = tab(i % 10)
            i += 1
        out[m.label] = {"color": base_colors[m.spec], "ls": "--" if m.control else "-"}
    return out


def _series(result: StudyResult, label: str, metric: str, ccr: int | None):
    pts = []
    for r in result.rows:
        if r["model"] != label or r["metric"] != metric or r["relative_depth"] is None or r["value"] is None:
            continue
        if ccr is not None and (r["extras"] or {}).get("ccr") != ccr:
            continue
        if metric == "id.twonn" and r["hook"] and not r["hook"].endswith("resid_post"):
            continue
        pts.append((r["relative_depth"], r["value"], r["stderr"] if r["stderr"] is not None else math.nan))
    pts.sort()
    return pts


def _profiles(result: StudyResult, plt, path: Path, dpi: int) -> bool:
    import numpy as np

    from tl_geometry.metrics.significance import ALPHA, z_threshold

    panels = [p for p in PROFILE_PANELS if any(_series(result, m.label, p[0], p[1]) for m in result.models)]
    if not panels:
        return False
    styles = _styles(result.models)
    ncols = min(4, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 2.9 * nrows + 0.6), squeeze=False)
    for ax, (metric, ccr, title) in zip(axes.flat, panels):
        n_null = None
        for m in result.models:
            pts = _series(result, m.label, metric, ccr)
            if not pts:
                continue
            x, y, se = (np.array(v, dtype=float) for v in zip(*pts))
            st = styles[m.label]
            ax.plot(x, y, st["ls"], color=st["color"], lw=1.3, marker=".", ms=3, label=m.label)
            ok = np.isfinite(se)
            if ok.any():
                ax.fill_between(x[ok], (y - se)[ok], (y + se)[ok], color=st["color"], alpha=0.18, lw=0)
            if metric == "pga.z":
                n_null = n_null or next(
                    (
                        (r["extras"] or {}).get("n_null")
                        for r in result.rows
                        if r["model"] == m.label and r["metric"] == "pga.z"
                    ),
                    None,
                )
        if metric == "pga.z" and n_null:
            t = z_threshold(ALPHA, int(n_null))
            ax.axhspan(-t, t, color="0.85", alpha=0.6, lw=0, zorder=0)
            ax.axhline(0, color="0.5", lw=0.6)
            lo, hi = ax.get_ylim()
            if max(abs(lo), abs(hi)) > 50:  # one model's |z| in the hundreds would flatten the others
                ax.set_yscale("symlog", linthresh=5)
                title += " (symlog)"
        ax.set_title(title, fontsize=9)
        ax.set_xlim(-0.02, 1.02)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("relative depth", fontsize=8)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    for ax in axes.flat:
        h, lab = ax.get_legend_handles_labels()
        if len(lab) > len(labels):
            handles, labels = h, lab
    fig.legend(handles, labels, loc="lower center", ncol=min(4, max(1, len(labels))), fontsize=7, frameon=False)
    fig.suptitle("Per-layer profiles (±1 stderr bands; grey: PGA chance band at α = 0.05)", fontsize=10)
    fig.tight_layout(rect=(0, 0.04 + 0.025 * math.ceil(len(labels) / 4), 1, 0.96))
    fig.savefig(path, dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return True


def _table1(result: StudyResult, plt, path: Path, dpi: int) -> bool:
    from tl_geometry.families.capacity.hosts import published

    ours = []
    for m in result.models:
        row = next((r for r in result.rows if r["model"] == m.label and r["metric"] == "epsilon.W_E"), None)
        if row is None or row["value"] is None:
            continue
        ours.append((m, int((row["extras"] or {}).get("d") or 0), float(row["value"])))
    if not ours:
        return False
    styles = _styles(result.models)
    pub = published()
    fig, ax = plt.subplots(figsize=(7.2, 4.4))
    xs = [p.d_model for p in pub.values()]
    ys = [p.epsilon for p in pub.values()]
    ax.scatter(xs, ys, s=14, color="0.55", label=f"capacity paper, Table 1 ({len(pub)} models)", zorder=2)
    for name, p in pub.items():
        if name.startswith(("Gemma-3-270M", "Llama-2-7B", "Gemma-7B", "Qwen2.5-0.5B", "Llama-3.2-1B")):
            ax.annotate(
                name, (p.d_model, p.epsilon), fontsize=6, color="0.4", xytext=(3, 2), textcoords="offset points"
            )
    for m, d_model, eps in ours:
        st = styles[m.label]
        ax.scatter(
            [d_model], [eps], s=60, marker="*" if not m.control else "X", color=st["color"], label=m.label, zorder=3
        )
    from tl_geometry.metrics._capacity_forms import CLASS1_ABOVE, CLASS2_BELOW

    ax.axhspan(CLASS2_BELOW, CLASS1_ABOVE, color="0.9", zorder=0, lw=0)
    ax.axhline(CLASS1_ABOVE, color="0.6", lw=0.6)
    ax.axhline(CLASS2_BELOW, color="0.6", lw=0.6)
    for y, text in (
        (CLASS1_ABOVE + 0.005, "class 1 above (capacity indeterminate)"),
        (CLASS2_BELOW - 0.015, "class 2 below (a capacity count)"),
    ):
        ax.text(0.99, y, text, transform=ax.get_yaxis_transform(), fontsize=7, ha="right")
    ax.set_xscale("log")
    ax.set_xlabel("d_model")
    ax.set_ylabel("ε = μ + 2σ of W_E's pairwise cosines")
    ax.set_title("Embedding ε beside the capacity paper's Table 1", fontsize=10)
    ax.legend(fontsize=7, loc="upper right", frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return True


def _convergence(result: StudyResult, plt, path: Path, dpi: int) -> bool:
    import numpy as np

    from tl_geometry.studies.convergence import pair_table

    if not result.convergence:
        return False
    labels = [
        m.label for m in result.models if any(m.label in (c["model_a"], c["model_b"]) for c in result.convergence)
    ]
    fields = (("rho_full", "ρ full space"), ("rho_readout", "ρ readout subspaces"), ("z", "z readout vs random"))
    depths = [d for d in ("last", "mid") if any(c["depth"] == d for c in result.convergence)]
    n = len(labels)
    size = max(2.6, 0.5 * n + 1.2)
    fig, axes = plt.subplots(len(depths), 3, figsize=(3 * size, size * len(depths)), squeeze=False)
    for row, depth in enumerate(depths):
        for col, (f, title) in enumerate(fields):
            ax = axes[row, col]
            M = pair_table(result.convergence, depth, f, labels)
            S = pair_table(result.convergence, depth, f + "_stderr", labels) if f != "z" else None
            cmap = "RdBu_r" if f == "z" else "viridis"
            lim = np.nanmax(np.abs(M)) if np.isfinite(M).any() else 1.0
            im = ax.imshow(M, cmap=cmap, vmin=-lim if f == "z" else 0, vmax=lim if f == "z" else 1)
            for i in range(n):
                for j in range(n):
                    if math.isfinite(M[i, j]):
                        txt = f"{M[i, j]:.2f}" + (
                            f"\n±{S[i, j]:.2f}" if S is not None and math.isfinite(S[i, j]) else ""
                        )
                        ax.text(j, i, txt, ha="center", va="center", fontsize=6, color="w" if f != "z" else "k")
            ax.set_xticks(range(n), labels, rotation=40, ha="right", fontsize=6)
            ax.set_yticks(range(n), labels, fontsize=6)
            ax.set_title(f"{title} ({depth} layer)", fontsize=8)
            fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return True


def draw_figures(result: StudyResult, folder: Path, *, dpi: int = 110) -> dict[str, Path]:
    """Draw the study's figures into ``folder``; returns ``{name: path}`` of those drawn."""
    from tl_geometry.render.plotting import available, pyplot

    if not available():
        return {}
    plt = pyplot()
    out = {}
    for name, fn in (("profiles", _profiles), ("capacity_table1", _table1), ("convergence", _convergence)):
        path = folder / f"{name}.png"
        if fn(result, plt, path, dpi):
            out[name] = path
    return out


# ----------------------------------------------------------------------------- tables
def _fmt(v: Any, digits: int = 3) -> str:
    """A table cell: "—" when missing or not finite, ``digits`` decimals below 1, scientific from 10⁴."""
    return fmt_number(v, digits, sci_digits=2, big=1e4, none="—", nonfinite="—", below_one="decimals", ints="plain")


def _models_table(result: StudyResult) -> list[list[str]]:
    head = ["model", "loaded from", "control", "step", "n_layers", "d_model", "PGA preset / processing", "status"]
    body = []
    for m in result.models:
        mine = [r for r in result.rows if r["model"] == m.label]
        shape = {r["metric"]: r["value"] for r in mine if r["metric"].startswith("shape.")}
        pga: dict[str, Any] = dict(next((r["extras"] for r in mine if r["metric"] == "pga.z"), {}) or {})
        body.append(
            [
                m.label,
                m.spec,
                m.control or "",
                "" if m.checkpoint is None else str(m.checkpoint),
                _fmt(shape.get("shape.n_layers")),
                _fmt(shape.get("shape.d_model")),
                (f"{pga.get('preset', '—')} / {pga.get('processing', '—')}" if pga else "—")
                + (" ⚠ readout caveat" if pga.get("readout_caveat") else ""),
                "failed: " + result.failed[m.label] if m.label in result.failed else "ok",
            ]
        )
    return [head, *body]


def _claims_table(result: StudyResult) -> list[list[str]]:
    head = ["claim", "model", "verdict", "value ± stderr", "where", "test", "source"]
    body = []
    for c in result.claims:
        val = _fmt(c["value"]) + ("" if c["stderr"] is None else f" ± {_fmt(c['stderr'], 2)}")
        body.append(
            [
                f"{c['claim']}: {c['statement']}",
                c["model"],
                c["verdict"],
                val if c["value"] is not None else "—",
                c["where"],
                c["test"],
                f"{c['paper']}, {c['section']}",
            ]
        )
    return [head, *body]


def _claims_matrix(result: StudyResult) -> list[list[str]]:
    """Claims × models: each cell the verdict and the number behind it (the details table says where
    and by which test); the last column says where in the paper the claim comes from."""
    models = [m.label for m in result.models if m.label not in result.failed]
    extra = [c["model"] for c in result.claims if c["model"] not in models]
    cols = models + sorted(set(extra), key=extra.index)
    ids = list(dict.fromkeys(c["claim"] for c in result.claims))
    cell = {(c["claim"], c["model"]): c for c in result.claims}
    head = ["claim", *cols, "source"]
    body = []
    for cid in ids:
        first = next(c for c in result.claims if c["claim"] == cid)
        row = [f"{cid}: {first['statement']}"]
        for m in cols:
            c = cell.get((cid, m))
            if c is None:
                row.append("")
                continue
            num = (
                ""
                if c["value"] is None
                else " " + _fmt(c["value"]) + ("" if c["stderr"] is None else f" ± {_fmt(c['stderr'], 2)}")
            )
            row.append(
                c["verdict"] + ("" if c["verdict"] == "not applicable" else num) + (" ⚠" if c.get("caveat") else "")
            )
        row.append(f"{first['paper']}, {first['section']}")
        body.append(row)
    return [head, *body]


def _convergence_table(result: StudyResult) -> list[list[str]]:
    head = ["depth", "model A", "model B", "ρ full ± se", "ρ readout ± se", "null ρ mean ± sd", "z", "k", "texts"]
    body = [
        [
            c["depth"],
            c["model_a"],
            c["model_b"],
            f"{c['rho_full']:.3f} ± {c['rho_full_stderr']:.3f}",
            f"{c['rho_readout']:.3f} ± {c['rho_readout_stderr']:.3f}",
            f"{c['null_mean']:.3f} ± {c['null_std']:.3f}",
            f"{c['z']:.2f}",
            str(c["k"]),
            str(c["n_texts"]),
        ]
        for c in result.convergence
    ]
    return [head, *body]


def _verdict_counts(result: StudyResult) -> str:
    from collections import Counter

    c = Counter(x["verdict"] for x in result.claims)
    return ", ".join(f"{k} {c[k]}" for k in ("holds", "fails", "undecided", "not applicable") if c[k])


NOTES = (
    "Each model's rows are exactly those of `tl-geometry report` on that model with the same settings; "
    "its PGA rows say which preset and weight processing produced them (the models table repeats it).",
    "Verdicts use the library's one rule (tl_geometry.metrics.significance.verdicts): a PGA z counts as positive "
    "or negative when its p against the random subspaces, Holm-corrected over the hooks the claim scans (a peak "
    "or a minimum over a window is the extreme of the window), is < 0.05 and |z| > 2 stderr; a difference or a "
    "correlation when its normal p is < 0.05 and it lies beyond 2 stderr of 0. Each claim's test says which test "
    "passed. `undecided` means the data do not decide; `not applicable` that the "
    "paper makes no claim for this model (e.g. d < 768 for CCR-5) or the run lacks the rows.",
    "⚠ marks PGA numbers under the library preset whose readout subspace was moved by fold_ln onto the final "
    "norm's weight (tl_geometry.families.pga.readout_caveat; Gemma: docs/gemma_pga.md): they are not the "
    "paper's quantity; a study with processing='none' and --option pga.preset=paper measures the paper's.",
    "The AOFE ratio's stderr is over gradient probes for fixed tokens (it does not cover a fresh text sample).",
    "Convergence: the same passages of the corpus, each model's own tokenizer (first 64 tokens), mean-pooled "
    "block outputs at mid depth and the last block; ρ's stderr is a jackknife over 8 groups of texts; z compares "
    "the two readout subspaces with pairs of Haar-random subspaces of the same k.",
)


def _md_table(rows: list[list[str]]) -> str:
    def cell(x: str) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    head, *body = rows
    lines = ["| " + " | ".join(cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(x) for x in r) + " |" for r in body]
    return "\n".join(lines)


def render_markdown(result: StudyResult, settings: Mapping[str, Any], figures: Mapping[str, Path]) -> str:
    """``study.md``: settings, models, claims, convergence, figures (linked), notes."""
    parts = [
        f"# Study: {len(result.models)} models",
        "",
        "Settings: " + ", ".join(f"{k} = {json.dumps(v, sort_keys=True)}" for k, v in sorted(settings.items())),
        "",
        "## Models",
        "",
        _md_table(_models_table(result)),
        "",
        f"## Claims ({_verdict_counts(result)})",
        "",
        _md_table(_claims_matrix(result)),
        "",
        "### Claims in detail (where each number comes from, the test that decided)",
        "",
        _md_table(_claims_table(result)),
        "",
    ]
    if result.convergence:
        parts += ["## Cross-model convergence", "", _md_table(_convergence_table(result)), ""]
    if figures:
        parts += ["## Figures", ""] + [f"![{n}]({p.name})" for n, p in figures.items()] + [""]
    parts += ["## Notes", ""] + [f"- {n}" for n in NOTES] + [""]
    if result.failed:
        parts += ["## Failed models", ""] + [f"- {k}: {v}" for k, v in result.failed.items()] + [""]
    return "\n".join(parts)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1300px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.4}
h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;font-size:.82em} td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#f6f6f6} figure{margin:1em 0} figure img{max-width:100%;border:1px solid #eee}
td.holds{background:#d9f2d9} td.fails{background:#f8d7da} td.undecided{background:#fff3cd} td.na{color:#777}
details{margin:.8em 0} summary{cursor:pointer;color:#333}
.banner{background:#f8d7da;border:1px solid #e0a0a6;padding:.6em 1em;border-radius:4px}
"""


def _html_table(rows: list[list[str]], verdict_cols: Sequence[int] | range = ()) -> str:
    head, *body = rows
    out = ["<table><tr>" + "".join(f"<th>{_html.escape(h)}</th>" for h in head) + "</tr>"]
    for r in body:
        cells = []
        for i, x in enumerate(r):
            cls = ""
            if i in verdict_cols and x:
                word = str(x).split(" ")[0]
                cls = {"holds": "holds", "fails": "fails", "undecided": "undecided"}.get(word, "na")
            cells.append(
                f'<td class="{cls}">{_html.escape(str(x))}</td>' if cls else f"<td>{_html.escape(str(x))}</td>"
            )
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(out) + "</table>"


_CAPTIONS = {
    "profiles": "Per-layer profiles on relative depth, one line per model (dashed: random-init twin), ±1 stderr bands.",
    "capacity_table1": "Each model's embedding ε (stars; crosses: random init) among the 45 models of the capacity paper's Table 1.",
    "convergence": "Cross-model convergence: Spearman of the pairwise text distances in the full spaces, in the readout subspaces, and z against random subspaces.",
}


def render_html(result: StudyResult, settings: Mapping[str, Any], figures: Mapping[str, Path]) -> str:
    """A self-contained ``index.html`` (figures inlined as data URIs)."""
    esc = _html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>tl_geometry study: {esc(', '.join(m.label for m in result.models))}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Study: {len(result.models)} models</h1>",
    ]
    if result.failed:
        parts.append(
            "<p class='banner'>" + esc("Failed: " + "; ".join(f"{k}: {v}" for k, v in result.failed.items())) + "</p>"
        )
    parts += ["<h2>Models</h2>", _html_table(_models_table(result))]
    parts += [
        f"<h2>Claims ({esc(_verdict_counts(result))})</h2>",
        _html_table(_claims_matrix(result), verdict_cols=range(1, 1 + len(_claims_matrix(result)[0]) - 2)),
        "<details><summary>Claims in detail: where each number comes from, the test that decided</summary>",
        _html_table(_claims_table(result), verdict_cols=(2,)),
        "</details>",
    ]
    if result.convergence:
        parts += ["<h2>Cross-model convergence</h2>", _html_table(_convergence_table(result))]
    for name, p in figures.items():
        uri = "data:image/png;base64," + base64.b64encode(Path(p).read_bytes()).decode("ascii")
        parts.append(
            f"<figure><img alt='{esc(name)}' src='{uri}'><figcaption>{esc(_CAPTIONS.get(name, name))}</figcaption></figure>"
        )
    parts += ["<h2>Notes</h2><ul>"] + [f"<li>{esc(n)}</li>" for n in NOTES] + ["</ul>"]
    parts += [
        "<h2>Settings</h2><table>"
        + "".join(
            f"<tr><td>{esc(k)}</td><td>{esc(json.dumps(v, sort_keys=True))}</td></tr>"
            for k, v in sorted(settings.items())
        )
        + "</table>",
        "<p>The long table (every row, its stderr, the model column) is in <code>study.json</code>.</p>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write_outputs(result: StudyResult, settings: Mapping[str, Any], out: Path, *, figures: bool = True) -> None:
    """Write study.json, the figures, study.md and index.html into ``out`` (each atomically)."""
    from tl_geometry.io.outfile import atomic_write_text

    doc = {
        "schema_version": SCHEMA_VERSION,
        "settings": dict(settings),
        "models": [m.to_dict() for m in result.models],
        "failed": dict(result.failed),
        "claims": list(result.claims),
        "convergence": list(result.convergence),
        "rows": list(result.rows),
    }
    atomic_write_text(out / "study.json", json.dumps(doc, indent=1, sort_keys=True, allow_nan=True) + "\n")
    drawn: dict[str, Path] = {}
    if figures:
        import tempfile

        with tempfile.TemporaryDirectory(dir=out, prefix=".figures-") as tmp:
            for name, p in draw_figures(result, Path(tmp)).items():
                final = out / p.name
                os.replace(p, final)
                drawn[name] = final
    for name in OUTPUT_FILES:  # an older run's figure that this run did not draw is removed (ours, by name)
        if name.endswith(".png") and name[:-4] not in drawn:
            (out / name).unlink(missing_ok=True)
    atomic_write_text(out / "study.md", render_markdown(result, settings, drawn))
    atomic_write_text(out / "index.html", render_html(result, settings, drawn))
