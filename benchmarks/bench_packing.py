"""Benchmark: optimized packing step, hand-written blocked gradient vs autograd (the paper's way).

    python -m benchmarks.bench_packing [--k 2000] [--d 32] [--steps 100] [--threads 1] [--repeats 3] [--full] [--small]

* ours: ``tl_geometry.families.capacity.packing.optimized_packing(k, d, steps=...)`` (hand-written gradient);
* reference: the paper's loop, autograd through normalize → Gram → Σ|G|^p with Adam
  (CPU float32): the best *simple* reference, what one writes in PyTorch in ten lines;
* floor: per step, the two float32 GEMMs every step needs (the k × k Gram U Uᵀ and the gradient
  G U), × steps.

Warm-up, ``--repeats`` (≥ 3) alternating rounds, best and median; both trajectories must give the
same ε. With ``--full``, also runs the paper's full schedule (5,000 steps) for (k, d) and compares
with the paper's cell in tl_geometry/data/capacity/optimized_packing.json. ``--small``: k=500, d=16,
20 steps.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import torch

import tl_geometry.families.capacity.packing as packing
from benchmarks import _util


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


def main(argv=None):
    ap = _util.make_parser(__doc__)
    ap.add_argument("--k", type=int, default=2000)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--full", action="store_true")
    args = _util.parse_args(ap, argv)
    if args.small:
        args.k, args.d, args.steps = 500, 16, 20
    torch.set_num_threads(args.threads)
    _util.print_environment("optimized packing: hand-written gradient against autograd")
    sched = packing.paper_schedule(args.k, args.d)
    U = torch.nn.functional.normalize(torch.randn(args.k, args.d, generator=torch.Generator().manual_seed(0)), dim=1)

    def floor():
        G = U @ U.T
        return G @ U

    t = _util.bench(
        {
            "ours": lambda: packing.optimized_packing(args.k, args.d, steps=args.steps, seed=0, device="cpu"),
            "autograd": lambda: autograd_packing(args.k, args.d, args.steps, 0, sched["lr"], sched["p"]),
            "floor": floor,
        },
        repeats=args.repeats,
    )
    ours, naive = t["ours"].value, t["autograd"].value
    print(f"k={args.k} d={args.d} p={sched['p']} lr={sched['lr']} threads={args.threads} steps={args.steps}")
    _util.print_table(
        [
            (
                f"ours, {args.steps} steps",
                t["ours"],
                f"ε {ours:.6f}; 5,000 steps ≈ {t['ours'].best / args.steps * 5000:.0f} s",
            ),
            (f"autograd + Adam, {args.steps} steps", t["autograd"], f"ε {naive:.6f}"),
            ("floor: U Uᵀ and G U, one step", t["floor"], f"× {args.steps} steps in the ratio"),
        ]
    )
    _util.print_ratios(t["ours"], t["autograd"], t["floor"], reference_name="autograd", scale_floor=args.steps)
    print(f"|Δε| = {abs(naive - ours):.2e}")
    if args.full:
        data = Path(packing.__file__).parent / "data" / "capacity" / "optimized_packing.json"
        paper = {(k, d): e for k, d, e in json.loads(data.read_text())}.get((args.k, args.d), math.nan)
        t0 = time.perf_counter()
        eps = packing.optimized_packing(args.k, args.d, seed=0, device="cpu")
        print(
            f"full schedule: eps = {eps:.4f} in {time.perf_counter() - t0:.0f} s; paper {paper:.4f} "
            f"({100 * (eps - paper) / paper:+.1f}%)"
        )
    _util.print_footer()


if __name__ == "__main__":
    main()
