"""``tl-geometry agop``: AGOP / AOFE at hook points (+ NFA correlation, depth/width ratio).

```text
    tl-geometry agop [--model smollm2-135m] [--corpus pydoc] [--n-seqs 8] [--seq-len 128]
                     [--layers 0 5 10 | --hooks NAME ...] [--n-probes 64] [--space input|output|loss]
                     [--projection-seed 42] [--exact] [--nfa] [--seed 0] [--out report.json] [--force]
```

The family's experiments of ``tl-geometry sweep`` (``shape``, ``toy``) are named here too
([`SWEEPS`][tl_geometry.families.interaction.sweeps.SWEEPS], from
[`tl_geometry.families.interaction.sweeps`][tl_geometry.families.interaction.sweeps]): ``tl-geometry sweep`` reads
``SWEEPS`` from every family's command module.
"""

from __future__ import annotations

from tl_geometry.base import _checks
from tl_geometry.families.interaction.sweeps import SWEEPS  # noqa: F401  (tl-geometry sweep shape / toy)
from tl_geometry.runs import cli_args


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("agop", help="AGOP / AOFE ratio at hook points (interaction paper)")
    cli_args.add_model_text(p, n_seqs=8, seq_len=128)
    cli_args.add_layers_hooks(p, site="pre", default="all")
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
    cli_args.add_batch_seed(p)
    p.set_defaults(batch_size=None)  # input space with probes: from --memory-mb
    for action in p._actions:
        if action.dest == "batch_size":
            action.help = "sequences per forward pass (default: from --memory-mb in input space with probes, else 8)"
    p.add_argument(
        "--memory-mb", type=float, default=512, help="budget of one pass's autograd graph, MiB (default 512)"
    )
    p.add_argument(
        "--state-mb",
        type=float,
        default=1024,
        help="budget of the per-hook sums, MiB: hooks run in chunks that fit (default 1024)",
    )
    p.add_argument(
        "--text-groups",
        type=int,
        default=8,
        help="groups of whole sequences for the error over the text (default 8; 0: probe error only)",
    )
    cli_args.add_device_threads(p)
    cli_args.add_outputs(p)
    p.set_defaults(func=run)


FLAG_CHECKS = {
    **cli_args.model_flag_checks(
        projection_seed=_checks.Check(
            "a non-negative integer or None", lambda v: v is None or _checks.SEED.problem(v) is None
        ),
    ),
    "batch_size": _checks.int_at_least(1, none_ok=True),
    "memory_mb": _checks.Check("a positive number", lambda v: isinstance(v, (int, float)) and v > 0),
    "state_mb": _checks.Check("a positive number", lambda v: isinstance(v, (int, float)) and v > 0),
    "text_groups": _checks.Check("0 (none) or an integer >= 2", lambda v: isinstance(v, int) and (v == 0 or v >= 2)),
}
"""What each numeric flag accepts (the one validation layer, `tl_geometry.base._checks`); ``--n-probes``
as `n_probes_check` says."""


def n_probes_check(args) -> _checks.Check:
    """``--n-probes``: at least 2 for the random-probe estimate (its standard error needs two), 1 with
    ``--exact`` or ``--space loss``."""
    return _checks.int_at_least(1 if args.exact or args.space == "loss" else 2)


def check_args(args) -> None:
    """Every check that needs no model, before the load (as ``report``)."""
    cli_args.check_model_args(args, {**FLAG_CHECKS, "n_probes": n_probes_check(args)})


def run(args) -> int:
    import tl_geometry as tg

    check_args(args)  # every flag, the corpus, the device, --layers against the model's files
    cli_args.check_outputs(args)  # checked before the model is loaded
    model = tg.models.load(args.model, device=args.device)
    tokens = cli_args.corpus_tokens(model, args)
    hooks = cli_args.chosen_hooks(model, args, site="pre")
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
        memory_mb=args.memory_mb,
        state_mb=args.state_mb,
        text_groups=args.text_groups or None,
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
        cli_args.write_report(args, tg.GeometryReport.merge(*reports, corpus=args.corpus, seed=args.seed))
    return 0
