"""A report's peak memory, estimated from the model's shape before anything loads.

[`estimate`][tl_geometry.runs.memory.estimate] takes a [`tl_geometry.models.ModelShape`][tl_geometry.models.ModelShape]
(what [`tl_geometry.models.peek`][tl_geometry.models.peek] reads from a zoo model's or a local path's files, or
[`shape_of_model`][tl_geometry.runs.memory.shape_of_model] from a model already built) and the text batch, and returns a
[`MemoryEstimate`][tl_geometry.runs.memory.MemoryEstimate]: the larger of the load's peak and the loaded model plus
the report's working set, plus the process. ``tl-geometry report`` refuses a model whose estimate
exceeds the available memory or ``--max-memory-gb`` (``--ignore-memory-check`` runs it anyway)
and records the estimate, and the peak it measured, in provenance (``memory``).

Every factor is our estimate, stated where it is defined. The working set is the largest that a
family being run declares (``FamilySpec.memory``; the metrics run one after another): AGOP's
gradient pass (the interaction family,
[`report_working_set_bytes`][tl_geometry.families.interaction.memory.report_working_set_bytes]:
the autograd graph of one batch under ``memory_mb`` plus the d × d sums of one hook chunk under
``state_mb``), or one batch's logits, beside the captured activations the other metrics read.
This module asks the registry, never a family's module.
"""

from __future__ import annotations

import resource
import sys
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from tl_geometry.models.shape import PROCESS_BYTES, ModelShape

HELD_COPIES = 1.15
"""Memory the loaded model holds, in float32 copies of its TransformerLens weights (the parameters,
the tokenizer, TL's buffers): SmolLM2-135M holds 1.15–1.16 GiB after ``tg.models.load`` beside the
0.47 GiB process, 1.13 copies (benchmarks/bench_memory.py, 2026-12-04)."""
LOGITS_BATCH = 8
"""Sequences per batch of the report's shared forward pass (its logits: the working set of a run
whose families declare none)."""
WORKING_MARGIN = 1.2
"""The working set × this: what the allocator keeps besides the live tensors (after AGOP's pass the
process still held 4.4 of its 5.25 GiB peak). Set from one measurement of docs/reliability.md
(SmolLM2-135M, 2026-12-04); the other factors are counts or the families' own bounds."""


@dataclass(frozen=True)
class MemoryEstimate:
    """A report's estimated peak memory, in bytes, and its parts (see [`estimate`][tl_geometry.runs.memory.estimate]).

    Attributes:
        peak_bytes: ``process_bytes + max(load_bytes, held_bytes + working_bytes)``.
        process_bytes: the Python process with its libraries (``PROCESS_BYTES``).
        load_bytes: the load's own peak beyond the process (``ModelShape.memory_bytes``); 0 for a
            model already built (source ``model``).
        held_bytes: the loaded model (``HELD_COPIES`` × its weights).
        working_bytes: the report's working set (the largest family's, the captured activations).
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
    families: tuple[tuple[str, int], ...] = ()
    """``(family, bytes)`` each family being run declared (``FamilySpec.memory``), before the margin."""

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
        if self.families:
            out["families_gib"] = {name: round(b / 2**30, 3) for name, b in self.families}
        return out


def family_working_sets(
    shape: ModelShape,
    *,
    n_seqs: int = 8,
    seq_len: int = 128,
    metrics: Any = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, int]:
    """``{family: bytes}``: the working set each family with a metric in the run declares
    (``FamilySpec.memory``, called with ``{metric: options}`` for its metrics being run).

    ``metrics`` None: the default report's metrics; ``options`` None: the families' report
    options (a request's merged options are passed as they are). A declaration that fails is
    left out with a warning naming the family (the estimate is then low by its share).
    """
    from tl_geometry import registry
    from tl_geometry.runs.request import default_metrics, report_options

    names = set(default_metrics() if metrics is None else metrics)
    opts = report_options() if options is None else options
    out: dict[str, int] = {}
    for fam in registry.families():
        run = {m: dict(opts.get(m) or {}) for m in fam.metrics if m in names}
        if fam.memory is None or not run:
            continue
        declared = fam.memory
        assert callable(declared)  # a "module:function" string became a Lazy at registration
        try:
            b = declared(shape, n_seqs=n_seqs, seq_len=seq_len, options=run)
            if isinstance(b, bool) or not isinstance(b, (int, float)) or not b >= 0:
                raise TypeError(f"returned {b!r}, not a number of bytes >= 0")
        except Exception as e:  # noqa: BLE001 - a plugin's estimate must not stop the report
            warnings.warn(
                f"family {fam.name!r}: its memory declaration ({getattr(fam.memory, '__qualname__', fam.memory)}) failed ({type(e).__name__}: {e}); "
                "the memory estimate leaves its working set out",
                RuntimeWarning,
                stacklevel=2,
            )
            continue
        out[fam.name] = int(b)
    return out


def estimate(
    shape: ModelShape,
    *,
    n_seqs: int = 8,
    seq_len: int = 128,
    metrics: Any = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    agop_batch: int | None = None,
    dtype_bytes: int = 4,
) -> MemoryEstimate:
    """The peak memory of a report on a model of this shape over ``n_seqs`` × ``seq_len`` tokens.

    * load: ``shape.memory_bytes()`` less the process (``LOAD_COPIES`` × the weights and the masks);
      0 for a model already built (``shape.source == "model"``, [`shape_of_model`][tl_geometry.runs.memory.shape_of_model]):
      its load is over, and what it left is the held model;
    * held: ``HELD_COPIES`` × the weights;
    * working, × ``WORKING_MARGIN``: the largest of the families' declared working sets
      ([`family_working_sets`][tl_geometry.runs.memory.family_working_sets]: AGOP's plan when agop
      runs) and one batch's logits (``LOGITS_BATCH`` sequences × d_vocab), plus the captured
      residual stream (n_layers + 1 hooks × tokens × d_model, float32 and a float64 copy).

    ``metrics`` None is the default report; ``options`` ``{metric: options}`` as the run has them
    (None: the families' report options); ``agop_batch`` sets agop's ``batch_size``. A shape
    without d_mlp takes 4 × d_model, without d_vocab 50,257 (GPT-2's). Our estimate: checked
    against measured peaks in docs/reliability.md (Memory).
    """
    weights = shape.tl_params * dtype_bytes
    d = shape.d_model or 768
    L = shape.n_layers or 12
    V = shape.d_vocab or 50257
    if agop_batch is not None:
        from tl_geometry.runs.request import report_options

        base = report_options() if options is None else options
        options = {**base, "agop": {**dict(base.get("agop") or {}), "batch_size": int(agop_batch)}}
    fams = family_working_sets(shape, n_seqs=n_seqs, seq_len=seq_len, metrics=metrics, options=options)
    captured = (4 + 8) * (L + 1) * n_seqs * seq_len * d
    logits = 4 * min(n_seqs, LOGITS_BATCH) * seq_len * V
    working = WORKING_MARGIN * (max([logits, *fams.values()]) + captured)
    built = shape.source == "model"  # no load ahead: the model is in memory already
    load = 0 if built else max(0, shape.memory_bytes(dtype_bytes=dtype_bytes) - PROCESS_BYTES)
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
        families=tuple(sorted(fams.items())),
    )


def shape_of_model(model: Any) -> ModelShape:
    """The [`ModelShape`][tl_geometry.models.ModelShape] of a model already built (its parameters counted, its config read)."""
    cfg = model.cfg
    n = sum(p.numel() for p in model.parameters())
    n_heads = getattr(cfg, "n_heads", None)
    d_head = getattr(cfg, "d_head", None)
    n_kv = getattr(cfg, "n_key_value_heads", None) or n_heads
    return ModelShape(
        getattr(cfg, "n_layers", None),
        getattr(cfg, "d_model", None),
        int(n),
        int(getattr(cfg, "n_ctx", 0) or 0),
        "model",
        0,
        getattr(cfg, "d_vocab", None),
        getattr(cfg, "d_mlp", None),
        n_heads=n_heads,
        d_q=n_heads * d_head if n_heads and d_head else None,
        d_kv=n_kv * d_head if n_kv and d_head else None,
        gated_mlp=getattr(cfg, "gated_mlp", None),
    )


def peak_rss_bytes() -> int | None:
    """This process's peak resident memory so far (``ru_maxrss``; None where unavailable)."""
    try:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (OSError, ValueError):  # pragma: no cover
        return None
    return int(peak if sys.platform == "darwin" else peak * 1024)  # Linux: KiB; macOS: bytes
