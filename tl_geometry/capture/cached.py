"""A user's activations (an ``ActivationCache`` or a mapping hook → tensor): picked for the hooks a
run needs, shaped (batch, pos, d), and checked against the model and the tokens before any metric
reads them (one forward on the first sequence). [`replay_shared`][tl_geometry.capture.activations.replay_shared]
feeds them to the passes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from tl_geometry.capture.hooks import (
    _StopForward,
    check_tokens,
    eval_mode,
    hooked,
    model_device,
    model_lock,
)
from tl_geometry.errors import InputError, InputTypeError

__all__ = ["SOURCE_RTOL", "activation_source", "as_batch_pos", "check_source"]


def as_batch_pos(acts: Any, tokens: Tensor, *, name: str) -> Float[Tensor, "batch pos d"]:
    """``acts`` checked against ``tokens`` (batch, pos): a (batch, pos, d) tensor as is; a
    (batch·pos, d) tensor (``reshape(-1, d)`` of one, or ``remove_batch_dim`` with one sequence)
    viewed as (batch, pos, d). Anything else is refused (the positions to drop cannot be told)."""
    if not isinstance(acts, Tensor):
        try:
            import numpy as np

            if isinstance(acts, np.ndarray):
                acts = torch.from_numpy(acts)
        except ImportError:  # pragma: no cover - numpy comes with torch
            pass
    if not isinstance(acts, Tensor):
        raise InputTypeError(f"activations for {name} must be a tensor (batch, pos, d), got {type(acts).__name__}")
    if not acts.dtype.is_floating_point:
        raise InputTypeError(f"activations for {name} must be floating point, got dtype {acts.dtype}")
    b, p = int(tokens.shape[0]), int(tokens.shape[1])
    if acts.ndim == 3 and tuple(acts.shape[:2]) == (b, p):
        return acts
    if acts.ndim == 2 and acts.shape[0] == b * p:
        return acts.reshape(b, p, acts.shape[1])
    raise InputError(
        f"activations for {name} have shape {tuple(acts.shape)}, which does not match tokens {(b, p)}: "
        f"expected ({b}, {p}, d) like a run_with_cache entry, or ({b * p}, d) (all positions, BOS included, "
        "in (batch, pos) order); already-filtered rows cannot be matched to positions - pass them to the "
        "pure functions (tg.pga_score, tg.similarity_stats) instead"
    )


def activation_source(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    source: Any,
    hooks: Sequence[str],
) -> dict[str, Tensor]:
    """Pick ``hooks`` out of a user's activations: an ``ActivationCache`` (from
    ``model.run_with_cache(tokens)``) or a mapping hook name → tensor, each checked against
    ``tokens`` ([`as_batch_pos`][tl_geometry.capture.cached.as_batch_pos]).

    Raises:
        InputError: a hook the source does not hold (naming it and the hooks present), or a shape
            that does not match the tokens.
    """
    tokens = check_tokens(model, tokens)
    keys = getattr(source, "keys", None)
    if not callable(keys) or not hasattr(source, "__getitem__"):
        raise InputTypeError(
            f"activations must be an ActivationCache or a mapping hook name -> tensor, got {type(source).__name__}"
        )
    present = [str(k) for k in keys()]
    out: dict[str, Tensor] = {}
    for h in hooks:
        if h in present:
            value = source[h]
        else:
            try:  # a TransformerBridge cache also answers to the legacy alias of a canonical name
                value = source[h]
            except (KeyError, IndexError, ValueError, TypeError):
                shown = present if len(present) <= 40 else present[:40] + [f"... ({len(present) - 40} more)"]
                raise InputError(
                    f"hook {h!r} is not in the activations; hooks present: {shown}; run "
                    f"run_with_cache(tokens, names_filter=[...]) with {h!r} included, or pass hooks= naming "
                    "hooks you have"
                ) from None
        out[h] = as_batch_pos(value, tokens, name=repr(h))
    check_source(model, tokens, out)
    return out


#: Tolerance of `check_source` (relative to the activation's scale): the same model on the same
#: tokens agrees to ~1e-6 whatever the batch; another model, other tokens or other weights
#: processing differ at order 1.
SOURCE_RTOL = 1e-3


def check_source(model: Any, tokens: Tensor, acts: Mapping[str, Tensor]) -> None:
    """Check a user's activations against ``model`` and ``tokens`` cheaply, before any metric
    uses them: the model is run on the **first sequence only** (stopped once every hook fired) and
    each hook's activation must have the same width and the same values (to `SOURCE_RTOL` of its
    scale). A cache of another model of the same shape, of other tokens, or an activation of the
    wrong width is refused, naming the hook — never measured.

    Raises:
        InputError: a width or a value that does not match (the hook, what was expected, what came).
    """
    hooks = list(acts)
    if not hooks:
        return
    first = tokens[:1].to(model_device(model))
    got: dict[str, Tensor] = {}

    def grab(act: Tensor, hook: Any = None) -> None:
        got[hook.name] = act.detach()
        if len(got) == len(hooks):
            raise _StopForward

    with model_lock(model), eval_mode(model), torch.inference_mode():
        with hooked(model, [(h, grab) for h in hooks]):
            try:
                model(first)
            except _StopForward:
                pass
    for h in hooks:
        if h not in got:
            continue  # a hook that did not fire on this model is named by the metric that needs it
        ref = as_batch_pos(got[h], tokens[:1], name=repr(h)).float().cpu()
        have = acts[h][:1]
        if have.shape[-1] != ref.shape[-1]:
            raise InputError(
                f"activations for {h!r} are {have.shape[-1]} wide but this model's {h!r} is {ref.shape[-1]} wide: "
                "they are not this model's; pass the cache of model.run_with_cache(tokens) for this model"
            )
        have = have.float().cpu()
        scale = float(ref.abs().max()) or 1.0
        diff = float((have - ref).abs().max())
        if not diff <= SOURCE_RTOL * scale:
            raise InputError(
                f"activations for {h!r} do not come from this model on these tokens: on the first sequence they "
                f"differ from the model's by up to {diff:.3g} (its values reach {scale:.3g}); pass the cache of "
                "model.run_with_cache(tokens) for the same model, weights processing and tokens"
            )
