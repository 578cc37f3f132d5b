"""Is the Hugging Face hub usable right now? One answer for every module that may call it.

``offline()`` reads the flags (``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` and huggingface_hub's
own constant); ``reachable()`` probes the hub endpoint. DNS resolution has no timeout of its own
(a dead resolver takes ~20 s), so the probe runs in a daemon thread abandoned after ``timeout``;
the answer is cached for 60 s per host.

The local cache: ``cache_dir()`` (huggingface_hub's ``HF_HUB_CACHE``), ``repo_cache(repo_id)``
(a repository's folder in it, ``models--ORG--NAME``), ``repo_cached(repo_id)``, and
``forced_offline()``, a context manager that makes huggingface_hub read the cache only.
[`HubUnavailableError`][tl_geometry.io.hub.HubUnavailableError] is the error for "the hub cannot be used and the files are not cached".
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

from tl_geometry.errors import TLGeometryError

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


class HubUnavailableError(OSError, TLGeometryError):
    """The Hugging Face hub cannot be used (offline / unreachable) and the files are not cached."""


def cache_dir() -> Path:
    """huggingface_hub's cache folder (``HF_HUB_CACHE``), read when called."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def repo_cache(repo_id: str, root: str | os.PathLike | None = None) -> Path:
    """The folder of a model repository in the hub cache: ``<cache>/models--ORG--NAME``."""
    return Path(root if root is not None else cache_dir()) / f"models--{repo_id.replace('/', '--')}"


def repo_cached(repo_id: str) -> bool:
    """True when the repository has a folder in the local hub cache."""
    return repo_cache(repo_id).is_dir()


@contextlib.contextmanager
def forced_offline():
    """huggingface_hub offline mode on for a block (it reads the local cache only), then restored."""
    from huggingface_hub import constants

    old = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = old
