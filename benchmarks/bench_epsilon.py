"""Benchmark: exact ε = μ + 2σ from Gram moments vs the capacity paper's all-pairs algorithm.

    python benchmarks/bench_epsilon.py [--threads 2] [--skip-naive] [--skip-large] [--skip-hist]
                                       [--hist-n 50000] [--hist-d 768]

Each case runs in a fresh subprocess so that its peak resident memory (ru_maxrss) is its own.
Prints: wall time, process CPU time (on a busy shared machine, CPU time / threads is what an idle
machine's wall time would be), peak RSS, and the ratio against the naive way.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CASE = r"""
import json, resource, sys, time, torch
torch.set_num_threads({threads})
import tl_geometry as tg
g = torch.Generator().manual_seed(0)
x = torch.randn({n}, {d}, generator=g)
x += 0.3 * torch.randn({d}, generator=g)  # in place: the peak below is the call's, not the data's
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cpu0 = time.process_time()
t = time.perf_counter()
if "{kind}" == "ours":
    eps = tg.similarity_stats(x, progress=False).epsilon
elif "{kind}" == "hist":
    st = tg.similarity_stats(x, histogram=True, histogram_bins=300, progress=False)
    eps = st.epsilon
    assert int(st.histogram[0].sum()) == st.n_vectors * (st.n_vectors - 1)
else:  # the paper's algorithm: normalize, full n x n similarity matrix, std_mean of the off-diagonal
    u = torch.nn.functional.normalize(x, dim=1)
    s = u @ u.T
    off = s[~torch.eye(len(u), dtype=torch.bool)]
    std, mean = torch.std_mean(off)
    eps = float(mean + 2 * std)
dt = time.perf_counter() - t
cpu = time.process_time() - cpu0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(dict(eps=eps, seconds=dt, cpu_seconds=cpu, peak_mb=peak / 1024, input_mb={n} * {d} * 4 / 2**20, before_mb=base / 1024)))
"""


def run(kind, n, d, threads):
    code = CASE.format(kind=kind, n=n, d=d, threads=threads)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-naive", action="store_true")
    ap.add_argument("--skip-large", action="store_true")
    ap.add_argument("--skip-hist", action="store_true")
    ap.add_argument("--hist-n", type=int, default=50000)
    ap.add_argument("--hist-d", type=int, default=768)
    args = ap.parse_args()

    print(f"threads={args.threads}")
    ours = run("ours", 20000, 256, args.threads)
    print(
        f"20000 x 256   ours : {ours['seconds']:.3f} s (CPU {ours['cpu_seconds']:.2f} s), peak RSS {ours['peak_mb']:.0f} MB, eps={ours['eps']:.9f}"
    )
    if not args.skip_naive:
        naive = run("naive", 20000, 256, args.threads)
        print(
            f"20000 x 256   paper: {naive['seconds']:.3f} s (CPU {naive['cpu_seconds']:.2f} s), peak RSS {naive['peak_mb']:.0f} MB, eps={naive['eps']:.9f}"
        )
        print(f"  speed-up {naive['seconds'] / ours['seconds']:.1f}x, |Δε| = {abs(naive['eps'] - ours['eps']):.2e}")
    if not args.skip_large:
        big = run("ours", 262144, 640, args.threads)
        print(
            f"262144 x 640 ours : {big['seconds']:.2f} s (CPU {big['cpu_seconds']:.1f} s), peak RSS {big['peak_mb']:.0f} MB "
            f"(input {big['input_mb']:.0f} MB, process before the call {big['before_mb']:.0f} MB)"
        )
    if not args.skip_hist:
        h = run("hist", args.hist_n, args.hist_d, args.threads)
        print(
            f"{args.hist_n} x {args.hist_d} histogram over all pairs: {h['seconds']:.1f} s (CPU {h['cpu_seconds']:.0f} s), peak RSS {h['peak_mb']:.0f} MB "
            f"(input {h['input_mb']:.0f} MB, before {h['before_mb']:.0f} MB)"
        )


if __name__ == "__main__":
    main()
