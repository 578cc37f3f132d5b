"""Benchmark: the report's PGA step on the offline SmolLM2-135M — time and z per option set.

    python -m benchmarks.bench_pga_smollm2 [--layers 0 6 12 18 24 29] [--configs 50:1024 30:1024]
        [--ccr 0 1 5] [--ref-nulls 3] [--repeats 3] [--json out.json] [--compare base.json] [--small]

Loads SmolLM2-135M as the report does (``_util.load_smollm2``), takes the report's tokens (pydoc,
8 × 128, seed 0) and times the registered ``pga`` metric (the report's code path: one shared
seeded sample of points, the same null bases at every hook) at ``blocks.L.hook_resid_post`` for
the chosen layers, once per option set ``n_null:max_points`` (CCR levels from ``--ccr``):

* ours: ``pga(model, tokens, hooks=..., ccr=..., n_null=..., max_points=...)``, per option set;
* reference (first option set): the capture below plus the scipy loop
  (``_util.scipy_pga_loop``: pdist + spearmanr per subspace, the best *simple* PGA, see
  bench_pga) on the first hook's points, timed on ``--ref-nulls`` nulls and extrapolated linearly
  to n_null × CCR levels × hooks;
* floor: the capture alone (``tg.capture.collect`` of max_points positions at the hooks: the
  forward pass and sampling every PGA needs before any scoring).

Warm-up, ``--repeats`` (≥ 3) rounds in rotating order, best and median; per-hook and 30-layer
extrapolations, and z per hook and CCR level. ``--json`` writes everything, so that the same script
run on another checkout's library (``--lib /path/to/other/checkout``: put first on ``sys.path``;
``PYTHONPATH`` would not do, ``python -m`` puts the current directory first) can be compared with ``--compare OTHER.json`` (max |Δz|, |Δρ| per
option set present in both). ``--small``: layers 0 and 29, one option set 10:256, CCR 1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks import _util


def main(argv=None) -> int:
    ap = _util.make_parser(__doc__)
    ap.add_argument("--layers", type=int, nargs="+", default=[0, 6, 12, 18, 24, 29])
    ap.add_argument("--configs", nargs="+", default=["50:1024"], help="n_null:max_points option sets")
    ap.add_argument("--ccr", type=int, nargs="+", default=[0, 1, 5])
    ap.add_argument("--ref-nulls", type=int, default=3, help="nulls timed for the scipy reference")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--lib", default=None, help="import tl_geometry from this checkout instead")
    ap.add_argument("--compare", type=Path, default=None, help="a --json file of another run (e.g. the main branch)")
    args = _util.parse_args(ap, argv)
    if args.small:
        args.layers, args.configs, args.ccr, args.ref_nulls = [0, 29], ["10:256"], [1], 2
    if args.lib:
        sys.path.insert(0, args.lib)

    import torch

    import tl_geometry as tg

    try:
        from tl_geometry.families.pga import pga
    except ImportError:  # an older checkout
        from tl_geometry.metrics.pga import pga

    _util.print_environment(f"the report's PGA step on SmolLM2-135M (tl_geometry from {Path(tg.__file__).parent})")
    model = _util.load_smollm2()
    tokens = _util.pydoc_tokens(model)
    hooks = [f"blocks.{l}.hook_resid_post" for l in args.layers]
    sets = {cfg: tuple(int(v) for v in cfg.split(":")) for cfg in args.configs}
    n_null0, max_points0 = sets[args.configs[0]]

    cap = tg.capture.collect(model, tokens, hooks[:1], max_points=max_points0, seed=0, progress=False)
    X = cap.acts[hooks[0]].double().numpy()
    V = tg.readout_basis(tg.capture.weight(model, "W_U"), 100).double().numpy()
    nr = min(args.ref_nulls, n_null0)
    bases = [b.numpy() for b in tg.haar_bases(V.shape[0], 100, nr, seed=1)]

    def run(n_null, max_points):
        return lambda: pga(
            model, tokens, hooks=hooks, ccr=args.ccr, n_null=n_null, max_points=max_points, progress=False
        )

    cases = {cfg: run(*nm) for cfg, nm in sets.items()}
    cases["capture"] = lambda: tg.capture.collect(model, tokens, hooks, max_points=max_points0, seed=0, progress=False)
    cases["scipy"] = lambda: _util.scipy_pga_loop(X, V, bases, nr)
    t = _util.bench(cases, repeats=args.repeats)
    scale = (n_null0 + 1) / (nr + 1) * len(args.ccr) * len(hooks)
    cap_t, sc = t["capture"], t["scipy"]
    reference = _util.Timing(
        "reference",
        [a + b * scale for a, b in zip(cap_t.times, sc.times)],
        [a + b * scale for a, b in zip(cap_t.cpu, sc.cpu)],
    )
    print(f"torch threads {torch.get_num_threads()}; hooks {hooks}; CCR {args.ccr}")
    rows = []
    out = {"lib": str(Path(tg.__file__).parent), "hooks": hooks, "ccr": args.ccr, "configs": {}}
    for cfg in args.configs:
        r = t[cfg]
        vals = [x for x in r.value.to_dict()["rows"] if x["metric"] in ("pga.z", "pga.rho_read")]
        z = {f"{x['hook']}|{x['extras']['ccr']}|{x['metric']}": x["value"] for x in vals}
        out["configs"][cfg] = {"wall": r.best, "median": r.median, "cpu": r.cpu_best, "values": z}
        per = len(hooks)
        rows.append((f"ours: pga {cfg} (n_null:max_points)", r, f"x30 layers: {30 * r.best / per:.0f} s wall"))
    rows.append((f"reference: capture + scipy loop × {scale:.4g} (extrapolated)", reference))
    rows.append((f"floor: capture of {max_points0} points at {len(hooks)} hooks", cap_t))
    _util.print_table(rows)
    _util.print_ratios(
        t[args.configs[0]], reference, cap_t, reference_name="capture + scipy loop", floor_name="capture"
    )
    for cfg in args.configs:
        z = out["configs"][cfg]["values"]
        print(f"{cfg}:")
        for h in hooks:
            print("   " + h.ljust(26) + " ".join(f"z(ccr{c})={z[f'{h}|{c}|pga.z']:8.3f}" for c in args.ccr))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    if args.compare:
        other = json.loads(args.compare.read_text())
        for cfg, mine in out["configs"].items():
            if cfg not in other["configs"]:
                continue
            theirs = other["configs"][cfg]
            keys = sorted(set(mine["values"]) & set(theirs["values"]))
            dz = max(abs(mine["values"][k] - theirs["values"][k]) for k in keys if k.endswith("pga.z"))
            dr = max(abs(mine["values"][k] - theirs["values"][k]) for k in keys if k.endswith("rho_read"))
            print(
                f"{cfg}: vs {other['lib']}: wall {mine['wall']:.1f} / {theirs['wall']:.1f} s "
                f"(x{mine['wall'] / theirs['wall']:.2f}), cpu {mine['cpu']:.1f} / {theirs['cpu']:.1f} s "
                f"(x{mine['cpu'] / theirs['cpu']:.2f}); max |dz| {dz:.1e}, max |drho| {dr:.1e} over {len(keys)} values"
            )
    base = out["configs"][args.configs[0]]
    for cfg, mine in out["configs"].items():
        if cfg == args.configs[0]:
            continue
        ks = [k for k in mine["values"] if k.endswith("pga.z")]
        d = [abs(mine["values"][k] - base["values"][k]) for k in ks]
        print(f"{cfg} vs {args.configs[0]} (this run): |dz| max {max(d):.2f}, mean {sum(d) / len(d):.2f}")
    _util.print_footer()
    return 0


if __name__ == "__main__":
    sys.exit(main())
