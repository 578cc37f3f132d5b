"""Capacity table from weights alone: read only the embedding tensor of a checkpoint.

Given safetensors shards, a GGUF file, or a local Hugging Face directory, find the token
embedding (or unembedding) tensor, stream it in row blocks (safetensors ``safe_open`` slices;
for GGUF a memory map of the file, indexed by our own header walk, with per-block
dequantization by ``gguf.quants``) into
[`tl_geometry.SimilarityAccumulator`][tl_geometry.metrics.capacity.SimilarityAccumulator], and return d_model, vocab, μ, σ, ε, class and
capacity. Nothing else of the model is loaded, so a 70B model's embedding (≈ 1–2 GB) can be
scanned on a laptop: memory is one row block plus a d×d float64 Gram.

Examples:
    >>> from tl_geometry.weights_reader import embedding_capacity      # doctest: +SKIP
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
from typing import Any

import numpy as np
import torch

from tl_geometry.errors import InputError
from tl_geometry.tables import Tabular

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


class CorruptFileError(InputError):
    """A weights file that is truncated or not the format its name says (the message says which
    file, what was expected and what was found: sizes in bytes)."""


_GGUF_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value type → bytes
_GGUF_STRING, _GGUF_ARRAY = 8, 9
_GGUF_MAX_FIELD = 2**40
"""A GGUF length or count above this (1 TiB) is damage, not a big file (a truncated file gives a "truncated" error instead: its lengths are plausible, the bytes are missing)."""


class _Truncated(Exception):
    def __init__(self, need: int):
        self.need = need


def _gguf_expected_size(path: Path, size: int) -> int:
    """Bytes a GGUF file must have, from its header alone (the header is parsed, no tensor read)."""
    data_start, end, _ = _gguf_layout(path, size)
    return data_start + end


def _gguf_layout(path: Path, size: int) -> tuple[int, int, list[tuple[str, list[int], int, int]]]:
    """(start of the tensor data, bytes of tensor data, [(name, dims, type, offset)]) of a GGUF file.

    Layout (GGUF v2/v3, little-endian): magic ``GGUF``, u32 version, u64 tensor count, u64
    key/value count, the key/values, the tensor infos (name, n_dims, dims, type, offset), padding
    to ``general.alignment`` (default 32), then the tensor data. Dims are GGUF's order (fastest
    first); offsets are relative to the data start. Values are skipped, not decoded.
    """
    import mmap
    import struct

    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    with open(path, "rb") as fh:
        buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    try:
        pos = 0

        def take(n: int) -> bytes:
            nonlocal pos
            if n > _GGUF_MAX_FIELD:  # no real length is that big: damaged bytes, not a cut file
                raise CorruptFileError(
                    f"{path}: corrupt GGUF header: {where} at byte {pos} gives a length of {n:,} bytes "
                    f"(the file has {size:,}); the key/value block is damaged: download or copy it again"
                )
            if pos + n > size:
                raise _Truncated(pos + n)
            out = buf[pos : pos + n]
            pos += n
            return out

        def u32() -> int:
            return struct.unpack("<I", take(4))[0]

        def u64() -> int:
            return struct.unpack("<Q", take(8))[0]

        def skip_value(vtype: int) -> Any:
            nonlocal pos
            if vtype in _GGUF_SCALAR:
                return take(_GGUF_SCALAR[vtype])
            if vtype == _GGUF_STRING:
                return take(u64())
            if vtype == _GGUF_ARRAY:
                itype, count = u32(), u64()
                if count > _GGUF_MAX_FIELD:
                    raise CorruptFileError(
                        f"{path}: corrupt GGUF header: {where} at byte {pos - 8} is an array of {count:,} items, "
                        f"more than the file's {size:,} bytes; download or copy it again"
                    )
                if itype in _GGUF_SCALAR:
                    take(_GGUF_SCALAR[itype] * count)
                else:
                    for _ in range(count):
                        skip_value(itype)
                return None
            raise CorruptFileError(f"{path}: corrupt GGUF header: unknown value type {vtype} at byte {pos - 4}")

        where = "the file header"
        magic = take(4)
        if magic != b"GGUF":
            raise CorruptFileError(f"{path} is not a GGUF file: it starts with {bytes(magic)!r}, expected b'GGUF'")
        version = u32()
        if version not in (2, 3):
            raise CorruptFileError(f"{path}: unsupported or corrupt GGUF version {version} (accepted: 2, 3)")
        n_tensors, n_kv = u64(), u64()
        if n_tensors > size or n_kv > size:
            raise CorruptFileError(
                f"{path}: corrupt GGUF header ({n_tensors} tensors, {n_kv} keys in a {size}-byte file)"
            )
        alignment = 32
        for i in range(n_kv):
            where = f"the name of key/value {i}"
            key = take(u64())
            where = f"key {bytes(key).decode('utf-8', 'replace')!r}"
            vtype = u32()
            value = skip_value(vtype)
            if key == b"general.alignment" and vtype == 4:
                alignment = struct.unpack("<I", value)[0] or 32
        end = 0
        tensors = []
        for i in range(n_tensors):
            where = f"the name of tensor {i}"
            name = bytes(take(u64())).decode("utf-8", "replace")
            where = f"tensor {name!r}"
            dims = [u64() for _ in range(u32())]
            ttype, offset = u32(), u64()
            try:
                block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(ttype)]
            except (ValueError, KeyError):
                raise CorruptFileError(f"{path}: tensor {name!r} has unknown GGUF type {ttype}") from None
            n = 1
            for dim in dims:
                n *= dim
            end = max(end, offset + n // block * type_size)
            tensors.append((name, dims, ttype, offset))
        data_start = pos + (-pos) % alignment
        return data_start, end, tensors
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()


def _safetensors_expected_size(path: Path, size: int) -> int:
    """Bytes a safetensors file must have: 8 (header length, u64 little-endian) + header + the
    largest ``data_offsets`` end in the JSON header."""
    import json
    import struct

    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise _Truncated(8)
        (n,) = struct.unpack("<Q", head)
        if n > 100_000_000:
            raise CorruptFileError(
                f"{path} is not a safetensors file: its first 8 bytes give a header of {n} bytes "
                "(a safetensors file starts with the length of its JSON header)"
            )
        if 8 + n > size:
            raise _Truncated(8 + n)
        try:
            header = json.loads(fh.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CorruptFileError(f"{path}: corrupt safetensors header (not JSON: {exc})") from None
    if not isinstance(header, dict):
        raise CorruptFileError(
            f"{path}: corrupt safetensors header (a JSON {type(header).__name__}, expected an object)"
        )
    ends = [
        int(v["data_offsets"][1])
        for k, v in header.items()
        if k != "__metadata__" and isinstance(v, dict) and "data_offsets" in v
    ]
    return 8 + n + max(ends, default=0)


def check_weights_file(path: str | os.PathLike) -> int:
    """Check that a .gguf / .safetensors file is whole, from its header only (cheap: no tensor read).

    Returns:
        The file's size in bytes (equal to the size its header implies).

    Raises:
        FileNotFoundError: no such file.
        CorruptFileError: the file is shorter than its header says (truncated, e.g. an interrupted
            download), longer than any valid file, or not the format its suffix says; the message
            gives the expected and the actual size.
        ValueError: a suffix other than .gguf / .safetensors.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no such file: {p}")
    size = p.stat().st_size
    if p.suffix == ".gguf":
        fmt, expected_of = "GGUF", _gguf_expected_size
    elif p.suffix == ".safetensors":
        fmt, expected_of = "safetensors", _safetensors_expected_size
    else:
        raise InputError(f"{p}: expected a .gguf or .safetensors file, got {p.suffix or 'no suffix'!r}")
    try:
        expected = expected_of(p, size)
    except _Truncated as t:
        raise CorruptFileError(
            f"{p} is truncated: its {fmt} header alone needs at least {t.need:,} bytes but the file has "
            f"{size:,} bytes (an interrupted download or copy?); download or copy it again"
        ) from None
    if size < expected:
        raise CorruptFileError(
            f"{p} is truncated: its {fmt} header says {expected:,} bytes but the file has {size:,} bytes "
            f"({expected - size:,} missing; an interrupted download or copy?); download or copy it again"
        )
    if fmt == "safetensors" and size > expected:
        raise CorruptFileError(
            f"{p} is corrupt: its safetensors header says {expected:,} bytes but the file has {size:,} bytes"
        )
    return size


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
    data_start, _, infos = _gguf_layout(p, p.stat().st_size)
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
    return EmbeddingSource(path=str(f), name=name, format=fmt, shape=(shape[0], shape[1]), dtype=dtype, tied=tied)


def _scan(src: EmbeddingSource, block: int | None, timeline: Timeline | None, precision: str, prefetch: bool):
    """Stream the tensor into an accumulator; None when the mixed result asks for float64."""
    from tl_geometry.metrics.capacity import SimilarityAccumulator

    acc = SimilarityAccumulator(precision=precision)
    if timeline is not None:
        timeline.start = time.perf_counter()
    for rows in iter_embedding_rows(src, block=block, timeline=timeline, prefetch=prefetch):
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


def _gguf_blocks(src: EmbeddingSource, block: int, timeline: Timeline | None) -> Iterator[torch.Tensor]:
    from gguf.quants import dequantize

    t = _gguf_tensors(Path(src.path))[src.name]
    data = t.data  # memory-mapped; rows are tokens
    for a in range(0, data.shape[0], block):
        t0 = time.perf_counter()
        raw = np.array(data[a : a + block])  # read: the page faults of the memory map happen here
        t1 = time.perf_counter()
        rows = np.asarray(dequantize(raw, t.tensor_type), dtype=np.float32)
        if timeline is not None:
            timeline.add("read", t0, t1)
            timeline.add("dequantize", t1, time.perf_counter())
        yield torch.from_numpy(np.ascontiguousarray(rows))


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
    """Intervals (kind, start, end) of a streamed scan: ``read``, ``dequantize`` (the reader thread) and
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
            f"(reader thread) | Gram {s['gram_s']:.2f} s (caller) | overlap {s['overlap_s']:.2f} s, "
            f"{int(s['blocks'])} blocks"
        )


_DONE = object()


def _prefetch(blocks: Iterator[torch.Tensor], depth: int = 1) -> Iterator[torch.Tensor]:
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
    src: EmbeddingSource, *, block: int | None = None, prefetch: bool = True, timeline: Timeline | None = None
) -> Iterator[torch.Tensor]:
    """Yield (≤ block, d_model) float32 row blocks of the tensor, dequantizing GGUF blocks.

    With ``prefetch`` (default) the next block is read and dequantized in a thread while the caller
    works on the current one. ``block`` defaults to `tl_geometry.metrics._gram.default_block_rows`
    (128 MiB of float32 rows). ``timeline`` records when each block was read and dequantized.
    """
    from tl_geometry.metrics._gram import default_block_rows

    if block is None:  # 128 MiB of rows, but at least ~8 blocks so that reading overlaps the Gram
        per8 = -(-src.shape[0] // 8)
        block = min(default_block_rows(src.shape[1], torch.float32), max(1024, -(-per8 // 1024) * 1024))
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise InputError(f"block must be a positive integer (rows per block), got {block!r}")
    gen = _gguf_blocks(src, block, timeline) if src.format == "gguf" else _safetensors_blocks(src, block, timeline)
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
        timeline: a [`Timeline`][tl_geometry.weights_reader.Timeline] to record read / dequantize / Gram intervals in.
        prefetch: read and dequantize the next block in a thread (default); False: one after another.

    The next block is read and dequantized in a thread while the current block's Gram runs, so a
    scan costs about max(read + dequantize, Gram), not their sum.

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
