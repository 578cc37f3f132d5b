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
import logging
import os
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


@contextlib.contextmanager
def _gguf_parsed_once() -> Iterator[None]:
    """Within the block, every ``gguf.GGUFReader(path)`` of one file returns the same reader and
    ``gguf.get_tensor_name_map(arch, n)`` is memoized; both are restored on exit, also on error.

    Our choice, for speed only (no number changes): transformers parses a GGUF file three times to
    build one model (config, tokenizer, weights), and rebuilds gguf's tensor-name map at every
    submodule while matching names. On SmolLM2-135M this takes loading from about 31 s to 17 s.
    Both names are looked up in ``gguf`` when transformers calls them (imports inside its
    functions), so patching the module suffices; where gguf lacks them nothing is patched.
    """
    try:
        import gguf
    except ImportError:  # transformers will say that gguf is needed
        yield
        return
    real_reader = getattr(gguf, "GGUFReader", None)
    real_map = getattr(gguf, "get_tensor_name_map", None)
    if real_reader is None or real_map is None:
        yield
        return
    readers: dict[tuple[str, str], Any] = {}

    def reader(path: Any, mode: str = "r") -> Any:
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = real_reader(path, mode)
        return readers[key]

    setattr(gguf, "GGUFReader", reader)  # noqa: B010  (setattr: the module's names, typed as a class)
    setattr(gguf, "get_tensor_name_map", functools.lru_cache(maxsize=None)(real_map))  # noqa: B010
    try:
        yield
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
        with _gguf_parsed_once():
            tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
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
    options it already checked."""
    from transformer_lens import HookedTransformer
    from transformer_lens.loading_from_pretrained import get_pretrained_model_config, get_pretrained_state_dict

    pname, flags = processed
    fold_ln = flags["fold_ln"]
    dev = device
    config = hf_model.config
    if not getattr(config, "architectures", None):
        arch = type(hf_model).__name__
        config.architectures = [arch]
    n_ctx_model = getattr(config, "max_position_embeddings", None)
    if n_ctx is not None and n_ctx_model is not None:
        n_ctx = min(int(n_ctx), int(n_ctx_model))
    _legacy_config_fields(config)
    # TL branches on the *name* for some families ("llama" → Llama without reading config.json);
    # a neutral temp-dir name makes it read the config we saved.
    with tempfile.TemporaryDirectory(prefix="tlg_hf_cfg_") as tmp:
        config.save_pretrained(tmp)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if config.architectures[0] in GEMMA_ARCHITECTURES:
                cfg = _gemma_config(config, fold_ln=fold_ln, device=str(dev), dtype=dtype, n_ctx=n_ctx)
            else:
                cfg = get_pretrained_model_config(tmp, fold_ln=fold_ln, device=str(dev), dtype=dtype, n_ctx=n_ctx)
            _fix_config(cfg, config)
            cfg.model_name = name or str(getattr(config, "_name_or_path", "") or type(hf_model).__name__)
            cfg.tokenizer_name = None
            state_dict = get_pretrained_state_dict(tmp, cfg, hf_model=hf_model, dtype=dtype)
            final_w = state_dict.get("ln_final.w")  # before fold_ln moves it into W_U
            final_w = None if final_w is None else final_w.detach().float().cpu().clone()
            model = HookedTransformer(cfg, tokenizer=tokenizer, move_to_device=False)
    with warnings.catch_warnings():
        # TL warns that it skips center_writing_weights for RMSNorm models; the flag is recorded as asked.
        warnings.simplefilter("ignore", UserWarning)
        model.load_and_process_state_dict(state_dict, **flags)
    model.to(dev)
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
