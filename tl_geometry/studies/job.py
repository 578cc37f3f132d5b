"""One model of a study, the body of both executors: its texts, the report's metrics, pooled representations."""

from __future__ import annotations

import gc
import json
import logging
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tl_geometry.errors import InputError
from tl_geometry.studies.models import load_study_model

logger = logging.getLogger(__name__)


def _split_passages(doc: str, size: int = 600) -> list[str]:
    words, out, cur = doc.split(), [], []
    n = 0
    for w in words:
        cur.append(w)
        n += len(w) + 1
        if n >= size:
            out.append(" ".join(cur))
            cur, n = [], 0
    return out


def study_texts(corpus: Any = "pydoc", *, n_texts: int = 64, seed: int = 0, encoding: str = "utf-8") -> list[str]:
    """The texts every model of a study reads for the convergence matrix: passages of about 600
    characters cut at word boundaries from the corpus, ``n_texts`` of them drawn with ``seed``.
    Each model tokenizes them with its own tokenizer (our choice: the first 64 tokens are kept)."""
    from tl_geometry.io import corpus as corpus_mod

    passages = [
        p
        for d in corpus_mod.texts(corpus, encoding=encoding, max_chars=corpus_mod.chars_for(n_texts * 150))
        for p in _split_passages(d)
    ]
    if len(passages) < n_texts:
        raise InputError(f"corpus has {len(passages)} passages of ~600 characters; the study needs n_texts={n_texts}")
    rng = random.Random(seed)
    return [passages[i] for i in sorted(rng.sample(range(len(passages)), n_texts))]


def _pooled_reps(model: Any, texts: Sequence[str], k: int) -> dict[str, Any]:
    """Mean-pooled vectors per text at the ``DEPTHS`` hooks and the top-k readout basis."""
    from tl_geometry import capture
    from tl_geometry.families.pga.convergence import pooled
    from tl_geometry.metrics.pga import readout_basis
    from tl_geometry.studies.convergence import DEPTHS, encode

    n = int(model.cfg.n_layers)
    hooks = {tag: f"blocks.{max(0, round(d * n) - 1)}.hook_resid_post" for tag, d in DEPTHS.items()}
    toks, mask = _text_tokens(model, texts, max_len=64)
    reps = pooled(model, toks, sorted(set(hooks.values())), pooling="mean", attention_mask=mask)
    W_U = capture.weight(model, "W_U")
    kk = int(min(k, W_U.shape[0] - 1))
    V = readout_basis(W_U.detach().float().cpu(), kk)
    return {
        "depths": {tag: {"hook": h, "pooled": encode(reps[h].cpu().numpy())} for tag, h in hooks.items()},
        "readout": encode(V.cpu().numpy()),
    }


def _text_tokens(model: Any, texts: Sequence[str], *, max_len: int):
    """Each text with the model's own tokenizer, as ``tl_geometry.io.corpus.tokens`` tokenizes (BOS
    prepended when the model's config asks for it), cut to ``max_len`` tokens, right-padded with
    the BOS id (masked out); returns ``(tokens, attention_mask)``."""
    import torch

    from tl_geometry.io.corpus import _encode

    tok = getattr(model, "tokenizer", None)
    if tok is None:
        raise InputError("the model has no tokenizer: a study compares models on text")
    bos = getattr(tok, "bos_token_id", None)
    prepend = bool(getattr(model.cfg, "default_prepend_bos", True)) and bos is not None
    max_len = min(max_len, int(model.cfg.n_ctx))
    rows = []
    for t in texts:
        ids = list(_encode(tok, t))
        rows.append(([bos] if prepend else []) + ids[: max_len - (1 if prepend else 0)])
    width = max(len(r) for r in rows)
    tokens = torch.full((len(rows), width), int(bos or 0), dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, r in enumerate(rows):
        tokens[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, : len(r)] = 1
    return tokens, mask


_TIMING_KEYS = ("load_s", "total_s", "timings_s", "elapsed_s")


def _trim_heap() -> None:
    """Give freed heap pages back to the OS (glibc's ``malloc_trim``), so that the next model of the
    study does not stack on the previous one's freed but still mapped memory. No-op elsewhere."""
    import ctypes
    import sys

    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # pragma: no cover - musl or another libc
            pass


def run_study_job(params: Mapping[str, Any]) -> dict[str, Any]:
    """One model of a study (the body of both executors): load, the report's metrics, pooled reps.

    Returns ``{"rows", "provenance", "reps", "seconds"}`` (JSON-able; ``seconds`` is kept out of the
    study's tables so that a rerun writes the same bytes).
    """
    from tl_geometry.runs.pipeline import run_report

    t0 = time.perf_counter()
    model = load_study_model(params)
    load_s = time.perf_counter() - t0
    try:
        report = run_report(
            model,
            corpus=params["corpus"],
            corpus_encoding=params["corpus_encoding"],
            n_seqs=params["n_seqs"],
            seq_len=params["seq_len"],
            seed=params["seed"],
            metrics=params["metrics"],
            options=params["options"],
            fast=params["fast"],
            out=None,
            figures=False,
            device=params.get("device", "cpu"),
            progress=False,
        )
        texts = study_texts(
            params["corpus"], n_texts=params["n_texts"], seed=params["seed"], encoding=params["corpus_encoding"]
        )
        reps = _pooled_reps(model, texts, params["convergence_k"])
    finally:
        del model
        gc.collect()
        _trim_heap()
    prov = {k: v for k, v in report.provenance.items() if k not in _TIMING_KEYS}
    return {
        "rows": [r.to_dict() for r in report.rows],
        "provenance": json.loads(json.dumps(prov, default=str)),
        "reps": reps,
        "seconds": {"load": round(load_s, 2), "total": round(time.perf_counter() - t0, 2)},
    }
