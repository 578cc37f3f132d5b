"""The shape sweep's training text as bytes: the train/test split and its windows."""

from __future__ import annotations

import logging

import torch
from torch import Tensor

from tl_geometry.errors import InputError

logger = logging.getLogger(__name__)

__all__ = ["byte_data"]


def byte_data(source: str = "pydoc+shakespeare", *, test_fraction: float = 0.1) -> tuple[Tensor, Tensor]:
    """(train, test) uint8→long byte tensors of real text; the test split is the last fraction."""
    from pathlib import Path

    from tl_geometry.io import corpus

    names = [s for s in source.split("+") if s]
    parts = []
    for s in names:
        if s in corpus.SOURCES:
            try:
                parts += corpus.texts(s)
            except ValueError as exc:
                if len(names) == 1:
                    raise
                logger.warning("skipping text source %r: %s", s, exc)  # e.g. a shakespeare build without texts
        elif Path(s).is_file():
            parts += corpus.texts(s)
        else:
            parts += _hf_texts(s)
    if not parts:
        raise InputError(f"source {source!r} gave no text")
    data = torch.frombuffer(bytearray("\n\n".join(parts).encode("utf-8")), dtype=torch.uint8).long()
    n_test = int(len(data) * test_fraction)
    if n_test < 2 or len(data) - n_test < 2:
        raise InputError(f"source {source!r} has only {len(data)} bytes")
    return data[:-n_test], data[-n_test:]


def _hf_texts(name: str) -> list[str]:
    try:
        import datasets
    except ImportError:
        raise InputError(
            f"unknown text source {name!r}: not pydoc/shakespeare/a file, and `datasets` is not installed"
        ) from None
    try:
        ds = datasets.load_dataset(name, split="train")
    except Exception as exc:  # offline, unknown name, ...
        raise InputError(
            f"could not load text source {name!r} as a Hugging Face dataset: {type(exc).__name__}: {exc}"
        ) from None
    col = "text" if "text" in ds.column_names else ds.column_names[0]
    return [t for t in ds[col] if t]


def _windows(data: Tensor, n: int, length: int, gen: torch.Generator) -> Tensor:
    if len(data) <= length:
        raise InputError(f"text of {len(data)} bytes is shorter than a window of {length + 1}")
    starts = torch.randint(0, len(data) - length, (n,), generator=gen)
    return torch.stack([data[s : s + length] for s in starts.tolist()])


def _eval_windows(data: Tensor, n: int | None, length: int, *, shifted: bool = False) -> Tensor:
    """Sequential non-overlapping windows; ``shifted``: length+1 bytes each (input + next-byte
    targets, consecutive windows sharing one byte, as the authors' SequentialWindowDataset)."""
    span = length + 1 if shifted else length
    k = (len(data) - 1) // length if shifted else len(data) // length
    k = k if n is None else min(int(n), k)
    if k < 1:
        raise InputError(f"split of {len(data)} bytes is shorter than one window of {span}")
    if shifted:
        return data[: k * length + 1].unfold(0, span, length)
    return data[: k * length].view(k, length)
