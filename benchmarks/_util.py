"""Shared benchmark method: figures that cannot flatter us.

Every benchmark under ``benchmarks/`` uses this module to

* print the environment that decides the speed: CPU, cores, torch's BLAS and CPU capability, the BLAS
  libraries and kernels in use (``threadpoolctl``), the environment variables that change them
  (``OPENBLAS_*``, ``MKL_*``, ``OMP_NUM_THREADS``, ...), and the load average at start and end (other
  processes share the machine; a load above the core count means the figures are slowed);
* time ours and the reference the same way: a warm-up call each (page faults, lazy init, caches),
  then ``repeats`` rounds in **alternating order** (ours first in even rounds, the reference first in odd
  ones), reporting best and median wall time and the best process CPU time;
* give the machine's GEMM floor for the same shape (:func:`gemm_floor`), so a ratio to the hardware
  is printed next to the ratio to the reference;
* run a numpy reference in a fresh subprocess with BLAS variables unset (:func:`run_isolated`), so the
  reference gets its library's own kernel choice even where this machine pins one (the *best* simple
  reference, not the one as configured here).

Imports only the standard library at module level; numpy/torch/threadpoolctl are imported by the
functions that need them.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: Environment variables that change which BLAS kernel or how many threads run.
BLAS_ENV_PREFIXES = ("OPENBLAS", "GOTO", "MKL", "OMP_", "KMP_", "NVPL", "BLIS", "VECLIB", "ATEN", "TORCH_CPU")


def blas_env() -> dict[str, str]:
    """The environment variables that change the BLAS kernel or thread count, as set now."""
    return {k: v for k, v in sorted(os.environ.items()) if k.upper().startswith(BLAS_ENV_PREFIXES)}


def load_average() -> str:
    try:
        a, b, c = os.getloadavg()
    except OSError:
        return "unavailable"
    return f"{a:.2f} {b:.2f} {c:.2f} (1/5/15 min; {os.cpu_count()} cores)"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def print_environment(title: str) -> None:
    """Print the header every benchmark starts with (see the module docstring)."""
    import numpy as np
    import torch

    print(f"== {title}")
    print(f"date (UTC)   : {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())}")
    print(f"cpu          : {cpu_model()}, {os.cpu_count()} cores; load average at start {load_average()}")
    print(f"python       : {sys.version.split()[0]}; numpy {np.__version__}; torch {torch.__version__}")
    cfg = torch.__config__.show()
    blas = next((ln.split("BLAS_INFO=")[1].split(",")[0] for ln in cfg.splitlines() if "BLAS_INFO=" in ln), "?")
    cap = next((ln.split(":", 1)[1].strip() for ln in cfg.splitlines() if "CPU capability" in ln), "?")
    print(f"torch        : BLAS {blas}, CPU capability {cap}, {torch.get_num_threads()} threads")
    try:
        from threadpoolctl import threadpool_info

        for info in threadpool_info():
            arch = info.get("architecture") or "-"
            print(
                f"threadpool   : {info.get('internal_api')} {info.get('version') or ''} kernel {arch}, "
                f"{info.get('num_threads')} threads ({os.path.basename(info.get('filepath', ''))})"
            )
    except ImportError:
        print("threadpool   : threadpoolctl not installed (BLAS kernel unknown)")
    env = blas_env()
    print(f"BLAS env     : {' '.join(f'{k}={v}' for k, v in env.items()) or '(none set)'}")
    print()


def print_footer() -> None:
    print(f"\nload average at end {load_average()}")


@dataclass
class Timing:
    name: str
    times: list[float]
    cpu: list[float]
    value: object = None

    @property
    def best(self) -> float:
        return min(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def cpu_best(self) -> float:
        return min(self.cpu)


def bench(cases: dict[str, Callable[[], object]], *, repeats: int = 3, warmup: int = 1) -> dict[str, Timing]:
    """Time each case: ``warmup`` untimed calls each, then ``repeats`` rounds in rotating order.

    Round r runs the cases starting at index r (mod the number of cases), so with two cases ours and
    the reference alternate who goes first. Returns best/median wall time and best CPU time per case
    (``value`` is the last return value, for accuracy checks).
    """
    names = list(cases)
    out = {k: Timing(k, [], []) for k in names}
    for _ in range(warmup):
        for k in names:
            out[k].value = cases[k]()
    for r in range(repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        for k in order:
            c0, t0 = time.process_time(), time.perf_counter()
            out[k].value = cases[k]()
            out[k].times.append(time.perf_counter() - t0)
            out[k].cpu.append(time.process_time() - c0)
    return out


def gemm_floor(n: int, d: int, *, repeats: int = 3) -> dict[str, Timing]:
    """The float32 Gram ``UᵀU`` of an (n, d) matrix by each library (numpy: ?syrk; torch: ?gemm)."""
    import torch

    u = torch.randn(n, d, generator=torch.Generator().manual_seed(0))
    un = u.numpy()
    return bench(
        {"numpy float32 UᵀU": lambda: un.T @ un, "torch float32 UᵀU": lambda: u.T @ u},
        repeats=repeats,
    )


def run_isolated(code: str, *, unset: Sequence[str] = ("OPENBLAS_CORETYPE", "OPENBLAS_VERBOSE"), timeout=3600):
    """Run ``code`` in a fresh Python with the given variables removed; it must print one JSON line last.

    Used for the numpy reference with its library's own kernel choice (``OPENBLAS_CORETYPE`` unset).
    Returns the parsed JSON.
    """
    env = {k: v for k, v in os.environ.items() if k not in unset}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"isolated run failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


#: The timing loop for :func:`run_isolated` code: define ``cases`` (name → callable), then exec this.
ISOLATED_BENCH = r"""
import json, statistics, time
def _bench(cases, repeats, warmup=1):
    res = {}
    for _ in range(warmup):
        for k, f in cases.items():
            res[k] = {"value": f(), "times": [], "cpu": []}
    names = list(cases)
    for r in range(repeats):
        for k in names[r % len(names):] + names[: r % len(names)]:
            c0, t0 = time.process_time(), time.perf_counter()
            v = cases[k]()
            res[k]["times"].append(time.perf_counter() - t0)
            res[k]["cpu"].append(time.process_time() - c0)
            res[k]["value"] = v
    return res
"""


def fmt_row(label: str, t: Timing | None, *, extra: str = "") -> str:
    if t is None:
        return f"| {label} | - | - | - | {extra} |"
    return f"| {label} | {t.best:.3f} | {t.median:.3f} | {t.cpu_best:.2f} | {extra} |"


TABLE_HEAD = "| computation | best s | median s | best CPU s | note |\n|---|---|---|---|---|"
