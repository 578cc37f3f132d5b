"""The thread counts a metric runs its kernels with: passed in by the caller, never read from the machine.

A metric's CPU work is of four kinds, each run with its own count of torch intra-op threads:

* ``"dense"``: batched products (the PGA null projections, the neighbour search's distances);
* ``"sort"``: many 1-D sorts (the PGA reference and null rank correlations);
* ``"pool"``: how many Python threads share a loop of independent sort-bound tasks (the PGA null
  loop at report sizes, each task on one torch thread; [`parallel_map`][tl_geometry.metrics.thread_choice.parallel_map]);
* ``"lapack"``: factorizations (SVD, eigh), whose last bits depend on the thread count.

A [`ThreadChoice`][tl_geometry.metrics.thread_choice.ThreadChoice] holds the four counts; a metric
function takes it as ``threads=`` and hands it down to its kernels, which apply it with
[`limit_threads`][tl_geometry.metrics.thread_choice.limit_threads] (lower torch's setting for the
block, restore it on exit, also on error). Nothing here looks at the machine's load: the
load-aware choice of a report or the CLI is made by the caller
([`tl_geometry.runtime.threads.choose`][tl_geometry.runtime.threads.choose], which reads ``/proc/loadavg``) and
passed in. Without one, a metric uses [`INHERIT`][tl_geometry.metrics.thread_choice.INHERIT], a static
choice: torch's setting for dense, sort and pool work, one thread for factorizations
(reproducible bits).

No count changes a result: sorts and the pool give the same bits on any count (each pooled task
runs the sequential loop's ops on one thread), and factorizations run on one thread unless the
caller asks otherwise.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from tl_geometry.errors import InputError

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["KINDS", "ThreadChoice", "INHERIT", "resolve", "limit_threads", "parallel_map"]

KINDS = ("dense", "sort", "pool", "lapack")
"""The kernel kinds a [`ThreadChoice`][tl_geometry.metrics.thread_choice.ThreadChoice] holds a count for."""


def _check_count(n: Any, what: str) -> None:
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise InputError(f"{what} must be a positive integer or None, got {n!r}")


@dataclass(frozen=True)
class ThreadChoice:
    """Torch intra-op threads per kernel kind (None: torch's current setting), never more than torch's setting.

    Attributes:
        dense: threads of batched products.
        sort: threads of sort-bound kernels.
        pool: Python threads sharing a loop of independent tasks (each on one torch thread);
            None: torch's setting; 1: the sequential loop.
        lapack: threads of factorizations (SVD, eigh). Default 1: LAPACK's last bits differ
            between thread counts, so one thread keeps the numbers independent of the machine.

    Raises:
        InputError: a count that is not a positive integer or None.

    Examples:
        >>> ThreadChoice(sort=1).count("sort"), ThreadChoice().count("lapack")
        (1, 1)
    """

    dense: int | None = None
    sort: int | None = None
    pool: int | None = None
    lapack: int | None = 1

    def __post_init__(self) -> None:
        for kind in KINDS:
            _check_count(getattr(self, kind), f"ThreadChoice.{kind}")

    def count(self, kind: str) -> int | None:
        """The count for ``kind`` (one of [`KINDS`][tl_geometry.metrics.thread_choice.KINDS]); None: torch's setting.

        Raises:
            InputError: an unknown kind.
        """
        if kind not in KINDS:
            raise InputError(f"unknown kernel kind {kind!r}; expected one of {list(KINDS)}")
        return getattr(self, kind)

    def kernel(self, kind: str, device: Any = "cpu"):
        """``with choice.kernel("sort", x.device):`` — run the block under
        [`limit_threads`][tl_geometry.metrics.thread_choice.limit_threads] of this kind's count when
        ``device`` is the CPU (torch's intra-op threads do not apply elsewhere: unchanged)."""
        n = self.count(kind)
        return limit_threads(n if torch.device(device).type == "cpu" else None)

    def workers(self) -> int:
        """Python threads of a pooled loop: ``pool``, at most torch's setting (the user's cap); torch's
        setting when ``pool`` is None."""
        cap = torch.get_num_threads()
        return cap if self.pool is None else min(self.pool, cap)


INHERIT = ThreadChoice()
"""What a metric uses when the caller passes no choice: torch's setting for dense, sort and pool work, one
thread for factorizations. A static choice: it does not follow the machine's load (pass
``tl_geometry.runtime.threads.choose()`` for that)."""


def resolve(threads: ThreadChoice | None) -> ThreadChoice:
    """The choice a metric runs with: ``resolve(threads) = threads``, and ``resolve(None) =``
    [`INHERIT`][tl_geometry.metrics.thread_choice.INHERIT] (the caller passed no choice).

    Raises:
        InputError: anything else than a ThreadChoice or None.
    """
    if threads is None:
        return INHERIT
    if not isinstance(threads, ThreadChoice):
        raise InputError(f"threads must be a ThreadChoice or None, got {type(threads).__name__}")
    return threads


@contextmanager
def limit_threads(n: int | None) -> Iterator[int]:
    """Run the block with at most ``n`` torch intra-op threads (None: unchanged); restore on exit.

    Never raises the current setting (the user's cap). The previous value is restored when the
    block exits, also on an exception. Yields the number of threads in effect.

    Raises:
        ValueError: ``n`` < 1.
    """
    _check_count(n, "thread count")
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


def parallel_map(fn: Callable[[T], R], items: Sequence[T], workers: int) -> list[R]:
    """``[fn(x) for x in items]`` on ``workers`` threads (this one and ``workers`` − 1 pool
    threads), each with one torch intra-op thread.

    For independent tasks made of large torch/NumPy ops (which release the GIL). Each thread
    takes the next item until none is left. The results are in the order of ``items`` and equal
    to the sequential loop's (each task runs the same ops on one thread). The first exception
    raised by a task is re-raised here once the running tasks have finished; no item is started
    after it. torch's setting is restored on exit. With ``workers`` ≤ 1, fewer than two items,
    or inside a task of another ``parallel_map``: the plain loop, in this thread, under
    ``limit_threads(1)``.

    Our choice: the pool's threads are started once and kept (idle, they cost nothing): starting
    threads for every null loop cost up to 0.1 s each on a loaded machine; one task per thread
    (not per item) keeps the submitting thread from queueing for the GIL once per item.

    Raises:
        ValueError: ``workers`` < 1.
    """
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise InputError(f"workers must be a positive integer, got {workers!r}")
    items = list(items)
    n = len(items)
    with limit_threads(1):  # also what new threads inherit (torch reads the process-wide value)
        if workers == 1 or n < 2 or getattr(_in_pool, "flag", False):
            return [fn(x) for x in items]
        results: list = [None] * n
        taken = itertools.count()
        stop = threading.Event()

        def run() -> None:
            while not stop.is_set():
                i = next(taken)  # atomic under the GIL
                if i >= n:
                    return
                try:
                    results[i] = fn(items[i])
                except BaseException:
                    stop.set()
                    raise

        ex = _executor(min(workers, n) - 1)
        futures = [ex.submit(run) for _ in range(min(workers, n) - 1)]
        _in_pool.flag = True
        try:
            run()
        except BaseException:
            stop.set()
            raise
        finally:
            _in_pool.flag = False
            wait(futures)  # the running items finish before torch's setting is restored
        for f in futures:
            exc = f.exception()
            if exc is not None:
                raise exc
        return results


_in_pool = threading.local()
_pool_lock = threading.Lock()
_pool: list = [None, 0]  # [ThreadPoolExecutor | None, its number of workers]


def _one_thread() -> None:
    """Pool-thread initializer: torch (OpenMP, MKL) single-threaded in this thread."""
    _in_pool.flag = True
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)


def _executor(workers: int) -> ThreadPoolExecutor:
    with _pool_lock:
        ex, n = _pool
        if ex is None or n != workers:
            if ex is not None:
                ex.shutdown(wait=False)
            ex = ThreadPoolExecutor(workers, thread_name_prefix="tl_geometry", initializer=_one_thread)
            _pool[:] = [ex, workers]
        return ex


def _forget_pool() -> None:  # a forked child has none of the parent's threads
    _pool[:] = [None, 0]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)
