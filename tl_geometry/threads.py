"""How many CPU threads each of the library's kernels uses.

PyTorch runs every CPU op with ``torch.get_num_threads()`` intra-op (OpenMP) threads, by default
one per core. That is right for large matmuls on a quiet machine and wrong for the many small
sorts and products of the PGA null loop: when another process competes for the cores, a team
thread that is descheduled makes the others wait at every op's barrier, and the same work costs
about 4× more CPU (measured in ``benchmarks/bench_contention.py``). So each kernel picks its own
thread count, never more than the process-wide setting:

* the user's setting is the cap: ``OMP_NUM_THREADS``, ``torch.set_num_threads(n)`` or the CLI's
  ``--threads n`` (:func:`using_threads`) are honoured; the library never raises them;
* kernels made of many small sorts / products (the PGA null loop: one sort of N(N−1)/2
  similarities per null subspace) run single-threaded inside :func:`limit_threads`, which
  restores the previous setting on exit, also on error;
* large dense work (model forward/backward passes, the Gram matrices of ε) keeps the full setting.

Our choice, measured on a 2-core machine: the single-threaded null loop costs at most ~10% wall
time on a quiet machine and stays within ~1.3× of its quiet time with one competing process
(``docs/howto/report.md`` has the figures). ``TL_GEOMETRY_THREADS=inherit`` in the environment
(or :data:`POLICY` = ``"inherit"``) turns the per-kernel choice off: every kernel then uses
torch's setting, as before this module existed (for benchmarks and comparisons).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

import torch

__all__ = ["POLICY", "SORT_THREADS", "kernel_threads", "limit_threads", "set_threads", "using_threads"]

#: "auto": each kernel chooses (≤ torch's setting); "inherit": every kernel uses torch's setting.
POLICY = os.environ.get("TL_GEOMETRY_THREADS", "auto").strip().lower() or "auto"
#: Threads for sort-bound kernels (the PGA null loop).
SORT_THREADS = 1

_KERNELS = {"sort": lambda: SORT_THREADS, "dense": lambda: torch.get_num_threads()}


def _policy() -> str:
    if POLICY not in ("auto", "inherit"):
        raise ValueError(f"TL_GEOMETRY_THREADS must be 'auto' or 'inherit', got {POLICY!r}")
    return POLICY


def kernel_threads(kind: str) -> int:
    """Threads the library uses for a kernel of this ``kind`` ("sort" or "dense"), ≤ torch's setting.

    Raises:
        ValueError: an unknown kind.
    """
    if kind not in _KERNELS:
        raise ValueError(f"unknown kernel kind {kind!r}; expected one of {sorted(_KERNELS)}")
    cap = torch.get_num_threads()
    if _policy() == "inherit":
        return cap
    return max(1, min(cap, int(_KERNELS[kind]())))


@contextmanager
def limit_threads(n: int | None) -> Iterator[int]:
    """Run the block with at most ``n`` torch intra-op threads (None: unchanged); restore on exit.

    Never raises the current setting (the user's cap). The previous value is restored when the
    block exits, also on an exception. Yields the number of threads in effect.

    Raises:
        ValueError: ``n`` < 1.
    """
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise ValueError(f"thread count must be a positive integer or None, got {n!r}")
    prev = torch.get_num_threads()
    want = prev if n is None else min(n, prev)
    if want == prev:
        yield prev
        return
    torch.set_num_threads(want)
    try:
        yield want
    finally:
        torch.set_num_threads(prev)


@contextmanager
def using_threads(n: int | None) -> Iterator[int]:
    """Run the block with torch's intra-op threads set to ``n`` (None: unchanged), then restore.

    Unlike :func:`limit_threads` it may raise the setting: it is the user's choice (the CLI's
    ``--threads``), which then caps every kernel.

    Raises:
        ValueError: ``n`` < 1.
    """
    prev = torch.get_num_threads()
    now = set_threads(n)
    try:
        yield now
    finally:
        if torch.get_num_threads() != prev:
            torch.set_num_threads(prev)


def set_threads(n: int | None) -> int:
    """Set torch's intra-op threads for the process (the cap every kernel honours); None: leave it.

    What the CLI's ``--threads`` calls. Returns the setting in effect.

    Raises:
        ValueError: ``n`` < 1.
    """
    if n is None:
        return torch.get_num_threads()
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"--threads must be a positive integer, got {n!r}")
    torch.set_num_threads(n)
    return torch.get_num_threads()
