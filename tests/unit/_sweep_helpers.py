"""Helpers for the sweep / crash-resume / determinism tests (not a test module).

``tiny_loader`` is importable by name (``"_sweep_helpers:tiny_loader"``) from a subprocess or a
Ray worker when ``tests/unit`` is on PYTHONPATH. It builds a tiny random model whose shape is
read from the job's model name (``"tiny-L2"`` → 2 layers), as a HookedTransformer when
TransformerLens 3.x is installed, else as a TransformerBridge (TransformerLens 4.x).

Side channels for the crash test (environment variables):
    TLG_LOAD_LOG: append each loaded job's model name to this file (one line, fsynced).
    TLG_HANG_ON: a model name; loading it writes ``<TLG_LOAD_LOG>.hang`` and sleeps 300 s.
    TLG_FAIL_ON: a model name whose load raises RuntimeError("planned failure").
"""

from __future__ import annotations

import os
import re
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))


def has_hooked_transformer() -> bool:
    try:
        from transformer_lens import HookedTransformer  # noqa: F401
    except ImportError:
        return False
    return True


def tiny_model(n_layers: int = 2, d_model: int = 16, seed: int = 0):
    import torch

    kw = dict(n_layers=n_layers, d_model=d_model, n_ctx=32, d_head=4, n_heads=4, d_mlp=32, d_vocab=53,
              act_fn="gelu", normalization_type="LN")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(seed)
        if has_hooked_transformer():
            from transformer_lens import HookedTransformer, HookedTransformerConfig

            model = HookedTransformer(HookedTransformerConfig(**kw, seed=seed))
        else:
            from transformer_lens.model_bridge import TransformerBridge

            model = TransformerBridge.boot_native(kw)
    return model.eval()


def _append_line(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (text + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def tiny_loader(job: dict):
    """Sweep loader: ``job["model"]`` like ``"tiny-L2"`` or ``"tiny-L3-d32"``."""
    name = job["model"]
    log = os.environ.get("TLG_LOAD_LOG")
    if log:
        _append_line(log, name)
    if name == os.environ.get("TLG_FAIL_ON"):
        raise RuntimeError("planned failure")
    if name == os.environ.get("TLG_HANG_ON"):
        _append_line(log + ".hang", name)
        time.sleep(300)
    m = re.fullmatch(r"tiny-L(\d+)(?:-d(\d+))?(?:-.*)?", name)
    if not m:
        raise ValueError(f"tiny_loader: unknown model name {name!r}")
    return tiny_model(int(m.group(1)), int(m.group(2) or 16))
