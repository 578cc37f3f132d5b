"""Benchmark: the report's PGA step on the offline SmolLM2-135M — time and z per option set.

Loads SmolLM2-135M as the report does (``tg.models.load("smollm2-135m")``), takes the report's
tokens (pydoc, 8 × 128, seed 0) and runs the registered ``pga`` metric (the report's code path:
one shared seeded sample of points, the same null bases at every hook) at a subset of
``blocks.L.hook_resid_post`` hooks, once per option set ``n_null:max_points`` (CCR levels from
``--ccr``). Prints wall and CPU seconds per option set (and per hook), extrapolated to all 30
layers, and z per hook and CCR level; ``--json`` writes everything, so that the same script run
on another checkout (``PYTHONPATH=/path/to/other/checkout python benchmarks/bench_pga_smollm2.py ...``) can be
compared with ``--compare OTHER.json`` (max |Δz|, |Δρ| per option set present in both).

Usage:
    python benchmarks/bench_pga_smollm2.py [--layers 0 6 12 18 24 29] [--configs 50:1024 30:1024]
        [--ccr 0 1 5] [--json out.json] [--compare base.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:  # pragma: no cover - not Linux
        return "?"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[0, 6, 12, 18, 24, 29])
    ap.add_argument("--configs", nargs="+", default=["50:1024"], help="n_null:max_points option sets")
    ap.add_argument("--ccr", type=int, nargs="+", default=[0, 1, 5])
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--compare", type=Path, default=None, help="a --json file of another run (e.g. the main branch)")
    args = ap.parse_args(argv)

    import torch

    import tl_geometry as tg

    try:
        from tl_geometry.families.pga import pga
    except ImportError:  # an older checkout
        from tl_geometry.metrics.pga import pga

    print(
        f"tl_geometry from {Path(tg.__file__).parent}; torch threads {torch.get_num_threads()}; load {load()}",
        flush=True,
    )
    t0 = time.perf_counter()
    model = tg.models.load("smollm2-135m")
    tokens = tg.corpus.tokens(model, "pydoc", n_seqs=8, seq_len=128, seed=0)
    print(f"model + tokens {time.perf_counter() - t0:.1f} s", flush=True)
    hooks = [f"blocks.{l}.hook_resid_post" for l in args.layers]
    out = {"lib": str(Path(tg.__file__).parent), "hooks": hooks, "ccr": args.ccr, "configs": {}}
    for cfg in args.configs:
        n_null, max_points = (int(v) for v in cfg.split(":"))
        w, c, l0 = time.perf_counter(), time.process_time(), load()
        rep = pga(model, tokens, hooks=hooks, ccr=args.ccr, n_null=n_null, max_points=max_points, progress=False)
        wall, cpu = time.perf_counter() - w, time.process_time() - c
        rows = [r for r in rep.to_dict()["rows"] if r["metric"] in ("pga.z", "pga.rho_read")]
        z = {f"{r['hook']}|{r['extras']['ccr']}|{r['metric']}": r["value"] for r in rows}
        out["configs"][cfg] = {"wall": wall, "cpu": cpu, "load": f"{l0} -> {load()}", "values": z}
        per = len(hooks)
        print(
            f"n_null={n_null} max_points={max_points}: {wall:.1f} s wall {cpu:.1f} s cpu for {per} hooks "
            f"({wall / per:.2f} s/hook; x30 layers: {30 * wall / per:.0f} s wall, {30 * cpu / per:.0f} s cpu) "
            f"load {out['configs'][cfg]['load']}",
            flush=True,
        )
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
        base = out["configs"].get(args.configs[0])
        for cfg, mine in out["configs"].items():
            if cfg == args.configs[0]:
                continue
            ks = [k for k in mine["values"] if k.endswith("pga.z")]
            d = [abs(mine["values"][k] - base["values"][k]) for k in ks]
            print(f"{cfg} vs {args.configs[0]} (this run): |dz| max {max(d):.2f}, mean {sum(d) / len(d):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
