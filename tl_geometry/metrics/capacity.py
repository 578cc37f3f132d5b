"""Capacity family (Guha, "Representational Capacity", arXiv 2606.02765).

The paper measures how close to orthogonal a model's directions are with one number,
ε = μ + 2σ of the cosine similarities over all pairs of (unit) embedding rows, and turns it into
a capacity bound k(d, ε): how many directions with pairwise |cos| ≤ ε fit in d dimensions
(see `tl_geometry.metrics._capacity_forms`). Models with ε > 0.2 ("class 1") show no
near-orthogonal structure; ε < 0.1 ("class 2") do.

Our choices where the paper is silent:

* **Exact in O(n·d²).** The paper materializes the n×n similarity matrix. We use the Gram
  moments of the unit rows U (n, d): Σ_{i≠j} cos_ij = ‖Σ_i u_i‖² − Σ_i ‖u_i‖² and
  Σ_{i≠j} cos_ij² = ‖UᵀU‖_F² − Σ_i ‖u_i‖⁴, accumulated blockwise in float64 around a fixed centre
  (`tl_geometry.metrics._gram`). For float32 input the block Grams are float32 work (mixed
  precision, within 1e-7 relative of float64, bound in ``_gram``); float64 input stays float64.
  Memory O(block·d + d²). Rows are scaled by their largest entry before the norm where the norm
  would overflow or underflow (rows of 1e200 give the same ε as rows of 1).
* σ is the population standard deviation over the n(n−1) ordered pairs (the paper's
  ``torch.std_mean`` is unbiased; the difference is a factor sqrt(1 + 1/(n(n−1)−1))).
* Rows of norm exactly 0 are dropped and counted (``n_dropped``): padding tokens of some
  vocabularies are zero vectors whose cosine is undefined.
* Rows are the vectors: TL's ``W_E`` (d_vocab, d_model) as is, ``W_U`` (d_model, d_vocab)
  transposed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from tl_geometry.base import _checks
from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError, InputTypeError
from tl_geometry.metrics import _gram
from tl_geometry.metrics._capacity_forms import (
    FORMS,
    PRESETS,
    CapacityEstimate,
    CapacityWarning,
    capacity,
    capacity_epsilon,
    capacity_estimate,
    log10_capacity,
    min_n,
    model_class_of,
    sensitivity,
)
from tl_geometry.metrics.jackknife import jackknife_se

logger = logging.getLogger(__name__)

__all__ = [
    "ZeroRowsWarning",
    "SimilarityStats",
    "SimilarityAccumulator",
    "similarity_stats",
    "similarity_jackknife",
    "model_class_of",
    "capacity",
    "capacity_estimate",
    "CapacityEstimate",
    "min_n",
    "FORMS",
    "PRESETS",
    "capacity_epsilon",
    "log10_capacity",
    "sensitivity",
    "CapacityWarning",
]


@dataclass(frozen=True)
class SimilarityStats(Tabular):
    """Statistics of cos(u_i, u_j) over all ordered pairs i ≠ j of the non-zero rows.

    Attributes:
        mean: μ.
        std: σ (population, over the n(n−1) ordered pairs).
        epsilon: ε = μ + 2σ (capacity paper).
        second_moment: mean of cos² over the pairs.
        n_vectors: rows used (non-zero).
        n_dropped: zero rows dropped.
        d: dimension of the rows.
        model_class: "class1" (ε > 0.2), "class2" (ε < 0.1) or "boundary".
        histogram: (counts over all ordered pairs, bin edges on [-1, 1]) or None.
        top_pairs: the most similar unordered pairs (i, j, cos), i < j indexing the input rows.
        mean_stderr, std_stderr, epsilon_stderr: standard errors of μ, σ, ε when the rows are a
            sample (``similarity_stats(..., groups=...)``: delete-a-group jackknife); 0.0 when the
            statistics are exact over the given rows (the default: all rows of a matrix).
        stderr_method: ``"exact"`` or ``"jackknife over G point groups"``.
    """

    mean: float
    std: float
    epsilon: float
    second_moment: float
    n_vectors: int
    n_dropped: int
    d: int
    model_class: str
    histogram: tuple[Int[Tensor, bins], Float[Tensor, edges]] | None = None  # noqa: F821
    top_pairs: tuple[tuple[int, int, float], ...] = field(default_factory=tuple)
    mean_stderr: float = 0.0
    std_stderr: float = 0.0
    epsilon_stderr: float = 0.0
    stderr_method: str = "exact"

    def to_dict(self) -> dict[str, Any]:
        out = {
            "mean": self.mean,
            "std": self.std,
            "epsilon": self.epsilon,
            "second_moment": self.second_moment,
            "n_vectors": self.n_vectors,
            "n_dropped": self.n_dropped,
            "d": self.d,
            "model_class": self.model_class,
            "top_pairs": [list(p) for p in self.top_pairs],
            "mean_stderr": self.mean_stderr,
            "std_stderr": self.std_stderr,
            "epsilon_stderr": self.epsilon_stderr,
            "stderr_method": self.stderr_method,
        }
        if self.histogram is not None:
            out["histogram"] = {"counts": self.histogram[0].tolist(), "edges": self.histogram[1].tolist()}
        return out


def _as_matrix(vectors: Any) -> Tensor:
    """Validate the input: a 2-D floating tensor/array with finite entries."""
    if isinstance(vectors, np.ndarray):
        if not np.issubdtype(vectors.dtype, np.floating):
            raise InputTypeError(f"vectors must be floating point, got numpy dtype {vectors.dtype}")
        vectors = torch.from_numpy(np.ascontiguousarray(vectors))
    if not isinstance(vectors, Tensor):
        raise InputTypeError(f"vectors must be a torch tensor or numpy array, got {type(vectors).__name__}")
    _checks.reject_meta(vectors, "vectors")
    if vectors.ndim != 2:
        raise InputError(f"expected 2-D vectors (n, d) with one vector per row, got shape {tuple(vectors.shape)}")
    if not vectors.dtype.is_floating_point:
        raise InputTypeError(f"vectors must be floating point (float16/bfloat16/32/64), got {vectors.dtype}")
    if vectors.shape[1] < 1:
        raise InputError(f"vectors have d = 0 columns (shape {tuple(vectors.shape)})")
    return vectors.detach()


def _whole_views(x: Tensor) -> bool:
    """True when the float32 path can take the rows as they are: contiguous float32 on the CPU (its
    blocks are views, so one block of all rows costs no memory, and `_gram.add_block_mixed` cuts its own
    chunks of whole parts, a multiple of its worker count: no thread idles on a short last part of each
    block)."""
    return (
        x.device.type == "cpu" and x.dtype == torch.float32 and x.is_contiguous() and x.shape[0] >= _gram.MIXED_MIN_ROWS
    )


class ZeroRowsWarning(UserWarning):
    """Most rows had norm 0 and were dropped, so μ, σ and ε describe only the few rows left.

    A few zero rows are normal (padding tokens); most of them usually means the vectors
    underflowed, e.g. small activations cast to float16 before the statistics.
    """


def _warn_if_mostly_zero(n_kept: int, n_total: int, low_precision: str | None) -> None:
    if n_total == 0 or (n_total - n_kept) * 2 <= n_total:
        return
    import warnings

    cause = (
        f" The input was {low_precision}: values below its smallest subnormal "
        f"({'6e-8' if low_precision == 'torch.float16' else '9e-41'}) become 0. Cast to float32 before "
        "anything rounds them (before the cast to half precision, or before the norm), or rescale the vectors."
        if low_precision
        else " Check that the vectors were not zeroed or underflowed upstream."
    )
    warnings.warn(
        ZeroRowsWarning(
            f"{n_total - n_kept} of {n_total} rows have norm 0 and were dropped; μ, σ and ε are over the "
            f"remaining {n_kept} rows only.{cause}"
        ),
        stacklevel=3,
    )


class SimilarityAccumulator:
    """Streaming Gram moments of unit rows: ``update(block)`` any number of times, then ``compute()``.

    Holds O(d²) float64 state whatever the number of rows, so an embedding can be read
    block by block from disk ([`tl_geometry.families.capacity.weights_reader`][tl_geometry.families.capacity.weights_reader]). ``similarity_stats(x)`` equals
    one accumulator fed x in any split, and shards of x fed to several accumulators then
    ``merge``d (an [`Accumulator`][tl_geometry.metrics.accumulator.Accumulator]; tested in
    ``tests/unit/metrics/test_accumulators.py``).

    Precision (``precision=``): ``"float64"`` forms everything in float64. ``"mixed"`` (our choice
    for speed) forms each block's Gram of the centred unit rows in float32 (one ?syrk call) and
    accumulates the blocks in float64; μ, σ, ε stay within 1e-7 relative of the float64 result
    (error bound: `tl_geometry.metrics._gram`). ``"auto"`` (default): mixed for float32 /
    float16 / bfloat16 blocks of at least 1024 rows on the CPU, float64 otherwise. Any block whose
    rows would overflow or underflow a norm, or hold NaN/inf, goes through the float64 path (rows
    are rescaled by their largest entry first; NaN/inf is refused naming the row). After
    ``compute()``, ``needs_float64`` is True when mixed blocks were used and σ² = E[cos²] − μ²
    cancels too much for 1e-7 (rows nearly parallel, σ ≪ |μ|): feed the rows again to an
    accumulator with ``precision="float64"`` ([`similarity_stats`][tl_geometry.metrics.capacity.similarity_stats] and
    [`tl_geometry.families.capacity.weights_reader.embedding_capacity`][tl_geometry.families.capacity.weights_reader.embedding_capacity] do).

    Examples:
        >>> import torch, tl_geometry as tg
        >>> acc = tg.SimilarityAccumulator()
        >>> acc.update(torch.eye(3)[:2]); acc.update(torch.eye(3)[2:])
        >>> acc.compute().epsilon
        0.0
    """

    def __init__(self, *, device: str | torch.device | None = None, precision: str = "auto"):
        if precision not in ("auto", "mixed", "float64"):
            raise InputError(f"precision must be 'auto', 'mixed' or 'float64', got {precision!r}")
        self.device = None if device is None else torch.device(device)
        self.precision = precision
        self.reset()

    def reset(self) -> None:
        """Forget every row (``precision`` and ``device`` stay)."""
        self.state: _gram.GramState | None = None
        self.n_total = 0
        self.needs_float64 = False
        self.low_precision: str | None = None  # "torch.float16" / "torch.bfloat16" when seen (ZeroRowsWarning)

    @property
    def n(self) -> int:
        """Non-zero rows seen so far."""
        return 0 if self.state is None else self.state.n

    def update(
        self, block: Float[Tensor, "b d"] | np.ndarray, *, return_unit: bool = False
    ) -> tuple[Tensor, Tensor] | None:
        """Add rows. Returns the kept unit rows (float64) and their indices when ``return_unit``
        (that forces the float64 path for the block)."""
        xb = _as_matrix(block)
        device = self.device or (xb.device if xb.device.type != "mps" else torch.device("cpu"))  # mps: no float64
        if self.state is None:
            self.state = _gram.GramState(xb.shape[1], device)
        elif xb.shape[1] != self.state.d:
            raise InputError(f"block has d = {xb.shape[1]} columns, earlier blocks had {self.state.d}")
        if xb.dtype in (torch.float16, torch.bfloat16):
            self.low_precision = str(xb.dtype)
        first = self.n_total
        mixed = not return_unit and (
            self.precision == "mixed"
            or (self.precision == "auto" and xb.dtype != torch.float64 and xb.shape[0] >= _gram.MIXED_MIN_ROWS)
        )
        if mixed and device.type == "cpu" and xb.device.type == "cpu":
            _gram.add_block_mixed(self.state, xb, first)
            self.n_total += xb.shape[0]
            return None
        ub, nz = _gram.add_block_float64(self.state, xb, first)
        self.n_total += xb.shape[0]
        if not return_unit:
            return None
        idx = nz.nonzero().squeeze(1).cpu() + first
        return ub, idx

    def merge(self, other: SimilarityAccumulator) -> SimilarityAccumulator:
        """Add the rows another accumulator has seen (``other`` is left unchanged); returns ``self``.

        The Gram moments add after moving ``other``'s onto this accumulator's centre
        (``_gram.GramState.merge``); the row counts (kept and
        dropped), the mixed-block count behind ``needs_float64`` and the low-precision note behind
        [`ZeroRowsWarning`][tl_geometry.metrics.capacity.ZeroRowsWarning] merge too, so ``compute()``
        equals one accumulator fed both streams (within the tolerances of
        [`Accumulator`][tl_geometry.metrics.accumulator.Accumulator]). Shards may be merged in any
        order or tree; an empty accumulator is the identity.

        Raises:
            InputTypeError: ``other`` is not a ``SimilarityAccumulator``.
            InputError: a different ``precision`` or ``device``, rows of a different d or on a
                different device, or ``other is self``.
        """
        if not isinstance(other, SimilarityAccumulator):
            raise InputTypeError(f"can only merge another SimilarityAccumulator, got {type(other).__name__}")
        if other is self:
            raise InputError("cannot merge a SimilarityAccumulator into itself")
        if other.precision != self.precision:
            raise InputError(
                f"cannot merge accumulators of different precision: {self.precision!r} and {other.precision!r}"
            )
        if other.device != self.device:
            raise InputError(f"cannot merge accumulators of different device: {self.device} and {other.device}")
        if other.state is not None:
            if self.state is None:
                self.state = _gram.GramState(other.state.d, other.state.device)
            elif other.state.d != self.state.d:
                raise InputError(
                    f"cannot merge accumulators of different d: {self.state.d} and {other.state.d} columns"
                )
            self.state.merge(other.state)
        self.n_total += other.n_total
        self.needs_float64 = self.needs_float64 or other.needs_float64
        self.low_precision = other.low_precision or self.low_precision
        return self

    def compute(self) -> SimilarityStats:
        """μ, σ, ε over all ordered pairs of the non-zero rows seen so far."""
        n = self.n
        if self.state is None or n < 2:
            hint = (
                f"; the input was {self.low_precision}: small values may have underflowed to 0, cast to float32 first"
                if self.low_precision and self.n_total > n
                else ""
            )
            raise InputError(f"need at least 2 non-zero rows to form pairs, got {n} (of {self.n_total} rows){hint}")
        mean, var, second = self.state.moments()
        std = max(var, 0.0) ** 0.5
        eps = mean + 2.0 * std
        # mixed blocks: trust σ only where float32 rounding of rows near |μ| is small (_gram.KAPPA_MAX)
        self.needs_float64 = self.state.mixed_blocks > 0 and not var * _gram.KAPPA_MAX > mean * mean
        _warn_if_mostly_zero(n, self.n_total, self.low_precision)
        return SimilarityStats(
            mean=mean,
            std=std,
            epsilon=eps,
            second_moment=second,
            n_vectors=n,
            n_dropped=self.n_total - n,
            d=int(self.state.d),
            model_class=model_class_of(eps),
        )


def similarity_jackknife(U: Float[Tensor, "n d"], groups: Any) -> tuple[float, float, float, int]:
    """Delete-a-group jackknife standard errors of (μ, σ, ε) of the cosines of unit rows ``U``.

    μ and E[cos²] are U-statistics of order two over the rows, so their leave-group-out values
    follow exactly from the sufficient statistics s = Σ u_i and M = UᵀU: removing group g (rows
    U_g) gives s − s_g and ``‖M − U_gᵀU_g‖_F² = ‖M‖_F² − 2 Σ_{i∈g} u_iᵀ M u_i + ‖U_g U_gᵀ‖_F²``,
    so every replicate costs O(n_g·d² + n_g²·d), O(n·d²) in all (no O(n²) pass). The standard
    error is the textbook ``sqrt((G−1)/G · Σ_g (θ_(g) − θ̄)²)`` (Efron & Stein; for U-statistics
    Arvesen, Ann. Math. Stat. 1969).

    Args:
        U: unit rows (n, d) (zero rows already dropped), any float dtype (float64 inside).
        groups: a group label per row (`group_labels`), at least 2 distinct groups.

    Returns:
        (se of μ, se of σ, se of ε, number of groups).

    Raises:
        InputError: shapes disagree, fewer than 2 groups, or a group holding all but one row.
    """
    U = U.detach().to(torch.float64)
    labels = torch.as_tensor(groups, device=U.device).long()
    if labels.shape != (U.shape[0],):
        raise InputError(f"groups must hold one label per row ({U.shape[0]}), got shape {tuple(labels.shape)}")
    ids = torch.unique(labels)
    G = ids.numel()
    if G < 2:
        raise InputError(f"the jackknife needs at least 2 groups, got {G}")
    n = U.shape[0]
    s = U.sum(0)
    M = U.T @ U
    F = float((M * M).sum())
    sq = (U * U).sum(1)  # ‖u_i‖² (1 up to rounding)
    reps = []
    for gid in ids:
        m = labels == gid
        Ug = U[m]
        n2 = n - Ug.shape[0]
        if n2 < 2:
            raise InputError(f"group {int(gid)} holds {Ug.shape[0]} of {n} rows: fewer than 2 rows left without it")
        sg = s - Ug.sum(0)
        sq_g = sq[~m]
        cross = float(((Ug @ M) * Ug).sum())
        Fg = F - 2.0 * cross + float(((Ug @ Ug.T) ** 2).sum())
        pairs = n2 * (n2 - 1)
        mean = (float(sg @ sg) - float(sq_g.sum())) / pairs
        second = (Fg - float((sq_g * sq_g).sum())) / pairs
        std = max(second - mean * mean, 0.0) ** 0.5
        reps.append((mean, std, mean + 2.0 * std))
    se = jackknife_se(torch.tensor(reps, dtype=torch.float64)).tolist()
    return float(se[0]), float(se[1]), float(se[2]), G


def similarity_stats(
    vectors: Float[Tensor, "n d"] | np.ndarray,
    *,
    groups: Any = None,
    histogram_bins: int = 300,
    histogram: bool = False,
    top_n: int = 0,
    block_size: int | None = None,
    progress: bool = True,
    precision: str = "auto",
) -> SimilarityStats:
    """μ, σ and ε = μ + 2σ of pairwise cosine similarities of the rows, exactly, in O(n·d²).

    Capacity paper (arXiv 2606.02765), Sec. 3: ε = μ + 2σ of the off-diagonal entries of the
    cosine-similarity matrix of the embedding rows. Computed from Gram moments of the unit rows
    (never the n×n matrix), accumulated in float64, ``block_size`` rows at a time::

        μ = (‖Σ u_i‖² − n) / (n(n−1)),   E[cos²] = (‖UᵀU‖_F² − n) / (n(n−1)),   σ² = E[cos²] − μ²

    Args:
        vectors: (n, d) floating tensor or array; each row is a vector. float16/bfloat16 are
            upcast; accumulation is float64.
        histogram_bins: bins on [-1, 1] of the optional histogram.
        histogram: also compute the exact histogram over all n(n−1) ordered pairs
            (O(n²·d) time, bounded memory).
        top_n: also return the ``top_n`` most similar unordered pairs (same blockwise pass).
        block_size: rows per block. Default: all rows at once for contiguous float32 CPU input
            (views: no copy; the float32 kernel takes chunks of whole 8,192-row parts itself), else
            128 MiB of float32 rows for float32/16 input in whole parts (49,152 rows at d = 640),
            16,384 rows for float64 input, ``precision="float64"`` and the float64 recomputation
            (memory ≈ block_size·d·8 bytes, plus 4096² floats for the histogram pass).
        progress: tqdm bar for the pairwise pass.
        precision: ``"auto"`` (default), ``"mixed"`` or ``"float64"``: see
            [`SimilarityAccumulator`][tl_geometry.metrics.capacity.SimilarityAccumulator]. Mixed (float32 block Grams of the centred unit rows,
            accumulated in float64) is within 1e-7 relative of float64 and is what ``"auto"`` uses
            for float32/16 input in blocks of ≥ 1024 rows; histogram, top pairs and groups use float64.
        groups: None (default): the rows are the whole population (a matrix's rows) and μ, σ, ε
            are exact (``stderr_method="exact"``, standard errors 0.0). A group label per row
            (e.g. `group_labels` of each sampled position's sequence): the rows are a sample
            and the result carries delete-a-group jackknife standard errors
            ([`similarity_jackknife`][tl_geometry.metrics.capacity.similarity_jackknife]) over the groups of the non-zero rows; holds the unit
            rows (n × d) in memory.

    Returns:
        [`SimilarityStats`][tl_geometry.metrics.capacity.SimilarityStats].

    Raises:
        TypeError: not a tensor/array, or an integer/bool dtype.
        ValueError: not 2-D, NaN/inf entries, fewer than 2 non-zero rows, bad options.

    Examples:
        >>> import torch, tl_geometry as tg
        >>> s = tg.similarity_stats(torch.eye(4))
        >>> s.mean, s.std, s.epsilon, s.model_class
        (0.0, 0.0, 0.0, 'class2')
    """
    x = _as_matrix(vectors)
    block_size = _checks.integer(block_size, "block_size", lo=1, none_ok=True)
    defaulted = block_size is None
    float64_block = block_size or 16384
    if block_size is None:
        block_size = 16384 if precision == "float64" else _gram.default_block_rows(x.shape[1], x.dtype)
    histogram = _checks.flag(histogram, "histogram")
    histogram_bins = _checks.integer(histogram_bins, "histogram_bins", lo=1, hi=10**7)
    top_n = _checks.integer(top_n, "top_n", lo=0)
    if groups is not None:
        groups = torch.as_tensor(groups)
        if groups.shape != (x.shape[0],):
            raise InputError(f"groups must hold one label per row ({x.shape[0]}), got shape {tuple(groups.shape)}")
    keep_rows = histogram or top_n > 0 or groups is not None
    acc = SimilarityAccumulator(precision=precision)
    units: list[Tensor] = []
    kept: list[Tensor] = []
    if not keep_rows:
        rows = block_size
        if defaulted and precision != "float64" and _whole_views(x):
            rows = max(1, x.shape[0])  # views of float32 rows cost no memory: the kernel takes its own chunks
        for start in range(0, x.shape[0], rows):
            acc.update(x[start : start + rows])
        stats = acc.compute()
        if not acc.needs_float64:
            return stats
        acc = SimilarityAccumulator(precision="float64")  # σ ≪ |μ|: the mixed result is not to 1e-7
        for start in range(0, x.shape[0], float64_block):
            acc.update(x[start : start + float64_block])
        return acc.compute()
    for start in range(0, x.shape[0], block_size):
        unit = acc.update(x[start : start + block_size], return_unit=True)
        assert unit is not None  # return_unit=True
        ub, idx = unit
        kept.append(idx)
        if keep_rows:
            units.append(ub if groups is not None else ub.float())
    stats = acc.compute()
    from dataclasses import replace

    from tl_geometry.metrics._pairs import pair_histogram_and_top

    kept_idx = torch.cat(kept)
    if groups is not None:
        U = torch.cat([u.double() for u in units]) if units else torch.zeros(0, x.shape[1], dtype=torch.float64)
        se_m, se_s, se_e, G = similarity_jackknife(U, groups[kept_idx])
        stats = replace(
            stats,
            mean_stderr=se_m,
            std_stderr=se_s,
            epsilon_stderr=se_e,
            stderr_method=f"jackknife over {G} point groups",
        )
        if not (histogram or top_n > 0):
            return stats
    counts, edges, top_list = pair_histogram_and_top(
        torch.cat(units).float(),
        bins=histogram_bins if histogram else None,
        top_n=top_n,
        block=min(block_size, 4096),
        progress=progress,
    )
    return replace(
        stats,
        histogram=(counts.cpu(), edges.cpu()) if counts is not None and edges is not None else None,
        top_pairs=tuple((int(kept_idx[i]), int(kept_idx[j]), c) for i, j, c in top_list),
    )
