"""Hugging Face checkpoints into TransformerLens models, offline.

* [`load_hf_gguf`][tl_geometry.models.load_hf_gguf] / [`load_hf_path`][tl_geometry.models.load_hf_path]: a
  transformers model and tokenizer from a local .gguf file (dequantized by transformers), a
  model directory or a .safetensors file in one; a truncated file fails with its sizes first.
* [`from_hf`][tl_geometry.models.from_hf]: a transformers causal LM into a ``HookedTransformer``
  with TransformerLens's own config and weight conversion and the chosen weight processing.
* The config building TransformerLens 3.9 lacks for local checkpoints: Gemma / Gemma 2 / Gemma 3
  from their config.json (`_gemma_config`), and the fields transformers 5 renamed
  (`_legacy_config_fields`, `_fix_config`).

Re-exported by [`tl_geometry.models`][tl_geometry.models], which resolves names and paths to these loaders.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from tl_geometry.io import hub
from tl_geometry.models.zoo import (
    DEFAULT_N_CTX,
    ModelNotAvailableError,
    _record_processing,
    check_device,
    processing_flags,
)

logger = logging.getLogger(__name__)


class _GGUFOnce:
    """What [`_gguf_parsed_once`][tl_geometry.models.hf_loading._gguf_parsed_once] yields: ``hide_tokenizer`` set
    True, the readers it hands out from then on show no tokenizer arrays (for the config and weight
    calls, which do not need them)."""

    hide_tokenizer: bool = False


class _WithoutTokenizerArrays:
    """A ``GGUFReader`` whose ``fields`` lack the ``tokenizer.ggml.*`` arrays (the vocabulary, its
    scores, types and merges; the scalar token ids stay), with ``<arch>.vocab_size`` added from the
    vocabulary's length where the file has none: what transformers would compute from the decoded
    vocabulary (``len(tokens)``), without decoding it. Every other attribute is the reader's."""

    def __init__(self, reader: Any):
        self._reader = reader
        fields = {k: f for k, f in reader.fields.items() if not (k.startswith("tokenizer.ggml.") and len(f.data) > 1)}
        arch_field = reader.fields.get("general.architecture")
        tokens = reader.fields.get("tokenizer.ggml.tokens")
        if arch_field is not None and tokens is not None:
            import numpy as np
            from gguf import GGUFValueType, ReaderField

            arch = bytes(arch_field.parts[arch_field.data[0]]).decode("utf-8")
            key = f"{arch}.vocab_size"
            if key not in fields:
                fields[key] = ReaderField(
                    0,
                    key,
                    parts=[np.array([len(tokens.data)], dtype=np.uint32)],
                    data=[0],
                    types=[GGUFValueType.UINT32],
                )
        self.fields = fields

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


@contextlib.contextmanager
def _gguf_parsed_once() -> Iterator[_GGUFOnce]:
    """Within the block, every ``gguf.GGUFReader(path)`` of one file returns the same reader and
    ``gguf.get_tensor_name_map(arch, n)`` is memoized; both are restored on exit, also on error.
    Once the yielded state's ``hide_tokenizer`` is True, the reader comes without its tokenizer
    arrays ([`_WithoutTokenizerArrays`][tl_geometry.models.hf_loading._WithoutTokenizerArrays]).

    Our choice, for speed only (no number changes): transformers parses a GGUF file three times to
    build one model (config, tokenizer, weights), and rebuilds gguf's tensor-name map at every
    submodule while matching names. On SmolLM2-135M this takes loading from about 31 s to 17 s.
    The config and weight calls also decode every tokenizer array value by value (Gemma-3-270M:
    262,144 tokens, scores and types); they need only the vocabulary's size (SmolLM2's config call:
    3.1 s to 0.4 ms; a whole load's time did not change measurably, docs/reliability.md Memory). Both names are looked up in ``gguf`` when transformers calls them (imports
    inside its functions), so patching the module suffices; where gguf lacks them nothing is patched.
    """
    state = _GGUFOnce()
    try:
        import gguf
    except ImportError:  # transformers will say that gguf is needed
        yield state
        return
    real_reader = getattr(gguf, "GGUFReader", None)
    real_map = getattr(gguf, "get_tensor_name_map", None)
    if real_reader is None or real_map is None:
        yield state
        return
    readers: dict[tuple[str, str], Any] = {}

    def reader(path: Any, mode: str = "r") -> Any:
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = real_reader(path, mode)
        return _WithoutTokenizerArrays(readers[key]) if state.hide_tokenizer else readers[key]

    setattr(gguf, "GGUFReader", reader)  # noqa: B010  (setattr: the module's names, typed as a class)
    setattr(gguf, "get_tensor_name_map", functools.lru_cache(maxsize=None)(real_map))  # noqa: B010
    try:
        yield state
    finally:
        setattr(gguf, "GGUFReader", real_reader)  # noqa: B010
        setattr(gguf, "get_tensor_name_map", real_map)  # noqa: B010


def load_hf_gguf(path: str | os.PathLike, *, dtype: torch.dtype = torch.float32):
    """(hf_model, tokenizer) from a GGUF file, dequantized by transformers (needs ``gguf``)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from tl_geometry.io.weight_files import check_weights_file

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such GGUF file: {path}")
    check_weights_file(path)  # a truncated/corrupt file: CorruptFileError with the sizes, not a numpy traceback
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with _gguf_parsed_once() as once:
            tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            once.hide_tokenizer = True  # the config and the weights need only the vocabulary's size
            hf = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=dtype)
    except (ValueError, KeyError, OSError, RuntimeError) as exc:
        raise ModelNotAvailableError(
            f"transformers could not build a model from the GGUF file {path}: {type(exc).__name__}: "
            f"{str(exc)[:300]} (transformers dequantizes GGUF files of the architectures it lists in "
            "transformers.integrations.ggml.GGUF_CONFIG_MAPPING)"
        ) from exc
    finally:
        hf_logging.set_verbosity(verbosity)
    return hf.eval(), tok


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "spiece.model")
"""Files of a saved tokenizer; a model directory with none of them loads without a tokenizer."""


def load_hf_path(path: str | os.PathLike, *, dtype: torch.dtype = torch.float32):
    """(hf_model, tokenizer) from a local file or directory, offline.

    Accepted: a .gguf file (dequantized by transformers), a Hugging Face model directory
    (``config.json`` + weights; the tokenizer is None when the directory has none of
    [`TOKENIZER_FILES`][tl_geometry.models.TOKENIZER_FILES], as ``save_pretrained`` of a model alone writes), or a
    .safetensors file inside such a directory.

    Raises:
        FileNotFoundError: the path does not exist.
        CorruptFileError: a truncated or corrupt weights file (expected and actual size).
        ModelNotAvailableError: a path of a kind we cannot load (the message lists the accepted ones).
    """
    p = Path(os.fspath(path)).expanduser()
    accepted = "accepted: a .gguf file, a Hugging Face model directory (config.json + weights) or a .safetensors file inside one"
    if not p.exists():
        raise FileNotFoundError(
            f"no such model file or directory: {p} (a model argument with a path separator or a .gguf/.safetensors "
            f"suffix is read as a local path; hub names look like 'gpt2' or 'org/name'); {accepted}"
        )
    if p.is_file() and p.suffix.lower() == ".gguf":
        return load_hf_gguf(p, dtype=dtype)
    if p.is_file() and p.suffix.lower() == ".safetensors":
        from tl_geometry.io.weight_files import check_weights_file

        check_weights_file(p)
        if not (p.parent / "config.json").is_file():
            raise ModelNotAvailableError(
                f"{p}: a .safetensors file holds tensors only; loading a model also needs its config.json "
                f"(and tokenizer files) next to it, and {p.parent} has no config.json; {accepted}"
            )
        p = p.parent
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ModelNotAvailableError(
                f"{p} is a directory without config.json, not a Hugging Face model directory; {accepted}"
            )
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from tl_geometry.io.weight_files import check_weights_file

        for f in sorted(p.glob("*.safetensors")):
            check_weights_file(f)
        with hub.quiet():
            try:
                tok = None
                if any((p / f).is_file() for f in TOKENIZER_FILES):
                    tok = AutoTokenizer.from_pretrained(str(p), local_files_only=True)
                else:  # a checkpoint saved without its tokenizer: the model runs on token ids
                    logger.info("%s has no tokenizer files (%s): loading the model without one", p, TOKENIZER_FILES)
                hf = AutoModelForCausalLM.from_pretrained(str(p), local_files_only=True, dtype=dtype)
            except (ValueError, KeyError, OSError, RuntimeError) as exc:
                raise ModelNotAvailableError(
                    f"transformers could not load the model directory {p}: {type(exc).__name__}: {str(exc)[:300]}"
                ) from exc
        return hf.eval(), tok
    raise ModelNotAvailableError(f"{p}: not a model file ({p.suffix or 'no suffix'!r}); {accepted}")


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
    """Wrap an already-loaded transformers causal LM into a ``HookedTransformer``, offline.

    Uses TransformerLens's own config conversion (``get_pretrained_model_config`` on a local
    copy of the HF config) and weight conversion (``get_pretrained_state_dict`` with
    ``hf_model=``), then ``load_and_process_state_dict`` with the processing flags. The flags
    are recorded on the model (``model._tl_geometry_processing``) because they change W_E/W_U.

    Args:
        hf_model: a transformers ``*ForCausalLM`` of an architecture TransformerLens supports.
        tokenizer: its tokenizer (attached to the TL model).
        name: display name (default: the HF config's ``_name_or_path``).
        n_ctx: cap on the context length (None keeps the model's own); see ``DEFAULT_N_CTX``.
        processing: ``"tl"`` (default: TransformerLens's processing) or ``"none"`` (unprocessed,
            as ``from_pretrained_no_processing``; what the PGA paper preset needs).
        fold_ln, center_writing_weights, center_unembed: override single flags (the recorded
            processing name becomes ``"custom"``).

    Raises:
        ValueError: an unknown ``processing``, an unavailable device.
    """
    processed = processing_flags(
        processing, fold_ln=fold_ln, center_writing_weights=center_writing_weights, center_unembed=center_unembed
    )
    return wrap_hf(
        hf_model, tokenizer, name=name, device=check_device(device), dtype=dtype, n_ctx=n_ctx, processed=processed
    )


def wrap_hf(
    hf_model: Any,
    tokenizer: Any,
    *,
    name: str | None,
    device: torch.device,
    dtype: torch.dtype,
    n_ctx: int | None,
    processed: tuple[str, dict[str, bool]],
):
    """[`from_hf`][tl_geometry.models.from_hf] once its arguments are checked: ``device`` from
    [`check_device`][tl_geometry.models.check_device], ``processed`` the ``(name, flags)`` of
    [`processing_flags`][tl_geometry.models.processing_flags]. [`load`][tl_geometry.models.load] calls it with the
    options it already checked.

    One copy of the weights: ``hf_model`` given as an ``_Owned`` holder (what ``load`` does with the
    model it loaded itself) is freed right after the conversion, the tensors the conversion took from
    it becoming the TransformerLens parameters; a plain model (``from_hf``) stays its caller's,
    unchanged, and shares no memory with the result. Conversion and processing run under
    ``no_grad``, TransformerLens's processing without its copies ([`load_processed`][tl_geometry.models.hf_loading.load_processed]),
    and the freed memory is returned to the OS ([`release_memory`][tl_geometry.models.hf_loading.release_memory])."""
    from transformer_lens import HookedTransformer
    from transformer_lens.loading_from_pretrained import get_pretrained_state_dict

    owned = isinstance(hf_model, _Owned)
    hf = hf_model.take() if owned else hf_model
    del hf_model  # owned: the holder's reference is gone; ``hf`` is the last one
    pname, flags = processed
    config = hf.config
    with torch.no_grad(), tempfile.TemporaryDirectory(prefix="tlg_hf_cfg_") as tmp:
        # no_grad: TL switches autograd off only for HF models it loads itself; with ours every
        # processed tensor would keep the tensors it was computed from alive (its autograd graph)
        cfg = _tl_config(hf, config, tmp, name=name, device=device, dtype=dtype, n_ctx=n_ctx, fold_ln=flags["fold_ln"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            state_dict = get_pretrained_state_dict(tmp, cfg, hf_model=hf, dtype=dtype)
        final_w = state_dict.get("ln_final.w")  # before fold_ln moves it into W_U
        final_w = None if final_w is None else final_w.detach().float().cpu().clone()
        # a model passed in stays its owner's: none of our parameters may share its memory
        foreign = frozenset() if owned else _storages(hf)
        hf = None  # owned: the transformers model is freed here (by reference count); the state dict keeps the tensors it took
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = HookedTransformer(cfg, tokenizer=tokenizer, move_to_device=False)
            # TL warns that it skips center_writing_weights for RMSNorm models; the flag is recorded as asked.
            load_processed(model, state_dict, flags, foreign=foreign)
        del state_dict
    release_memory()
    model.to(device)
    model._tl_geometry_name = name or cfg.model_name  # type: ignore[assignment]  # torch's stub: Module attrs are Tensor | Module
    # whether W_U is W_E in the loaded HF model (what transformers tied): the SAE comparison's shared ratio
    tied = getattr(config, "tie_word_embeddings", None)
    if isinstance(tied, bool):
        model._tl_geometry_tied = tied  # type: ignore[assignment]  # as above
    _record_processing(model, pname, flags)
    if final_w is not None:
        # the final norm's weight as the checkpoint applies it (Gemma: 1 + w), kept when fold_ln folds it into
        # W_U: tg.pga's library preset reads its spread (tl_geometry.families.pga.readout_caveat)
        model._tl_geometry_final_norm_w = final_w  # type: ignore[assignment]  # as above
    return model.eval()


def _tl_config(
    hf: Any,
    config: Any,
    tmp: str,
    *,
    name: str | None,
    device: torch.device,
    dtype: torch.dtype,
    n_ctx: int | None,
    fold_ln: bool,
) -> Any:
    """The ``HookedTransformerConfig`` of a transformers model, by TransformerLens's own config
    conversion from a copy of its config saved in ``tmp`` (Gemma: `_gemma_config`). TL branches on
    the *name* for some families ("llama" → Llama without reading config.json); a neutral temp-dir
    name makes it read the config we saved. ``tmp`` must exist while the weights are converted too."""
    from transformer_lens.loading_from_pretrained import get_pretrained_model_config

    if not getattr(config, "architectures", None):
        config.architectures = [type(hf).__name__]
    n_ctx_model = getattr(config, "max_position_embeddings", None)
    if n_ctx is not None and n_ctx_model is not None:
        n_ctx = min(int(n_ctx), int(n_ctx_model))
    _legacy_config_fields(config)
    config.save_pretrained(tmp)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if config.architectures[0] in GEMMA_ARCHITECTURES:
            cfg = _gemma_config(config, fold_ln=fold_ln, device=str(device), dtype=dtype, n_ctx=n_ctx)
        else:
            cfg = get_pretrained_model_config(tmp, fold_ln=fold_ln, device=str(device), dtype=dtype, n_ctx=n_ctx)
    _fix_config(cfg, config)
    cfg.model_name = name or str(getattr(config, "_name_or_path", "") or type(hf).__name__)
    cfg.tokenizer_name = None
    return cfg


class _Owned:
    """A transformers model handed over to [`wrap_hf`][tl_geometry.models.hf_loading.wrap_hf], which frees it
    after the conversion: a one-shot holder (``take`` returns the model once and keeps no reference).

    [`tl_geometry.models.load`][tl_geometry.models.load] hands over the model it loaded itself; a model
    passed to [`from_hf`][tl_geometry.models.from_hf] is its caller's, never freed nor written."""

    __slots__ = ("_model",)

    def __init__(self, model: Any):
        self._model = model

    def take(self) -> Any:
        model, self._model = self._model, None
        if model is None:
            raise RuntimeError("this transformers model was already handed over")
        return model


def _storages(module: Any) -> frozenset[int]:
    """The addresses of the memory behind a module's parameters and buffers."""
    return frozenset(t.untyped_storage().data_ptr() for t in (*module.parameters(), *module.buffers()))


def release_memory() -> None:
    """Collect garbage, then hand the freed heap back to the OS (glibc's ``malloc_trim(0)``; elsewhere
    nothing): after a load the process's RSS is the model's, not the peak of the conversion."""
    gc.collect()
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (musl, ...): the memory is reused by the process instead
        pass


# ------------------------------------------------ TransformerLens's processing, without its copies
def load_processed(model: Any, state_dict: dict[str, Any], flags: dict[str, bool], *, foreign=frozenset()) -> None:
    """What ``HookedTransformer.load_and_process_state_dict(state_dict, **flags)`` does (TransformerLens
    3.9), with one copy of the weights instead of up to five; the parameters are bit-identical
    (tests/unit/models/test_load_memory.py checks it on Llama, Gemma 3, GPT-2 and GPT-NeoX).

    TL's processing steps run in TL's order, on ``state_dict`` itself (consumed): TL deep-copies
    the whole state dict in ``fold_layer_norm``, ``center_unembed`` and ``fold_value_biases`` to
    leave its argument unchanged, although no step writes into a tensor. Each processed tensor then
    *becomes* the parameter (made contiguous, in the parameter's dtype: what TL's ``copy_`` into the
    parameter gives) instead of being copied into one; a tensor whose memory is in ``foreign`` (the
    caller's transformers model) or already another parameter's is copied. Run under ``no_grad``.
    """
    from transformer_lens.components import LayerNormPre, RMSNormPre

    cfg = model.cfg
    fold_ln = bool(flags.get("fold_ln", True))
    state_dict = model.fill_missing_keys(state_dict)
    if fold_ln:  # as load_and_process_state_dict: the norms become their "Pre" forms
        if cfg.normalization_type not in ("LN", "LNPre", "RMS", "RMSPre"):
            logger.warning(
                "You are not using LayerNorm or RMSNorm, so the layer norm weights can't be folded! Skipping"
            )
            fold_ln = False
        elif not any(k.endswith((".ln1.w", ".ln2.w", "ln_final.w")) for k in state_dict):
            logger.warning("fold_ln=True but no LayerNorm weights found in state_dict. Skipping fold.")
            fold_ln = False
        elif cfg.normalization_type in ("LN", "RMS"):
            pre = LayerNormPre if cfg.normalization_type == "LN" else RMSNormPre
            cfg.normalization_type += "Pre"
            model.ln_final = pre(cfg)
            for layer in model.blocks:
                layer.ln1 = pre(cfg)
                layer.ln2 = pre(cfg)
                if cfg.is_layer_norm_activation():
                    layer.mlp.ln = pre(cfg)
    state_dict = process_weights(
        state_dict,
        cfg,
        fold_ln=fold_ln,
        center_writing_weights=bool(flags.get("center_writing_weights", True)),
        center_unembed=bool(flags.get("center_unembed", True)),
        fold_value_biases=bool(flags.get("fold_value_biases", True)),
    )
    _assign(model, state_dict, foreign)
    if fold_ln:
        model.setup()


def process_weights(
    state_dict: dict[str, Any],
    cfg: Any,
    *,
    fold_ln: bool,
    center_writing_weights: bool,
    center_unembed: bool,
    fold_value_biases: bool,
) -> dict[str, Any]:
    """``ProcessWeights.process_weights`` of TransformerLens 3.9 (no adapter, no refactoring of the
    attention matrices) on ``state_dict`` itself: the same steps in the same order, calling TL's
    own per-layer functions where TL has them; where it does not (another TL version), TL's public
    steps, with their copies. Float tensors of another dtype are processed in float32 and cast back,
    as TL does."""
    from transformer_lens.weight_processing import ProcessWeights as PW

    original = {k: v.dtype for k, v in state_dict.items() if _is_float(v) and v.dtype != torch.float32}
    for k in original:
        state_dict[k] = state_dict[k].float()
    norm = getattr(cfg, "normalization_type", "LN")
    layer_norm = norm in ("LN", "LNPre")
    if fold_ln and norm in ("LN", "LNPre", "RMS", "RMSPre"):
        fold_biases = center = layer_norm
        steps = _tl_fold_steps()
        if steps is not None:
            fold_layer, fold_final_bias, fold_unembed = steps
            gqa = "" if getattr(cfg, "n_key_value_heads", None) is None else "_"
            for layer in range(cfg.n_layers):  # fold_layer_norm without its copy
                state_dict = fold_layer(state_dict, cfg, layer, fold_biases, center, None, gqa)
            state_dict = fold_final_bias(state_dict, cfg, fold_biases, None)
            state_dict = fold_unembed(state_dict, cfg, fold_biases, center, None)
        else:
            state_dict = PW.fold_layer_norm(state_dict, cfg, fold_biases=fold_biases, center_weights=center)
    if center_writing_weights and layer_norm and not getattr(cfg, "final_rms", False):
        state_dict = PW.center_writing_weights(state_dict, cfg)  # TL's own: it copies nothing
    if center_unembed:
        _center_unembed(state_dict, cfg)
    if fold_value_biases:
        for layer in range(cfg.n_layers):  # TL's step on one layer's attention at a time: it copies only that
            prefix = f"blocks.{layer}.attn."
            part = {k: v for k, v in state_dict.items() if k.startswith(prefix)}
            state_dict.update(PW.fold_value_biases(part, cfg))
            b_O = state_dict.get(prefix + "b_O")
            if center_writing_weights and layer_norm and b_O is not None:
                state_dict[prefix + "b_O"] = b_O - b_O.mean()
    for k, dtype in original.items():
        if k in state_dict and isinstance(state_dict[k], torch.Tensor):
            state_dict[k] = state_dict[k].to(dtype)
    return state_dict


def _tl_fold_steps() -> tuple[Any, Any, Any] | None:
    """TransformerLens 3.9's per-layer steps of ``fold_layer_norm`` (private; None where TL lacks them)."""
    from transformer_lens.weight_processing import ProcessWeights as PW

    names = ("_fold_layer", "_fold_final_rms_bias", "_fold_unembed_layer_norm")
    if not all(hasattr(PW, n) for n in names):
        return None
    return (PW._fold_layer, PW._fold_final_rms_bias, PW._fold_unembed_layer_norm)


def _is_float(v: Any) -> bool:
    return isinstance(v, torch.Tensor) and v.is_floating_point()


def _center_unembed(state_dict: dict[str, Any], cfg: Any) -> None:
    """TL's ``center_unembed`` (W_U and b_U minus their means over the vocabulary), in place in the
    dict: TL's copies the whole state dict first. The vocabulary axis as TL finds it."""
    W_U = state_dict.get("unembed.W_U")
    if W_U is None:
        raise KeyError(
            f"Expected unembedding weight key 'unembed.W_U' not found in state_dict: {list(state_dict)[:10]}"
        )
    vocab_dim = -1  # TL format [d_model, d_vocab]
    d_vocab, d_model = getattr(cfg, "d_vocab", None), getattr(cfg, "d_model", None)
    if d_vocab is not None and W_U.shape[0] == d_vocab and W_U.shape[-1] != d_vocab:
        vocab_dim = 0
    elif d_model is not None and W_U.shape[-1] == d_model and W_U.shape[0] != d_model:
        vocab_dim = 0
    state_dict["unembed.W_U"] = W_U - W_U.mean(vocab_dim, keepdim=True)
    del W_U
    b_U = state_dict.get("unembed.b_U")
    if b_U is not None:
        state_dict["unembed.b_U"] = b_U - b_U.mean()


def _assign(model: Any, state_dict: dict[str, Any], foreign: frozenset[int]) -> None:
    """Make each tensor of ``state_dict`` (emptied) the model's parameter or buffer of that name:
    ``load_state_dict(strict=False)`` without the copy (keys the model lacks are skipped, a shape
    that differs raises). Contiguous and in the parameter's dtype and device, as ``copy_`` makes it;
    copied when its memory is ``foreign`` or already taken by another parameter."""
    taken = set(foreign)
    for key in list(state_dict):
        t = state_dict.pop(key)
        module_name, _, leaf = key.rpartition(".")
        try:
            module = model.get_submodule(module_name)
        except AttributeError:
            continue
        if module._parameters.get(leaf) is not None:
            old, is_param = module._parameters[leaf], True
        elif module._buffers.get(leaf) is not None:
            old, is_param = module._buffers[leaf], False
        else:
            continue
        if not isinstance(t, torch.Tensor) or t.shape != old.shape:
            raise RuntimeError(
                f"size mismatch for {key}: copying a param with shape {getattr(t, 'shape', type(t))} "
                f"from the converted checkpoint, the shape in the model is {old.shape}"
            )
        t = t.detach().to(dtype=old.dtype, device=old.device).contiguous()
        ptr = t.untyped_storage().data_ptr()
        if ptr in taken and t.numel():
            t = t.clone()
            ptr = t.untyped_storage().data_ptr()
        taken.add(ptr)
        if is_param:
            module._parameters[leaf] = torch.nn.Parameter(t, requires_grad=old.requires_grad)
        else:
            module._buffers[leaf] = t
        del old, t


GEMMA_ARCHITECTURES = ("GemmaForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM")
"""Gemma families: TransformerLens 3.9 builds their config from the official hub *name* only (``google/gemma-2-2b``, ...), never from a config.json, so a local Gemma-style checkpoint gets its config from `_gemma_config` (weights still go through TL's ``convert_gemma_weights``)."""


def _legacy_config_fields(config: Any) -> None:
    """Fields TransformerLens 3.9's config conversion reads that transformers 5 no longer sets.

    GPT-2: TL reads ``n_ctx``, which transformers 5's ``GPT2Config`` dropped (it is ``n_positions``).
    """
    if getattr(config, "model_type", None) == "gpt2" and "n_ctx" not in config.to_dict():
        config.n_ctx = config.n_positions


def _fix_config(cfg: Any, config: Any) -> None:
    """Where TL's conversion ignores a field of the checkpoint's config, take the checkpoint's.

    GPT-2: TL sets ``d_mlp = 4·d_model``; a config with ``n_inner`` says otherwise.
    """
    if getattr(config, "model_type", None) == "gpt2" and getattr(config, "n_inner", None):
        cfg.d_mlp = int(config.n_inner)


def _rope_theta(config: Any, layer_type: str | None = None, default: float = 10000.0) -> float:
    rope = config.to_dict().get("rope_parameters") or {}
    if layer_type is not None and isinstance(rope.get(layer_type), dict):
        rope = rope[layer_type]
    return float(rope.get("rope_theta", config.to_dict().get("rope_theta", default)))


def _gemma_config(config: Any, *, fold_ln: bool, device: str, dtype: torch.dtype, n_ctx: int | None):
    """A ``HookedTransformerConfig`` for a Gemma / Gemma 2 / Gemma 3 (text) checkpoint, from its config.

    The fields are those of TransformerLens 3.9's own Gemma entries (``google/gemma-2b``,
    ``google/gemma-2-2b``, ``google/gemma-3-270m``), read from the checkpoint instead of a table:
    RMSNorm, gated GELU-tanh MLP, rotary positions, grouped key/value heads; Gemma 2/3 add the
    norms before and after each sublayer, local (sliding-window) and global layers as the config's
    ``layer_types`` say, ``query_pre_attn_scalar`` as the attention scale and the soft caps;
    Gemma 3 adds q/k norms and a separate rotary base for the local layers.
    """
    from transformer_lens import HookedTransformerConfig

    c = config.to_dict()
    arch = config.architectures[0]
    head_dim = int(c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"])
    d: dict[str, Any] = {
        "d_model": c["hidden_size"],
        "d_head": head_dim,
        "n_heads": c["num_attention_heads"],
        "d_mlp": c["intermediate_size"],
        "n_layers": c["num_hidden_layers"],
        "n_ctx": c["max_position_embeddings"],
        "eps": c["rms_norm_eps"],
        "d_vocab": c["vocab_size"],
        "act_fn": c.get("hidden_activation") or c.get("hidden_act") or "gelu_pytorch_tanh",
        "initializer_range": c.get("initializer_range", 0.02),
        "normalization_type": "RMS",
        "rotary_base": _rope_theta(config, "full_attention"),
        "rotary_dim": head_dim,
        "positional_embedding_type": "rotary",
        "use_attn_scale": True,
        "n_key_value_heads": c.get("num_key_value_heads") or c["num_attention_heads"],
        "gated_mlp": True,
        "final_rms": True,
        "original_architecture": arch,
        "tokenizer_name": None,
        "model_name": "gemma",
        "init_weights": False,
        "from_checkpoint": False,
        "device": device,
        "n_devices": 1,
        "dtype": dtype,
        "default_prepend_bos": True,
    }
    if arch != "GemmaForCausalLM":
        types = c.get("layer_types") or ["full_attention"] * c["num_hidden_layers"]
        d.update(
            use_normalization_before_and_after=True,
            attn_scale=float(c.get("query_pre_attn_scalar") or head_dim) ** 0.5,
            use_local_attn=any(t == "sliding_attention" for t in types),
            window_size=c.get("sliding_window"),
            attn_types=["local" if t == "sliding_attention" else "global" for t in types],
        )
        if c.get("attn_logit_softcapping"):
            d["attn_scores_soft_cap"] = float(c["attn_logit_softcapping"])
        if c.get("final_logit_softcapping"):
            d["output_logits_soft_cap"] = float(c["final_logit_softcapping"])
    if arch == "Gemma3ForCausalLM":
        d.update(use_qk_norm=True, rotary_base_local=_rope_theta(config, "sliding_attention"))
    if fold_ln:
        d["normalization_type"] = "RMSPre"
    if n_ctx is not None:
        d["n_ctx"] = int(n_ctx)
    return HookedTransformerConfig.from_dict(d)
