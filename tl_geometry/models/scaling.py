"""Random-init models of the SmolLM2 (Llama) and Gemma-3 families, scaled to a parameter count.

``tg.models.scaled("smollm2", 5e8)`` is a ``HookedTransformer`` of about half a billion
parameters with SmolLM2's architecture (its vocabulary, 64-wide heads, three query heads per
key/value head, SiLU-gated MLP 8/3 as wide as the model, RMSNorm, rotary base 100,000, tied
embedding in the checkpoint) and random weights; ``"gemma-3"`` the same with Gemma-3's (vocabulary
262,144, four 256-wide query heads over one key/value head, GELU-gated MLP six times the width as in
Gemma-3-1B, the norms around each sublayer, q/k norms, five local layers to one global).
For measuring memory and time at the sizes researchers use, without a download: the numbers of a
report on such a model are those of a random network.

[`scaled_config`][tl_geometry.models.scaled_config] picks the shape (our choice: the depth and width on the
family's grid whose parameter count is nearest the target, preferring the family's own depth), and [`scaled`][tl_geometry.models.scaled] builds it from the config alone:
TransformerLens initialises its own parameters, so there is one copy of the weights and no
transformers model.
"""

from __future__ import annotations

import math
import tempfile
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from tl_geometry.errors import InputError
from tl_geometry.models.zoo import DEFAULT_N_CTX, _record_processing, check_device


@dataclass(frozen=True)
class _Family:
    vocab: int
    d_head: int
    step: int  # the width grid
    heads: Any  # d_model -> (query heads, key/value heads)
    d_mlp: Any  # d_model -> d_mlp
    depth: int  # the family's usual depth
    gemma: bool


def _round64(x: float) -> int:
    return max(64, int(round(x / 64)) * 64)


FAMILIES: dict[str, _Family] = {
    # SmolLM2-135M: d 576, 30 layers, 9 heads over 3, d_mlp 1,536; SmolLM2-360M: d 960, 15 over 5, 2,560
    "smollm2": _Family(49152, 64, 192, lambda d: (d // 64, d // 192), lambda d: _round64(d * 8 / 3), 30, False),
    # Gemma-3-270M: d 640, 18 layers; Gemma-3-1B: d 1,152, 26 layers, d_mlp 6,912; both 4 heads of 256 over 1
    "gemma-3": _Family(262144, 256, 128, lambda d: (4, 1), lambda d: 6 * d, 22, True),
}
"""The families ``scaled`` offers: name → shape rules (see the module docstring)."""
_ALIASES = {"smollm2": "smollm2", "llama": "smollm2", "gemma-3": "gemma-3", "gemma3": "gemma-3"}


@dataclass(frozen=True)
class ScaledConfig:
    """The shape [`scaled`][tl_geometry.models.scaled] builds.

    Attributes:
        family: ``"smollm2"`` or ``"gemma-3"``.
        target: the parameter count asked for.
        n_params: the parameters of the TransformerLens model (W_U counted apart from W_E, as
            TransformerLens holds it; the biases TL adds at zero included).
        n_layers, d_model, n_heads, n_key_value_heads, d_head, d_mlp, d_vocab: the shape.
        hf_config: the transformers config of that shape (``LlamaConfig`` / ``Gemma3TextConfig``).
    """

    family: str
    target: int
    n_params: int
    n_layers: int
    d_model: int
    n_heads: int
    n_key_value_heads: int
    d_head: int
    d_mlp: int
    d_vocab: int
    hf_config: Any

    @property
    def weights_bytes(self) -> int:
        """The float32 weights, in bytes."""
        return 4 * self.n_params


def _count(f: _Family, L: int, d: int, V: int) -> int:
    """The TransformerLens parameters of the family's model of this shape (checked against the built model)."""
    h, kv = f.heads(d)
    dh, m = f.d_head, f.d_mlp(d)
    per_layer = (
        (4 if f.gemma else 2) * d  # ln1, ln2 (Gemma: and the norms after each sublayer)
        + 2 * h * d * dh  # W_Q, W_O
        + h * dh  # b_Q
        + d  # b_O
        + 2 * kv * d * dh  # W_K, W_V
        + 2 * kv * dh  # b_K, b_V
        + 3 * d * m  # W_in, W_gate, W_out
        + m  # b_in
        + d  # b_out
        + (2 * dh if f.gemma else 0)  # q and k norms
    )
    return L * per_layer + 2 * V * d + V + d  # + W_E, W_U, b_U, ln_final


def _family(family: Any) -> _Family:
    key = _ALIASES.get(str(family).lower()) if isinstance(family, str) else None
    if key is None:
        raise InputError(f"family must be one of {sorted(FAMILIES)}, got {family!r}")
    return FAMILIES[key]


def scaled_config(
    family: str,
    n_params: float,
    *,
    n_layers: int | None = None,
    vocab_size: int | None = None,
    n_ctx: int = DEFAULT_N_CTX,
) -> ScaledConfig:
    """The shape of the ``family`` model nearest ``n_params`` parameters.

    Searched: depth 2–48 (or ``n_layers``) × width on the family's grid (SmolLM2: multiples of
    192, so that heads of 64 come three to a key/value head; Gemma-3: multiples of 128); the
    score is the relative distance to the target plus 0.1 × |log(depth / the family's depth)|
    (SmolLM2 30 layers as in its 135M and 360M models, Gemma-3 22, between its 270M's 18 and its
    1B's 26), our choice: the families grow mostly in width.

    Args:
        family: ``"smollm2"`` (alias ``"llama"``) or ``"gemma-3"`` (alias ``"gemma3"``).
        n_params: the target, e.g. ``5e8``; at least the embeddings' size.
        n_layers: fix the depth (default: searched).
        vocab_size: another vocabulary than the family's (for tiny test models).
        n_ctx: the context of the config.

    Raises:
        ValueError: an unknown family, a target below the family's smallest model, a bad depth or vocabulary.
    """
    from tl_geometry.base import _checks

    f = _family(family)
    target = _checks.real(n_params, "n_params", lo=1.0)
    V = f.vocab if vocab_size is None else _checks.integer(vocab_size, "vocab_size", lo=2)
    depths = range(2, 49) if n_layers is None else [_checks.integer(n_layers, "n_layers", lo=1)]
    n_ctx = _checks.integer(n_ctx, "n_ctx", lo=1)
    best: tuple[float, int, int, int] | None = None
    for L in depths:
        d = f.step
        while True:
            n = _count(f, L, d, V)
            score = abs(n / target - 1) + 0.1 * abs(math.log(L / f.depth))
            if best is None or score < best[0]:
                best = (score, L, d, n)
            if n > target:
                break
            d += f.step
    assert best is not None
    _, L, d, n = best
    smallest = _count(f, depths[0], f.step, V)
    if target < smallest:
        raise InputError(
            f"n_params {target:.3g} is below the smallest {family!r} model ({smallest:,} parameters at "
            f"{depths[0]} layers of width {f.step} with a vocabulary of {V:,}); ask for more, or pass a smaller "
            "vocab_size / n_layers"
        )
    h, kv = f.heads(d)
    return ScaledConfig(
        family=[k for k, v in FAMILIES.items() if v is f][0],
        target=int(target),
        n_params=n,
        n_layers=L,
        d_model=d,
        n_heads=h,
        n_key_value_heads=kv,
        d_head=f.d_head,
        d_mlp=f.d_mlp(d),
        d_vocab=V,
        hf_config=_hf_config(f, L, d, V, n_ctx),
    )


def _hf_config(f: _Family, L: int, d: int, V: int, n_ctx: int) -> Any:
    import transformers as tf

    h, kv = f.heads(d)
    common = dict(
        vocab_size=V,
        hidden_size=d,
        intermediate_size=f.d_mlp(d),
        num_hidden_layers=L,
        num_attention_heads=h,
        num_key_value_heads=kv,
        head_dim=f.d_head,
        max_position_embeddings=n_ctx,
        tie_word_embeddings=True,
    )
    cfg: Any
    if not f.gemma:
        rope = {"rope_type": "default", "rope_theta": 100000.0}
        cfg = tf.LlamaConfig(**common, rms_norm_eps=1e-5, rope_parameters=rope, hidden_act="silu")
        cfg.architectures = ["LlamaForCausalLM"]
        return cfg
    layer_types = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(L)]
    cfg = tf.Gemma3TextConfig(**common, sliding_window=512, layer_types=layer_types, query_pre_attn_scalar=f.d_head)
    cfg.architectures = ["Gemma3ForCausalLM"]
    return cfg


def scaled(
    family: str,
    n_params: float,
    *,
    seed: int = 0,
    n_layers: int | None = None,
    vocab_size: int | None = None,
    n_ctx: int = DEFAULT_N_CTX,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    tokenizer: Any = None,
):
    """A random-init ``HookedTransformer`` of the ``family`` scaled to about ``n_params`` parameters.

    Built from [`scaled_config`][tl_geometry.models.scaled_config]'s config by TransformerLens's own
    config conversion; TransformerLens initialises the parameters (its ``init_weights``, seeded):
    one copy of the weights, no transformers model. The weights are unprocessed (recorded as
    processing ``"none"``); the model is named ``<family>-scaled-<M>m-random-init`` and carries its
    [`ScaledConfig`][tl_geometry.models.ScaledConfig] as ``model._tl_geometry_scaled``.

    Args:
        family, n_params, n_layers, vocab_size, n_ctx: as for ``scaled_config``.
        seed: the initialisation's seed.
        dtype, device: of the parameters.
        tokenizer: attached to the model (default None: the model runs on token ids).

    Examples:
        >>> import tl_geometry as tg
        >>> tg.models.scaled("smollm2", 5e8).cfg.n_layers  # doctest: +SKIP
    """
    from tl_geometry.models.bridge import require_hooked

    require_hooked("tg.models.scaled (a random-init HookedTransformer built from a config)")
    from transformer_lens import HookedTransformer

    from tl_geometry.base import _checks
    from tl_geometry.models.hf_loading import _tl_config

    sc = scaled_config(family, n_params, n_layers=n_layers, vocab_size=vocab_size, n_ctx=n_ctx)
    seed = _checks.seed(seed, "seed")
    dev = check_device(device)
    with tempfile.TemporaryDirectory(prefix="tlg_scaled_") as tmp:
        cfg = _tl_config(None, sc.hf_config, tmp, name=None, device=dev, dtype=dtype, n_ctx=n_ctx, fold_ln=False)
    name = f"{sc.family}-scaled-{sc.n_params / 1e6:.0f}m-random-init"
    cfg.model_name = name
    cfg.init_weights = True
    cfg.seed = seed
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        model = HookedTransformer(cfg, tokenizer=tokenizer, move_to_device=False)
    model.to(dev)
    model._tl_geometry_name = name  # type: ignore[assignment]  # torch's stub: Module attrs are Tensor | Module
    model._tl_geometry_scaled = sc  # type: ignore[assignment]  # as above
    model._tl_geometry_tied = False  # type: ignore[assignment]  # TL initialises W_U apart from W_E
    _record_processing(model, "none", {"fold_ln": False, "center_writing_weights": False, "center_unembed": False})
    return model.eval()
