"""One loader for both TransformerLens generations.

TransformerLens 3 builds a ``HookedTransformer`` from a checkpoint (what
``tl_geometry.models.hf_loading.wrap_hf`` does); TransformerLens 4 removed it and wraps the
transformers model itself in a ``TransformerBridge``. Here:

* [`tl_generation`][tl_geometry.models.bridge.tl_generation]: 3 or 4, the installed TransformerLens's
  major version. [`require_hooked`][tl_geometry.models.bridge.require_hooked]: a clear error, naming
  what needs it and what to install, where ``HookedTransformer`` is missing.
* [`wrap_bridge`][tl_geometry.models.bridge.wrap_bridge]: the TransformerLens-4 counterpart of
  ``wrap_hf``: the same transformers model (the same files: a zoo GGUF, a local directory, a model
  you pass) wrapped with ``TransformerBridge.boot_transformers``, offline, then processed with the
  same flags through ``enable_compatibility_mode``, and recorded the same way
  (``_tl_geometry_processing`` and ``_tl_geometry_processing_name``, read by every report's
  provenance).
* [`load`][tl_geometry.models.bridge.load] (zoo names, local paths, hub names) and
  [`from_hf`][tl_geometry.models.bridge.from_hf] on TransformerLens 4; ``from_hf`` on 3 is
  ``tl_geometry.models.hf_loading.from_hf``.
  [`tl_geometry.models.load`][tl_geometry.models.load] calls ``load`` here when
  ``tl_generation() >= 4``, so ``tg.models.load`` and every ``--model`` flag work on both.
* [`random_like`][tl_geometry.models.bridge.random_like]: a random-init twin of a bridge.

What differs between the generations, measured on SmolLM2-135M (``benchmarks/check_tl_generations.py``):
nothing beyond float rounding in the logits and the report's rows. One difference is by
construction: for Gemma models TransformerLens 3 folds the embedding scale √d_model into ``W_E``,
and the bridge's ``W_E`` is the checkpoint's embedding without it (the model multiplies by
√d_model in its forward pass). Activations (``hook_embed`` onwards) and ``W_U`` are the same; ε and
every cosine of ``W_E`` rows are scale-free and so the same too, while norms of ``W_E`` rows are
√d_model times smaller on TransformerLens 4.
"""

from __future__ import annotations

import copy
import functools
import importlib.metadata
import logging
import time
import warnings
from typing import Any

import torch

import tl_geometry.models.hf_loading as hf_loading
from tl_geometry.errors import InputError, TLGeometryError
from tl_geometry.io import hub
from tl_geometry.models.zoo import (
    DEFAULT_N_CTX,
    PROCESSING,
    ZOO,
    _record_processing,
    canonical_name,
    check_device,
    display_name,
    hub_probe,
    is_path,
    loading_from_hub,
    model_name_of,
    processing_flags,
    processing_name,
    processing_of,
    zoo_file,
)

__all__ = [
    "HookedTransformerUnavailable",
    "from_hf",
    "is_bridge",
    "load",
    "random_like",
    "require_hooked",
    "tl_generation",
    "wrap_bridge",
]

logger = logging.getLogger(__name__)

_BOOT_NAME = "tl-geometry-local"
"""The name ``boot_transformers`` gets: it only labels the config when the model is passed in, but a
name TransformerLens knows as an alias (``"neox"``, ``"gpt2"``, ...) would be logged as deprecated and
replaced by the hub name; the model's own name is set afterwards."""


class HookedTransformerUnavailable(ImportError, TLGeometryError):
    """The installed TransformerLens has no ``HookedTransformer`` (4.x): the message names what
    needed it and what to install."""


@functools.lru_cache(maxsize=1)
def tl_generation() -> int:
    """The installed TransformerLens's major version: 3 (``HookedTransformer``) or 4 (``TransformerBridge``).

    Read from the package metadata (no import). Where the metadata is missing (a source checkout
    on the path), whether ``HookedTransformer`` imports decides: 3 if it does, else 4.

    Examples:
        >>> tl_generation() in (3, 4)
        True
    """
    try:
        return int(importlib.metadata.version("transformer-lens").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        try:
            from transformer_lens import HookedTransformer  # noqa: F401
        except ImportError:
            return 4
        return 3


def _tl_version() -> str:
    try:
        return importlib.metadata.version("transformer-lens")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source checkout
        return "unknown"


def require_hooked(what: str, *, instead: str = "") -> None:
    """Raise [`HookedTransformerUnavailable`][tl_geometry.models.bridge.HookedTransformerUnavailable]
    when ``HookedTransformer`` cannot be imported (TransformerLens 4 removed it).

    Args:
        what: what needs it, as the message should name it (``"TinyGPT (tg.interaction)"``).
        instead: an alternative that works on TransformerLens 4, appended to the message.

    Raises:
        HookedTransformerUnavailable: an ``ImportError`` whose message names ``what``, the installed
            transformer-lens version and the ``pip install 'transformer-lens>=3,<4'`` that provides it.
    """
    try:
        from transformer_lens import HookedTransformer  # noqa: F401
    except ImportError as exc:
        raise HookedTransformerUnavailable(
            f"{what} needs TransformerLens's HookedTransformer, which transformer-lens {_tl_version()} does not "
            "have (TransformerLens 4 removed it in favour of TransformerBridge); install "
            "`pip install 'transformer-lens>=3,<4'` to use it" + (f"; {instead}" if instead else "")
        ) from exc


def is_bridge(model: Any) -> bool:
    """True for a ``TransformerBridge`` (by class name, without importing TransformerLens)."""
    return any(c.__name__ == "TransformerBridge" for c in type(model).__mro__)


def _stand_in_tokenizer() -> Any:
    """A one-word tokenizer built in memory: ``boot_transformers`` loads the tokenizer from the hub
    when none is given, which offline fails; the bridge's tokenizer is set back to None after boot
    (a checkpoint saved without a tokenizer runs on token ids, as on TransformerLens 3)."""
    from tokenizers import Tokenizer
    from tokenizers import models as tok_models
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(tok_models.WordLevel({"<unk>": 0}, unk_token="<unk>")), unk_token="<unk>"
    )


def _final_norm_weight(bridge: Any) -> torch.Tensor | None:
    """The final norm's weight as the checkpoint applies it, before processing folds it into W_U:
    Gemma's RMSNorm multiplies by ``1 + w`` (what TransformerLens 3's conversion stores as
    ``ln_final.w``), the others by ``w``. None when the bridge has no such weight."""
    norm = getattr(getattr(bridge, "ln_final", None), "_original_component", None)
    w = getattr(norm, "weight", None)
    if not isinstance(w, torch.Tensor):
        return None
    w = w.detach().float().cpu().clone()
    if type(norm).__name__.startswith("Gemma"):
        w = 1.0 + w
    return w


def _process(bridge: Any, pname: str, flags: dict[str, bool]) -> None:
    """``enable_compatibility_mode`` with the flags of TransformerLens 3's loader (``"none"``: the
    hook compatibility layer only, no weight change), recorded on the bridge."""
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not any(flags.values()):
            bridge.enable_compatibility_mode(disable_warnings=True, no_processing=True)
        else:
            bridge.enable_compatibility_mode(
                disable_warnings=True,
                fold_ln=flags["fold_ln"],
                center_writing_weights=flags["center_writing_weights"],
                center_unembed=flags["center_unembed"],
                fold_value_biases=flags.get("fold_value_biases", True),
            )
    _record_processing(bridge, pname, flags)


def wrap_bridge(
    hf_model: Any,
    tokenizer: Any,
    *,
    name: str | None,
    device: torch.device,
    dtype: torch.dtype,
    n_ctx: int | None,
    processed: tuple[str, dict[str, bool]],
):
    """A ``TransformerBridge`` around ``hf_model``, processed as ``processed`` says: the
    TransformerLens-4 counterpart of ``tl_geometry.models.hf_loading.wrap_hf``, with the
    same arguments and the same records on the model.

    The bridge wraps ``hf_model`` itself (no copy of the weights): it is moved to ``device`` and its
    floating parameters cast to ``dtype`` in place, the bridge replaces its submodules, and the
    processing rewrites its weights. [`from_hf`][tl_geometry.models.bridge.from_hf] passes a copy of a
    model you give it; the loaders pass the model they just built.

    ``n_ctx`` caps ``cfg.n_ctx`` as on TransformerLens 3 (the transformers model's own positions are
    untouched). Runs offline: the tokenizer is the one given (None: the model runs on token ids).
    """
    from transformer_lens.model_bridge import TransformerBridge

    pname, flags = processed
    config = hf_model.config
    if not getattr(config, "architectures", None):
        config.architectures = [type(hf_model).__name__]  # a model built from a config has none
    n_ctx_model = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if n_ctx is not None and n_ctx_model is not None:
        n_ctx = min(int(n_ctx), int(n_ctx_model))
    with torch.no_grad():
        for p in hf_model.parameters():
            if p.is_floating_point() and p.dtype != dtype:
                p.data = p.data.to(dtype)
    hf_model.to(device)
    with warnings.catch_warnings(), hub.quiet():
        warnings.simplefilter("ignore")
        bridge = TransformerBridge.boot_transformers(
            _BOOT_NAME,
            hf_model=hf_model,
            tokenizer=tokenizer if tokenizer is not None else _stand_in_tokenizer(),
            device=str(device),
            dtype=dtype,
        )
    if tokenizer is None:
        bridge.tokenizer = None
    final_w = _final_norm_weight(bridge)
    _process(bridge, pname, flags)
    label = name or str(getattr(config, "_name_or_path", "") or type(hf_model).__name__)
    bridge.cfg.model_name = label
    if n_ctx is not None:
        bridge.cfg.n_ctx = int(n_ctx)
    bridge._tl_geometry_name = label
    tied = getattr(config, "tie_word_embeddings", None)
    if isinstance(tied, bool):
        bridge._tl_geometry_tied = tied
    if final_w is not None:  # as on TransformerLens 3: tg.pga's readout caveat reads it when fold_ln folded it
        bridge._tl_geometry_final_norm_w = final_w
    return bridge.eval()


def from_hf(
    hf_model: Any,
    tokenizer: Any = None,
    *,
    name: str | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    n_ctx: int | None = DEFAULT_N_CTX,
    processing: str = "tl",
    fold_ln: bool | None = None,
    center_writing_weights: bool | None = None,
    center_unembed: bool | None = None,
):
    """Wrap an already-loaded transformers causal LM into a TransformerLens model, offline.

    TransformerLens 3: a ``HookedTransformer``, built by ``tl_geometry.models.hf_loading.from_hf``
    with TransformerLens's own config conversion (``get_pretrained_model_config`` on a local copy of
    the HF config) and weight conversion, then ``load_and_process_state_dict`` with the processing
    flags. TransformerLens 4: a ``TransformerBridge`` ([`wrap_bridge`][tl_geometry.models.bridge.wrap_bridge])
    around a copy of ``hf_model``, processed by ``enable_compatibility_mode`` with the same flags.
    On both the model you pass stays yours and unchanged (on 4 the copy costs what 3's conversion
    does: a second set of weights), the default processing is ``"tl"``, and the flags are recorded
    on the model (``model._tl_geometry_processing``) because they change W_E/W_U.

    Args:
        hf_model: a transformers ``*ForCausalLM`` of an architecture TransformerLens supports.
        tokenizer: its tokenizer (attached to the TransformerLens model; None: it runs on token ids).
        name: display name (default: the HF config's ``_name_or_path``).
        device: "cpu", "cuda", "cuda:N" or "mps" (validated).
        dtype: weights dtype (float32 default).
        n_ctx: cap on the context length (None keeps the model's own); see ``DEFAULT_N_CTX``.
        processing: ``"tl"`` (default: TransformerLens's processing) or ``"none"`` (unprocessed,
            as ``from_pretrained_no_processing``; what the PGA paper preset needs).
        fold_ln, center_writing_weights, center_unembed: override single flags (the recorded
            processing name becomes ``"custom"``).

    Raises:
        ValueError: an unknown ``processing``, an unavailable device.
    """
    if tl_generation() < 4:
        return hf_loading.from_hf(
            hf_model,
            tokenizer,
            name=name,
            device=device,
            dtype=dtype,
            n_ctx=n_ctx,
            processing=processing,
            fold_ln=fold_ln,
            center_writing_weights=center_writing_weights,
            center_unembed=center_unembed,
        )
    processed = processing_flags(
        processing, fold_ln=fold_ln, center_writing_weights=center_writing_weights, center_unembed=center_unembed
    )
    dev = check_device(device)
    return wrap_bridge(
        copy.deepcopy(hf_model), tokenizer, name=name, device=dev, dtype=dtype, n_ctx=n_ctx, processed=processed
    )


def load(
    name: Any,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    n_ctx: int | None = DEFAULT_N_CTX,
    processed: tuple[str, dict[str, bool]] = ("tl", PROCESSING["tl"]),
    **from_pretrained_kwargs: Any,
):
    """[`tl_geometry.models.load`][tl_geometry.models.load] on TransformerLens 4, which calls it with
    its options checked (``processed``: the ``(name, flags)`` of
    [`processing_flags`][tl_geometry.models.processing_flags]).

    The same names and paths as on TransformerLens 3, read by the same loaders
    ([`load_hf_gguf`][tl_geometry.models.load_hf_gguf], [`load_hf_path`][tl_geometry.models.load_hf_path]),
    then wrapped by [`wrap_bridge`][tl_geometry.models.bridge.wrap_bridge] instead of converted; any
    other name is booted from the hub by ``TransformerBridge.boot_transformers``
    (``from_pretrained_kwargs`` go to it) and processed the same way.

    Raises:
        ModelNotAvailableError: the hub is unreachable / offline and the model is not cached.
        ValueError: a device that is not available, an empty name.
        FileNotFoundError: a path that does not exist.
    """
    import os
    from pathlib import Path

    if is_path(name):
        dev = check_device(device)
        model = _wrapped(
            lambda: hf_loading.load_hf_path(name, dtype=dtype), display_name(name), dev, dtype, n_ctx, processed
        )
        model._tl_geometry_path = str(Path(os.fspath(name)).expanduser().resolve())
        return model
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"model name must be a non-empty string or a TransformerLens model, got {name!r}")
    dev = check_device(device)
    key = canonical_name(name)
    if key in ZOO:
        path = zoo_file(key)  # ModelNotAvailableError naming the pip command when the package is missing
        model = _wrapped(lambda: hf_loading.load_hf_gguf(path, dtype=dtype), key, dev, dtype, n_ctx, processed)
        model.cfg.default_prepend_bos = True  # as on TransformerLens 3: BOS first (Gemma expects <bos>)
        model._tl_geometry_path = str(path)
        return model
    return _from_hub(name, dev, dtype, processed, **from_pretrained_kwargs)


def _wrapped(files, name, dev, dtype, n_ctx, processed):
    """``files() -> (hf_model, tokenizer)`` wrapped in a bridge; the load time logged."""
    t0 = time.perf_counter()
    hf, tok = files()
    model = wrap_bridge(hf, tok, name=name, device=dev, dtype=dtype, n_ctx=n_ctx, processed=processed)
    logger.info("loaded %s as a TransformerBridge in %.1fs", name, time.perf_counter() - t0)
    return model


def _from_hub(name: str, dev: torch.device, dtype: torch.dtype, processed, **kwargs: Any):
    how = hub_probe(name, "TransformerBridge")
    from transformer_lens.model_bridge import TransformerBridge

    with loading_from_hub(name, how):
        bridge = TransformerBridge.boot_transformers(name, device=str(dev), dtype=dtype, **kwargs)
    _process(bridge, *processed)
    bridge._tl_geometry_name = name
    return bridge.eval()


def random_like(model: Any, *, seed: int = 0):
    """A randomly initialised ``TransformerBridge`` with ``model``'s architecture and config.

    A bridge around a transformers model: a fresh transformers model of the same class built from a
    copy of its config (transformers' own initialisation, seeded by ``seed``), wrapped by
    [`wrap_bridge`][tl_geometry.models.bridge.wrap_bridge] with ``model``'s processing flags (our
    choice: the same processing pipeline as the model it is the baseline of; a model whose flags
    are unknown gets none). A native bridge (``TransformerBridge.boot_native``): a copy with its
    weights drawn anew (``init_weights``), seeded.

    Raises:
        InputError: ``model`` is not a TransformerBridge.
    """
    if not is_bridge(model):
        raise InputError(f"random_like here takes a TransformerBridge, got {type(model).__name__}")
    name = f"{model_name_of(model)}-random-init"
    hf = model.original_model
    config = getattr(hf, "config", None)
    torch.manual_seed(int(seed))
    if config is None or not hasattr(type(hf), "_from_config"):
        rand = copy.deepcopy(model)
        rand.init_weights()
    else:
        flags = processing_of(model) or dict(PROCESSING["none"])
        full = {**PROCESSING["tl" if any(flags.values()) else "none"], **flags}
        pname = processing_name(model) if processing_of(model) is not None else "none"
        dtype = next(hf.parameters()).dtype
        device = next(hf.parameters()).device
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fresh = type(hf)._from_config(copy.deepcopy(config), dtype=dtype)
        rand = wrap_bridge(
            fresh.eval(),
            getattr(model, "tokenizer", None),
            name=name,
            device=device,
            dtype=dtype,
            n_ctx=getattr(model.cfg, "n_ctx", None),
            processed=(pname, full),
        )
    rand._tl_geometry_name = name
    return rand.eval()
