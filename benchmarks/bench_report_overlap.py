"""Benchmark: the report's two heaviest metrics one after the other (as the report runs them) vs side by side on one core each.

    python -m benchmarks.bench_report_overlap [--repeats 3] [--small]

On SmolLM2-135M's report tokens (8 × 128 pydoc) with the report's options (AGOP: 16 probes at
every ``resid_pre`` hook; PGA: CCR 0/1/5, 30 nulls, 1,024 points, the influence error; and PGA's
z alone, ``stderr=False``), each case in fresh worker processes that load the model, warm up on a
one-sequence call, then wait at a barrier so that only the metrics are timed:

* **sequential** (ours, what ``tl-geometry report`` does): one worker, torch's default threads,
  AGOP then PGA; its time is their sum;
* **overlap** (the reference: what running the metrics side by side would give): two workers
  started together, one pinned to each of the first two cores (``sched_setaffinity``, one torch
  thread, ``TL_GEOMETRY_THREADS=inherit``), AGOP in one and PGA in the other; its time is the
  later of the two (so it includes the memory traffic they share);
* the parts: each metric's own time in each case, and PGA's z alone (torch's default threads),
  the sort-bound floor PGA's error bar is added to; a float32 GEMM (``_util.gemm_floor``, 1,024 ×
  576, the shape of one layer's activations) as the machine's floor.

Rounds alternate which case goes first (``_util.bench``: a warm-up round, then ``--repeats``).
What it answers (issue 34's report-time goal): how far the sum of the two metrics lies above what
two cores can do at best, and what an overlap of metrics would gain. Two workers hold two copies
of the model, so memory is not compared here (see docs/reliability.md: an overlap in one process
adds both working sets, above the SmolLM2 memory goal). Needs 2 usable cores.

``--small``: the tiny byte-level model (2 × 16 tokens, 2 probes, 5 nulls, 24 points).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks import _util

WORKER = r"""
import json, os, sys, time
what, cores, small = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
if cores != "all":
    os.sched_setaffinity(0, {int(c) for c in cores.split(",")})
    os.environ["TL_GEOMETRY_THREADS"] = "inherit"
import torch
if cores != "all":
    torch.set_num_threads(len(cores.split(",")))
import tl_geometry as tg
from benchmarks import _util
if small:
    model = _util.byte_model()
    tokens = tg.corpus.tokens(model, "pydoc", n_seqs=2, seq_len=16, seed=0)
    agop_kw, pga_kw = dict(n_probes=2), dict(ccr=[0, 1], n_null=5, max_points=24, k=8)
else:
    model = _util.load_smollm2(quiet=True)
    tokens = _util.pydoc_tokens(model, 8, 128)
    agop_kw, pga_kw = dict(n_probes=16), dict(ccr=[0, 1, 5], n_null=30, max_points=1024)
runs = {
    "agop": lambda t: tg.agop(model, t, keep_matrices=False, progress=False, **agop_kw),
    "pga": lambda t: tg.pga(model, t, progress=False, **pga_kw),
    "pgaz": lambda t: tg.pga(model, t, progress=False, stderr=False, **pga_kw),
}
names = what.split("+")
for n in names:  # warm-up on one sequence
    if n == "agop":
        tg.agop(model, tokens[:1], keep_matrices=False, progress=False, n_probes=2)
    else:  # one sequence holds at least k + 1 points (k = 100 at full size)
        tg.pga(model, tokens[:1], progress=False, **dict(pga_kw, max_points=min(pga_kw["max_points"], 120), n_null=2))
print("ready", flush=True)
sys.stdin.readline()
out = {}
for n in names:
    c0, t0 = time.process_time(), time.perf_counter()
    runs[n](tokens)
    out[n] = [time.perf_counter() - t0, time.process_time() - c0]
print(json.dumps(out), flush=True)
"""


def _start(what: str, cores: str, small: bool, log) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, what, cores, "1" if small else "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=_util.child_env(),
    )


def run_workers(specs: list[tuple[str, str]], small: bool) -> list[dict[str, list[float]]]:
    """Start one worker per (metrics, cores), wait until all have loaded and warmed up, release them
    together; each worker's {metric: [wall s, CPU s]} in the order of ``specs``."""
    logs = [tempfile.TemporaryFile("w+") for _ in specs]  # each worker's stderr, shown if it fails
    procs = [_start(what, cores, small, log) for (what, cores), log in zip(specs, logs, strict=True)]

    def failed(p: subprocess.Popen, when: str) -> RuntimeError:
        log = logs[procs.index(p)]
        log.seek(0)
        return RuntimeError(f"a worker failed {when} (exit {p.wait()}):\n{log.read()[-2000:]}")

    try:
        for p in procs:
            assert p.stdout is not None
            line = "-"
            while line and line.strip() != "ready":  # past what the load prints
                line = p.stdout.readline()
            if not line:
                raise failed(p, "before the barrier")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = []
        for p in procs:
            assert p.stdout is not None
            line = "-"
            while line and not line.startswith("{"):
                line = p.stdout.readline()
            if p.wait() != 0 or not line:
                raise failed(p, "after the barrier")
            outs.append(json.loads(line))
        return outs
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for log in logs:
            log.close()


def main(argv=None) -> int:
    ap = _util.make_parser(__doc__)
    args = _util.parse_args(ap, argv)
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        print("needs 2 usable cores; this process has", len(cores))
        return 2
    a, b = str(cores[0]), str(cores[1])
    _util.print_environment("AGOP and PGA: one after the other vs side by side (one core each)")
    parts: dict[str, list[list[float]]] = {}  # part → [wall s, CPU s] per round (the warm-up round first)

    def sequential() -> None:
        (o,) = run_workers([("agop+pga+pgaz", "all")], args.small)
        for k, v in o.items():
            parts.setdefault(f"{k} (torch's threads)", []).append(v)

    def overlap() -> None:
        x, y = run_workers([("agop", a), ("pga", b)], args.small)
        parts.setdefault("agop (one core, beside pga)", []).append(x["agop"])
        parts.setdefault("pga (one core, beside agop)", []).append(y["pga"])

    t0 = time.perf_counter()
    _util.bench({"sequential": sequential, "overlap": overlap}, repeats=args.repeats)  # rotating order
    seq, ovl = case_timings(parts)
    floor = _util.gemm_floor(1024, 576)["torch float32 UᵀU"]
    print(
        f"\nrounds: {time.perf_counter() - t0:.0f} s with the loads; the times below are the workers' own (metrics only)"
    )
    print("\n| part | best s | median s | best CPU s | rounds |\n|---|---|---|---|---|")
    for k, v in parts.items():
        w = v[1:]  # the warm-up round dropped
        walls = sorted(x[0] for x in w)
        print(f"| {k} | {walls[0]:.1f} | {statistics.median(walls):.1f} | {min(x[1] for x in w):.1f} | {len(w)} |")
    print(f"\nsequential (AGOP + PGA, what the report does): best {seq.best:.1f} s, median {seq.median:.1f} s")
    print(f"overlap (the later of the two, one core each): best {ovl.best:.1f} s, median {ovl.median:.1f} s")
    _util.print_ratios(seq, ovl, floor, reference_name="overlap", floor_name="one 1,024 × 576 float32 GEMM")
    _util.print_footer()
    return 0


def case_timings(parts: dict[str, list[list[float]]]) -> tuple[_util.Timing, _util.Timing]:
    """(sequential, overlap) per round from the workers' own clocks, the warm-up round dropped:
    sequential = AGOP + PGA (wall and CPU), overlap = the later of the two (wall), their sum (CPU)."""
    sa, sp = parts["agop (torch's threads)"][1:], parts["pga (torch's threads)"][1:]
    oa, op = parts["agop (one core, beside pga)"][1:], parts["pga (one core, beside agop)"][1:]
    seq = _util.Timing("sequential", [x[0] + y[0] for x, y in zip(sa, sp)], [x[1] + y[1] for x, y in zip(sa, sp)])
    ovl = _util.Timing("overlap", [max(x[0], y[0]) for x, y in zip(oa, op)], [x[1] + y[1] for x, y in zip(oa, op)])
    return seq, ovl


if __name__ == "__main__":
    raise SystemExit(main())
