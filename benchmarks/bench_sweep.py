"""Benchmark the sweep machinery against the naive ways.

1. crash safety cost: one fsynced JSON line per finished job (``ResultsFile.append``) vs the naive
   way (keep results in memory, ``json.dump`` once at the end: a crash loses everything);
2. resume scan: ``sweep``/``run_jobs`` read the results file once into a set, vs the naive
   ``ResultsFile.done(job)`` per job (re-reads the file for every job: O(N²));
3. a real sweep of tiny models: local vs Ray (``ray.init(num_cpus=2)``), when ray is installed.

Run: ``python benchmarks/bench_sweep.py`` (about a minute on 2 cores). Prints each ratio.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

torch.set_num_threads(1)
HELPERS = str(Path(__file__).resolve().parents[1])  # the repository root: tests.helpers has the tiny-model loader
sys.path.insert(0, HELPERS)

from tl_geometry.jobs import ResultsFile, job_key  # noqa: E402


def bench_append(n: int = 300) -> None:
    rows = [
        {"metric": f"m{i}", "value": 0.5, "hook": f"blocks.{i % 30}.hook_resid_post", "extras": {"k": 10}}
        for i in range(60)
    ]
    with tempfile.TemporaryDirectory() as d:
        rf = ResultsFile(Path(d) / "r.jsonl")
        t0 = time.perf_counter()
        for i in range(n):
            rf.append({"model": "m", "seed": i}, {"rows": rows})
        ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        acc = [{"key": job_key({"model": "m", "seed": i}), "rows": rows} for i in range(n)]
        with open(Path(d) / "naive.json", "w") as f:
            json.dump(acc, f)
        naive = time.perf_counter() - t0
    print(
        f"[1] record {n} jobs (60 rows each): fsynced line per job {ours * 1e3 / n:.2f} ms/job, "
        f"naive dump-at-end {naive * 1e3 / n:.3f} ms/job → overhead ratio {ours / naive:.0f}x "
        f"(absolute {ours * 1e3 / n:.2f} ms per job, against seconds to minutes of model work)"
    )


def bench_resume(n: int = 2000) -> None:
    with tempfile.TemporaryDirectory() as d:
        rf = ResultsFile(Path(d) / "r.jsonl")
        line_rows = [{"metric": "x", "value": 1.0}] * 20
        with open(rf.path, "w") as f:  # a big finished sweep, written fast
            for i in range(n):
                params = {"model": "m", "seed": i}
                f.write(
                    json.dumps({"key": job_key(params), "params": params, "status": "ok", "rows": line_rows}) + "\n"
                )
        jobs = [{"model": "m", "seed": i} for i in range(n)]
        t0 = time.perf_counter()
        done = rf.finished_keys()
        todo = [j for j in jobs if job_key(j) not in done]
        ours = time.perf_counter() - t0
        sample = jobs[:100]
        t0 = time.perf_counter()
        todo_naive = [j for j in sample if not rf.done(j)]
        naive = (time.perf_counter() - t0) * n / len(sample)  # extrapolated from 100 look-ups
    assert todo == [] and todo_naive == []
    print(
        f"[2] resume scan of {n} finished jobs: one read {ours * 1e3:.0f} ms, naive done() per job "
        f"{naive:.1f} s (extrapolated) → speed-up {naive / ours:.0f}x"
    )


def bench_executors(n_jobs: int = 4) -> None:
    from tl_geometry.sweeps import sweep

    jobs = [
        dict(model=f"tiny-L2-d64-{i}", corpus="random", n_seqs=4, seq_len=16, loader="tests.helpers:tiny_loader")
        for i in range(n_jobs)
    ]
    metrics = ["shape", "epsilon", "spectral"]
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        sweep(jobs, metrics=metrics, out=Path(d) / "local.jsonl", progress=False)
        local = time.perf_counter() - t0
        try:
            import ray
        except ImportError:
            print(
                f"[3] local sweep of {n_jobs} tiny-model jobs: {local:.1f} s; ray not installed, Ray executor skipped"
            )
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            ray.init(
                num_cpus=2,
                include_dashboard=False,
                log_to_driver=False,
                runtime_env={"env_vars": {"PYTHONPATH": HELPERS, "OMP_NUM_THREADS": "1"}},
            )
            init = time.perf_counter() - t0
            t0 = time.perf_counter()
            sweep(jobs, metrics=metrics, out=Path(d) / "ray.jsonl", executor="ray", progress=False)
            remote = time.perf_counter() - t0
            ray.shutdown()
        errs = [r["error"] for r in ResultsFile(Path(d) / "ray.jsonl").records() if r["status"] != "ok"]
        assert not errs, errs[:1]
        same = [r["rows"] for r in ResultsFile(Path(d) / "local.jsonl").records()] == [
            r["rows"] for r in sorted(ResultsFile(Path(d) / "ray.jsonl").records(), key=lambda r: r["params"]["model"])
        ]
    print(
        f"[3] sweep of {n_jobs} tiny-model jobs: local {local:.1f} s, Ray (2 CPUs) {remote:.1f} s + init {init:.1f} s "
        f"→ ratio local/Ray {local / remote:.2f}x; rows identical: {same}"
    )


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    bench_append()
    bench_resume()
    bench_executors()
