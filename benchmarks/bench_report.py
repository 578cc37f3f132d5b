"""Benchmark: the whole report on the offline SmolLM2-135M — wall time, CPU time, peak RSS, passes.

    python -m benchmarks.bench_report [--fast] [--contended] [--capture shared separate] [--repeats 3] [--small]

Runs ``tl_geometry.runs.pipeline.run_report("smollm2-135m", figures=False)`` once per fresh subprocess
(its peak RSS, ``ru_maxrss`` of the worker itself, is the report's own), alone and, with
``--contended``, while ONE competing CPU-bound process (``_util.competitor``) runs. Per run: wall
and CPU seconds, peak resident memory, the number of forward passes the model ran over the corpus
tokens (counted by wrapping ``model.forward``), and each metric's time.

* ours: one shared capture pass (``run_report(capture="shared")``, the default);
* reference: one capture per activation metric (``capture="separate"``, what the report did
  before the one-pass capture): the best *simple* way, each metric capturing what it needs; a
  library whose ``run_report`` has no ``capture`` parameter is measured as it is;
* floor: one model load and one forward pass over the report's tokens (in this process): what any
  report must do before the metrics (``--small``: the forward pass only; the tiny model is built
  before the clock starts in ours too).

A warm-up round, then ``--repeats`` (≥ 3) rounds, each running the capture modes in rotating order,
one fresh process per run; best and median. ``--small``: a tiny random byte-level model
(``_util.byte_model``, real pydoc text), 2 × 32 tokens, two metrics (epsilon_activations,
spectral) instead of SmolLM2's whole report, every run in this process (peak RSS: this process's).
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

from benchmarks import _util

SMALL = dict(n_seqs=2, seq_len=32, metrics=["epsilon_activations", "spectral"])


def _model(small: bool):
    return _util.byte_model(n_ctx=128) if small else _util.load_smollm2(quiet=True)


def _worker(fast: bool, small: bool, capture: str | None = None) -> dict:
    import inspect

    from tl_geometry import models
    from tl_geometry.runs.pipeline import run_report

    passes = {"n": 0}

    def counting(m):
        fwd = m.forward

        def forward(*fa, **fk):
            passes["n"] += 1
            return fwd(*fa, **fk)

        m.forward = forward
        return m

    real_load = models.load
    models.load = lambda *a, **k: counting(real_load(*a, **k))
    mode = capture or os.environ.get("TL_GEOMETRY_CAPTURE", "shared")
    extra = {"capture": mode} if "capture" in inspect.signature(run_report).parameters else {}
    target = counting(_model(True)) if small else "smollm2-135m"
    extra.update(SMALL if small else {})
    w0, c0 = time.perf_counter(), time.process_time()
    rep = run_report(target, fast=fast, figures=False, progress=False, **extra)
    models.load = real_load
    return {
        "wall": time.perf_counter() - w0,
        "cpu": time.process_time() - c0,
        "forward_calls": passes["n"],
        "timings_s": rep.provenance.get("timings_s"),
        "status": rep.provenance.get("status"),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # Linux: KiB
    }


def _run(args, capture: str, contended: bool) -> dict:
    if args.small:  # in this process: seconds, not a fresh interpreter per run (peak RSS is this process's)
        with _util.competitor(contended):
            before = _util.load_average().split(" (")[0]
            out = _worker(args.fast, True, capture)
            out["load"] = f"{before} -> {_util.load_average().split(' (')[0]}"
        return out
    cmd = [sys.executable, "-m", "benchmarks.bench_report", "--worker"]
    cmd += (["--fast"] if args.fast else []) + (["--small"] if args.small else [])
    with _util.competitor(contended):
        before = _util.load_average().split(" (")[0]
        res = subprocess.run(
            cmd, env=_util.child_env(TL_GEOMETRY_CAPTURE=capture), cwd=_util.ROOT, capture_output=True, text=True
        )
        after = _util.load_average().split(" (")[0]
    if res.returncode != 0:
        raise RuntimeError(f"worker failed:\n{res.stderr[-3000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["load"] = f"{before} -> {after}"
    return out


def main(argv=None) -> int:
    ap = _util.make_parser(__doc__)
    ap.add_argument("--fast", action="store_true", help="the report's --fast options")
    ap.add_argument("--contended", action="store_true", help="also run beside one CPU-bound busy loop")
    ap.add_argument("--capture", nargs="+", default=["shared", "separate"], choices=["shared", "separate"])
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = _util.parse_args(ap, argv)
    if args.worker:
        print(json.dumps(_worker(args.fast, args.small)))
        return 0
    import torch

    _util.print_environment(f"the whole report ({'tiny byte model' if args.small else 'SmolLM2-135M'})")
    conds = [(c, k) for k in ([False, True] if args.contended else [False]) for c in args.capture]
    runs: dict[tuple[str, bool], list[dict]] = {c: [] for c in conds}
    for r in range(args.repeats + 1):  # round 0: the warm-up (page cache, compiled bytecode)
        for cond in conds[r % len(conds) :] + conds[: r % len(conds)]:
            res = _run(args, *cond)
            if r:
                runs[cond].append(res)
                print(
                    f"  round {r} capture={cond[0]:<8} {'1 competitor' if cond[1] else 'quiet':<12} wall {res['wall']:7.1f} s "
                    f"cpu {res['cpu']:7.1f} s peak RSS {res['peak_rss_mb']:.0f} MB forward calls {res['forward_calls']} "
                    f"(load {res['load']})",
                    flush=True,
                )

    small_model = _model(True) if args.small else None  # --small: ours times the report, not the model's build

    def floor():
        m = small_model if args.small else _model(False)
        toks = _util.pydoc_tokens(m, *((SMALL["n_seqs"], SMALL["seq_len"]) if args.small else (8, 128)))
        with torch.no_grad():
            m(toks)

    fl = _util.bench({"floor": floor}, repeats=args.repeats)["floor"]
    t = {c: _util.Timing(str(c), [x["wall"] for x in v], [x["cpu"] for x in v]) for c, v in runs.items()}
    rows = []
    for (c, k), v in runs.items():
        note = f"peak RSS {min(x['peak_rss_mb'] for x in v):.0f} MB; forward calls {v[0]['forward_calls']}"
        rows.append((f"capture={c}, {'1 competitor' if k else 'quiet'}", t[(c, k)], note))
    rows.append((f"floor: {'' if args.small else 'load + '}one forward (this process)", fl))
    _util.print_table(rows)
    print(f"timings of the last quiet run of each: { {c: runs[(c, False)][-1]['timings_s'] for c in args.capture} }")
    for k in [False, True] if args.contended else [False]:
        if ("shared", k) in t:
            print(f"{'1 competitor' if k else 'quiet'}:")
            ref = t.get(("separate", k))
            _util.print_ratios(
                t[("shared", k)],
                ref,
                fl,
                reference_name="capture=separate",
                floor_name="forward" if args.small else "load + forward",
            )
    for c in args.capture:
        if (c, True) in t:
            print(f"capture={c}: slowdown with one competitor {t[(c, True)].best / t[(c, False)].best:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({f"{c}|{k}": v for (c, k), v in runs.items()}, indent=1))
    _util.print_footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
