"""Benchmark tl_geometry.families.sae against the naive ways.

1. Decoder-pair exceedance (fraction of |cos| > ε_host): blockwise ``cosine_exceedance`` vs the
   naive full n×n cosine matrix. Same count; peak extra memory block² vs n².
2. Decoder ε: ``similarity_stats`` (Gram moments, O(n·d²)) vs the naive full matrix (O(n²·d)).
3. Widths of the whole sae_lens directory: parse time (sae_lens import and YAML load reported
   separately).

Run: ``python benchmarks/bench_sae.py [--n 8192] [--d 576]`` (single thread).
"""

from __future__ import annotations

import argparse
import os
import time

import torch


def naive_exceedance(W, t):
    U = W / W.norm(dim=1, keepdim=True)
    C = (U @ U.T).abs()
    n = C.shape[0]
    return int(torch.triu(C > t, diagonal=1).sum()), n * (n - 1) // 2


def naive_eps(W):
    U = (W / W.norm(dim=1, keepdim=True)).double()
    C = U @ U.T
    off = C[~torch.eye(C.shape[0], dtype=torch.bool)]
    return float(off.mean() + 2 * off.std(unbiased=False))


def best_of(fn, reps=3):
    best, out = float("inf"), None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8192, help="d_sae")
    ap.add_argument("--d", type=int, default=576, help="d_in")
    ap.add_argument("--threshold", type=float, default=0.1)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(1)
    from tl_geometry.families import sae as S
    from tl_geometry.metrics.capacity import similarity_stats

    W = torch.randn(args.n, args.d, generator=torch.Generator().manual_seed(0))
    n, d, t = args.n, args.d, args.threshold
    tb, ours = best_of(lambda: S.cosine_exceedance(W, t, block_size=2048))
    tn, ref = best_of(lambda: naive_exceedance(W, t))
    assert ours == ref, (ours, ref)
    print(
        f"exceedance n={n} d={d}: blockwise {tb:.3f}s, naive full matrix {tn:.3f}s, "
        f"time ratio naive/ours {tn / tb:.2f}; extra memory {min(n, 2048) ** 2 * 4 / 2**20:.0f} MiB vs "
        f"{n * n * 5 / 2**20:.0f} MiB (ratio {n * n * 5 / (min(n, 2048) ** 2 * 4):.1f}); same count {ours[0]}"
    )
    te, st = best_of(lambda: similarity_stats(W, progress=False))
    tne, eps = best_of(lambda: naive_eps(W), reps=1)
    print(
        f"decoder ε n={n} d={d}: Gram moments {te:.3f}s, naive full matrix {tne:.3f}s, "
        f"ratio naive/ours {tne / te:.1f}; |Δε| = {abs(st.epsilon - eps):.2e}"
    )
    t0 = time.perf_counter()
    import sae_lens  # noqa: F401

    t1 = time.perf_counter()
    S._directory()
    t2 = time.perf_counter()
    rows = S.widths(config="none")
    t3 = time.perf_counter()
    print(
        f"widths: {len(rows)} SAEs parsed in {t3 - t2:.2f}s (sae_lens import {t1 - t0:.1f}s, directory YAML {t2 - t1:.1f}s)"
    )


if __name__ == "__main__":
    main()
