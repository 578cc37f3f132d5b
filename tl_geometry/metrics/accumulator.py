"""The streaming accumulator protocol: ``update`` / ``compute`` / ``merge`` / ``reset``.

Every streaming statistic of [`tl_geometry.metrics`][tl_geometry.metrics] follows one contract
([`Accumulator`][tl_geometry.metrics.accumulator.Accumulator]), checked for each of them by
``tests/unit/metrics/test_accumulators.py`` (as torchmetrics' tester does for its metrics): a one-shot
pure function, the same rows streamed in any split, and several shards merged in any order or tree
all give the same ``compute()``.

The accumulators (our choice of one protocol; the papers define only the statistics):

* [`SimilarityAccumulator`][tl_geometry.metrics.capacity.SimilarityAccumulator]: Gram moments of
  unit rows, μ, σ, ε = μ + 2σ of the cosines (``update(block)``).
* [`StreamingCovariance`][tl_geometry.metrics.spectral.StreamingCovariance]: the float64 covariance
  and its jackknife groups (``update(x)``).
* [`AGOPAccumulator`][tl_geometry.metrics.interaction.AGOPAccumulator]: per-probe-group sums of
  g gᵀ (``update(g, probe=p, key=hook)``; the older ``update(hook, p, g)`` still works).
"""

from __future__ import annotations

from typing import Any, Protocol, Self, runtime_checkable

__all__ = ["Accumulator", "TOLERANCES"]

TOLERANCES: dict[str, float] = {
    "float64": 1e-12,
    "mixed": 2e-7,
    "float32": 1e-5,
}
"""Relative tolerance of the contract by the precision of the accumulated state (see
[`Accumulator`][tl_geometry.metrics.accumulator.Accumulator]): float64 sums 1e-12, mixed-precision
Gram blocks 2e-7 (twice the 1e-7 bound of each path against float64), float32 sums 1e-5."""


@runtime_checkable
class Accumulator(Protocol):
    """A streaming statistic: ``update(data, ...)`` any number of times, ``compute()``, ``merge``, ``reset``.

    Contract (what ``tests/unit/metrics/test_accumulators.py`` checks for every accumulator). Write
    ``A(X)`` for ``compute()`` of a fresh accumulator fed the rows X. Then

        A(X₁ ∪ … ∪ X_k) = compute() of k accumulators, shard i fed X_i, merged in any order or tree
                         = compute() after feeding X in any split of ``update`` calls
                         = compute() after ``reset()`` and feeding X again
                         = the one-shot pure function of X (e.g. ``similarity_stats(X)``).

    The equalities hold for every field of the result, the standard errors and counters included
    (a merge merges the jackknife groups, the dropped-row counts, the precision flags).

    Tolerance (relative, per field, of the statistic's own scale; ``TOLERANCES``). The
    mathematics is a sum over rows, so the equalities are exact in exact arithmetic; what differs
    between splits is only the order of floating-point additions (and, for the similarity
    moments, the centre each shard picks and the float32 block Grams). Our choice of bounds:

    * float64 state (``StreamingCovariance``, ``SimilarityAccumulator`` on its float64 path):
      1e-12 — float64 sums of n terms reordered differ by ≲ n·2⁻⁵³ relative in the worst case,
      √n·2⁻⁵³ typically; 1e-12 leaves room for n ≈ 10⁶ rows and the spectra's eigensolver
      (measured in the test: ≤ 3e-14, on α-ReQ's fit of the smallest eigenvalues).
    * mixed precision (``SimilarityAccumulator``, float32 blocks of ≥ 1024 rows): 2e-7 — each
      split is within 1e-7 of the float64 result (bound in `tl_geometry.metrics._gram`), so two
      splits are within 2e-7 of each other (measured: ≤ 3e-8).
    * float32 state (``AGOPAccumulator``'s per-group sums of g gᵀ): 1e-5 — float32 sums of
      n products, reordered, differ by ~√n·2⁻²⁴ relative (≈ 1e-5 at n = 10⁴ rows; measured
      ≤ 6e-7 at n = 240).

    A standard error, or a jackknife bias correction, is a difference of leave-group-out
    estimates, each as exact as the estimate itself: it keeps the tolerance on the scale of the
    estimate it belongs to (e.g. the AOFE ratio's standard error to 1e-5 of the ratio), not of its
    own size, which can be far smaller. Cosines (μ, σ, ε) are on the scale 1.

    Integer counters (rows, dropped rows, positions, groups) are equal exactly.

    Methods:
        update: add data. Its first positional argument is the data (rows); options are keywords.
        compute: the statistic of everything added so far (raises ``InputError`` when too little
            was added). Repeated calls give the same result and do not change the state.
        merge: add another accumulator's state into this one and return ``self``; ``other`` is
            left unchanged and shares no tensor with ``self``. An empty ``other`` (or an empty
            ``self``) is the identity. Raises ``tl_geometry.errors.InputError`` naming what
            differs when the two cannot be merged (dimension d, precision, device, options, keys).
        reset: forget every added row (the options stay).
    """

    def update(self, data: Any, /, *args: Any, **kwargs: Any) -> Any: ...

    def compute(self) -> Any: ...

    def merge(self, other: Self) -> Self: ...

    def reset(self) -> None: ...
