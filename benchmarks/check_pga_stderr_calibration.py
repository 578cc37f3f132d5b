"""Check: is the standard error of PGA z calibrated, before (jackknife refit) and after (influence)? Tiny model, many seeds.

    python -m benchmarks.check_pga_stderr_calibration [--seeds 80] [--n-points 120] [--n-null 40]
        [--ccr 0 1] [--stderr jackknife influence] [--json out.json] [--small]

Activations of a tiny random model (``_util.tiny_model``, the tests' shape) at
``blocks.1.hook_resid_post`` over a pool of 150 × 31 positions; each seed draws its own N positions
from the pool and its own null subspaces (``seed``), as a report's seed does, and scores them with
``pga_profile`` under each ``stderr`` method (refit_nulls 4, the default; the same z for all). Over
the seeds it prints, per CCR level and method:

* sd of t with t_i = (z_i − mean z)/stderr_i (≈ 1 when calibrated) and coverage, the fraction of
  |t_i| < 1.96 (≈ 0.95);
* sd of the pairwise t = (z_a − z_b)/√(se_a² + se_b²) over disjoint pairs of seeds (as the unit test)
  and its coverage;
* the mean stderr and the seconds per call.

With 80 seeds the sd of 80 normal draws lies in [0.85, 1.15] with probability ≈ 0.95, a coverage
in [0.90, 1.00]. A check, not a timing benchmark (the seconds are for orientation).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from benchmarks import _util


def main(argv=None) -> int:
    ap = _util.make_parser(__doc__, repeats=False)
    ap.add_argument("--seeds", type=int, default=80)
    ap.add_argument("--n-points", type=int, default=120)
    ap.add_argument("--n-null", type=int, default=40)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--ccr", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--stderr", nargs="+", default=["jackknife", "influence"], choices=["jackknife", "influence"])
    ap.add_argument("--json", type=Path, default=None)
    args = _util.parse_args(ap, argv)
    if args.small:
        args.seeds, args.n_null = 10, 10

    import numpy as np
    import torch

    import tl_geometry as tg

    _util.print_environment("PGA stderr calibration over seeds (tiny random model)")
    model = _util.tiny_model()
    tokens = torch.randint(0, model.cfg.d_vocab, (150, 32), generator=torch.Generator().manual_seed(11))
    hook = "blocks.1.hook_resid_post"
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=[hook])
    pool = cache[hook][:, 1:].reshape(-1, model.cfg.d_model).double()
    V = tg.readout_basis(tg.capture.weight(model, "W_U"), args.k)
    out: dict[tuple[int, str], list[tuple[float, float]]] = {}
    secs: dict[str, float] = {}
    for seed in range(args.seeds):
        idx = torch.randperm(pool.shape[0], generator=torch.Generator().manual_seed(seed))[: args.n_points]
        for how in args.stderr:
            t0 = time.perf_counter()
            prof = tg.pga_profile(pool[idx], V, ccrs=args.ccr, n_null=args.n_null, seed=seed, stderr=how)
            secs[how] = secs.get(how, 0.0) + time.perf_counter() - t0
            for c, s in prof.items():
                out.setdefault((c, how), []).append((s.z, s.stderr))
    rows = []
    print(
        f"\n{args.seeds} seeds, N = {args.n_points} of {pool.shape[0]} positions, n_null = {args.n_null}, k = {args.k}"
    )
    print("| CCR | stderr | sd of t | coverage | sd of pairwise t | pairwise coverage | mean stderr | s / call |")
    print("|---|---|---|---|---|---|---|---|")
    for (c, how), values in sorted(out.items()):
        zs, ses = (np.array(v) for v in zip(*values, strict=True))
        t = (zs - zs.mean()) / ses
        tp = (zs[0::2][: len(zs) // 2] - zs[1::2][: len(zs) // 2]) / np.hypot(
            ses[0::2][: len(zs) // 2], ses[1::2][: len(zs) // 2]
        )
        row = {
            "ccr": c,
            "stderr": how,
            "sd_t": float(t.std(ddof=1)),
            "coverage": float((np.abs(t) < 1.96).mean()),
            "sd_t_pairs": float(tp.std(ddof=1)),
            "coverage_pairs": float((np.abs(tp) < 1.96).mean()),
            "mean_stderr": float(ses.mean()),
            "sd_z": float(zs.std(ddof=1)),
            "seconds_per_call": secs[how] / args.seeds,
        }
        rows.append(row)
        print(
            f"| {c} | {how} | {row['sd_t']:.2f} | {row['coverage']:.2f} | {row['sd_t_pairs']:.2f} | "
            f"{row['coverage_pairs']:.2f} | {row['mean_stderr']:.3f} (sd of z {row['sd_z']:.3f}) | "
            f"{row['seconds_per_call']:.3f} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"settings": vars(args) | {"json": str(args.json)}, "rows": rows}, indent=1))
    _util.print_footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
