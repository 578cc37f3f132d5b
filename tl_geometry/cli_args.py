"""Arguments shared by the sub-commands, and checks of them that run before any model is loaded.

Argument groups (one definition each, used by ``report``, ``pga``, ``agop`` and ``id``):
[`add_model_text`][tl_geometry.cli_args.add_model_text] and [`add_device_threads`][tl_geometry.cli_args.add_device_threads].

``pga``, ``agop`` and ``sweep`` call these first, so a bad ``--k 0``, ``--batch-size 0``,
``--n-seqs 0``, ``--layers 99`` or a missing corpus file is refused in a fraction of a second
instead of after a 12–60 s model load. Each check goes through `tl_geometry._checks` (the one
validation layer) and names the flag.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from tl_geometry import _checks
from tl_geometry.errors import InputError


def check_flags(args: Any, table: Mapping[str, _checks.Check], *, lists: Sequence[str] = ()) -> None:
    """Check ``args.<dest>`` for each ``dest`` in ``table``; the error names the flag (``--dest``).

    ``lists``: flags taking several values (``nargs``), each value checked; absent (None) is fine.
    """
    for dest, check in table.items():
        value = getattr(args, dest, None)
        if dest in lists and value is None:
            continue
        if isinstance(value, list):
            for v in value:
                check(v, "--" + dest.replace("_", "-") + " (each value)")
        else:
            check(value, "--" + dest.replace("_", "-"))


def check_corpus(corpus: Any, encoding: str = "utf-8") -> None:
    """A corpus source name, or a readable text file that decodes with ``encoding``."""
    from tl_geometry import corpus as corpus_mod

    docs = corpus_mod.texts(corpus, encoding=encoding)  # unknown source, missing file, decode errors
    if not any(t.strip() for t in docs):
        raise InputError(f"--corpus {str(corpus)!r} holds no text")


def check_device(device: Any) -> None:
    """A device torch knows and this machine has."""
    from tl_geometry.models import check_device as _check

    _check(device)


def model_shape(model: str) -> tuple[int | None, int | None, int | None]:
    """(n_layers, d_model, n_ctx) of a model name or path, read without loading weights (None where
    not readable cheaply, e.g. a hub name offline; the load then checks)."""
    from tl_geometry.models import peek

    shape = peek(model)
    if shape is not None:
        return shape.n_layers, shape.d_model, shape.n_ctx
    if isinstance(model, str) and not os.path.exists(model):
        from tl_geometry.pipeline import config_for

        cfg = config_for(model)
        if cfg is not None:
            return getattr(cfg, "n_layers", None), getattr(cfg, "d_model", None), getattr(cfg, "n_ctx", None)
    return None, None, None


def check_model_fit(
    model: str, *, layers: Sequence[int] | None = None, k: int | None = None, seq_len: int | None = None
) -> None:
    """``--layers`` within the model's n_layers, ``--k`` below its d_model and ``--seq-len`` within
    its context, read from its files (or hub config) before any load."""
    n_layers, d_model, n_ctx = model_shape(model)
    if layers and n_layers is not None:
        bad = [layer for layer in layers if not 0 <= layer < n_layers]
        if bad:
            raise InputError(
                f"--layers {' '.join(map(str, bad))} out of range: model {model} has n_layers={n_layers} "
                f"(layers 0 … {n_layers - 1})"
            )
    if k is not None and d_model is not None and not 1 <= k < d_model:
        raise InputError(f"--k must satisfy 1 <= k < d_model={d_model} (model {model}), got {k}")
    if seq_len is not None and n_ctx is not None and seq_len > n_ctx:
        raise InputError(f"--seq-len {seq_len} exceeds the context of model {model} (n_ctx={n_ctx})")


def add_device_threads(p: Any) -> None:
    """``--device`` and ``--threads``, the same words in every command that runs a model."""
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads torch may use (default: OMP_NUM_THREADS, else one per core); the "
        "library runs its sort-bound kernels on one of them",
    )


def add_model_text(p: Any, *, n_seqs: int, seq_len: int) -> None:
    """``--model``, ``--corpus``, ``--corpus-encoding``, ``--n-seqs`` and ``--seq-len``: the model and
    the text every command that runs a model reads (the defaults of the sizes are the command's)."""
    p.add_argument(
        "--model",
        default="smollm2-135m",
        help="offline 'smollm2-135m' (default), a local .gguf file or Hugging Face model directory, "
        "or any TransformerLens model name (needs the hub)",
    )
    p.add_argument("--corpus", default="pydoc", help="'pydoc' (default), 'shakespeare' or a text file")
    p.add_argument(
        "--corpus-encoding",
        default="utf-8",
        help="encoding of a --corpus text file (default utf-8, strict; e.g. latin-1, cp1252)",
    )
    p.add_argument("--n-seqs", type=int, default=n_seqs, help=f"sequences of text (default {n_seqs})")
    p.add_argument("--seq-len", type=int, default=seq_len, help=f"tokens per sequence (default {seq_len})")
