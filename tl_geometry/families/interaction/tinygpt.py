"""The shape sweep's byte-level TinyGPT: its two presets, the model and its parameter count.

``preset="paper"`` is the authors' TinyGPT_NTP (arXiv 2605.27989; code:
github.com/wenjie1835/Interaction_Law, ``budget_scaling/transformer_ntp_shape_sweep.py``) as a
TransformerLens model: no linear biases, N(0, 0.02) weights, residual projections
N(0, 0.02/√(2L)); ``preset="library"`` is a TransformerLens default model with every bias. See
[`tl_geometry.families.interaction.shape_sweep`][tl_geometry.families.interaction.shape_sweep] for the whole protocol.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from tl_geometry.errors import InputError

__all__ = ["PRESETS", "tinygpt_config", "build_model", "trainable_params", "param_count", "n_params"]

PRESETS = ("paper", "library")
"""Model presets: "paper" (the authors' TinyGPT) and "library" (ours, a default TL model with biases)."""
_NEEDS = (
    "TinyGPT (tl_geometry.families.interaction.tinygpt: the interaction paper's models, built as HookedTransformer)"
)


def _check_preset(preset: str) -> str:
    if preset not in PRESETS:
        raise InputError(f"preset must be one of {PRESETS}, got {preset!r}")
    return preset


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

    ``preset="paper"`` sets the authors' initialization scale (0.02); use [`build_model`][tl_geometry.families.interaction.tinygpt.build_model],
    which also removes the linear biases and rescales the residual projections.
    """
    from tl_geometry.models import require_hooked

    require_hooked(_NEEDS)
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
    from tl_geometry.models import require_hooked

    require_hooked(_NEEDS)
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
    """Parameters of the ``"library"`` TinyGPT (all of them); [`param_count`][tl_geometry.families.interaction.tinygpt.param_count] with that preset."""
    return param_count(n_layers, d_model, preset=preset, n_ctx=n_ctx, d_vocab=d_vocab)
