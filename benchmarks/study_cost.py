"""Benchmark: a study of several models against the sum of their single reports — wall time, peak RSS.

    python -m benchmarks.study_cost [--models smollm2-135m gemma-3-270m] [--fast] [--repeats 1]
                                     [--out benchmarks/out/study] [--controls random]

Each run is one fresh ``tl-geometry`` process (its peak RSS is ``ru_maxrss`` of that child alone,
from ``os.wait4``):

* reference: ``tl-geometry report --model M`` for each model, one after another (the sum of their
  walls is what a researcher pays to get the same numbers one model at a time; the largest peak
  RSS is the memory goal: the study holds one model at a time);
* ours: ``tl-geometry study M1 M2 ...`` (same settings; its extra work is the pooled
  representations of the convergence matrix, the claims and the figures);
* floor: the largest single report (a study cannot run faster than its slowest model's report,
  nor take less memory than its largest).

Rounds alternate the order (reports first, then study first, ...); best and median over
``--repeats`` rounds. A real-model study takes tens of minutes on 2 cores, so the default is one
round (say so when quoting it). ``--controls random`` afterwards runs the same study directory
with the random-init twins (the finished models are reused) and prints that wall too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import _util


def _run(cmd: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS GiB, exit status) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=_util.child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode not in (0, 1):
        print(err[-2000:], file=sys.stderr)
    return wall, usage.ru_maxrss / 2**20, proc.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["smollm2-135m", "gemma-3-270m"])
    ap.add_argument("--fast", action="store_true")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", default="benchmarks/out/study")
    ap.add_argument("--controls", nargs="*", default=[])
    args = ap.parse_args(argv)
    _util.print_environment("study_cost: a study vs the sum of its models' single reports")
    exe = [sys.executable, "-m", "tl_geometry.cli"]
    flags = ["--fast"] if args.fast else []
    out = Path(args.out)
    reports: dict[str, list[tuple[float, float]]] = {m: [] for m in args.models}
    studies: list[tuple[float, float]] = []
    for rnd in range(args.repeats):
        order = ["reports", "study"] if rnd % 2 == 0 else ["study", "reports"]
        for what in order:
            if what == "reports":
                for m in args.models:
                    d = out / f"report-{m.replace('/', '_')}"
                    shutil.rmtree(d, ignore_errors=True)
                    w, rss, rc = _run([*exe, "report", "--model", m, *flags, "--out", str(d), "--no-figures"])
                    print(f"round {rnd}: report {m:<16} {w:8.1f} s  peak {rss:5.2f} GiB  rc {rc}", flush=True)
                    reports[m].append((w, rss))
            else:
                d = out / "study"
                shutil.rmtree(d, ignore_errors=True)
                w, rss, rc = _run([*exe, "study", *args.models, *flags, "--out", str(d)])
                print(
                    f"round {rnd}: study ({len(args.models)} models) {w:8.1f} s  peak {rss:5.2f} GiB  rc {rc}",
                    flush=True,
                )
                studies.append((w, rss))
    sums = [sum(reports[m][i][0] for m in args.models) for i in range(args.repeats)]
    peak_single = max(r[1] for m in args.models for r in reports[m])
    floor = [max(reports[m][i][0] for m in args.models) for i in range(args.repeats)]
    sw = [s[0] for s in studies]
    print()
    print(f"{'':34}{'best':>10}{'median':>10}")
    print(f"{'sum of single reports (s)':34}{min(sums):10.1f}{statistics.median(sums):10.1f}")
    print(f"{'study (s)':34}{min(sw):10.1f}{statistics.median(sw):10.1f}")
    print(f"{'floor: largest single report (s)':34}{min(floor):10.1f}{statistics.median(floor):10.1f}")
    print(f"study / sum of reports: {min(sw) / min(sums):.2f} (best), floor ratio {min(sw) / min(floor):.2f}")
    print(
        f"peak RSS: study {max(s[1] for s in studies):.2f} GiB, largest single report {peak_single:.2f} GiB "
        f"(margin {max(s[1] for s in studies) - peak_single:+.2f} GiB)"
    )
    if args.controls:
        w, rss, rc = _run(
            [*exe, "study", *args.models, *flags, "--controls", *args.controls, "--out", str(out / "study")]
        )
        print(
            f"study with --controls {' '.join(args.controls)} (finished models reused): {w:.1f} s, peak {rss:.2f} GiB, rc {rc}"
        )
    _util.print_footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
