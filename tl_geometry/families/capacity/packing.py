"""Vector packing: how small can the worst-case |cos| of k unit vectors in R^d be?

The capacity paper (Guha, arXiv 2606.02765, Sec. 4) measures ε*(k, d) two ways and fits the
capacity forms of [`tl_geometry.capacity`][tl_geometry.metrics.capacity.capacity] to the results:

* [`random_packing`][tl_geometry.families.capacity.packing.random_packing]: the smallest max_{i≠j} |cos| over T trials of k Gaussian vectors
  (what a random projection achieves; fitted by JL with C ≈ 3.029);
* [`optimized_packing`][tl_geometry.families.capacity.packing.optimized_packing]: Adam on k vectors minimizing Σ_{i≠j} |G_ij|^p, G the Gram matrix of
  the normalized vectors, then max_{i≠j} |G_ij| (fitted by the "adjusted" and "full" forms).

[`fit`][tl_geometry.families.capacity.packing.fit] refits the forms (``scipy.optimize.curve_fit``) with the paper's conventions, and
[`sweep`][tl_geometry.families.capacity.packing.sweep] runs a grid of (k, d) cells, appending each finished cell to a JSON-lines file
([`tl_geometry.runtime.jobs.ResultsFile`][tl_geometry.runtime.jobs.ResultsFile]) so that an interrupted sweep resumes.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError

logger = logging.getLogger(__name__)

__all__ = [
    "random_packing",
    "optimized_packing",
    "paper_schedule",
    "max_abs_cos",
    "fit",
    "FitResult",
    "load_reference",
    "sweep",
    "SeedSpread",
    "seed_spread",
    "cell_tolerance",
    "fit_noise",
]


def _device(device: str | torch.device | None) -> torch.device:
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _check_kd(k: int, d: int) -> None:
    for name, v in (("k", k), ("d", d)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise InputError(f"{name} must be a positive integer, got {v!r}")
    if k < 2:
        raise InputError(f"k must be >= 2 (pairs are needed), got {k}")


@torch.no_grad()
def max_abs_cos(U: Tensor, *, block: int | None = None) -> float:
    """max_{i≠j} |cos(u_i, u_j)| over the rows of U (normalized here), blockwise in memory.

    ``block`` rows at a time (default: blocks of at most 2^26 cosines); the pass is the shared
    pair engine `tl_geometry.metrics._pairs.pair_pass`.
    """
    from tl_geometry.metrics._pairs import pair_pass

    U = torch.nn.functional.normalize(U.float() if U.dtype == torch.float16 and U.device.type == "cpu" else U, dim=1)
    n = U.shape[0]
    block = block or max(1, min(n, 2**13))
    worst = pair_pass(U, max_abs=True, block=block).max_abs
    assert worst is not None  # max_abs=True
    return float(worst)


@torch.no_grad()
def random_packing(
    k: int,
    d: int,
    *,
    trials: int = 1000,
    seed: int = 0,
    device: str | torch.device | None = "auto",
    dtype: torch.dtype = torch.float32,
) -> float:
    """Best worst-case |cos| of k random Gaussian unit vectors in R^d over ``trials`` draws.

    Capacity paper: min over T trials of max_{i≠j} |cos(x_i, x_j)|, x_i ~ N(0, I_d)
    (T = 1000, float16 on GPU in the paper's sweep).

    Args:
        k: number of vectors (≥ 2); d: dimension (≥ 1).
        trials: number of independent draws T (≥ 1).
        seed: seed of the draws (a ``torch.Generator`` on ``device``).
        device: "auto" (CUDA when available), "cpu", "cuda", ...
        dtype: float32 by default. Our choice: the paper used float16 on GPU; float16 matmul
            on CPU is slow and rounds cosines to ~1e-3.

    Returns:
        The smallest max |cos| over the trials.
    """
    _check_kd(k, d)
    if trials < 1:
        raise InputError(f"trials must be >= 1, got {trials}")
    dev = _device(device)
    gen = torch.Generator(device=dev).manual_seed(int(seed))
    best = math.inf
    for _ in range(trials):
        x = torch.randn(k, d, generator=gen, device=dev, dtype=dtype)
        best = min(best, max_abs_cos(x))
    return best


def paper_schedule(k: int, d: int) -> dict[str, float]:
    """The paper's optimizer settings for a (k, d) cell (its ``optimized_packing_sweep.py``).

    lr = 0.005 for d ≤ 1024, else 0.0025; penalty exponent p = min(int(m / ln d), 20) with
    m = 40 for k ≤ 4000, m = 50 for d ≥ 3072, else m = 60; 5,000 steps.
    """
    _check_kd(k, d)
    lr = 0.005 if d <= 1024 else 0.0025
    m = 40 if k <= 4000 else (50 if d >= 3072 else 60)
    p = min(int(m / math.log(d)), 20) if d > 1 else 20
    return {"lr": lr, "p": p, "steps": 5000}


def optimized_packing(
    k: int,
    d: int,
    *,
    steps: int | None = None,
    seed: int = 0,
    lr: float | None = None,
    p: float | None = None,
    device: str | torch.device | None = "auto",
    return_vectors: bool = False,
    progress: bool = False,
):
    """Max |cos| of k unit vectors in R^d after penalty descent (capacity paper, Sec. 4).

    Start from k Gaussian unit vectors; Adam on the raw vectors X minimizing
    L = Σ_{i≠j} |G_ij|^p with G = U Uᵀ the Gram matrix of the normalized rows U; report
    max_{i≠j} |G_ij|. As in the paper's code, the value is read at the last step before its
    update (``steps − 1`` Adam updates).

    Args:
        k, d: number of vectors and dimension.
        steps: Adam steps (default: the paper's 5,000).
        seed: initial draw.
        lr, p: learning rate and penalty exponent (default: [`paper_schedule`][tl_geometry.families.capacity.packing.paper_schedule]).
        device: "auto" (CUDA when available) or a device.
        return_vectors: also return the final (k, d) unit vectors.
        progress: tqdm bar over steps.

    Returns:
        ε* (float), or (ε*, vectors) with ``return_vectors``.
    """
    from tqdm.auto import tqdm

    _check_kd(k, d)
    sched = paper_schedule(k, d)
    n_steps = int(sched["steps"] if steps is None else steps)
    if n_steps < 1:
        raise InputError(f"steps must be >= 1, got {steps}")
    lr = sched["lr"] if lr is None else float(lr)
    p = sched["p"] if p is None else p
    if not (lr > 0) or not (p > 0):
        raise InputError(f"lr and p must be positive, got lr={lr}, p={p}")
    dev = _device(device)
    gen = torch.Generator(device=dev).manual_seed(int(seed))
    X = torch.nn.functional.normalize(torch.randn(k, d, generator=gen, device=dev), dim=1)
    X.requires_grad_(True)
    opt = torch.optim.Adam([X], lr=lr)
    eps = math.nan
    with torch.no_grad():
        for step in tqdm(range(n_steps), desc=f"packing k={k} d={d}", disable=not progress, leave=False):
            last = step == n_steps - 1
            X.grad, worst = packing_grad(X, p, with_max=last)
            if last:
                # the paper reads ε at its last step, before that step's update
                eps = worst
                break
            opt.step()
    U = torch.nn.functional.normalize(X.detach(), dim=1)
    return (eps, U) if return_vectors else eps


def _weight_(G: Tensor, p: float) -> Tensor:
    """In place: G ← G·|G|^(p−2) (= ∂|G|^p/∂G / p); |G|^q by repeated squaring for integer p."""
    if p < 2:  # |G|^(p−2) is infinite at the zeroed diagonal: sign(G)·|G|^(p−1), 0 there
        return G.copy_(G.sign().mul_(G.abs().pow_(p - 1)))  # (p = 1 used to loop forever below)
    if not float(p).is_integer():
        return G.mul_(G.abs().pow_(p - 2))
    q = int(p) - 2
    if q == 0:
        return G
    acc = G.abs() if q % 2 else None
    e, base = q // 2, G * G
    while e:
        if e & 1:
            acc = base.clone() if acc is None else acc.mul_(base)
        e >>= 1
        if e:
            base = base.mul_(base) if acc is not base else base * base
    assert acc is not None  # q >= 1 sets at least one factor
    return G.mul_(acc)


def packing_grad(X: Tensor, p: float, *, block: int = 256, with_max: bool = True) -> tuple[Tensor, float]:
    """∂L/∂X of L = Σ_{i≠j} |G_ij|^p, G = U Uᵀ, U = X / ‖X‖ (rows), and max_{i≠j} |G_ij|.

    Written out by hand: ∂L/∂G = p·G·|G|^(p−2) (off the diagonal), ∂L/∂U = 2 (∂L/∂G) U (G is
    symmetric), and through the row normalization ∂L/∂X = (g − U (g·U)) / ‖X‖. Equal to
    autograd's gradient (tested), computed ``block`` rows of G at a time so that the
    elementwise work stays in cache: about 4–8× faster than autograd on CPU, and memory
    O(block·k) instead of several k×k intermediates. ``with_max=False`` skips the max
    (returned as 0.0).
    """
    norms = X.norm(dim=1, keepdim=True)
    U = X / norms
    k = U.shape[0]
    g = torch.empty_like(U)
    worst = 0.0
    for a in range(0, k, block):
        Gb = U[a : a + block] @ U.T
        Gb[:, a : a + block].diagonal().zero_()
        if with_max:
            worst = max(worst, float(Gb.abs().max()))
        g[a : a + block] = _weight_(Gb, p) @ U
    g.mul_(2.0 * p)
    g.sub_(U * (g * U).sum(1, keepdim=True))
    return g.div_(norms), worst


# ----------------------------------------------------------------------------- fitting
@dataclass(frozen=True)
class FitResult(Tabular):
    """A fitted capacity form.

    Attributes:
        form: "jl", "adjusted" or "full".
        params: fitted constants (C; or C, a, b, c).
        r2: coefficient of determination on ε*.
        mape: mean absolute percentage error (%), over rows with ε* ≠ 0.
        nrmse: RMSE as a percentage of the data range.
        rmse: root mean square error.
        n: number of rows.
    """

    form: str
    params: Mapping[str, float]
    r2: float
    mape: float
    nrmse: float
    rmse: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "form": self.form,
            "params": dict(self.params),
            "r2": self.r2,
            "mape": self.mape,
            "nrmse": self.nrmse,
            "rmse": self.rmse,
            "n": self.n,
        }


def _predict(form: str, k: np.ndarray, d: np.ndarray, *params: float) -> np.ndarray:
    """ε(k, d) of a form with the paper's fitting conventions (0 where k ≤ d, clipped log)."""
    out = np.zeros_like(k, dtype=np.float64)
    if form in ("jl", "jl_random"):
        (C,) = params
        m = (k > 1) & (d > 0)
        out[m] = np.sqrt(C * np.log(k[m]) / d[m])
    elif form == "adjusted":
        (C,) = params
        m = k > d
        out[m] = np.sqrt(C * np.log(np.clip(k[m] / d[m], 1.00001, None)) / d[m])
    else:
        C, a, b, c = params
        m = k > d
        out[m] = np.sqrt(C * np.log(np.clip(k[m] ** a / d[m], 1.00001, None)) ** b / d[m] ** c)
    return out


_P0 = {
    "jl": ([1.0], ([0], [100]), ["C"]),
    "adjusted": ([1.0], ([0], [100]), ["C"]),
    "full": ([0.5, 1.0, 1.4, 1.0], ([0, 0.1, 0.1, 0.1], [10, 10, 10, 10]), ["C", "a", "b", "c"]),
}


def _as_rows(data: Any) -> np.ndarray:
    if isinstance(data, (str, os.PathLike)):
        data = load_reference(data)
    if isinstance(data, Mapping) or (isinstance(data, Sequence) and data and isinstance(data[0], Mapping)):
        recs = data if not isinstance(data, Mapping) else [data]
        data = [[r["k"], r["d"], r["eps"]] for r in recs]
    arr = np.asarray(data, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise InputError(f"data must be rows [k, d, eps*] (shape (n, 3)), got shape {arr.shape}")
    if len(arr) < 2:
        raise InputError(f"need at least 2 rows to fit, got {len(arr)}")
    if not np.all(np.isfinite(arr)):
        raise InputError("data contains NaN or inf")
    return arr


def fit(data: Any, *, form: str = "full", p0: Sequence[float] | None = None) -> FitResult:
    """Fit a capacity form to packing data ε*(k, d) with ``scipy.optimize.curve_fit``.

    Forms (capacity paper): ``"jl"`` ε = sqrt(C ln k / d); ``"adjusted"`` ε = sqrt(C ln(k/d)/d);
    ``"full"`` ε = sqrt(C ln(k^a/d)^b / d^c). As in the paper's ``vector_packing_graphs.py``,
    the k/d forms predict 0 for rows with k ≤ d and clip the log's argument at 1.00001; starting
    points and bounds are the paper's; MAPE skips rows with ε* = 0.

    Args:
        data: rows [k, d, ε*] (list, array, list of dicts with k/d/eps, or a JSON path).
        form: "jl" (also "jl_random"), "adjusted" or "full".
        p0: starting point (default: the paper's).

    Returns:
        [`FitResult`][tl_geometry.families.capacity.packing.FitResult].

    Examples:
        >>> import tl_geometry.families.capacity.packing as packing
        >>> rows = [[k, d, (1.293 * np.log(k / d) / d) ** 0.5] for k in (2000, 8000) for d in (64, 256)]
        >>> round(packing.fit(rows, form="adjusted").params["C"], 3)
        1.293
    """
    from scipy.optimize import curve_fit

    key = "jl" if form == "jl_random" else form
    if key not in _P0:
        raise InputError(f"unknown form {form!r}; expected 'jl', 'adjusted' or 'full'")
    arr = _as_rows(data)
    k, d, y = arr[:, 0], arr[:, 1], arr[:, 2]
    start, bounds, names = _P0[key]
    fn = lambda kd, *ps: _predict(key, kd[0], kd[1], *ps)  # noqa: E731
    popt, _ = curve_fit(fn, np.array([k, d]), y, p0=list(p0) if p0 is not None else start, bounds=bounds, maxfev=50000)
    pred = fn(np.array([k, d]), *popt)
    resid = y - pred
    r2 = 1.0 - float(np.sum(resid**2) / np.sum((y - y.mean()) ** 2))
    rmse = float(np.sqrt(np.mean(resid**2)))
    nz = y != 0
    mape = float(np.mean(np.abs(resid[nz] / y[nz])) * 100)
    nrmse = rmse / float(y.max() - y.min()) * 100
    return FitResult(
        form=key, params={n: float(v) for n, v in zip(names, popt)}, r2=r2, mape=mape, nrmse=nrmse, rmse=rmse, n=len(y)
    )


# ----------------------------------------------------------------------------- seeds
@dataclass(frozen=True)
class SeedSpread(Tabular):
    """ε* of one (k, d) cell over independent seeds of [`optimized_packing`][tl_geometry.families.capacity.packing.optimized_packing].

    Attributes:
        k, d: the cell.
        seeds: the seeds, ascending.
        eps: ε* per seed, in the order of ``seeds``.
        mean: mean over seeds.
        sd: sample standard deviation over seeds (ddof = 1).
        sem: standard error of the mean, sd / √n.
        n: number of seeds.
    """

    k: int
    d: int
    seeds: tuple[int, ...]
    eps: tuple[float, ...]
    mean: float
    sd: float
    sem: float
    n: int


def seed_spread(k: int, d: int, eps_by_seed: Mapping[int, float]) -> SeedSpread:
    """Mean, sd (ddof = 1) and standard error of ε* over seeds of one cell (at least 2 seeds).

    Examples:
        >>> s = seed_spread(2000, 32, {0: 0.40, 1: 0.41, 2: 0.42})
        >>> round(s.mean, 4), round(s.sd, 4), s.n
        (0.41, 0.01, 3)
    """
    _check_kd(int(k), int(d))
    if len(eps_by_seed) < 2:
        raise InputError(f"need at least 2 seeds for a spread of cell k={k}, d={d}, got {len(eps_by_seed)}")
    seeds = tuple(sorted(int(s) for s in eps_by_seed))
    eps = np.array([float(eps_by_seed[s]) for s in seeds], dtype=np.float64)
    if not np.all(np.isfinite(eps)):
        raise InputError(f"ε* of cell k={k}, d={d} contains NaN or inf: {eps.tolist()}")
    n = len(eps)
    sd = float(eps.std(ddof=1))
    return SeedSpread(int(k), int(d), seeds, tuple(eps.tolist()), float(eps.mean()), sd, sd / math.sqrt(n), n)


def cell_tolerance(sd: float, n: int, *, n_sd: float = 3.0) -> float:
    """Absolute tolerance on |one more run − the mean of our n seeds|: n_sd · sd · √(1 + 1/n).

    A published cell is one run of the same seeded descent (if the protocol is the same): its
    difference from the mean of n independent runs with spread sd has standard deviation
    sd·√(1 + 1/n). Our choice: n_sd = 3 (a two-sided 0.3 % test under normality; with n = 3 the
    sd itself is known to about ±50 %).
    """
    if not (sd >= 0 and math.isfinite(sd)) or int(n) < 1 or not (n_sd > 0):
        raise InputError(f"sd must be finite and >= 0, n >= 1 and n_sd > 0; got sd={sd}, n={n}, n_sd={n_sd}")
    return float(n_sd * sd * math.sqrt(1.0 + 1.0 / int(n)))


def fit_noise(
    data: Any, sd: Sequence[float], *, form: str = "adjusted", draws: int = 200, seed: int = 0
) -> dict[str, float]:
    """Standard deviation of each constant of [`fit`][tl_geometry.families.capacity.packing.fit] when each row's ε* moves by N(0, sd_i²).

    Monte Carlo: ``draws`` refits of the rows with independent Gaussian noise of standard
    deviation ``sd[i]`` added to row i's ε* (NumPy generator seeded with ``seed``). Use
    ``sd_i = sd_cell · √(1 + 1/n)`` for the difference between a fit on one run per cell and a
    fit on the mean of n seeds.

    Returns:
        {constant name: sd}, plus "r2" and "mape".
    """
    arr = _as_rows(data)
    sd_arr = np.asarray(sd, dtype=np.float64)
    if sd_arr.shape != (len(arr),) or not np.all(np.isfinite(sd_arr)) or np.any(sd_arr < 0):
        raise InputError(f"sd must be {len(arr)} finite values >= 0 (one per row), got {list(sd)}")
    if int(draws) < 2:
        raise InputError(f"draws must be >= 2, got {draws}")
    rng = np.random.default_rng(int(seed))
    out: dict[str, list[float]] = {}
    import warnings

    for _ in range(int(draws)):
        noisy = arr.copy()
        noisy[:, 2] = noisy[:, 2] + rng.standard_normal(len(arr)) * sd_arr
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # covariance not estimable: we only need the point fit
            f = fit(noisy, form=form)
        for name, v in {**f.params, "r2": f.r2, "mape": f.mape}.items():
            out.setdefault(name, []).append(float(v))
    return {name: float(np.std(v, ddof=1)) for name, v in out.items()}


def load_reference(path: str | os.PathLike) -> list[list[float]]:
    """Rows [k, d, ε*] from a packing JSON (the paper's format) or a [`sweep`][tl_geometry.families.capacity.packing.sweep] JSON-lines file."""
    import json
    from pathlib import Path

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such packing data file: {p}")
    text = p.read_text()
    if p.suffix == ".jsonl":
        from tl_geometry.runtime.jobs import read_records

        return [[r["params"]["k"], r["params"]["d"], r["eps"]] for r in read_records(p) if r.get("status") == "ok"]
    return json.loads(text)


def sweep(
    cells: Iterable[tuple[int, int]],
    results: str | os.PathLike,
    *,
    kind: str = "optimized",
    seed: int = 0,
    steps: int | None = None,
    trials: int = 1000,
    p: float | None = None,
    device: str | torch.device | None = "auto",
    progress: bool = True,
) -> list[list[float]]:
    """Run a packing sweep over (k, d) cells, resumably.

    Each finished cell is appended at once to ``results`` (JSON lines, via
    [`tl_geometry.runtime.jobs.run_jobs`][tl_geometry.runtime.jobs.run_jobs]); cells already in the file are skipped, so re-running
    after an interruption continues where it stopped.

    Args:
        cells: (k, d) pairs.
        results: path of the JSON-lines file.
        kind: "optimized" ([`optimized_packing`][tl_geometry.families.capacity.packing.optimized_packing]) or "random" ([`random_packing`][tl_geometry.families.capacity.packing.random_packing]).
        seed, steps, trials, device: passed to the packing function.
        p: penalty exponent of an optimized sweep (default: [`paper_schedule`][tl_geometry.families.capacity.packing.paper_schedule]'s; recorded
            in each cell's key only when given).

    Returns:
        All rows [k, d, ε*] in the file (this run's and earlier ones') for these settings.
    """
    import time

    from tl_geometry.runtime.jobs import ResultsFile, job_key, run_jobs

    if kind not in ("optimized", "random"):
        raise InputError(f"kind must be 'optimized' or 'random', got {kind!r}")
    jobs = []
    for k, d in cells:
        _check_kd(int(k), int(d))
        params = {"kind": kind, "k": int(k), "d": int(d), "seed": int(seed)}
        params.update({"steps": steps} if kind == "optimized" else {"trials": int(trials)})
        if p is not None and kind == "optimized":
            params["p"] = float(p)
        jobs.append(params)

    def one(params):
        t0 = time.perf_counter()
        if kind == "optimized":
            eps = optimized_packing(
                params["k"], params["d"], steps=params["steps"], seed=params["seed"], p=params.get("p"), device=device
            )
        else:
            eps = random_packing(params["k"], params["d"], trials=params["trials"], seed=params["seed"], device=device)
        return {"eps": eps, "seconds": time.perf_counter() - t0, "device": str(_device(device))}

    rf = ResultsFile(results)
    for _ in run_jobs(jobs, one, rf, progress=progress, desc=f"{kind} packing"):
        pass
    keys = {job_key(j) for j in jobs}
    return [
        [r["params"]["k"], r["params"]["d"], r["eps"]]
        for r in rf.records()
        if r.get("status") == "ok" and r.get("key") in keys
    ]
