"""A sweep of 1 model × 4 seeds: local vs Ray, per-job loads vs one load per model; wall time and loads.

Four ways to run the same jobs (``tg.sweep``, the same rows every time):

* ``local, load per job``  — ``reuse_models=False``: what every sweep did before (one load per job);
* ``local, load once``     — the default now: jobs of one model run on one loaded model;
* ``ray tasks, per job``   — ``executor="ray", reuse_models=False``: each job a Ray task (before);
* ``ray actor per model``  — ``executor="ray"`` (default now): one actor loads the model once.

Loads are counted by the loader itself (:func:`load`, appending to a file, so loads inside Ray
workers count too). One Ray cluster (``ray.init(num_cpus=2)``) serves every Ray run; its start is
timed apart. Each configuration runs ``--repeats`` times in alternating order; best and median.

Run (from the repository root)::

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/bench_ray.py --model smollm2-135m
    PYTHONPATH=. python benchmarks/bench_ray.py --model tiny-L2      # seconds
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

LOG_VAR = "TLG_BENCH_LOAD_LOG"


def load(job: dict):
    """The sweep loader: counts each load (one line in ``$TLG_BENCH_LOAD_LOG``), then loads."""
    with open(os.environ[LOG_VAR], "a", encoding="utf-8") as f:
        f.write(job["model"] + "\n")
    if job["model"].startswith("tiny-"):
        from tests.helpers import portable_tiny_model

        return portable_tiny_model(int(job["model"].split("-L")[1]), 64)
    import tl_geometry as tg

    return tg.models.load(job["model"])


CONFIGS = {
    "local, load per job": dict(executor="local", reuse_models=False),
    "local, load once": dict(executor="local", reuse_models=True),
    "ray tasks, per job": dict(executor="ray", reuse_models=False),
    "ray actor per model": dict(executor="ray", reuse_models=True),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--metrics", nargs="+", default=["epsilon_activations", "spectral"])
    args = ap.parse_args()

    import ray
    import torch

    from tl_geometry.jobs import read_records
    from tl_geometry.sweeps import sweep

    tmp = Path(tempfile.mkdtemp(prefix="bench_ray_"))
    log = tmp / "loads.log"
    os.environ[LOG_VAR] = str(log)
    corpus = "random" if args.model.startswith("tiny-") else "pydoc"
    jobs = [
        dict(
            model=args.model,
            corpus=corpus,
            n_seqs=4,
            seq_len=32 if args.model.startswith("tiny-") else 64,
            seed=s,
            loader="benchmarks.bench_ray:load",
        )
        for s in range(args.seeds)
    ]
    torch.set_num_threads(1)  # a Ray worker has one CPU (num_cpus=1): the same for the local runs
    t0 = time.perf_counter()
    path = os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]).strip(os.pathsep)
    env = {"PYTHONPATH": path, LOG_VAR: str(log), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    ray_start = time.perf_counter() - t0

    times: dict[str, list[float]] = {k: [] for k in CONFIGS}
    loads: dict[str, list[int]] = {k: [] for k in CONFIGS}
    rows: dict[str, object] = {}
    names = list(CONFIGS)
    for rep in range(args.repeats):
        order = names if rep % 2 == 0 else names[::-1]  # alternating order
        for name in order:
            out = tmp / f"{rep}-{names.index(name)}.jsonl"
            before = len(log.read_text().split()) if log.exists() else 0
            t0 = time.perf_counter()
            s = sweep(jobs, metrics=args.metrics, out=out, progress=False, **CONFIGS[name])
            times[name].append(time.perf_counter() - t0)
            loads[name].append(len(log.read_text().split()) - before)
            assert not s.failed, s.failed
            rows[name] = sorted(
                ((r["params"]["seed"], r["rows"]) for r in read_records(out) if r["status"] == "ok"), key=lambda x: x[0]
            )
            print(f"  rep {rep} {name}: {times[name][-1]:.1f} s, {loads[name][-1]} loads", flush=True)
    ray.shutdown()

    same = all(rows[n] == rows[names[0]] for n in names)
    print(
        f"\n{args.model}, 1 model × {args.seeds} seeds, metrics {args.metrics}, 4 sequences per job; "
        f"Ray cluster start {ray_start:.1f} s (not included); {args.repeats} repeats, alternating order"
    )
    print("| executor | model loads | wall best (s) | wall median (s) |\n|---|---|---|---|")
    for n in names:
        print(f"| {n} | {loads[n][0]} | {min(times[n]):.1f} | {statistics.median(times[n]):.1f} |")
    print(f"rows identical across the four: {same}")


if __name__ == "__main__":
    main()
