"""AGOP's working set from the model's shape: the batch of the gradient pass and the hook chunks.

[`agop`][tl_geometry.families.interaction.agop] (input space, with probes) holds two large things
at once besides the model:

* the **autograd graph** of one batch, from the unembedding's input down to the lowest hook of
  the pass: [`agop_graph_bytes`][tl_geometry.families.interaction.memory.agop_graph_bytes] per
  sequence, an upper bound from the shape (below);
* the **accumulators** of the hooks of one chunk: ``(n_groups + text_groups) · d(d+1)/2 · 4``
  bytes per hook (packed upper triangles of the symmetric sums) ([`tl_geometry.metrics.interaction.agop_state_bytes`][tl_geometry.metrics.interaction.agop_state_bytes]).

[`agop_plan`][tl_geometry.families.interaction.memory.agop_plan] sizes both: the batch so that its
graph fits ``memory_mb`` (at least one sequence), and the hooks per chunk so that their sums fit
``state_mb`` (at least one hook). Each chunk runs every forward and backward pass again with the
same probes (the same seed, the same draws), so the numbers do not depend on the chunking; the
cost is one more pass over the text per extra chunk (its backward reaches only down to the
chunk's lowest hook). [`agop_working_set_bytes`][tl_geometry.families.interaction.memory.agop_working_set_bytes]
is the peak of that plan, for a memory estimate made before the model is loaded.

The graph bound (our choice, an upper bound measured on TransformerLens models, not a paper's):
the weight copies held (TransformerLens multiplies by fresh ``W.T.contiguous()`` / rearranged
attention weights, which autograd would keep: about the blocks' weights once per pass, whatever
the batch; the probe passes save them by reference instead,
[`tl_geometry.capture.saved_weights`][tl_geometry.capture.saved_weights], so one matrix's copy at a
time), plus per token ``n_layers · (16·d_model + 8·d_mlp + 3·n_heads·seq_len) +
d_vocab`` float32 numbers, plus 4 MiB. The passes run with the parameters frozen (nothing saved for
parameter gradients), the graph cut below the lowest hook and after the unembedding's input
(no logits graph: [`tl_geometry.capture.grad_capture`][tl_geometry.capture.backward.grad_capture]).
The per-token part held by tiny GPT-2- and Llama-shaped models (bytes saved for backward and
still alive after the forward, counted with ``torch.autograd.graph.saved_tensors_hooks``,
parameters excluded) is at most 0.6× of its bound; ``benchmarks/check_agop_memory.py`` measures
SmolLM2 (``tests/unit/families/interaction/test_agop_memory.py`` checks the bound on two shapes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tl_geometry.base import _checks
from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError
from tl_geometry.metrics.interaction import agop_compute_bytes, agop_state_bytes

__all__ = [
    "AGOPPlan",
    "BATCH_PROBES",
    "GRAPH_FLOATS",
    "PASS_ROWS",
    "agop_graph_bytes",
    "agop_plan",
    "agop_plan_for",
    "agop_working_set_bytes",
    "hook_chunks",
    "report_working_set_bytes",
    "hook_width",
    "weight_copy_floats",
]

GRAPH_FLOATS: dict[str, float] = {"d_model": 16, "d_mlp": 8, "attention": 3, "d_vocab": 1, "fixed_bytes": 4 * 2**20}
"""The graph bound's coefficients: float32 numbers per token and layer per d_model, per d_mlp and
per head × key position; per token for the vocabulary (the logits, held beside the graph); bytes
per pass."""

MiB = 2**20
BATCH_PROBES = False
"""Whether [`agop`][tl_geometry.families.interaction.agop] takes several readout probes per backward
pass (the plan's ``probe_batch``; False: one per pass). Off by default, our choice from two models
measured on 2026-12-07 (2 cores, 8 × 128 tokens): SmolLM2-135M, 16 probes as 6, 5, 5 per pass,
1.19–1.21× faster at +0.03 GiB; Gemma-3-270M, 4 probes in one pass, 1.17× *slower* and +1.2 GiB
(its backward does not batch well under vmap). Set it to True where a model gains (the numbers are
the same to rounding either way)."""
PASS_ROWS = 1024
"""Our choice: probes are batched into one backward pass only until the pass holds this many token
rows (batch · seq_len · probes): the gain comes from larger products, and a pass of 8 × 128 tokens
has them already (one 128-token SmolLM2-135M sequence: 8 probes per pass 1.3–1.4× faster than 1)."""


def weight_copy_floats(
    *, n_layers: int, d_model: int, d_mlp: int, n_heads: int, d_head: int, n_kv_heads: int, gated_mlp: bool
) -> int:
    """Float32 numbers of the weight copies one forward saves for backward: TransformerLens
    multiplies by ``W.T.contiguous()`` (MLP) and rearranged Q/K/V/O weights (attention), fresh copies
    that autograd keeps, ``n_layers · (d_model · d_head · (2·n_heads + 2·n_kv_heads) + m · d_model · d_mlp)``
    with m = 3 matrices in a gated MLP, 2 otherwise: about the blocks' weights, once per pass
    whatever the batch."""
    m = 3 if gated_mlp else 2
    return n_layers * (d_model * d_head * (2 * n_heads + 2 * n_kv_heads) + m * d_model * d_mlp)


def agop_graph_bytes(
    *,
    n_layers: int,
    d_model: int,
    d_mlp: int,
    n_heads: int,
    seq_len: int,
    d_vocab: int,
    batch: int = 1,
    d_head: int | None = None,
    n_kv_heads: int | None = None,
    gated_mlp: bool = True,
    weights_by_reference: bool | None = None,
) -> int:
    """Upper bound on the memory of one gradient pass over ``batch`` sequences of ``seq_len`` tokens.

    ``4 · (W + batch · seq_len · (n_layers · (16·d_model + 8·d_mlp + 3·n_heads·seq_len) + d_vocab)) + 4 MiB``
    with W the weight copies held: with ``weights_by_reference`` (None: the probe passes' own
    setting, [`SAVE_WEIGHTS_BY_REFERENCE`][tl_geometry.capture.backward.SAVE_WEIGHTS_BY_REFERENCE],
    on by default) one weight matrix, d_model · max(d_mlp, n_heads · d_head), since the per-forward
    copies are saved by reference ([`tl_geometry.capture.saved_weights`][tl_geometry.capture.saved_weights]);
    without it every copy the forward saves
    ([`weight_copy_floats`][tl_geometry.families.interaction.memory.weight_copy_floats]). d_head
    defaults to d_model / n_heads, n_kv_heads to n_heads; coefficients in
    [`GRAPH_FLOATS`][tl_geometry.families.interaction.memory.GRAPH_FLOATS], see the module.

    Examples:
        >>> shape = dict(n_layers=30, d_model=576, d_mlp=1536, n_heads=9, n_kv_heads=3, seq_len=128, d_vocab=49152)
        >>> round(agop_graph_bytes(**shape) / 2**20)  # SmolLM2-135M, one sequence
        397
        >>> round(agop_graph_bytes(**shape, weights_by_reference=False) / 2**20)  # every copy kept
        799
    """
    if weights_by_reference is None:
        from tl_geometry.capture import backward

        weights_by_reference = backward.SAVE_WEIGHTS_BY_REFERENCE
    n_layers, d_model, d_mlp, n_heads, seq_len, d_vocab, batch = (
        _checks.integer(v, k, lo=1)
        for k, v in (
            ("n_layers", n_layers),
            ("d_model", d_model),
            ("d_mlp", d_mlp),
            ("n_heads", n_heads),
            ("seq_len", seq_len),
            ("d_vocab", d_vocab),
            ("batch", batch),
        )
    )
    d_head = d_model // n_heads if d_head is None else _checks.integer(d_head, "d_head", lo=1)
    n_kv = n_heads if n_kv_heads is None else _checks.integer(n_kv_heads, "n_kv_heads", lo=1)
    c = GRAPH_FLOATS
    per_token = n_layers * (c["d_model"] * d_model + c["d_mlp"] * d_mlp + c["attention"] * n_heads * seq_len)
    per_token += c["d_vocab"] * d_vocab
    if weights_by_reference:  # one weight's copy at a time (rebuilt at backward, or TL's own in the forward)
        W = d_model * max(d_mlp, n_heads * d_head)
    else:
        W = weight_copy_floats(
            n_layers=n_layers,
            d_model=d_model,
            d_mlp=d_mlp,
            n_heads=n_heads,
            d_head=d_head,
            n_kv_heads=n_kv,
            gated_mlp=bool(gated_mlp),
        )
    return int(4 * (W + batch * seq_len * per_token) + c["fixed_bytes"])


@dataclass(frozen=True)
class AGOPPlan(Tabular):
    """How [`agop`][tl_geometry.families.interaction.agop] splits its work under a memory budget.

    Attributes:
        batch_size: sequences per gradient pass (recorded as ``agop_batch_size``).
        hooks_per_chunk: hooks accumulated in one pass over the text.
        n_chunks: passes over the text (``ceil(n_hooks / hooks_per_chunk)``).
        graph_bytes: the graph bound of one batch.
        state_bytes: the accumulators of one chunk.
        compute_bytes: the temporaries of computing one hook's statistics.
        working_set_bytes: graph + state + compute: AGOP's peak beyond the model.
        memory_mb, state_mb: the budgets asked for.
        over_budget: which minimum (one sequence, one hook) exceeded its budget, "" if none.
        probe_batch: readout probes per backward pass (recorded as ``agop_probe_batch``; 1 when
            the plan was made without ``n_probes``).
        probe_bytes: the bound on what one more probe in a pass adds.
    """

    batch_size: int
    hooks_per_chunk: int
    n_chunks: int
    graph_bytes: int
    state_bytes: int
    compute_bytes: int
    working_set_bytes: int
    memory_mb: float
    state_mb: float
    over_budget: str = ""
    probe_batch: int = 1
    probe_bytes: int = 0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def hook_width(cfg: Any, hook: str) -> int:
    """The last dimension of a (batch, pos, ·) hook by its name: d_mlp for the MLP's hidden hooks
    (``mlp.hook_pre``, ``mlp.hook_post``, ``mlp.hook_pre_linear``), d_model otherwise."""
    if any(k in hook for k in ("mlp.hook_pre", "mlp.hook_post")):
        return int(getattr(cfg, "d_mlp", None) or 4 * cfg.d_model)
    return int(cfg.d_model)


def hook_chunks(
    widths: list[int], state_mb: float, *, n_groups: int = 8, text_groups: int | None = 8
) -> list[list[int]]:
    """Consecutive runs of hook indices whose accumulators (``agop_state_bytes`` of each width) fit
    ``state_mb``; a hook larger than the budget gets a run of its own. Hooks are kept in their order
    (a run of late hooks needs the graph of the layers above its lowest hook only)."""
    runs: list[list[int]] = []
    used = 0.0
    for i, w in enumerate(widths):
        b = agop_state_bytes(w, 1, n_groups=n_groups, text_groups=text_groups)
        if runs and used + b <= state_mb * MiB:
            runs[-1].append(i)
            used += b
        else:
            runs.append([i])
            used = b
    return runs


def agop_plan(
    *,
    d_model: int,
    n_hooks: int,
    n_layers: int,
    d_mlp: int,
    n_heads: int,
    seq_len: int,
    d_vocab: int,
    n_seqs: int | None = None,
    n_groups: int = 8,
    text_groups: int | None = 8,
    memory_mb: float = 512,
    state_mb: float = 1024,
    batch_size: int | None = None,
    d_head: int | None = None,
    n_kv_heads: int | None = None,
    gated_mlp: bool = True,
    n_probes: int | None = None,
) -> AGOPPlan:
    """The batch and the hook chunks of an AGOP run from the model's shape and the two budgets.

    batch_size = the most sequences (≤ ``n_seqs``) whose graph bound
    ([`agop_graph_bytes`][tl_geometry.families.interaction.memory.agop_graph_bytes]) fits
    ``memory_mb``, at least 1 (or ``batch_size`` when given); hooks_per_chunk = the most hooks whose
    accumulators (``agop_state_bytes``) fit ``state_mb``, at least 1; probe_batch (with
    ``n_probes``) = the most readout probes per backward pass (≤ ``n_probes``, at least 1) whose
    extra memory fits what the batch's graph bound leaves of ``memory_mb``, and whose token rows
    (batch · seq_len · probes) do not exceed [`PASS_ROWS`][tl_geometry.families.interaction.memory.PASS_ROWS]. One more probe in a
    pass holds one more gradient at each hook of the chunk and of one layer's intermediates:
    ``probe_bytes = 4 · batch · seq_len · (hooks_per_chunk · d_model + 16·d_model + 8·d_mlp +
    3·n_heads·seq_len)`` (the graph bound's per-layer coefficients; measured on SmolLM2-135M, one
    128-token sequence, 30 hooks: 20 MiB per probe against 21 MiB bound); the passes are made of
    even size (16 probes at most 6 per pass: 6, 5, 5 → 6).

    Raises:
        InputError: a shape or budget that is not a positive number.
    """
    d_model = _checks.integer(d_model, "d_model", lo=1)
    n_hooks = _checks.integer(n_hooks, "n_hooks", lo=1)
    for name, v in (("memory_mb", memory_mb), ("state_mb", state_mb)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise InputError(f"{name} must be a positive number of MiB, got {v!r}")
    shape: dict[str, Any] = dict(
        n_layers=n_layers,
        d_model=d_model,
        d_mlp=d_mlp,
        n_heads=n_heads,
        seq_len=seq_len,
        d_vocab=d_vocab,
        d_head=d_head,
        n_kv_heads=n_kv_heads,
        gated_mlp=gated_mlp,
    )
    one = agop_graph_bytes(**shape)
    over = []
    if batch_size is None:
        per_seq = agop_graph_bytes(**shape, batch=2) - one
        fit = int((memory_mb * MiB - (one - per_seq)) // per_seq)
        if fit < 1:
            over.append(f"one sequence's graph ({one / MiB:.0f} MiB) exceeds memory_mb={memory_mb:g}")
        batch = max(1, fit)
        if n_seqs is not None:
            batch = max(1, min(batch, int(n_seqs)))
    else:
        batch = _checks.integer(batch_size, "batch_size", lo=1)
    per_hook = agop_state_bytes(d_model, 1, n_groups=n_groups, text_groups=text_groups)
    per_chunk = int(state_mb * MiB // per_hook)
    if per_chunk < 1:
        over.append(f"one hook's sums ({per_hook / MiB:.0f} MiB) exceed state_mb={state_mb:g}")
    per_chunk = max(1, min(per_chunk, n_hooks))
    n_chunks = math.ceil(n_hooks / per_chunk)
    graph = agop_graph_bytes(**shape, batch=batch)
    state = per_hook * per_chunk
    comp = agop_compute_bytes(d_model)
    c = GRAPH_FLOATS
    n_heads_i = _checks.integer(n_heads, "n_heads", lo=1)
    probe_bytes = (
        4
        * batch
        * int(seq_len)
        * (
            per_chunk * d_model
            + int(c["d_model"] * d_model + c["d_mlp"] * int(d_mlp) + c["attention"] * n_heads_i * int(seq_len))
        )
    )
    probe_batch = 1
    if n_probes is not None:
        n_probes = _checks.integer(n_probes, "n_probes", lo=1)
        spare = memory_mb * MiB - graph
        rows = max(1, math.ceil(PASS_ROWS / (batch * int(seq_len))))
        most = max(1, min(n_probes, rows, 1 + max(0, int(spare // probe_bytes))))
        probe_batch = math.ceil(n_probes / math.ceil(n_probes / most))  # passes of even size
    return AGOPPlan(
        batch_size=batch,
        hooks_per_chunk=per_chunk,
        n_chunks=n_chunks,
        graph_bytes=graph,
        state_bytes=state,
        compute_bytes=comp,
        working_set_bytes=graph + (probe_batch - 1) * probe_bytes + state + comp,
        memory_mb=float(memory_mb),
        state_mb=float(state_mb),
        over_budget="; ".join(over),
        probe_batch=probe_batch,
        probe_bytes=probe_bytes,
    )


def agop_working_set_bytes(d_model: int, n_hooks: int, **shape: Any) -> int:
    """AGOP's peak memory beyond the model, in bytes: ``agop_plan(...).working_set_bytes``.

    The graph of one batch + the accumulators of one hook chunk + one hook's compute temporaries
    ([`agop_plan`][tl_geometry.families.interaction.memory.agop_plan], whose keywords ``shape``
    takes: n_layers, d_mlp, n_heads, seq_len, d_vocab and the budgets), for an estimate made from
    the model's shape before anything is loaded (e.g. a report's up-front memory check).

    Examples:
        >>> shape = dict(n_layers=30, d_mlp=1536, n_heads=9, n_kv_heads=3, seq_len=128, d_vocab=49152)
        >>> round(agop_working_set_bytes(576, 30, **shape) / 2**20)  # SmolLM2-135M, report settings
        711
    """
    return agop_plan(d_model=d_model, n_hooks=n_hooks, **shape).working_set_bytes


def agop_plan_for(model: Any, tokens_shape: tuple[int, int], n_hooks: int, **budget: Any) -> AGOPPlan:
    """[`agop_plan`][tl_geometry.families.interaction.memory.agop_plan] from a model's ``cfg`` and the tokens' (batch, pos)."""
    cfg = model.cfg
    d_mlp = getattr(cfg, "d_mlp", None) or 4 * cfg.d_model
    return agop_plan(
        d_model=cfg.d_model,
        n_hooks=n_hooks,
        n_layers=cfg.n_layers,
        d_mlp=int(d_mlp),
        n_heads=int(getattr(cfg, "n_heads", 1) or 1),
        seq_len=int(tokens_shape[1]),
        d_vocab=int(cfg.d_vocab),
        n_seqs=int(tokens_shape[0]),
        d_head=int(getattr(cfg, "d_head", 0) or cfg.d_model // max(1, int(getattr(cfg, "n_heads", 1) or 1))),
        n_kv_heads=int(getattr(cfg, "n_key_value_heads", None) or getattr(cfg, "n_heads", 1) or 1),
        gated_mlp=bool(getattr(cfg, "gated_mlp", True)),
        **budget,
    )


def _shape_keywords(shape: Any, seq_len: int) -> dict[str, Any]:
    """``agop_plan``'s shape keywords from a [`tl_geometry.models.ModelShape`][tl_geometry.models.ModelShape] (read
    before the load): missing widths as the estimate states them (d_mlp 4·d_model, d_vocab
    50,257, heads d_q / 64, a gated MLP: the larger bound)."""
    d = int(shape.d_model or 768)
    d_q = int(getattr(shape, "d_q", None) or d)
    n_heads = int(getattr(shape, "n_heads", None) or max(1, d_q // 64))
    d_head = max(1, d_q // n_heads)
    d_kv = int(getattr(shape, "d_kv", None) or d_q)
    gated = getattr(shape, "gated_mlp", None)
    return dict(
        n_layers=int(shape.n_layers or 12),
        d_mlp=int(shape.d_mlp or 4 * d),
        n_heads=n_heads,
        seq_len=int(seq_len),
        d_vocab=int(shape.d_vocab or 50257),
        d_head=d_head,
        n_kv_heads=max(1, d_kv // d_head),
        gated_mlp=True if gated is None else bool(gated),
    )


def report_working_set_bytes(shape: Any, *, n_seqs: int, seq_len: int, options: Any) -> int:
    """The interaction family's memory declaration (``FamilySpec.memory``): the largest plan of
    the family's gradient metrics a report runs, from the model's shape before the load.

    * ``agop`` (input space with probes, the report's): [`agop_plan`][tl_geometry.families.interaction.memory.agop_plan]
      on every ``hook_resid_pre`` (n_layers hooks) with the run's ``memory_mb``, ``state_mb``,
      ``batch_size``, ``n_groups`` (default min(n_probes, 8)) and ``text_groups``;
    * ``nfa``: the same on the n_layers MLP inputs at its fixed ``batch_size`` (8), plus the
      matrices and probe-group replicates it keeps for every hook (``(n_groups + 1) · d²`` floats);
    * either: where the unembedding (4 · d_vocab · d_model bytes) is larger than the plan's graph,
      the graph's share is replaced by it: the passes lay ``W_U`` out as TransformerLens's copy and
      back ([`copies_as_views`][tl_geometry.capture.saved_weights.copies_as_views]), a moment with
      two W_U, the sums held and no graph (Gemma-3-270M: 640 MiB against a 425 MiB graph bound).

    ``options`` is ``{metric: options}`` for the metrics being run; a metric absent from it does
    not run. Our estimate: checked against measured peaks in docs/reliability.md (Memory).

    Examples:
        >>> from tl_geometry.models import ModelShape
        >>> smollm2 = ModelShape(30, 576, 134_515_008, 2048, "gguf", 28_311_552, 49152, 1536, d_q=576, d_kv=192, gated_mlp=True)
        >>> round(report_working_set_bytes(smollm2, n_seqs=8, seq_len=128, options={"agop": {"n_probes": 16}}) / 2**20)
        711
        >>> report_working_set_bytes(smollm2, n_seqs=8, seq_len=128, options={"pga": {}})
        0
    """
    d_model = int(shape.d_model or 768)
    kw = _shape_keywords(shape, seq_len)
    hooks = kw["n_layers"]
    # the unembedding laid out as TransformerLens's copy for the passes and back
    # (`capture.saved_weights.copies_as_views`): a second W_U for a moment, with the sums held but
    # no graph (Gemma-3-270M: 0.625 GiB, larger than one sequence's graph)
    unembed = 4 * kw["d_vocab"] * d_model

    def with_layout(plan: AGOPPlan) -> int:
        return plan.working_set_bytes + max(0, unembed - plan.graph_bytes)

    out = 0
    if "agop" in options:
        o = dict(options["agop"] or {})
        if o.get("space", "input") == "input" and not o.get("exact", False):
            n_probes = int(o.get("n_probes", 64))
            tg = o.get("text_groups", 8)
            plan = agop_plan(
                d_model=d_model,
                n_hooks=len(o["hooks"]) if o.get("hooks") else hooks,
                n_seqs=n_seqs,
                n_groups=int(o.get("n_groups") or min(n_probes, 8)),
                text_groups=None if tg is None or n_seqs < 2 else min(int(tg), n_seqs),
                memory_mb=o.get("memory_mb", 512),
                state_mb=o.get("state_mb", 1024),
                batch_size=o.get("batch_size"),
                n_probes=n_probes if BATCH_PROBES else None,
                **kw,
            )
        else:  # exact, output or loss space: a fixed batch (8), every hook's sums
            plan = agop_plan(
                d_model=d_model,
                n_hooks=hooks,
                n_seqs=n_seqs,
                text_groups=None,
                batch_size=min(n_seqs, int(o.get("batch_size") or 8)),
                state_mb=2**30,
                **kw,
            )
        out = max(out, with_layout(plan))
    if "nfa" in options:
        o = dict(options["nfa"] or {})
        n_probes = int(o.get("n_probes", 64))
        n_hooks = len(o["layers"]) if o.get("layers") else hooks
        groups = min(n_probes, 8)
        plan = agop_plan(
            d_model=d_model,
            n_hooks=n_hooks,
            n_seqs=n_seqs,
            n_groups=groups,
            text_groups=None if n_seqs < 2 else min(8, n_seqs),
            batch_size=min(n_seqs, int(o.get("batch_size", 8))),
            **kw,
        )
        kept = 4 * n_hooks * (groups + 1) * d_model * d_model  # every matrix and its group replicates
        out = max(out, with_layout(plan) + kept)
    return int(out)
