"""Benchmark: pga_score, z alone and with its standard error, against the scipy loop and the sort floor.

    python -m benchmarks.bench_pga [--n 512 2048] [--d 576] [--k 100] [--n-null 100] [--threads 1]
        [--ccr 1] [--busy] [--repeats 3] [--jackknife] [--small]
    python -m benchmarks.bench_pga --n 1024 --n-null 30 --ccr 0 1 5 --threads 0   # one report hook

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

``--ccr 0 1 5`` scores several CCR levels in one call (``pga_profile``: one centering and SVD, as a
report hook; the scipy loop then runs once per level, the floor counts every level's subspaces);
``--threads 0`` leaves torch's default threads (the pool of two on 2 cores, as a report);
``--busy`` runs the rounds beside one CPU-bound process (``_util.competitor``).

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

    # the reference on the same H after CCR-c, per level
    ccrs = list(args.ccr)
    Hc = H.double() - H.double().mean(0)
    _, _, Vh = torch.linalg.svd(Hc, full_matrices=False)
    Xs = [(Hc - (Hc @ Vh[:c].T) @ Vh[:c]).numpy() for c in ccrs]
    nr = min(args.ref_nulls, args.n_null)
    Vn, Bn = V.double().numpy(), [b.numpy() for b in bases[:nr]]

    def ours(**kw):  # the first level's score (one level: pga_score, as before; several: pga_profile)
        if len(ccrs) == 1:
            return tg.pga_score(H, V, null_bases=bases, ccr=ccrs[0], **kw)
        return tg.pga_profile(H, V, null_bases=bases, ccrs=ccrs, **kw)[ccrs[0]]

    cases = {
        "z": lambda: ours(stderr="none"),
        "influence": lambda: ours(),
        "scipy": lambda: [_util.scipy_pga_loop(X, Vn, Bn, nr) for X in Xs][0],
    }
    if args.jackknife:
        cases["jackknife"] = lambda: ours(stderr="jackknife")
    with _util.competitor(args.busy):
        t = _util.bench(cases, repeats=args.repeats)
    m = n * (n - 1) // 2
    floor = _util.sort_floor(m, repeats=args.repeats)
    s, s0 = t["influence"].value, t["z"].value
    rho_ref, null_ref = t["scipy"].value

    sub = tg.pga_score(H, V, null_bases=bases[:nr], ccr=ccrs[0], stderr="none")
    z_ref = (rho_ref - null_ref.mean()) / null_ref.std(ddof=1)
    dz = abs(sub.z - z_ref)
    drho = max(abs(sub.rho_read - rho_ref), float(np.abs(sub.null_rhos.double().numpy() - null_ref).max()))

    levels = len(ccrs)
    fn = "pga_score" if levels == 1 else f"pga_profile ({levels} levels; z of CCR-{ccrs[0]} shown)"
    print(
        f"\nN={n} d={args.d} k={args.k} n_null={args.n_null} pairs={m:,} "
        f"threads={args.threads or 'torch default'} CCR {' '.join(map(str, ccrs))} busy={args.busy}"
    )
    rows = [
        (f"{fn}, z alone (stderr='none', {args.n_null} nulls)", t["z"], f"z = {s0.z:.4f}"),
        (f"{fn}, with stderr (influence, the default)", t["influence"], f"z = {s.z:.4f} ± {s.stderr:.3f}"),
    ]
    if args.jackknife:
        j = t["jackknife"].value
        rows.append((f"{fn}, with stderr (jackknife refit)", t["jackknife"], f"± {j.stderr:.3f}"))
    rows += [
        (f"scipy loop ({nr} nulls + readout × {levels} level(s), not extrapolated)", t["scipy"]),
        (f"floor: one torch.sort of {m:,} float64", floor, f"× {levels * (args.n_null + 1)} subspaces in the ratio"),
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
        scale_floor=levels * (args.n_null + 1),
    )
    print("-- z alone against the scipy loop and the floor:")
    _util.print_ratios(
        t["z"],
        t["scipy"],
        floor,
        reference_name=f"scipy loop extrapolated to {args.n_null} nulls",
        scale_reference=(args.n_null + 1) / (nr + 1),
        floor_name="one sort per subspace",
        scale_floor=levels * (args.n_null + 1),
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
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default, as a report)")
    ap.add_argument("--ccr", type=int, nargs="+", default=[1], help="CCR levels in one call (report: 0 1 5)")
    ap.add_argument("--busy", action="store_true", help="beside one CPU-bound process")
    ap.add_argument("--jackknife", action="store_true", help="also time stderr='jackknife' (the literal refit)")
    args = _util.parse_args(ap, argv)
    if args.small:
        args.n, args.d, args.k, args.n_null, args.ref_nulls = [256], 64, 16, 10, 3
    if args.threads:
        torch.set_num_threads(args.threads)
    _util.print_environment("pga_score: z alone and with stderr, against the scipy loop (pdist + spearmanr)")

    import tl_geometry as tg

    for n in args.n:
        one_size(tg, n, args)
    _util.print_footer()


if __name__ == "__main__":
    main()
