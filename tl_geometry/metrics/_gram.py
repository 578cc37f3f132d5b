"""Block kernels of [`tl_geometry.SimilarityAccumulator`][tl_geometry.metrics.capacity.SimilarityAccumulator]: centred Gram moments of unit rows.

Private module (no public API). Every kernel adds one block of rows x (b, d) to the state

    n,  sr = Σ r_i,  C = Σ r_i r_iᵀ  (float64),   r_i = u_i − c,  u_i = x_i / ‖x_i‖,

where c is a fixed centre (float64, exactly representable in float32: the mean unit row of the first
block). The Gram of the unit rows is then ``G = n ccᵀ + c srᵀ + sr cᵀ + C`` and ``Σ u_i = n c + sr``.
Centring is our choice: it keeps the float32 work (C) on the small residuals r_i when the rows share a
dominant direction (large μ, small σ), where ``σ² = E[cos²] − μ²`` would otherwise cancel the float32
error of E[cos²] up by μ²/σ².

Two kernels:

* `add_block_float64` — everything in float64 (the reference path; small blocks, float64 input,
  and any block whose rows need rescaling: norms that overflow or underflow).
* `add_block_mixed` — the float32 path, in parts of PART_ROWS rows, ``workers`` parts at once (default:
  torch's setting), each in one thread with BLAS single-threaded; a chunk of fewer parts than workers, or
  of rows so wide that their Grams would not fit in HELD_BYTES, runs one part at a time, each ?syrk on
  ``workers`` BLAS threads. A part's preparation runs in SUB_ROWS-row
  steps that stay in cache: each step copies its rows to float64, forms ‖x_i‖² in float64 (the products
  of float32 entries are exact), checks the norms for finiteness and range (which is also the NaN/inf
  check: a row holding NaN or inf has a non-finite norm), writes the centred unit rows
  r_i = x_i·fl(1/‖x_i‖) − c, rounded to float32, into the worker's buffer R and sums them (float32 over
  64 rows, then float64). Then one ?syrk ``RᵀR`` gives the part's share of C; the parts' float32 results
  are added into the float64 state in part order, so on the parallel path the bits depend neither on the
  worker count nor on how the rows are cut into blocks of whole parts.
  Diagonal terms use ‖u_i‖ = 1. A block with zero rows or norms out of range goes to
  `_add_block_general` (zero rows dropped, rescaling in float64, the NaN/inf error naming the row);
  the state is updated only once a whole block is accepted.

Error of the mixed path (u = 2⁻²⁴, b the block rows, per pair cosine ĉ_ij of the float32 residuals):

* rounding the centred unit rows: ``|ĉ_ij − c_ij| ≤ (2u + 2u·‖x‖·|1/‖x‖ − fl|) ≲ 3u·(‖r_i‖ + ‖r_j‖ + ‖r_i‖‖r_j‖)``
  to first order — relative to the residuals, not to 1, because c is exact in float64;
* the norm: ‖x_i‖² is summed in float64 from exact products, so its own error is ~d·2⁻⁵³; what remains
  is the float32 rounding of 1/‖x_i‖, a relative error |δ_i| ≤ u that scales u_i by (1 + δ_i) and is
  unbiased across rows (a float32 norm, by contrast, is off by up to (log₂ d + 2)·u and biased);
* the float32 block Gram: ``|ΔC_kl| ≤ γ_b Σ_i |r_ik||r_il|``, γ_b = b·u/(1 − b·u) (Higham, Thm 3.5)
  in the worst case, √b·u typically (Higham & Mary 2019), and the d² entries' errors average in ‖G‖_F².

σ² is formed without cancellation (`GramState.moments`), so float64 results keep σ even when
σ/|μ| ~ 1e-5. In the mixed path the float32 rounding of each unit row adds noise of relative size
~u to cosines near |μ|, i.e. an error of σ growing like κ = μ²/σ²; where κ > KAPPA_MAX (rows nearly
parallel) the accumulator says so (``needs_float64``) and the callers holding the data recompute
in float64.

A perturbation of every cosine by at most η moves μ by at most η and σ by at most η (σ is an RMS, so
1-Lipschitz in the RMS of the perturbation), hence ε = μ + 2σ by at most 3η. Worst case this is a few
1e-7 absolute; measured (tests/unit/metrics/test_capacity_mixed.py, benchmarks/bench_epsilon.py) the relative
error of μ, σ and ε against a float64 reference is below 1e-7 on adversarial inputs (nearly parallel
rows, a dominant mean direction, 10⁶ rows).

BLAS: the float32 Gram is ``numpy.matmul(R.T, R)``, which numpy recognises as a symmetric rank-k update
and hands to ?syrk (half the flops of a GEMM); ``torch.mm`` has no such shortcut. Measured on an AMD EPYC
with AVX-512 (issue 24), numpy/OpenBLAS float32 ``UᵀU`` 0.39–0.63 s against 1.15 s for torch/MKL (whose
generic code path runs on this processor without AVX-512), so the choice is fixed, not timed at run
time; ``benchmarks/bench_epsilon.py`` prints both each run. Everything else is one pass over the rows:
on 262,144 × 640 the preparation costs ~0.17 CPU s against ~0.6–1.2 CPU s for the ?syrk (by kernel).
Measured there (2 cores, quiet): 0.73–0.80 s, 1.27–1.33× the float32 ?syrk of the same kernel (the parts'
?syrk alone on two workers runs at that ?syrk's speed, 0.565 s; the preparation adds ~0.12 s of wall time).
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch import Tensor

from tl_geometry.metrics.thread_choice import parallel_map

MIXED_MIN_ROWS = 1024
"""Rows per block from which the float32 path pays (below it the float64 Gram is cheap)."""
BLOCK_BYTES = 2**27
"""Default float32 block: 128 MiB of rows (49,152 rows at d = 640 once cut to whole parts; ?syrk is efficient from k ≈ 2,000)."""
MIXED_MAX_ROWS = 65536
"""Rows of the default float32 block at most, and about the rows `add_block_mixed` takes at once (`chunk_rows`). Each ?syrk now sums over one part (PART_ROWS rows); the bound dates from one ?syrk per block (measured on 10⁶ × 16 rows: relative error of ε 1e-8 up to 131,072 rows per ?syrk, 1e-7 with all rows in one)."""
SYRK_ROWS = 16384
"""Rows per ?syrk call inside a block (each call's float32 result is added into the float64 C). Measured on Gemma-3-270M's embedding: relative error of σ 1.6e-8 / 2.9e-9 / 2.6e-8 with 4,096 / 16,384 / 52,428 rows per call."""


def default_block_rows(d: int, dtype: torch.dtype) -> int:
    """Rows per block when the caller gives none: 128 MiB of float32 rows (at most MIXED_MAX_ROWS) for
    the float32 path (fewer, longer ?syrk calls run closer to the floor), 16,384 rows for float64.

    From PART_ROWS rows on, a multiple of PART_ROWS: every block is then whole parts of the float32 path,
    so no part is a short remainder that leaves a thread idle, and the parts (hence the bits) are the
    same however the rows are cut into such blocks (blocks of 52,428 rows at d = 640 were 6.4 parts: each
    ended on a short part that ran alone)."""
    if dtype == torch.float64:
        return 16384
    rows = min(MIXED_MAX_ROWS, max(MIXED_MIN_ROWS, BLOCK_BYTES // (4 * max(d, 1))))
    return rows - rows % PART_ROWS if rows >= PART_ROWS else rows


NORM_LO32, NORM_HI32 = 1e-18, 1e18
"""Row norms outside [NORM_LO, NORM_HI] go through the scaled float64 path (float32 squares would overflow or underflow; float64 squares of float64 rows likewise, with their own bounds)."""
NORM_LO64, NORM_HI64 = 1e-140, 1e140
KAPPA_MAX = 1e4
"""κ = μ²/σ² above which a mixed result is not trusted to 1e-7 and the caller recomputes in float64: the float32 rounding of rows near the mean direction adds noise ∝ |μ| to every cosine, so the relative error of σ grows like ~1e-12·κ (measured, tests/unit/metrics/test_capacity_mixed.py: 2e-6 at κ = 3e6; 5e-9 at κ = 21). Real embeddings have κ below 10; κ is large only when σ ≪ |μ|."""


class GramState:
    """The float64 state: n, c, sr = Σ r_i, C = Σ r_i r_iᵀ, e1 = Σ (‖u_i‖² − 1), e2 = Σ (‖u_i‖² − 1)²."""

    def __init__(self, d: int, device: torch.device):
        self.d = d
        self.device = device
        self.c: Tensor | None = None
        self.c32: Tensor | None = None
        self.sr = torch.zeros(d, dtype=torch.float64, device=device)
        self.C = torch.zeros(d, d, dtype=torch.float64, device=device)
        self.n = 0
        self.e1 = 0.0
        self.e2 = 0.0
        self.mixed_blocks = 0
        # per thread: R, the float32 centred unit rows of a part, and scratch, float64 (SUB_ROWS × d)
        self.local = threading.local()

    def set_centre(self, mean_unit: Tensor) -> None:
        """Fix the centre once: the given mean unit row rounded to multiples of 2⁻²⁰ (exact in float32,
        and u − c, n·c and their products stay exact for rows with few significant bits, e.g. eye)."""
        if self.c is None:
            c = torch.round(mean_unit.to(device=self.device, dtype=torch.float64) * 2.0**20) / 2.0**20
            self.c = c
            self.c32 = c.to(torch.float32).contiguous()

    def merge(self, other: GramState) -> GramState:
        """Add the rows of ``other`` (left unchanged) into this state; returns ``self``.

        Each state has its own centre, so ``other``'s sums are moved onto this one's first: with
        δ = c_other − c_self (exact in float64: both centres are multiples of 2⁻²⁰ in [−1, 1]) and
        r' = u − c_self = r + δ,

            Σ r' = sr + n·δ,   Σ r' r'ᵀ = C + sr δᵀ + δ srᵀ + n δδᵀ,

        formed in float64 (no float32 work, so the mixed path's error bound is unchanged). e1, e2,
        n and the mixed-block count add. An empty state on either side is the identity.

        Raises:
            InputError: different d or device (the message names them), or ``other is self``.
        """
        from tl_geometry.errors import InputError

        if other is self:
            raise InputError("cannot merge a GramState into itself")
        if other.d != self.d:
            raise InputError(f"cannot merge Gram states of different d: {self.d} and {other.d}")
        if other.device != self.device:
            raise InputError(f"cannot merge Gram states on different devices: {self.device} and {other.device}")
        if other.n == 0 or other.c is None:
            return self
        if self.c is None:
            self.c = other.c.clone()
            self.c32 = self.c.to(torch.float32).contiguous()
            self.sr = other.sr.clone()
            self.C = other.C.clone()
        else:
            delta = other.c - self.c
            self.sr += other.sr + other.n * delta
            self.C += (
                other.C
                + torch.outer(other.sr, delta)
                + torch.outer(delta, other.sr)
                + other.n * torch.outer(delta, delta)
            )
        self.n += other.n
        self.e1 += other.e1
        self.e2 += other.e2
        self.mixed_blocks += other.mixed_blocks
        return self

    def moments(self) -> tuple[float, float, float]:
        """(μ, σ², E[cos²]) over the ordered pairs i ≠ j, without cancelling large terms.

        With m = Σu_i / n the mean unit row, r'_i = u_i − m, C' = Σ r'_i r'_iᵀ = C − n δδᵀ (δ = m − c)
        and a_i = m·r'_i, every cosine is u_i·u_j = |m|² + a_i + a_j + r'_i·r'_j, and Σ a_i = 0,
        Σ r'_i = 0 give the all-pairs sum of squared deviations from |m|² in closed form:

            V = Σ_{i,j} (u_i·u_j − |m|²)² = 2n·mᵀC'm + ‖C'‖_F²   (a sum of non-negative terms)

        Taking out the diagonal (u_i·u_i = q_i) and moving from |m|² to μ (the off-diagonal mean):

            P·σ² = V − Σ_i (q_i − |m|²)² − P·(μ − |m|²)²,   μ − |m|² = (n|m|² − Σ q_i) / P,

        P = n(n − 1). Our choice over E[cos²] − μ², which loses σ² to rounding when σ ≪ |μ|. A σ²
        below 64 float64 ulps of V + Σ(q_i − |m|²)² is rounding and returned as 0 (orthonormal rows
        give σ = 0 exactly).
        """
        n = self.n
        P = n * (n - 1)
        c = self.c if self.c is not None else torch.zeros(self.d, dtype=torch.float64, device=self.device)
        delta = self.sr / n
        m = c + delta
        Cp = torch.addr(self.C, delta, delta, alpha=-n)  # C − n δδᵀ in one pass (d² temporaries cost at large d)
        ma = float(m @ m)  # |m|², the all-pairs mean
        flat = Cp.reshape(-1)
        V = 2.0 * n * float(m @ (Cp @ m)) + float(torch.dot(flat, flat))
        # Σ (q_i − ma)² with q_i = ‖u_i‖² = 1 + e_i: e1 = Σ e_i, e2 = Σ e_i² (0 in the mixed path)
        diag = self.e2 + 2.0 * (1.0 - ma) * self.e1 + n * (1.0 - ma) ** 2
        d1 = n + self.e1
        s = n * c + self.sr
        mean = (float(s @ s) - d1) / P
        shift = (n * ma - d1) / P
        var = (V - diag) / P - shift * shift
        if var <= 64 * 2.0**-52 * (V + diag) / P:  # below the float64 rounding of its own terms: 0
            var = 0.0
        second = var + mean * mean
        return mean, var, second


def safe_unit_rows64(xb: Tensor, first_row: int) -> tuple[Tensor, Tensor]:
    """(unit rows of the non-zero rows, float64; mask of the non-zero rows), overflow-safe.

    Rows are scaled by their largest |entry| before the norm when a plain float64 norm would overflow
    or underflow (e.g. rows scaled by 1e200 or 1e-200), so the result does not depend on the scale.

    Raises:
        InputError: NaN or inf entries (the message gives the first bad row, counting from ``first_row``).
    """
    from tl_geometry.errors import InputError

    x = xb.to(torch.float64)
    norms = torch.linalg.vector_norm(x, dim=1)
    bad_range = ~torch.isfinite(norms) | (norms < NORM_LO64) | (norms > NORM_HI64)
    if bool(bad_range.any()) and bool((x[bad_range] != 0).any()):  # not only true zero rows
        finite = torch.isfinite(x).all(1)
        if not bool(finite.all()):
            bad = first_row + int((~finite).nonzero()[0, 0])
            raise InputError(f"vectors contain NaN or inf (first at row {bad})")
        scale = x.abs().amax(1)
        # zero rows keep scale 0 (dropped below); others are divided by their largest |entry| first
        x = torch.where(scale[:, None] > 0, x / torch.where(scale > 0, scale, 1.0)[:, None], x)
        norms = torch.linalg.vector_norm(x, dim=1)
    nz = norms > 0
    return x[nz] / norms[nz, None], nz


def add_block_float64(state: GramState, xb: Tensor, first_row: int) -> tuple[Tensor, Tensor]:
    """Add a block in float64; returns (unit rows kept, float64; mask of kept rows)."""
    ub, nz = safe_unit_rows64(xb.to(state.device), first_row)
    if ub.shape[0] == 0:
        return ub, nz
    if state.c is None:
        state.set_centre(ub.mean(0))
    assert state.c is not None
    r = ub - state.c
    state.sr += r.sum(0)
    state.C += r.T @ r
    e = (ub * ub).sum(1) - 1.0
    state.e1 += float(e.sum())
    state.e2 += float((e * e).sum())
    state.n += ub.shape[0]
    return ub, nz


SUB_ROWS = 1024
"""Rows per step of the preparation pass (float64 norms, centred float32 unit rows): 2.6 MB of float32 rows
at d = 640, so each step works in cache and reads its rows from memory once."""


def _workers(workers: int | None) -> int:
    """Threads of the float32 path: ``workers`` if given, else torch's intra-op setting (the user's cap;
    the machine's load is not read here: thread policy belongs to the caller)."""
    return max(1, int(workers if workers is not None else torch.get_num_threads()))


def _prepare(x: np.ndarray, R: np.ndarray, c32: np.ndarray, buf: np.ndarray) -> np.ndarray | None:
    """The preparation pass of one part x (≤ PART_ROWS float32 rows) into R (same shape); returns the
    per-step row sums (steps × d, float64), or None when the part needs the general path.

    For each SUB_ROWS step: x copied to float64 (``buf``: cache-resident scratch), ‖x_i‖² = Σ x_ik² in
    float64 (the products of float32 entries are exact in float64), then r_i = x_i·fl32(1/‖x_i‖) − c written
    as float32 into R (contiguous: numpy runs the scaling as one flat loop, about twice as fast as into a
    strided buffer), and Σ r_i of the step as float32 sums of 64 rows added in float64. A step whose norms
    are not all finite and within [NORM_LO32, NORM_HI32] (zero, NaN/inf, huge or tiny rows) ends the pass
    with None.
    """
    d = x.shape[1]
    sums = np.zeros((-(-x.shape[0] // SUB_ROWS), d))
    for i, a in enumerate(range(0, x.shape[0], SUB_ROWS)):
        xs = x[a : a + SUB_ROWS]
        m = xs.shape[0]
        bb = buf[:m]
        bb[...] = xs
        s = np.einsum("ij,ij->i", bb, bb)
        np.sqrt(s, out=s)
        lo, hi = float(s.min()), float(s.max())
        if not (math.isfinite(hi) and hi <= NORM_HI32 and lo >= NORM_LO32):
            return None
        inv = (1.0 / s).astype(np.float32)[:, None]
        rs = R[a : a + m]
        np.multiply(xs, inv, out=rs)
        rs -= c32
        m64 = m - m % 64
        if m64:
            sums[i] = rs[:m64].reshape(m64 // 64, 64, d).sum(1).sum(0, dtype=np.float64)
        if m64 < m:
            sums[i] += rs[m64:].sum(0, dtype=np.float64)
    return sums


PART_ROWS = 8192
"""Rows of one unit of work of the float32 path: its preparation and its ?syrk run in one thread, parts on
``workers`` threads at once (a fixed size, so the parts and their sum do not depend on the thread count)."""

_blas_lock = threading.RLock()


@functools.cache
def _blas_controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextmanager
def _blas_threads(n: int) -> Iterator[None]:
    """``with _blas_threads(n):`` the BLAS libraries numpy calls run on at most ``n`` threads (threadpoolctl),
    restored on exit, also on error. Process-wide while it lasts (another thread's BLAS call meanwhile is
    limited too), so concurrent float32 scans take turns (each uses every worker anyway): with
    overlapping limits, even counted so that the last to leave restores, numpy's OpenBLAS 0.3.31 was left
    single-threaded (measured; tests/unit/metrics/test_capacity_mixed.py checks the restore)."""
    with _blas_lock, _blas_controller().limit(limits=max(1, int(n)), user_api="blas"):
        yield


class _Rejected(Exception):
    """A part whose norms need the general path (raised inside a worker, caught by the caller)."""


HELD_BYTES = 2**30
"""Bound on the parts' float32 Grams (d² · 4 bytes each) a chunk holds until it is accepted, and on those
computed at once by parallel parts (d ≤ 11,585 on 2 workers, ≤ 4,096 on 16)."""


def chunk_rows(workers: int, d: int = 0) -> int:
    """Rows `add_block_mixed` takes at once: whole parts, a multiple of ``workers`` parts, about
    MIXED_MAX_ROWS (65,536 rows, 8 parts, on 1, 2, 4 or 8 workers) and, for wide rows, no more parts than
    HELD_BYTES of their Grams (d² float32 each; never under ``workers`` parts). A chunk is the unit of
    acceptance: a rejected chunk goes to the general path, the state untouched."""
    w = max(1, workers)
    parts = w * max(1, -(-MIXED_MAX_ROWS // (PART_ROWS * w)))
    fit = HELD_BYTES // max(1, 4 * d * d)
    return PART_ROWS * max(w, min(parts, fit - fit % w))


def _parallel_parts(n_parts: int, workers: int, d: int) -> bool:
    """Parts on ``workers`` threads (BLAS single-threaded) when there are enough of them and their Grams
    fit in HELD_BYTES; otherwise one part after another, each ?syrk on ``workers`` BLAS threads."""
    return n_parts >= workers and (workers == 1 or workers * 4 * d * d <= HELD_BYTES)


def add_block_mixed(state: GramState, xb: Tensor, first_row: int, *, workers: int | None = None) -> tuple[int, int]:
    """Add a block with float32 work (CPU tensors); returns (rows kept, rows in the block).

    The block is taken in chunks of `chunk_rows` rows, each cut into parts of PART_ROWS rows. When a chunk
    has at least ``workers`` parts (default: torch's setting), ``workers`` threads
    ([`parallel_map`][tl_geometry.metrics.thread_choice.parallel_map]) each take the next part and run, in
    that thread, its preparation (`_prepare`: float64 norms, centred unit rows rounded to float32 into the
    worker's buffer, their sums) and its ?syrk ``RᵀR`` with BLAS limited to one thread. Our choice,
    measured on 2 cores (issue 24, ``benchmarks/bench_epsilon.py``): one multi-threaded ?syrk after a
    preparation pass left a core to OpenBLAS's spinning threads during every pass, and its team waited at
    each call's barrier for a thread another process had descheduled; parts in parallel keep both cores on
    useful work and run at about the single-threaded ?syrk's own speed per core. A chunk of fewer parts than
    workers, or of parts too wide for ``workers`` d² Grams to fit in HELD_BYTES (wide rows: a default
    streaming block at d = 4,096 is one part), runs its parts one after another, each ?syrk on ``workers``
    BLAS threads, where a part's d² Gram is work enough for a team.

    The parts' results are added in part order into the state (float64), each part's 64-row sums in order:
    on the parallel path the same bits on any number of workers and for any cut of the rows into blocks of
    whole parts (tested). OpenBLAS's multi-threaded ?syrk does not give the bits of its single-threaded one
    (measured: float32 Grams differ by ~1e-7 relative), so on the sequential path the bits depend on the
    BLAS thread count, at float32 rounding. The results are added only when every part of the chunk passed
    the norm check, so a rejected chunk leaves the state untouched and goes to `_add_block_general` (zero
    rows, rescaling, the NaN/inf error naming the row).
    """
    if xb.shape[0] == 0:
        return 0, 0
    w = _workers(workers)
    step = chunk_rows(w, xb.shape[1])
    if xb.shape[0] > step:  # bounded memory per call (the parts' Grams are held until the chunk is accepted)
        kept = 0
        for a in range(0, xb.shape[0], step):
            kept += add_block_mixed(state, xb[a : a + step], first_row + a, workers=w)[0]
        return kept, xb.shape[0]
    x32 = xb if xb.dtype == torch.float32 else xb.to(torch.float32)
    if not x32.is_contiguous():
        x32 = x32.contiguous()
    xn = x32.numpy()
    b, d = xn.shape
    if state.c is None:
        head = xn[:4096].astype(np.float64)
        norms = np.sqrt(np.einsum("ij,ij->i", head, head))
        if not (np.isfinite(norms).all() and norms.max() <= NORM_HI32 and norms.min() >= NORM_LO32):
            return _add_block_general(state, xb, first_row)
        state.set_centre(torch.from_numpy((head / norms[:, None]).astype(np.float32).mean(0, dtype=np.float64)))
    assert state.c32 is not None
    c32 = state.c32.numpy()
    parts = [xn[a : a + PART_ROWS] for a in range(0, b, PART_ROWS)]
    rows = min(b, PART_ROWS)
    local = state.local  # each thread's buffers (reused across blocks: fresh ones per part page-fault)
    parallel = _parallel_parts(len(parts), w, d)

    def work(part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if getattr(local, "R", None) is None or local.R.shape[0] < rows or local.R.shape[1] != d:
            local.R = np.empty((rows, d), dtype=np.float32)
            local.scratch = np.empty((SUB_ROWS, d))
        R = local.R[: part.shape[0]]
        sums = _prepare(part, R, c32, local.scratch)
        if sums is None:
            raise _Rejected
        return R.T @ R, sums  # numpy: A.T @ A of one C-contiguous array → ?syrk

    try:
        with _blas_threads(1 if parallel else w):
            out = parallel_map(work, parts, w if parallel else 1)
    except _Rejected:
        return _add_block_general(state, xb, first_row)
    C = state.C.numpy()  # CPU float64: the parts go straight into the state, in part order
    sr = state.sr.numpy()
    for res in out:
        C += res[0]
        for row in res[1]:
            sr += row
    state.n += b
    state.mixed_blocks += 1
    return b, xb.shape[0]


def _add_block_general(state: GramState, xb: Tensor, first_row: int) -> tuple[int, int]:
    """The mixed path for blocks the fast pass rejects: zero rows are dropped (a block of padding), rows whose
    float32 norms overflow or underflow are rescaled in float64 (`add_block_float64`), NaN/inf rows raise
    there (naming the first bad row). Same float32 arithmetic as the fast pass otherwise."""
    if xb.shape[0] == 0:
        return 0, 0
    x32 = xb if xb.dtype == torch.float32 else xb.to(torch.float32)
    if not x32.is_contiguous():
        x32 = x32.contiguous()
    xn = x32.numpy()
    # ‖x_i‖² summed in float64 from float32 products (numpy einsum, one pass): exact to ~1e-16, where
    # torch's float32 norm is off by up to 3e-7 and biased (it moved μ by 1e-8 on Gemma-3's embedding)
    norms = torch.from_numpy(np.sqrt(np.einsum("ij,ij->i", xn, xn, dtype=np.float64)))
    lo, hi = torch.aminmax(norms)
    if not (bool(torch.isfinite(hi)) and float(hi) <= NORM_HI32 and (float(lo) == 0.0 or float(lo) >= NORM_LO32)):
        _, nz = add_block_float64(state, xb, first_row)
        return int(nz.sum()), xb.shape[0]
    if float(lo) == 0.0:  # zero rows (padding tokens): dropped; rare, so a copy is fine
        nz = norms > 0
        if bool((x32[~nz] != 0).any()):  # a row whose float32 norm underflowed: rescale in float64
            _, nz = add_block_float64(state, xb, first_row)
            return int(nz.sum()), xb.shape[0]
        if not bool(nz.any()):
            return 0, xb.shape[0]
        x32, norms = x32[nz], norms[nz]
    b = x32.shape[0]
    inv = norms.reciprocal_().to(torch.float32).unsqueeze(1)
    if state.c is None:
        state.set_centre((x32[:4096] * inv[:4096]).mean(0))
    assert state.c32 is not None
    r = torch.addcmul(state.c32.neg(), x32, inv)  # one pass: r_i = x_i / ‖x_i‖ − c (rare path: a fresh buffer)
    rn = r.numpy()
    for a in range(0, b, SYRK_ROWS):  # numpy: A.T @ A of one buffer → ?syrk; float32 sums ≤ SYRK_ROWS long
        part = rn[a : a + SYRK_ROWS]
        state.C += torch.from_numpy(part.T @ part)
    # Σ r_i: float32 sums of 64 rows, then float64 across the groups (a float32 sum over all b rows
    # carries ~b·u error into μ; these 64-row partial sums are one pass over r, like r.sum(0))
    b64 = b - b % 64
    if b64:
        state.sr += r[:b64].view(b64 // 64, 64, -1).sum(1).double().sum(0)
    if b64 < b:
        state.sr += r[b64:].double().sum(0)
    state.n += b
    state.mixed_blocks += 1
    return b, xb.shape[0]
