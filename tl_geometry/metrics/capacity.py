"""Capacity family (Guha, "Representational Capacity", arXiv 2606.02765).

The paper measures how close to orthogonal a model's directions are with one number,
ε = μ + 2σ of the cosine similarities over all pairs of (unit) embedding rows, and turns it into
a capacity bound k(d, ε): how many directions with pairwise |cos| ≤ ε fit in d dimensions
(see :mod:`tl_geometry.metrics._capacity_forms`). Models with ε > 0.2 ("class 1") show no
near-orthogonal structure; ε < 0.1 ("class 2") do.

Our choices where the paper is silent:

* **Exact in O(n·d²).** The paper materializes the n×n similarity matrix. We use the Gram
  moments of the unit rows U (n, d): Σ_{i≠j} cos_ij = ‖Σ_i u_i‖² − Σ_i ‖u_i‖² and
  Σ_{i≠j} cos_ij² = ‖UᵀU‖_F² − Σ_i ‖u_i‖⁴, accumulated blockwise in float64. Same μ and σ to
  float64 precision; memory O(block·d + d²).
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

from tl_geometry.metrics._capacity_forms import (  # noqa: F401  (re-exported)
    FORMS,
    CapacityWarning,
    PublishedEpsilon,
    capacity,
    capacity_epsilon,
    log10_capacity,
    published,
    published_epsilon,
    sensitivity,
)

logger = logging.getLogger(__name__)

__all__ = [
    "SimilarityStats",
    "similarity_stats",
    "embedding_epsilon",
    "model_class_of",
    "capacity",
    "capacity_epsilon",
    "log10_capacity",
    "sensitivity",
    "published",
    "published_epsilon",
    "PublishedEpsilon",
    "CapacityWarning",
]

CLASS1_ABOVE = 0.2
CLASS2_BELOW = 0.1


def model_class_of(epsilon: float) -> str:
    """The paper's classes: ε > 0.2 → "class1", ε < 0.1 → "class2", else "boundary"."""
    if epsilon > CLASS1_ABOVE:
        return "class1"
    if epsilon < CLASS2_BELOW:
        return "class2"
    return "boundary"


@dataclass(frozen=True)
class SimilarityStats:
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
    """

    mean: float
    std: float
    epsilon: float
    second_moment: float
    n_vectors: int
    n_dropped: int
    d: int
    model_class: str
    histogram: tuple[Int[Tensor, "bins"], Float[Tensor, "edges"]] | None = None  # noqa: F821
    top_pairs: tuple[tuple[int, int, float], ...] = field(default_factory=tuple)

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
        }
        if self.histogram is not None:
            out["histogram"] = {"counts": self.histogram[0].tolist(), "edges": self.histogram[1].tolist()}
        return out


def _as_matrix(vectors: Any) -> Tensor:
    """Validate the input: a 2-D floating tensor/array with finite entries."""
    if isinstance(vectors, np.ndarray):
        if not np.issubdtype(vectors.dtype, np.floating):
            raise TypeError(f"vectors must be floating point, got numpy dtype {vectors.dtype}")
        vectors = torch.from_numpy(np.ascontiguousarray(vectors))
    if not isinstance(vectors, Tensor):
        raise TypeError(f"vectors must be a torch tensor or numpy array, got {type(vectors).__name__}")
    if vectors.ndim != 2:
        raise ValueError(f"expected 2-D vectors (n, d) with one vector per row, got shape {tuple(vectors.shape)}")
    if not vectors.dtype.is_floating_point:
        raise TypeError(f"vectors must be floating point (float16/bfloat16/32/64), got {vectors.dtype}")
    if vectors.shape[1] < 1:
        raise ValueError(f"vectors have d = 0 columns (shape {tuple(vectors.shape)})")
    return vectors.detach()


def similarity_stats(
    vectors: Float[Tensor, "n d"] | np.ndarray,
    *,
    histogram_bins: int = 300,
    histogram: bool = False,
    top_n: int = 0,
    block_size: int = 16384,
    progress: bool = True,
) -> SimilarityStats:
    """μ, σ and ε = μ + 2σ of pairwise cosine similarities of the rows, exactly, in O(n·d²).

    Capacity paper (arXiv 2606.02765), Sec. 3: ε = μ + 2σ of the off-diagonal entries of the
    cosine-similarity matrix of the embedding rows. Computed from Gram moments of the unit rows
    (never the n×n matrix) in float64, ``block_size`` rows at a time.

    Args:
        vectors: (n, d) floating tensor or array; each row is a vector. float16/bfloat16 are
            upcast; accumulation is float64.
        histogram_bins: bins on [-1, 1] of the optional histogram.
        histogram: also compute the exact histogram over all n(n−1) ordered pairs
            (O(n²·d) time, bounded memory).
        top_n: also return the ``top_n`` most similar unordered pairs (same blockwise pass).
        block_size: rows per block (memory ≈ block_size·d·8 bytes, plus block² for the
            histogram pass).
        progress: tqdm bar for the pairwise pass.

    Returns:
        :class:`SimilarityStats`.

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
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if histogram and (not isinstance(histogram_bins, int) or histogram_bins < 1):
        raise ValueError(f"histogram_bins must be a positive integer, got {histogram_bins!r}")
    if top_n < 0:
        raise ValueError(f"top_n must be >= 0, got {top_n}")
    n_total, d = x.shape
    device = x.device if x.device.type != "mps" else torch.device("cpu")  # mps has no float64
    s = torch.zeros(d, dtype=torch.float64, device=device)
    gram = torch.zeros(d, d, dtype=torch.float64, device=device)
    diag1 = diag2 = 0.0
    kept_idx: list[Tensor] = []
    keep_rows = histogram or top_n > 0
    unit_blocks: list[Tensor] = []
    for start in range(0, n_total, block_size):
        xb = x[start : start + block_size].to(device=device, dtype=torch.float64)
        if not torch.isfinite(xb).all():
            bad = start + int((~torch.isfinite(xb)).any(1).nonzero()[0, 0])
            raise ValueError(f"vectors contain NaN or inf (first at row {bad})")
        norms = xb.norm(dim=1)
        nz = norms > 0
        ub = xb[nz] / norms[nz, None]
        s += ub.sum(0)
        gram += ub.T @ ub
        sq = (ub * ub).sum(1)
        diag1 += float(sq.sum())
        diag2 += float((sq * sq).sum())
        kept_idx.append(nz.nonzero().squeeze(1).cpu() + start)
        if keep_rows:
            unit_blocks.append(ub.float())
    kept = torch.cat(kept_idx)
    n = int(kept.numel())
    if n < 2:
        raise ValueError(f"need at least 2 non-zero rows to form pairs, got {n} (of {n_total} rows)")
    pairs = n * (n - 1)
    mean = (float(s @ s) - diag1) / pairs
    second = (float((gram * gram).sum()) - diag2) / pairs
    std = max(second - mean * mean, 0.0) ** 0.5
    eps = mean + 2.0 * std
    hist, top = None, ()
    if keep_rows:
        from tl_geometry.metrics._pairs import pair_histogram_and_top

        U = torch.cat(unit_blocks)
        counts, edges, top_list = pair_histogram_and_top(
            U, bins=histogram_bins if histogram else None, top_n=top_n, block=min(block_size, 4096), progress=progress
        )
        if histogram:
            hist = (counts.cpu(), edges.cpu())
        top = tuple((int(kept[i]), int(kept[j]), c) for i, j, c in top_list)
    return SimilarityStats(
        mean=mean,
        std=std,
        epsilon=eps,
        second_moment=second,
        n_vectors=n,
        n_dropped=n_total - n,
        d=d,
        model_class=model_class_of(eps),
        histogram=hist,
        top_pairs=top,
    )


def embedding_epsilon(model_or_matrix: Any, *, matrix: str = "W_E", **options: Any) -> SimilarityStats:
    """:func:`similarity_stats` of a model's embedding (rows = tokens) or of a given matrix.

    Args:
        model_or_matrix: a TransformerLens model, or an (n, d) tensor/array whose rows are
            the vectors (then ``matrix`` is ignored).
        matrix: ``"W_E"`` (d_vocab, d_model), used as is, or ``"W_U"`` (d_model, d_vocab),
            transposed so that rows are tokens.
        **options: passed to :func:`similarity_stats` (histogram, top_n, ...).

    Note:
        A model loaded with ``center_writing_weights`` has W_E with each row's mean over
        d_model removed; ε of the processed W_E differs from the raw checkpoint's. Compare
        like with like (see ``docs/capacity.md``).
    """
    if isinstance(model_or_matrix, (Tensor, np.ndarray)):
        return similarity_stats(model_or_matrix, **options)
    if matrix not in ("W_E", "W_U"):
        raise ValueError(f"matrix must be 'W_E' or 'W_U', got {matrix!r}")
    from tl_geometry import capture

    w = capture.weight(model_or_matrix, matrix)
    return similarity_stats(w.T if matrix == "W_U" else w, **options)


# registered wrappers live in a separate module to keep this one about the math
from tl_geometry.metrics import _capacity_registered as _registered  # noqa: E402,F401
