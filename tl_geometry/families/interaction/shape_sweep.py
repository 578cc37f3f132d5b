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

Each finished run is one record in a JSON-lines results file ([`tl_geometry.jobs`][tl_geometry.jobs]); a sweep
that is killed resumes where it stopped, repeating no run. [`grid`][tl_geometry.families.interaction.shape_sweep.grid] / [`paper_grid`][tl_geometry.families.interaction.shape_sweep.paper_grid]
list the shapes (with parameters and padding) without training anything.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor

from tl_geometry import _checks
from tl_geometry.errors import InputError

logger = logging.getLogger(__name__)

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

PAPER_BUDGETS = (3.0e5, 6.0e5, 1.0e6, 1.3e6, 1.6e6, 2.0e6, 2.3e6, 2.7e6, 3.0e6, 5.0e6, 10.0e6)
"""The authors' parameter budgets (their committed results cover 0.3M … 3M, 5M and 10M)."""
PAPER_DEPTHS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24)
"""The authors' depth list (``--depth_list`` default of transformer_ntp_shape_sweep.py)."""
CPU_BUDGETS = (1.0e5, 2.0e5, 3.0e5)
PAPER_WIDTH_RANGE = (16, 1024)
"""Widths the authors search (``--d_model_min`` / ``--d_model_max``)."""
PAPER_MAX_PADDING = 0.20
"""Shapes whose padding exceeds this share of the budget are skipped (``--max_padding_ratio``)."""
PAPER_PROJECTION_SEED = 42
"""Seed of the fixed output-space projection P in the authors' code."""
PRESETS = ("paper", "library")
"""Model presets: "paper" (the authors' TinyGPT) and "library" (ours, a default TL model with biases)."""


def _check_preset(preset: str) -> str:
    if preset not in PRESETS:
        raise InputError(f"preset must be one of {PRESETS}, got {preset!r}")
    return preset


@dataclass(frozen=True)
class SweepConfig:
    """Settings of a shape sweep (everything but budget/depth/width/device goes into each run's key).

    Attributes:
        preset: "library" (default, CPU-sized) or "paper" (the authors' TinyGPT: no linear biases,
            widths in [16, 1024], > 20 % padding skipped; see the module docstring).
            [`PAPER_SWEEP`][tl_geometry.families.interaction.shape_sweep.PAPER_SWEEP] is the authors' whole protocol.
        budgets: parameter budgets (CPU default 0.1M–0.3M; [`PAPER_BUDGETS`][tl_geometry.families.interaction.shape_sweep.PAPER_BUDGETS] for the paper's).
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
    **{k: _checks.int_at_least(1) for k in ("max_depth", "d_head", "n_ctx", "steps", "batch_size", "n_agop_seqs")},
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


# ----------------------------------------------------------------------------- model and parameter count
def tinygpt_config(
    n_layers: int,
    d_model: int,
    *,
    d_head: int = 4,
    n_ctx: int = 256,
    d_vocab: int = 256,
    seed: int = 0,
    preset: str = "library",
):
    """HookedTransformerConfig of a byte-level pre-LN TinyGPT (d_mlp = 4·d_model, GELU, learned positions).

    ``preset="paper"`` sets the authors' initialization scale (0.02); use [`build_model`][tl_geometry.families.interaction.shape_sweep.build_model],
    which also removes the linear biases and rescales the residual projections.
    """
    from transformer_lens import HookedTransformerConfig

    _check_preset(preset)
    if d_model % d_head:
        raise InputError(f"d_model={d_model} is not a multiple of d_head={d_head}")
    extra: dict[str, Any] = {"initializer_range": 0.02} if preset == "paper" else {}
    return HookedTransformerConfig(
        n_layers=int(n_layers),
        d_model=int(d_model),
        d_head=int(d_head),
        n_heads=int(d_model) // int(d_head),
        d_mlp=4 * int(d_model),
        d_vocab=int(d_vocab),
        n_ctx=int(n_ctx),
        act_fn="gelu",
        normalization_type="LN",
        positional_embedding_type="standard",
        seed=int(seed),
        **extra,
    )


def build_model(
    n_layers: int,
    d_model: int,
    *,
    preset: str = "paper",
    d_head: int = 4,
    n_ctx: int = 256,
    d_vocab: int = 256,
    seed: int = 0,
):
    """A TinyGPT ``HookedTransformer`` of the given preset, initialized with ``seed``.

    ``"paper"``: the authors' TinyGPT_NTP as a TransformerLens model: the linear biases (b_Q, b_K,
    b_V, b_O, b_in, b_out, b_U) are zero and frozen (``requires_grad=False``: no gradient, no
    optimizer step, not counted), every weight N(0, 0.02), W_O and W_out N(0, 0.02/√(2L)),
    LayerNorms weight 1 / bias 0. Its trainable parameters number ``param_count(L, d, "paper")``.
    ``"library"``: TransformerLens's default initialization, every parameter trainable.
    """
    from transformer_lens import HookedTransformer

    cfg = tinygpt_config(n_layers, d_model, d_head=d_head, n_ctx=n_ctx, d_vocab=d_vocab, seed=seed, preset=preset)
    torch.manual_seed(int(seed))
    model = HookedTransformer(cfg)
    if preset == "paper":
        std, std_res = 0.02, 0.02 / math.sqrt(2 * int(n_layers))
        with torch.no_grad():
            for name, p in model.named_parameters():
                leaf = name.rsplit(".", 1)[-1]
                if name.startswith("ln_final.") or ".ln1." in name or ".ln2." in name:
                    p.fill_(1.0) if leaf == "w" else p.zero_()
                elif leaf.startswith("b_"):  # a linear bias: the authors' model has none
                    p.zero_()
                    p.requires_grad_(False)
                elif leaf in ("W_O", "W_out"):
                    p.normal_(0.0, std_res)
                else:  # W_E, W_pos, W_Q, W_K, W_V, W_in, W_U
                    p.normal_(0.0, std)
    return model


def trainable_params(model: Any) -> int:
    """Parameters that train (the count a budget is about)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def param_count(depth: int, width: int, *, preset: str = "paper", n_ctx: int = 256, d_vocab: int = 256) -> int:
    """Trainable parameters of a TinyGPT of ``depth`` layers and d_model ``width``.

    ``"paper"`` (the authors' count, no linear biases): ``V·d + n_ctx·d + L(12d² + 4d) + 2d + d·V``
    (token and position embeddings, per block QKV 3d², out-projection d², MLP 8d² and two
    LayerNorms 4d, final LayerNorm 2d, unembedding). ``param_count(5, 120) == 958_800``.
    ``"library"`` (every bias): ``V·d + n_ctx·d + L(12d² + 13d) + 2d + d·V + V``.

    Examples:
        >>> param_count(5, 120)
        958800
        >>> param_count(5, 120, preset="library")
        964456
    """
    _check_preset(preset)
    d, L, V = int(width), int(depth), int(d_vocab)
    if d < 1 or L < 1 or V < 1 or int(n_ctx) < 1:
        raise InputError(f"depth, width, n_ctx and d_vocab must be >= 1, got {depth}, {width}, {n_ctx}, {d_vocab}")
    if preset == "paper":
        return V * d + int(n_ctx) * d + L * (12 * d * d + 4 * d) + 2 * d + d * V
    return V * d + int(n_ctx) * d + L * (12 * d * d + 13 * d) + 2 * d + d * V + V


def n_params(n_layers: int, d_model: int, *, n_ctx: int = 256, d_vocab: int = 256, preset: str = "library") -> int:
    """Parameters of the ``"library"`` TinyGPT (all of them); [`param_count`][tl_geometry.families.interaction.shape_sweep.param_count] with that preset."""
    return param_count(n_layers, d_model, preset=preset, n_ctx=n_ctx, d_vocab=d_vocab)


def _width_range(preset: str, d_head: int) -> tuple[int, int | None]:
    if preset == "paper":
        lo, hi = PAPER_WIDTH_RANGE
        return max(d_head, lo // d_head * d_head), max(d_head, hi // d_head * d_head)
    return d_head, None


def width_for_budget(
    budget: float, n_layers: int, *, d_head: int = 4, n_ctx: int = 256, d_vocab: int = 256, preset: str = "library"
) -> int | None:
    """Widest d_model (a multiple of d_head) with param_count ≤ budget at this depth, or None.

    ``"library"``: widths from d_head up. ``"paper"``: widths in [16, 1024] (the authors' binary
    search returns the same width, the count being increasing in d); None when 16 is already over.
    """
    lo, hi = _width_range(_check_preset(preset), int(d_head))
    count = lambda w: param_count(n_layers, w, preset=preset, n_ctx=n_ctx, d_vocab=d_vocab)  # noqa: E731
    if count(lo) > budget:
        return None
    d = lo
    while (hi is None or d + d_head <= hi) and count(d + d_head) <= budget:
        d += int(d_head)
    return d


@dataclass(frozen=True)
class Shape:
    """One (budget, depth) cell of a sweep grid.

    Attributes:
        budget, depth, d_model (None when no width fits), n_heads, d_mlp.
        active: trainable parameters of the shape; pad: budget − active; pad_ratio: pad / budget.
        r_dw: depth / d_model. skip: why the shape is not run ("" when it is).
    """

    budget: float
    depth: int
    d_model: int | None
    n_heads: int | None
    d_mlp: int | None
    active: int | None
    pad: int | None
    pad_ratio: float | None
    r_dw: float | None
    skip: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def grid(
    budgets: Sequence[float],
    depths: Sequence[int],
    *,
    preset: str = "paper",
    d_head: int = 4,
    n_ctx: int = 256,
    d_vocab: int = 256,
    include_skipped: bool = False,
) -> list[Shape]:
    """The shapes of a sweep, budget by budget and depth by depth, without training anything.

    A depth with no width under the budget is skipped ("no width"); in the paper preset so is a
    shape whose padding exceeds [`PAPER_MAX_PADDING`][tl_geometry.families.interaction.shape_sweep.PAPER_MAX_PADDING] of the budget (the authors' rule).
    ``include_skipped`` also returns the skipped cells (``skip`` says why).
    """
    _check_preset(preset)
    out = []
    for b in budgets:
        for L in depths:
            d = width_for_budget(b, L, d_head=d_head, n_ctx=n_ctx, d_vocab=d_vocab, preset=preset)
            if d is None:
                s = Shape(float(b), int(L), None, None, None, None, None, None, None, "no width")
            else:
                a = param_count(L, d, preset=preset, n_ctx=n_ctx, d_vocab=d_vocab)
                pad = int(b - a)
                skip = ""
                if preset == "paper" and pad / b > PAPER_MAX_PADDING:
                    skip = f"padding {pad / b:.1%} > {PAPER_MAX_PADDING:.0%}"
                s = Shape(float(b), int(L), d, d // d_head, 4 * d, a, pad, pad / b, L / d, skip)
            if include_skipped or not s.skip:
                out.append(s)
    return out


def paper_grid(*, include_skipped: bool = False) -> list[Shape]:
    """The authors' grid: [`PAPER_BUDGETS`][tl_geometry.families.interaction.shape_sweep.PAPER_BUDGETS] × [`PAPER_DEPTHS`][tl_geometry.families.interaction.shape_sweep.PAPER_DEPTHS] with the paper preset.

    Contains the paper's best shapes (1M: depth 5 / d_model 120, 958,800 parameters; 10M: depth
    10 / d_model 284) and every shape of the authors' committed results.
    """
    return grid(PAPER_BUDGETS, PAPER_DEPTHS, preset="paper", include_skipped=include_skipped)


def shapes_for_budget(
    budget: float,
    depths: Sequence[int] | None = None,
    *,
    max_depth: int = 6,
    d_head: int = 4,
    n_ctx: int = 256,
    d_vocab: int = 256,
    preset: str = "library",
) -> list[tuple[int, int]]:
    """(depth, d_model) per depth, the widest shape under ``budget``; skipped depths left out.

    Raises:
        ValueError: the budget is too small for even depth 1 at the smallest width.
    """
    lo, _ = _width_range(_check_preset(preset), int(d_head))
    if width_for_budget(budget, 1, d_head=d_head, n_ctx=n_ctx, d_vocab=d_vocab, preset=preset) is None:
        need = param_count(1, lo, preset=preset, n_ctx=n_ctx, d_vocab=d_vocab)
        raise InputError(
            f"budget {budget:g} is too small for even depth 1 (needs >= {need} parameters at d_model={lo})"
        )
    cells = grid(
        [budget],
        list(range(1, max_depth + 1)) if depths is None else depths,
        preset=preset,
        d_head=d_head,
        n_ctx=n_ctx,
        d_vocab=d_vocab,
    )
    return [(s.depth, s.d_model) for s in cells if s.d_model is not None]  # grid() keeps runnable shapes only


def paper_base_steps(
    budget: float, *, bytes_per_param: float = 60.0, n_ctx: int = 256, batch_size: int = 64, min_steps: int = 200
) -> int:
    """The authors' base steps: ``max(200, ⌊⌊bytes_per_param · budget⌋ / n_ctx⌋ // batch_size)``."""
    return max(int(min_steps), int(bytes_per_param * budget) // int(n_ctx) // int(batch_size))


def byte_data(source: str = "pydoc+shakespeare", *, test_fraction: float = 0.1) -> tuple[Tensor, Tensor]:
    """(train, test) uint8→long byte tensors of real text; the test split is the last fraction."""
    from pathlib import Path

    from tl_geometry import corpus

    names = [s for s in source.split("+") if s]
    parts = []
    for s in names:
        if s in corpus.SOURCES:
            try:
                parts += corpus.texts(s)
            except ValueError as exc:
                if len(names) == 1:
                    raise
                logger.warning("skipping text source %r: %s", s, exc)  # e.g. a shakespeare build without texts
        elif Path(s).is_file():
            parts += corpus.texts(s)
        else:
            parts += _hf_texts(s)
    if not parts:
        raise InputError(f"source {source!r} gave no text")
    data = torch.frombuffer(bytearray("\n\n".join(parts).encode("utf-8")), dtype=torch.uint8).long()
    n_test = int(len(data) * test_fraction)
    if n_test < 2 or len(data) - n_test < 2:
        raise InputError(f"source {source!r} has only {len(data)} bytes")
    return data[:-n_test], data[-n_test:]


def _hf_texts(name: str) -> list[str]:
    try:
        import datasets
    except ImportError:
        raise InputError(
            f"unknown text source {name!r}: not pydoc/shakespeare/a file, and `datasets` is not installed"
        ) from None
    try:
        ds = datasets.load_dataset(name, split="train")
    except Exception as exc:  # offline, unknown name, ...
        raise InputError(
            f"could not load text source {name!r} as a Hugging Face dataset: {type(exc).__name__}: {exc}"
        ) from None
    col = "text" if "text" in ds.column_names else ds.column_names[0]
    return [t for t in ds[col] if t]


def _windows(data: Tensor, n: int, length: int, gen: torch.Generator) -> Tensor:
    if len(data) <= length:
        raise InputError(f"text of {len(data)} bytes is shorter than a window of {length + 1}")
    starts = torch.randint(0, len(data) - length, (n,), generator=gen)
    return torch.stack([data[s : s + length] for s in starts.tolist()])


def _eval_windows(data: Tensor, n: int | None, length: int, *, shifted: bool = False) -> Tensor:
    """Sequential non-overlapping windows; ``shifted``: length+1 bytes each (input + next-byte
    targets, consecutive windows sharing one byte, as the authors' SequentialWindowDataset)."""
    span = length + 1 if shifted else length
    k = (len(data) - 1) // length if shifted else len(data) // length
    k = k if n is None else min(int(n), k)
    if k < 1:
        raise InputError(f"split of {len(data)} bytes is shorter than one window of {span}")
    if shifted:
        return data[: k * length + 1].unfold(0, span, length)
    return data[: k * length].view(k, length)


def _loss(model: Any, win: Tensor, *, shifted: bool, reduction: str = "mean") -> Tensor:
    """Next-byte cross-entropy (nats) of windows: TL's loss (library), or the authors' input/target
    split of (n_ctx+1)-byte windows (paper: every input position predicts a byte)."""
    if not shifted:
        if reduction == "sum":
            return model(win, return_type="loss", loss_per_token=True).sum()
        return model(win, return_type="loss")
    logits = model(win[:, :-1])
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), win[:, 1:].reshape(-1), reduction=reduction
    )


@torch.no_grad()
def _ce(model: Any, windows: Tensor, *, shifted: bool, batch_size: int, device: Any) -> float:
    tot, n = 0.0, 0
    for b in windows.split(batch_size):
        b = b.to(device)
        tot += float(_loss(model, b, shifted=shifted, reduction="sum"))
        n += b.shape[0] * (b.shape[1] - 1)
    return tot / n


def train_run(
    params: Mapping[str, Any], train: Tensor, test: Tensor, val: Tensor | None = None, *, device: Any = "cpu"
) -> dict:
    """Train one TinyGPT shape and measure it; ``params`` is one job of [`shape_sweep`][tl_geometry.families.interaction.shape_sweep.shape_sweep].

    Returns test_ce (and val_ce with early stopping), train_loss, aofe_ratio_out (output-space
    AGOP, exact; projection seed 42 in the paper preset), aofe_ratio_loss (loss-gradient AGOP at
    the token embeddings), wtw_aofe_ratio, r_dw, n_params (trainable), pad, pad_ratio, preset,
    steps_run, stopped_early, seconds.
    """
    from tl_geometry.families.interaction import agop
    from tl_geometry.metrics.interaction import depth_width_ratio, wtw_aofe

    t0 = time.perf_counter()
    p = dict(params)
    preset = _check_preset(p.get("preset", "library"))
    paper = preset == "paper"
    device = torch.device(device)
    L, d, n_ctx = int(p["n_layers"]), int(p["d_model"]), int(p["n_ctx"])
    model = build_model(L, d, preset=preset, d_head=p["d_head"], n_ctx=n_ctx, seed=p["seed"]).to(device)
    trainable = [x for x in model.parameters() if x.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=p["lr"], weight_decay=p["weight_decay"])
    base = int(p["steps"])
    total = max(base, math.ceil(float(p.get("max_train_factor", 1.0)) * base))
    w = float(p["warmup"])
    n_warm = int(w) if w >= 1 else int(w * total)

    def lr_at(step: int) -> float:
        if step < n_warm:
            return (step + 1) / n_warm
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - n_warm) / max(1, total - n_warm))))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    gen = torch.Generator().manual_seed(int(p["seed"]) + (1000 * L if paper else 0))
    span = n_ctx + 1 if paper else n_ctx
    patience, clip = p.get("patience"), p.get("grad_clip")
    eval_every = int(p.get("eval_every", 200))
    val_win = _eval_windows(val, p["eval_seqs"], n_ctx, shifted=paper) if (patience and val is not None) else None
    best_val, best_state, stale, stopped, steps_run = float("inf"), None, 0, False, 0
    model.train()
    loss = torch.tensor(float("nan"))
    for step in range(total):
        batch = _windows(train, p["batch_size"], span, gen).to(device)
        loss = _loss(model, batch, shifted=paper)
        if not torch.isfinite(loss):
            raise InputError(f"training diverged (loss {float(loss)}) for depth {L}, d_model {d}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(trainable, float(clip))
        opt.step()
        sched.step()
        steps_run = step + 1
        if val_win is not None and (steps_run % eval_every == 0 or steps_run == total):
            model.eval()
            v = _ce(model, val_win, shifted=paper, batch_size=p["batch_size"], device=device)
            model.train()
            if v + 1e-6 < best_val:
                best_val, stale = v, 0
                best_state = {k: t.detach().clone() for k, t in model.state_dict().items()}
            else:
                stale += 1
            if patience is not None and steps_run >= base and stale >= int(patience):  # val_win implies patience
                stopped = True
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    test_win = _eval_windows(test, p["eval_seqs"], n_ctx, shifted=paper)
    test_ce = _ce(model, test_win, shifted=paper, batch_size=p["batch_size"], device=device)
    if p.get("agop_split", "test") == "train":
        agop_win = _windows(train, p["n_agop_seqs"], n_ctx, torch.Generator().manual_seed(int(p["seed"]) + 42))
    else:
        agop_win = _eval_windows(test, p["n_agop_seqs"], n_ctx)
    bs = min(len(agop_win), 32 if device.type == "cuda" else 8)
    out = agop(
        model,
        agop_win,
        space="output",
        exact=True,
        progress=False,
        batch_size=bs,
        projection_seed=PAPER_PROJECTION_SEED if paper else None,
    )
    lossg = agop(model, agop_win, space="loss", progress=False, batch_size=bs)
    active = trainable_params(model)
    budget = float(p.get("budget", active))
    rec = {
        "test_ce": test_ce,
        "train_loss": float(loss.detach()),
        "aofe_ratio_out": out.stats["blocks.0.hook_resid_pre"].ratio,
        "aofe_ratio_loss": lossg.stats["hook_embed"].ratio,
        "wtw_aofe_ratio": float(wtw_aofe(model.W_E.detach()).ratio),
        "r_dw": depth_width_ratio(model.cfg),
        "n_params": active,
        "pad": int(budget - active),
        "pad_ratio": (budget - active) / budget,
        "preset": preset,
        "steps_run": steps_run,
        "stopped_early": stopped,
        "seconds": round(time.perf_counter() - t0, 2),
    }
    if val_win is not None:
        rec["val_ce"] = best_val
    return rec


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
    from tl_geometry.jobs import ResultsFile, job_key

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
    from tl_geometry.jobs import ResultsFile, job_key, run_jobs

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


def frontier(records: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Best run per budget: budget, n_layers, d_model, alpha (= R_D/W of the best), test_ce."""
    best: dict[float, Mapping] = {}
    for r in records:
        b = r["params"]["budget"]
        if b not in best or r["test_ce"] < best[b]["test_ce"]:
            best[b] = r
    return [
        {
            "budget": b,
            "n_layers": r["params"]["n_layers"],
            "d_model": r["params"]["d_model"],
            "alpha": r["r_dw"],
            "test_ce": r["test_ce"],
        }
        for b, r in sorted(best.items())
    ]


def plot_sweep(records: Sequence[Mapping[str, Any]], path: Any = None):
    """Left: test CE vs R_D/W per budget, efficient interval shaded. Right: frontier α* per budget."""
    from tl_geometry.plotting import pyplot

    plt = pyplot()  # the Agg backend, or Jupyter's inline one (one place decides)

    from tl_geometry.metrics.interaction import EFFICIENT_INTERVAL

    if not records:
        raise InputError("no sweep records to plot")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    a1.axvspan(*EFFICIENT_INTERVAL, color="0.85", label="efficient interval")
    for b in sorted({r["params"]["budget"] for r in records}):
        rs = sorted((r for r in records if r["params"]["budget"] == b), key=lambda r: r["r_dw"])
        a1.plot([r["r_dw"] for r in rs], [r["test_ce"] for r in rs], "o-", label=f"{b / 1e6:g}M")
    a1.set_xscale("log")
    a1.set_xlabel("R_D/W = depth / d_model")
    a1.set_ylabel("test cross-entropy (nats/byte)")
    a1.legend(fontsize=8)
    fr = frontier(records)
    a2.axhspan(*EFFICIENT_INTERVAL, color="0.85")
    a2.plot([f["budget"] for f in fr], [f["alpha"] for f in fr], "o-")
    a2.set_xscale("log")
    a2.set_xlabel("parameter budget")
    a2.set_ylabel("α* (best R_D/W)")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
