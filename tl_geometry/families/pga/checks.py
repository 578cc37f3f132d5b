"""The PGA family's reproduce checks (arXiv 2605.17084): the PGA profile of the offline model under both presets, its claims with standard errors. Each registers itself with [`tl_geometry.runs.reproduction.check`][tl_geometry.runs.reproduction.check]."""

from __future__ import annotations

import math
from typing import Any

from tl_geometry.metrics.significance import Verdict, extreme, verdicts
from tl_geometry.runs.reproduction import Context, ReproRow, check, make_row

# ----------------------------------------------------------------------------- pga
PGA_SIZES: dict[str, dict[str, int]] = {
    "tiny": {"n_null": 5, "max_points": 64, "n_seqs": 2, "seq_len": 24},
    "cpu": {"n_null": 100, "max_points": 512, "n_seqs": 8, "seq_len": 128},
    "full": {"n_null": 100, "max_points": 2048, "n_seqs": 32, "seq_len": 128},
}
"""The sizes of the ``pga.profile`` check per reproduce size: the paper's 100 null subspaces at every
size but tiny, points and text sized to the machine. docs/reproduce.md states them
([`pga_sizes_text`][tl_geometry.families.pga.checks.pga_sizes_text]; a test compares)."""

PGA_CCRS = (0, 1, 5)
"""The CCR levels of the ``pga.profile`` check."""


def pga_sizes_text(size: str) -> str:
    """``"512 points, 100 nulls, 8 × 128 tokens, CCR 0/1/5"``: the sizes of ``size`` in the docs' words."""
    s = PGA_SIZES[size]
    return (
        f"{s['max_points']:,} points, {s['n_null']} nulls, {s['n_seqs']} × {s['seq_len']} tokens, "
        f"CCR {'/'.join(map(str, PGA_CCRS))}"
    )


def _pga_profile(model, tokens, *, preset: str, n_null: int, max_points: int, ccr, progress: bool):
    """({ccr: {hook: (z, stderr)}}, preset label) of [`tl_geometry.pga`][tl_geometry.families.pga.pga] with ``preset``."""
    import tl_geometry as tg

    d = int(model.cfg.d_model)
    kw = dict(n_null=n_null, max_points=max_points, ccr=ccr, progress=progress, k=100 if d > 200 else max(1, d // 4))
    rep = tg.pga(model, tokens, preset=preset, **kw)
    used = f"{preset} (processing {rep.rows[0].extras.get('processing', '?')})" if rep.rows else preset
    z: dict[int, dict[str, tuple[float, float]]] = {}  # ccr → {hook: (z, se)}, hooks in the model's order
    for r in rep.rows:
        if r.metric == "pga.z":
            z.setdefault(int(r.extras["ccr"]), {})[r.hook] = (float(r.value), float(r.extras["stderr"]))
    return z, used


def _say(v: Verdict) -> str:
    """A verdict in a row's note: the call, then which test passed (the one rule, `significance.verdicts`)."""
    return v.words


def _pga_claims(z: dict[int, dict[str, tuple[float, float]]], d: int, *, n_null: int) -> list[dict[str, Any]]:
    """The paper's qualitative PGA claims that one profile can test, each as value ± stderr and a verdict.

    Hooks in the model's order; the embeddings are the first hook when the profile has them (the
    paper preset's ``hidden_states``). Every verdict is the one rule of
    [`tl_geometry.metrics.significance`][tl_geometry.metrics.significance]: the chance band of z at
    ``n_null``, Holm over the hooks the claim scans (the intermediate peak is the maximum of its
    window, the late minimum the minimum of its: [`extreme`][tl_geometry.metrics.significance.extreme]),
    and |v| > 2 stderr; a difference (the final recovery) takes the normal p of its stderr.
    """
    out: list[dict[str, Any]] = []
    z1 = z.get(1) or next(iter(z.values()))
    hooks = list(z1)
    n = len(hooks)

    def window(prof: dict[str, tuple[float, float]], hs: list[str], kind: str) -> tuple[str, Verdict]:
        v = extreme([prof[h][0] for h in hs], [prof[h][1] for h in hs], kind=kind, n_null=n_null)
        return hs[v.index], v

    has_embed = hooks[0].endswith(("hook_resid_pre", "hook_embed"))
    if has_embed:
        v, se = z1[hooks[0]]
        (ver,) = verdicts([v], [se], n_null=n_null)
        out.append(
            dict(
                id="embed_alignment",
                figure="z at the embeddings, CCR-1 (paper: the embedding layer is aligned with the readout)",
                reference="> 0",
                value=v,
                se=se,
                verdict=ver.call,
                note=_say(ver),
            )
        )
    inter = hooks[max(1, n // 4) : max(2, (3 * n) // 4)] or hooks
    h, ver = window(z1, inter, "max")
    v, se = z1[h]
    out.append(
        dict(
            id="peak_intermediate",
            figure="peak z at intermediate layers, CCR-1 (paper: 9–24 across Pythia 70M–6.9B, Phi-1.5, "
            "OLMo-1B, Gemma-2-2B)",
            reference="9–24 (other models)",
            value=v,
            se=se,
            verdict=ver.call,
            note=f"at {h}: {_say(ver)}; " + ("inside" if 9 <= v <= 24 else "outside") + " the paper's range",
        )
    )
    late = hooks[(2 * n) // 3 : -1] or hooks[-1:]
    h, ver = window(z1, late, "min")
    v, se = z1[h]
    fv, fse = z1[hooks[-1]]
    rec = fv - v
    rec_se = math.hypot(fse, se)
    out.append(
        dict(
            id="late_min",
            figure="min z over late (not final) layers, CCR-1 (paper: d ≤ 1024 models go negative, "
            "e.g. Pythia-410M ≈ −32)",
            reference="< 0 for d ≤ 1024",
            value=v,
            se=se,
            verdict=ver.call,
            note=f"at {h}: {_say(ver)}" + ("" if d <= 1024 else f" (d = {d} > 1024: the paper expects no decline)"),
        )
    )
    (rv,) = verdicts([rec], [rec_se], what="differences")
    out.append(
        dict(
            id="final_recovery",
            figure="final-layer z minus the late minimum, CCR-1 (paper: the final layer recovers)",
            reference="> 0",
            value=rec,
            se=rec_se,
            verdict=rv.call,
            note=f"final z = {fv:.2f} ± {fse:.2f}: "
            + {"positive": "recovers", "negative": "falls further (no recovery)", "inconclusive": "undecided"}[rv.call]
            + f" ({_say(rv)})",
        )
    )
    if 5 in z:
        h, ver = window(z[5], late, "min")
        v, se = z[5][h]
        out.append(
            dict(
                id="ccr5_late_min",
                figure="min late-layer z after CCR-5 (paper: removing the top 5–10 PCs restores positive z for d ≥ 768)",
                reference="> 0 for d ≥ 768",
                value=v,
                se=se,
                verdict=ver.call,
                note=f"at {h}: {_say(ver)}" + (f"; d = {d} < 768: the paper makes no claim here" if d < 768 else ""),
            )
        )
    return out


@check(
    "pga.profile",
    "Subspace PGA z by layer of the offline model, paper preset next to the library default",
    evidence="measured",
    uses_model=True,
)
def _pga(ctx: Context) -> list[ReproRow]:
    import tl_geometry as tg

    # the paper's 100 null subspaces at every size but tiny; points and text sized to the machine
    sz = PGA_SIZES[ctx.size]
    n_null, max_points, n_seqs, seq_len = sz["n_null"], sz["max_points"], sz["n_seqs"], sz["seq_len"]
    ccrs = list(PGA_CCRS)
    sizes = {"n_null": n_null, "max_points": max_points, "n_seqs": n_seqs, "seq_len": seq_len, "ccr": ccrs}
    profiles = {}
    for preset, processed in (("paper", False), ("library", True)):
        model = ctx.zoo_model(processed=processed)
        if getattr(model, "tokenizer", None) is not None:
            tokens = tg.corpus.tokens(model, "pydoc", n_seqs=n_seqs, seq_len=seq_len, seed=0)
        else:
            import torch

            g = torch.Generator().manual_seed(0)
            tokens = torch.randint(0, model.cfg.d_vocab, (n_seqs, seq_len), generator=g)
        profiles[preset] = _pga_profile(
            model, tokens, preset=preset, n_null=n_null, max_points=max_points, ccr=ccrs, progress=ctx.progress
        )
    name = tg.models.model_name_of(model)
    d = int(model.cfg.d_model)
    rows = []
    for preset, (z, used) in profiles.items():
        base = {"preset": used, "sizes": {**sizes, "model": name, "d_model": d, "n_hooks": len(z[ccrs[0]])}}
        for c in _pga_claims(z, d, n_null=n_null):
            rows.append(
                make_row(
                    f"pga.{preset}.{c['id']}",
                    c["figure"],
                    None,
                    c["value"],
                    None,
                    evidence="measured",
                    reference=c["reference"],
                    status="measured",
                    note=f"{name} (d = {d}) is not among the paper's models; {c['note']}",
                    stderr=c["se"],
                    **base,
                )
            )
    _plot_pga(profiles, ctx.figures / "pga_profile.png", name)
    return rows


def _plot_pga(profiles, path, name):
    from tl_geometry.render.plotting import pyplot

    plt = pyplot()  # the Agg backend, or Jupyter's inline one (one place decides)

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for i, (preset, (z, _used)) in enumerate(profiles.items()):
        for c, style in ((1, "-"), (5, ":")):
            if c not in z:
                continue
            hooks = list(z[c])
            # align on Hugging Face's hidden_states index: 0 = embeddings, l = output of layer l
            start = 0 if hooks[0].endswith(("hook_resid_pre", "hook_embed")) else 1
            ax.errorbar(
                range(start, start + len(hooks)),
                [z[c][h][0] for h in hooks],
                yerr=[2 * z[c][h][1] for h in hooks],
                fmt=style,
                marker="o",
                ms=3,
                elinewidth=0.7,
                capsize=1.5,
                color=f"C{i}",
                label=f"{preset} (CCR-{c}), ±2 stderr",
            )
    ax.axhline(0, color="0.6", lw=0.8)
    ax.axhspan(9, 24, color="0.9", label="paper: peak z 9–24")
    ax.set_xlabel("hidden state (0 = embeddings, l = after layer l)")
    ax.set_ylabel("PGA z")
    ax.set_title(f"Subspace PGA, {name}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@check("pga.hub", "the paper's models (Pythia, Phi-1.5, OLMo-1B, Gemma-2-2B)", evidence="independent")
def _pga_hub(ctx: Context) -> list[ReproRow]:
    return [
        make_row(
            "pga.paper_models",
            "z profiles of Pythia 70M–6.9B, Phi-1.5, OLMo-1B, Gemma-2-2B (and checkpoints)",
            "peak z 9–24",
            None,
            None,
            evidence="independent",
            status="needs the hub",
            note="`tl-geometry pga --model EleutherAI/pythia-410m` with the hub (and a GPU beyond 1B)",
        )
    ]
