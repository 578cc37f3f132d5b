"""A model's size from its files, without loading weights: for refusing a job early.

[`peek`][tl_geometry.models.peek] reads a zoo model's (``smollm2-135m``, ``gemma-3-270m``) or a local path's [`ModelShape`][tl_geometry.models.ModelShape]
(a GGUF header walk, or config.json plus the safetensors headers);
[`estimate_memory_bytes`][tl_geometry.models.estimate_memory_bytes] estimates the peak memory from a config. Both
are our estimates (``--max-memory-gb``, checking ``--layers`` before a load), never a number of a
report. Re-exported by [`tl_geometry.models`][tl_geometry.models].
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tl_geometry.models.zoo import DEFAULT_N_CTX, ZOO, canonical_name, is_path, zoo_file


def estimate_memory_bytes(cfg: Any, *, dtype_bytes: int = 4) -> int:
    """Rough peak memory to load and run a model from its config (parameters × 3 for loading
    plus the conversion copy, plus per-layer causal masks). Our estimate, for refusing jobs early."""
    d, L, V = cfg.d_model, cfg.n_layers, cfg.d_vocab
    d_mlp = getattr(cfg, "d_mlp", None) or 4 * d
    per_layer = 4 * d * d + (3 if getattr(cfg, "gated_mlp", False) else 2) * d * d_mlp
    params = L * per_layer + 2 * V * d
    masks = L * cfg.n_ctx * cfg.n_ctx  # bool
    return int(3 * params * dtype_bytes + masks)


LOAD_COPIES = 2.0
"""Peak memory of loading a model (GGUF file or model directory), in float32 copies of the
TransformerLens model's weights, besides the process itself: the one-copy loader
([`tl_geometry.models.hf_loading.wrap_hf`][tl_geometry.models.hf_loading.wrap_hf]) holds the transformers
model, then its converted tensors, then the TransformerLens parameters they became, overlapping
by a layer's tensors and the unembedding's processing. Measured with ``ru_maxrss`` on
``tg.models.load`` (benchmarks/bench_memory.py, 2026-12-04): SmolLM2-135M 1.53 GiB peak for
0.61 GiB of weights, Gemma-3-270M 3.32 GiB for 1.62 GiB: 1.76 copies each beside the 0.47 GiB
process; rounded up. (Before the one-copy loader: 4.5 copies, 3.27 and 7.50 GiB.)"""
PROCESS_BYTES = 512 * 2**20
"""The Python process with torch, transformers and TransformerLens imported, before any weight
(0.47–0.49 GiB measured); counted in every estimate, whose factors were measured without it."""


@dataclass(frozen=True)
class ModelShape:
    """What a model file says about its size, read without loading weights (see [`peek`][tl_geometry.models.peek]).

    Attributes:
        n_layers, d_model: from the config / the tensor names (None when not found).
        n_params: total elements of the weight tensors (dequantized, each one a parameter).
        n_ctx: the context the loaded model will have (capped at [`DEFAULT_N_CTX`][tl_geometry.models.DEFAULT_N_CTX]).
        source: where it was read: ``"gguf"``, ``"hf-dir"`` or ``"config"`` (a hub config).
        n_tied: elements of a tied embedding the file stores once and TransformerLens holds twice
            (W_E and its own W_U): a GGUF with ``token_embd.weight`` and no ``output.weight``, a
            model directory whose config ties the embedding (transformers' default).
            Counted by the memory estimate, not in ``n_params``.
        d_vocab, d_mlp: the vocabulary and the MLP width (None when not found): the report's
            working set grows with them ([`tl_geometry.runs.memory`][tl_geometry.runs.memory]).
        n_heads: attention heads (a model directory's config; None from a GGUF, whose header
            values are not decoded: estimates then take ``d_q / 64``).
        d_q, d_kv: the widths of the query and key projections (n_heads · d_head and
            n_kv_heads · d_head; None when not found).
        gated_mlp: whether the MLP has a gate projection (None when not known).
    """

    n_layers: int | None
    d_model: int | None
    n_params: int
    n_ctx: int
    source: str
    n_tied: int = 0
    d_vocab: int | None = None
    d_mlp: int | None = None
    n_heads: int | None = None
    d_q: int | None = None
    d_kv: int | None = None
    gated_mlp: bool | None = None

    @property
    def tl_params(self) -> int:
        """The parameters of the TransformerLens model: ``n_params`` plus the tied embedding's second copy."""
        return self.n_params + self.n_tied

    def memory_bytes(self, *, dtype_bytes: int = 4) -> int:
        """Peak memory estimate of loading the model: ``LOAD_COPIES`` × the TransformerLens weights
        (``tl_params``) at ``dtype_bytes`` each, plus one causal mask (n_ctx², bool) per layer and
        ``PROCESS_BYTES``. Our estimate, for refusing jobs early; a report adds its working set
        ([`tl_geometry.runs.memory.estimate`][tl_geometry.runs.memory.estimate])."""
        masks = (self.n_layers or 1) * self.n_ctx * self.n_ctx
        return int(LOAD_COPIES * self.tl_params * dtype_bytes + masks + PROCESS_BYTES)


def _gguf_shape(path: Path) -> ModelShape:
    st = path.stat()
    return _gguf_shape_cached(str(path.resolve()), st.st_size, st.st_mtime)


@functools.lru_cache(maxsize=8)
def _gguf_shape_cached(path_str: str, size: int, mtime: float) -> ModelShape:
    import re

    from tl_geometry.io.weight_files import gguf_layout

    path = Path(path_str)
    _, _, tensors = gguf_layout(path, size)
    n_params, blocks, d_model, n_embed, has_output = 0, set(), None, 0, False
    d_vocab = d_mlp = d_q = d_kv = None
    gated = False
    for name, dims, _, _ in tensors:
        n = 1
        for dim in dims:
            n *= int(dim)
        n_params += n
        m = re.match(r"blk\.(\d+)\.", name)
        if m:
            blocks.add(int(m.group(1)))
        if name == "token_embd.weight" and dims:
            d_model = int(dims[0])  # GGUF order: fastest dimension first
            d_vocab = int(dims[1]) if len(dims) > 1 else None
            n_embed = n
        if name == "blk.0.ffn_up.weight" and len(dims) > 1:
            d_mlp = int(dims[1])
        if name == "blk.0.attn_q.weight" and len(dims) > 1:
            d_q = int(dims[1])
        if name == "blk.0.attn_k.weight" and len(dims) > 1:
            d_kv = int(dims[1])
        gated = gated or name == "blk.0.ffn_gate.weight"
        has_output = has_output or name == "output.weight"
    tied = 0 if has_output else n_embed  # no output tensor: the unembedding is the embedding
    return ModelShape(
        len(blocks) or None,
        d_model,
        n_params,
        DEFAULT_N_CTX,
        "gguf",
        tied,
        d_vocab,
        d_mlp,
        d_q=d_q,
        d_kv=d_kv,
        gated_mlp=gated if blocks else None,
    )


def _safetensors_header(path: Path) -> dict:
    """A safetensors file's JSON header ({} when it cannot be read cheaply; the load reports why)."""
    import json
    import struct

    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            return {}
        (length,) = struct.unpack("<Q", head)
        if length > min(path.stat().st_size, 100 * 2**20):
            return {}  # not a header we can read cheaply; check_weights_file reports it at load
        try:
            header = json.loads(fh.read(length))
        except ValueError:
            return {}
    return header if isinstance(header, dict) else {}


def _safetensors_has(path: Path, part: str) -> bool:
    """Whether a tensor name of the file contains ``part`` (``"gate_proj"``: a gated MLP)."""
    return any(part in key for key in _safetensors_header(path))


def _safetensors_elements(path: Path) -> int:
    header = _safetensors_header(path)
    total = 0
    for key, info in header.items():
        if key == "__metadata__" or not isinstance(info, dict):
            continue
        n = 1
        for dim in info.get("shape", []):
            n *= int(dim)
        total += n
    return total


def _hf_dir_shape(path: Path) -> ModelShape | None:
    import json

    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(cfg, dict):
        return None
    cfg = {**cfg.get("text_config", {}), **cfg} if isinstance(cfg.get("text_config"), dict) else cfg

    def first(*keys):
        for k in keys:
            v = cfg.get(k)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
        return None

    files = sorted(path.glob("*.safetensors"))
    n_params = sum(_safetensors_elements(f) for f in files)
    gated = any(_safetensors_has(f, "gate_proj") for f in files) if files else None
    if not n_params:  # no safetensors (e.g. pytorch_model.bin): the file sizes, at 4 bytes a parameter
        n_params = sum(f.stat().st_size for f in path.glob("*.bin")) // 4
    ctx = first("n_positions", "max_position_embeddings", "n_ctx") or DEFAULT_N_CTX
    d_model, d_vocab = first("hidden_size", "n_embd", "d_model"), first("vocab_size")
    tied = bool(cfg.get("tie_word_embeddings", True)) and d_model is not None and d_vocab is not None
    n_heads = first("num_attention_heads", "n_head", "n_heads")
    d_head = first("head_dim") or (d_model // n_heads if d_model and n_heads else None)
    n_kv = first("num_key_value_heads", "n_key_value_heads") or n_heads
    return ModelShape(
        first("num_hidden_layers", "n_layer", "n_layers"),
        d_model,
        n_params,
        min(ctx, DEFAULT_N_CTX),
        "hf-dir",
        d_model * d_vocab if tied and d_model and d_vocab else 0,
        d_vocab,
        first("intermediate_size", "n_inner", "d_mlp"),
        n_heads=n_heads,
        d_q=n_heads * d_head if n_heads and d_head else None,
        d_kv=n_kv * d_head if n_kv and d_head else None,
        gated_mlp=gated,
    )


def peek(name: Any) -> ModelShape | None:
    """The size of a zoo model or local model path from its files, without loading weights (a GGUF
    header walk, or config.json plus the safetensors headers); None for a hub name or a path we
    cannot read (the load itself then reports the problem). For ``--max-memory-gb`` on every
    source and for checking ``--layers`` before a load."""
    try:
        if isinstance(name, str) and canonical_name(name) in ZOO:
            return _gguf_shape(zoo_file(name))
        if not is_path(name):
            return None
        p = Path(os.fspath(name)).expanduser()
        if p.is_file() and p.suffix.lower() == ".gguf":
            return _gguf_shape(p)
        if p.is_file() and p.suffix.lower() == ".safetensors":
            p = p.parent
        return _hf_dir_shape(p) if p.is_dir() else None
    except Exception:  # noqa: BLE001 - cannot read the size cheaply: load() reports the problem
        return None
