"""The intrinsic-dimension family's reproduce check: the ID profile of the offline model, next to its PGA profile.

No paper gives an ID for SmolLM2, so every row is ``measured`` (``paper`` None). The shape the
literature reports — the ID rises from the embeddings to a peak in the intermediate layers and
falls towards the output (Valeriani et al., NeurIPS 2023, on protein language models and iGPT;
Cheng et al. 2024 on LLMs) — is given as the ``reference`` and judged only beyond two standard
errors. Registers itself with [`tl_geometry.runs.reproduction.check`][tl_geometry.runs.reproduction.check].
"""

from __future__ import annotations

import math

from tl_geometry.runs.reproduction import Context, ReproRow, check, make_row

__all__: list[str] = []


def _spearman(a: list[float], b: list[float]) -> float:
    """Spearman correlation of two equal-length lists (average ranks for ties)."""
    from scipy.stats import spearmanr

    if len(a) < 3:
        return math.nan
    return float(spearmanr(a, b).statistic)


@check(
    "intrinsic_dimension.profile",
    "TwoNN intrinsic dimension by layer of the offline model, next to its PGA z profile",
    evidence="measured",
    uses_model=True,
)
def _profile(ctx: Context) -> list[ReproRow]:
    import tl_geometry as tg
    from tl_geometry.families.intrinsic_dimension import default_hooks
    from tl_geometry.families.intrinsic_dimension.reading import profile_shape
    from tl_geometry.render.readings import hook_position

    max_points, n_seqs, seq_len, n_null = ctx.pick((64, 2, 40, 5), (1024, 8, 128, 20), (2048, 32, 128, 100))
    duplicates = "drop_all"  # the library default, stated in every row (issue 35)
    sizes = {
        "max_points": max_points,
        "n_seqs": n_seqs,
        "seq_len": seq_len,
        "pga_n_null": n_null,
        "points": "tokens",
        "duplicates": duplicates,
    }
    model = ctx.zoo_model(processed=True)
    if getattr(model, "tokenizer", None) is not None:
        tokens = tg.corpus.tokens(model, "pydoc", n_seqs=n_seqs, seq_len=seq_len, seed=0)
    else:
        import torch

        g = torch.Generator().manual_seed(0)
        tokens = torch.randint(0, model.cfg.d_vocab, (n_seqs, seq_len), generator=g)
    hooks = default_hooks(model)
    d = int(model.cfg.d_model)
    k = 100 if d > 200 else max(1, d // 4)
    report = tg.analyze(  # one shared forward pass: the same positions feed both profiles
        model,
        tokens,
        metrics=["intrinsic_dimension", "pga"],
        hooks=hooks,
        progress=ctx.progress,
        options={
            "intrinsic_dimension": {"max_points": max_points, "range_max": 16, "duplicates": duplicates},
            "pga": {"max_points": max_points, "n_null": n_null, "ccr": [1], "k": k},
        },
    )
    name = tg.models.model_name_of(model)
    n = int(model.cfg.n_layers)
    tw = sorted((r for r in report.rows if r.metric == "id.twonn"), key=lambda r: hook_position(r, n))
    z = {r.hook: r for r in report.rows if r.metric == "pga.z"}
    shape = profile_shape(tw, n)
    top = max(tw, key=lambda r: r.value)
    rel = (hook_position(top, n) + 1) / (n + 1)  # 0 = embeddings, 1 = last block's output
    base = {"preset": "library (TransformerLens processing)", "sizes": {**sizes, "model": name, "d_model": d}}
    conv = (
        "points: sampled token positions; duplicates='drop_all' (every copy of a repeated vector dropped; "
        "'one_copy' keeps one)"
    )
    note = f"{name} is in no ID paper; shape: {shape} (Holm and 2 stderr against both ends); {conv}"
    rows = [
        make_row(
            "intrinsic_dimension.peak",
            "largest TwoNN ID over the layers (Valeriani et al. 2023: a peak in the intermediate layers)",
            None,
            top.value,
            None,
            evidence="measured",
            status="measured",
            reference="interior peak",
            stderr=float(top.extras.get("stderr", math.nan)),
            note=f"at {top.hook} (relative depth {rel:.2f}); {note}",
            **base,
        ),
        make_row(
            "intrinsic_dimension.embed",
            "TwoNN ID of the embeddings (the profile's start)",
            None,
            tw[0].value,
            None,
            evidence="measured",
            status="measured",
            stderr=float(tw[0].extras.get("stderr", math.nan)),
            note=f"{tw[0].hook}; {tw[0].extras.get('n_duplicates', 0)} of "
            f"{int(tw[0].extras.get('n_points', 0)) + int(tw[0].extras.get('n_duplicates', 0))} points dropped as "
            f"duplicates; {conv}",
            **base,
        ),
        make_row(
            "intrinsic_dimension.last",
            "TwoNN ID of the last block's output (the profile's end)",
            None,
            tw[-1].value,
            None,
            evidence="measured",
            status="measured",
            stderr=float(tw[-1].extras.get("stderr", math.nan)),
            note=f"{tw[-1].hook}; {conv}",
            **base,
        ),
    ]
    common = [r for r in tw if r.hook in z]
    if len(common) >= 3:
        rho = _spearman([r.value for r in common], [z[r.hook].value for r in common])
        rows.append(
            make_row(
                "intrinsic_dimension.vs_pga",
                "Spearman correlation over layers of TwoNN ID and PGA z (CCR-1), same positions",
                None,
                rho,
                None,
                evidence="measured",
                status="measured",
                note=f"{len(common)} hooks; no paper relates the two; a description, not a test",
                **base,
            )
        )
    _plot(tw, z, ctx.figures / "id_profile.png", name, n)
    return rows


def _plot(tw, z, path, name, n_layers) -> None:
    from tl_geometry.render.plotting import pyplot
    from tl_geometry.render.readings import hook_position

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    xs = [hook_position(r, n_layers) for r in tw]
    ax.errorbar(
        xs,
        [r.value for r in tw],
        yerr=[2 * float(r.extras.get("stderr", 0.0)) for r in tw],
        marker="o",
        ms=3,
        capsize=1.5,
        color="black",
        label="TwoNN ID, ±2 stderr",
    )
    ax.set_xlabel("layer (-1 = embeddings)")
    ax.set_ylabel("intrinsic dimension")
    ax2 = ax.twinx()
    zs = [(hook_position(r, n_layers), z[r.hook].value) for r in tw if r.hook in z]
    if zs:
        ax2.plot([a for a, _ in zs], [b for _, b in zs], color="C1", lw=1, marker="s", ms=2.5, label="PGA z (CCR-1)")
        ax2.set_ylabel("PGA z", color="C1")
    ax.set_title(f"Intrinsic dimension and PGA z by layer, {name}", fontsize=9)
    fig.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
