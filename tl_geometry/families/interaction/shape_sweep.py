"""TinyGPT shape sweep: test cross-entropy against R_D/W = depth / width at fixed parameter budgets.

The interaction-law paper (arXiv 2605.27989; code: github.com/wenjie1835/Interaction_Law,
``budget_scaling/transformer_ntp_shape_sweep.py``) trains byte-level decoder-only TinyGPTs at
fixed parameter budgets, one shape per depth, and finds the best test cross-entropy for R_D/W in
[0.023, 0.047]. This module offers that protocol and ours by name:

``preset="paper"`` — the authors' model and training, matched to their code:
    * model: vocab 256, learned positions (n_ctx 256), pre-LN blocks, d_mlp = 4·d, exact GELU,
      head_dim 4 (n_heads = d / 4), **no biases in any linear layer** (LayerNorms keep theirs),
      final LayerNorm, untied unembedding; init N(0, 0.02), residual projections (W_O, W_out)
      N(0, 0.02/√(2L)). ``param_count(5, 120) = 958,800``, as in their results.
    * shapes: per depth, the widest d_model (a multiple of 4) in [16, 1024] whose count fits the
      budget; the rest of the budget is padding, and a shape with more than 20 % padding is
      skipped. Their padding is a zero parameter vector that no loss depends on (it never has a
      gradient, so AdamW, weight decay included, never moves it); we record the padding instead
      of allocating it.
    * training: AdamW (lr 3e-4, weight decay 0.01, batch 64 windows of 256 bytes), linear warmup
      of 300 steps then cosine to 0 over ``ceil(1.5 · base)`` steps, base = max(200,
      ⌊⌊60 · budget⌋ / 256⌋ // 64) (60 training bytes per budgeted parameter), gradient clipping
      at norm 1.0, validation every 200 steps, early stopping after ``base`` steps once the
      validation CE has not improved for 10 evaluations, best-validation weights restored.
    * AGOP: output space (64 × 64; P drawn as ``torch.manual_seed(42); randn(64, 256) / 8``)
      on training windows; we compute it exactly (64 vector-Jacobian products per batch) where
      the authors averaged 64 JVP probes × 4 batches of 128 windows (same expectation).
``preset="library"`` — our earlier CPU-sized TinyGPT: a TransformerLens default model with
    every bias (counted in the budget), widths from d_head up, no padding rule, no clipping, no
    early stopping, warmup as a fraction of the steps.

Every record carries its ``preset`` (it is part of the job parameters) together with both the
output-space and the loss-gradient AOFE ratio (``space="output"`` and ``space="loss"`` of
[`tl_geometry.agop`][tl_geometry.families.interaction.agop]).

Each finished run is one record in a JSON-lines results file ([`tl_geometry.runtime.jobs`][tl_geometry.runtime.jobs]); a sweep
that is killed resumes where it stopped, repeating no run. [`grid`][tl_geometry.families.interaction.shapes.grid] / [`paper_grid`][tl_geometry.families.interaction.shapes.paper_grid]
list the shapes (with parameters and padding) without training anything.

Layout, one module per job (every name stays importable from this module):

* [`tl_geometry.families.interaction.tinygpt`][tl_geometry.families.interaction.tinygpt] — the presets, the model
  ([`build_model`][tl_geometry.families.interaction.tinygpt.build_model]) and its parameter count ([`param_count`][tl_geometry.families.interaction.tinygpt.param_count]);
* [`tl_geometry.families.interaction.shapes`][tl_geometry.families.interaction.shapes] — the grids of shapes per budget and depth, and the
  authors' base steps;
* [`tl_geometry.families.interaction.byte_text`][tl_geometry.families.interaction.byte_text] — the training text as bytes and its windows;
* [`tl_geometry.families.interaction.tinygpt_training`][tl_geometry.families.interaction.tinygpt_training] — one run ([`train_run`][tl_geometry.families.interaction.tinygpt_training.train_run]);
* [`tl_geometry.families.interaction.shape_frontier`][tl_geometry.families.interaction.shape_frontier] — the records read back
  ([`frontier`][tl_geometry.families.interaction.shape_frontier.frontier], [`plot_sweep`][tl_geometry.families.interaction.shape_frontier.plot_sweep]);
* this module — the settings ([`SweepConfig`][tl_geometry.families.interaction.shape_sweep.SweepConfig], [`PAPER_SWEEP`][tl_geometry.families.interaction.shape_sweep.PAPER_SWEEP]) and the resumable
  runner ([`plan`][tl_geometry.families.interaction.shape_sweep.plan], [`shape_sweep`][tl_geometry.families.interaction.shape_sweep.shape_sweep]).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from tl_geometry.base import _checks
from tl_geometry.errors import InputError
from tl_geometry.families.interaction.byte_text import byte_data
from tl_geometry.families.interaction.shape_frontier import frontier, plot_sweep
from tl_geometry.families.interaction.shapes import (
    PAPER_BUDGETS,
    PAPER_DEPTHS,
    PAPER_MAX_PADDING,
    PAPER_WIDTH_RANGE,
    Shape,
    grid,
    paper_base_steps,
    paper_grid,
    shapes_for_budget,
    width_for_budget,
)
from tl_geometry.families.interaction.tinygpt import (
    PRESETS,
    _check_preset,
    build_model,
    n_params,
    param_count,
    tinygpt_config,
    trainable_params,
)
from tl_geometry.families.interaction.tinygpt_training import PAPER_PROJECTION_SEED, train_run

__all__ = [
    "SweepConfig",
    "Shape",
    "PRESETS",
    "tinygpt_config",
    "build_model",
    "param_count",
    "n_params",
    "width_for_budget",
    "shapes_for_budget",
    "grid",
    "paper_grid",
    "paper_base_steps",
    "byte_data",
    "train_run",
    "shape_sweep",
    "frontier",
    "plot_sweep",
    "PAPER_BUDGETS",
    "PAPER_DEPTHS",
    "CPU_BUDGETS",
    "plan",
    "trainable_params",
    "PAPER_SWEEP",
    "PAPER_WIDTH_RANGE",
    "PAPER_MAX_PADDING",
    "PAPER_PROJECTION_SEED",
]

CPU_BUDGETS = (1.0e5, 2.0e5, 3.0e5)
"""The default budgets of [`SweepConfig`][tl_geometry.families.interaction.shape_sweep.SweepConfig] (CPU-sized)."""


@dataclass(frozen=True)
class SweepConfig:
    """Settings of a shape sweep (everything but budget/depth/width/device goes into each run's key).

    Attributes:
        preset: "library" (default, CPU-sized) or "paper" (the authors' TinyGPT: no linear biases,
            widths in [16, 1024], > 20 % padding skipped; see the module docstring).
            [`PAPER_SWEEP`][tl_geometry.families.interaction.shape_sweep.PAPER_SWEEP] is the authors' whole protocol.
        budgets: parameter budgets (CPU default 0.1M–0.3M; [`PAPER_BUDGETS`][tl_geometry.families.interaction.shapes.PAPER_BUDGETS] for the paper's).
        depths: depths to try (default 1 … ``max_depth``, skipping depths with no width).
        max_depth: upper depth when ``depths`` is None.
        d_head: head dimension (4 in the paper); n_heads = d_model / d_head.
        n_ctx: context length in bytes (256 in the paper).
        steps, batch_size, lr, weight_decay: AdamW; ``steps`` is the base number of steps.
        warmup: linear warmup as a fraction of the steps (< 1) or a number of steps (>= 1; 300 in
            the paper); then cosine decay to 0.
        grad_clip: clip the gradient norm to this (1.0 in the paper; None: no clipping).
        patience: early stopping: after ``steps`` steps, stop once the validation CE has not
            improved for this many evaluations, and restore the best-validation weights (10 in the
            paper; None: off, no validation split).
        eval_every: evaluate the validation CE every this many steps (200 in the paper).
        max_train_factor: train for up to ``ceil(max_train_factor × steps)`` steps, the cosine
            running over all of them (1.5 in the paper).
        source: training text: "pydoc+shakespeare" (offline default), "pydoc", "shakespeare", a
            text file, or a Hugging Face dataset name (needs ``datasets`` and the network).
        test_fraction: the last fraction of the bytes is the test split (with early stopping,
            the same number of bytes before it is the validation split).
        eval_seqs: test (and validation) windows for the cross-entropy; None: every
            non-overlapping window of the split (the paper).
        n_agop_seqs: windows for the AGOPs. agop_split: "test" (library) or "train" (the paper's
            AGOP windows are drawn from the training bytes).
        seed: data order and initialization.
        bytes_per_param: when set, each run trains for
            ``ceil(bytes_per_param × n_params / (batch_size × n_ctx))`` steps (library) or the
            authors' ``max(200, ⌊⌊bytes_per_param × budget⌋ / n_ctx⌋ // batch_size)`` (paper)
            instead of ``steps``.
        device: where to train ("cpu", "cuda"); not part of a run's key.
    """

    budgets: tuple[float, ...] = CPU_BUDGETS
    depths: tuple[int, ...] | None = None
    max_depth: int = 6
    d_head: int = 4
    n_ctx: int = 64
    steps: int = 300
    batch_size: int = 16
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup: float = 0.1
    source: str = "pydoc+shakespeare"
    test_fraction: float = 0.1
    eval_seqs: int | None = 64
    n_agop_seqs: int = 8
    seed: int = 0
    bytes_per_param: float | None = None
    preset: str = "library"
    grad_clip: float | None = None
    patience: int | None = None
    eval_every: int = 200
    max_train_factor: float = 1.0
    agop_split: str = "test"
    device: str = "cpu"

    def __post_init__(self):
        _check_preset(self.preset)
        _check_fields(self, _SWEEP_FIELDS)
        for b in self.budgets if isinstance(self.budgets, (tuple, list)) else [self.budgets]:
            _checks.real(b, "each of budgets", lo=0.0, lo_open=True, why="a parameter count")
        if self.depths is not None:
            if not isinstance(self.depths, (tuple, list)):
                raise _checks.ArgumentError(
                    f"depths must be a list of integers >= 1, got {_checks.describe(self.depths)}"
                )
            for depth in self.depths:
                _checks.integer(depth, "each of depths", lo=1)
        if not self.budgets or min(self.budgets) <= 0:
            raise InputError(f"budgets must be positive numbers, got {self.budgets}")
        if self.depths is not None and (not self.depths or min(self.depths) < 1):
            raise InputError(f"depths must be positive integers, got {self.depths}")
        for k in ("max_depth", "d_head", "n_ctx", "steps", "batch_size", "n_agop_seqs", "eval_every"):
            if int(getattr(self, k)) < 1:
                raise InputError(f"{k} must be >= 1, got {getattr(self, k)}")
        if self.eval_seqs is not None and int(self.eval_seqs) < 1:
            raise InputError(f"eval_seqs must be >= 1 or None (every window), got {self.eval_seqs}")
        if self.bytes_per_param is not None and self.bytes_per_param <= 0:
            raise InputError(f"bytes_per_param must be positive, got {self.bytes_per_param}")
        if not (0 < self.test_fraction < 0.5) or self.warmup < 0 or self.lr <= 0:
            raise InputError("need 0 < test_fraction < 0.5, warmup >= 0 and lr > 0")
        if self.warmup >= 1 and self.warmup != int(self.warmup):
            raise InputError(f"warmup is a fraction (< 1) or a whole number of steps (>= 1), got {self.warmup}")
        if self.grad_clip is not None and self.grad_clip <= 0:
            raise InputError(f"grad_clip must be positive or None, got {self.grad_clip}")
        if self.patience is not None and int(self.patience) < 1:
            raise InputError(f"patience must be >= 1 or None (no early stopping), got {self.patience}")
        if self.max_train_factor < 1:
            raise InputError(f"max_train_factor must be >= 1, got {self.max_train_factor}")
        if self.agop_split not in ("test", "train"):
            raise InputError(f"agop_split must be 'test' or 'train', got {self.agop_split!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    def replace(self, **kw) -> SweepConfig:
        return dataclasses.replace(self, **kw)


def _check_fields(cfg: Any, table: Mapping[str, _checks.Check]) -> None:
    """Type, finiteness and range of each field of ``cfg`` named in ``table`` (the one validation layer)."""
    for name, check in table.items():
        check(getattr(cfg, name), name)


_SWEEP_FIELDS: dict[str, _checks.Check] = {
    **{k: _checks.int_at_least(1) for k in ("max_depth", "steps", "batch_size", "n_agop_seqs")},
    # ceilings (issue 33): a TinyGPT head of 64 dims and a context of a million tokens are already far
    # beyond the paper's (4 and 256); past them a typo would allocate gigabytes
    "d_head": _checks.int_at_least(1, hi=64),
    "n_ctx": _checks.int_at_least(1, hi=10**6),
    "eval_every": _checks.int_at_least(1),
    "eval_seqs": _checks.int_at_least(1, none_ok=True),
    "patience": _checks.int_at_least(1, none_ok=True),
    "seed": _checks.SEED,
    "lr": _checks.positive_real(),
    "weight_decay": _checks.real_in(0.0),
    "warmup": _checks.real_in(0.0),
    "test_fraction": _checks.real_in(0.0, 0.5, lo_open=True, hi_open=True),
    "bytes_per_param": _checks.positive_real(none_ok=True),
    "grad_clip": _checks.positive_real(none_ok=True),
    "max_train_factor": _checks.real_in(1.0),
}


PAPER_SWEEP = SweepConfig(
    preset="paper",
    budgets=PAPER_BUDGETS,
    depths=PAPER_DEPTHS,
    max_depth=max(PAPER_DEPTHS),
    d_head=4,
    n_ctx=256,
    batch_size=64,
    lr=3e-4,
    weight_decay=0.01,
    warmup=300,
    bytes_per_param=60.0,
    grad_clip=1.0,
    patience=10,
    eval_every=200,
    max_train_factor=1.5,
    eval_seqs=None,
    n_agop_seqs=512,
    agop_split="train",
    seed=0,
)
"""The authors' protocol (transformer_ntp_shape_sweep.py defaults); GPU-sized: 60 bytes per parameter."""


def _steps(cfg: SweepConfig, budget: float, L: int, d: int) -> int:
    if not cfg.bytes_per_param:
        return int(cfg.steps)
    if cfg.preset == "paper":
        return paper_base_steps(budget, bytes_per_param=cfg.bytes_per_param, n_ctx=cfg.n_ctx, batch_size=cfg.batch_size)
    n = param_count(L, d, preset=cfg.preset, n_ctx=cfg.n_ctx)
    return max(1, math.ceil(cfg.bytes_per_param * n / (cfg.batch_size * cfg.n_ctx)))


def _jobs(cfg: SweepConfig) -> list[tuple[Shape, dict]]:
    common = {
        k: v
        for k, v in cfg.to_dict().items()
        if k not in ("budgets", "depths", "max_depth", "bytes_per_param", "device")
    }
    depths = cfg.depths if cfg.depths is not None else tuple(range(1, cfg.max_depth + 1))
    out = []
    for budget in cfg.budgets:
        shapes_for_budget(budget, depths, d_head=cfg.d_head, n_ctx=cfg.n_ctx, preset=cfg.preset)  # too small → raise
        for s in grid([budget], depths, preset=cfg.preset, d_head=cfg.d_head, n_ctx=cfg.n_ctx):
            assert s.d_model is not None  # grid() without include_skipped: runnable shapes only
            job = {
                "experiment": "shape_sweep",
                "budget": float(budget),
                "n_layers": s.depth,
                "d_model": s.d_model,
                **common,
                "steps": _steps(cfg, budget, s.depth, s.d_model),
            }
            out.append((s, job))
    return out


def plan(cfg: SweepConfig = SweepConfig(), results: Any = None) -> list[dict]:
    """The sweep's cells without training: every (budget, depth) with d_model, n_heads, active
    parameters, padding, R_D/W, steps, and ``status`` ("run", "done" when ``results`` already holds
    it, or why it is skipped)."""
    from tl_geometry.runtime.jobs import ResultsFile, job_key

    done = ResultsFile(results).finished_keys() if results is not None else set()
    run = {(s.budget, s.depth): job for s, job in _jobs(cfg)}
    depths = cfg.depths if cfg.depths is not None else tuple(range(1, cfg.max_depth + 1))
    rows = []
    for s in grid(cfg.budgets, depths, preset=cfg.preset, d_head=cfg.d_head, n_ctx=cfg.n_ctx, include_skipped=True):
        job = run.get((s.budget, s.depth))
        status = s.skip or ("done" if job is not None and job_key(job) in done else "run")
        rows.append({**s.to_dict(), "steps": job["steps"] if job else None, "status": status})
    return rows


def shape_sweep(
    cfg: SweepConfig = SweepConfig(), results: Any = "shape_sweep.jsonl", *, progress: bool = True
) -> list[dict]:
    """Run (or resume) the sweep; every finished run is appended to ``results`` at once.

    Returns:
        All ok records of this sweep's jobs in the results file (earlier runs included), each with
        params (budget, n_layers, d_model, preset, ...) and test_ce, aofe_ratio_out,
        aofe_ratio_loss, wtw_aofe_ratio, r_dw, n_params, pad_ratio, preset.

    Raises:
        ValueError: a budget too small for depth 1; whatever a run raises (the finished runs stay
            recorded, and the next call resumes after them).
    """
    from tl_geometry.runtime.jobs import ResultsFile, job_key, run_jobs

    jobs = [job for _, job in _jobs(cfg)]
    rf = results if isinstance(results, ResultsFile) else ResultsFile(results)
    data: dict = {}

    def one(params: Mapping[str, Any]) -> dict:
        if not data:
            train, test = byte_data(cfg.source, test_fraction=cfg.test_fraction)
            val = None
            if cfg.patience:
                if len(train) < 2 * len(test):
                    raise InputError(f"source {cfg.source!r} is too short for a validation split")
                train, val = train[: -len(test)], train[-len(test) :]
            data.update(train=train, test=test, val=val)
        return train_run(params, data["train"], data["test"], data["val"], device=cfg.device)

    for _ in run_jobs(jobs, one, rf, progress=progress, desc="shapes"):
        pass
    keys = {job_key(j) for j in jobs}
    return [r for r in rf.records() if r.get("key") in keys and r.get("status") == "ok"]
