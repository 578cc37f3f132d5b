"""Is the Hugging Face hub usable right now? One answer for every module that may call it.

``offline()`` reads the flags (``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` and huggingface_hub's
own constant); ``reachable()`` probes the hub endpoint. DNS resolution has no timeout of its own
(a dead resolver takes ~20 s), so the probe runs in a daemon thread abandoned after ``timeout``;
the answer is cached for 60 s per host.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from urllib.parse import urlparse

_TRUE = {"1", "ON", "YES", "TRUE"}
_REACH: dict[str, tuple[float, bool]] = {}


def offline() -> bool:
    """True when the user asked for offline mode (environment or huggingface_hub constant)."""
    env = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    if env.strip().upper() in _TRUE:
        return True
    try:
        from huggingface_hub import constants
    except ImportError:  # pragma: no cover - transformers depends on it
        return False
    return bool(constants.HF_HUB_OFFLINE)


def endpoint_host() -> str:
    try:
        from huggingface_hub import constants

        return urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    except ImportError:  # pragma: no cover
        return "huggingface.co"


def reachable(timeout: float = 3.0) -> bool:
    """True when the hub endpoint accepts a TCP connection within ``timeout`` seconds."""
    host = endpoint_host()
    hit = _REACH.get(host)
    if hit and time.monotonic() - hit[0] < 60:
        return hit[1]
    result: list[bool] = []

    def probe():
        try:
            socket.create_connection((host, 443), timeout=timeout).close()
            result.append(True)
        except OSError:
            result.append(False)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout)
    ok = bool(result and result[0])
    _REACH[host] = (time.monotonic(), ok)
    return ok


@contextlib.contextmanager
def quiet():
    """Silence huggingface_hub's and transformers' warnings (HTTP retries, "thrown while
    requesting ...") for a block; errors still raise. Use around every call that may reach the hub:
    our own messages say what failed and what to do."""
    import logging

    loggers = [logging.getLogger(n) for n in ("huggingface_hub", "transformers")]
    levels = [lg.level for lg in loggers]
    verbosity = None
    try:
        from transformers.utils import logging as hf_logging

        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
    except ImportError:  # pragma: no cover - transformers is a dependency
        hf_logging = None
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
        if hf_logging is not None and verbosity is not None:
            hf_logging.set_verbosity(verbosity)
