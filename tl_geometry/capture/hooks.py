"""A model's hook points, weights and tokens: hook names and their validation, weight lookup, token checks and the positions kept (BOS and padding dropped). No forward pass here; [`tl_geometry.capture.activations`][tl_geometry.capture.activations] runs them."""

from __future__ import annotations

import difflib
import logging
import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal, Protocol, overload, runtime_checkable

import torch
from jaxtyping import Int
from torch import Tensor

from tl_geometry.errors import InputError, InputTypeError

logger = logging.getLogger(__name__)


@runtime_checkable
class HookedModel(Protocol):
    """What tl_geometry needs of a model (HookedTransformer and TransformerBridge both fit)."""

    cfg: Any

    def run_with_hooks(self, *args, **kwargs): ...
    def run_with_cache(self, *args, **kwargs): ...
    def hooks(self, *args, **kwargs): ...


# ----------------------------------------------------------------------------- a pass's frame
class _StopForward(Exception):
    """Raised inside a hook once every requested activation of the batch is in hand."""


@contextmanager
def eval_mode(model: Any):
    """Run in eval mode (dropout off) and restore train mode afterwards, even on error."""
    was_training = bool(getattr(model, "training", False))
    if was_training:
        logger.info("%s was in train mode; evaluating in eval mode and restoring it", type(model).__name__)
        model.eval()
    try:
        yield
    finally:
        if was_training:
            model.train()


# ----------------------------------------------------------------------------- one user at a time
_LOCKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def model_lock(model: Any) -> threading.RLock:
    """The lock of one model: every pass of tl_geometry that adds hooks to ``model`` holds it, so
    two threads measuring the same model (two ``tg.analyze`` calls, a notebook's background job)
    take turns instead of firing each other's hooks (which mixed their numbers, or failed with
    "hooks never fired"). Re-entrant: a pass inside a pass of the same thread is fine."""
    with _LOCKS_GUARD:
        lock = _LOCKS.get(model)
        if lock is None:
            lock = _LOCKS[model] = threading.RLock()
        return lock


@contextmanager
def hooked(model: Any, fwd_hooks: list) -> Iterator[None]:
    """``model.hooks(fwd_hooks=...)`` under the model's lock (`model_lock`): the hooks exist only
    inside the block, are removed even on error (the model's own context manager), and no other
    thread's pass runs on this model meanwhile."""
    with model_lock(model), model.hooks(fwd_hooks=fwd_hooks):
        yield


# ----------------------------------------------------------------------------- hook lists
def check_model(model: Any) -> None:
    """Raise TypeError unless ``model`` looks like a TransformerLens model."""
    missing = [a for a in ("cfg", "hooks", "hook_dict") if not hasattr(model, a)]
    if missing:
        raise InputTypeError(
            f"expected a TransformerLens HookedTransformer or TransformerBridge, got "
            f"{type(model).__name__} (missing {', '.join(missing)}); load one with "
            "tl_geometry.models.load(name) or pass a model you built"
        )


def resid_hooks(model: Any, kind: str = "post", layers: Iterable[int] | None = None) -> list[str]:
    """``blocks.{l}.hook_resid_{kind}`` for every layer (or ``layers``); kind in pre/mid/post."""
    if kind not in ("pre", "mid", "post"):
        raise InputError(f"kind must be 'pre', 'mid' or 'post', got {kind!r}")
    n = model.cfg.n_layers
    layers = range(n) if layers is None else list(layers)
    bad = [l for l in layers if not (0 <= int(l) < n)]
    if bad:
        raise InputError(f"layers {bad} out of range for a model with n_layers={n}")
    return [f"blocks.{int(l)}.hook_resid_{kind}" for l in layers]


EMBED_HOOK = "hook_embed"


FINAL_HOOK = "ln_final.hook_normalized"


def standard_hooks(model: Any) -> list[str]:
    """``hook_embed``, every resid_post, and ``ln_final.hook_normalized`` (when present)."""
    hooks = [EMBED_HOOK, *resid_hooks(model, "post")]
    if FINAL_HOOK in model.hook_dict:
        hooks.append(FINAL_HOOK)
    return hooks


FINAL_STATE_HOOK = "unembed.hook_in"
"""The input of the unembedding: the final norm's output *including its weight* (on a model without fold_ln; with fold_ln the weight lives in W_U and this equals ``ln_final.hook_normalized``)."""


def hidden_state_hooks(model: Any) -> list[str]:
    """The hooks of Hugging Face's ``output_hidden_states``, in order (n_layers + 1 of them).

    ``blocks.0.hook_resid_pre`` (the embeddings as the first block reads them: token plus
    positional embedding where the model has one), ``blocks.{l}.hook_resid_post`` for
    l = 0 … n_layers − 2, and, in place of the last block's output, the final normalized state
    ``unembed.hook_in`` (the last block's output after the final norm, as transformers' last
    ``hidden_states`` entry). Falls back to ``ln_final.hook_normalized`` when the model has no
    ``unembed.hook_in``.

    Examples:
        >>> class M: cfg = type("C", (), {"n_layers": 2}); hooks = None; hook_dict = {"unembed.hook_in": 0}
        >>> hidden_state_hooks(M())
        ['blocks.0.hook_resid_pre', 'blocks.0.hook_resid_post', 'unembed.hook_in']
    """
    check_model(model)
    n = int(model.cfg.n_layers)
    final = FINAL_STATE_HOOK if FINAL_STATE_HOOK in model.hook_dict else FINAL_HOOK
    return ["blocks.0.hook_resid_pre", *resid_hooks(model, "post", range(n - 1)), final]


def validate_hooks(model: Any, hooks: str | Sequence[str]) -> list[str]:
    """Return ``hooks`` as a list after checking every name exists on ``model``.

    Raises:
        TypeError: ``hooks`` is not a string or a sequence of strings (e.g. a lambda: pass
            explicit names; the bridge's canonical names differ from TL's).
        ValueError: empty list, duplicates, or an unknown name (the message lists the closest
            valid names).
    """
    check_model(model)
    if isinstance(hooks, str):
        hooks = [hooks]
    if callable(hooks) or not isinstance(hooks, Sequence):
        raise InputTypeError(
            f"hooks must be a list of hook names (strings), got {type(hooks).__name__}; "
            "filters/lambdas are not accepted because TransformerBridge's canonical names differ"
        )
    hooks = list(hooks)
    if not hooks:
        raise InputError("hooks is empty; pass at least one hook name (e.g. 'blocks.0.hook_resid_post')")
    if not all(isinstance(h, str) for h in hooks):
        raise InputTypeError(f"every hook name must be a string, got {[type(h).__name__ for h in hooks]}")
    dup = sorted({h for h in hooks if hooks.count(h) > 1})
    if dup:
        raise InputError(f"duplicate hook names: {dup}")
    valid = model.hook_dict
    for h in hooks:
        if h not in valid:
            close = difflib.get_close_matches(h, list(valid), n=5, cutoff=0.5)
            raise InputError(
                f"unknown hook {h!r} for {type(model).__name__} with n_layers={model.cfg.n_layers}; "
                f"closest valid names: {close or sorted(valid)[:5]}"
            )
    return hooks


@overload
def weight(model: Any, name: str, *, optional: Literal[False] = False) -> Tensor: ...


@overload
def weight(model: Any, name: str, *, optional: bool) -> Tensor | None: ...


def weight(model: Any, name: str, *, optional: bool = False) -> Tensor | None:
    """A weight of the model by TL name, detached: ``"W_E"``, ``"W_U"``, ``"W_in"``, or a dotted
    path such as ``"blocks.3.ln2.w"``.

    Metrics read weights through this function so that nothing in ``metrics/`` touches a model.
    With ``optional=True`` a missing weight (e.g. a LayerNorm weight folded away) returns None.
    """
    check_model(model)
    obj: Any = model
    try:
        for part in name.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        if optional:
            return None
        raise InputError(
            f"{type(model).__name__} has no weight {name!r}; accepted: W_E, W_U, W_pos, W_in, blocks.L.ln2.w, ..."
        ) from None
    if not isinstance(obj, Tensor):
        if optional:
            return None
        raise InputTypeError(f"model.{name} is {type(obj).__name__}, not a tensor")
    return obj.detach()


# ----------------------------------------------------------------------------- tokens
def model_device(model: Any) -> torch.device:
    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError):
        return torch.device(getattr(model.cfg, "device", None) or "cpu")


def check_tokens(model: Any, tokens: Any) -> Int[Tensor, "batch pos"]:
    """Validate a token batch: 2-D integer tensor, ids < d_vocab, length ≤ n_ctx."""
    if not isinstance(tokens, Tensor):
        raise InputTypeError(
            f"tokens must be a torch integer tensor of shape (batch, pos), got {type(tokens).__name__}; "
            "build one with tl_geometry.io.corpus.tokens(model, ...)"
        )
    if tokens.ndim == 1:
        tokens = tokens[None]
    if tokens.ndim != 2:
        raise InputError(f"tokens must have shape (batch, pos), got {tuple(tokens.shape)}")
    if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise InputTypeError(f"tokens must be an integer tensor, got dtype {tokens.dtype}")
    if tokens.is_meta:
        raise InputError("tokens are on the meta device (shapes without data); pass real token ids")
    if tokens.numel() == 0:
        raise InputError(f"tokens is empty (shape {tuple(tokens.shape)}); nothing to run")
    if tokens.dtype != torch.long:  # int8 / int16 / int32 / uint8 ids: the model indexes with int64
        tokens = tokens.long()
    n_ctx = getattr(model.cfg, "n_ctx", None)
    if n_ctx is not None and tokens.shape[1] > n_ctx:
        raise InputError(f"sequence length {tokens.shape[1]} exceeds the model's n_ctx={n_ctx}; use seq_len <= {n_ctx}")
    d_vocab = getattr(model.cfg, "d_vocab", None)
    if d_vocab is not None and (int(tokens.max()) >= d_vocab or int(tokens.min()) < 0):
        raise InputError(f"token ids must lie in [0, {d_vocab}); got range [{int(tokens.min())}, {int(tokens.max())}]")
    return tokens


def bos_token_id(model: Any) -> int | None:
    tok = getattr(model, "tokenizer", None)
    return getattr(tok, "bos_token_id", None) if tok is not None else None


def valid_mask(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    attention_mask: Tensor | None = None,
    drop_bos: bool = True,
) -> torch.Tensor:
    """Boolean (batch, pos) mask of positions to keep: not padding, not a leading BOS."""
    mask = torch.ones(tokens.shape, dtype=torch.bool)
    if attention_mask is not None:
        if attention_mask.shape != tokens.shape:
            raise InputError(
                f"attention_mask shape {tuple(attention_mask.shape)} != tokens shape {tuple(tokens.shape)}"
            )
        mask &= attention_mask.to("cpu").bool()
    if drop_bos:
        bos = bos_token_id(model)
        if bos is not None:
            # the first position kept (0, or after the pads of a left-padded row) holding BOS
            first = mask.int().argmax(dim=1)
            rows = torch.arange(tokens.shape[0])
            is_bos = (tokens.cpu()[rows, first] == bos) & mask[rows, first]
            mask[rows[is_bos], first[is_bos]] = False
    return mask


def check_attention_mask(tokens: Tensor, attention_mask: Any) -> Tensor | None:
    """``attention_mask`` as a boolean (batch, pos) tensor matching ``tokens`` (1 = a real token,
    0 = padding), or None when it masks nothing.

    Raises:
        InputError / InputTypeError: not a tensor, another shape, values other than 0 / 1, or a
            row with no real token.
    """
    if attention_mask is None:
        return None
    if not isinstance(attention_mask, Tensor):
        raise InputTypeError(
            f"attention_mask must be a (batch, pos) tensor of 0 / 1 like a tokenizer's, got {type(attention_mask).__name__}"
        )
    if tuple(attention_mask.shape) != tuple(tokens.shape):
        raise InputError(
            f"attention_mask has shape {tuple(attention_mask.shape)}, tokens {tuple(tokens.shape)}: they must match"
        )
    if attention_mask.dtype != torch.bool and bool((~((attention_mask == 0) | (attention_mask == 1))).any()):
        raise InputError("attention_mask must hold only 0 (padding) and 1 (a real token)")
    mask = attention_mask.to("cpu").bool()
    empty = (~mask.any(dim=1)).nonzero().flatten().tolist()
    if empty:
        raise InputError(f"attention_mask leaves no real token in row(s) {empty[:5]}")
    return None if bool(mask.all()) else mask


#: A row is taken for padded when it ends (or, after an optional BOS, starts) with at least this
#: many pad tokens in a row.
PAD_RUN = 2


def padding_of(model: Any, tokens: Tensor) -> str | None:
    """Where ``tokens`` look padded — a run of at least `PAD_RUN` of the tokenizer's
    ``pad_token_id`` at the end or the start of a row — as a phrase, or None. A single pad id (it
    is often the EOS token, which real text holds) is not taken for padding."""
    tok = getattr(model, "tokenizer", None)
    pad = getattr(tok, "pad_token_id", None) if tok is not None else None
    if pad is None or tokens.ndim != 2 or tokens.shape[1] < PAD_RUN:
        return None
    t = tokens.cpu()
    is_pad = t == int(pad)
    pos = t.shape[1]
    # trailing run: pads from the end until the first non-pad
    flipped = is_pad.flip(1).int()
    trailing = torch.where(flipped.all(dim=1), pos, (1 - flipped).argmax(dim=1))
    start = is_pad.clone()
    bos = bos_token_id(model)
    if bos is not None and bos != pad:
        start[:, 0] |= t[:, 0] == bos  # a leading BOS before left pads
    leading_mask = start.int()
    leading = torch.where(leading_mask.all(dim=1), pos, (1 - leading_mask).argmax(dim=1))
    for name, run in (("ends", trailing), ("starts", leading)):
        rows = (run >= PAD_RUN).nonzero().flatten()
        if len(rows):
            i = int(rows[0])
            return f"row {i} {name} with {int(run[i])} pad tokens (pad_token_id={int(pad)}; {len(rows)} row(s) like it)"
    return None
