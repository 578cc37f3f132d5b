"""Benchmark tl_geometry.families.sae against the naive ways.

    python -m benchmarks.bench_sae [--n 8192] [--d 576] [--repeats 3] [--no-widths] [--small]

1. Decoder-pair exceedance (fraction of |cos| > ε_host) of an (n, d) decoder:
   ours ``cosine_exceedance`` (blockwise, extra memory block²); reference the full n × n cosine
   matrix (``U @ U.T``, compare, count: the best *simple* way, one GEMM, extra memory n²); floor the
   float32 GEMM ``U @ U.T`` alone (every pair's dot product, no comparison). Same count.
2. Decoder ε: ours ``similarity_stats`` (Gram moments, O(n·d²)); reference the naive full matrix in
   float64 (O(n²·d)); floor the float32 GEMM UᵀU (``_util.gemm_floor``), the d × d Gram the moments
   come from.
3. Widths of the whole sae_lens directory: parse time (sae_lens import and YAML load reported
   separately; no reference: informational). ``--no-widths`` skips it.

Single thread; warm-up, ``--repeats`` (≥ 3) rounds in rotating order, best and median.
``--small``: n=2048, d=128, no widths.
"""

from __future__ import annotations

import time

import torch

from benchmarks import _util


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


def main(argv=None):
    ap = _util.make_parser(__doc__)
    ap.add_argument("--n", type=int, default=8192, help="d_sae")
    ap.add_argument("--d", type=int, default=576, help="d_in")
    ap.add_argument("--threshold", type=float, default=0.1)
    ap.add_argument("--no-widths", action="store_true")
    args = _util.parse_args(ap, argv)
    if args.small:
        args.n, args.d, args.no_widths = 2048, 128, True
    torch.set_num_threads(1)
    from tl_geometry.families import sae as S
    from tl_geometry.metrics.capacity import similarity_stats

    _util.print_environment("SAE decoders: blockwise exceedance and Gram-moment ε against the full matrix")
    W = torch.randn(args.n, args.d, generator=torch.Generator().manual_seed(0))
    U = W / W.norm(dim=1, keepdim=True)
    n, d, thr = args.n, args.d, args.threshold
    t = _util.bench(
        {
            "ours": lambda: S.cosine_exceedance(W, thr, block_size=2048),
            "reference": lambda: naive_exceedance(W, thr),
            "floor": lambda: (U @ U.T, None)[1],
        },
        repeats=args.repeats,
    )
    ours, ref = t["ours"].value, t["reference"].value
    assert ours == ref, (ours, ref)
    print(f"\n1. exceedance n={n} d={d} threshold {thr}: same count {ours[0]}")
    _util.print_table(
        [
            ("ours: cosine_exceedance (blockwise)", t["ours"], f"extra memory {min(n, 2048) ** 2 * 4 / 2**20:.0f} MiB"),
            ("reference: full n × n cosine matrix", t["reference"], f"extra memory {n * n * 5 / 2**20:.0f} MiB"),
            ("floor: float32 U @ U.T", t["floor"]),
        ]
    )
    _util.print_ratios(t["ours"], t["reference"], t["floor"], reference_name="full matrix", floor_name="GEMM")

    e = _util.bench(
        {"ours": lambda: similarity_stats(W, progress=False).epsilon, "reference": lambda: naive_eps(W)},
        repeats=args.repeats,
    )
    gemm = min(_util.gemm_floor(n, d, repeats=args.repeats).values(), key=lambda v: v.best)
    print(f"\n2. decoder ε n={n} d={d}: |Δε| = {abs(e['ours'].value - e['reference'].value):.2e}")
    _util.print_table(
        [
            ("ours: similarity_stats (Gram moments)", e["ours"]),
            ("reference: full n × n matrix, float64", e["reference"]),
            (f"floor: {gemm.name}", gemm),
        ]
    )
    _util.print_ratios(e["ours"], e["reference"], gemm, reference_name="full matrix", floor_name="GEMM UᵀU")
    if not args.no_widths:
        t0 = time.perf_counter()
        import sae_lens  # noqa: F401

        t1 = time.perf_counter()
        S._directory()
        t2 = time.perf_counter()
        w = _util.bench({"widths": lambda: S.widths(config="none")}, repeats=args.repeats)["widths"]
        print(f"\n3. widths: {len(w.value)} SAEs (sae_lens import {t1 - t0:.1f} s, directory YAML {t2 - t1:.1f} s)")
        _util.print_table([("S.widths(config='none')", w)])
    _util.print_footer()


if __name__ == "__main__":
    main()
