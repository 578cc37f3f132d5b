"""``tl-geometry sweep models``: the metrics over many models / checkpoints / seeds, resumable.

    tl-geometry sweep models --models smollm2-135m [pythia-70m ...] [--checkpoints 1000 143000]
                             [--seeds 0 1] [--metrics epsilon pga ...] [--option pga.k=50 ...]
                             [--corpus pydoc] [--n-seqs 8] [--seq-len 128] [--loader pkg.mod:fn]
                             [--executor local|ray] [--num-cpus 1] [--num-gpus 0] [--retry-errors]
                             [--address auto|ray://host:10001] [--working-dir DIR] [--runtime-env JSON]
                             [--reload-per-job]
                             [--out sweep_results.jsonl] [--csv rows.csv] [--force]

One job per (model, checkpoint, seed); each finished job is appended to ``--out`` at once, and a
rerun skips what is done (failed jobs only with ``--retry-errors``). Each (model, checkpoint) is
loaded once for all its seeds (on Ray: one actor per model) unless ``--reload-per-job``. Exit status 1 when a job of
this run failed (its error is in the results file), 2 for bad arguments.
"""

from __future__ import annotations

import json

from tl_geometry.errors import InputError


def _parse_options(items: list[str] | None) -> dict:
    """``["pga.k=50", "agop.space=\\"output\\""]`` → ``{"pga": {"k": 50}, "agop": {"space": "output"}}``.

    Values are JSON when they parse (numbers, true/false, lists), else plain strings; never evaluated.
    """
    out: dict[str, dict] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        metric, dot, opt = key.partition(".")
        if not sep or not dot or not metric or not opt:
            raise InputError(f"--option must look like METRIC.NAME=VALUE (e.g. pga.k=50), got {item!r}")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out.setdefault(metric, {})[opt] = value
    return out


def _checkpoint(text: str):
    return int(text) if text.lstrip("-").isdigit() else text


def build(sub) -> None:
    """Add the ``models`` experiment to ``tl-geometry sweep``."""
    p = sub.add_parser("models", help="run metrics over many models/checkpoints/seeds (resumable, local or Ray)")
    p.add_argument("--models", nargs="+", required=True, help="model names (tg.models.load, or your --loader)")
    p.add_argument("--metrics", nargs="+", default=None, help="registered metric names (default: all)")
    p.add_argument(
        "--checkpoints",
        nargs="+",
        type=_checkpoint,
        default=None,
        help="training checkpoints (steps) per model (default: the final weights)",
    )
    p.add_argument(
        "--seeds", nargs="+", type=int, default=[0], help="one job per seed (corpus sample and metric sampling)"
    )
    p.add_argument("--corpus", default="pydoc", help="pydoc, shakespeare, a text file, or 'random' token ids")
    p.add_argument("--n-seqs", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--device", default="cpu")
    p.add_argument("--loader", default=None, help="'package.module:function' called as function(job_dict) -> model")
    p.add_argument(
        "--option",
        action="append",
        default=None,
        metavar="METRIC.NAME=VALUE",
        help="a metric option, e.g. pga.k=50 (repeatable; values parsed as JSON)",
    )
    p.add_argument("--executor", choices=["local", "ray"], default="local")
    p.add_argument("--num-cpus", type=float, default=1, help="Ray: CPUs per job")
    p.add_argument("--num-gpus", type=float, default=0, help="Ray: GPUs per job")
    p.add_argument(
        "--address",
        default=None,
        help="Ray: the cluster to connect to ('auto', 'ray://host:10001'); default a running session or a local one",
    )
    p.add_argument(
        "--working-dir",
        default=None,
        help="Ray: ship this directory to every worker (runtime_env working_dir), e.g. the folder of a --loader module",
    )
    p.add_argument(
        "--runtime-env",
        default=None,
        metavar="JSON",
        help='Ray: a runtime environment as JSON, e.g. \'{"pip": ["mypkg"]}\' (merged with --working-dir)',
    )
    p.add_argument(
        "--reload-per-job",
        action="store_true",
        help="load the model again for every job (default: once per model and checkpoint)",
    )
    p.add_argument("--retry-errors", action="store_true", help="re-run jobs recorded as failed")
    p.add_argument("--out", default="sweep_results.jsonl", help="JSON-lines results (resumed when it exists)")
    p.add_argument("--csv", default=None, help="also write every finished row as a CSV table (needs pandas)")
    p.add_argument(
        "--force", action="store_true", help="replace an existing --csv file (the --out results file is resumed)"
    )
    p.set_defaults(func=run)


def _runtime_env(args) -> dict | None:
    """``--runtime-env`` JSON merged with ``--working-dir``; None when neither is given."""
    env: dict = {}
    if args.runtime_env:
        try:
            env = json.loads(args.runtime_env)
        except json.JSONDecodeError as exc:
            raise InputError(f"--runtime-env must be a JSON object, got {args.runtime_env!r}: {exc}") from None
        if not isinstance(env, dict):
            raise InputError(f"--runtime-env must be a JSON object, got {args.runtime_env!r}")
    if args.working_dir:
        from pathlib import Path

        wd = Path(args.working_dir)
        if not wd.is_dir():
            raise InputError(f"--working-dir {args.working_dir!r} is not a directory")
        env["working_dir"] = str(wd.resolve())
    if env and args.executor != "ray":
        raise InputError("--address, --working-dir and --runtime-env need --executor ray")
    return env or None


def run(args) -> int:
    from tl_geometry.runs.sweeps import SweepJob, check_outputs, sweep

    options = _parse_options(args.option)
    runtime_env = _runtime_env(args)
    if args.address and args.executor != "ray":
        raise InputError("--address, --working-dir and --runtime-env need --executor ray")
    check_outputs(args, "csv")
    jobs = [
        SweepJob(
            model=m,
            checkpoint=c,
            corpus=args.corpus,
            n_seqs=args.n_seqs,
            seq_len=args.seq_len,
            seed=s,
            loader=args.loader,
            device=args.device,
        )
        for m in args.models
        for c in (args.checkpoints or [None])
        for s in args.seeds
    ]
    summary = sweep(
        jobs,
        metrics=args.metrics,
        out=args.out,
        executor=args.executor,
        retry_errors=args.retry_errors,
        options=options or None,
        num_cpus=args.num_cpus,
        num_gpus=args.num_gpus,
        reuse_models=not args.reload_per_job,
        address=args.address,
        runtime_env=runtime_env,
    )
    print(f"{args.out}: {len(summary.ran)} ran, {len(summary.skipped)} already done, {len(summary.failed)} failed")
    for key, err in summary.failed.items():
        params = json.loads(key)
        print(f"  FAILED {params['model']} checkpoint={params['checkpoint']} seed={params['seed']}: {err}")
    if args.csv:
        from tl_geometry.io import outdir

        with outdir.output_file(args.csv, force=args.force, what="--csv file") as tmp:
            summary.report().to_pandas().to_csv(tmp, index=False)
        print(f"wrote {args.csv}")
    return 1 if summary.failed else 0
