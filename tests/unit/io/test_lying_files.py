"""Files are checked, not trusted (issue 33): a weights file whose header lies about its data is
refused before any tensor is read, naming the tensor and the lie; a duplicate tensor name is
refused (never "the last one wins"); an integer or boolean "embedding" is refused as the pure
function refuses it."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from tests.unit.families.capacity.test_capacity_weights import write_gguf
from tl_geometry.families.capacity.weights_reader import embedding_capacity, find_embedding
from tl_geometry.io.weight_files import CorruptFileError, check_safetensors_header, check_weights_file


def _write(path, header: dict | str, data: bytes) -> None:
    text = header if isinstance(header, str) else json.dumps(header)
    raw = text.encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def _ok_header():
    return {
        "embed": {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, 32]},
        "norm": {"dtype": "F32", "shape": [2], "data_offsets": [32, 40]},
    }


def test_a_true_header_passes_and_equals_what_safetensors_writes(tmp_path):
    import torch
    from safetensors.torch import save_file

    save_file({"a": torch.zeros(4, 2), "b": torch.ones(3, dtype=torch.float16)}, str(tmp_path / "m.safetensors"))
    assert check_weights_file(tmp_path / "m.safetensors") == (tmp_path / "m.safetensors").stat().st_size
    _write(tmp_path / "h.safetensors", _ok_header(), bytes(40))
    assert check_weights_file(tmp_path / "h.safetensors") == 8 + len(json.dumps(_ok_header())) + 40


@pytest.mark.parametrize(
    "edit, match",
    [
        (
            lambda h: h["embed"].update(shape=[4, 3]),
            r"tensor 'embed': shape \[4, 3\] of F32 is 48 bytes but its data_offsets \[0, 32\] span 32",
        ),
        (lambda h: h["embed"].update(dtype="F33"), r"tensor 'embed' has unknown dtype 'F33'"),
        (lambda h: h["embed"].update(shape=[4, -2]), r"tensor 'embed' has shape \[4, -2\]"),
        (lambda h: h["embed"].update(shape="4x2"), r"tensor 'embed' has shape '4x2'"),
        (lambda h: h["norm"].update(data_offsets=[24, 32]), r"tensor 'norm' .*data_offsets \[24, 32\] span 8|overlaps"),
        (lambda h: h["norm"].update(data_offsets=[28, 36]), r"tensor 'norm' at byte 28 overlaps the tensor before it"),
        (lambda h: h["norm"].update(data_offsets=[36, 44]), r"tensor 'norm' at byte 36 leaves a hole of 4 bytes"),
        (lambda h: h["norm"].update(data_offsets=[40, 32]), r"tensor 'norm': shape \[2\] of F32 is 8 bytes"),
        (lambda h: h["norm"].pop("dtype"), r"tensor 'norm' needs dtype, shape and data_offsets"),
        (lambda h: h.update(__metadata__={"format": 1}), r"__metadata__ must map strings to strings"),
    ],
)
def test_a_lying_safetensors_header_is_refused_naming_the_tensor(tmp_path, edit, match):
    h = _ok_header()
    edit(h)
    p = tmp_path / "lie.safetensors"
    _write(p, h, bytes(48))
    with pytest.raises(CorruptFileError, match=match):
        check_weights_file(p)
    with pytest.raises(CorruptFileError):  # the capacity reader refuses it too, before reading
        embedding_capacity(p)


def test_a_duplicate_tensor_name_is_refused_in_both_formats(tmp_path):
    body = '{"embed": {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, 32]}, "embed": {"dtype": "F32", "shape": [2], "data_offsets": [32, 40]}}'
    p = tmp_path / "dup.safetensors"
    _write(p, body, bytes(40))
    with pytest.raises(CorruptFileError, match=r"tensor 'embed' is listed twice"):
        check_weights_file(p)
    g = tmp_path / "dup.gguf"
    x = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    write_gguf(g, {"token_embd.weight": x, "token_embd.weigh2": x + 1})
    raw = g.read_bytes()
    assert raw.count(b"token_embd.weigh2") == 1
    g.write_bytes(raw.replace(b"token_embd.weigh2", b"token_embd.weight"))
    with pytest.raises(CorruptFileError, match=r"tensor 'token_embd.weight' is listed twice"):
        check_weights_file(g)
    with pytest.raises(CorruptFileError, match="listed twice"):
        find_embedding(g)


@pytest.mark.parametrize("dtype", ["int64", "bool", "int32", "uint8"])
def test_an_integer_or_boolean_embedding_is_refused(tmp_path, dtype):
    import torch
    from safetensors.torch import save_file

    t = torch.arange(64).reshape(16, 4) % 3
    save_file({"model.embed_tokens.weight": t.to(getattr(torch, dtype))}, str(tmp_path / "m.safetensors"))
    with pytest.raises(ValueError, match=r"holds (I64|BOOL|I32|U8) values, not floating point"):
        embedding_capacity(tmp_path / "m.safetensors")


def test_the_header_check_is_pure():
    assert check_safetensors_header(_ok_header()) == 40
    with pytest.raises(CorruptFileError, match="expected an object"):
        check_safetensors_header([1, 2])
