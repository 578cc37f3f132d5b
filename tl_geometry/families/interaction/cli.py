"""``tl-geometry agop``: AGOP / AOFE at hook points (+ NFA correlation, depth/width ratio).

```text
    tl-geometry agop [--model smollm2-135m] [--corpus pydoc] [--n-seqs 8] [--seq-len 128]
                     [--layers 0 5 10 | --hooks NAME ...] [--n-probes 64] [--space input|output|loss]
                     [--projection-seed 42] [--exact] [--nfa] [--seed 0] [--out report.json] [--force]
```
"""

from __future__ import annotations

from tl_geometry import _checks, cli_args
from tl_geometry.errors import InputError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("agop", help="AGOP / AOFE ratio at hook points (interaction paper)")
    cli_args.add_model_text(p, n_seqs=8, seq_len=128)
    p.add_argument(
        "--layers", type=int, nargs="+", default=None, help="layers for blocks.{l}.hook_resid_pre (default all)"
    )
    p.add_argument("--hooks", nargs="+", default=None, help="explicit hook names (instead of --layers)")
    p.add_argument("--n-probes", type=int, default=64, help="Gaussian probes (>= 2)")
    p.add_argument(
        "--space",
        choices=("input", "output", "loss"),
        default="input",
        help="input: E[JᵀJ] at each hook (ours); output: 64×64 projected last-position Jacobian (the "
        "paper's shape sweep); loss: E[g gᵀ] of the cross-entropy gradient (the paper's depth scan)",
    )
    p.add_argument(
        "--projection-seed",
        type=int,
        default=None,
        help="output space: draw P as the authors (they used 42); default our seeded P",
    )
    p.add_argument("--exact", action="store_true", help="exact Jacobians (tiny models only)")
    p.add_argument("--nfa", action="store_true", help="also the NFA correlation per layer (W_in W_inᵀ vs AGOP)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    cli_args.add_device_threads(p)
    p.add_argument("--out", default=None, help="write the GeometryReport JSON here")
    p.add_argument(
        "--force", action="store_true", help="replace existing output files (otherwise an existing one is refused)"
    )
    p.set_defaults(func=run)


FLAG_CHECKS = {
    "n_seqs": _checks.int_at_least(1),
    "seq_len": _checks.int_at_least(2),
    "layers": _checks.int_at_least(0),
    "batch_size": _checks.int_at_least(1),
    "seed": _checks.SEED,
    "projection_seed": _checks.Check(
        "a non-negative integer or None", lambda v: v is None or _checks.SEED.problem(v) is None
    ),
    "threads": _checks.int_at_least(1, none_ok=True),
}
"""What each numeric flag accepts (the one validation layer, `tl_geometry._checks`)."""


def check_args(args) -> None:
    """Every check that needs no model, before the load (as ``report``)."""
    from tl_geometry import cli_args as _early

    if args.hooks and args.layers is not None:
        raise InputError("pass either --hooks or --layers, not both")
    _early.check_flags(args, FLAG_CHECKS, lists=("layers", "ccr"))
    if not args.exact and args.space != "loss":
        _checks.integer(args.n_probes, "--n-probes", lo=2)
    else:
        _checks.integer(args.n_probes, "--n-probes", lo=1)
    _early.check_device(args.device)
    _early.check_corpus(args.corpus, args.corpus_encoding)
    _early.check_model_fit(args.model, layers=args.layers, seq_len=args.seq_len)


def run(args) -> int:
    import tl_geometry as tg
    from tl_geometry import capture

    check_args(args)  # every flag, the corpus, the device, --layers against the model's files
    from tl_geometry import outdir

    if args.out:  # checked before the model is loaded
        outdir.check_out_file(args.out, force=args.force, what="report file")
    model = tg.models.load(args.model, device=args.device)
    tokens = tg.corpus.tokens(
        model, args.corpus, n_seqs=args.n_seqs, seq_len=args.seq_len, seed=args.seed, encoding=args.corpus_encoding
    )
    hooks = args.hooks or (capture.resid_hooks(model, "pre", args.layers) if args.layers is not None else None)
    res = tg.agop(
        model,
        tokens,
        hooks=hooks,
        n_probes=args.n_probes,
        space=args.space,
        seed=args.seed,
        exact=args.exact,
        batch_size=args.batch_size,
        projection_seed=args.projection_seed,
    )
    reports = [tg.agop_report(res, model), tg.get_metric("depth_width")(model), tg.get_metric("wtw_aofe")(model)]
    r = tg.depth_width_ratio(model)
    print(
        f"{tg.report.model_name(model)}: R_D/W = {model.cfg.n_layers}/{model.cfg.d_model} = {r:.4f} "
        f"({'inside' if tg.in_efficient_interval(r) else 'outside'} [0.023, 0.047])"
    )
    print(f"{'hook':<34} {'AOFE ratio':>11} {'± se':>8} {'debiased':>9} {'trace':>12} {'rel. se(G)':>10}")
    for h, s in res.stats.items():
        print(
            f"{h:<34} {s.ratio:>11.4f} {s.ratio_stderr:>8.4f} {s.ratio_debiased:>9.4f} {s.trace:>12.4g} {s.rel_stderr:>10.3f}"
        )
    if args.nfa:
        layers = args.layers if args.layers is not None else list(range(model.cfg.n_layers))
        reports.append(tg.get_metric("nfa")(model, tokens, layers=layers, n_probes=args.n_probes, seed=args.seed))
        for row in reports[-1].rows:
            print(f"{row.hook:<34} {row.metric:<14} {row.value:.4f}")
    if args.out:
        text = tg.GeometryReport.merge(*reports, corpus=args.corpus, seed=args.seed).to_json()
        outdir.write_file(args.out, text, force=args.force, what="report file")
        print(f"wrote {args.out}")
    return 0
