"""The shape sweep's grids: per (budget, depth), the widest TinyGPT that fits, and its padding.

The authors' rules (arXiv 2605.27989, ``budget_scaling/transformer_ntp_shape_sweep.py``): widths
in [16, 1024], a multiple of the head dimension; the rest of the budget is padding, and a shape
with more than 20 % padding is skipped. [`grid`][tl_geometry.families.interaction.shapes.grid] / [`paper_grid`][tl_geometry.families.interaction.shapes.paper_grid] list
the shapes (with parameters and padding) without training anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from tl_geometry.errors import InputError
from tl_geometry.families.interaction.tinygpt import _check_preset, param_count

__all__ = [
    "PAPER_BUDGETS",
    "PAPER_DEPTHS",
    "PAPER_WIDTH_RANGE",
    "PAPER_MAX_PADDING",
    "width_for_budget",
    "Shape",
    "grid",
    "paper_grid",
    "shapes_for_budget",
    "paper_base_steps",
]

PAPER_BUDGETS = (3.0e5, 6.0e5, 1.0e6, 1.3e6, 1.6e6, 2.0e6, 2.3e6, 2.7e6, 3.0e6, 5.0e6, 10.0e6)
"""The authors' parameter budgets (their committed results cover 0.3M … 3M, 5M and 10M)."""
PAPER_DEPTHS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24)
"""The authors' depth list (``--depth_list`` default of transformer_ntp_shape_sweep.py)."""
PAPER_WIDTH_RANGE = (16, 1024)
"""Widths the authors search (``--d_model_min`` / ``--d_model_max``)."""
PAPER_MAX_PADDING = 0.20
"""Shapes whose padding exceeds this share of the budget are skipped (``--max_padding_ratio``)."""


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
    shape whose padding exceeds [`PAPER_MAX_PADDING`][tl_geometry.families.interaction.shapes.PAPER_MAX_PADDING] of the budget (the authors' rule).
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
    """The authors' grid: [`PAPER_BUDGETS`][tl_geometry.families.interaction.shapes.PAPER_BUDGETS] × [`PAPER_DEPTHS`][tl_geometry.families.interaction.shapes.PAPER_DEPTHS] with the paper preset.

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
