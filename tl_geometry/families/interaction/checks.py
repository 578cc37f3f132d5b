"""The interaction family's reproduce checks (arXiv 2605.27989): best shapes, the shape sweep, the offline model's depth/width ratio, the toy double descent. Each registers itself with [`tl_geometry.runs.reproduction.check`][tl_geometry.runs.reproduction.check]."""

from __future__ import annotations

import math

from tl_geometry.runs.reproduction import Context, ReproRow, check, make_row, published_row

# ----------------------------------------------------------------------------- interaction
BEST_SHAPES = (
    ("1M", 5, 120, "0.0417", "1.446"),
    ("1.3M", 6, 128, "0.0469", "1.349"),
    ("1.6M", 5, 156, "0.0321", "1.291"),
    ("2M", 5, 176, "0.0284", "1.234"),
    ("2.3M", 6, 172, "0.0349", "1.214"),
    ("2.7M", 5, 204, "0.0245", "1.185"),
    ("3M", 5, 216, "0.0231", "1.160"),
    ("5M", 8, 224, "0.0357", "1.078"),
    ("10M", 10, 284, "0.0352", "0.973"),
)
"""The interaction-law paper's best shape per budget: (budget, depth, d_model, α*, test CE)."""


@check(
    "interaction.shapes",
    "TinyGPT shapes: 1M parameter count, α* = depth/d_model of the best shapes (Table)",
    evidence="consistency",
)
def _shapes(ctx: Context) -> list[ReproRow]:
    from tl_geometry.families.interaction import shape_sweep as ss
    from tl_geometry.metrics.interaction import EFFICIENT_INTERVAL, depth_width_ratio

    n, how = ss.param_count(5, 120, preset="paper"), "paper (param_count)"
    rows = [
        make_row(
            "interaction.tinygpt_1M.params",
            "parameters of the best 1M shape, depth 5 / d_model 120 (the authors' count: active_n in their "
            "results_ntp_shape_sweep.csv)",
            958_800,
            n,
            0.0,
            evidence="recomputed",  # a parameter count re-evaluated on the printed shape
            preset=how,
            why="our count includes biases and positions differently from the authors' "
            "(12Ld² + 2Vd + n_ctx·d + 4Ld + 2d = 958,800)",
        )
    ]
    lo, hi = EFFICIENT_INTERVAL
    for budget, L, d, alpha, _ce in BEST_SHAPES:
        r = depth_width_ratio({"n_layers": L, "d_model": d})
        inside = lo <= r <= hi
        rows.append(
            published_row(
                f"interaction.alpha_star.{budget}",
                f"α* of the best {budget} shape {L}/{d} (the paper's best-shape table)",
                alpha,
                r,
                evidence="consistency",  # depth / width of the printed shape: cannot fail
                note=f"{'inside' if inside else 'outside'} [{lo}, {hi}]",
            )
        )
    return rows


@check(
    "interaction.shape_ce",
    "test cross-entropy of the best shape per budget (byte-level TinyGPT, WikiText-103)",
    evidence="independent",
)
def _shape_ce(ctx: Context) -> list[ReproRow]:
    return [
        make_row(
            f"interaction.best_ce.{b}",
            f"test CE of the best {b} shape {L}/{d} (nats/byte; the paper's best-shape table)",
            float(ce),
            None,
            None,
            evidence="independent",
            status="needs a GPU",
            note="≈ 60 training bytes per parameter on WikiText-103 (hub dataset); `tl-geometry sweep shape --paper`",
        )
        for b, L, d, _a, ce in BEST_SHAPES
    ]


def _gguf_depth_width(path) -> tuple[int, int]:
    import gguf

    r = gguf.GGUFReader(str(path))
    arch = r.fields["general.architecture"].contents()
    return int(r.fields[f"{arch}.block_count"].contents()), int(r.fields[f"{arch}.embedding_length"].contents())


@check(
    "interaction.offline_rdw",
    "R_D/W of the offline model against the efficient interval",
    evidence="measured",
    uses_model=True,
)
def _offline_rdw(ctx: Context) -> list[ReproRow]:
    import tl_geometry as tg
    from tl_geometry.metrics.interaction import EFFICIENT_INTERVAL, depth_width_ratio

    if ctx.model is not None:
        L, d = int(ctx.model.cfg.n_layers), int(ctx.model.cfg.d_model)
        name = tg.models.model_name_of(ctx.model)
    else:
        L, d = _gguf_depth_width(tg.models.zoo_file())
        name = "SmolLM2-135M"
    r = depth_width_ratio({"n_layers": L, "d_model": d})
    lo, hi = EFFICIENT_INTERVAL
    where = "inside" if lo <= r <= hi else ("above: deeper than efficient for its width" if r > hi else "below")
    return [
        make_row(
            "interaction.offline.rdw",
            f"R_D/W = {L}/{d} of {name} vs the efficient interval (found on byte-level TinyGPT)",
            None,
            r,
            None,
            evidence="measured",
            reference=f"[{lo}, {hi}]",
            status="measured",
            note=where,
        )
    ]


def _toy_settings(ctx: Context):
    """(preset, sizes, seeds at T = 500, changes): the authors' preset around the peak at cpu size
    (seed 0 at T = 200 and 1000, their 5 seeds at T = 500), all of it at full."""
    if ctx.size == "tiny":
        return "cpu", (8, 64, 512), (0,), {"n_test": 500}
    if ctx.size == "cpu":
        return "paper", (200, 500, 1000), (0, 1, 2, 3, 4), {}
    return "paper", None, None, {}


@check(
    "interaction.toy",
    "toy double descent ReLU(x WᵀW + b): test-loss peak near T = 500 (authors' preset)",
    evidence="independent",
)
def _toy(ctx: Context) -> list[ReproRow]:
    from tl_geometry.families.interaction import toy_superposition as toy

    preset, sizes, seeds500, changes = _toy_settings(ctx)
    out = ctx.out / "toy.jsonl"
    if ctx.size == "full":
        recs = toy.run(preset, out=out, progress=ctx.progress)
    else:
        recs = toy.run(preset, sizes=sizes, seeds=(0,), out=out, progress=ctx.progress, **changes)
        if preset == "paper" and 500 in sizes and len(seeds500) > 1:
            recs += [
                r
                for r in toy.run(preset, sizes=(500,), seeds=seeds500, out=out, progress=ctx.progress, **changes)
                if r["seed"] != 0
            ]
    # the peak from one curve (seed 0); the comparison at T = 500 from every seed run there
    summ0 = sorted(toy.summarize([r for r in recs if r["seed"] == 0] or recs), key=lambda r: r["n_train"])
    best = max(summ0, key=lambda r: r["test_loss_mean"])
    ends = max(summ0[0]["test_loss_mean"], summ0[-1]["test_loss_mean"])
    interior = best is not summ0[0] and best is not summ0[-1] and best["test_loss_mean"] > ends
    run_sizes = [r["n_train"] for r in summ0]
    sz = {"preset": preset, "sizes": run_sizes, "seeds": sorted({r["seed"] for r in recs}), **changes}
    why = (
        "the cpu preset (100 features → 2 at sparsity 0.95) is not the paper's 1000 → 2 at 0.99; its peak sits "
        "at smaller T"
        if preset != "paper"
        else "one seed's curve"
    )
    # one row for one bit: the peak is interior (double descent) *and* sits at T ≈ 500 (the merged
    # "interior_peak" row counted the first half twice). The tolerance is the grid's: it admits only
    # the grid point nearest 500.
    grid = sorted(run_sizes)
    near = min(grid, key=lambda g: abs(g - 500))
    others = [abs(g - 500) / 500 for g in grid if g != near]
    tol_T = min(0.5, min(others) * (1 - 1e-9)) if others else 0.5
    at_T = abs(best["n_train"] - 500) <= tol_T * 500
    rows = [
        make_row(
            "interaction.toy.peak_T",
            f"T at the test-loss peak, an interior peak (double descent) near T = 500 (paper: near 500; authors' "
            f"summary.csv: 500); sizes run {run_sizes}, seed 0",
            500,
            best["n_train"],
            tol_T,
            evidence="independent",  # our training of the authors' toy
            status="reproduced" if interior and at_T else "differs",
            preset=preset,
            sizes=sz,
            note=f"peak {best['test_loss_mean']:.3g} at T = {best['n_train']} vs {ends:.3g} at the ends "
            f"({'interior' if interior else 'not interior'}); reproduced only if interior and within ±{tol_T:.0%} "
            "of 500 (the grid run: only its point nearest 500 passes)" + ("" if interior and at_T else f"; {why}"),
            tol_basis={"kind": "grid", "grid": grid},
        ),
    ]
    at500 = next((r for r in toy.summarize(recs) if r["n_train"] == 500), None)
    if preset == "paper" and at500 is not None:
        n = at500["n_seeds"]
        for m, (mean, std) in TOY_T500.items():
            # a difference of two seed means: 2·√(se₁² + se₂²); both stds are ddof = 0 (summary.csv's and
            # toy.summarize's), so se = std/√(n − 1) (the authors' 5 seeds, our n)
            se_paper = std / math.sqrt(TOY_T500_SEEDS - 1)
            ours_sd = float(at500.get(f"{m}_std", math.nan))
            se_ours = ours_sd / math.sqrt(n - 1) if n > 1 and math.isfinite(ours_sd) else se_paper
            tol = 2 * math.hypot(se_paper, se_ours)
            rows.append(
                make_row(
                    f"interaction.toy.T500.{m}",
                    f"{m} at T = 500, mean over {n} seed(s); authors' summary.csv: {mean:.4g} ± {std:.2g} over 5 seeds",
                    mean,
                    at500[f"{m}_mean"],
                    max(tol, 1e-12) / mean,
                    evidence="independent",
                    preset=preset,
                    sizes=sz,
                    note=f"tolerance 2·√(se₁² + se₂²) = ±{tol:.2g} for a difference of two seed means (authors' "
                    f"se {se_paper:.2g} over 5 seeds, ours {se_ours:.2g} over {n}"
                    + (", taken equal to theirs: one seed" if n <= 1 else "")
                    + ")",
                    why="the authors' seeds ran on CUDA (other random streams than our CPU runs)",
                    tol_basis={"kind": "stderr", "k": 2, "se": [se_paper, se_ours]},
                )
            )
    try:
        toy.plot_toy(recs, ctx.figures / "toy_double_descent.png")
        import matplotlib.pyplot as plt

        plt.close("all")
    except ImportError:  # pragma: no cover
        pass
    return rows


TOY_T500 = {"test_loss": (1.5340, 0.1631), "train_loss": (0.96063, 0.00055), "aofe_ratio": (0.95435, 0.00720)}
TOY_T500_SEEDS = 5
"""How many seeds the authors' T = 500 means and stds are over."""
"""The authors' ``Double_descent/results_bottleneck_scaling/summary.csv`` at T = 500 (the peak): mean and std over their 5 seeds (CUDA) of the metrics our toy records."""
