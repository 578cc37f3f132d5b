"""``tl-geometry id``: the intrinsic dimension of every layer (TwoNN and GRIDE), with standard errors."""

from __future__ import annotations

from tl_geometry.base import _checks
from tl_geometry.runs import cli_args


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "id", help="intrinsic dimension by layer: TwoNN (Facco 2017) and GRIDE at growing scale (Denti 2022)"
    )
    cli_args.add_model_text(p, n_seqs=16, seq_len=256)
    cli_args.add_layers_hooks(p, site="post", default="the embeddings and every layer")
    p.add_argument("--max-points", type=int, default=2048, help="token positions sampled (shared by all layers)")
    p.add_argument("--range-max", type=int, default=64, help="GRIDE's largest neighbour order (default 64)")
    p.add_argument("--discard-fraction", type=float, default=0.1, help="TwoNN's largest ratios left out (default 0.1)")
    p.add_argument(
        "--duplicates",
        choices=("drop_all", "one_copy"),
        default="drop_all",
        help="repeated vectors: drop every copy (default, the estimators' rule) or keep one copy of each",
    )
    p.add_argument(
        "--gride-stderr",
        choices=["calibrated", "jackknife"],
        default="calibrated",
        help="GRIDE's error: the jackknife times the measured inflation at n1 = 4 (default) or the jackknife alone",
    )
    cli_args.add_batch_seed(p)
    cli_args.add_device_threads(p)
    cli_args.add_outputs(p, figures="the ID figure")
    p.set_defaults(func=run)


FLAG_CHECKS = cli_args.model_flag_checks(
    max_points=_checks.int_at_least(32),
    range_max=_checks.int_at_least(2),
    discard_fraction=_checks.real_in(0.0, 1.0, hi_open=True),
)
"""What each numeric flag accepts (the one validation layer, `tl_geometry.base._checks`)."""


def check_args(args) -> None:
    """Every check that needs no model, before the load: flags, corpus, device, ``--layers``."""
    cli_args.check_model_args(args, FLAG_CHECKS)


def run(args) -> int:
    import tl_geometry as tg
    from tl_geometry.families.intrinsic_dimension import default_hooks, intrinsic_dimension

    check_args(args)
    cli_args.check_outputs(args)  # the destinations are checked before the model is loaded
    model = tg.models.load(args.model, device=args.device)
    tokens = cli_args.corpus_tokens(model, args)
    hooks = cli_args.chosen_hooks(model, args, site="post", default=lambda: default_hooks(model))
    rep = intrinsic_dimension(
        model,
        tokens,
        hooks=hooks,
        max_points=args.max_points,
        seed=args.seed,
        discard_fraction=args.discard_fraction,
        range_max=args.range_max,
        batch_size=args.batch_size,
        duplicates=args.duplicates,
        gride_stderr=args.gride_stderr,
    )
    report = tg.GeometryReport.merge(rep, corpus=args.corpus, seed=args.seed, tokens_shape=list(tokens.shape))
    print(summary(report))
    cli_args.write_report(args, report)
    if args.figures:
        from tl_geometry.families.intrinsic_dimension.figures import plot_id_profile
        from tl_geometry.render.plotting import pyplot

        def draw(tmp):
            from pathlib import Path

            fig = plot_id_profile(report)
            path = Path(tmp) / "id_profile.png"
            fig.savefig(path, dpi=110)
            pyplot().close(fig)
            return {"id_profile": path}

        cli_args.write_figures(args, draw)
    return 0


def summary(report) -> str:
    """One line per hook: TwoNN ± stderr, and GRIDE at each scale n1."""
    tw = [r for r in report.rows if r.metric == "id.twonn"]
    gr: dict[str, dict[int, float]] = {}
    for r in report.rows:
        if r.metric == "id.gride":
            gr.setdefault(r.hook, {})[int(r.extras["n1"])] = r.value
    n1s = sorted({n1 for v in gr.values() for n1 in v})
    head = f"{'hook':<28}{'TwoNN':>9}{'± stderr':>10}" + "".join(f"{'GRIDE n1=' + str(n):>13}" for n in n1s)
    lines = [head, "-" * len(head)]
    for r in tw:
        se = r.extras.get("stderr", float("nan"))
        lines.append(
            f"{r.hook:<28}{r.value:>9.2f}{se:>10.2f}"
            + "".join(f"{gr.get(r.hook, {}).get(n, float('nan')):>13.2f}" for n in n1s)
        )
    return "\n".join(lines)
