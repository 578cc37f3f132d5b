"""Benchmark: does the library slow down gracefully when another process competes for the CPU?

Runs each workload in a fresh subprocess, first alone ("quiet") and then while ONE competing
CPU-bound process (a Python busy loop spawned by this script) runs, and prints wall and CPU
seconds, the slowdown (contended wall / quiet wall) and the ratio to the old thread behaviour
(``TL_GEOMETRY_THREADS=inherit``: every kernel with torch's default threads) and, for pga_score,
to the naive scipy loop (pdist + spearmanr per subspace, timed on a few nulls and extrapolated).
The goal (issue 13): a slowdown of at most 2× with one competing process.

Workloads:
  pga      pga_score on a random anisotropic (N, d) cloud (default N=1024, d=576, k=100, 20 nulls,
           CCR 1: the report's PGA size per hook and level, fewer nulls)
  tiny     the report's metrics (tg.analyze with the report's ``--fast`` options, or its default
           options with --full-options) on a tiny random HookedTransformer (4 layers,
           d_model 128), random tokens
  smollm2  ``run_report("smollm2-135m", fast=True, figures=False)`` (needs the offline model;
           ~3 GB RAM; run it under the shared heavy-job lock)

The machine's load (``/proc/loadavg``) is printed with every figure: on a shared machine the
"quiet" run is only as quiet as the others let it be.

Usage:
    python benchmarks/bench_contention.py [--workloads pga tiny] [--modes new old] [--threads N] [--repeat 3]
    python benchmarks/bench_contention.py --workloads smollm2 --modes new
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:  # pragma: no cover - not Linux
        return "?"


# ----------------------------------------------------------------------------- workers
def _work_pga(args) -> dict:
    import torch

    import tl_geometry as tg

    g = torch.Generator().manual_seed(0)
    H = torch.randn(args.n, args.d, generator=g) * torch.linspace(0.2, 3.0, args.d)
    V = tg.readout_basis(torch.randn(args.d, 4 * args.d, generator=g), args.k)
    bases = tg.haar_bases(args.d, args.k, args.n_null, seed=1)
    w0, c0 = time.perf_counter(), time.process_time()
    s = tg.pga_score(H, V, null_bases=bases, ccr=1)
    out = {"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0, "z": s.z}
    if args.ref_nulls:
        from scipy.spatial.distance import pdist
        from scipy.stats import spearmanr

        X = H.double().numpy()
        w0, c0 = time.perf_counter(), time.process_time()
        d_full = pdist(X, "cosine")
        for i in range(args.ref_nulls):
            spearmanr(d_full, pdist(X @ bases[i].numpy(), "cosine"))
        scale = (args.n_null + 1) / (args.ref_nulls + 1)
        out["ref_wall"] = (time.perf_counter() - w0) * scale
        out["ref_cpu"] = (time.process_time() - c0) * scale
    return out


def _work_tiny(args) -> dict:
    import warnings

    import torch
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    import tl_geometry as tg
    from tl_geometry.pipeline import FAST_OPTIONS, REPORT_OPTIONS

    cfg = HookedTransformerConfig(
        n_layers=4,
        d_model=128,
        n_ctx=128,
        d_head=16,
        n_heads=8,
        d_mlp=512,
        d_vocab=2000,
        act_fn="gelu",
        normalization_type="LN",
        seed=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        model = HookedTransformer(cfg).eval()
    tokens = torch.randint(0, cfg.d_vocab, (8, 128), generator=torch.Generator().manual_seed(0))
    names = [n for n in tg.list_metrics() if n != "sae"]
    base = REPORT_OPTIONS if args.full_options else FAST_OPTIONS
    opts = {n: dict(base[n]) for n in names if n in base}
    opts["pga"]["k"] = 32
    w0, c0 = time.perf_counter(), time.process_time()
    rep = tg.analyze(model, tokens, metrics=names, options=opts, progress=False)
    return {
        "wall": time.perf_counter() - w0,
        "cpu": time.process_time() - c0,
        "timings_s": rep.provenance.get("timings_s"),
    }


def _work_smollm2(args) -> dict:
    from tl_geometry.pipeline import run_report

    w0, c0 = time.perf_counter(), time.process_time()
    rep = run_report("smollm2-135m", fast=True, figures=False, progress=False)
    return {
        "wall": time.perf_counter() - w0,
        "cpu": time.process_time() - c0,
        "timings_s": rep.provenance.get("timings_s"),
        "status": rep.provenance.get("status"),
    }


WORKERS = {"pga": _work_pga, "tiny": _work_tiny, "smollm2": _work_smollm2}


# ----------------------------------------------------------------------------- driver
def _competitor() -> subprocess.Popen:
    """One CPU-bound process: a pure-Python busy loop (one core)."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def _run_worker(workload: str, mode: str, args) -> dict:
    root = args.baseline if mode == "base" else ROOT
    env = dict(
        os.environ,
        TL_GEOMETRY_THREADS="inherit" if mode == "old" else "auto",
        PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        HF_HUB_OFFLINE="1",
    )
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        workload,
        "--n",
        str(args.n),
        "--d",
        str(args.d),
        "--k",
        str(args.k),
        "--n-null",
        str(args.n_null),
        "--ref-nulls",
        str(args.ref_nulls),
    ]
    cmd += ["--full-options"] if args.full_options else []
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"worker {workload}/{mode} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _one_run(workload: str, mode: str, contended: bool, args) -> dict:
    comp = _competitor() if contended else None
    try:
        if comp is not None:
            time.sleep(0.5)
        before = load()
        r = _run_worker(workload, mode, args)
        r["load"] = f"{before} -> {load()}"
    finally:
        if comp is not None:
            comp.kill()
            comp.wait()
    return r


def _median(runs: list[dict]) -> dict:
    """The median run (by wall time); every run's figures and load are kept."""
    med = dict(sorted(runs, key=lambda r: r["wall"])[len(runs) // 2])
    med["runs"] = [{k: r[k] for k in ("wall", "cpu", "load")} for r in runs]
    return med


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", nargs="+", default=["pga", "tiny"], choices=sorted(WORKERS))
    ap.add_argument(
        "--modes",
        nargs="+",
        default=["new", "old"],
        choices=["new", "old", "base"],
        help="new: per-kernel threads (default); old: TL_GEOMETRY_THREADS=inherit; "
        "base: this script's workers run on the checkout given by --baseline",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another checkout of the library (e.g. the main branch) timed as mode 'base'",
    )
    ap.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS for the workers (default: unset)")
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--d", type=int, default=576)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--n-null", type=int, default=20)
    ap.add_argument("--ref-nulls", type=int, default=2, help="nulls timed for the scipy reference (0: skip)")
    ap.add_argument("--full-options", action="store_true", help="tiny: the report's default options, not --fast's")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds (each runs every mode quiet and contended); the median (by wall time) per condition is printed",
    )
    ap.add_argument("--json", type=Path, default=None, help="also write all figures here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if (
        "base" in args.modes
        and not args.worker
        and (args.baseline is None or not (args.baseline / "tl_geometry").is_dir())
    ):
        ap.error("--modes base needs --baseline PATH, a checkout holding tl_geometry/")
    if args.worker:
        print(json.dumps(WORKERS[args.worker](args)))
        return 0

    print(
        f"cores={os.cpu_count()} OMP_NUM_THREADS={args.threads or os.environ.get('OMP_NUM_THREADS', 'unset')} "
        f"load at start {load()}",
        flush=True,
    )
    results = []
    for w in args.workloads:
        # ``--repeat`` rounds, each timing every mode quiet and contended back to back, so that
        # the modes see the same (shared) machine
        runs: dict[tuple[str, bool], list[dict]] = {}
        for _ in range(args.repeat):
            for mode in args.modes:
                for contended in (False, True):
                    runs.setdefault((mode, contended), []).append(_one_run(w, mode, contended, args))
        for mode in args.modes:
            quiet, busy = _median(runs[(mode, False)]), _median(runs[(mode, True)])
            row = {
                "workload": w,
                "mode": mode,
                "quiet": quiet,
                "contended": busy,
                "slowdown": busy["wall"] / quiet["wall"],
                "cpu_ratio": busy["cpu"] / quiet["cpu"],
            }
            results.append(row)
            print(
                f"{w:<8} {mode:<4} quiet {quiet['wall']:7.2f} s wall {quiet['cpu']:7.2f} s cpu (load {quiet['load']}) | "
                f"1 competitor {busy['wall']:7.2f} s wall {busy['cpu']:7.2f} s cpu (load {busy['load']}) | "
                f"slowdown {row['slowdown']:.2f}x, cpu x{row['cpu_ratio']:.2f}",
                flush=True,
            )
            print(
                f"{'':<14}every run's wall: quiet "
                + " ".join(f"{r['wall']:.2f}" for r in quiet["runs"])
                + " | contended "
                + " ".join(f"{r['wall']:.2f}" for r in busy["runs"]),
                flush=True,
            )
            if "ref_cpu" in quiet:
                print(
                    f"{'':<14}scipy loop (extrapolated) cpu: quiet {quiet['ref_cpu']:.2f} s, contended "
                    f"{busy['ref_cpu']:.2f} s; pga_score cpu / scipy cpu: quiet {quiet['cpu'] / quiet['ref_cpu']:.2f}, "
                    f"contended {busy['cpu'] / busy['ref_cpu']:.2f}",
                    flush=True,
                )
    by = {(r["workload"], r["mode"]): r for r in results}
    for w in args.workloads:
        for other in ("old", "base"):
            if (w, "new") not in by or (w, other) not in by:
                continue
            n, o = by[(w, "new")], by[(w, other)]
            print(
                f"{w:<8} new/{other} wall: quiet {n['quiet']['wall'] / o['quiet']['wall']:.2f}, contended "
                f"{n['contended']['wall'] / o['contended']['wall']:.2f}; new/{other} cpu: quiet "
                f"{n['quiet']['cpu'] / o['quiet']['cpu']:.2f}, contended {n['contended']['cpu'] / o['contended']['cpu']:.2f}"
                + (
                    f"; |dz| {abs(n['quiet']['z'] - o['quiet']['z']):.1e}"
                    if "z" in n["quiet"] and "z" in o["quiet"]
                    else ""
                )
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
