"""Gradient capture: activations that gradients can be taken with respect to, and the probe loops.

The capture layer's second half (the first is [`tl_geometry.capture.activations`][tl_geometry.capture.activations]). It runs
models and adds hooks, and knows no metric: each loop hands raw gradients, Jacobian-vector
products or summed Gram matrices to its caller (a ``consumer(hook, probe, g)`` or a return
value). The AGOP estimators built on them live in [`tl_geometry.families.interaction`][tl_geometry.families.interaction]; the
math (accumulators, AOFE, NFA correlation) in [`tl_geometry.metrics.interaction`][tl_geometry.metrics.interaction].

Every loop runs under the caller's [`tl_geometry.capture.eval_mode`][tl_geometry.capture.hooks.eval_mode] and removes its hooks
on exit, even on error (the model's own ``hooks()`` context manager).
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from tl_geometry.base import _checks
from tl_geometry.base.linalg import gram64
from tl_geometry.capture.activations import _to_float, eval_mode
from tl_geometry.capture.hooks import check_tokens, hooked, model_device, validate_hooks, weight
from tl_geometry.capture.saved_weights import copies_as_views, weights_by_reference
from tl_geometry.errors import InputError
from tl_geometry.runtime.threads import kernel, per_step

logger = logging.getLogger(__name__)

ProbeConsumer = Callable[..., Any]
"""``consumer(hook, probe_index, g)`` with g of shape (n, d): one probe's gradients at one hook
(``consumer(hook, probe_index, g, label)`` where the loop splits the rows by a label per sequence)."""

EXACT_MAX_ENTRIES = 50_000_000
"""exact Jacobians are refused beyond this many entries per sequence."""
JVP_CHUNK = 32
"""JVP probes evaluated together (vmap chunk) in output space."""
_AFTER_UNEMBED = ("unembed.hook_out", "hook_unembed")
SAVE_WEIGHTS_BY_REFERENCE = True
"""The probe passes save TransformerLens's per-forward weight copies by reference
([`tl_geometry.capture.saved_weights`][tl_geometry.capture.saved_weights]): one copy of the blocks'
weights less while a batch's graph is held, the same gradients to rounding (bit for bit where a
copy is rebuilt). False: autograd's own saving (``benchmarks/check_agop_memory.py --weights``
measures both)."""
COPIES_AS_VIEWS = True
"""The probe passes run with TransformerLens's copied weights laid out as the copies
([`copies_as_views`][tl_geometry.capture.saved_weights.copies_as_views]): no weight is copied in
the forward nor rebuilt at backward; the same gradients to float32 rounding. False: the model's
own layout (``benchmarks/bench_agop_layout.py`` measures both)."""


@contextlib.contextmanager
def grad_capture(
    model: Any, hooks: Sequence[str], *, cut: bool = False, last: str | None = None
) -> Iterator[dict[str, Tensor]]:
    """Context manager: during a forward pass inside it, record the activation at each hook as a
    tensor that gradients can be taken with respect to.

    Yields a dict (filled by the forward) hook name → activation (batch, pos, d) that is part of
    the autograd graph, so ``torch.autograd.grad(scalar, list(d.values()), retain_graph=True)``
    gives ∂scalar/∂activation at every hook in **one** backward pass. Where the model's parameters
    do not require grad, the first activation is made a leaf that does (so the graph exists);
    gradients are identical because downstream computation is unchanged.

    We take gradients with ``autograd.grad`` on the captured activations instead of TL backward
    hooks: it works the same way on HookedTransformer and TransformerBridge and lets the caller
    run many backward passes (probes) over one forward. Hooks are removed on exit, even on error.

    ``cut=True``: the first hook to fire always hands the model a detached leaf, so no autograd
    graph is kept below the lowest hook (the activations beneath it are freed as the forward goes
    on). The gradients at every hook are unchanged: everything above the leaf is the same
    computation. What a chunk of late hooks needs (the graph of the layers above it only).
    ``last`` (one of ``hooks``): its activation is recorded in the graph but the model goes on
    with a detached copy, so nothing after it is recorded (the readout probes need nothing past
    the unembedding's input: no logits graph, no saved copy of W_U).

    Raises:
        InputError: inside ``torch.inference_mode()``, where no gradient exists (``torch.no_grad()``
            is fine: the backward passes re-enable gradients themselves).
    """
    if torch.is_inference_mode_enabled():
        raise InputError(
            "gradient metrics (agop, nfa, loss correlations) cannot run inside torch.inference_mode(): "
            "no gradient exists there; call them outside it (torch.no_grad() is fine)"
        )
    hooks = validate_hooks(model, hooks)
    acts: dict[str, Tensor] = {}

    def make_hook(name: str):
        def hook_fn(act: Tensor, hook: Any = None):
            if not act.requires_grad or (cut and not acts):
                act = act.detach().requires_grad_(True)
                acts[name] = act
                return act.detach() if name == last else act
            acts[name] = act
            return act.detach() if name == last else None

        return hook_fn

    with hooked(model, [(h, make_hook(h)) for h in hooks]):
        yield acts


@contextlib.contextmanager
def frozen_parameters(model: Any) -> Iterator[None]:
    """Context manager: the model's parameters do not require grad inside it (restored on exit, even
    on error). Gradients with respect to activations are unchanged; the forward then saves nothing
    for parameter gradients, and the graph below the lowest captured hook is not kept (the first
    hook makes a leaf: [`grad_capture`][tl_geometry.capture.backward.grad_capture])."""
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)


def gradients(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    hooks: Sequence[str],
    scalar_fn: Callable[[Tensor], Tensor],
) -> dict[str, Float[Tensor, "batch pos d"]]:
    """∂ scalar_fn(logits) / ∂ activation at each hook, from one forward and one backward.

    Args:
        scalar_fn: maps the model's logits (batch, pos, d_vocab) to a scalar tensor.

    Raises:
        ValueError: the scalar does not depend on a hook's activation (e.g. a hook after the
            unembedding) or is not a scalar; non-finite gradients.
    """
    tokens = check_tokens(model, tokens).to(model_device(model))
    with eval_mode(model), grad_capture(model, hooks) as acts, torch.enable_grad():
        logits = model(tokens)
        out = scalar_fn(logits)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise InputError("scalar_fn must return a scalar tensor")
        names = list(acts)
        if not out.requires_grad:
            raise InputError(f"the scalar does not depend on any activation at {list(hooks)}")
        grads = torch.autograd.grad(out, [acts[h] for h in names], allow_unused=True)
    result = {}
    for h, g in zip(names, grads):
        if g is None:
            raise InputError(
                f"the logits do not depend on the activation at {h!r}; choose a hook before the unembedding"
            )
        if not torch.isfinite(g).all():
            raise InputError(f"non-finite gradient at {h!r}")
        result[h] = _to_float(g.detach())
    return result


def float32_model(model: Any) -> Any:
    """The model itself when it computes in float32/64, else a float32 copy (bf16/fp16 models)."""
    dtype = getattr(model.cfg, "dtype", torch.float32)
    if dtype in (torch.float32, torch.float64):
        return model
    logger.info("gradients: model dtype %s; computing on a float32 copy", dtype)
    m = copy.deepcopy(model).to(torch.float32)
    m.cfg.dtype = torch.float32
    return m


def check_grad_hooks(hooks: Sequence[str]) -> None:
    bad = [h for h in hooks if h in _AFTER_UNEMBED or (h.startswith("unembed.") and h != "unembed.hook_in")]
    if bad:
        raise InputError(f"hooks {bad} lie past the unembedding: no logits depend on them; choose a hook before it")


def _check_acts(acts: dict, hooks: Sequence[str]) -> list[Tensor]:
    missing = [h for h in hooks if h not in acts]
    if missing:
        raise InputError(f"hooks {missing} never fired during the forward pass")
    for h in hooks:
        if acts[h].ndim != 3:
            raise InputError(f"gradients need (batch, pos, d) activations; {h!r} has shape {tuple(acts[h].shape)}")
    return [acts[h] for h in hooks]


def _replace(hook: str, x: Tensor):
    def fn(act: Tensor, hook: Any = None) -> Tensor:
        return x

    return [(hook, fn)]


PROBE_MODES: dict[str, str] = {
    "readout": "v = S z at the unembedding's input, S Sᵀ = W_U W_Uᵀ, z ~ N(0, I_d) (the same law as W_U u; "
    "no vocabulary-sized probe, no backward through W_U; ours, the default)",
    "logits": "u ~ N(0, I) of the logits' shape, g = ∂(u·F)/∂a (the textbook estimator)",
}
"""How [`probe_gradients`][tl_geometry.capture.backward.probe_gradients] draws its probes (``probes=``)."""
READOUT_HOOK = "unembed.hook_in"
"""The unembedding's input: logits = x W_U + b_U there (checked on every batch)."""
READOUT_CHECK_POSITIONS = 8
"""Positions per batch on which the readout probes check that the logits are x W_U + b_U."""


def readout_factor(W_U: Tensor) -> Tensor:
    """S (d × d, float64) with S Sᵀ = W_U W_Uᵀ: ``S @ z`` for z ~ N(0, I_d) has the law of ``W_U @ u``
    for u ~ N(0, I_{d_vocab}) (both Gaussian with covariance W_U W_Uᵀ). From the eigendecomposition
    of W_U W_Uᵀ (negative round-off eigenvalues clipped to 0), so a rank-deficient W_U is fine.

    Raises:
        ValueError: W_U not a 2-D (d_model, d_vocab) tensor, or not finite.
    """
    if not isinstance(W_U, Tensor) or W_U.ndim != 2:
        raise InputError(f"W_U must be a 2-D tensor (d_model, d_vocab), got {getattr(W_U, 'shape', type(W_U))}")
    if not _checks.all_finite(W_U):  # no temporary of W_U's size (1.1 GiB beside Gemma's)
        raise InputError("W_U contains NaN or inf")
    G = gram64(W_U.detach(), chunk=VOCAB_CHUNK)  # float64, no float64 copy of W_U
    with kernel("lapack", W_U.device):  # one thread: reproducible bits, immune to other work
        evals, evecs = torch.linalg.eigh(G)
    return evecs * evals.clamp_min(0.0).sqrt()


VOCAB_CHUNK = 8192
"""Columns of W_U converted to float64 at a time (no float64 copy of the whole unembedding)."""


def check_probes(probes: str) -> None:
    """Raise unless ``probes`` is one of [`PROBE_MODES`][tl_geometry.capture.backward.PROBE_MODES]."""
    if probes not in PROBE_MODES:
        raise InputError(f"probes must be one of {tuple(PROBE_MODES)}, got {probes!r}")


def _readout_is_linear(x: Tensor, logits: Tensor, W_U: Tensor, m: Tensor, gen_seed: int) -> bool:
    """Whether logits = x W_U + const at a few kept positions (differences to the first, so any
    bias cancels): fails for soft-capped logits or any other non-linear readout."""
    b, t = torch.nonzero(m, as_tuple=True)
    if b.numel() < 2:
        return False
    g = torch.Generator().manual_seed(int(gen_seed))
    pick = torch.randperm(b.numel(), generator=g)[:READOUT_CHECK_POSITIONS].to(b.device)
    xs = x.detach()[b[pick], t[pick]].double()
    ls = logits.detach()[b[pick], t[pick]].double()
    want = ls[1:] - ls[:1]
    dx = xs[1:] - xs[:1]
    got = torch.cat(  # float64 in column chunks: no float64 copy of W_U
        [dx @ W_U[:, c : c + VOCAB_CHUNK].to(xs.device, torch.float64) for c in range(0, W_U.shape[1], VOCAB_CHUNK)],
        dim=1,
    )
    scale = float(want.abs().max()) + float(ls.abs().max()) * 1e-6 + 1e-12
    return bool(((got - want).abs().max() / scale) < 1e-4)


def _probe_forward(model: Any, batch: Tensor, names: list[str], last: str | None, device: Any):
    """One forward of a probe batch: (logits, the activations at ``names``), parameters frozen, the
    graph cut below the lowest hook and after ``last``."""
    with frozen_parameters(model), grad_capture(model, names, cut=True, last=last) as acts, torch.enable_grad():
        with kernel("dense", device), weights_by_reference(model, enabled=SAVE_WEIGHTS_BY_REFERENCE):
            logits = model(batch)
    return logits, _check_acts(acts, names)


def probe_seed(seed: int, sequence: int) -> int:
    """The seed of sequence ``sequence``'s probe generator: a 32-bit word of
    ``numpy.random.SeedSequence([seed, sequence])`` (torch's CPU generator keeps 32 bits of a seed,
    so the pair is hashed into them rather than packed)."""
    import numpy as np

    return int(np.random.SeedSequence([int(seed) % 2**63, int(sequence)]).generate_state(1)[0])


def _per_sequence_randn(like: Tensor, gens: list[torch.Generator]) -> Tensor:
    """N(0, 1) of ``like``'s shape (batch, ...), row b drawn from ``gens[b]``."""
    return torch.stack([torch.randn(like.shape[1:], generator=g, device=like.device, dtype=like.dtype) for g in gens])


def _probe_vjps(outs: Tensor, xs: list[Tensor], *, last: bool, proven: bool = True) -> list | None:
    """∂outs[i]/∂x for every x in ``xs``, stacked over i (one probe per entry of ``outs``), from one
    backward pass: autograd's batched gradients (``is_grads_batched``, a vmap over the backward) for
    several probes, the plain backward for one. None where the batched backward is not supported
    (an op without a batching rule): the caller then takes one probe per pass. The graph is freed
    after the ``last`` pass, except by a batched pass not yet ``proven`` on this model (a failure
    must leave the graph for the retry)."""
    if outs.shape[0] == 1:
        grads = torch.autograd.grad(outs[0], xs, retain_graph=not last, allow_unused=True)
        return [None if g is None else g.unsqueeze(0) for g in grads]
    eye = torch.eye(outs.shape[0], dtype=outs.dtype, device=outs.device)
    try:
        return list(
            torch.autograd.grad(
                outs, xs, grad_outputs=eye, is_grads_batched=True, retain_graph=not (last and proven), allow_unused=True
            )
        )
    except RuntimeError as e:  # e.g. "Batching rule not implemented"
        logger.debug("batched backward failed: %s", e)
        return None


def probe_gradients(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    hooks: Sequence[str],
    mask: Tensor,
    consumer: ProbeConsumer,
    *,
    n_probes: int,
    seed: int,
    batch_size: int,
    progress: bool = True,
    probes: str = "readout",
    seq_groups: Tensor | None = None,
    readout: Tensor | None = None,
    probe_batch: int = 1,
    done: dict | None = None,
) -> str:
    """Random logit-space probes: for every batch and probe, ``g = ∂(u·F)/∂a`` at every hook from ONE
    backward pass, handed to ``consumer(hook, p, g[mask])``; returns the probe mode used.

    ``seq_groups`` (one integer label per sequence, e.g. its text group): the rows are handed over
    by label, ``consumer(hook, p, g[mask & (label == j)], j)`` for each label j of the batch (one
    call when the batch holds one label, as a one-sequence batch does). ``readout``: a precomputed
    ``readout_factor(W_U).T`` (float32, on the model's device) to reuse across calls on one model.

    Working set: the autograd graph of one batch above the lowest hook (the graph below it is cut:
    [`grad_capture`][tl_geometry.capture.backward.grad_capture]'s ``cut``), one gradient per hook
    of the batch's shape at a time, and one probe of the activations' (readout) or the logits'
    shape.

    ``probes`` ([`PROBE_MODES`][tl_geometry.capture.backward.PROBE_MODES]): "logits" draws u ~ N(0, I) of the logits' shape. "readout"
    (default) uses that ∂(u·F)/∂a = ∂((W_U u)·x)/∂a with x the unembedding's input
    ([`READOUT_HOOK`][tl_geometry.capture.backward.READOUT_HOOK], where F = x W_U + b_U), and draws ``W_U u`` directly as ``S z`` with
    S Sᵀ = W_U W_Uᵀ ([`readout_factor`][tl_geometry.capture.backward.readout_factor]), z ~ N(0, I_d): the probe gradients have exactly
    the same law (so the AGOP estimator, its bias and its standard error are unchanged), but no
    (batch, pos, d_vocab) probe is drawn and no backward runs through W_U — on SmolLM2-135M
    (8 × 128 tokens, d_vocab 49,152, 2 cores) 2.46 s → 1.92 s per probe (benchmarks/bench_agop_probes.py). It is used only where the model
    has that hook and the logits are checked to be x W_U + const on every batch
    ([`READOUT_CHECK_POSITIONS`][tl_geometry.capture.backward.READOUT_CHECK_POSITIONS] positions; soft-capped logits fail it); otherwise "logits"
    is used and returned. The two modes draw different random numbers: same law, other values.

    ``probe_batch``: readout probes taken together in one backward pass (autograd's batched
    gradients, a vmap over the backward: the same draws and the same gradients, to rounding, as one
    probe per pass, at 1.3–1.4× the speed for 8 probes of one SmolLM2-135M sequence; each probe adds
    one gradient of every intermediate to the pass's memory, sized by
    [`agop_plan`][tl_geometry.families.interaction.memory.agop_plan]; ``agop`` passes 1 unless
    [`BATCH_PROBES`][tl_geometry.families.interaction.memory.BATCH_PROBES] is set: Gemma-3-270M's
    backward batched 1.17× slower and 1.2 GiB larger). Logit probes, and models whose backward has
    no batching rule, take one probe per pass.

    ``done``: a dict, filled with what was done rather than asked: ``"probe_batch"`` (the fewest
    probes a backward pass took: 1 where batching fell back) and ``"weights_moved"`` (how many
    parameters [`copies_as_views`][tl_geometry.capture.saved_weights.copies_as_views] laid out as
    TransformerLens's copies; 0 when off or not a TransformerLens model).

    Probes are drawn sequence by sequence: sequence b has its own generator on the model's device,
    seeded from (``seed``, b) ([`probe_seed`][tl_geometry.capture.backward.probe_seed]) and
    drawn probe by probe, so the numbers do not depend on ``batch_size`` (a memory budget) nor on
    which hooks a pass captures. The threads of every pass are chosen
    afresh ([`tl_geometry.runtime.threads.kernel`][tl_geometry.runtime.threads.kernel]), so a long run follows the machine's load.
    """
    from tqdm.auto import tqdm

    check_probes(probes)
    if isinstance(probe_batch, bool) or not isinstance(probe_batch, int) or probe_batch < 1:
        raise InputError(f"probe_batch must be a positive integer (probes per backward pass), got {probe_batch!r}")
    device = model_device(model)
    use_readout = probes == "readout" and READOUT_HOOK in getattr(model, "hook_dict", {}) and READOUT_HOOK not in hooks
    # readout probes while W_U / S_T are set (None: logit probes); W_U itself is read inside the
    # layout below (a detached W_U read here would keep its old storage alive beside the new one)
    if not use_readout:
        S_T = None
    elif readout is not None:
        S_T = readout
    else:
        S_T = readout_factor(weight(model, "W_U")).T.to(device, torch.float32).contiguous()
    if seq_groups is not None:
        seq_groups = torch.as_tensor(seq_groups).long()
        if seq_groups.shape != (tokens.shape[0],):
            raise InputError(
                f"seq_groups must hold one label per sequence, shape ({tokens.shape[0]},), got {tuple(seq_groups.shape)}"
            )
    starts = range(0, tokens.shape[0], batch_size)
    bar = tqdm(total=len(starts) * n_probes, desc="agop", unit="probe", disable=not progress, leave=False)
    # the bar closes and the weights' layout is restored, error or not
    used = int(probe_batch)
    with bar, copies_as_views(model, enabled=COPIES_AS_VIEWS) as moved:
        W_U = weight(model, "W_U") if use_readout else None
        if done is not None:
            done["weights_moved"] = len(moved)
        for start in starts:
            batch, m = tokens[start : start + batch_size].to(device), mask[start : start + batch_size].to(device)
            if not m.any():
                bar.update(n_probes)
                continue
            names = list(hooks) + ([READOUT_HOOK] if W_U is not None else [])
            if seq_groups is None:
                parts: list[tuple[Tensor, int | None]] = [(m, None)]
            else:
                lab = seq_groups[start : start + batch_size].to(device)
                parts = [(m & (lab == j)[:, None], int(j)) for j in torch.unique(lab[m.any(1)]).tolist()]
            gens = [
                torch.Generator(device=device).manual_seed(probe_seed(seed, b))
                for b in range(start, start + batch.shape[0])
            ]
            logits, xs = _probe_forward(model, batch, names, READOUT_HOOK if W_U is not None else None, device)
            x_out = xs.pop() if W_U is not None else None
            if x_out is not None and W_U is not None and not _readout_is_linear(x_out, logits, W_U, m, seed + start):
                if start > 0:  # the probes of earlier batches were drawn in the readout space
                    raise InputError(
                        f"the logits stopped being linear in {READOUT_HOOK!r} at batch {start}; use probes='logits'"
                    )
                logger.info("agop: logits are not x W_U + b_U at %s; drawing probes over the logits", READOUT_HOOK)
                W_U = S_T = x_out = None
                del logits, xs  # the forward again, with the logits in the graph
                names = list(hooks)
                logits, xs = _probe_forward(model, batch, names, None, device)
            states = [g.get_state() for g in gens]  # to redraw a pass if batching fails
            batched_ok = False
            # several probes per backward pass where the plan allows (readout probes only: a logits
            # probe is vocabulary-sized); the same draws, in the same order, as one probe per pass
            per_pass = int(probe_batch) if x_out is not None else 1
            with torch.enable_grad():
                p0 = 0
                while p0 < n_probes:
                    ps = range(p0, min(p0 + per_pass, n_probes))
                    with kernel("dense", device):  # chosen per pass: one batch can take minutes
                        if x_out is not None and S_T is not None:  # readout probes
                            z = torch.stack([_per_sequence_randn(x_out, gens) for _ in ps])
                            outs = ((z @ S_T.to(x_out.dtype)) * x_out).flatten(1).sum(1)
                        else:
                            u = torch.stack([_per_sequence_randn(logits, gens) for _ in ps])
                            outs = (u * logits).flatten(1).sum(1)
                        grads = _probe_vjps(outs, xs, last=ps[-1] == n_probes - 1, proven=batched_ok)
                        batched_ok = batched_ok or (grads is not None and len(ps) > 1)
                        if grads is None:  # the batched backward is not supported here: one probe per pass
                            logger.info("agop: batched probe backward unsupported on this model; one probe per pass")
                            per_pass = 1
                            for g, st in zip(gens, states):  # draw this pass's probes again, one at a time
                                g.set_state(st)
                            continue
                        for h, g in zip(hooks, grads):
                            if g is None:
                                raise InputError(
                                    f"the logits do not depend on the activation at {h!r}; "
                                    "choose a hook before the unembedding"
                                )
                        for i, p in enumerate(ps):
                            for h, g in zip(hooks, grads):
                                for sel, j in parts:
                                    if j is None:
                                        consumer(h, p, g[i][sel])
                                    else:
                                        consumer(h, p, g[i][sel], j)
                    used = min(used, per_pass)
                    del grads, outs  # before the next pass (or the next batch's forward) allocates its own
                    bar.update(len(ps))
                    p0 = ps[-1] + 1
                    if per_pass > 1 and not batched_ok:  # only a pass not yet proven can fail
                        states = [g.get_state() for g in gens]
        kind = "logits" if W_U is None else "readout"
        # before the layout is restored (a transient copy of each moved weight): no reference left
        # to the moved storage, and the last pass's graph freed
        W_U = x_out = logits = xs = None
    if done is not None:
        done["probe_batch"] = used
    return kind


def jacobian_grams(
    model: Any, tokens: Int[Tensor, "batch pos"], hooks: Sequence[str], mask: Tensor, *, progress: bool = True
) -> dict[str, tuple[Tensor, int]]:
    """Exact ``Σ_{b,t} J_{b,t}ᵀ J_{b,t}`` (float64) and the number of kept positions per hook.

    J_{b,t} = ∂F_b/∂a_{b,t}: every logit of sequence b w.r.t. the activation at position t, by
    ``torch.func.jacrev`` one sequence at a time (tiny models only; refused beyond
    [`EXACT_MAX_ENTRIES`][tl_geometry.capture.backward.EXACT_MAX_ENTRIES] entries per sequence).
    """
    from tqdm.auto import tqdm

    device = model_device(model)
    out = {}
    for h in hooks:
        G, n = None, 0
        for b in per_step(tqdm(range(tokens.shape[0]), desc=f"exact {h}", disable=not progress, leave=False)):
            seq, keep = tokens[b : b + 1].to(device), mask[b].to(device)
            if not keep.any():
                continue
            with grad_capture(model, [h]) as acts, torch.no_grad():
                logits = model(seq)
            a0 = _check_acts(acts, [h])[0].detach()
            if logits.numel() * a0.numel() > EXACT_MAX_ENTRIES:
                raise InputError(
                    f"exact=True needs a {logits.numel()} × {a0.numel()} Jacobian per sequence; use probes"
                )

            def f(x: Tensor, h: str = h, seq: Tensor = seq) -> Tensor:
                with hooked(model, _replace(h, x)):
                    return model(seq)

            jac = torch.func.jacrev(f)(a0)  # (1, T, V, 1, T, d)
            J = jac.detach()[0, :, :, 0].reshape(-1, a0.shape[1], a0.shape[2])[:, keep].double()  # (T·V, kept, d)
            Gb = torch.einsum("nsd,nse->de", J, J)
            G = Gb if G is None else G + Gb
            n += int(keep.sum())
        if G is None:
            raise InputError("no valid token positions after dropping BOS/padding")
        out[h] = (G, n)
    return out


def output_jvps(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    hook: str,
    P: Tensor,
    consumer: ProbeConsumer,
    *,
    n_probes: int,
    seed: int,
    batch_size: int,
    progress: bool = True,
) -> int:
    """JVP probes of the projected last-position logits ``y_b = P F_b[-1]`` w.r.t. the activation
    at ``hook``: for v ~ N(0, I) of the activation's shape, ``consumer(hook, p, P J_b v)`` (B, k).

    Returns the number of sequences.
    """
    from tqdm.auto import tqdm

    device = model_device(model)
    gen = torch.Generator(device=device).manual_seed(int(seed))
    n_seq = 0
    for start in per_step(
        tqdm(range(0, tokens.shape[0], batch_size), desc="agop out", disable=not progress, leave=False)
    ):
        batch = tokens[start : start + batch_size].to(device)
        with grad_capture(model, [hook]) as acts, torch.no_grad():
            model(batch)
        x0 = _check_acts(acts, [hook])[0].detach()

        def f(x: Tensor, batch: Tensor = batch) -> Tensor:
            with hooked(model, _replace(hook, x)):
                return model(batch)[:, -1] @ P.T  # (B, k)

        vs = torch.randn((n_probes, *x0.shape), generator=gen, device=device, dtype=x0.dtype)
        jvs = torch.func.vmap(lambda v, f=f, x0=x0: torch.func.jvp(f, (x0,), (v,))[1], chunk_size=JVP_CHUNK)(vs)
        for p in range(n_probes):
            consumer(hook, p, jvs[p])
        n_seq += batch.shape[0]
    return n_seq


def output_gram(
    model: Any, tokens: Int[Tensor, "batch pos"], hook: str, P: Tensor, *, batch_size: int, progress: bool = True
) -> tuple[Tensor, int]:
    """Exact ``Σ_b (P J_b)(P J_b)ᵀ`` (float64, k × k) and the number of sequences; J_b the
    Jacobian of the last-position logits w.r.t. the whole activation at ``hook`` (one
    vector-Jacobian product per row of P: no functorch state kept between calls)."""
    from tqdm.auto import tqdm

    device = model_device(model)
    k = P.shape[0]
    G, n_seq = torch.zeros(k, k, dtype=torch.float64, device=device), 0
    for start in per_step(
        tqdm(range(0, tokens.shape[0], batch_size), desc="agop out", disable=not progress, leave=False)
    ):
        batch = tokens[start : start + batch_size].to(device)
        with grad_capture(model, [hook]) as acts, torch.enable_grad():
            y = model(batch)[:, -1] @ P.T  # (B, k)
            x = _check_acts(acts, [hook])[0]
            rows = [torch.autograd.grad(y[:, i].sum(), x, retain_graph=i < k - 1)[0] for i in range(k)]
        PJ = torch.stack(rows, 1).detach().flatten(2).double()  # (B, k, T·d)
        if not torch.isfinite(PJ).all():
            raise InputError(f"non-finite gradient at {hook!r}")
        G += torch.einsum("bkn,bln->kl", PJ, PJ)
        n_seq += batch.shape[0]
    return G, n_seq


def loss_gradient_grams(
    model: Any,
    tokens: Int[Tensor, "batch pos"],
    hooks: Sequence[str],
    mask: Tensor,
    *,
    batch_size: int,
    progress: bool = True,
) -> tuple[dict[str, Tensor], int]:
    """``Σ g gᵀ`` (float64) per hook and the number of positions, g = ∂L_b/∂a_{b,t} of the summed
    next-token cross-entropy; one backward per batch, the last position (which predicts nothing)
    and BOS/padding (``mask``) dropped."""
    from tqdm.auto import tqdm

    device = model_device(model)
    if tokens.shape[1] < 2:
        raise InputError(
            f"space='loss' needs sequences of at least 2 tokens (a next token to predict), got {tokens.shape[1]}"
        )
    sums: dict[str, Tensor] = {}
    n = 0
    for start in per_step(
        tqdm(range(0, tokens.shape[0], batch_size), desc="agop loss", disable=not progress, leave=False)
    ):
        batch = tokens[start : start + batch_size].to(device)
        keep = mask[start : start + batch_size].clone()
        keep[:, -1] = False  # the last position predicts nothing: its gradient is 0 by causality
        if not keep.any():
            continue
        keep = keep.to(device)
        with grad_capture(model, hooks) as acts, torch.enable_grad():
            logits = model(batch)
            xs = _check_acts(acts, hooks)
            loss = torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1), reduction="sum"
            )
            grads = torch.autograd.grad(loss, xs, allow_unused=True)
        for h, g in zip(hooks, grads):
            if g is None:
                raise InputError(
                    f"the loss does not depend on the activation at {h!r}; choose a hook before the unembedding"
                )
            g = g.detach()[keep].double()
            if not torch.isfinite(g).all():
                raise InputError(f"non-finite gradient at {h!r}")
            sums[h] = g.T @ g + sums.get(h, 0)
        n += int(keep.sum())
    if n == 0:
        raise InputError("no valid token positions after dropping BOS/padding and the last position")
    return sums, n
