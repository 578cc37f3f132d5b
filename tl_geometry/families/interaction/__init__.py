"""The interaction family (Sun, Yang, Zhang, Du, arXiv 2605.27989), model-facing.

``tg.agop`` and ``tg.nfa`` (gradients through [`tl_geometry.capture.backward`][tl_geometry.capture.backward], the math in
[`tl_geometry.metrics.interaction`][tl_geometry.metrics.interaction]) and the registered metrics "agop", "wtw_aofe",
"depth_width", "nfa".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from tl_geometry import capture
from tl_geometry.errors import InputError
from tl_geometry.families.interaction import memory
from tl_geometry.families.interaction.memory import (
    AGOPPlan,
    agop_graph_bytes,
    agop_plan,
    agop_plan_for,
    agop_working_set_bytes,
    hook_chunks,
    hook_width,
)
from tl_geometry.metrics.interaction import (
    EFFICIENT_INTERVAL,
    AGOPAccumulator,
    AGOPResult,
    HookAGOP,
    NFACorrelation,
    agop_compute_bytes,
    agop_state_bytes,
    depth_width_ratio,
    exact_stats,
    in_efficient_interval,
    leave_group_out,
    nfa_correlation,
    nfa_jackknife,
    projection_matrix,
    wtw_aofe,
)
from tl_geometry.metrics.jackknife import group_labels
from tl_geometry.registry import FamilySpec, FigureSpec, RowSpec, register_family, register_metric
from tl_geometry.report import GeometryReport
from tl_geometry.runtime.threads import choose as choose_threads

__all__ = [
    "SPACES",
    "AGOPPlan",
    "agop",
    "agop_graph_bytes",
    "agop_plan",
    "agop_report",
    "agop_working_set_bytes",
    "nfa",
]

SPACES: dict[str, str] = {
    "input": "E[JᵀJ] over every logit w.r.t. the activation at each hook (d × d; ours, the NFA convention)",
    "output": "E[(PJ)(PJ)ᵀ], J of the last-position logits w.r.t. one hook (k × k, P a fixed k × d_vocab "
    "Gaussian; the paper's next-token shape sweep, budget_scaling/transformer_ntp_shape_sweep.py)",
    "loss": "E[g gᵀ], g = ∂(summed next-token cross-entropy)/∂a at each position (d × d; the paper's TinyGPT "
    "depth scan, shape_scan/transformer_shape_scan.py)",
}
"""The AGOP conventions (``space=`` of [`agop`][tl_geometry.families.interaction.agop]); the paper's code uses three AGOPs: the toy's E[J Jᵀ] (``tl_geometry.families.interaction.toy_superposition.toy_agop``, closed form), the next-token shape sweep's "output" and the TinyGPT depth scan's "loss"."""


def agop(
    model: Any,
    tokens: Tensor,
    *,
    hooks: Sequence[str] | None = None,
    n_probes: int = 64,
    space: str = "input",
    seed: int = 0,
    exact: bool = False,
    batch_size: int | None = None,
    n_groups: int | None = None,
    projection_dim: int = 64,
    projection_seed: int | None = None,
    progress: bool = True,
    probes: str = "readout",
    keep_groups: bool = False,
    text_groups: int | None = 8,
    memory_mb: float = 512,
    state_mb: float = 1024,
    keep_matrices: bool = True,
) -> AGOPResult:
    """AGOP at hook points in one of three conventions (``space``, see [`SPACES`][tl_geometry.families.interaction.SPACES]).

    Input space (default; see docs/definitions.md): ``G_h = mean_{b,t} J_{b,t}ᵀ J_{b,t}`` with
    ``J_{b,t} = ∂F_b/∂a_{b,t}``, F_b all logits of sequence b, a the activation at hook h; BOS and
    padding positions dropped as [`tl_geometry.capture.valid_mask`][tl_geometry.capture.hooks.valid_mask] does. Estimator: probes
    u ~ N(0, I) over the logits, ``g = ∂(u·F)/∂a`` (one backward per probe serves every hook),
    ``E[g gᵀ] = JᵀJ``.

    Output space (the paper's next-token shape sweep): ``G = mean_b (P J_b)(P J_b)ᵀ`` (proj_dim ×
    proj_dim), J_b the Jacobian of the last-position logits w.r.t. the activation at the single
    hook (default ``blocks.0.hook_resid_pre``: token + position embeddings), P fixed Gaussian
    ([`projection_matrix`][tl_geometry.metrics.interaction.projection_matrix]; ``projection_seed=42`` draws the authors' P); estimated with JVP
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
        space: "input", "output" or "loss" ([`SPACES`][tl_geometry.families.interaction.SPACES]).
        seed: probe seed (and the projection's seed in output space unless ``projection_seed``).
        exact: exact Jacobians via ``torch.func`` (tiny models only): the reference.
        batch_size: sequences per forward pass; None (default): from ``memory_mb`` in input space
            with probes (8 elsewhere). Recorded as ``provenance["agop_batch_size"]``.
        n_groups: probe groups for the standard error (default min(n_probes, 8)).
        text_groups: input space with probes: the delete-a-group jackknife over the text, in
            this many groups of whole sequences (``tl_geometry.metrics.jackknife.group_labels``;
            at most one per sequence), combined in quadrature with the one over probe groups
            (``HookAGOP.aofe_stderr`` …; each part kept). None: the probe jackknife alone (the error
            for these tokens only). With one sequence the error over the text is undefined: the
            combined errors are NaN and ``stderr_note`` says why.
        memory_mb: the budget (MiB) of one pass's autograd graph: the batch is the most sequences
            whose graph bound fits ([`tl_geometry.families.interaction.memory.agop_plan`][tl_geometry.families.interaction.memory.agop_plan]), at least one.
        state_mb: the budget (MiB) of the accumulators: hooks are processed in consecutive chunks
            whose sums, ``(n_groups + text_groups) · d(d+1)/2 · 4`` bytes per hook (packed upper
            triangles), fit; each chunk runs
            the passes again with the same probes, so the numbers do not depend on it
            (``provenance["agop_hook_chunks"]``).
        keep_matrices: keep every hook's G in ``AGOPResult.matrices`` (d² floats per hook); False
            keeps the statistics only (what the "agop" metric does; ``matrices`` is then empty).
        projection_dim: rows of P in output space (64 in the paper).
        projection_seed: draw P as the authors do (``torch.manual_seed(s); randn(k, d_vocab) / √k``
            on the model's device; they used 42); None: our seeded P (derived from ``seed``).
        probes: input space with probes: "readout" (default; ours) draws ``W_U u`` directly as
            ``S z`` (S Sᵀ = W_U W_Uᵀ) at ``unembed.hook_in``: the same law as the logit probes u,
            so the same estimator, 1.3× faster per probe on SmolLM2; "logits" draws u over the logits.
            Where the logits are not linear in the unembedding's input (soft-capping) "logits" is
            used; ``provenance["agop_probes"]`` records which
            ([`tl_geometry.capture.PROBE_MODES`][tl_geometry.capture.backward.PROBE_MODES]).
        keep_groups: input space with probes: also return the AGOP without each probe group
            (``AGOPResult.group_replicates``, n_groups × d² floats per hook) for a jackknife of
            other functions of G (what [`nfa`][tl_geometry.families.interaction.nfa] does).

    Working set (input space with probes), beyond the model: the graph of one batch, at most
    ``memory_mb`` (or one sequence's), plus the sums of one hook chunk, at most ``state_mb`` (or one
    hook's), plus four float64 d × d temporaries while a hook's statistics are computed, plus the
    kept results (d² floats per hook with ``keep_matrices``, n_groups × d² more with
    ``keep_groups``). [`agop_working_set_bytes`][tl_geometry.families.interaction.memory.agop_working_set_bytes] gives it from the
    model's shape. Each extra chunk costs one more pass over the text, whose backward reaches down
    to the chunk's lowest hook only.

    Returns:
        [`AGOPResult`][tl_geometry.metrics.interaction.AGOPResult] (matrices, per-hook AOFE / ratio / trace / standard errors).

    Raises:
        ValueError: n_probes < 2, unknown space, tokens longer than n_ctx, a hook past the
            unembedding or one the logits do not depend on, non-finite gradients.
    """
    capture.check_model(model)
    if space not in SPACES:
        raise InputError(f"space must be one of {tuple(SPACES)}, got {space!r}")
    capture.check_probes(probes)  # before any work, in every space
    if space != "loss" and not exact and (isinstance(n_probes, bool) or int(n_probes) < 2):
        raise InputError(f"n_probes must be >= 2 (the standard error needs two probes), got {n_probes}")
    if batch_size is not None and (isinstance(batch_size, bool) or int(batch_size) < 1):
        raise InputError(f"batch_size must be None (from memory_mb) or >= 1, got {batch_size}")
    if text_groups is not None and (isinstance(text_groups, bool) or int(text_groups) < 2):
        raise InputError(f"text_groups must be None (probe jackknife only) or an integer >= 2, got {text_groups!r}")
    for name, v in (("memory_mb", memory_mb), ("state_mb", state_mb)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise InputError(f"{name} must be a positive number of MiB, got {v!r}")
    tokens = capture.check_tokens(model, tokens)
    if projection_seed is not None and space != "output":
        raise InputError(f"projection_seed applies to space='output' only, got space={space!r}")
    if hooks is None:
        if space == "input":
            hooks = capture.resid_hooks(model, "pre")
        elif space == "loss" and "hook_embed" in getattr(model, "hook_dict", {}):
            hooks = ["hook_embed"]
        else:
            hooks = ["blocks.0.hook_resid_pre"]
    hooks = capture.validate_hooks(model, hooks)
    capture.check_grad_hooks(hooks)
    if space == "output" and len(hooks) != 1:
        raise InputError(f"output space takes one hook (the input embeddings), got {len(hooks)}")
    mask = capture.valid_mask(model, tokens)
    if not mask.any():
        raise InputError("no valid token positions after dropping BOS/padding")
    work = capture.float32_model(model)
    probes_used = None
    replicates = None
    plan_prov: dict[str, Any] = {}
    fixed_batch = 8 if batch_size is None else int(batch_size)
    with capture.eval_mode(work):
        if space == "output":
            mats, stats = _output_space(
                work,
                tokens,
                hooks[0],
                int(n_probes),
                n_groups,
                seed,
                fixed_batch,
                exact,
                int(projection_dim),
                progress,
                projection_seed,
            )
        elif space == "loss":
            sums, n = capture.loss_gradient_grams(work, tokens, hooks, mask, batch_size=fixed_batch, progress=progress)
            mats, stats = _from_sums(sums, n)
        elif exact:
            grams = capture.jacobian_grams(work, tokens, hooks, mask, progress=progress)
            mats, stats = {}, {}
            for h, (G, n) in grams.items():
                G = G / n
                mats[h], stats[h] = G.float(), exact_stats(G, n)
        else:
            mats, stats, replicates, probes_used, plan_prov = _input_probes(
                work,
                tokens,
                hooks,
                mask,
                n_probes=int(n_probes),
                n_groups=n_groups,
                seed=seed,
                batch_size=batch_size,
                progress=progress,
                probes=probes,
                keep_groups=keep_groups,
                text_groups=text_groups,
                memory_mb=memory_mb,
                state_mb=state_mb,
            )
    if not keep_matrices:
        mats = {}
    exact = bool(exact) or space == "loss"
    prov = {
        "agop_space": space,
        "agop_exact": exact,
        "n_tokens": int(tokens.numel()),
        "tokens_shape": list(tokens.shape),
    }
    if probes_used is not None:
        prov["agop_probes"] = probes_used
    prov.update(plan_prov or {"agop_batch_size": fixed_batch})
    if space == "output":
        prov["agop_projection"] = {
            "dim": int(projection_dim),
            "seed": int(seed if projection_seed is None else projection_seed),
            "convention": "library" if projection_seed is None else "paper",
        }
    return AGOPResult(
        matrices=mats,
        stats=stats,
        space=space,
        exact=exact,
        seed=int(seed),
        provenance=prov,
        group_replicates=replicates,
    )


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

    With probes (``exact=False``) each correlation carries a delete-a-group jackknife standard
    error over the probe groups ([`tl_geometry.metrics.interaction.nfa_jackknife`][tl_geometry.metrics.nfa.nfa_jackknife]: one
    eigendecomposition per group and layer); an exact AGOP gives standard errors 0.0, "exact".
    """
    capture.check_model(model)
    n = model.cfg.n_layers
    layers = list(range(n)) if layers is None else [int(l) for l in layers]
    if not layers or any(not 0 <= l < n for l in layers):
        raise InputError(f"layers must be a non-empty subset of range({n}), got {layers}")
    hooks = [f"blocks.{l}.ln2.hook_normalized" for l in layers]
    res = agop(
        model,
        tokens,
        hooks=hooks,
        n_probes=n_probes,
        seed=seed,
        exact=exact,
        batch_size=batch_size,
        progress=progress,
        keep_groups=True,
    )
    W_in = capture.weight(model, "W_in")
    out = {}
    for l, h in zip(layers, hooks):
        W = W_in[l].float()
        ln_w = capture.weight(model, f"blocks.{l}.ln2.w", optional=True)
        if isinstance(ln_w, Tensor) and ln_w.shape == (W.shape[0],):
            W = ln_w.detach().float()[:, None] * W
        reps = (res.group_replicates or {}).get(h)
        threads = choose_threads()
        out[h] = (
            nfa_jackknife(W, res.matrices[h], reps, threads=threads)
            if reps
            else nfa_correlation(W, res.matrices[h], threads=threads)
        )
    return out


def _input_probes(
    work,
    tokens,
    hooks,
    mask,
    *,
    n_probes,
    n_groups,
    seed,
    batch_size,
    progress,
    probes,
    keep_groups,
    text_groups,
    memory_mb,
    state_mb,
):
    """Input space with probes, hook chunk by hook chunk under ``state_mb`` (same probes in every chunk)."""
    acc0 = AGOPAccumulator(n_probes, n_groups)  # resolves n_groups
    K = acc0.n_groups
    seq_groups, J = None, None
    if text_groups is not None:
        valid = mask.any(1)
        owners = torch.arange(tokens.shape[0])[:, None].expand_as(mask)[mask]
        if int(valid.sum()) >= 2:
            row_lab = group_labels(owners, int(text_groups))
            seq_groups = torch.zeros(tokens.shape[0], dtype=torch.long)
            seq_groups[owners] = row_lab  # whole sequences share a label
            J = int(row_lab.max()) + 1
        else:  # one sequence: the text jackknife is undefined (HookAGOP.stderr_note says so)
            seq_groups, J = torch.zeros(tokens.shape[0], dtype=torch.long), 1
    budget = dict(n_groups=K, text_groups=J if J is None else int(text_groups), memory_mb=memory_mb, state_mb=state_mb)
    plan = agop_plan_for(
        work,
        tuple(tokens.shape),
        len(hooks),
        batch_size=batch_size,
        n_probes=n_probes if memory.BATCH_PROBES else None,
        **budget,
    )
    widths = [hook_width(work.cfg, h) for h in hooks]
    chunks = hook_chunks(widths, state_mb, n_groups=K, text_groups=budget["text_groups"])
    readout = None
    if len(chunks) > 1 and probes == "readout" and capture.READOUT_HOOK in getattr(work, "hook_dict", {}):
        device = capture.model_device(work)
        readout = capture.readout_factor(capture.weight(work, "W_U")).T.to(device, torch.float32).contiguous()
    mats, stats, replicates = {}, {}, {} if keep_groups else None
    probes_used, done = None, {"probe_batch": plan.probe_batch, "weights_moved": 0}
    for run in chunks:
        chunk = [hooks[i] for i in run]
        acc = AGOPAccumulator(n_probes, n_groups, text_groups=J)
        probes_used = capture.probe_gradients(
            work,
            tokens,
            chunk,
            mask,
            acc.update,
            n_probes=n_probes,
            seed=seed,
            batch_size=plan.batch_size,
            progress=progress,
            probes=probes,
            seq_groups=seq_groups,
            readout=readout,
            probe_batch=plan.probe_batch,
            done=done,
        )
        for h in chunk:
            mats[h], stats[h] = acc.compute(h)
            if replicates is not None:
                replicates[h] = [
                    R.float() for R in leave_group_out(acc.group_sums(h), acc.group_counts(), acc.n_positions[h])
                ]
            acc.drop(h)  # free each hook's sums as soon as its statistics are out
        del acc
    prov = {
        "agop_batch_size": plan.batch_size,
        "agop_probe_batch": done["probe_batch"],  # what the passes took (1 where batching fell back)
        "agop_weights_as_views": done["weights_moved"],
        "agop_hook_chunks": len(chunks),
        "agop_memory_mb": float(memory_mb),
        "agop_state_mb": float(state_mb),
        "agop_text_groups": J or 0,
        "agop_working_set_mb": round(
            (
                plan.graph_bytes
                + (plan.probe_batch - 1) * plan.probe_bytes
                + max(
                    sum(agop_state_bytes(widths[i], 1, n_groups=K, text_groups=budget["text_groups"]) for i in run)
                    for run in chunks
                )
                + agop_compute_bytes(max(widths))
            )
            / 2**20,
            1,
        ),
    }
    if plan.over_budget:
        prov["agop_over_budget"] = plan.over_budget
    # the group sums (0.30 GiB on SmolLM2 at report settings) are freed: hand the heap back to the OS
    # rather than leave it mapped under the next metric (measured: 1.89 GiB after, 1.23 GiB trimmed)
    from tl_geometry.models.hf_loading import release_memory

    release_memory()
    return mats, stats, replicates, probes_used, prov


def _from_sums(sums: dict[str, Tensor], n: int) -> tuple[dict[str, Tensor], dict[str, HookAGOP]]:
    mats = {h: (G / n) for h, G in sums.items()}
    return {h: G.float() for h, G in mats.items()}, {h: exact_stats(G, n) for h, G in mats.items()}


def _output_space(
    model, tokens, hook, n_probes, n_groups, seed, batch_size, exact, proj_dim, progress, projection_seed=None
):
    device = capture.model_device(model)
    if projection_seed is None:
        P = projection_matrix(proj_dim, model.cfg.d_vocab, seed=seed).to(device)
    else:
        P = projection_matrix(proj_dim, model.cfg.d_vocab, seed=projection_seed, convention="paper", device=device)
    if exact:
        G, n_seq = capture.output_gram(model, tokens, hook, P, batch_size=batch_size, progress=progress)
        G = G / n_seq
        return {hook: G.float()}, {hook: exact_stats(G, n_seq)}
    acc = AGOPAccumulator(n_probes, n_groups)
    capture.output_jvps(
        model, tokens, hook, P, acc.update, n_probes=n_probes, seed=seed, batch_size=batch_size, progress=progress
    )
    G, s = acc.compute(hook)
    return {hook: G}, {hook: s}


def stderr_method(s: HookAGOP) -> str:
    """The words of a probe-estimated row's ``stderr_method``: which jackknifes its ``stderr`` combines."""
    probes = f"{s.n_groups or 'the'} probe groups"
    if s.n_text_groups >= 2:
        return f"jackknife over {s.n_text_groups} text groups (whole sequences) and {probes}, in quadrature"
    if s.stderr_note:
        return f"undefined over the text (one sequence); stderr_probes: jackknife over {probes}"
    return f"jackknife over {probes} (these tokens only: no error over the text)"


def agop_report(result: AGOPResult, model: Any = None) -> GeometryReport:
    """Rows ``agop.aofe``, ``agop.aofe_ratio``, ``agop.trace`` per hook of an [`AGOPResult`][tl_geometry.metrics.interaction.AGOPResult].

    The ``agop.aofe_ratio`` and ``agop.aofe`` values are **bias-corrected** (``ratio_debiased``,
    ``aofe_debiased``: the delete-a-group jackknife over probe groups, for the quadratic AOFE the
    U-statistic, unbiased in the probes) when G was estimated with probes, and the exact values
    when G is exact; ``extras["estimator"]`` says which ("jackknife" or "exact") and
    ``extras["ratio_plugin"]`` / ``extras["aofe_plugin"]`` keep the plug-in values of Ĝ, biased
    upwards with few probes (4 probes read ratios of 0.77–0.94 on SmolLM2 where 64 read 0.35–0.55;
    at the report's 16 probes the plug-in AOFE of SmolLM2's layers 5–15 read 0.4–1.1 standard errors
    (4.6–9.3 %) above the 64-probe value on every probe seed, the corrected one −1.0 … +0.55:
    docs/interaction.md). Where probe noise dominates a tiny AOFE the corrected value can
    fall below 0.

    Standard errors (probe-estimated rows): ``extras["stderr"]`` is the jackknife over text groups
    and the one over probe groups in quadrature (``stderr_text``, ``stderr_probes``,
    ``n_text_groups`` keep the parts; ``stderr_method`` says which; with one sequence ``stderr``
    and ``stderr_text`` are NaN and ``stderr_note`` says why; with ``text_groups=None`` ``stderr``
    is the probe part alone, the error for these tokens only).
    """
    rows = []
    for h, s in result.stats.items():
        if result.exact or s.n_probes == 0:
            est, ratio, aofe_value = "exact", s.ratio, s.aofe
        elif math.isnan(s.ratio_debiased) or math.isnan(s.aofe_debiased):  # built without the correction
            est, ratio, aofe_value = "plugin", s.ratio, s.aofe
        else:
            est, ratio, aofe_value = "jackknife", s.ratio_debiased, s.aofe_debiased
        exact = est == "exact"
        ex = {
            "n_probes": s.n_probes,
            "space": result.space,
            "exact": result.exact,
            "n_positions": s.n_positions,
            "rel_stderr": s.rel_stderr,
            "aofe_debiased": s.aofe_debiased,
            "ratio_debiased": s.ratio_debiased,
            "stderr_method": "exact" if exact else stderr_method(s),
            "n_text_groups": 0 if exact else s.n_text_groups,
        }
        if s.stderr_note:
            ex["stderr_note"] = s.stderr_note

        def se(total: float, probes: float, text: float, exact: bool = exact) -> dict[str, float]:
            if exact:
                return {"stderr": total}
            return {"stderr": total, "stderr_probes": probes, "stderr_text": text}

        rows += [
            {
                "metric": "agop.aofe",
                "value": aofe_value,
                "hook": h,
                "extras": {
                    **ex,
                    **se(s.aofe_stderr, s.aofe_stderr_probes, s.aofe_stderr_text),
                    "aofe_plugin": s.aofe,
                    "estimator": est,
                },
            },
            {
                "metric": "agop.aofe_ratio",
                "value": ratio,
                "hook": h,
                "extras": {
                    **ex,
                    **se(s.ratio_stderr, s.ratio_stderr_probes, s.ratio_stderr_text),
                    "ratio_plugin": s.ratio,
                    "estimator": est,
                },
            },
            {
                "metric": "agop.trace",
                "value": s.trace,
                "hook": h,
                "extras": {**ex, **se(s.trace_stderr, s.trace_stderr_probes, s.trace_stderr_text)},
            },
        ]
    return GeometryReport.from_rows(rows, model=model, seed=result.seed, **dict(result.provenance))


@register_metric(
    "agop", needs="gradients", description="AGOP at hooks: AOFE, AOFE ratio, trace (arXiv 2605.27989)", options_of=agop
)
def agop_metric(model, tokens, *, hooks=None, **options) -> GeometryReport:
    """AGOP at hooks (default every resid_pre): agop.aofe, agop.aofe_ratio, agop.trace (the d × d
    matrices are not kept: ``keep_matrices=False`` unless asked)."""
    options.setdefault("keep_matrices", False)
    return agop_report(agop(model, tokens, hooks=hooks, **options), model)


@register_metric(
    "wtw_aofe", needs="weights", description="AOFE ratio of W_EᵀW_E (d_model × d_model; W_U W_Uᵀ with matrix='W_U')"
)
def wtw_aofe_metric(model, tokens=None, *, hooks=None, matrix: str = "W_E") -> GeometryReport:
    """AOFE ratio of W_EᵀW_E / d_vocab (d_model × d_model; W_E is d_vocab × d_model), or of
    W_U W_Uᵀ / d_vocab with ``matrix="W_U"``: row wtw.aofe_ratio, ``extras["matrix"]`` says which."""
    if matrix not in ("W_E", "W_U"):
        raise InputError(f"matrix must be 'W_E' or 'W_U', got {matrix!r}")
    W = capture.weight(model, matrix)
    W = W.T if matrix == "W_U" else W
    a = wtw_aofe(W)
    return GeometryReport.from_rows(
        [
            {
                "metric": "wtw.aofe_ratio",
                "value": float(a.ratio),
                "extras": {"aofe": float(a.aofe), "matrix": matrix, "stderr": 0.0, "stderr_method": "exact"},
            }
        ],
        model=model,
    )


@register_metric("depth_width", needs="weights", description="R_D/W = n_layers/d_model vs the efficient interval")
def depth_width_metric(model, tokens=None, *, hooks=None) -> GeometryReport:
    """R_D/W and whether it lies in [0.023, 0.047]: row depth_width.ratio."""
    r = depth_width_ratio(model)
    return GeometryReport.from_rows(
        [
            {
                "metric": "depth_width.ratio",
                "value": r,
                "extras": {
                    "in_interval": in_efficient_interval(r),
                    "interval": list(EFFICIENT_INTERVAL),
                    "stderr": 0.0,
                    "stderr_method": "exact",
                },
            }
        ],
        model=model,
    )


@register_metric(
    "nfa", needs="gradients", description="NFA: corr(W_in W_inᵀ, AGOP at the MLP input) per layer", options_of=nfa
)
def nfa_metric(model, tokens, *, hooks=None, **options) -> GeometryReport:
    """Per layer: nfa.corr (vs AGOP) and nfa.corr_sqrt (vs AGOP^(1/2)) at blocks.{l}.ln2.hook_normalized."""
    if hooks is not None:
        raise InputError("nfa chooses its own hooks (blocks.{l}.ln2.hook_normalized); pass layers=[...] instead")
    res = nfa(model, tokens, **options)
    rows = []
    for h, c in res.items():
        se = {"stderr_method": c.stderr_method}
        rows += [
            {
                "metric": "nfa.corr",
                "value": c.pearson,
                "hook": h,
                "extras": {"n_pairs": c.n_pairs, "power": 1.0, "stderr": c.pearson_stderr, **se},
            },
            {
                "metric": "nfa.corr_sqrt",
                "value": c.pearson_sqrt,
                "hook": h,
                "extras": {"n_pairs": c.n_pairs, "power": 0.5, "stderr": c.pearson_sqrt_stderr, **se},
            },
        ]
    return GeometryReport.from_rows(rows, model=model)


_AGOP = (
    "n_probes",
    "space",
    "exact",
    "n_positions",
    "rel_stderr",
    "aofe_debiased",
    "ratio_debiased",
    "stderr",
    "stderr_method",
    "n_text_groups",
)
_AGOP_OPTIONAL = ("stderr_probes", "stderr_text", "stderr_note")  # probe-estimated rows; the note where NaN
_SE = ("stderr", "stderr_method")

register_family(
    FamilySpec(
        "interaction",
        title="Interaction",
        paper="Sun, Yang, Zhang, Du, arXiv 2605.27989",
        metrics=("agop", "wtw_aofe", "depth_width", "nfa"),
        rows=(
            RowSpec(
                "agop.aofe",
                per="hook",
                by="agop",
                extras=_AGOP + ("aofe_plugin", "estimator"),
                optional=_AGOP_OPTIONAL,
                description="AOFE of the AGOP (bias-corrected with probes, exact otherwise)",
            ),
            RowSpec(
                "agop.aofe_ratio",
                per="hook",
                by="agop",
                extras=_AGOP + ("ratio_plugin", "estimator"),
                optional=_AGOP_OPTIONAL,
                description="AOFE ratio (bias-corrected with probes, exact otherwise)",
            ),
            RowSpec(
                "agop.trace",
                per="hook",
                by="agop",
                extras=_AGOP,
                optional=_AGOP_OPTIONAL,
                description="trace of the AGOP",
            ),
            RowSpec(
                "wtw.aofe_ratio",
                per="model",
                by="wtw_aofe",
                extras=("aofe", "matrix") + _SE,
                description="AOFE ratio of W_EᵀW_E (d_model × d_model; W_U W_Uᵀ if extras matrix = W_U)",
            ),
            RowSpec(
                "depth_width.ratio",
                per="model",
                by="depth_width",
                extras=("in_interval", "interval") + _SE,
                description="R_D/W = n_layers / d_model",
            ),
            RowSpec(
                "nfa.corr",
                per="hook",
                by="nfa",
                extras=("n_pairs", "power") + _SE,
                description="corr(W_in W_inᵀ, AGOP) at the MLP input",
            ),
            RowSpec(
                "nfa.corr_sqrt",
                per="hook",
                by="nfa",
                extras=("n_pairs", "power") + _SE,
                description="corr(W_in W_inᵀ, AGOP^(1/2)) at the MLP input",
            ),
        ),
        figures=(
            FigureSpec(
                "aofe_ratio",
                "tl_geometry.families.interaction.figures:plot_aofe",
                "AGOP AOFE ratio by layer",
                rows=("agop.aofe_ratio", "depth_width.ratio"),
            ),
        ),
        read="tl_geometry.families.interaction.reading:read_interaction",
        checks="tl_geometry.families.interaction.checks",
        command="tl_geometry.families.interaction.cli",
        report_options={"agop": {"n_probes": 16}, "nfa": {"n_probes": 8}},
        memory="tl_geometry.families.interaction.memory:report_working_set_bytes",
        fast_options={"agop": {"n_probes": 4}, "nfa": {"n_probes": 2}},
        # NFA: no reading, figure or published language-model value to set it against (the authors
        # check it on their toy model only), its correlations at report-sized probe counts are
        # attenuated by probe noise, and it costs a second AGOP pass at every layer.
        not_in_default_report={
            "nfa": "no reading or figure, no published value to compare with, probe-noise-attenuated at report "
            "probe counts, and a second AGOP pass per layer; run it with --metrics ... nfa or `tl-geometry agop --nfa`"
        },
        order=40,
    )
)
