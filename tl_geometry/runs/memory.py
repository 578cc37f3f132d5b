"""A report's peak memory, estimated from the model's shape before anything loads.

[`estimate`][tl_geometry.runs.memory.estimate] takes a [`tl_geometry.models.ModelShape`][tl_geometry.models.ModelShape]
(what [`tl_geometry.models.peek`][tl_geometry.models.peek] reads from a zoo model's or a local path's files, or
[`shape_of_model`][tl_geometry.runs.memory.shape_of_model] from a model already built) and the text batch, and returns a
[`MemoryEstimate`][tl_geometry.runs.memory.MemoryEstimate]: the larger of the load's peak and the loaded model plus
the report's working set, plus the process. ``tl-geometry report`` refuses a model whose estimate
exceeds the available memory or ``--max-memory-gb`` (``--ignore-memory-check`` runs it anyway)
and records the estimate, and the peak it measured, in provenance (``memory``).

Every factor is our estimate, stated where it is defined; the working set is that of the most
demanding metric of the default report, AGOP's gradient pass: the autograd graph of one batch
(per token and layer: the residual-stream tensors, the MLP's, the attention pattern; and the
logits with their softmax and gradient) plus its d × d sums per hook, beside the captured
activations the other metrics read.
"""

from __future__ import annotations

import resource
import sys
from dataclasses import asdict, dataclass
from typing import Any

from tl_geometry.models.shape import PROCESS_BYTES, ModelShape

HELD_COPIES = 1.15
"""Memory the loaded model holds, in float32 copies of its TransformerLens weights (the parameters,
the tokenizer, TL's buffers): SmolLM2-135M holds 1.15–1.16 GiB after ``tg.models.load`` beside the
0.47 GiB process, 1.13 copies (benchmarks/bench_memory.py, 2026-12-04)."""
GRAPH_FLOATS_PER_D = 16
"""Autograd graph of one forward pass: float32 values TransformerLens keeps per token and layer per
unit of d_model (the block's input and two norms, q, k and v with k/v repeated over the grouped
heads, their rotary intermediates, z, the attention and MLP outputs, the residual stream; our
count)."""
GRAPH_FLOATS_PER_MLP = 5
"""The same per unit of d_mlp (the input and gate projections, the activation, their product, its input)."""
GRAPH_FLOATS_PER_HEAD_POSITION = 3
"""The same per head and key position (the scores, the masked scores, the pattern)."""
LOGIT_COPIES = 4
"""Logits the gradient pass keeps per token, in units of d_vocab: the logits, their log-softmax,
its gradient and the readout probes' projection (our count)."""
AGOP_BATCH = 8
"""Sequences in one gradient pass of AGOP (``agop(batch_size=8)``, the report's default; a report's
own ``batch_size`` for agop is used when it sets one)."""
AGOP_GROUPS = 8
"""d × d float32 sums AGOP keeps per hook (its probe groups)."""
WORKING_MARGIN = 1.2
"""The working set × this: what the allocator keeps besides the live tensors (after AGOP's pass the
process still held 4.4 of its 5.25 GiB peak). Set from the one measurement of docs/reliability.md
(SmolLM2-135M, 2026-12-04); the other factors are counts."""


@dataclass(frozen=True)
class MemoryEstimate:
    """A report's estimated peak memory, in bytes, and its parts (see [`estimate`][tl_geometry.runs.memory.estimate]).

    Attributes:
        peak_bytes: ``process_bytes + max(load_bytes, held_bytes + working_bytes)``.
        process_bytes: the Python process with its libraries (``PROCESS_BYTES``).
        load_bytes: the load's own peak beyond the process (``ModelShape.memory_bytes``).
        held_bytes: the loaded model (``HELD_COPIES`` × its weights).
        working_bytes: the report's working set (AGOP's graph and sums, the captured activations).
        weights_bytes: the TransformerLens model's float32 weights.
        n_params: its parameters.
        source: where the shape was read (``gguf``, ``hf-dir``, ``model``).
        file_params: the parameters the files hold (a tied embedding once).
    """

    peak_bytes: int
    process_bytes: int
    load_bytes: int
    held_bytes: int
    working_bytes: int
    weights_bytes: int
    n_params: int
    source: str
    file_params: int = 0

    @property
    def peak_gib(self) -> float:
        return self.peak_bytes / 2**30

    def provenance(self) -> dict[str, Any]:
        """The estimate as provenance records it (GiB, 3 decimals, and the parameter count)."""
        d = asdict(self)
        out: dict[str, Any] = {
            k.replace("_bytes", "_gib"): round(v / 2**30, 3) for k, v in d.items() if k.endswith("_bytes")
        }
        out.update(n_params=self.n_params, source=self.source, basis="tl_geometry.runs.memory.estimate")
        return out


def estimate(
    shape: ModelShape,
    *,
    n_seqs: int = 8,
    seq_len: int = 128,
    metrics: Any = None,
    agop_batch: int | None = None,
    dtype_bytes: int = 4,
) -> MemoryEstimate:
    """The peak memory of a report on a model of this shape over ``n_seqs`` × ``seq_len`` tokens.

    * load: ``shape.memory_bytes()`` less the process (``LOAD_COPIES`` × the weights and the masks);
    * held: ``HELD_COPIES`` × the weights;
    * working, × ``WORKING_MARGIN``: when ``agop`` runs (``metrics`` None: the default report), its
      gradient pass over ``min(n_seqs, agop_batch)`` sequences — per token and layer
      ``GRAPH_FLOATS_PER_D`` × d_model + ``GRAPH_FLOATS_PER_MLP`` × d_mlp +
      ``GRAPH_FLOATS_PER_HEAD_POSITION`` × heads × seq_len floats (heads taken as d_model / 64),
      plus ``LOGIT_COPIES`` × d_vocab per token — and its ``AGOP_GROUPS`` d × d sums on each of
      the n_layers + 1 hooks; without agop, one batch's logits; always the captured residual stream
      (n_layers + 1 hooks × tokens × d_model, float32 and a float64 copy).

    A shape without d_mlp takes 4 × d_model, without d_vocab 50,257 (GPT-2's). Our estimate:
    checked against measured peaks in docs/reliability.md (Memory).
    """
    weights = shape.tl_params * dtype_bytes
    d = shape.d_model or 768
    L = shape.n_layers or 12
    m = shape.d_mlp or 4 * d
    V = shape.d_vocab or 50257
    heads = max(1, d // 64)
    tokens = n_seqs * seq_len
    batch_tokens = min(n_seqs, agop_batch or AGOP_BATCH) * seq_len
    captured = (4 + 8) * (L + 1) * tokens * d
    if metrics is None or "agop" in metrics:
        per_token_layer = (
            GRAPH_FLOATS_PER_D * d + GRAPH_FLOATS_PER_MLP * m + GRAPH_FLOATS_PER_HEAD_POSITION * heads * seq_len
        )
        graph = 4 * batch_tokens * (L * per_token_layer + LOGIT_COPIES * V)
        sums = 4 * (L + 1) * AGOP_GROUPS * d * d
    else:
        graph, sums = 4 * min(n_seqs, AGOP_BATCH) * seq_len * V, 0
    working = WORKING_MARGIN * (graph + sums + captured)
    load = max(0, shape.memory_bytes(dtype_bytes=dtype_bytes) - PROCESS_BYTES)
    held = int(HELD_COPIES * weights)
    peak = PROCESS_BYTES + max(load, held + working)
    return MemoryEstimate(
        peak_bytes=int(peak),
        process_bytes=PROCESS_BYTES,
        load_bytes=int(load),
        held_bytes=held,
        working_bytes=int(working),
        weights_bytes=int(weights),
        n_params=shape.tl_params,
        source=shape.source,
        file_params=shape.n_params,
    )


def shape_of_model(model: Any) -> ModelShape:
    """The [`ModelShape`][tl_geometry.models.ModelShape] of a model already built (its parameters counted, its config read)."""
    cfg = model.cfg
    n = sum(p.numel() for p in model.parameters())
    return ModelShape(
        getattr(cfg, "n_layers", None),
        getattr(cfg, "d_model", None),
        int(n),
        int(getattr(cfg, "n_ctx", 0) or 0),
        "model",
        0,
        getattr(cfg, "d_vocab", None),
        getattr(cfg, "d_mlp", None),
    )


def peak_rss_bytes() -> int | None:
    """This process's peak resident memory so far (``ru_maxrss``; None where unavailable)."""
    try:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (OSError, ValueError):  # pragma: no cover
        return None
    return int(peak if sys.platform == "darwin" else peak * 1024)  # Linux: KiB; macOS: bytes
