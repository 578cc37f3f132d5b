"""A sweep of 1 model × 4 seeds: local vs Ray, per-job loads vs one load per model; wall time and loads.

    python -m benchmarks.bench_ray --model smollm2-135m [--seeds 4] [--repeats 3] [--no-ray]
    python -m benchmarks.bench_ray --small [--with-ray]   # tiny-L2, 2 seeds, local only (with Ray: ~100 s)

Four ways to run the same jobs (``tg.sweep``, the same rows every time):

* ``local, load per job``  — ``reuse_models=False``: what every sweep did before (one load per job):
  the reference, the simplest correct sweep (a loop that loads, measures, appends);
* ``local, load once``     — ours, the default now: jobs of one model run on one loaded model;
* ``ray tasks, per job``   — ``executor="ray", reuse_models=False``: each job a Ray task (before);
* ``ray actor per model``  — ours with ``executor="ray"`` (default now): one actor loads the model once.

Floor: one load of the model, then ``tg.analyze`` of each seed's tokens in this process (no
results file, no executor): the work every sweep must do.

Loads are counted by the loader itself (:func:`load`, appending to a file, so loads inside Ray
workers count too). One Ray cluster (``ray.init(num_cpus=2)``) serves every Ray run; its start is
timed apart. Warm-up, ``--repeats`` (≥ 3) rounds in rotating order (``_util.bench``), best and
median. ``--no-ray`` (or Ray not installed): the local ways only. ``--small``: tiny-L2, 2 seeds, the
local ways only unless ``--with-ray``.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from benchmarks import _util

LOG_VAR = "TLG_BENCH_LOAD_LOG"


def load(job: dict):
    """The sweep loader (``"benchmarks.bench_ray:load"``): counts each load, then loads."""
    with open(os.environ[LOG_VAR], "a", encoding="utf-8") as f:
        f.write(job["model"] + "\n")
    if job["model"].startswith("tiny-"):
        return _util.tiny_loader(job)
    return _util.load_smollm2(quiet=True) if job["model"] == "smollm2-135m" else _tg().models.load(job["model"])


def _tg():
    import tl_geometry as tg

    return tg


CONFIGS = {
    "local, load per job": dict(executor="local", reuse_models=False),
    "local, load once": dict(executor="local", reuse_models=True),
    "ray tasks, per job": dict(executor="ray", reuse_models=False),
    "ray actor per model": dict(executor="ray", reuse_models=True),
}


def main(argv=None) -> None:
    ap = _util.make_parser(__doc__)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--metrics", nargs="+", default=["epsilon_activations", "spectral"])
    ap.add_argument("--no-ray", action="store_true", help="the local ways only")
    ap.add_argument("--with-ray", action="store_true", help="with --small: the Ray ways too")
    args = _util.parse_args(ap, argv)
    if args.small:
        args.model, args.seeds = "tiny-L2", 2
        args.no_ray = args.no_ray or not args.with_ray

    import torch

    from tl_geometry.runs.sweeps import sweep
    from tl_geometry.runtime.jobs import read_records

    tg = _tg()
    _util.print_environment(f"sweep of {args.model} × {args.seeds} seeds: local vs Ray, loads per job vs once")
    try:
        import ray
    except ImportError:
        ray = None
    use_ray = ray is not None and not args.no_ray
    tmp = Path(tempfile.mkdtemp(prefix="bench_ray_"))
    log = tmp / "loads.log"
    os.environ[LOG_VAR] = str(log)
    tiny = args.model.startswith("tiny-")
    jobs = [
        dict(
            model=args.model,
            corpus="random" if tiny else "pydoc",
            n_seqs=4,
            seq_len=32 if tiny else 64,
            seed=s,
            loader="benchmarks.bench_ray:load",
        )
        for s in range(args.seeds)
    ]
    torch.set_num_threads(1)  # a Ray worker has one CPU (num_cpus=1): the same for the local runs
    ray_start = None
    if use_ray:
        t0 = time.perf_counter()
        env = _util.child_env(**{LOG_VAR: str(log), "OMP_NUM_THREADS": "1"})
        env_vars = {k: env[k] for k in ("PYTHONPATH", LOG_VAR, "OMP_NUM_THREADS", "HF_HUB_OFFLINE")}
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env_vars})
        ray_start = time.perf_counter() - t0

    def loads() -> int:
        return len(log.read_text().split()) if log.exists() else 0

    counter = iter(range(10**6))

    def way(name):
        def f():
            out = tmp / f"{next(counter)}.jsonl"
            before = loads()
            s = sweep(jobs, metrics=args.metrics, out=out, progress=False, **CONFIGS[name])
            assert not s.failed, s.failed
            rows = sorted(
                ((r["params"]["seed"], r["rows"]) for r in read_records(out) if r["status"] == "ok"),
                key=lambda x: x[0],
            )
            return loads() - before, rows

        return f

    def floor():
        model = load(jobs[0])
        for j in jobs:
            if tiny:
                g = torch.Generator().manual_seed(j["seed"])
                toks = torch.randint(0, model.cfg.d_vocab, (j["n_seqs"], j["seq_len"]), generator=g)
            else:
                toks = _util.pydoc_tokens(model, j["n_seqs"], j["seq_len"], seed=j["seed"])
            tg.analyze(model, toks, metrics=args.metrics, progress=False)

    names = [n for n in CONFIGS if use_ray or CONFIGS[n]["executor"] == "local"]
    t = _util.bench({**{n: way(n) for n in names}, "floor": floor}, repeats=args.repeats)
    if use_ray:
        ray.shutdown()
    same = all(t[n].value[1] == t[names[0]].value[1] for n in names)
    start = f"Ray cluster start {ray_start:.1f} s (not included)" if use_ray else "Ray not run"
    print(f"{args.model}, 1 model × {args.seeds} seeds, metrics {args.metrics}, 4 sequences per job; {start}")
    _util.print_table(
        [(n, t[n], f"{t[n].value[0]} model loads") for n in names]
        + [("floor: one load + analyze per seed", t["floor"])]
    )
    ref = t["local, load per job"]
    for n in names[1:]:
        print(f"{n}:")
        _util.print_ratios(t[n], ref, t["floor"], reference_name="local, load per job")
    print(f"rows identical across the {len(names)}: {same}")
    _util.print_footer()


if __name__ == "__main__":
    main()
