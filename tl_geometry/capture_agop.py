"""Gradient capture for AGOP: the model-facing probe loops behind ``tg.agop`` and ``tg.nfa``.

This is part of the capture layer (it runs models and adds hooks, through
:mod:`tl_geometry.capture`: ``grad_capture`` for the activation graph, ``valid_mask`` for
BOS/padding, ``weight`` for W_in and LayerNorm weights, ``eval_mode``); the math (accumulators,
AOFE, NFA correlation) is pure and lives in :mod:`tl_geometry.metrics.interaction`.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Sequence

import torch
from torch import Tensor

from tl_geometry import capture
from tl_geometry.threads import per_step
from tl_geometry.metrics.interaction import (
    AGOPAccumulator,
    AGOPResult,
    NFACorrelation,
    exact_stats,
    nfa_correlation,
    projection_matrix,
)

logger = logging.getLogger(__name__)

#: The AGOP conventions (``space=`` of :func:`agop`); the paper's code uses three AGOPs:
#: the toy's E[J Jᵀ] (``tl_geometry.experiments.toy_superposition.toy_agop``, closed form), the
#: next-token shape sweep's "output" and the TinyGPT depth scan's "loss".
SPACES: dict[str, str] = {
    "input": "E[JᵀJ] over every logit w.r.t. the activation at each hook (d × d; ours, the NFA convention)",
    "output": "E[(PJ)(PJ)ᵀ], J of the last-position logits w.r.t. one hook (k × k, P a fixed k × d_vocab "
              "Gaussian; the paper's next-token shape sweep, budget_scaling/transformer_ntp_shape_sweep.py)",
    "loss": "E[g gᵀ], g = ∂(summed next-token cross-entropy)/∂a at each position (d × d; the paper's TinyGPT "
            "depth scan, shape_scan/transformer_shape_scan.py)",
}

#: exact=True refuses Jacobians larger than this many entries per sequence.
EXACT_MAX_ENTRIES = 50_000_000
#: JVP probes evaluated together (vmap chunk) in output space.
JVP_CHUNK = 32
_AFTER_UNEMBED = ("unembed.hook_out", "hook_unembed")


def _float32(model: Any) -> Any:
    """The model itself when it computes in float32/64, else a float32 copy (bf16/fp16 models)."""
    dtype = getattr(model.cfg, "dtype", torch.float32)
    if dtype in (torch.float32, torch.float64):
        return model
    logger.info("agop: model dtype %s; computing on a float32 copy", dtype)
    m = copy.deepcopy(model).to(torch.float32)
    m.cfg.dtype = torch.float32
    return m


def _check_hooks(hooks: Sequence[str]) -> None:
    bad = [h for h in hooks if h in _AFTER_UNEMBED or (h.startswith("unembed.") and h != "unembed.hook_in")]
    if bad:
        raise ValueError(f"hooks {bad} lie past the unembedding: no logits depend on them; choose a hook before it")


def _check_acts(acts: dict, hooks: Sequence[str]) -> list[Tensor]:
    missing = [h for h in hooks if h not in acts]
    if missing:
        raise ValueError(f"hooks {missing} never fired during the forward pass")
    for h in hooks:
        if acts[h].ndim != 3:
            raise ValueError(f"AGOP needs (batch, pos, d) activations; {h!r} has shape {tuple(acts[h].shape)}")
    return [acts[h] for h in hooks]


def _replace(hook: str, x: Tensor):
    def fn(act: Tensor, hook: Any = None) -> Tensor:
        return x

    return [(hook, fn)]


def _input_probes(model, tokens, hooks, mask, n_probes, n_groups, seed, batch_size, progress):
    from tqdm.auto import tqdm

    device = capture.model_device(model)
    gen = torch.Generator(device=device).manual_seed(int(seed))
    acc = AGOPAccumulator(n_probes, n_groups)
    for start in per_step(tqdm(range(0, tokens.shape[0], batch_size), desc="agop", disable=not progress, leave=False)):
        batch, m = tokens[start : start + batch_size].to(device), mask[start : start + batch_size].to(device)
        if not m.any():
            continue
        with capture.grad_capture(model, hooks) as acts, torch.enable_grad():
            logits = model(batch)
            xs = _check_acts(acts, hooks)
            for p in range(n_probes):
                u = torch.randn(logits.shape, generator=gen, device=device, dtype=logits.dtype)
                grads = torch.autograd.grad((u * logits).sum(), xs, retain_graph=p < n_probes - 1, allow_unused=True)
                for h, g in zip(hooks, grads):
                    if g is None:
                        raise ValueError(f"the logits do not depend on the activation at {h!r}; choose a hook before the unembedding")
                    acc.update(h, p, g[m])
    out = {h: acc.compute(h) for h in hooks}
    return {h: v[0] for h, v in out.items()}, {h: v[1] for h, v in out.items()}


def _input_exact(model, tokens, hooks, mask, progress):
    from tqdm.auto import tqdm

    device = capture.model_device(model)
    mats, stats = {}, {}
    for h in hooks:
        G, n = None, 0
        for b in per_step(tqdm(range(tokens.shape[0]), desc=f"exact {h}", disable=not progress, leave=False)):
            seq, keep = tokens[b : b + 1].to(device), mask[b].to(device)
            if not keep.any():
                continue
            with capture.grad_capture(model, [h]) as acts, torch.no_grad():
                logits = model(seq)
            a0 = _check_acts(acts, [h])[0].detach()
            if logits.numel() * a0.numel() > EXACT_MAX_ENTRIES:
                raise ValueError(f"exact=True needs a {logits.numel()} × {a0.numel()} Jacobian per sequence; use probes")

            def f(x: Tensor) -> Tensor:
                with model.hooks(fwd_hooks=_replace(h, x)):
                    return model(seq)

            jac = torch.func.jacrev(f)(a0)  # (1, T, V, 1, T, d)
            J = jac.detach()[0, :, :, 0].reshape(-1, a0.shape[1], a0.shape[2])[:, keep].double()  # (T·V, kept, d)
            Gb = torch.einsum("nsd,nse->de", J, J)
            G = Gb if G is None else G + Gb
            n += int(keep.sum())
        if G is None:
            raise ValueError("no valid token positions after dropping BOS/padding")
        G = G / n
        mats[h], stats[h] = G.float(), exact_stats(G, n)
    return mats, stats


def _output_space(model, tokens, hook, n_probes, n_groups, seed, batch_size, exact, proj_dim, progress,
                  projection_seed=None):
    from tqdm.auto import tqdm

    device = capture.model_device(model)
    if projection_seed is None:
        P = projection_matrix(proj_dim, model.cfg.d_vocab, seed=seed).to(device)
    else:
        P = projection_matrix(proj_dim, model.cfg.d_vocab, seed=projection_seed, convention="paper", device=device)
    gen = torch.Generator(device=device).manual_seed(int(seed))
    acc = None if exact else AGOPAccumulator(n_probes, n_groups)
    G_exact, n_seq = torch.zeros(proj_dim, proj_dim, dtype=torch.float64, device=device), 0
    for start in per_step(tqdm(range(0, tokens.shape[0], batch_size), desc="agop out", disable=not progress, leave=False)):
        batch = tokens[start : start + batch_size].to(device)
        if exact:
            # plain autograd (one backward per row of P): no functorch state kept between calls
            with capture.grad_capture(model, [hook]) as acts, torch.enable_grad():
                y = model(batch)[:, -1] @ P.T  # (B, k)
                x = _check_acts(acts, [hook])[0]
                rows = [torch.autograd.grad(y[:, k].sum(), x, retain_graph=k < proj_dim - 1)[0] for k in range(proj_dim)]
            PJ = torch.stack(rows, 1).detach().flatten(2).double()  # (B, k, T·d)
            if not torch.isfinite(PJ).all():
                raise ValueError(f"non-finite gradient at {hook!r}")
            G_exact += torch.einsum("bkn,bln->kl", PJ, PJ)
        else:
            with capture.grad_capture(model, [hook]) as acts, torch.no_grad():
                model(batch)
            x0 = _check_acts(acts, [hook])[0].detach()

            def f(x: Tensor, batch: Tensor = batch) -> Tensor:
                with model.hooks(fwd_hooks=_replace(hook, x)):
                    return model(batch)[:, -1] @ P.T  # (B, k)

            vs = torch.randn((n_probes, *x0.shape), generator=gen, device=device, dtype=x0.dtype)
            jvs = torch.func.vmap(lambda v: torch.func.jvp(f, (x0,), (v,))[1], chunk_size=JVP_CHUNK)(vs)  # (probes, B, k)
            for p in range(n_probes):
                acc.update(hook, p, jvs[p])
        n_seq += batch.shape[0]
    if exact:
        G = G_exact / n_seq
        return {hook: G.float()}, {hook: exact_stats(G, n_seq)}
    G, s = acc.compute(hook)
    return {hook: G}, {hook: s}


def _loss_space(model, tokens, hooks, mask, batch_size, progress):
    """Exact loss-gradient AGOP: one backward of the summed next-token cross-entropy per batch."""
    from tqdm.auto import tqdm

    device = capture.model_device(model)
    if tokens.shape[1] < 2:
        raise ValueError(f"space='loss' needs sequences of at least 2 tokens (a next token to predict), got {tokens.shape[1]}")
    sums: dict[str, Tensor] = {}
    n = 0
    for start in per_step(tqdm(range(0, tokens.shape[0], batch_size), desc="agop loss", disable=not progress, leave=False)):
        batch = tokens[start : start + batch_size].to(device)
        keep = mask[start : start + batch_size].clone()
        keep[:, -1] = False  # the last position predicts nothing: its gradient is 0 by causality
        if not keep.any():
            continue
        keep = keep.to(device)
        with capture.grad_capture(model, hooks) as acts, torch.enable_grad():
            logits = model(batch)
            xs = _check_acts(acts, hooks)
            loss = torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1), reduction="sum")
            grads = torch.autograd.grad(loss, xs, allow_unused=True)
        for h, g in zip(hooks, grads):
            if g is None:
                raise ValueError(f"the loss does not depend on the activation at {h!r}; choose a hook before the unembedding")
            g = g.detach()[keep].double()
            if not torch.isfinite(g).all():
                raise ValueError(f"non-finite gradient at {h!r}")
            sums[h] = g.T @ g + sums.get(h, 0)
        n += int(keep.sum())
    if n == 0:
        raise ValueError("no valid token positions after dropping BOS/padding and the last position")
    mats = {h: (G / n) for h, G in sums.items()}
    return {h: G.float() for h, G in mats.items()}, {h: exact_stats(G, n) for h, G in mats.items()}


def agop(
    model: Any,
    tokens: Tensor,
    *,
    hooks: Sequence[str] | None = None,
    n_probes: int = 64,
    space: str = "input",
    seed: int = 0,
    exact: bool = False,
    batch_size: int = 8,
    n_groups: int | None = None,
    projection_dim: int = 64,
    projection_seed: int | None = None,
    progress: bool = True,
) -> AGOPResult:
    """AGOP at hook points in one of three conventions (``space``, see :data:`SPACES`).

    Input space (default; see docs/definitions.md): ``G_h = mean_{b,t} J_{b,t}ᵀ J_{b,t}`` with
    ``J_{b,t} = ∂F_b/∂a_{b,t}``, F_b all logits of sequence b, a the activation at hook h; BOS and
    padding positions dropped as :func:`tl_geometry.capture.valid_mask` does. Estimator: probes
    u ~ N(0, I) over the logits, ``g = ∂(u·F)/∂a`` (one backward per probe serves every hook),
    ``E[g gᵀ] = JᵀJ``.

    Output space (the paper's next-token shape sweep): ``G = mean_b (P J_b)(P J_b)ᵀ`` (proj_dim ×
    proj_dim), J_b the Jacobian of the last-position logits w.r.t. the activation at the single
    hook (default ``blocks.0.hook_resid_pre``: token + position embeddings), P fixed Gaussian
    (:func:`projection_matrix`; ``projection_seed=42`` draws the authors' P); estimated with JVP
    probes v ~ N(0, I) (``E[(PJv)(PJv)ᵀ]``), or exactly with proj_dim vector-Jacobian products.

    Loss space (the paper's TinyGPT depth scan): ``G_h = mean_{b,t} g_{b,t} g_{b,t}ᵀ`` with
    ``g_{b,t} = ∂L_b/∂a_{b,t}``, L_b the summed next-token cross-entropy of sequence b (tokens
    predict the next token within the sequence), averaged over every position but the last (which
    predicts nothing) and BOS/padding. Always exact (one backward per batch; ``n_probes`` and
    ``exact`` are ignored). Default hook ``hook_embed`` (the token embeddings, as the authors;
    the gradient equals the one at ``blocks.0.hook_resid_pre``).

    Args:
        model: HookedTransformer or TransformerBridge; bf16/fp16 models are computed on a float32
            copy; a model in train mode is evaluated in eval mode and restored.
        tokens: (batch, pos) token ids, pos ≤ n_ctx.
        hooks: hook names (default every ``blocks.{l}.hook_resid_pre``; one hook in output space).
        n_probes: probes (≥ 2; ignored when ``exact``).
        space: "input", "output" or "loss" (:data:`SPACES`).
        seed: probe seed (and the projection's seed in output space unless ``projection_seed``).
        exact: exact Jacobians via ``torch.func`` (tiny models only): the reference.
        batch_size: sequences per forward pass (bounds memory).
        n_groups: probe groups for the standard error (default min(n_probes, 8)).
        projection_dim: rows of P in output space (64 in the paper).
        projection_seed: draw P as the authors do (``torch.manual_seed(s); randn(k, d_vocab) / √k``
            on the model's device; they used 42); None: our seeded P (derived from ``seed``).

    Returns:
        :class:`AGOPResult` (matrices, per-hook AOFE / ratio / trace / standard errors).

    Raises:
        ValueError: n_probes < 2, unknown space, tokens longer than n_ctx, a hook past the
            unembedding or one the logits do not depend on, non-finite gradients.
    """
    capture.check_model(model)
    if space not in SPACES:
        raise ValueError(f"space must be one of {tuple(SPACES)}, got {space!r}")
    if space != "loss" and not exact and (isinstance(n_probes, bool) or int(n_probes) < 2):
        raise ValueError(f"n_probes must be >= 2 (the standard error needs two probes), got {n_probes}")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    tokens = capture.check_tokens(model, tokens)
    if projection_seed is not None and space != "output":
        raise ValueError(f"projection_seed applies to space='output' only, got space={space!r}")
    if hooks is None:
        if space == "input":
            hooks = capture.resid_hooks(model, "pre")
        elif space == "loss" and "hook_embed" in getattr(model, "hook_dict", {}):
            hooks = ["hook_embed"]
        else:
            hooks = ["blocks.0.hook_resid_pre"]
    hooks = capture.validate_hooks(model, hooks)
    _check_hooks(hooks)
    if space == "output" and len(hooks) != 1:
        raise ValueError(f"output space takes one hook (the input embeddings), got {len(hooks)}")
    mask = capture.valid_mask(model, tokens)
    if not mask.any():
        raise ValueError("no valid token positions after dropping BOS/padding")
    work = _float32(model)
    with capture.eval_mode(work):
        if space == "output":
            mats, stats = _output_space(work, tokens, hooks[0], int(n_probes), n_groups, seed, int(batch_size),
                                        exact, int(projection_dim), progress, projection_seed)
        elif space == "loss":
            mats, stats = _loss_space(work, tokens, hooks, mask, int(batch_size), progress)
        elif exact:
            mats, stats = _input_exact(work, tokens, hooks, mask, progress)
        else:
            mats, stats = _input_probes(work, tokens, hooks, mask, int(n_probes), n_groups, seed, int(batch_size), progress)
    exact = bool(exact) or space == "loss"
    prov = {"agop_space": space, "agop_exact": exact, "n_tokens": int(tokens.numel()),
            "tokens_shape": list(tokens.shape)}
    if space == "output":
        prov["agop_projection"] = {"dim": int(projection_dim),
                                   "seed": int(seed if projection_seed is None else projection_seed),
                                   "convention": "library" if projection_seed is None else "paper"}
    return AGOPResult(matrices=mats, stats=stats, space=space, exact=exact, seed=int(seed), provenance=prov)


def nfa(
    model: Any,
    tokens: Tensor,
    *,
    layers: Sequence[int] | None = None,
    n_probes: int = 64,
    seed: int = 0,
    exact: bool = False,
    batch_size: int = 8,
    progress: bool = True,
) -> dict[str, NFACorrelation]:
    """NFA correlation per layer: W_in W_inᵀ against the AGOP at ``blocks.{l}.ln2.hook_normalized``.

    The AGOP is taken w.r.t. the normalized MLP input; where the LayerNorm keeps a weight w (not
    folded), the Gram uses ``diag(w) W_in`` so that both sides see the same input.
    """
    capture.check_model(model)
    n = model.cfg.n_layers
    layers = list(range(n)) if layers is None else [int(l) for l in layers]
    if not layers or any(not 0 <= l < n for l in layers):
        raise ValueError(f"layers must be a non-empty subset of range({n}), got {layers}")
    hooks = [f"blocks.{l}.ln2.hook_normalized" for l in layers]
    res = agop(model, tokens, hooks=hooks, n_probes=n_probes, seed=seed, exact=exact, batch_size=batch_size, progress=progress)
    W_in = capture.weight(model, "W_in")
    out = {}
    for l, h in zip(layers, hooks):
        W = W_in[l].float()
        ln_w = capture.weight(model, f"blocks.{l}.ln2.w", optional=True)
        if isinstance(ln_w, Tensor) and ln_w.shape == (W.shape[0],):
            W = ln_w.detach().float()[:, None] * W
        out[h] = nfa_correlation(W, res.matrices[h])
    return out
