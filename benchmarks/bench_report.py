"""Benchmark: the whole report on the offline SmolLM2-135M — wall time, CPU time, peak RSS, passes.

Runs ``tl_geometry.pipeline.run_report("smollm2-135m", figures=False)`` in a fresh subprocess
(its peak RSS, ``ru_maxrss`` of the worker itself, is the report's own), alone and, with ``--contended``, while ONE competing
CPU-bound process (a Python busy loop) runs. It prints per run: wall and CPU seconds, peak
resident memory (``ru_maxrss`` of the child), the number of forward passes the model ran over
the corpus tokens (counted by wrapping ``model.forward``), and each metric's time.

The naive way it is compared with: one capture per activation metric (``--capture separate``,
what the report did before the one-pass capture) against one shared pass (``--capture shared``,
the default), passed to ``run_report(capture=...)``; a library whose ``run_report`` has no
``capture`` parameter (before the one-pass capture) is measured as it is.

Usage:
    python benchmarks/bench_report.py [--fast] [--contended] [--capture shared separate] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def _worker(fast: bool) -> dict:
    import inspect

    from tl_geometry import models
    from tl_geometry.pipeline import run_report

    passes = {"n": 0}
    real_load = models.load

    def counting_load(*a, **k):
        m = real_load(*a, **k)
        fwd = m.forward

        def forward(*fa, **fk):
            passes["n"] += 1
            return fwd(*fa, **fk)

        m.forward = forward
        return m

    models.load = counting_load
    w0, c0 = time.perf_counter(), time.process_time()
    mode = os.environ.get("TL_GEOMETRY_CAPTURE", "shared")
    extra = {"capture": mode} if "capture" in inspect.signature(run_report).parameters else {}
    rep = run_report("smollm2-135m", fast=fast, figures=False, progress=False, **extra)
    return {
        "wall": time.perf_counter() - w0,
        "cpu": time.process_time() - c0,
        "forward_calls": passes["n"],
        "timings_s": rep.provenance.get("timings_s"),
        "load_s": rep.provenance.get("load_s"),
        "status": rep.provenance.get("status"),
        "capture": rep.provenance.get("capture"),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # Linux: KiB
    }


def _run(fast: bool, capture: str, contended: bool) -> dict:
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TL_GEOMETRY_CAPTURE=capture,
        PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    comp = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if contended else None
    try:
        before = load()
        cmd = [sys.executable, __file__, "--worker"] + (["--fast"] if fast else [])
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    finally:
        if comp is not None:
            comp.kill()
            comp.wait()
    if res.returncode != 0:
        raise RuntimeError(f"worker failed:\n{res.stderr[-3000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["load"] = f"{before} -> {load()}"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="the report's --fast options")
    ap.add_argument("--contended", action="store_true", help="also run beside one CPU-bound busy loop")
    ap.add_argument("--capture", nargs="+", default=["shared", "separate"], choices=["shared", "separate"])
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.fast)))
        return 0
    print(f"cores={os.cpu_count()} torch threads=default load at start {load()} fast={args.fast}", flush=True)
    results = []
    for capture in args.capture:
        for contended in [False, True] if args.contended else [False]:
            r = _run(args.fast, capture, contended)
            r.update(capture_mode=capture, contended=contended)
            results.append(r)
            rss = f"{r['peak_rss_mb']:.0f} MB"
            print(
                f"capture={capture:<8} {'1 competitor' if contended else 'quiet':<12} wall {r['wall']:7.1f} s  "
                f"cpu {r['cpu']:7.1f} s  peak RSS {rss}  forward calls {r['forward_calls']}  "
                f"(load {r['load']})\n    timings {r['timings_s']}",
                flush=True,
            )
    by = {(r["capture_mode"], r["contended"]): r for r in results}
    for c in ("shared", "separate"):
        if (c, False) in by and (c, True) in by:
            print(f"capture={c}: slowdown with one competitor {by[(c, True)]['wall'] / by[(c, False)]['wall']:.2f}x")
    if ("shared", False) in by and ("separate", False) in by:
        s, n = by[("shared", False)], by[("separate", False)]
        print(
            f"shared / separate wall (quiet): {s['wall'] / n['wall']:.2f}; forward calls {s['forward_calls']} vs {n['forward_calls']}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
