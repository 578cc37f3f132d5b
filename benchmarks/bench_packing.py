"""Benchmark: optimized packing step, hand-written blocked gradient vs autograd (the paper's way).

    python benchmarks/bench_packing.py [--k 2000] [--d 32] [--steps 100] [--threads 1] [--full]

Prints seconds per step for both, the ratio, and that both trajectories give the same ε. With
``--full``, also runs the paper's full schedule (5,000 steps) for (k, d) and compares with the
paper's cell in tl_geometry/data/capacity/optimized_packing.json.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

import tl_geometry.families.capacity.packing as packing


def autograd_packing(k, d, steps, seed, lr, p):
    """The paper's loop: autograd through normalize → Gram → Σ|G|^p, Adam (CPU float32)."""
    gen = torch.Generator().manual_seed(seed)
    X = torch.nn.functional.normalize(torch.randn(k, d, generator=gen), dim=1).requires_grad_(True)
    opt = torch.optim.Adam([X], lr=lr)
    eye = torch.eye(k, dtype=torch.bool)
    for step in range(steps):
        opt.zero_grad()
        U = torch.nn.functional.normalize(X, dim=1)
        G = (U @ U.T).masked_fill(eye, 0.0)
        if step == steps - 1:
            return float(G.detach().abs().max())
        (G.abs() ** p).sum().backward()
        opt.step()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=2000)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--full", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    sched = packing.paper_schedule(args.k, args.d)
    t = time.perf_counter()
    naive = autograd_packing(args.k, args.d, args.steps, 0, sched["lr"], sched["p"])
    t_naive = (time.perf_counter() - t) / args.steps
    t = time.perf_counter()
    ours = packing.optimized_packing(args.k, args.d, steps=args.steps, seed=0, device="cpu")
    t_ours = (time.perf_counter() - t) / args.steps
    print(f"k={args.k} d={args.d} p={sched['p']} lr={sched['lr']} threads={args.threads}")
    print(
        f"autograd : {t_naive * 1e3:.1f} ms/step  (5,000 steps ≈ {t_naive * 5000:.0f} s)  eps after {args.steps} steps {naive:.6f}"
    )
    print(
        f"ours     : {t_ours * 1e3:.1f} ms/step  (5,000 steps ≈ {t_ours * 5000:.0f} s)  eps after {args.steps} steps {ours:.6f}"
    )
    print(f"speed-up {t_naive / t_ours:.1f}x, |Δε| = {abs(naive - ours):.2e}")
    if args.full:
        data = Path(__file__).parents[1] / "tl_geometry" / "data" / "capacity" / "optimized_packing.json"
        paper = {(k, d): e for k, d, e in json.loads(data.read_text())}.get((args.k, args.d), math.nan)
        t = time.perf_counter()
        eps = packing.optimized_packing(args.k, args.d, seed=0, device="cpu")
        print(
            f"full schedule: eps = {eps:.4f} in {time.perf_counter() - t:.0f} s; paper {paper:.4f} "
            f"({100 * (eps - paper) / paper:+.1f}%)"
        )


if __name__ == "__main__":
    main()
