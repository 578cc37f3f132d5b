"""ε of an SAE's decoder rows against its host's ε (the SAE side of [`tl_geometry.metrics.sae`][tl_geometry.metrics.sae])."""

from __future__ import annotations

import difflib
from typing import Any

from torch import Tensor

from tl_geometry.errors import InputError, InputTypeError
from tl_geometry.families.capacity.hosts import host_epsilon
from tl_geometry.metrics.sae import DecoderEpsilon, cosine_exceedance

__all__ = ["decoder_epsilon"]


def _decoder(sae: Any) -> Tensor:
    if isinstance(sae, Tensor):
        return sae.detach()
    W = getattr(sae, "W_dec", None)
    if not isinstance(W, Tensor):
        raise InputTypeError(
            f"expected a sae_lens SAE (with W_dec) or a (d_sae, d_in) tensor, got {type(sae).__name__}"
        )
    return W.detach()


def _sae_hook(sae: Any) -> str | None:
    cfg = getattr(sae, "cfg", None)
    meta = getattr(cfg, "metadata", None)
    return getattr(meta, "hook_name", None) or getattr(cfg, "hook_name", None)


def _check_sae_on_model(sae: Any, W_dec: Tensor, model: Any) -> None:
    d_model = int(model.cfg.d_model)
    if W_dec.shape[1] != d_model:
        raise InputError(
            f"SAE d_in = {W_dec.shape[1]} does not match the model's d_model = {d_model}; "
            "this SAE was trained on another model or hook"
        )
    hook = None if isinstance(sae, Tensor) else _sae_hook(sae)
    if hook is not None and hook not in model.hook_dict:
        raise InputError(
            f"SAE hook {hook!r} is not a hook of the model (n_layers={model.cfg.n_layers}); "
            f"closest: {difflib.get_close_matches(hook, list(model.hook_dict), n=3, cutoff=0.5)}"
        )


def decoder_epsilon(
    sae: Any,
    *,
    host: Any = None,
    block_size: int = 2048,
) -> DecoderEpsilon:
    """Similarity statistics of an SAE's decoder rows and their exceedance of the host's ε.

    Capacity paper (arXiv 2606.02765): ε = μ + 2σ of pairwise cosines. Applied here to the
    decoder W_dec (d_sae, d_in): its rows are the directions the SAE writes. With a host, also
    the exact fraction of decoder pairs whose |cos| exceeds the host model's ε — are the SAE's
    features packed within the deviation the model tolerates in its own embedding?

    Args:
        sae: a sae_lens SAE (reads ``W_dec``) or a (d_sae, d_in) tensor.
        host: None, a float ε, a published model name (Table 1), or a TransformerLens model (ε
            measured from its W_E; the SAE's d_in and hook are checked against it).
        block_size: rows per block of the exact pair count.

    Returns:
        [`DecoderEpsilon`][tl_geometry.metrics.sae.DecoderEpsilon].

    Raises:
        TypeError: not an SAE or tensor.
        ValueError: d_in ≠ the host's d_model, SAE hook not in the host model, unknown
            published name, fewer than 2 non-zero rows.
    """
    from tl_geometry.metrics.capacity import similarity_stats

    W = _decoder(sae)
    if W.ndim != 2:
        raise InputError(f"decoder must be 2-D (d_sae, d_in), got shape {tuple(W.shape)}")
    if host is not None and not isinstance(host, (str, int, float)):
        _check_sae_on_model(sae, W, host)
    stats = similarity_stats(W, progress=False)
    if host is None:
        return DecoderEpsilon(stats, None, None, 0, 0, float("nan"))
    he = host_epsilon(host)
    eps = he.epsilon
    if he.d_model is not None and he.d_model != W.shape[1]:
        raise InputError(
            f"SAE d_in = {W.shape[1]} does not match the host's d_model = {he.d_model} ({he.published_as or 'host'})"
        )
    if not 0 <= eps <= 1:
        raise InputError(f"host ε must lie in [0, 1], got {eps}")
    n_above, n_pairs = cosine_exceedance(W, eps, block_size=block_size)
    return DecoderEpsilon(stats, eps, he.source, n_pairs, n_above, n_above / n_pairs)
