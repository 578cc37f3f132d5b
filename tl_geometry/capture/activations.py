"""Activation capture: stream activations at named hook points into consumers.

Part of the capture layer ([`tl_geometry.capture`][tl_geometry.capture]), the only place (with
[`tl_geometry.models`][tl_geometry.models]) that touches models and hooks; it knows no metric. It

* validates hook names against ``model.hook_dict`` (unknown names list the closest valid ones);
* runs token batches through the model with temporary forward hooks added through the model's
  own ``hooks()`` context manager, so they are removed even when a consumer raises (never a
  global ``reset_hooks()``);
* drops the BOS position and padding positions (``attention_mask == 0``), flattens
  ``(batch, pos, d)`` to ``(n_tokens, d)`` and upcasts to float32;
* optionally keeps a seeded, bounded sample of positions (``max_points``) shared by all hooks;
* stops the forward pass once every requested hook has fired (later layers are not computed);
* feeds several consumers from ONE forward pass ([`run_shared`][tl_geometry.capture.activations.run_shared]), each with its own hooks
  and positions, each receiving exactly what it would have received alone.

Gradients: [`tl_geometry.capture.backward`][tl_geometry.capture.backward].

Works on ``HookedTransformer`` (TL 3.x) and ``TransformerBridge``: hooks are added by the names
the caller passes (the bridge resolves its legacy aliases such as ``blocks.0.hook_resid_post``),
and results are keyed by those names, not by ``hook.name`` (the bridge reports canonical names).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from jaxtyping import Float, Int
from torch import Tensor

from tl_geometry.capture.cached import SOURCE_RTOL, activation_source, as_batch_pos, check_source  # noqa: F401
from tl_geometry.capture.hooks import (  # noqa: F401  (re-exported: the names callers import from here)
    EMBED_HOOK,
    FINAL_HOOK,
    FINAL_STATE_HOOK,
    HookedModel,
    _StopForward,
    bos_token_id,
    check_attention_mask,
    check_model,
    check_tokens,
    eval_mode,
    hidden_state_hooks,
    hooked,
    model_device,
    model_lock,
    padding_of,
    resid_hooks,
    standard_hooks,
    valid_mask,
    validate_hooks,
    weight,
)
from tl_geometry.errors import InputError, InputTypeError

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- streaming
def _to_float(x: Tensor) -> Tensor:
    return x.float() if x.dtype not in (torch.float32, torch.float64) else x


def kept_rows(acts: Float[Tensor, "batch pos d"], mask: Tensor) -> Float[Tensor, "n d"]:
    """The rows of ``acts`` at the ``True`` positions of the boolean (batch, pos) ``mask``, in
    (batch, pos) order, detached and upcast to float32 (float64 stays float64).

    This is the one selection both the forward pass ([`run_shared`][tl_geometry.capture.activations.run_shared]) and a user's cached
    activations ([`replay_shared`][tl_geometry.capture.activations.replay_shared], [`flatten_valid`][tl_geometry.capture.activations.flatten_valid]) go through, so both give the same rows.
    """
    if tuple(acts.shape[: mask.ndim]) != tuple(mask.shape):
        raise InputError(
            f"activations of shape {tuple(acts.shape)} are not one vector per (batch, pos) position {tuple(mask.shape)}: "
            "an attention pattern or score hook (batch, heads, query, key) is not a representation; measure a "
            "residual, MLP or attention-output hook (hook_resid_*, hook_mlp_out, hook_attn_out, attn.hook_z)"
        )
    return _to_float(acts.detach()[mask.to(acts.device)])


def flatten_valid(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    acts: Float[Tensor, "batch pos d"],
    *,
    attention_mask: Tensor | None = None,
    drop_bos: bool = True,
) -> Float[Tensor, "n d"]:
    """A cached activation (batch, pos, d) as the (n_valid, d) rows the capture layer would deliver:
    BOS and padding positions dropped ([`valid_mask`][tl_geometry.capture.hooks.valid_mask]), float32, in (batch, pos) order.

    Use it before handing a ``run_with_cache`` entry to a pure function ([`tl_geometry.pga_score`][tl_geometry.metrics.pga.pga_score],
    [`tl_geometry.similarity_stats`][tl_geometry.metrics.capacity.similarity_stats], ...): a naive ``acts.reshape(-1, d)`` keeps the BOS
    position, whose activation is an outlier on most models, and changes the numbers: on
    SmolLM2-135M (8 × 128 pydoc tokens, ``blocks.15.hook_resid_post``, k = 100, 20 nulls) PGA z
    is 0.447 with BOS kept and −4.31 with it dropped (``benchmarks/check_cache_smollm2.py``).

    Args:
        model: the model the activations came from (its tokenizer names the BOS token).
        tokens: the (batch, pos) token ids that were run.
        acts: (batch, pos, d) activations, e.g. ``cache["blocks.3.hook_resid_post"]``; a
            (batch·pos, d) tensor (a naive reshape) is read back as (batch, pos, d).
        attention_mask, drop_bos: as [`run`][tl_geometry.capture.activations.run].

    Raises:
        InputError: a shape that does not match ``tokens``.
    """
    tokens = check_tokens(model, tokens)
    acts = as_batch_pos(acts, tokens, name="acts")
    return kept_rows(acts, valid_mask(model, tokens, attention_mask, drop_bos))


Consumer = Callable[[str, Float[Tensor, "n d"]], Any]


@runtime_checkable
class Pass(Protocol):
    """One consumer of a shared forward pass ([`run_shared`][tl_geometry.capture.activations.run_shared]).

    Attributes:
        hooks: the hook names it wants.
        positions: boolean (batch, pos) mask of the positions it wants (a sample), or None for
            every valid position; always combined with the BOS/padding mask.
        update: ``update(hook, acts)`` with acts (n_kept, d) float32/64 in (batch, pos) order.
    """

    # read-only in the protocol, so a pass may hold a list and a tensor (never None) there
    @property
    def hooks(self) -> Sequence[str]: ...

    @property
    def positions(self) -> Tensor | None: ...

    def update(self, hook: str, acts: Float[Tensor, "n d"]) -> Any: ...


@dataclass
class FnPass:
    """A [`Pass`][tl_geometry.capture.activations.Pass] from a callable ``consumer(hook, acts)`` (or an object with ``update``)."""

    hooks: Sequence[str]
    consumer: Consumer | Any
    positions: Tensor | None = None

    def update(self, hook: str, acts: Tensor) -> Any:
        fn = self.consumer.update if hasattr(self.consumer, "update") else self.consumer
        return fn(hook, acts)


def run_shared(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    passes: Sequence[Pass],
    *,
    batch_size: int = 8,
    attention_mask: Tensor | None = None,
    drop_bos: bool = True,
    stop_early: bool = True,
    progress: bool = True,
    desc: str = "capture",
) -> list[int]:
    """ONE forward pass per batch feeding every consumer in ``passes``.

    The hooks of all passes are added together; each batch runs once, and each pass receives,
    at each of its hooks, exactly the rows it would have received alone (its positions, in
    (batch, pos) order): the numbers do not depend on which other passes share the run.

    Args:
        model: a HookedTransformer or TransformerBridge.
        tokens: (batch, pos) token ids.
        passes: the consumers ([`Pass`][tl_geometry.capture.activations.Pass]), each with its hooks and positions.
        batch_size, attention_mask, drop_bos, stop_early, progress, desc: as [`run`][tl_geometry.capture.activations.run].

    Returns:
        The number of positions delivered to each pass (per hook), in the order of ``passes``.

    Raises:
        ValueError: bad tokens, hooks or batch size. Whatever a consumer raises; the hooks are
            removed first.
    """
    tokens, passes, hook_lists, union, masks, keep = _setup(model, tokens, passes, batch_size, attention_mask, drop_bos)
    if not passes:
        return []
    device = model_device(model)

    from tqdm.auto import tqdm

    from tl_geometry.runtime.threads import per_step

    delivered = [0] * len(passes)
    state: dict[str, Any] = {}

    def make_hook(name: str):
        def hook_fn(act: Tensor, hook: Any = None) -> None:
            state["got"][name] = kept_rows(act, state["mask"])
            if stop_early and len(state["got"]) == len(union):
                raise _StopForward
            return None

        return hook_fn

    fwd_hooks = [(h, make_hook(h)) for h in union]
    starts = range(0, tokens.shape[0], batch_size)
    with model_lock(model), eval_mode(model), torch.inference_mode():
        for start in per_step(tqdm(starts, desc=desc, disable=not progress, leave=False)):  # threads per batch
            batch = tokens[start : start + batch_size].to(device)
            mask = keep[start : start + batch_size]
            if not mask.any():
                continue
            state["mask"], state["got"] = mask, {}
            am = attention_mask[start : start + batch_size].to(device) if attention_mask is not None else None
            with hooked(model, fwd_hooks):
                try:
                    if am is not None:
                        model(batch, attention_mask=am)
                    else:
                        model(batch)
                except _StopForward:
                    pass
            missing = [h for h in union if h not in state["got"]]
            if missing:
                raise RuntimeError(f"hooks {missing} never fired during the forward pass")
            # outside the forward: hooks removed
            _deliver(passes, hook_lists, masks, mask, slice(start, start + batch_size), state["got"], delivered)
            state["got"] = {}
    return delivered


def _deliver(
    passes: Sequence[Pass],
    hook_lists: Sequence[Sequence[str]],
    masks: Sequence[Tensor],
    mask: Tensor,
    batch: slice,
    got: Mapping[str, Tensor],
    delivered: list[int],
) -> None:
    """Hand each pass its rows of one batch: ``got[h]`` holds the rows of the union mask ``mask``."""
    for i, (ps, hs, m) in enumerate(zip(passes, hook_lists, masks)):
        mb = m[batch]
        if not mb.any():
            continue
        rows = mb[mask]  # this pass's rows among the union's kept rows, (batch, pos) order
        whole = bool(rows.all())
        for h in hs:
            a = got[h]
            ps.update(h, a if whole else a[rows.to(a.device)])
        delivered[i] += int(mb.sum())


def _setup(model, tokens, passes, batch_size, attention_mask, drop_bos):
    tokens = check_tokens(model, tokens)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    passes = list(passes)
    for ps in passes:
        if not callable(getattr(ps, "update", None)):
            raise InputTypeError("each pass needs an update(hook, acts) method (see tl_geometry.capture.Pass)")
    hook_lists = [validate_hooks(model, ps.hooks) for ps in passes]
    union = list(dict.fromkeys(h for hs in hook_lists for h in hs))
    valid = valid_mask(model, tokens, attention_mask, drop_bos)
    masks = [valid & ps.positions.to("cpu").bool() if ps.positions is not None else valid for ps in passes]
    keep = valid.clone() if not masks else masks[0].clone()
    for m in masks[1:]:
        keep |= m
    return tokens, passes, hook_lists, union, masks, keep


def replay_shared(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    activations: Any,
    passes: Sequence[Pass],
    *,
    batch_size: int = 8,
    attention_mask: Tensor | None = None,
    drop_bos: bool = True,
    progress: bool = True,
    desc: str = "replay",
) -> list[int]:
    """[`run_shared`][tl_geometry.capture.activations.run_shared] without running the model: the passes are fed from activations the user
    already has (an ``ActivationCache`` from ``model.run_with_cache(tokens)``, or a mapping hook
    name → (batch, pos, d) tensor; see [`activation_source`][tl_geometry.capture.cached.activation_source]).

    Every pass receives the rows it would receive from [`run_shared`][tl_geometry.capture.activations.run_shared] on the same tokens: the
    same BOS/padding mask ([`valid_mask`][tl_geometry.capture.hooks.valid_mask]), the same selection ([`kept_rows`][tl_geometry.capture.activations.kept_rows]), the same
    batches of ``batch_size`` sequences, so streaming accumulators sum in the same order.

    Returns:
        The number of positions delivered to each pass (per hook), in the order of ``passes``.

    Raises:
        InputError: a hook a pass wants that the activations lack (naming it and the hooks
            present), a shape that does not match the tokens, bad tokens or batch size.
    """
    tokens, passes, hook_lists, union, masks, keep = _setup(model, tokens, passes, batch_size, attention_mask, drop_bos)
    if not passes:
        return []
    acts = activation_source(model, tokens, activations, union)
    from tqdm.auto import tqdm

    delivered = [0] * len(passes)
    for start in tqdm(range(0, tokens.shape[0], batch_size), desc=desc, disable=not progress, leave=False):
        batch = slice(start, start + batch_size)
        mask = keep[batch]
        if not mask.any():
            continue
        got = {h: kept_rows(acts[h][batch], mask) for h in union}
        _deliver(passes, hook_lists, masks, mask, batch, got, delivered)
    return delivered


def run(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    hooks: Sequence[str],
    consumer: Consumer | Any,
    *,
    batch_size: int = 8,
    attention_mask: Tensor | None = None,
    drop_bos: bool = True,
    positions: Tensor | None = None,
    stop_early: bool = True,
    progress: bool = True,
    desc: str = "capture",
) -> int:
    """Stream activations at ``hooks`` into ``consumer``, batch by batch.

    Args:
        model: a HookedTransformer or TransformerBridge.
        tokens: (batch, pos) token ids.
        hooks: explicit hook names (see [`resid_hooks`][tl_geometry.capture.hooks.resid_hooks], [`standard_hooks`][tl_geometry.capture.hooks.standard_hooks]).
        consumer: ``consumer(hook_name, acts)`` or an object with ``update(hook_name, acts)``;
            ``acts`` is float32 (or float64) of shape (n_kept_positions, d), on the model's device.
        batch_size: sequences per forward pass.
        attention_mask: optional (batch, pos) mask; zeros are padding and dropped.
        drop_bos: drop position 0 where it holds the tokenizer's BOS token.
        positions: optional boolean (batch, pos) mask of positions to keep (a sample); combined
            with the padding/BOS mask.
        stop_early: abort the forward once every hook fired (skips later layers).
        progress: show a tqdm bar over batches.

    Returns:
        The number of positions delivered per hook.

    Raises:
        Whatever the consumer raises; the hooks are removed first.
    """
    hooks = validate_hooks(model, hooks)
    tokens = check_tokens(model, tokens)
    if batch_size < 1:
        raise InputError(f"batch_size must be >= 1, got {batch_size}")
    update = consumer.update if hasattr(consumer, "update") else consumer
    if not callable(update):
        raise InputTypeError("consumer must be callable(hook, acts) or have an update(hook, acts) method")
    return run_shared(
        model,
        tokens,
        [FnPass(hooks, consumer, positions)],
        batch_size=batch_size,
        attention_mask=attention_mask,
        drop_bos=drop_bos,
        stop_early=stop_early,
        progress=progress,
        desc=desc,
    )[0]


def sample_positions(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    max_points: int | None,
    *,
    seed: int = 0,
    attention_mask: Tensor | None = None,
    drop_bos: bool = True,
) -> torch.Tensor:
    """Boolean (batch, pos) mask of at most ``max_points`` valid positions, chosen with ``seed``."""
    keep = valid_mask(model, tokens, attention_mask, drop_bos)
    n_valid = int(keep.sum())
    if n_valid == 0:
        raise InputError("no valid token positions after dropping BOS/padding")
    if max_points is None or max_points >= n_valid:
        return keep
    if max_points < 1:
        raise InputError(f"max_points must be >= 1, got {max_points}")
    gen = torch.Generator().manual_seed(int(seed))
    idx = keep.flatten().nonzero().squeeze(1)
    chosen = idx[torch.randperm(n_valid, generator=gen)[:max_points]]
    out = torch.zeros(keep.numel(), dtype=torch.bool)
    out[chosen] = True
    return out.view_as(keep)


@dataclass(frozen=True)
class Captured:
    """Activations gathered by [`collect`][tl_geometry.capture.activations.collect].

    Attributes:
        acts: hook name → (N, d) float tensor (CPU), rows in (batch, pos) order.
        positions: (N, 2) long tensor of (sequence, position) for each row; shared by all hooks.
    """

    acts: Mapping[str, Tensor]
    positions: Tensor

    @property
    def n_points(self) -> int:
        return int(self.positions.shape[0])


class Sample:
    """A [`Pass`][tl_geometry.capture.activations.Pass] keeping a bounded, seeded sample of positions at its hooks (same positions
    for all hooks): what [`collect`][tl_geometry.capture.activations.collect] gathers, usable in a shared pass ([`run_shared`][tl_geometry.capture.activations.run_shared]).

    Memory is ``max_points × d`` per hook, whatever the number of tokens.
    """

    def __init__(
        self,
        model: Any,
        tokens: Int[Tensor, "batch pos"],
        hooks: Sequence[str],
        *,
        max_points: int | None = 2048,
        seed: int = 0,
        attention_mask: Tensor | None = None,
        drop_bos: bool = True,
    ):
        self.hooks = validate_hooks(model, hooks)
        tokens = check_tokens(model, tokens)
        self.positions = sample_positions(
            model, tokens, max_points, seed=seed, attention_mask=attention_mask, drop_bos=drop_bos
        )
        self._parts: dict[str, list[Tensor]] = {h: [] for h in self.hooks}

    def update(self, hook: str, acts: Tensor) -> None:
        self._parts[hook].append(acts.cpu())

    def result(self) -> Captured:
        acts = {h: torch.cat(v) for h, v in self._parts.items()}
        return Captured(acts=acts, positions=self.positions.nonzero())


def collect(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    hooks: Sequence[str],
    *,
    max_points: int | None = 2048,
    seed: int = 0,
    batch_size: int = 8,
    attention_mask: Tensor | None = None,
    drop_bos: bool = True,
    progress: bool = True,
) -> Captured:
    """Gather a bounded, seeded sample of positions at every hook (same positions for all hooks).

    Memory is ``max_points × d`` per hook, whatever the number of tokens.
    """
    sample = Sample(
        model, tokens, hooks, max_points=max_points, seed=seed, attention_mask=attention_mask, drop_bos=drop_bos
    )
    run_shared(
        model,
        tokens,
        [sample],
        batch_size=batch_size,
        attention_mask=attention_mask,
        drop_bos=drop_bos,
        progress=progress,
        desc="collect",
    )
    return sample.result()
