"""Benchmark the sweep machinery against the naive ways.

    python -m benchmarks.bench_sweep [--repeats 3] [--no-ray] [--small]

1. crash safety: ours one fsynced JSON line per finished job (``ResultsFile.append``); reference the
   naive way (keep results in memory, ``json.dump`` once at the end: the simplest and fastest, but a
   crash loses everything); floor one bare ``os.write`` + ``os.fsync`` of a line per job (the price
   of durability itself);
2. resume scan: ours ``ResultsFile.finished_keys`` (the file read once into a set); reference the
   naive ``ResultsFile.done(job)`` per job (re-reads the file for every job: O(N²); timed on 100
   look-ups and extrapolated); floor one read of the file's bytes (``_util.read_floor``);
3. a sweep of tiny models (``benchmarks._util:tiny_loader``): ours with Ray (``ray.init(num_cpus=2)``,
   when installed and not ``--no-ray``); reference the local executor (the simple way: one process,
   one job after another); floor one load and ``tg.analyze`` per job in this process.

Warm-up, ``--repeats`` (≥ 3) rounds in rotating order, best and median; prints each ratio.
``--small``: 100 jobs to record, 500 to scan, 2 tiny jobs, no Ray.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import warnings
from pathlib import Path

from benchmarks import _util


def bench_append(n: int, repeats: int) -> None:
    from tl_geometry.runtime.jobs import ResultsFile, job_key

    rows = [
        {"metric": f"m{i}", "value": 0.5, "hook": f"blocks.{i % 30}.hook_resid_post", "extras": {"k": 10}}
        for i in range(60)
    ]
    with tempfile.TemporaryDirectory() as d:
        counter = iter(range(10**6))

        def ours():
            rf = ResultsFile(Path(d) / f"r{next(counter)}.jsonl")
            for i in range(n):
                rf.append({"model": "m", "seed": i}, {"rows": rows})

        def naive():
            acc = [{"key": job_key({"model": "m", "seed": i}), "rows": rows} for i in range(n)]
            with open(Path(d) / "naive.json", "w") as f:
                json.dump(acc, f)

        def floor():
            line = (json.dumps({"rows": rows}) + "\n").encode()
            fd = os.open(Path(d) / f"f{next(counter)}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                for _ in range(n):
                    os.write(fd, line)
                    os.fsync(fd)
            finally:
                os.close(fd)

        t = _util.bench({"ours": ours, "reference": naive, "floor": floor}, repeats=repeats)
    print(f"\n[1] record {n} jobs (60 rows each)")
    _util.print_table(
        [
            ("ours: fsynced line per job", t["ours"], f"{t['ours'].best * 1e3 / n:.2f} ms/job"),
            ("reference: json.dump at the end", t["reference"]),
            ("floor: os.write + os.fsync per job", t["floor"]),
        ]
    )
    _util.print_ratios(t["ours"], t["reference"], t["floor"], reference_name="dump at end", floor_name="bare fsync")


def bench_resume(n: int, repeats: int) -> None:
    from tl_geometry.runtime.jobs import ResultsFile, job_key

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
        sample = jobs[:100]

        def ours():
            done = rf.finished_keys()
            return [j for j in jobs if job_key(j) not in done]

        t = _util.bench({"ours": ours, "reference": lambda: [j for j in sample if not rf.done(j)]}, repeats=repeats)
        floor = _util.read_floor(rf.path, repeats=repeats)
    assert t["ours"].value == [] and t["reference"].value == []
    print(f"\n[2] resume scan of {n} finished jobs")
    _util.print_table(
        [
            ("ours: one read into a set", t["ours"]),
            (
                f"reference: done() per job, {len(sample)} look-ups",
                t["reference"],
                f"× {n / len(sample):g} in the ratio",
            ),
            ("floor: one read of the file", floor),
        ]
    )
    _util.print_ratios(
        t["ours"],
        t["reference"],
        floor,
        reference_name="done() per job",
        scale_reference=n / len(sample),
        floor_name="file read",
    )


def bench_executors(n_jobs: int, repeats: int, use_ray: bool) -> None:
    import tl_geometry as tg
    from tl_geometry.runs.sweeps import sweep
    from tl_geometry.runtime.jobs import ResultsFile

    jobs = [
        dict(model=f"tiny-L2-d64-{i}", corpus="random", n_seqs=4, seq_len=16, loader="benchmarks._util:tiny_loader")
        for i in range(n_jobs)
    ]
    metrics = ["shape", "epsilon", "spectral"]
    ray = None
    if use_ray:
        try:
            import ray
        except ImportError:
            print("ray not installed: the Ray executor skipped")
    with tempfile.TemporaryDirectory() as d:
        counter = iter(range(10**6))

        def run(executor):
            def f():
                out = Path(d) / f"{executor}{next(counter)}.jsonl"
                sweep(jobs, metrics=metrics, out=out, executor=executor, progress=False)
                recs = ResultsFile(out).records()
                errs = [r["error"] for r in recs if r["status"] != "ok"]
                assert not errs, errs[:1]
                return [r["rows"] for r in sorted(recs, key=lambda r: r["params"]["model"])]

            return f

        def floor():
            import torch

            for j in jobs:
                m = _util.tiny_loader(j)
                toks = torch.randint(0, m.cfg.d_vocab, (4, 16), generator=torch.Generator().manual_seed(0))
                tg.analyze(m, toks, metrics=metrics, progress=False)

        cases = {"reference": run("local"), "floor": floor}
        init = None
        if ray is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                env = _util.child_env(OMP_NUM_THREADS="1")
                ray.init(
                    num_cpus=2,
                    include_dashboard=False,
                    log_to_driver=False,
                    runtime_env={"env_vars": {k: env[k] for k in ("PYTHONPATH", "OMP_NUM_THREADS", "HF_HUB_OFFLINE")}},
                )
                init = time.perf_counter() - t0
            cases["ours"] = run("ray")
        t = _util.bench(cases, repeats=repeats)
        if ray is not None:
            ray.shutdown()
    print(f"\n[3] sweep of {n_jobs} tiny-model jobs" + (f" (Ray init {init:.1f} s, not included)" if init else ""))
    rows = [("reference: local executor", t["reference"]), ("floor: load + analyze per job", t["floor"])]
    if "ours" in t:
        rows.insert(0, ("ours: Ray (2 CPUs)", t["ours"]))
    _util.print_table(rows)
    if "ours" in t:
        _util.print_ratios(t["ours"], t["reference"], t["floor"], reference_name="local")
        print(f"rows identical: {t['ours'].value == t['reference'].value}")
    else:
        r, f = t["reference"], t["floor"]
        print(f"local / floor: best {r.best / f.best:.3f}, median {r.median / f.median:.3f} (Ray not run)")


def main(argv=None) -> None:
    ap = _util.make_parser(__doc__)
    ap.add_argument("--no-ray", action="store_true")
    args = _util.parse_args(ap, argv)
    import torch

    torch.set_num_threads(1)
    _util.print_environment("sweep machinery: crash-safe records, resume scan, executors")
    small = args.small
    bench_append(100 if small else 300, args.repeats)
    bench_resume(500 if small else 2000, args.repeats)
    bench_executors(2 if small else 4, args.repeats, use_ray=not (args.no_ray or small))
    _util.print_footer()


if __name__ == "__main__":
    main()
