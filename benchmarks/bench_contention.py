"""Benchmark: does the library slow down gracefully when another process competes for the CPU?

    python -m benchmarks.bench_contention [--workloads pga tiny] [--modes new old] [--threads N] [--repeats 3] [--small]
    python -m benchmarks.bench_contention --workloads smollm2 --modes new

Runs each workload in a fresh subprocess per (mode, condition), first alone ("quiet") and then
while ONE competing CPU-bound process (``_util.competitor``: a Python busy loop) runs. Inside the
subprocess ``_util.bench`` times ours, the reference and the floor: a warm-up call each, then
``--repeats`` (≥ 3) rounds in rotating order, best and median. Printed per mode: wall and CPU
seconds quiet and contended, the slowdown (contended best / quiet best), and the ratios to the
reference and the floor. The goal (issue 13): a slowdown of at most 2× with one competing process.

Modes: ``new`` (per-kernel threads, the default), ``old`` (``TL_GEOMETRY_THREADS=inherit``: every
kernel with torch's default threads: the reference for the thread policy), ``base`` (the workers
run on another checkout, ``--baseline PATH``).

Workloads (ours / reference / floor):
  pga      ``pga_score`` on a random anisotropic (N, d) cloud (default N=1024, d=576, k=100, 20
           nulls, CCR 1) / the scipy loop (``_util.scipy_pga_loop``, pdist + spearmanr per subspace,
           the best simple reference, timed on ``--ref-nulls`` nulls and extrapolated) / one
           ``torch.sort`` of the N(N−1)/2 float64 distances per subspace
  tiny     the report's metrics (``tg.analyze`` with the report's ``--fast`` options, or its
           default options with ``--full-options``) on a tiny random HookedTransformer (4 layers,
           d_model 128, ``_util.tiny_model``), random tokens / none (the ``old`` mode is the
           reference) / one forward pass over the tokens
  smollm2  ``run_report("smollm2-135m", fast=True, figures=False)`` (needs the offline model; ~3 GB
           RAM; minutes per call) / none / one load + forward (``_util.load_smollm2``)

``--small``: pga only, N=256, d=64, k=16, 5 nulls, 2 reference nulls.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from benchmarks import _util


# ----------------------------------------------------------------------------- workers
def _work_pga(args) -> dict:
    import torch

    import tl_geometry as tg

    g = torch.Generator().manual_seed(0)
    H = torch.randn(args.n, args.d, generator=g) * torch.linspace(0.2, 3.0, args.d)
    V = tg.readout_basis(torch.randn(args.d, 4 * args.d, generator=g), args.k)
    bases = tg.haar_bases(args.d, args.k, args.n_null, seed=1)
    X, Vn = H.double().numpy(), V.double().numpy()
    nr = min(args.ref_nulls, args.n_null)
    Bn = [b.numpy() for b in bases[:nr]]
    m = args.n * (args.n - 1) // 2
    x = torch.rand(m, dtype=torch.float64, generator=g)
    # the load-aware choice tg.pga / the report pass (a checkout from before it: the metric chose itself)
    choose = getattr(tg.threads, "choose", None)
    cases = {
        "ours": lambda: tg.pga_score(H, V, null_bases=bases, ccr=1, **({"threads": choose()} if choose else {})).z,
        "reference": lambda: (_util.scipy_pga_loop(X, Vn, Bn, nr), None)[1],
        "floor": lambda: (torch.sort(x), None)[1],
    }
    t = _util.bench(cases, repeats=args.repeats)
    scale = {"reference": (args.n_null + 1) / (nr + 1), "floor": args.n_null + 1}
    return {k: {"times": v.times, "cpu": v.cpu, "scale": scale.get(k, 1.0)} for k, v in t.items()}


def _work_tiny(args) -> dict:
    import torch

    import tl_geometry as tg
    from tl_geometry.runs.pipeline import FAST_OPTIONS, REPORT_OPTIONS

    model = _util.tiny_model(n_layers=4, d_model=128, n_ctx=128, d_head=16, n_heads=8, d_mlp=512, d_vocab=2000)
    tokens = torch.randint(0, model.cfg.d_vocab, (8, 128), generator=torch.Generator().manual_seed(0))
    names = [n for n in tg.list_metrics() if n != "sae"]
    base = REPORT_OPTIONS if args.full_options else FAST_OPTIONS
    opts = {n: dict(base[n]) for n in names if n in base}
    opts["pga"]["k"] = 32

    def forward():
        with torch.no_grad():
            model(tokens)

    cases = {"ours": lambda: tg.analyze(model, tokens, metrics=names, options=opts, progress=False), "floor": forward}
    t = _util.bench(cases, repeats=args.repeats)
    return {k: {"times": v.times, "cpu": v.cpu, "scale": 1.0} for k, v in t.items()}


def _work_smollm2(args) -> dict:
    import torch

    from tl_geometry.runs.pipeline import run_report

    def floor():
        model = _util.load_smollm2(quiet=True)
        with torch.no_grad():
            model(_util.pydoc_tokens(model))

    cases = {"ours": lambda: run_report("smollm2-135m", fast=True, figures=False, progress=False), "floor": floor}
    t = _util.bench(cases, repeats=args.repeats)
    return {k: {"times": v.times, "cpu": v.cpu, "scale": 1.0} for k, v in t.items()}


WORKERS = {"pga": _work_pga, "tiny": _work_tiny, "smollm2": _work_smollm2}


# ----------------------------------------------------------------------------- driver
def _run_worker(workload: str, mode: str, contended: bool, args) -> dict:
    extra = {"TL_GEOMETRY_THREADS": "inherit" if mode == "old" else "auto"}
    if args.threads:
        extra["OMP_NUM_THREADS"] = str(args.threads)
    env = _util.child_env(**extra)
    cmd = [sys.executable, "-m", "benchmarks.bench_contention", "--worker", workload, "--repeats", str(args.repeats)]
    cmd += ["--lib", str(args.baseline)] if mode == "base" else []
    for flag in ("n", "d", "k", "n_null", "ref_nulls"):
        cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    cmd += ["--full-options"] if args.full_options else []
    with _util.competitor(contended):
        before = _util.load_average()
        res = subprocess.run(cmd, env=env, cwd=_util.ROOT, capture_output=True, text=True, check=False)
        after = _util.load_average()
    if res.returncode != 0:
        raise RuntimeError(f"worker {workload}/{mode} failed:\n{res.stderr[-3000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    return {k: (_util.Timing(k, v["times"], v["cpu"]), v["scale"]) for k, v in out.items()} | {
        "load": f"{before.split(' (')[0]} -> {after.split(' (')[0]}"
    }


def main(argv=None) -> int:
    ap = _util.make_parser(__doc__)
    ap.add_argument("--workloads", nargs="+", default=["pga", "tiny"], choices=sorted(WORKERS))
    ap.add_argument("--modes", nargs="+", default=["new", "old"], choices=["new", "old", "base"])
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout of the library, timed as 'base'")
    ap.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS for the workers (default: unset)")
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--d", type=int, default=576)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--n-null", type=int, default=20)
    ap.add_argument("--ref-nulls", type=int, default=2, help="nulls timed for the scipy reference")
    ap.add_argument("--full-options", action="store_true", help="tiny: the report's default options, not --fast's")
    ap.add_argument("--json", type=Path, default=None, help="also write all figures here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--lib", default=None, help=argparse.SUPPRESS)  # the worker's tl_geometry checkout (mode base)
    args = _util.parse_args(ap, argv)
    if args.small:
        args.workloads, args.n, args.d, args.k, args.n_null, args.ref_nulls = ["pga"], 256, 64, 16, 5, 2
    if args.worker:
        if args.lib:  # before any tl_geometry import (the workers import it lazily)
            sys.path.insert(0, args.lib)
        print(json.dumps(WORKERS[args.worker](args)))
        return 0
    if "base" in args.modes and (args.baseline is None or not (args.baseline / "tl_geometry").is_dir()):
        ap.error("--modes base needs --baseline PATH, a checkout holding tl_geometry/")

    _util.print_environment("slowdown beside one competing CPU-bound process")
    results = []
    for w in args.workloads:
        runs = {}
        for i, mode in enumerate(args.modes):
            # alternate quiet/contended order from mode to mode (a changing load hits both alike)
            for contended in (False, True) if i % 2 == 0 else (True, False):
                runs[(mode, contended)] = _run_worker(w, mode, contended, args)
        print(f"\n{w}:")
        rows = []
        for mode in args.modes:
            for contended in (False, True):
                r = runs[(mode, contended)]
                cond = "1 competitor" if contended else "quiet"
                for k in ("ours", "reference", "floor"):
                    if k in r:
                        note = f"load {r['load']}" + (f"; × {r[k][1]:.4g} in ratios" if r[k][1] != 1.0 else "")
                        rows.append((f"{mode}, {cond}: {k}", r[k][0], note))
        _util.print_table(rows)
        for mode in args.modes:
            for contended in (False, True):
                r = runs[(mode, contended)]
                print(f"{mode}, {'1 competitor' if contended else 'quiet'}:")
                ref, flo = r.get("reference"), r.get("floor")
                _util.print_ratios(
                    r["ours"][0],
                    ref[0] if ref else None,
                    flo[0] if flo else None,
                    scale_reference=ref[1] if ref else 1.0,
                    scale_floor=flo[1] if flo else 1.0,
                )
            q, c = runs[(mode, False)]["ours"][0], runs[(mode, True)]["ours"][0]
            slow, cpu = c.best / q.best, c.cpu_best / q.cpu_best
            print(
                f"{mode}: slowdown with one competitor {slow:.2f}x (goal ≤ 2: {'met' if slow <= 2 else 'NOT met'}); cpu x{cpu:.2f}"
            )
            results.append(
                {
                    "workload": w,
                    "mode": mode,
                    "slowdown": slow,
                    "cpu_ratio": cpu,
                    "quiet": q.times,
                    "contended": c.times,
                }
            )
        for other in ("old", "base"):
            if "new" in args.modes and other in args.modes:
                for contended in (False, True):
                    print(f"new / {other} ({'1 competitor' if contended else 'quiet'}):")
                    _util.print_ratios(
                        runs[("new", contended)]["ours"][0], runs[(other, contended)]["ours"][0], reference_name=other
                    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    _util.print_footer()
    return 0


if __name__ == "__main__":
    sys.exit(main())
