"""Benchmark: pga_score vs the naive scipy loop (pdist + spearmanr per subspace), and vs the floor.

One layer: N points, d, k, n_null Haar-random null subspaces (defaults N=2048, d=576, k=100,
n_null=100, as in the issue). Prints both CPU times (time.process_time, robust to other processes on a shared machine), the speed-up, the largest |Δz| and |Δρ|, and the
time per null subspace relative to one ``torch.sort`` of the N(N−1)/2 distance vector (float64,
the dtype pga_score sorts).

The scipy reference is timed on ``--ref-nulls`` subspaces (default 10) and extrapolated linearly to
n_null (each subspace costs the same); z is compared on those same subspaces by scoring them with
pga_score too.

Method (benchmarks/_util.py): environment and load average printed, a warm-up call of each, then
``--repeats`` (≥ 3) alternating rounds, best and median.

Usage: python benchmarks/bench_pga.py [--n 2048] [--d 576] [--k 100] [--n-null 100] [--threads 1] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _util  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--d", type=int, default=576)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--n-null", type=int, default=100)
    ap.add_argument("--ref-nulls", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.repeats < 3:
        ap.error("--repeats must be >= 3")
    torch.set_num_threads(args.threads)
    _util.print_environment("pga_score against the scipy loop (pdist + spearmanr per subspace)")

    from scipy.spatial.distance import pdist
    from scipy.stats import spearmanr

    import tl_geometry as tg

    g = torch.Generator().manual_seed(0)
    # anisotropic cloud with some readout structure, like a residual stream
    H = torch.randn(args.n, args.d, generator=g) * torch.linspace(0.2, 3.0, args.d)
    V = tg.readout_basis(torch.randn(args.d, 4 * args.d, generator=g), args.k)
    bases = tg.haar_bases(args.d, args.k, args.n_null, seed=1)

    # naive reference: scipy pdist + spearmanr per subspace, on the same CCR-1 H
    Hc = H.double() - H.double().mean(0)
    _, _, Vh = torch.linalg.svd(Hc, full_matrices=False)
    X = (Hc - (Hc @ Vh[:1].T) @ Vh[:1]).numpy()
    nr = min(args.ref_nulls, args.n_null)

    def reference():
        d_full = pdist(X, "cosine")
        rho = spearmanr(d_full, pdist(X @ V.double().numpy(), "cosine"))[0]
        return rho, np.array([spearmanr(d_full, pdist(X @ bases[i].numpy(), "cosine"))[0] for i in range(nr)])

    # warm-up, then alternating rounds; CPU time (robust to other processes on a shared machine)
    t = _util.bench(
        {"ours": lambda: tg.pga_score(H, V, null_bases=bases, ccr=1), "scipy": reference}, repeats=args.repeats
    )
    s = t["ours"].value
    rho_ref, null_ref = t["scipy"].value
    t_ours = t["ours"].cpu_best
    t_ref_part = t["scipy"].cpu_best
    t_ref = t_ref_part / (nr + 1) * (args.n_null + 1)  # + the d_full pdist, counted once per subspace

    sub = tg.pga_score(H, V, null_bases=bases[:nr], ccr=1)
    z_ref = (rho_ref - null_ref.mean()) / null_ref.std(ddof=1)
    dz = abs(sub.z - z_ref)
    drho = max(abs(sub.rho_read - rho_ref), float(np.abs(sub.null_rhos.double().numpy() - null_ref).max()))

    # floor: one sort of the distance vector
    m = args.n * (args.n - 1) // 2
    x = torch.rand(m, dtype=torch.float64, generator=g)
    torch.sort(x)
    t_sort = min(_timeit(lambda: torch.sort(x)) for _ in range(3))
    per_null = t_ours / (args.n_null + 1)

    print(f"N={args.n} d={args.d} k={args.k} n_null={args.n_null} pairs={m:,} threads={args.threads}")
    print(_util.TABLE_HEAD)
    print(_util.fmt_row(f"pga_score (ours, {args.n_null} nulls)", t["ours"]))
    print(_util.fmt_row(f"scipy loop ({nr} nulls + readout, not extrapolated)", t["scipy"]))
    print("(below: best CPU seconds; the scipy loop extrapolated linearly to n_null)")
    print(f"pga_score (ours):          {t_ours:8.2f} s   z={s.z:.4f}")
    print(f"scipy loop (extrapolated): {t_ref:8.2f} s   ({t_ref_part:.2f} s for {nr} nulls + readout)")
    print(f"speed-up vs scipy:         {t_ref / t_ours:8.1f} x")
    print(f"max |dz| = {dz:.2e}, max |drho| = {drho:.2e}  (on the {nr} shared nulls)")
    print(
        f"one torch.sort of {m:,} float64: {t_sort * 1e3:.1f} ms; ours per subspace: {per_null * 1e3:.1f} ms;"
        f" ratio {per_null / t_sort:.2f}"
    )
    _util.print_footer()


def _timeit(f) -> float:
    t0 = time.process_time()
    f()
    return time.process_time() - t0


if __name__ == "__main__":
    main()
