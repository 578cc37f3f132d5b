"""The interaction family's sweeps: ``tl-geometry sweep shape`` and ``tl-geometry sweep toy``.

    tl-geometry sweep shape [--budgets 1e5 2e5 3e5 | --paper] [--preset paper|library] [--dry-run]
                            [--depths 1 2 3] [--steps 300] [--source pydoc+shakespeare] [--device cpu]
                            [--out shape_sweep.jsonl] [--figure shape.png] [--force]
    tl-geometry sweep toy   [--preset paper|henighan|cpu] [--sizes 4 8 ...] [--seeds 0 1 ...] [--steps N]
                            [--out toy.jsonl] [--figure toy.png] [--force]

The experiments themselves are [`shape_sweep`][tl_geometry.families.interaction.shape_sweep] (TinyGPT test
cross-entropy against depth/width at fixed budgets) and
[`toy_superposition`][tl_geometry.families.interaction.toy_superposition] (the toy double descent); this module
is their command line. [`SWEEPS`][tl_geometry.families.interaction.sweeps.SWEEPS] names them; the family's
command module ([`tl_geometry.families.interaction.cli`][tl_geometry.families.interaction.cli], its
``FamilySpec.command``) hands them to ``tl-geometry sweep`` (see [`tl_geometry.commands.sweep`][tl_geometry.commands.sweep]).

``--out`` is a results file ([`tl_geometry.runtime.jobs`][tl_geometry.runtime.jobs]): a new path, or one this package wrote,
which is resumed; any other existing file is refused and left as it is, ``--force`` or not.
``--figure`` is refused when it exists, unless ``--force``. Every destination is checked before
any work ([`tl_geometry.runs.sweeps.check_outputs`][tl_geometry.runs.sweeps.check_outputs]), and every file is written atomically.
"""

from __future__ import annotations

from collections.abc import Callable

from tl_geometry.runs.sweeps import FORCE_HELP, check_outputs

__all__ = ["SWEEPS", "build_shape", "build_toy", "write_figure"]


def write_figure(path: str, plot, records, force: bool) -> None:
    """``plot(records, tmp)`` into a temporary file beside ``path``, then moved to ``path``."""
    from tl_geometry.io import outdir

    with outdir.output_file(path, force=force, what="--figure file") as tmp:
        plot(records, tmp)


def build_shape(sub) -> None:
    """Add ``shape`` (the TinyGPT shape sweep) to the experiments of ``tl-geometry sweep``."""
    p = sub.add_parser("shape", help="TinyGPT shape sweep: test CE vs depth/width at fixed budgets")
    p.add_argument("--budgets", type=float, nargs="+", default=None, help="parameter budgets (default 1e5 2e5 3e5)")
    p.add_argument(
        "--paper",
        action="store_true",
        help="the authors' protocol: paper preset, budgets 0.3M … 10M, depths 1 … 24, n_ctx 256, batch 64, "
        "lr 3e-4, warmup 300, 60 bytes per parameter, clipping 1.0, early stopping (GPU-sized)",
    )
    p.add_argument(
        "--preset",
        choices=("paper", "library"),
        default=None,
        help="TinyGPT preset: paper (no linear biases, widths 16–1024, > 20%% padding skipped) or "
        "library (ours, every bias); default library, paper with --paper",
    )
    p.add_argument("--dry-run", action="store_true", help="list the shapes (params, padding, steps, status) and exit")
    p.add_argument("--depths", type=int, nargs="+", default=None, help="depths (default 1 … --max-depth)")
    p.add_argument("--max-depth", type=int, default=None, help="default 6 (the paper's depth list with --paper)")
    p.add_argument("--d-head", type=int, default=None)
    p.add_argument("--n-ctx", type=int, default=None)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument(
        "--source", default="pydoc+shakespeare", help="text: pydoc, shakespeare, a file, an HF dataset; join with +"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="cpu or cuda (not part of a run's key)")
    p.add_argument("--out", default="shape_sweep.jsonl", help="JSON-lines results (resumed when it exists)")
    p.add_argument("--figure", default=None, help="write CE-vs-R_D/W and frontier plots here")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.set_defaults(func=_run_shape)


def _shape_config(args):
    from tl_geometry.families.interaction import shape_sweep as ss

    cfg = ss.PAPER_SWEEP if args.paper else ss.SweepConfig()
    kw: dict = dict(source=args.source, seed=args.seed, device=args.device)
    if args.preset:
        kw["preset"] = args.preset
    if args.budgets:
        kw["budgets"] = tuple(args.budgets)
    if args.depths:
        kw["depths"] = tuple(args.depths)
    elif args.max_depth is not None:
        kw.update(depths=None, max_depth=args.max_depth)
    for k in ("d_head", "n_ctx", "steps", "lr", "batch_size"):
        if getattr(args, k) is not None:
            kw[k] = getattr(args, k)
    if args.steps is not None:
        kw["bytes_per_param"] = None  # explicit steps win
    return cfg.replace(**kw)


def _print_plan(rows) -> None:
    print(
        f"{'budget':>9} {'depth':>5} {'d_model':>7} {'heads':>5} {'params':>10} {'pad':>8} {'pad %':>6} "
        f"{'R_D/W':>7} {'steps':>7}  status"
    )
    for r in rows:
        if r["d_model"] is None:
            print(
                f"{r['budget']:>9.3g} {r['depth']:>5} {'-':>7} {'-':>5} {'-':>10} {'-':>8} {'-':>6} {'-':>7} {'-':>7}  "
                f"{r['status']}"
            )
            continue
        print(
            f"{r['budget']:>9.3g} {r['depth']:>5} {r['d_model']:>7} {r['n_heads']:>5} {r['active']:>10,} "
            f"{r['pad']:>8,} {100 * r['pad_ratio']:>5.1f}% {r['r_dw']:>7.4f} {r['steps'] or '-':>7}  {r['status']}"
        )
    n_run = sum(r["status"] == "run" for r in rows)
    n_done = sum(r["status"] == "done" for r in rows)
    print(
        f"{len(rows)} cells: {n_run + n_done} shapes ({n_done} done, {n_run} to run), "
        f"{len(rows) - n_run - n_done} skipped"
    )


def _run_shape(args) -> int:
    from tl_geometry.families.interaction import shape_sweep as ss

    cfg = _shape_config(args)
    check_outputs(args, "figure")
    if args.dry_run:
        print(f"preset {cfg.preset}; budgets {', '.join(f'{b:g}' for b in cfg.budgets)}")
        _print_plan(ss.plan(cfg, args.out))
        return 0
    recs = ss.shape_sweep(cfg, args.out)
    print(f"preset {cfg.preset}")
    print(
        f"{'budget':>9} {'depth':>5} {'d_model':>7} {'R_D/W':>7} {'test CE':>8} {'AOFE out':>9} {'AOFE loss':>9} "
        f"{'WᵀW AOFE':>9}"
    )
    for r in sorted(recs, key=lambda r: (r["params"]["budget"], r["params"]["n_layers"])):
        p = r["params"]
        print(
            f"{p['budget']:>9.3g} {p['n_layers']:>5} {p['d_model']:>7} {r['r_dw']:>7.4f} {r['test_ce']:>8.4f} "
            f"{r['aofe_ratio_out']:>9.4f} {r.get('aofe_ratio_loss', float('nan')):>9.4f} {r['wtw_aofe_ratio']:>9.4f}"
        )
    for f in ss.frontier(recs):
        print(
            f"best at {f['budget']:.3g}: depth {f['n_layers']} / d_model {f['d_model']}, α* = {f['alpha']:.4f}, CE {f['test_ce']:.4f}"
        )
    if args.figure:
        write_figure(args.figure, ss.plot_sweep, recs, args.force)
        print(f"wrote {args.figure}")
    return 0


def build_toy(sub) -> None:
    """Add ``toy`` (the toy double descent) to the experiments of ``tl-geometry sweep``."""
    p = sub.add_parser("toy", help="toy double descent: ReLU(x WᵀW + b) over training-set sizes")
    p.add_argument(
        "--preset",
        choices=("paper", "henighan", "cpu"),
        default="cpu",
        help="paper: the authors' code (1000 → 2, 3000 steps, lr 5e-3, minibatches with replacement, "
        "5 seeds, 22 sizes; hours on CPU); henighan: our earlier 50k-step full-batch settings; "
        "cpu (default): 100 → 2 for a CPU minute",
    )
    p.add_argument("--paper", action="store_true", help="same as --preset paper")
    p.add_argument("--sizes", type=int, nargs="+", default=None, help="training-set sizes (default: the preset's)")
    p.add_argument("--seeds", "--seed", type=int, nargs="+", default=None, help="model seeds (default: the preset's)")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--out", default="toy_double_descent.jsonl", help="JSON-lines results (resumed when it exists)")
    p.add_argument("--figure", default=None)
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.set_defaults(func=_run_toy)


def _run_toy(args) -> int:
    import math

    from tl_geometry.families.interaction import toy_superposition as toy

    preset = "paper" if args.paper else args.preset
    check_outputs(args, "figure")
    recs = toy.run(
        preset,
        sizes=args.sizes,
        seeds=args.seeds,
        out=args.out,
        **({"steps": args.steps} if args.steps is not None else {}),  # --steps 0 is refused, not ignored
    )
    summ = toy.summarize(recs)
    print(
        f"preset {preset}"
        + (f" (changed: {recs[0]['overrides']})" if recs and recs[0].get("overrides") else "")
        + "; mean ± std over seeds"
    )
    print(
        f"{'T':>7} {'seeds':>5} {'train':>8} {'test':>16} {'AOFE ratio':>16} {'AGOP cos²':>10} {'corr(WᵀW,AGOP)':>15}"
    )
    for s in summ:
        print(
            f"{s['n_train']:>7} {s['n_seeds']:>5} {s['train_loss_mean']:>8.4f} "
            f"{s['test_loss_mean']:>8.4f} ± {s['test_loss_std']:<5.3f} {s['aofe_ratio_mean']:>8.4f} ± {s['aofe_ratio_std']:<5.3f} "
            f"{s['agop_cos2_mean']:>10.4f} {s['nfa_pearson_mean']:>15.4f}"
        )
    cors = [c for c in toy.correlations(recs) if c.metric in ("aofe_ratio", "agop_cos2") and c.n >= 3]
    for c in cors:
        if not math.isnan(c.pearson):
            print(
                f"corr({c.metric}, test loss) [{c.regime}, n={c.n}]: Pearson {c.pearson:+.3f}, Spearman {c.spearman:+.3f}"
            )
    if args.figure:
        write_figure(args.figure, toy.plot_toy, recs, args.force)
        print(f"wrote {args.figure}")
    return 0


SWEEPS: dict[str, Callable] = {"shape": build_shape, "toy": build_toy}
"""The family's experiments of ``tl-geometry sweep``: name → ``builder(subparsers)``."""
