"""``tl-geometry pga``: Subspace PGA z by layer (several CCR levels) and spectral metrics.

```text
    tl-geometry pga [--preset library|paper] [--processing tl|none]
                    [--model smollm2-135m] [--corpus pydoc] [--n-seqs 16] [--seq-len 256]
                    [--layers 0 5 10 | --hooks NAME ...] [--ccr 0 1 5 10] [--k 100] [--n-null 100]
                    [--max-points 2048] [--max-pairs N] [--stderr influence|jackknife|none]
                    [--refit-nulls 4]
                    [--no-spectral] [--seed 0]
                    [--out report.json] [--figures DIR] [--force]

``--out`` and ``--figures`` are checked before the model is loaded (an existing file is refused
without ``--force``) and written atomically.
```
"""

from __future__ import annotations

from tl_geometry.base import _checks
from tl_geometry.errors import InputError
from tl_geometry.runs import cli_args


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("pga", help="Subspace PGA z by layer, PC1 migration, spectral metrics (PGA paper)")
    p.add_argument(
        "--preset",
        choices=("library", "paper"),
        default="library",
        help="'paper': the unprocessed model (raw hidden states, raw W_U) at Hugging Face's hidden_states "
        "(embeddings, blocks 0..n-2, final normalized state), as the PGA paper; 'library' (default): "
        "TransformerLens's weight processing, every blocks.L.hook_resid_post",
    )
    p.add_argument(
        "--processing",
        choices=("tl", "none"),
        default=None,
        help="weight processing of the loaded model (default: 'none' for --preset paper, 'tl' for library)",
    )
    cli_args.add_model_text(p, n_seqs=16, seq_len=256)
    cli_args.add_layers_hooks(p, site="post", default="all, or the preset's hooks")
    p.add_argument(
        "--ccr", type=int, nargs="+", default=[0, 1, 5, 10], help="CCR levels: top PCs removed (default 0 1 5 10)"
    )
    p.add_argument("--k", type=int, default=100, help="readout subspace dimension (< d_model)")
    p.add_argument("--n-null", type=int, default=100, help="random null subspaces (>= 2)")
    p.add_argument("--max-points", type=int, default=2048, help="token positions sampled (shared by all layers)")
    p.add_argument("--max-pairs", type=int, default=None, help="subsample pairs above this many (default 4,194,304)")
    p.add_argument(
        "--stderr",
        choices=("influence", "jackknife", "none"),
        default="influence",
        help="standard error of z: 'influence' (default: first-order effect of the point sample, no re-sort), "
        "'jackknife' (the literal refit per deleted group of points, its check), 'none' (z alone, NaN errors)",
    )
    p.add_argument(
        "--refit-nulls",
        type=int,
        default=4,
        help="null subspaces whose point-sample terms are computed in full (default 4; --n-null: the complete "
        "first-order error, each full-term null costing about four others; 0: ranks and directions held fixed)",
    )
    p.add_argument("--no-spectral", action="store_true", help="skip the spectral metrics")
    cli_args.add_batch_seed(p)
    cli_args.add_device_threads(p)
    cli_args.add_outputs(p, figures="the PGA and spectral figures")
    p.set_defaults(func=run)


def run(args) -> int:
    import tl_geometry as tg
    from tl_geometry import capture
    from tl_geometry.metrics.pga import DEFAULT_MAX_PAIRS

    check_args(args)  # every flag, the corpus, the device, --layers / --k against the model's files
    cli_args.check_outputs(args)  # the destinations are checked before the model is loaded
    processing = args.processing or ("none" if args.preset == "paper" else "tl")
    model = tg.models.load(args.model, device=args.device, processing=processing)
    if not 1 <= args.k < model.cfg.d_model:
        raise InputError(f"--k must satisfy 1 <= k < d_model={model.cfg.d_model}, got {args.k}")
    tokens = cli_args.corpus_tokens(model, args)
    hooks = cli_args.chosen_hooks(  # default: the preset's
        model,
        args,
        site="post",
        default=lambda: (
            capture.hidden_state_hooks(model) if args.preset == "paper" else capture.resid_hooks(model, "post")
        ),
    )
    rep = tg.pga(
        model,
        tokens,
        preset=args.preset,
        hooks=hooks,
        k=args.k,
        n_null=args.n_null,
        ccr=args.ccr,
        max_points=args.max_points,
        seed=args.seed,
        max_pairs=DEFAULT_MAX_PAIRS if args.max_pairs is None else args.max_pairs,
        batch_size=args.batch_size,
        stderr=args.stderr,
        refit_nulls=args.refit_nulls,
    )
    reports = [rep]
    if not args.no_spectral:
        reports.append(tg.spectral(model, tokens, preset=args.preset, hooks=hooks, batch_size=args.batch_size))
    report = tg.GeometryReport.merge(
        *reports, corpus=args.corpus, seed=args.seed, tokens_shape=list(tokens.shape), preset=args.preset
    )
    print(f"preset {args.preset!r}, weight processing {tg.models.processing_name(model)!r}")
    print(summary(report, args.ccr))
    cli_args.write_report(args, report)
    if args.figures:
        from tl_geometry.render.plotting import save_figures

        cli_args.write_figures(args, lambda tmp: save_figures(report, tmp))
    return 0


FLAG_CHECKS = cli_args.model_flag_checks(
    ccr=_checks.int_at_least(0),
    k=_checks.int_at_least(1),
    n_null=_checks.int_at_least(2),
    max_points=_checks.int_at_least(3),
    max_pairs=_checks.int_at_least(1, none_ok=True),
    refit_nulls=_checks.int_at_least(0),
)
"""What each numeric flag accepts (the one validation layer, `tl_geometry.base._checks`)."""


def check_args(args) -> None:
    """Every check that needs no model, before the load (as ``report``): flags, corpus, device,
    and ``--layers`` / ``--k`` against n_layers / d_model read from the model's files."""
    cli_args.check_model_args(args, FLAG_CHECKS, lists=("layers", "ccr"), k=args.k)


def summary(report, ccrs) -> str:
    """One line per hook: z at each CCR level, PC1 overlap (vs k/d) and RankMe when present."""
    ccrs = sorted(set(ccrs))
    z = {(r.hook, r.extras.get("ccr")): r.value for r in report.rows if r.metric == "pga.z"}
    pc1 = {r.hook: r for r in report.rows if r.metric == "pga.pc1_overlap"}
    rankme = {r.hook: r.value for r in report.rows if r.metric == "spectral.rankme"}
    head = (
        f"{'hook':<28}" + "".join(f"{'z CCR-' + str(c):>10}" for c in ccrs) + f"{'PC1 ovl':>9}{'k/d':>7}{'RankMe':>9}"
    )
    lines = [head, "-" * len(head)]
    for h in pc1:
        zs = "".join(f"{z.get((h, c), float('nan')):>10.2f}" for c in ccrs)
        rm = rankme.get(h)
        lines.append(
            f"{h:<28}{zs}{pc1[h].value:>9.3f}{pc1[h].extras.get('expected', float('nan')):>7.3f}"
            + (f"{rm:>9.1f}" if rm is not None else "")
        )
    return "\n".join(lines)
