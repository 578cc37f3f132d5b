"""Capacity table from weights alone: read only the embedding tensor of a checkpoint.

Given safetensors shards, a GGUF file, or a local Hugging Face directory, find the token
embedding (or unembedding) tensor, stream it in row blocks (safetensors ``safe_open`` slices;
for GGUF a memory map of the file, indexed by our own header walk, with per-block
dequantization by ``gguf.quants``) into
[`tl_geometry.SimilarityAccumulator`][tl_geometry.metrics.capacity.SimilarityAccumulator], and return d_model, vocab, μ, σ, ε, class and
capacity. Nothing else of the model is loaded, so a 70B model's embedding (≈ 1–2 GB) can be
scanned on a laptop: memory is one row block plus a d×d float64 Gram.

Examples:
    >>> from tl_geometry.families.capacity.weights_reader import embedding_capacity      # doctest: +SKIP
    >>> embedding_capacity("SmolLM2-135M-Instruct.Q4_1.gguf").epsilon  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import logging
import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError
from tl_geometry.io.weight_files import CorruptFileError, check_weights_file, gguf_layout

logger = logging.getLogger(__name__)

__all__ = [
    "EmbeddingSource",
    "CapacityRow",
    "CorruptFileError",
    "check_weights_file",
    "find_embedding",
    "iter_embedding_rows",
    "read_embedding",
    "embedding_capacity",
    "Timeline",
]

EMBED_PATTERNS = (
    r"(^|\.)embed_tokens\.weight$",
    r"(^|\.)wte\.weight$",
    r"(^|\.)embed_in\.weight$",
    r"(^|\.)tok_embeddings\.weight$",
    r"(^|\.)word_embeddings\.weight$",
    r"^token_embd\.weight$",
    r"(^|\.)embedding\.weight$",
)
"""Name patterns of input-embedding tensors (safetensors from HF / original checkpoints, GGUF)."""
UNEMBED_PATTERNS = (r"(^|\.)lm_head\.weight$", r"(^|\.)embed_out\.weight$", r"^output\.weight$")
"""Name patterns of unembedding (output / lm_head) tensors."""


@dataclass(frozen=True)
class EmbeddingSource:
    """Where an embedding tensor lives.

    Attributes:
        path: the file holding it.
        name: tensor name in that file.
        format: "safetensors" or "gguf".
        shape: (vocab, d_model).
        dtype: stored dtype (e.g. "BF16", "Q8_0").
        tied: True when an unembedding was asked for and the model ties it to the embedding.
    """

    path: str
    name: str
    format: str
    shape: tuple[int, int]
    dtype: str
    tied: bool = False


@dataclass(frozen=True)
class CapacityRow(Tabular):
    """One row of the capacity table (weights only).

    ``capacity`` is a count only where the capacity paper reports one (Class 2, ε < 0.1); else
    None with ``status="indeterminate"`` and the ``reason`` ([`tl_geometry.capacity_estimate`][tl_geometry.metrics.capacity.capacity_estimate]).
    ``capacity_3sigma`` is the authors' μ + 3σ figure, where there is a count.
    """

    source: str
    tensor: str
    d_model: int
    vocab: int
    mean: float
    std: float
    epsilon: float
    model_class: str
    capacity: float | None
    form: str
    n_dropped: int
    status: str = "count"
    reason: str = ""
    preset: str = "paper"
    capacity_3sigma: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


"""A GGUF length or count above this (1 TiB) is damage, not a big file (a truncated file gives a "truncated" error instead: its lengths are plausible, the bytes are missing)."""


def _files(path: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path]:
    paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    if not paths:
        raise InputError("no checkpoint path given")
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(f"no such file or directory: {p}")
        if p.is_dir():
            st = sorted(p.glob("*.safetensors"))
            gg = sorted(p.glob("*.gguf"))
            if not st and not gg:
                raise InputError(f"{p} holds no *.safetensors or *.gguf files")
            out.extend(st or gg[:1])
        else:
            if p.suffix not in (".safetensors", ".gguf"):
                raise InputError(f"{p}: expected a .safetensors or .gguf file (or a directory), got {p.suffix!r}")
            out.append(p)
    for f in out:
        check_weights_file(f)
    return out


def _match(names: Sequence[str], patterns: Sequence[str]) -> str | None:
    for pat in patterns:
        hits = sorted(n for n in names if re.search(pat, n))
        if hits:
            return min(hits, key=len)
    return None


@dataclass(frozen=True)
class _GGUFTensor:
    """One tensor of a GGUF file, with the fields of ``gguf.ReaderTensor`` that we use.

    ``shape`` is GGUF's order (fastest dimension first); ``data`` a read-only memory map, rows
    first, as ``gguf.GGUFReader`` gives it: the element type for float/int types, else the raw
    bytes of each row (what ``gguf.quants.dequantize`` takes).
    """

    name: str
    tensor_type: Any
    shape: tuple[int, ...]
    data: np.ndarray


_GGUF_ITEM = {
    "F16": np.float16,
    "F32": np.float32,
    "F64": np.float64,
    "I8": np.int8,
    "I16": np.int16,
    "I32": np.int32,
    "I64": np.int64,
}
"""GGUF types held as plain elements (as gguf.GGUFReader maps them); every other type is raw row bytes."""


@functools.lru_cache(maxsize=2)
def _gguf_tensors_cached(path: str, mtime: float) -> dict[str, _GGUFTensor]:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    from gguf.quants import quant_shape_to_byte_shape

    p = Path(path)
    data_start, _, infos = gguf_layout(p, p.stat().st_size)
    buf = np.memmap(p, dtype=np.uint8, mode="r")
    out = {}
    for name, dims, ttype, offset in infos:
        qtype = GGMLQuantizationType(ttype)
        block, type_size = GGML_QUANT_SIZES[qtype]
        np_dims = tuple(reversed(dims))
        n_bytes = int(np.prod(dims, dtype=np.int64)) // block * type_size
        raw = buf[data_start + offset : data_start + offset + n_bytes]
        item = _GGUF_ITEM.get(qtype.name)
        data = raw.view(item).reshape(np_dims) if item else raw.reshape(quant_shape_to_byte_shape(np_dims, qtype))
        out[name] = _GGUFTensor(name=name, tensor_type=qtype, shape=tuple(dims), data=data)
    return out


def _gguf_tensors(path: Path) -> dict[str, _GGUFTensor]:
    """The tensors of a GGUF file, from our header walk and one memory map; cached for the last two
    files. Our choice, for speed only: ``gguf.GGUFReader`` decodes every key/value, tokenizer tables
    included, before listing tensors (16 s of CPU for Gemma-3's 262,144-token vocabulary, 3.6 s for
    SmolLM2's); skipping the values takes 0.2 s. The tensors equal GGUFReader's (tested)."""
    return _gguf_tensors_cached(str(path.resolve()), path.stat().st_mtime)


#: Element types that are not an embedding (safetensors and GGUF names): refused as the pure
#: function refuses a non-float tensor, instead of measuring integers (ε = 1.0066 on I64 ids).
_NOT_FLOAT = frozenset({"BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64"})


def find_embedding(path, *, matrix: str = "embed", tensor: str | None = None) -> EmbeddingSource:
    """Locate the embedding (``matrix="embed"``) or unembedding (``"unembed"``) tensor.

    Args:
        path: a .safetensors file, a list of shards, a .gguf file, or a directory holding either.
        matrix: "embed" or "unembed" (falls back to the embedding when the checkpoint ties them).
        tensor: an explicit tensor name instead of the patterns.

    Raises:
        FileNotFoundError: a path that does not exist.
        ValueError: no embedding tensor (the message names the tensors found), bad arguments.
    """
    if matrix not in ("embed", "unembed"):
        raise InputError(f"matrix must be 'embed' or 'unembed', got {matrix!r}")
    files = _files(path)
    found: dict[str, tuple[Path, str, tuple[int, ...], str]] = {}
    for f in files:
        if f.suffix == ".gguf":
            for t in _gguf_tensors(f).values():
                # GGUF lists dims fastest-first: (d_model, vocab) for token_embd
                found[t.name] = (f, "gguf", tuple(int(s) for s in reversed(list(t.shape))), t.tensor_type.name)
        else:
            from safetensors import safe_open

            with safe_open(str(f), framework="pt") as sf:
                for name in sf.keys():
                    sl = sf.get_slice(name)
                    found[name] = (f, "safetensors", tuple(sl.get_shape()), str(sl.get_dtype()))
    names = list(found)
    tied = False
    if tensor is not None:
        if tensor not in found:
            raise InputError(f"tensor {tensor!r} not found; tensors: {_list(names)}")
        name = tensor
    else:
        name = _match(names, UNEMBED_PATTERNS) if matrix == "unembed" else None
        if name is None:
            name = _match(names, EMBED_PATTERNS)
            tied = matrix == "unembed"
        if name is None:
            raise InputError(f"no {matrix}ding tensor in {', '.join(map(str, files))}; tensors found: {_list(names)}")
    f, fmt, shape, dtype = found[name]
    if len(shape) != 2:
        raise InputError(f"tensor {name!r} has shape {shape}, expected 2-D (vocab, d_model)")
    if dtype in _NOT_FLOAT:
        raise InputError(
            f"tensor {name!r} of {f} holds {dtype} values, not floating point: an embedding is a float matrix "
            "(F32, F16, BF16, F64 or a GGUF float / quantized type); pass tensor= to choose another"
        )
    return EmbeddingSource(path=str(f), name=name, format=fmt, shape=(shape[0], shape[1]), dtype=dtype, tied=tied)


def _scan(src: EmbeddingSource, block: int | None, timeline: Timeline | None, precision: str, prefetch: bool):
    """Stream the tensor into an accumulator; None when the mixed result asks for float64."""
    from tl_geometry.metrics.capacity import SimilarityAccumulator

    acc = SimilarityAccumulator(precision=precision)
    if timeline is not None:
        timeline.start = time.perf_counter()
    # _reuse: each block is added before the next is asked for, so Q8_0 blocks share one buffer
    for rows in iter_embedding_rows(src, block=block, timeline=timeline, prefetch=prefetch, _reuse=True):
        t0 = time.perf_counter()
        first = acc.n_total
        try:
            acc.update(rows)
        except InputError as exc:
            if "NaN or inf" not in str(exc):
                raise
            _refuse_non_finite(src, rows, first)
            raise CorruptFileError(_non_finite_message(src, None)) from None
        if timeline is not None:
            timeline.add("gram", t0, time.perf_counter())
    if timeline is not None:
        timeline.end = time.perf_counter()
    st = acc.compute()
    return None if acc.needs_float64 else st


def _list(names: Sequence[str], n: int = 12) -> str:
    names = sorted(names)
    more = f" ... (+{len(names) - n} more)" if len(names) > n else ""
    return ", ".join(names[:n]) + more if names else "(none)"


FAST_DEQUANT = ("F32", "F16", "BF16", "Q8_0")
"""GGUF types whose dequantization is one cheap pass (a cast, or `dequantize_q8_0`): about a tenth of the
Gram's time, so it runs in the caller's thread; only the read (page faults of the memory map: I/O) runs
ahead in the reader thread. Other types (the K-quants: gguf's numpy code, several times slower) are read
and dequantized in the reader thread. Measured on 2 cores (``benchmarks/bench_capacity_stream.py``): a
Q8_0 dequantization in the reader thread competes with the Gram's BLAS threads and made the scan 1.5×
slower than serial."""


def _gguf_tensor(src: EmbeddingSource):
    return _gguf_tensors(Path(src.path))[src.name]


def _gguf_raw_blocks(src: EmbeddingSource, block: int, timeline: Timeline | None) -> Iterator[np.ndarray]:
    data = _gguf_tensor(src).data  # memory-mapped; rows are tokens
    for a in range(0, data.shape[0], block):
        t0 = time.perf_counter()
        raw = np.array(data[a : a + block])  # read: the page faults of the memory map happen here
        if timeline is not None:
            timeline.add("read", t0, time.perf_counter())
        yield raw


def _gguf_dequantized(src: EmbeddingSource, raws: Iterator[np.ndarray], timeline: Timeline | None, reuse: bool = False):
    """Dequantize each raw block; with ``reuse`` (a caller that is done with a block before asking for
    the next, as `_scan`), Q8_0 blocks are written into one reused buffer."""
    from gguf.quants import dequantize

    qtype = _gguf_tensor(src).tensor_type
    buf: np.ndarray | None = None
    for raw in raws:
        t1 = time.perf_counter()
        if qtype.name == "Q8_0":
            shape = (raw.shape[0], raw.shape[1] // Q8_0_BLOCK * 32)
            if reuse and (buf is None or buf.shape[0] < shape[0]):
                buf = np.empty(shape, dtype=np.float32)
            rows = dequantize_q8_0(raw, out=buf[: shape[0]] if reuse and buf is not None else None)
        else:
            rows = np.asarray(dequantize(raw, qtype), dtype=np.float32)
        if timeline is not None:
            timeline.add("dequantize", t1, time.perf_counter())
        yield torch.from_numpy(np.ascontiguousarray(rows))


def _gguf_blocks(src: EmbeddingSource, block: int, timeline: Timeline | None, prefetch: bool, reuse: bool):
    """Float32 row blocks of a GGUF tensor. With ``prefetch``, the reads run ahead in the reader thread,
    and so does the dequantization unless the type is in FAST_DEQUANT."""
    raws = _gguf_raw_blocks(src, block, timeline)
    if not prefetch:
        return _gguf_dequantized(src, raws, timeline, reuse)
    if _gguf_tensor(src).tensor_type.name in FAST_DEQUANT:
        return _gguf_dequantized(src, _prefetch(raws), timeline, reuse)
    return _prefetch(_gguf_dequantized(src, raws, timeline))


Q8_0_BLOCK = 34
"""Bytes of one Q8_0 block: a float16 scale d, then 32 int8 quants q; the values are d·q."""


def dequantize_q8_0(raw: np.ndarray, *, step: int = 1024, out: np.ndarray | None = None) -> np.ndarray:
    """Q8_0 rows (uint8, (rows, 34·nb)) to float32 (rows, 32·nb): x = float32(d) · float32(q).

    Bit-identical to ``gguf.quants.dequantize`` (the same float32 product of exact values; tested), about
    6× faster (measured on Gemma-3-270M's 262,144 × 640 embedding; ``benchmarks/bench_capacity_stream.py``):
    ``step`` rows at a time, so the int8 → float32 conversion and the scaling run in cache, into one
    output array, without gguf's intermediate copies.

    ``out``: a float32 (rows, 32·nb) C-contiguous array to write into (a reused buffer: no page faults
    of a fresh 100 MB array per block); default a new one.

    Raises:
        InputError: a row length that is not a whole number of Q8_0 blocks, or an ``out`` of another
            shape or dtype.
    """
    rows, width = raw.shape
    if width % Q8_0_BLOCK:
        raise InputError(f"Q8_0 rows must hold whole {Q8_0_BLOCK}-byte blocks, got {width} bytes per row")
    nb = width // Q8_0_BLOCK
    if out is None:
        out = np.empty((rows, 32 * nb), dtype=np.float32)
    elif out.shape != (rows, 32 * nb) or out.dtype != np.float32 or not out.flags.c_contiguous:
        raise InputError(
            f"out must be a C-contiguous float32 array of shape {(rows, 32 * nb)}, got {out.dtype} {out.shape}"
        )
    blocks = raw.reshape(rows, nb, Q8_0_BLOCK)
    out3 = out.reshape(rows, nb, 32)
    for a in range(0, rows, step):
        b = blocks[a : a + step]
        o = out3[a : a + step]
        o[...] = b[:, :, 2:].view(np.int8)
        o *= b[:, :, :2].view(np.float16).astype(np.float32)
    return out


def _safetensors_blocks(src: EmbeddingSource, block: int, timeline: Timeline | None) -> Iterator[torch.Tensor]:
    from safetensors import safe_open

    with safe_open(src.path, framework="pt") as sf:
        sl = sf.get_slice(src.name)
        for a in range(0, src.shape[0], block):
            t0 = time.perf_counter()
            rows = sl[a : a + block].float()
            if timeline is not None:
                timeline.add("read", t0, time.perf_counter())
            yield rows


class Timeline:
    """Intervals (kind, start, end) of a streamed scan: ``read`` (the reader thread), ``dequantize`` (the caller for `FAST_DEQUANT` types, else the reader thread) and
    ``gram`` (the caller), with `summary` giving the busy time of each and of the whole."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float]] = []
        self.start = time.perf_counter()
        self.end = self.start

    def add(self, kind: str, t0: float, t1: float) -> None:
        self.spans.append((kind, t0, t1))

    def summary(self) -> dict[str, float]:
        out: dict[str, float] = {"wall_s": self.end - self.start}
        for kind in ("read", "dequantize", "gram"):
            out[f"{kind}_s"] = sum(b - a for k, a, b in self.spans if k == kind)
        out["blocks"] = float(sum(1 for k, *_ in self.spans if k == "gram"))
        serial = out["read_s"] + out["dequantize_s"] + out["gram_s"]
        out["overlap_s"] = max(serial - out["wall_s"], 0.0)  # time the reader and the Gram ran together
        return out

    def format(self) -> str:
        s = self.summary()
        return (
            f"wall {s['wall_s']:.2f} s: read {s['read_s']:.2f} s + dequantize {s['dequantize_s']:.2f} s "
            f"| Gram {s['gram_s']:.2f} s | overlap {s['overlap_s']:.2f} s, "
            f"{int(s['blocks'])} blocks"
        )


_DONE = object()


_Block = TypeVar("_Block")


def _prefetch(blocks: Iterator[_Block], depth: int = 1) -> Iterator[_Block]:
    """Run ``blocks`` in a reader thread, ``depth`` blocks ahead of the caller (numpy, torch and the
    memory map release the GIL, so reading and dequantizing the next block overlap the current Gram).
    Memory: at most depth + 2 blocks. An exception in the reader is raised in the caller."""
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def run() -> None:
        try:
            for item in blocks:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(_DONE)
        except BaseException as exc:  # noqa: BLE001 (handed to the caller)
            q.put(exc)

    th = threading.Thread(target=run, name="tl-geometry-reader", daemon=True)
    th.start()
    try:
        while True:
            item = q.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        th.join(timeout=5)


def iter_embedding_rows(
    src: EmbeddingSource,
    *,
    block: int | None = None,
    prefetch: bool = True,
    timeline: Timeline | None = None,
    _reuse: bool = False,
) -> Iterator[torch.Tensor]:
    """Yield (≤ block, d_model) float32 row blocks of the tensor, dequantizing GGUF blocks.

    With ``prefetch`` (default) the next block is read in a thread while the caller works on the current
    one; so is its dequantization, unless that is one cheap pass (`FAST_DEQUANT`: F32, F16, BF16, Q8_0),
    which then runs in the caller. ``block`` defaults to `tl_geometry.metrics._gram.default_block_rows`
    (128 MiB of float32 rows). ``timeline`` records when each block was read and dequantized.
    """
    from tl_geometry.metrics._gram import PART_ROWS, default_block_rows

    if block is None:
        # 128 MiB of rows, but ~4 blocks or more so that reading overlaps the Gram, never under two
        # parts of the float32 path (2 · PART_ROWS): smaller blocks leave threads idle (SmolLM2's 49,152
        # rows in 8 blocks scanned 1.5x slower than the matrix in memory); whole parts (default_block_rows
        # is whole parts from PART_ROWS rows on), so no block ends on a short part
        per4 = -(-src.shape[0] // 4)
        block = min(
            default_block_rows(src.shape[1], torch.float32), max(2 * PART_ROWS, -(-per4 // PART_ROWS) * PART_ROWS)
        )
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise InputError(f"block must be a positive integer (rows per block), got {block!r}")
    if src.format == "gguf":
        return _gguf_blocks(src, block, timeline, prefetch, _reuse)
    gen = _safetensors_blocks(src, block, timeline)
    return _prefetch(gen) if prefetch else gen


def read_embedding(path, *, matrix: str = "embed", tensor: str | None = None) -> torch.Tensor:
    """The whole embedding (vocab, d_model) as float32 (small models; prefer streaming)."""
    src = find_embedding(path, matrix=matrix, tensor=tensor)
    out = torch.cat(list(iter_embedding_rows(src)))
    _refuse_non_finite(src, out)
    return out


def _refuse_non_finite(src: EmbeddingSource, rows: torch.Tensor, first_row: int = 0) -> None:
    bad = ~torch.isfinite(rows).all(1)
    if bool(bad.any()):
        raise CorruptFileError(_non_finite_message(src, first_row + int(bad.nonzero()[0, 0])))


def _non_finite_message(src: EmbeddingSource, row: int | None) -> str:
    at = f" (first at row {row:,})" if row is not None else ""
    return (
        f"{src.path}: tensor {src.name!r} ({src.dtype}) holds NaN or inf after dequantization{at}: the file's "
        "data is damaged (or the tensor is not a weight matrix); download or copy it again"
    )


def embedding_capacity(
    path,
    *,
    matrix: str = "embed",
    tensor: str | None = None,
    form: str = "full",
    preset: str = "paper",
    block: int | None = None,
    timeline: Timeline | None = None,
    prefetch: bool = True,
) -> CapacityRow:
    """d_model, vocab, μ, σ, ε, class and capacity of a checkpoint's embedding, from the file.

    This reads the raw checkpoint matrix, the one the capacity paper measured (no
    TransformerLens processing). The capacity is the paper's ([`tl_geometry.capacity_estimate`][tl_geometry.metrics.capacity.capacity_estimate]):
    a count for ε < 0.1, else None with the reason.

    Args:
        path: .safetensors file(s), .gguf file, or a local HF directory.
        matrix: "embed" or "unembed".
        tensor: explicit tensor name.
        form: capacity form (see [`tl_geometry.capacity`][tl_geometry.metrics.capacity.capacity]).
        preset: ``"paper"``.
        block: rows per streamed block (default: 128 MiB of float32 rows). Memory is about three
            blocks (the one in the Gram, the next one being dequantized, one queued) plus a d×d
            float64 Gram, whatever the vocabulary.
        timeline: a [`Timeline`][tl_geometry.families.capacity.weights_reader.Timeline] to record read / dequantize / Gram intervals in.
        prefetch: read and dequantize the next block in a thread (default); False: one after another.

    The next block is read in a thread (and, for the slow-to-dequantize types, dequantized there) while
    the current block's Gram runs, so a scan costs about max(read, dequantize + Gram) for Q8_0/F16/BF16/F32
    and max(read + dequantize, Gram) for the others, not the sum.

    Raises:
        CorruptFileError: the tensor dequantizes to NaN or inf (named with the file and the row).
    """
    from tl_geometry.metrics.capacity import capacity_estimate

    src = find_embedding(path, matrix=matrix, tensor=tensor)
    st = _scan(src, block, timeline, "auto", prefetch)
    if st is None:  # σ ≪ |μ|: the float32 Gram is not to 1e-7 here; scan again in float64
        st = _scan(src, block, None, "float64", prefetch)
    assert st is not None
    if st.epsilon < 1:
        est = capacity_estimate(st.d, mean=st.mean, std=st.std, form=form, preset=preset)
        k, status, reason, k3 = est.k, est.status, est.reason, est.k_3sigma
    else:
        k, status, reason, k3 = None, "indeterminate", f"ε = {st.epsilon:.5g} ≥ 1: outside the formula's domain", None
    name = Path(src.path).parent.name if Path(src.path).suffix == ".safetensors" else Path(src.path).stem
    return CapacityRow(
        source=name,
        tensor=src.name + (" (tied)" if src.tied else ""),
        d_model=st.d,
        vocab=src.shape[0],
        mean=st.mean,
        std=st.std,
        epsilon=st.epsilon,
        model_class=st.model_class,
        capacity=k,
        form=form,
        n_dropped=st.n_dropped,
        status=status,
        reason=reason,
        preset=preset,
        capacity_3sigma=k3,
    )
