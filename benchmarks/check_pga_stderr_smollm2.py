"""Check: is the standard error of PGA z calibrated on SmolLM2-135M? z ± stderr per layer for two seeds.

A seed here draws everything a user's rerun would: the text sample (``tg.corpus.tokens(seed=)``:
other pydoc windows), the sample of positions and the null subspaces. For each hook and CCR level
it prints z ± stderr for each seed, |Δz| and the standardized difference
t = (z₁ − z₂)/√(se₁² + se₂²), then the standard deviation of t over all hooks (≈ 1 when the
stderr is calibrated; hooks are correlated, so read it as a check, not a test) and the largest |t|.

Usage:
    python -m benchmarks.check_pga_stderr_smollm2 [--seeds 0 1] [--n-null 50] [--max-points 1024]
        [--ccr 0 1 5] [--preset library|paper] [--json out.json] [--small]

Defaults are the report's PGA settings (library preset, 8 × 128 pydoc tokens, 50 nulls, 1,024
points, CCR 0/1/5, every ``blocks.L.hook_resid_post``). About 1 min per seed on 2 cores, plus the load.
A check, not a timing benchmark. ``--small``: 4 × 64 tokens, 5 nulls, 128 points, CCR 1, four layers.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from benchmarks import _util


def main(argv=None) -> int:
    ap = _util.make_parser(__doc__, repeats=False)
    ap.add_argument("--seeds", type=int, nargs=2, default=[0, 1])
    ap.add_argument("--n-null", type=int, default=50)
    ap.add_argument("--max-points", type=int, default=1024)
    ap.add_argument("--ccr", type=int, nargs="+", default=[0, 1, 5])
    ap.add_argument("--preset", choices=["library", "paper"], default="library")
    ap.add_argument("--json", type=Path, default=None)
    args = _util.parse_args(ap, argv)
    n_seqs, seq_len, hooks = 8, 128, None
    if args.small:
        args.n_null, args.max_points, args.ccr = 5, 128, [1]
        n_seqs, seq_len, hooks = 4, 64, [f"blocks.{l}.hook_resid_post" for l in (0, 10, 20, 29)]

    import numpy as np

    import tl_geometry as tg

    model = _util.load_smollm2(processing="none" if args.preset == "paper" else "tl")
    runs = []
    for seed in args.seeds:
        tokens = _util.pydoc_tokens(model, n_seqs, seq_len, seed=seed)
        t0 = time.perf_counter()
        r = tg.pga(
            model,
            tokens,
            preset=args.preset,
            hooks=hooks,
            n_null=args.n_null,
            max_points=args.max_points,
            ccr=args.ccr,
            seed=seed,
            progress=False,
        )
        print(f"seed {seed}: PGA {time.perf_counter() - t0:.1f} s", flush=True)
        runs.append({(row.hook, row.extras["ccr"]): row for row in r.filter("pga.z").rows})
    a, b = runs
    out = []
    for c in args.ccr:
        print(f"\nCCR-{c}: hook | z(seed {args.seeds[0]}) ± se | z(seed {args.seeds[1]}) ± se | |Δz| | t")
        ts = []
        for key in [k for k in a if k[1] == c]:
            x, y = a[key], b[key]
            se1, se2 = x.extras["stderr"], y.extras["stderr"]
            t = (x.value - y.value) / math.hypot(se1, se2)
            ts.append(t)
            out.append(
                {
                    "hook": key[0],
                    "ccr": c,
                    "z": [x.value, y.value],
                    "stderr": [se1, se2],
                    "t": t,
                    "stderr_null": [x.extras["stderr_null"], y.extras["stderr_null"]],
                    "stderr_points": [x.extras["stderr_points"], y.extras["stderr_points"]],
                }
            )
            print(
                f"{key[0]:28s} {x.value:8.2f} ± {se1:5.2f}  {y.value:8.2f} ± {se2:5.2f}  "
                f"{abs(x.value - y.value):6.2f}  {t:6.2f}"
            )
        ts_a = np.array(ts)
        print(f"CCR-{c}: sd of t = {ts_a.std():.2f}, max |t| = {np.abs(ts_a).max():.2f} over {len(ts)} hooks")
    if args.json:
        args.json.write_text(json.dumps({"settings": vars(args) | {"json": str(args.json)}, "rows": out}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
