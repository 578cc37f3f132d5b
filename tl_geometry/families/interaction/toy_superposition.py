"""Toy double descent: ReLU(x WᵀW + b) trained on sparse features, training-set size swept.

The interaction-law paper (arXiv 2605.27989, after Henighan et al. 2023, "Superposition,
Memorization, and Double Descent") trains the toy model ``f(x) = ReLU(x WᵀW + b)`` with
``W`` of shape (m, n) (n features squeezed into m hidden dimensions) on T sparse samples and
sweeps T: the test loss rises to a peak near the size where the model switches from storing
training points to storing features, then falls again. The paper pairs it with the AOFE ratio
of the closed-form AGOP of the toy model.

Closed-form AGOP (output space). With G = WᵀW (n × n, symmetric) and the ReLU mask
``m = 1[x G + b > 0]``, the Jacobian of f at x is ``J_{ji} = m_j G_ij``, so
``(J Jᵀ)_{jl} = m_j m_l (G G)_{jl}`` and ``E[J Jᵀ] = (G G) ⊙ E[m mᵀ]`` (the expectation over the
test samples) — the authors' code (``compute_agop_input_fast``) computes the same matrix.

Presets (`PRESETS`; every result row records its preset and any field changed from it):

* ``"paper"`` — the authors' public code (``Double_descent/data_scaling.py``): 1000 features → 2,
  sparsity 0.99, 3000 AdamW steps (lr 5e-3, weight decay 1e-2), PyTorch ``LinearLR`` warm-up from
  0.1 × lr over the first 25 % then ``CosineAnnealingLR`` to 0, Xavier-normal init, zero bias,
  each step a minibatch of min(2048, T) samples drawn **with replacement**; training data seeded
  ``12345 + T`` and a fixed 5000-sample test set seeded ``54321 + T`` (the same for every model
  seed); model seeds 0–4 seed the init and the minibatch draws; their 22 sizes 3 … 40,000.
  On CPU this draws the very numbers their script draws with ``--device cpu``.
* ``"henighan"`` — the settings this library used first (after Henighan et al.): 50,000
  full-batch steps, lr 1e-3, 5 % warm-up from 0 then cosine, init N(0, 1/n), 10,000 test samples,
  22 log-spaced sizes 3 … 40,000, one generator per (seed, T) for data, test set and init.
* ``"cpu"`` — ours, sized for a CPU minute: 100 features → 2, sparsity 0.95, 2000 full-batch steps,
  lr 1e-2 (otherwise as ``"henighan"``).

Data: each feature is present independently with probability ``1 - sparsity`` with a value
uniform in [0, 1); every sample is scaled to unit norm (empty samples stay zero). Loss: squared
error summed over features, averaged over samples (the paper's ``memorization_loss`` with unit
importance).

Entry point for scripts: [`run`][tl_geometry.families.interaction.toy_superposition.run] (``run(preset="paper", sizes=(500,), seeds=range(5),
out="toy.jsonl")``), resumable through its JSON-lines file.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from tl_geometry.base import _checks
from tl_geometry.errors import InputError

logger = logging.getLogger(__name__)

__all__ = [
    "ToyConfig",
    "ToyResult",
    "toy_data",
    "toy_agop",
    "train_toy",
    "toy_sweep",
    "summarize",
    "correlations",
    "plot_toy",
    "run",
    "lr_factor",
    "PRESETS",
    "PRESET_SIZES",
    "PRESET_SEEDS",
    "PAPER_TOY",
    "HENIGHAN_TOY",
    "CPU_TOY",
    "PAPER_SIZES",
    "HENIGHAN_SIZES",
    "CPU_SIZES",
]

_INITS = ("normal", "xavier")


@dataclass(frozen=True)
class ToyConfig:
    """Settings of one toy run (every field is part of the results-file key).

    Attributes:
        n_features: n, the input/output dimension.
        n_hidden: m, the bottleneck (2 in the paper).
        sparsity: probability that a feature is zero (0.99 in the paper).
        steps: optimizer steps.
        lr: peak AdamW learning rate.
        weight_decay: AdamW weight decay.
        warmup: fraction of the steps spent in linear warm-up.
        n_test: test samples (fresh draws; the AGOP is taken over them too).
        seed: the model seed (with ``data_seed`` set) or the one seed of data and init (without).
        preset: name of the preset these settings come from (recorded in every row).
        init: ``"normal"`` (N(0, 1/n), ours) or ``"xavier"`` (``nn.init.xavier_normal_``,
            std √(2/(n + m)), the paper's code).
        warmup_start: None: the factor ramps ``(step + 1) / n_warm`` from ≈ 0 (ours); a number
            s: PyTorch ``LinearLR(start_factor=s)`` (factor ``s + (1 − s)·step/n_warm``, the paper's
            code uses 0.1). Cosine decay to 0 after the warm-up either way.
        batch_size: None: full batch (ours); B: every step draws min(B, T) training indices
            uniformly **with replacement** (the paper's code, B = 2048, so even T ≤ 2048 is a
            bootstrap resample each step).
        data_seed, test_seed: None (ours): one generator seeded by (seed, T) draws the training
            set, the test set and the init, so each seed has its own data. Integers (the paper's):
            training data from ``data_seed + T``, test data from ``test_seed + T`` (mask drawn
            before values, as in the paper's ``generate_batch``), identical for every model seed;
            ``seed`` then seeds the init and the minibatch draws only.
    """

    n_features: int = 1000
    n_hidden: int = 2
    sparsity: float = 0.99
    steps: int = 3000
    lr: float = 5e-3
    weight_decay: float = 1e-2
    warmup: float = 0.25
    n_test: int = 5000
    seed: int = 0
    preset: str = "paper"
    init: str = "xavier"
    warmup_start: float | None = 0.1
    batch_size: int | None = 2048
    data_seed: int | None = 12345
    test_seed: int | None = 54321

    def __post_init__(self):
        for name, check in _TOY_FIELDS.items():  # types, finiteness, ranges (the one validation layer)
            check(getattr(self, name), name)
        if self.n_features < 2 or self.n_hidden < 1:
            raise InputError(f"need n_features >= 2 and n_hidden >= 1, got {self.n_features}, {self.n_hidden}")
        if not (0.0 <= self.sparsity < 1.0):
            raise InputError(f"sparsity must lie in [0, 1), got {self.sparsity}")
        if self.steps < 1 or self.n_test < 1 or self.lr <= 0:
            raise InputError(f"steps, n_test and lr must be positive, got {self.steps}, {self.n_test}, {self.lr}")
        if not (0.0 <= self.warmup < 1.0):
            raise InputError(f"warmup is a fraction of the steps in [0, 1), got {self.warmup}")
        if self.init not in _INITS:
            raise InputError(f"init must be one of {_INITS}, got {self.init!r}")
        if self.warmup_start is not None and not (0.0 < self.warmup_start <= 1.0):
            raise InputError(f"warmup_start must be None or in (0, 1], got {self.warmup_start}")
        if self.batch_size is not None and (isinstance(self.batch_size, bool) or int(self.batch_size) < 1):
            raise InputError(f"batch_size must be None (full batch) or a positive integer, got {self.batch_size!r}")
        if (self.data_seed is None) != (self.test_seed is None):
            raise InputError(
                f"data_seed and test_seed are set together or not at all, got {self.data_seed}, {self.test_seed}"
            )
        if not isinstance(self.preset, str) or not self.preset:
            raise InputError(f"preset must be a non-empty name, got {self.preset!r}")

    def to_dict(self) -> dict:
        return asdict(self)


_TOY_FIELDS: dict[str, _checks.Check] = {
    "n_features": _checks.int_at_least(2),
    "n_hidden": _checks.int_at_least(1),
    "sparsity": _checks.real_in(0.0, 1.0, hi_open=True),
    "steps": _checks.int_at_least(1),
    "lr": _checks.positive_real(),
    "weight_decay": _checks.real_in(0.0),
    "warmup": _checks.real_in(0.0, 1.0, hi_open=True),
    "n_test": _checks.int_at_least(1),
    "seed": _checks.SEED,
    "warmup_start": _checks.real_in(0.0, 1.0, lo_open=True, none_ok=True),
    "batch_size": _checks.int_at_least(1, none_ok=True),
    "data_seed": _checks.int_at_least(0, hi=_checks.SEED_MAX, none_ok=True),
    "test_seed": _checks.int_at_least(0, hi=_checks.SEED_MAX, none_ok=True),
}

PAPER_TOY = ToyConfig()
"""The authors' code (``Double_descent/data_scaling.py``, ``main()``): see the module docstring."""
PAPER_SIZES = (
    (3, 5, 8, 10, 15, 30, 50, 100, 200, 500)
    + tuple(int(round(x)) for x in np.logspace(np.log10(1000), np.log10(20000), 10).tolist())
    + (30_000, 40_000)
)
"""Their grid: 10 small sizes, 10 log-spaced 1000 … 20,000, then 30,000 and 40,000."""
HENIGHAN_TOY = ToyConfig(
    n_features=1000,
    n_hidden=2,
    sparsity=0.99,
    steps=50_000,
    lr=1e-3,
    weight_decay=1e-2,
    warmup=0.05,
    n_test=10_000,
    preset="henighan",
    init="normal",
    warmup_start=None,
    batch_size=None,
    data_seed=None,
    test_seed=None,
)
"""The settings this library used first (after Henighan et al. 2023)."""
HENIGHAN_SIZES = tuple(int(round(x)) for x in torch.logspace(math.log10(3), math.log10(40_000), 22).tolist())
CPU_TOY = dataclasses.replace(
    HENIGHAN_TOY, n_features=100, sparsity=0.95, steps=2000, lr=1e-2, n_test=2000, preset="cpu"
)
"""Scaled down for a CPU minute (sparsity 0.95 so that 100 features still show the peak)."""
CPU_SIZES = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)

PRESETS: dict[str, ToyConfig] = {"paper": PAPER_TOY, "henighan": HENIGHAN_TOY, "cpu": CPU_TOY}
PRESET_SIZES: dict[str, tuple[int, ...]] = {"paper": PAPER_SIZES, "henighan": HENIGHAN_SIZES, "cpu": CPU_SIZES}
PRESET_SEEDS: dict[str, tuple[int, ...]] = {"paper": (0, 1, 2, 3, 4), "henighan": (0,), "cpu": (0,)}

METRICS = ("train_loss", "test_loss", "aofe_ratio", "aofe", "agop_cos2", "wtw_aofe_ratio", "wtw_cos2", "nfa_pearson")
"""Per-run numbers every record carries (besides n_train, seed, preset, overrides)."""


def overrides(cfg: ToyConfig) -> dict:
    """Fields of ``cfg`` (other than ``seed``) that differ from its named preset ({} if none or unknown)."""
    base = PRESETS.get(cfg.preset)
    if base is None:
        return {}
    a, b = cfg.to_dict(), base.to_dict()
    return {k: a[k] for k in a if k != "seed" and a[k] != b[k]}


@dataclass(frozen=True)
class ToyResult:
    """One trained toy model.

    Attributes:
        n_train: training-set size T.
        seed: the model seed.
        preset: the preset name of the settings.
        train_loss / test_loss: squared error summed over features, averaged over samples.
        aofe_ratio / aofe: AOFE ratio and AOFE of the closed-form AGOP on the test set.
        agop_cos2 / wtw_cos2: [`weighted_mean_cos2`][tl_geometry.metrics.aofe.weighted_mean_cos2] of the
            AGOP and of WᵀW (the paper's ``agop_weighted_mean_cos2`` / ``wtw_weighted_mean_cos2``).
        wtw_aofe_ratio: AOFE ratio of WᵀW (the paper's ``sup_offdiag_energy_ratio``).
        nfa_pearson: [`offdiag_pearson`][tl_geometry.metrics.nfa.offdiag_pearson] of WᵀW and the AGOP
            (the paper's ``wtw_agop_offdiag_pearson``).
        agop: the (n, n) closed-form AGOP. W, b: the trained parameters.

    A statistic that is undefined for the trained model (e.g. an all-zero AGOP) is NaN.
    """

    n_train: int
    seed: int
    preset: str
    train_loss: float
    test_loss: float
    aofe_ratio: float
    aofe: float
    agop_cos2: float
    wtw_aofe_ratio: float
    wtw_cos2: float
    nfa_pearson: float
    agop: Float[Tensor, "n n"]
    W: Float[Tensor, "m n"]
    b: Float[Tensor, " n"]

    def to_dict(self) -> dict:
        return {
            "n_train": self.n_train,
            "seed": self.seed,
            "preset": self.preset,
            **{k: getattr(self, k) for k in METRICS},
        }


def toy_data(
    n: int, n_features: int, sparsity: float, *, generator: torch.Generator, mask_first: bool = False
) -> Float[Tensor, "n f"]:
    """``n`` sparse samples: features present w.p. ``1 - sparsity``, values U[0, 1), unit norm.

    ``mask_first=True`` draws the presence mask before the values, as the paper's
    ``generate_batch`` does (so the same generator yields their numbers); otherwise values first.
    """
    if n < 1:
        raise InputError(f"need at least one sample, got {n}")
    if mask_first:
        mask = torch.rand(n, n_features, generator=generator) <= 1.0 - sparsity
        x = torch.rand(n, n_features, generator=generator) * mask
        return x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)
    x = torch.rand(n, n_features, generator=generator)
    x = x * (torch.rand(n, n_features, generator=generator) >= sparsity)
    norm = x.norm(dim=1, keepdim=True)
    return torch.where(norm > 0, x / norm.clamp_min(1e-12), x)


def toy_agop(W: Float[Tensor, "m n"], b: Float[Tensor, " n"], X: Float[Tensor, "s n"]) -> Float[Tensor, "n n"]:
    """Closed-form AGOP ``(G G) ⊙ E[m mᵀ]`` of ``ReLU(x WᵀW + b)`` over the rows of ``X``."""
    G = W.T @ W
    mask = ((X @ G + b) > 0).to(W.dtype)
    return (G @ G) * (mask.T @ mask) / X.shape[0]


def lr_factor(step: int, cfg: ToyConfig) -> float:
    """Learning-rate factor used at optimizer step ``step`` (0-based): warm-up, then cosine to 0.

    With ``warmup_start = s`` it equals PyTorch's ``LinearLR(start_factor=s,
    total_iters=n_warm)`` stepped during the warm-up and ``CosineAnnealingLR(T_max=steps - n_warm)``
    after it, as the paper's code chains them (``n_warm = max(1, int(steps · warmup))``).
    """
    if cfg.warmup_start is None:
        n_warm = int(cfg.warmup * cfg.steps)
        if step < n_warm:
            return (step + 1) / n_warm
        t = (step - n_warm) / max(1, cfg.steps - n_warm)
        return 0.5 * (1 + math.cos(math.pi * t))
    n_warm = max(1, int(cfg.steps * cfg.warmup))
    if step < n_warm:
        return cfg.warmup_start + (1.0 - cfg.warmup_start) * step / n_warm
    return 0.5 * (1 + math.cos(math.pi * (step - n_warm) / max(1, cfg.steps - n_warm)))


def _loss(W: Tensor, b: Tensor, X: Tensor) -> Tensor:
    out = torch.relu(X @ W.T @ W + b)
    return ((out - X) ** 2).sum(dim=1).mean()


def _safe(fn, *args) -> float:
    try:
        return float(fn(*args))
    except ValueError:  # undefined for this model (all-zero or constant matrix)
        return float("nan")


def train_toy(n_train: int, cfg: ToyConfig = CPU_TOY) -> ToyResult:
    """Train one toy model on ``n_train`` samples; evaluate on ``cfg.n_test`` fresh samples."""
    from tl_geometry.metrics.interaction import aofe, offdiag_pearson, weighted_mean_cos2

    if int(n_train) < 1:
        raise InputError(f"n_train must be >= 1, got {n_train}")
    T = int(n_train)
    W = torch.empty(cfg.n_hidden, cfg.n_features)
    if cfg.data_seed is None:  # ours: one generator for data, test set, init and minibatches
        g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + T)
        X = toy_data(T, cfg.n_features, cfg.sparsity, generator=g)
        X_test = toy_data(cfg.n_test, cfg.n_features, cfg.sparsity, generator=g)
        gm = g
    else:  # the paper's: data fixed per size, the model seed drives init and minibatches
        assert cfg.data_seed is not None and cfg.test_seed is not None  # set together (ToyConfig checks)
        X = toy_data(
            T, cfg.n_features, cfg.sparsity, generator=torch.Generator().manual_seed(cfg.data_seed + T), mask_first=True
        )
        X_test = toy_data(
            cfg.n_test,
            cfg.n_features,
            cfg.sparsity,
            generator=torch.Generator().manual_seed(cfg.test_seed + T),
            mask_first=True,
        )
        gm = torch.Generator().manual_seed(cfg.seed)
    with torch.no_grad():
        if cfg.init == "xavier":
            torch.nn.init.xavier_normal_(W, generator=gm)
        else:
            W.copy_(torch.randn(cfg.n_hidden, cfg.n_features, generator=gm) / math.sqrt(cfg.n_features))
    W.requires_grad_(True)
    b = torch.zeros(cfg.n_features, requires_grad=True)
    opt = torch.optim.AdamW([W, b], lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, cfg))
    bs = None if cfg.batch_size is None else min(int(cfg.batch_size), T)
    for _ in range(cfg.steps):
        opt.zero_grad(set_to_none=True)
        xb = X if bs is None else X[torch.randint(0, T, (bs,), generator=gm)]
        loss = _loss(W, b, xb)
        loss.backward()
        opt.step()
        sched.step()
    with torch.no_grad():
        train_loss = float(_loss(W, b, X))
        test_loss = float(_loss(W, b, X_test))
        A = toy_agop(W, b, X_test)
        G = W.T @ W
        a = aofe(A) if float((A**2).sum()) > 0 else None
    return ToyResult(
        T,
        int(cfg.seed),
        cfg.preset,
        train_loss,
        test_loss,
        float(a.ratio) if a else float("nan"),
        float(a.aofe) if a else float("nan"),
        _safe(weighted_mean_cos2, A),
        _safe(lambda M: aofe(M).ratio, G),
        _safe(weighted_mean_cos2, G),
        _safe(offdiag_pearson, G, A),
        A,
        W.detach().clone(),
        b.detach().clone(),
    )


def toy_sweep(
    sizes: Sequence[int] = CPU_SIZES,
    cfg: ToyConfig = CPU_TOY,
    *,
    seeds: Iterable[int] | None = None,
    results: Any = None,
    progress: bool = True,
) -> list[dict]:
    """Train one toy model per (training-set size, seed); each finished run is appended to ``results``.

    Args:
        sizes: training-set sizes T.
        cfg: shared settings (its ``seed`` is replaced by each of ``seeds``).
        seeds: model seeds (default: ``(cfg.seed,)``).
        results: path of a JSON-lines results file (resumes: finished runs are skipped), or None
            to keep everything in memory.

    Returns:
        One record per run (``n_train``, ``seed``, ``preset``, ``overrides`` and [`METRICS`][tl_geometry.families.interaction.toy_superposition.METRICS]),
        sorted by size then seed, including runs finished by earlier calls.
    """
    from tl_geometry.runtime.jobs import ResultsFile, job_key, run_jobs

    if not isinstance(sizes, (list, tuple, range)) or not all(_checks.is_int(s) for s in sizes):
        raise _checks.ArgumentError(
            f"sizes must be a non-empty list of positive integers, got {_checks.describe(sizes)}"
        )
    sizes = [int(s) for s in sizes]
    if not sizes or min(sizes) < 1:
        raise InputError(f"sizes must be a non-empty list of positive integers, got {sizes}")
    seeds = [int(cfg.seed)] if seeds is None else [_checks.seed(s, "each seed") for s in seeds]
    if not seeds:
        raise InputError("seeds must name at least one seed")
    ov = overrides(cfg)
    jobs = [
        {"experiment": "toy", "n_train": s, **dataclasses.replace(cfg, seed=k).to_dict()} for s in sizes for k in seeds
    ]

    def one(params: Mapping[str, Any]) -> dict:
        return {
            **train_toy(params["n_train"], dataclasses.replace(cfg, seed=params["seed"])).to_dict(),
            "overrides": ov,
        }

    if results is None:
        recs = [one(j) for j in jobs]
    else:
        rf = results if isinstance(results, ResultsFile) else ResultsFile(results)
        for _ in run_jobs(jobs, one, rf, progress=progress, desc="toy runs"):
            pass
        keys = {job_key(j) for j in jobs}
        fields = ("n_train", "seed", "preset", "overrides", *METRICS)
        recs = [{k: r.get(k) for k in fields} for r in rf.records() if r.get("key") in keys and r.get("status") == "ok"]
    return sorted(recs, key=lambda r: (r["n_train"], r["seed"]))


def summarize(records: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Mean and standard deviation (ddof = 0, as the paper's ``summary.csv``) over seeds per size.

    Returns one dict per (preset, n_train): ``n_train``, ``preset``, ``n_seeds`` and
    ``<metric>_mean`` / ``<metric>_std`` for each of [`METRICS`][tl_geometry.families.interaction.toy_superposition.METRICS] (NaN runs ignored).
    """
    groups: dict[tuple, list] = {}
    for r in records:
        groups.setdefault((r.get("preset"), r["n_train"]), []).append(r)
    out = []
    for (preset, T), rs in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        row = {"n_train": T, "preset": preset, "n_seeds": len(rs)}
        for m in METRICS:
            v = np.array([float(r.get(m, float("nan"))) for r in rs], dtype=np.float64)
            v = v[np.isfinite(v)]
            row[f"{m}_mean"] = float(v.mean()) if v.size else float("nan")
            row[f"{m}_std"] = float(v.std()) if v.size else float("nan")
        out.append(row)
    return out


def correlations(
    records: Sequence[Mapping[str, Any]],
    *,
    large_from: int = 1000,
    metrics: Sequence[str] = ("aofe_ratio", "aofe", "agop_cos2", "wtw_aofe_ratio", "wtw_cos2", "nfa_pearson"),
):
    """Pearson and Spearman correlation of each metric with the test loss over all runs (one
    point per size and seed, as the paper's ``print_correlations``), globally and for
    ``n_train >= large_from``: see [`tl_geometry.metrics.interaction.loss_correlations`][tl_geometry.metrics.interaction.loss_correlations]."""
    from tl_geometry.metrics.interaction import loss_correlations

    loss = [float(r["test_loss"]) for r in records]
    sizes = [int(r["n_train"]) for r in records]
    return loss_correlations(
        loss, {m: [float(r[m]) for r in records] for m in metrics}, sizes=sizes, large_from=large_from
    )


def run(
    preset: str = "paper",
    *,
    sizes: Sequence[int] | None = None,
    seeds: Iterable[int] | None = None,
    out: Any = None,
    progress: bool = True,
    **changes,
) -> list[dict]:
    """Run the toy sweep with a named preset (the entry point for scripts).

    Args:
        preset: ``"paper"``, ``"henighan"`` or ``"cpu"`` (see the module docstring).
        sizes: training-set sizes (default: the preset's grid, `PRESET_SIZES`).
        seeds: model seeds (default: the preset's, `PRESET_SEEDS`; the paper's 0–4).
        out: JSON-lines results file (resumed when it exists), or None to keep results in memory.
        **changes: fields of [`ToyConfig`][tl_geometry.families.interaction.toy_superposition.ToyConfig] to change (e.g. ``steps=300``); each row records
            them under ``overrides``.

    Returns:
        One record per run, as [`toy_sweep`][tl_geometry.families.interaction.toy_superposition.toy_sweep]; [`summarize`][tl_geometry.families.interaction.toy_superposition.summarize] averages over seeds.

    Examples:
        >>> recs = run("cpu", sizes=(4,), steps=5, n_test=20, progress=False)
        >>> recs[0]["preset"], recs[0]["overrides"], recs[0]["n_train"]
        ('cpu', {'steps': 5, 'n_test': 20}, 4)
    """
    if preset not in PRESETS:
        raise InputError(f"unknown toy preset {preset!r}; accepted: {', '.join(PRESETS)}")
    bad = sorted(set(changes) - {f.name for f in dataclasses.fields(ToyConfig)} | ({"preset", "seed"} & set(changes)))
    if bad:
        raise InputError(
            f"unknown or reserved ToyConfig fields {bad}; change any of "
            f"{[f.name for f in dataclasses.fields(ToyConfig) if f.name not in ('preset', 'seed')]} "
            "(pass seeds=... for seeds)"
        )
    cfg = dataclasses.replace(PRESETS[preset], **changes)
    return toy_sweep(
        PRESET_SIZES[preset] if sizes is None else sizes,
        cfg,
        seeds=PRESET_SEEDS[preset] if seeds is None else seeds,
        results=out,
        progress=progress,
    )


def plot_toy(records: Sequence[Mapping[str, Any]], path: Any = None):
    """Test loss and AOFE ratio against training-set size (log x; mean ± std over seeds); returns the figure."""
    from tl_geometry.render.plotting import pyplot

    plt = pyplot()  # the Agg backend, or Jupyter's inline one (one place decides)

    if not records:
        raise InputError("no toy records to plot")
    summ = summarize(records)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax2 = ax.twinx()
    for j, preset in enumerate(dict.fromkeys(s["preset"] for s in summ)):
        rs = [s for s in summ if s["preset"] == preset]
        x = np.array([s["n_train"] for s in rs])
        tag = f" ({preset})" if preset else ""
        col = f"C{2 * j}"
        for key, style, alpha, label, axis in (
            ("test_loss", "o-", 1.0, "test loss", ax),
            ("train_loss", "o--", 0.4, "train loss", ax),
            ("aofe_ratio", "s-", 1.0, "AOFE ratio", ax2),
        ):
            m = np.array([s[f"{key}_mean"] for s in rs])
            sd = np.array([s[f"{key}_std"] for s in rs])
            c = f"C{2 * j + 1}" if key == "aofe_ratio" else col
            axis.plot(x, m, style, color=c, alpha=alpha, label=label + tag)
            if key != "train_loss" and max(s["n_seeds"] for s in rs) > 1:
                axis.fill_between(x, m - sd, m + sd, color=c, alpha=0.15)
    ax.set_xscale("log")
    ax.set_xlabel("training-set size T")
    ax.set_ylabel("loss", color="C0")
    ax2.set_ylabel("AOFE ratio", color="C1")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
