"""Checkpoint files as files: the size a GGUF or safetensors file must have from its own header, and the GGUF tensor layout. Shared by model loading ([`tl_geometry.models`][tl_geometry.models]) and the capacity family's embedding reader (a truncated download is refused with what it should be, before anything is parsed into a model)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tl_geometry.errors import InputError

_GGUF_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value type → bytes
_GGUF_STRING, _GGUF_ARRAY = 8, 9
_GGUF_MAX_FIELD = 2**40


class CorruptFileError(InputError):
    """A weights file that is truncated or not the format its name says (the message says which
    file, what was expected and what was found: sizes in bytes)."""


class _Truncated(Exception):
    def __init__(self, need: int):
        self.need = need


def _gguf_expected_size(path: Path, size: int) -> int:
    """Bytes a GGUF file must have, from its header alone (the header is parsed, no tensor read)."""
    data_start, end, _ = gguf_layout(path, size)
    return data_start + end


def gguf_layout(path: Path, size: int) -> tuple[int, int, list[tuple[str, list[int], int, int]]]:
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
        tensors: list[tuple[str, list[int], int, int]] = []
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
            if n % block:
                raise CorruptFileError(
                    f"{path}: corrupt GGUF header: tensor {name!r} has {n:,} elements, not a multiple of its "
                    f"type's block of {block}"
                )
            if any(t[0] == name for t in tensors):
                raise CorruptFileError(
                    f"{path}: corrupt GGUF header: tensor {name!r} is listed twice (which one is meant is "
                    "unknowable); download or copy the file again"
                )
            end = max(end, offset + n // block * type_size)
            tensors.append((name, dims, ttype, offset))
        data_start = pos + (-pos) % alignment
        return data_start, end, tensors
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()


#: safetensors dtype -> bytes per element (the format's own table).
SAFETENSORS_DTYPES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "F64": 8,
    "I64": 8,
    "U64": 8,
}


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for k, v in pairs:
        if k in seen:
            raise CorruptFileError(f"tensor {k!r} is listed twice in the header (which one is meant is unknowable)")
        seen[k] = v
    return seen


def check_safetensors_header(header: Any, path: Path | str = "the file") -> int:
    """Validate a safetensors JSON header against the format, before any tensor is read: every
    entry has a known ``dtype``, a ``shape`` of non-negative integers and ``data_offsets``
    ``[begin, end]`` whose length is exactly ``prod(shape) x bytes(dtype)``; the tensors tile the
    data buffer with no overlap and no hole (as the format's reference reader requires). Returns
    the size of the data buffer. A file whose header lies is refused, naming the tensor.

    Raises:
        CorruptFileError: the first lie found.
    """
    if not isinstance(header, dict):
        raise CorruptFileError(
            f"{path}: corrupt safetensors header (a JSON {type(header).__name__}, expected an object)"
        )
    spans = []
    for name, v in header.items():
        if name == "__metadata__":
            if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
                raise CorruptFileError(f"{path}: corrupt safetensors header: __metadata__ must map strings to strings")
            continue
        where = f"{path}: corrupt safetensors header: tensor {name!r}"
        if not isinstance(v, dict) or not {"dtype", "shape", "data_offsets"} <= set(v):
            raise CorruptFileError(f"{where} needs dtype, shape and data_offsets, got {v!r:.200}")
        dtype, shape, offs = v["dtype"], v["shape"], v["data_offsets"]
        if dtype not in SAFETENSORS_DTYPES:
            raise CorruptFileError(f"{where} has unknown dtype {dtype!r} (accepted: {', '.join(SAFETENSORS_DTYPES)})")
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise CorruptFileError(f"{where} has shape {shape!r}; a shape is a list of non-negative integers")
        if not (isinstance(offs, list) and len(offs) == 2 and all(type(o) is int and o >= 0 for o in offs)):
            raise CorruptFileError(f"{where} has data_offsets {offs!r}; expected [begin, end], integers >= 0")
        n = SAFETENSORS_DTYPES[dtype]
        for d in shape:
            n *= d
        if offs[1] - offs[0] != n:
            raise CorruptFileError(
                f"{where}: shape {shape} of {dtype} is {n:,} bytes but its data_offsets {offs} span "
                f"{offs[1] - offs[0]:,}"
            )
        spans.append((offs[0], offs[1], name))
    end = 0
    for begin, stop, name in sorted(spans):
        if begin != end:
            what = (
                "overlaps the tensor before it" if begin < end else f"leaves a hole of {begin - end:,} bytes before it"
            )
            raise CorruptFileError(f"{path}: corrupt safetensors header: tensor {name!r} at byte {begin:,} {what}")
        end = stop
    return end


def _safetensors_expected_size(path: Path, size: int) -> int:
    """Bytes a safetensors file must have: 8 (header length, u64 little-endian) + header + the
    data buffer its validated header describes (`check_safetensors_header`)."""
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
            header = json.loads(fh.read(n), object_pairs_hook=_unique_keys)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CorruptFileError(f"{path}: corrupt safetensors header (not JSON: {exc})") from None
        except CorruptFileError as exc:
            raise CorruptFileError(f"{path}: corrupt safetensors header: {exc}") from None
    return 8 + n + check_safetensors_header(header, path)


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
