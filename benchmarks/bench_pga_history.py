"""Benchmark: one layer of the paper-size PGA profile, this tree against an earlier commit, same machine.

    python -m benchmarks.bench_pga_history [--ref b0d1404] [--n 2048] [--d 576] [--k 100]
        [--n-null 100] [--layers 31] [--threads N] [--busy] [--repeats 3] [--small]

Issue 34 asks the paper-size profile (31 layers, 2,048 points, 100 nulls, CCR-1) to cost, with its
standard errors, at most 1.5 × what it cost before them (109 s on 2026-12-01). That figure came
from another machine; a ratio only means something when both sides run on the same one, so this
script runs both. ``--ref`` (default ``b0d1404``: the last commit before PGA's standard errors) is
extracted with ``git archive`` into a temporary directory (the repository is only read), and each
version runs in its own warm subprocess that imports its own ``tl_geometry``. Both score the same
seeded layer (an anisotropic cloud with readout structure, as in ``bench_pga``) with the same
nulls (``haar_bases(seed=1)``) at CCR-1: the reference with its ``pga_score`` (z alone: it had no
error), this tree with the default ``stderr="influence"`` and with ``stderr="none"``. The z's must
agree (printed).

Method (``benchmarks/_util.py``): a warm-up call in each process, then ``--repeats`` rounds in
rotating order, best and median wall time of one layer; the profile's time is ``--layers`` × one
layer (every layer costs the same: the same N, d, k and nulls). Torch's default threads unless
``--threads``; ``--busy`` runs the rounds beside one CPU-bound process (``_util.competitor``). The
machine's floor is one sort of the N(N−1)/2 distances per subspace (``_util.sort_floor`` × (n_null
+ 1)). ``--small``: N = 512, 20 nulls, a 3-layer profile (seconds).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from benchmarks import _util

WORKER = r"""
import json, sys, time
import torch
sys.path.insert(0, sys.argv[1])
import tl_geometry as tg
assert tg.__file__.startswith(sys.argv[1]), tg.__file__
n, d, k, n_null, threads = (int(a) for a in sys.argv[2:7])
if threads > 0:
    torch.set_num_threads(threads)
g = torch.Generator().manual_seed(0)
H = torch.randn(n, d, generator=g) * torch.linspace(0.2, 3.0, d)
V = tg.readout_basis(torch.randn(d, 4 * d, generator=g), k)
bases = tg.haar_bases(d, k, n_null, seed=1)
kw = {} if sys.argv[7] == "-" else {"stderr": sys.argv[7]}
call = lambda: tg.pga_score(H, V, null_bases=bases, ccr=1, **kw)
s = call()  # warm-up
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    c0, t0 = time.process_time(), time.perf_counter()
    s = call()
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    se = float(getattr(s, "stderr", float("nan")))
    print(json.dumps({"wall": dt, "cpu": dc, "z": float(s.z), "se": se}), flush=True)
"""


def extract(rev: str, dest: Path) -> Path:
    """``git archive rev tl_geometry`` unpacked under ``dest`` (the repository is only read)."""
    tar = dest / "ref.tar"
    with tar.open("wb") as f:
        subprocess.run(["git", "-C", str(_util.ROOT), "archive", rev, "tl_geometry"], stdout=f, check=True)
    out = dest / "src"
    out.mkdir()
    with tarfile.open(tar) as t:
        t.extractall(out, filter="data")
    return out


class Worker:
    def __init__(self, name: str, src: Path, args, stderr: str | None) -> None:
        self.name = name
        argv = [str(src), str(args.n), str(args.d), str(args.k), str(args.n_null), str(args.threads or 0)]
        self.p = subprocess.Popen(
            [sys.executable, "-c", WORKER, *argv, stderr or "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=tempfile.gettempdir(),
        )
        assert json.loads(self._line())["ready"]
        self.timing = _util.Timing(name, [], [])

    def _line(self) -> str:
        assert self.p.stdout is not None
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name}: worker exited ({self.p.wait()})")
        return line

    def run(self) -> dict:
        assert self.p.stdin is not None
        self.p.stdin.write("go\n")
        self.p.stdin.flush()
        r = json.loads(self._line())
        self.timing.times.append(r["wall"])
        self.timing.cpu.append(r["cpu"])
        self.timing.value = r
        return r

    def close(self) -> None:
        if self.p.stdin is not None:
            self.p.stdin.close()
        self.p.wait()


def _z(r: dict) -> str:
    se = r["se"]
    return f"z = {r['z']:.4f}" + (f" ± {se:.3f}" if se == se else "")


BEFORE_ERRORS = "b0d1404"
"""The last commit before PGA's standard errors (the default ``--ref``)."""


def _ref_label(ref: str) -> str:
    """What the reference's default ``pga_score`` computes: z alone before the error bars, its own
    default error otherwise (the row must not claim "before the error bars" for a later commit)."""
    return "z alone, before the error bars" if ref == BEFORE_ERRORS else "its default pga_score"


def main(argv=None) -> None:
    ap = _util.make_parser(__doc__, small="N = 512, 20 nulls, 3 layers")
    ap.add_argument("--ref", default=BEFORE_ERRORS, help="the earlier commit (default: before PGA's standard errors)")
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--d", type=int, default=576)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--n-null", type=int, default=100)
    ap.add_argument("--layers", type=int, default=31, help="layers of the profile (× one layer's time)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads in both (default: torch's own)")
    ap.add_argument("--busy", action="store_true", help="beside one CPU-bound process")
    args = _util.parse_args(ap, argv)
    if args.small:
        args.n, args.n_null, args.layers = 512, 20, 3
    _util.print_environment(f"PGA profile layer, this tree vs {args.ref}")
    print(
        f"N={args.n} d={args.d} k={args.k} n_null={args.n_null} CCR-1, profile = {args.layers} layers, "
        f"threads={args.threads or 'torch default'}, busy={args.busy}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        ref_src = extract(args.ref, Path(tmp))
        workers = [
            Worker(f"{args.ref} ({_ref_label(args.ref)})", ref_src, args, None),
            Worker("this tree, z ± stderr (influence, default)", _util.ROOT, args, None),
            Worker("this tree, z alone (stderr='none')", _util.ROOT, args, "none"),
        ]
        try:
            with _util.competitor(args.busy):
                for r in range(args.repeats):
                    for w in workers[r % 3 :] + workers[: r % 3]:
                        w.run()
        finally:
            for w in workers:
                w.close()
    ref, ours, alone = (w.timing for w in workers)
    floor = _util.sort_floor(args.n * (args.n - 1) // 2, repeats=args.repeats)
    _util.print_table([(w.name, w.timing, _z(w.timing.value)) for w in workers])
    print(f"max |dz| = {max(abs(w.timing.value['z'] - ref.value['z']) for w in workers):.2e}")
    print(f"-- the profile ({args.layers} layers), best / median:")
    for t in (ref, ours, alone):
        print(f"   {t.name}: {args.layers * t.best:.1f} s / {args.layers * t.median:.1f} s")
    print("-- with stderr against the reference (issue 34: <= 1.5):")
    _util.print_ratios(ours, ref, alone, reference_name=args.ref, floor_name="z alone, this tree")
    print(f"-- against the floor (one sort of the distances per subspace, × {args.n_null + 1}):")
    for t in (ref, ours):
        _util.print_ratios(t, None, floor, floor_name=f"sort floor ({t.name})", scale_floor=args.n_null + 1)
    _util.print_footer()


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"({time.perf_counter() - t0:.0f} s)")
