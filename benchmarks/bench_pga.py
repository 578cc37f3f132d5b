"""Benchmark: pga_score, z alone and with its standard error, against the scipy loop and the sort floor.

    python -m benchmarks.bench_pga [--n 512 2048] [--d 576] [--k 100] [--n-null 100] [--threads 1]
        [--repeats 3] [--jackknife] [--small]

One layer per N: N points, d, k, n_null Haar-random null subspaces, CCR-1 (defaults N = 512 and
2,048, d = 576, k = 100, n_null = 100, as in issue 34; ``--small``: N = 256, d = 64, k = 16, 10 nulls).

* ours, z alone: ``tg.pga_score(H, V, null_bases=..., ccr=1, stderr="none")``;
* ours, with stderr: the default ``stderr="influence"`` (first-order point-sample error, no re-sort);
  ``--jackknife`` also times the literal refit (``stderr="jackknife"``, the check);
* reference: the scipy loop (``_util.scipy_pga_loop``: ``pdist`` cosine of the CCR-1 points, then
  ``spearmanr`` against the ``pdist`` of each projection). It is the best *simple* reference: the
  whole computation in two library calls per subspace, each a compiled kernel (scipy's C pdist and
  its rank correlation); anything faster is a custom algorithm. It is timed on ``--ref-nulls``
  subspaces (default 10) and extrapolated linearly to n_null (each subspace costs the same); z and
  ρ are compared on those same subspaces by scoring them with pga_score too;
* floor: one ``torch.sort`` of the N(N−1)/2 float64 distance vector per subspace (a rank correlation
  of m pairs cannot beat sorting them), × (n_null + 1).

Goals (issue 34): with stderr ≤ 1.5 × z alone; at N = 2,048 with stderr ≥ 5 × faster than the scipy
loop; at N = 256–512 no slower than it.

Method (``benchmarks/_util.py``): environment and load average printed, a warm-up call of each, then
``--repeats`` (≥ 3) alternating rounds, best and median; the ratios are in wall and CPU time.
"""

from __future__ import annotations

import numpy as np
import torch

from benchmarks import _util


def one_size(tg, n: int, args) -> None:
    g = torch.Generator().manual_seed(0)
    # anisotropic cloud with some readout structure, like a residual stream
    H = torch.randn(n, args.d, generator=g) * torch.linspace(0.2, 3.0, args.d)
    V = tg.readout_basis(torch.randn(args.d, 4 * args.d, generator=g), args.k)
    bases = tg.haar_bases(args.d, args.k, args.n_null, seed=1)

    # the reference on the same CCR-1 H
    Hc = H.double() - H.double().mean(0)
    _, _, Vh = torch.linalg.svd(Hc, full_matrices=False)
    X = (Hc - (Hc @ Vh[:1].T) @ Vh[:1]).numpy()
    nr = min(args.ref_nulls, args.n_null)
    Vn, Bn = V.double().numpy(), [b.numpy() for b in bases[:nr]]

    cases = {
        "z": lambda: tg.pga_score(H, V, null_bases=bases, ccr=1, stderr="none"),
        "influence": lambda: tg.pga_score(H, V, null_bases=bases, ccr=1),
        "scipy": lambda: _util.scipy_pga_loop(X, Vn, Bn, nr),
    }
    if args.jackknife:
        cases["jackknife"] = lambda: tg.pga_score(H, V, null_bases=bases, ccr=1, stderr="jackknife")
    t = _util.bench(cases, repeats=args.repeats)
    m = n * (n - 1) // 2
    floor = _util.sort_floor(m, repeats=args.repeats)
    s, s0 = t["influence"].value, t["z"].value
    rho_ref, null_ref = t["scipy"].value

    sub = tg.pga_score(H, V, null_bases=bases[:nr], ccr=1, stderr="none")
    z_ref = (rho_ref - null_ref.mean()) / null_ref.std(ddof=1)
    dz = abs(sub.z - z_ref)
    drho = max(abs(sub.rho_read - rho_ref), float(np.abs(sub.null_rhos.double().numpy() - null_ref).max()))

    print(f"\nN={n} d={args.d} k={args.k} n_null={args.n_null} pairs={m:,} threads={args.threads} CCR-1")
    rows = [
        (f"pga_score, z alone (stderr='none', {args.n_null} nulls)", t["z"], f"z = {s0.z:.4f}"),
        ("pga_score, with stderr (influence, the default)", t["influence"], f"z = {s.z:.4f} ± {s.stderr:.3f}"),
    ]
    if args.jackknife:
        j = t["jackknife"].value
        rows.append(("pga_score, with stderr (jackknife refit)", t["jackknife"], f"± {j.stderr:.3f}"))
    rows += [
        (f"scipy loop ({nr} nulls + readout, not extrapolated)", t["scipy"]),
        (f"floor: one torch.sort of {m:,} float64", floor, f"× {args.n_null + 1} subspaces in the ratio"),
    ]
    _util.print_table(rows)
    assert s.z == s0.z  # the error bar does not move z
    print("-- with stderr (influence) against z alone, the scipy loop and the floor:")
    _util.print_ratios(t["influence"], t["z"], reference_name="z alone")
    _util.print_ratios(
        t["influence"],
        t["scipy"],
        floor,
        reference_name=f"scipy loop extrapolated to {args.n_null} nulls",
        scale_reference=(args.n_null + 1) / (nr + 1),
        floor_name="one sort per subspace",
        scale_floor=args.n_null + 1,
    )
    print("-- z alone against the scipy loop and the floor:")
    _util.print_ratios(
        t["z"],
        t["scipy"],
        floor,
        reference_name=f"scipy loop extrapolated to {args.n_null} nulls",
        scale_reference=(args.n_null + 1) / (nr + 1),
        floor_name="one sort per subspace",
        scale_floor=args.n_null + 1,
    )
    if args.jackknife:
        print("-- the jackknife refit against z alone:")
        _util.print_ratios(t["jackknife"], t["z"], reference_name="z alone")
    print(f"max |dz| = {dz:.2e}, max |drho| = {drho:.2e}  (on the {nr} shared nulls)")


def main(argv=None) -> None:
    ap = _util.make_parser(__doc__)
    ap.add_argument("--n", type=int, nargs="+", default=[512, 2048])
    ap.add_argument("--d", type=int, default=576)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--n-null", type=int, default=100)
    ap.add_argument("--ref-nulls", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--jackknife", action="store_true", help="also time stderr='jackknife' (the literal refit)")
    args = _util.parse_args(ap, argv)
    if args.small:
        args.n, args.d, args.k, args.n_null, args.ref_nulls = [256], 64, 16, 10, 3
    torch.set_num_threads(args.threads)
    _util.print_environment("pga_score: z alone and with stderr, against the scipy loop (pdist + spearmanr)")

    import tl_geometry as tg

    for n in args.n:
        one_size(tg, n, args)
    _util.print_footer()


if __name__ == "__main__":
    main()
