"""How many CPU threads each of the library's kernels uses, chosen from the machine's load.

PyTorch runs every CPU op with ``torch.get_num_threads()`` intra-op (OpenMP) threads, by default
one per core. That is right for large matmuls on a quiet machine and wrong for the many small
sorts and products of the PGA null loop: when another process competes for the cores, a team
thread that is descheduled makes the others wait at every op's barrier, and the same work costs
about 4× more CPU (measured in ``benchmarks/bench_contention.py``). So each kernel gets its own
thread count, never more than the process-wide setting.

This module holds the load-aware *policy*; the metrics never read it. A metric function takes a
[`ThreadChoice`][tl_geometry.metrics.thread_choice.ThreadChoice] (``threads=``), pure data,
and applies it ([`tl_geometry.metrics.thread_choice`][tl_geometry.metrics.thread_choice]);
the model-facing callers (``tg.pga``, ``tg.spectral``, ``tg.nfa``, ``tg.intrinsic_dimension``,
hence ``tg.analyze``, the report and the CLI) pass [`choose`][tl_geometry.runtime.threads.choose] ``()``,
the choice below made from the load at that moment; the capture layer uses
[`kernel`][tl_geometry.runtime.threads.kernel] and [`per_step`][tl_geometry.runtime.threads.per_step] directly.

* the user's setting is the cap: ``OMP_NUM_THREADS``, ``torch.set_num_threads(n)`` or the CLI's
  ``--threads n`` ([`using_threads`][tl_geometry.runtime.threads.using_threads]) are honoured; the library never raises them;
* kernels made of many sorts (the PGA null loop: one sort of N(N−1)/2 similarities per null
  subspace) run single-threaded inside [`limit_threads`][tl_geometry.metrics.thread_choice.limit_threads] (which restores the previous
  setting on exit, also on error) whenever another process wants a core, or the machine does
  not report its load; on a free machine they keep the user's setting;
* loops of many independent sort-bound tasks (the PGA null loop at report sizes) run on a pool
  of [`pool_threads`][tl_geometry.runtime.threads.pool_threads] Python threads, each single-threaded inside torch and NumPy
  ([`parallel_map`][tl_geometry.metrics.thread_choice.parallel_map]): no OpenMP team, so no thread spins at a barrier waiting for one that
  another process descheduled, and a quiet machine's cores are all used (a 1-D sort is
  single-threaded anyway);
* factorizations (SVD, eigh: the PGA centering, readout bases, spectra) always run on
  [`LAPACK_THREADS`][tl_geometry.runtime.threads.LAPACK_THREADS] (one) thread: their last bits depend on the thread count, so a count
  chosen from the load would make the numbers depend on the load;
* dense work (model forward/backward passes, batched projections) uses the user's setting while
  the cores are free, and only the free cores (at least one) while other processes want them:
  [`free_cores`][tl_geometry.runtime.threads.free_cores] looks at the number of runnable threads on the machine (``/proc/loadavg``),
  again at most every [`LOAD_TTL_S`][tl_geometry.runtime.threads.LOAD_TTL_S] seconds, before each batch.

Our choice, measured on a 2-core machine (figures in ``docs/howto/report.md``). ``TL_GEOMETRY_THREADS=inherit`` in the environment
(or [`POLICY`][tl_geometry.runtime.threads.POLICY] = ``"inherit"``) turns the per-kernel choice off: every kernel then uses
torch's setting, as before this module existed (for benchmarks and comparisons).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import torch

from tl_geometry.errors import InputError
from tl_geometry.metrics.thread_choice import ThreadChoice, limit_threads, parallel_map

T = TypeVar("T")

__all__ = [
    "POLICY",
    "SORT_THREADS",
    "LAPACK_THREADS",
    "LOAD_TTL_S",
    "BUSY_TTL_S",
    "free_cores",
    "kernel",
    "kernel_threads",
    "per_step",
    "limit_threads",
    "set_threads",
    "using_threads",
    "pool_threads",
    "parallel_map",
    "choose",
    "ThreadChoice",
]

POLICY = os.environ.get("TL_GEOMETRY_THREADS", "auto").strip().lower() or "auto"
""""auto": each kernel chooses (≤ torch's setting); "inherit": every kernel uses torch's setting."""
SORT_THREADS = 1
"""Threads for sort-bound kernels (the PGA null loop) while other processes want the cores."""

LOAD_TTL_S = 0.5
"""How long one look at the machine's load is reused (seconds): when all cores were free, and when some were not."""
BUSY_TTL_S = 5.0
_load_cache: list[float] = [-1.0, 0.0]  # [time of the look, cores free for us]


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _runnable_now() -> int | None:
    """Runnable threads on the machine right now (/proc/loadavg's 4th field), None if unknown."""
    try:
        with open("/proc/loadavg") as f:
            return int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None


def _own_running() -> int:
    """Threads of this process that are running or runnable now (state R in /proc/self/task), at
    least 1 (the caller): torch's OpenMP workers spin for 5–10 ms after each op and are counted
    in /proc/loadavg like anybody else's."""
    n = 0
    try:
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                    stat = f.read()
            except OSError:  # the thread ended
                continue
            if stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] == b"R":
                n += 1
    except OSError:  # pragma: no cover - not Linux
        return 1
    return max(1, n)


def free_cores() -> int | None:
    """Cores not wanted by other processes: usable cores − (runnable threads − this process's own).

    Our choice: after 1 ms, three looks 1 ms apart, each the machine's runnable threads
    (/proc/loadavg) minus this process's running ones (`_own_running`: our OpenMP workers
    still spin after an op, and counting them as others' halved every dense kernel on a quiet
    machine), the largest count of others kept: a busy machine is what must not be missed (a
    team too large for the free cores costs 5–30×; one thread on a free machine costs at most the
    core count). An answer is reused for [`LOAD_TTL_S`][tl_geometry.runtime.threads.LOAD_TTL_S], one that finds other work for
    `BUSY_TTL_S` (others' jobs come in bursts). None where the kernel does not say (not
    Linux).
    """
    import time

    now = time.monotonic()
    ttl = LOAD_TTL_S if _load_cache[1] >= _usable_cores() else BUSY_TTL_S
    if now - _load_cache[0] < ttl:
        return int(_load_cache[1])
    others = []
    for _ in range(3):
        time.sleep(0.001)
        r = _runnable_now()
        if r is None:
            return None
        others.append(max(0, r - _own_running()))
    free = max(0, _usable_cores() - max(others))
    _load_cache[:] = [time.monotonic(), free]
    return free


def _dense_threads() -> int:
    """Our choice: the user's setting while the cores are free; as many as are free (at least one)
    when other processes want them — a team of OpenMP threads larger than the free cores waits at
    every op for a descheduled member (measured: 10–30× slower model passes on 2 busy cores)."""
    free = free_cores()
    return torch.get_num_threads() if free is None else max(1, free)


def _sort_threads() -> int:
    """Our choice: the user's setting only while every core is free; [`SORT_THREADS`][tl_geometry.runtime.threads.SORT_THREADS] as soon
    as another process wants one, or when the machine does not say (a parallel sort costs ~4× the
    CPU beside one competing process)."""
    cap = torch.get_num_threads()
    free = free_cores()
    return cap if free is not None and free >= cap else SORT_THREADS


def _pool_threads() -> int:
    """Our choice: the user's setting, at most the usable cores, whatever the load. The workers
    share nothing but the GIL (released inside every large torch/NumPy op), so beside a competing
    process they lose only their fair share of the cores, not CPU to spinning (measured in
    ``benchmarks/bench_contention.py``)."""
    return min(torch.get_num_threads(), _usable_cores())


LAPACK_THREADS = 1
"""Threads of the "lapack" kernels (factorizations whose last bits depend on the thread count)."""


def _lapack_threads() -> int:
    """Our choice: [`LAPACK_THREADS`][tl_geometry.runtime.threads.LAPACK_THREADS] (one), whatever the load. LAPACK's SVD and eigh give
    different last bits on 1 and 2 threads (measured: 1024 × 576 SVD, 576² eigh), so a
    load-dependent count made a report's numbers depend on the machine's load (PGA's readout
    basis, PC1 overlap, spectra), and shared vs separate capture differ at 1e-15. One thread
    costs 0.05 s per 1024 × 576 SVD on this machine and is immune to other processes."""
    return LAPACK_THREADS


_KERNELS = {"sort": _sort_threads, "dense": _dense_threads, "pool": _pool_threads, "lapack": _lapack_threads}


def _policy() -> str:
    if POLICY not in ("auto", "inherit"):
        raise InputError(f"TL_GEOMETRY_THREADS must be 'auto' or 'inherit', got {POLICY!r}")
    return POLICY


def kernel_threads(kind: str) -> int:
    """Threads the library uses for a kernel of this ``kind`` ("sort", "dense", "pool" or "lapack"), ≤ torch's setting.

    Raises:
        ValueError: an unknown kind.
    """
    if kind not in _KERNELS:
        raise InputError(f"unknown kernel kind {kind!r}; expected one of {sorted(_KERNELS)}")
    cap = torch.get_num_threads()
    if _policy() == "inherit":
        return cap
    return max(1, min(cap, int(_KERNELS[kind]())))


def kernel(kind: str, device: Any = "cpu"):
    """``with kernel("dense", x.device):`` — run the block with [`kernel_threads`][tl_geometry.runtime.threads.kernel_threads] of that kind
    when ``device`` is the CPU (torch's intra-op threads do not apply elsewhere: unchanged)."""
    on_cpu = torch.device(device).type == "cpu"
    return limit_threads(kernel_threads(kind) if on_cpu else None)


def per_step(iterable: Iterable[T], kind: str = "dense") -> Iterator[T]:
    """Iterate ``iterable``; the loop body of each step runs under [`kernel`][tl_geometry.runtime.threads.kernel] ``(kind)``,
    chosen afresh per step (so a long loop follows the machine's load). The setting is restored
    when the loop ends, breaks or raises."""
    for item in iterable:
        with kernel(kind):
            yield item


@contextmanager
def using_threads(n: int | None) -> Iterator[int]:
    """Run the block with torch's intra-op threads set to ``n`` (None: unchanged), then restore.

    Unlike [`limit_threads`][tl_geometry.metrics.thread_choice.limit_threads] it may raise the setting: it is the user's choice (the CLI's
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


MAX_THREADS = 65536
"""The most threads ``--threads`` accepts (torch overflows above 2**31 - 1; no machine has more)."""


def set_threads(n: int | None) -> int:
    """Set torch's intra-op threads for the process (the cap every kernel honours); None: leave it.

    What the CLI's ``--threads`` calls. Returns the setting in effect.

    Raises:
        ValueError: ``n`` < 1.
    """
    if n is None:
        return torch.get_num_threads()
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_THREADS:
        raise InputError(f"--threads must be a positive integer, got {n!r} (at most {MAX_THREADS})")
    torch.set_num_threads(n)
    return torch.get_num_threads()


def pool_threads() -> int:
    """Workers [`parallel_map`][tl_geometry.metrics.thread_choice.parallel_map] should use here: [`kernel_threads`][tl_geometry.runtime.threads.kernel_threads] ``("pool")``, or 1
    (the sequential loop) when [`POLICY`][tl_geometry.runtime.threads.POLICY] is ``"inherit"``."""
    return 1 if _policy() == "inherit" else kernel_threads("pool")


def choose() -> ThreadChoice:
    """The [`ThreadChoice`][tl_geometry.metrics.thread_choice.ThreadChoice] this machine's load calls for now: what
    the model-facing callers pass to the metrics (``threads=choose()``).

    Each count is [`kernel_threads`][tl_geometry.runtime.threads.kernel_threads] of its kind at this moment (the load is
    looked at once, [`free_cores`][tl_geometry.runtime.threads.free_cores]), the pool [`pool_threads`][tl_geometry.runtime.threads.pool_threads]; with
    [`POLICY`][tl_geometry.runtime.threads.POLICY] ``"inherit"``: torch's setting for every kernel, factorizations
    included, and the sequential loop (pool 1). The choice is static once made: a caller chooses
    afresh per hook, so a long report follows the machine's load hook by hook.

    Raises:
        ValueError: an unknown ``TL_GEOMETRY_THREADS``.
    """
    if _policy() == "inherit":
        return ThreadChoice(dense=None, sort=None, pool=1, lapack=None)
    return ThreadChoice(
        dense=kernel_threads("dense"),
        sort=kernel_threads("sort"),
        pool=kernel_threads("pool"),
        lapack=kernel_threads("lapack"),
    )
