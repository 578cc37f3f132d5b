"""SAE decoder math on tensors: how many decoder pairs exceed a |cos| level, and the shared-pool directions.

[`cosine_exceedance`][tl_geometry.metrics.sae.cosine_exceedance] counts the decoder pairs above a |cos| level exactly;
[`shared_directions`][tl_geometry.metrics.sae.shared_directions] is the number of directions an SAE and the vocabulary ask of the shared
pool (capacity paper, Eq. 2).

Pure: tensors in, numbers out; nothing here imports sae_lens, a model, capture, the registry or
reports. The model-facing side is [`tl_geometry.families.sae`][tl_geometry.families.sae].

Our choice: exceedance counts unordered pairs i < j of non-zero rows with |cos| > threshold
(strictly greater), exactly, in float32 blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError, InputTypeError
from tl_geometry.metrics._pairs import pair_pass

__all__ = ["cosine_exceedance", "DecoderEpsilon", "shared_directions"]


def cosine_exceedance(vectors: Tensor, threshold: float, *, block_size: int = 2048) -> tuple[int, int]:
    """Exact count of unordered pairs i < j of non-zero rows with |cos(v_i, v_j)| > threshold.

    Blockwise (float32 products of ``block_size`` rows), memory O(block_size²), time O(n²·d).

    Returns:
        (n_above, n_pairs) with n_pairs = n(n−1)/2 over the non-zero rows.

    Raises:
        ValueError: not 2-D, fewer than 2 non-zero rows, threshold outside [0, 1], bad block.

    Examples:
        >>> import torch
        >>> cosine_exceedance(torch.tensor([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0]]), 0.5)
        (1, 3)
    """
    if not isinstance(vectors, Tensor) or vectors.ndim != 2:
        raise InputError(f"expected a 2-D tensor (n, d), got {getattr(vectors, 'shape', type(vectors).__name__)}")
    if not (0.0 <= float(threshold) <= 1.0) or math.isnan(float(threshold)):
        raise InputError(f"threshold must lie in [0, 1] (a |cos| level), got {threshold}")
    if block_size < 1:
        raise InputError(f"block_size must be >= 1, got {block_size}")
    x = vectors.detach().float()
    norms = x.norm(dim=1)
    u = x[norms > 0] / norms[norms > 0, None]
    n = u.shape[0]
    if n < 2:
        raise InputError(f"need at least 2 non-zero rows, got {n}")
    res = pair_pass(u, above=float(threshold), block=block_size)  # the package's one pair engine
    assert res.n_above is not None  # above= was given
    return int(res.n_above), res.n_pairs


@dataclass(frozen=True)
class DecoderEpsilon(Tabular):
    """ε of an SAE's decoder rows, and how many decoder pairs exceed the host model's ε.

    Definition (arXiv 2606.02765's ε applied to the decoder): ε = μ + 2σ of the cosine
    similarities of all pairs of distinct decoder rows.

    Attributes:
        stats: [`SimilarityStats`][tl_geometry.metrics.capacity.SimilarityStats] of the decoder rows
            (d_sae vectors in R^{d_in}); ``mean``, ``std``, ``epsilon``, ... are forwarded.
        threshold: the host ε compared against (None: no host given).
        threshold_source: ``"measured"`` (host model's W_E), ``"published"`` (Table 1) or
            ``"given"``; None without a host.
        n_pairs: unordered pairs of non-zero decoder rows (0 without a host).
        n_above: pairs with |cos| > threshold.
        frac_above: n_above / n_pairs (NaN without a host).
    """

    stats: Any
    threshold: float | None
    threshold_source: str | None
    n_pairs: int
    n_above: int
    frac_above: float

    def __getattr__(self, name: str):
        # forward SimilarityStats fields (mean, std, epsilon, d, model_class, ...)
        if name != "stats" and "stats" in self.__dict__:
            return getattr(self.__dict__["stats"], name)
        raise AttributeError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.stats.to_dict(),
            "threshold": self.threshold,
            "threshold_source": self.threshold_source,
            "n_pairs": self.n_pairs,
            "n_above": self.n_above,
            "frac_above": self.frac_above,
        }


def shared_directions(d_vocab: int, d_sae: int, *, tied: bool) -> int:
    """Directions an SAE's features and the vocabulary ask of the shared pool (capacity paper, Eq. 2).

    k ≈ 2V + k_features for separate embedding and unembedding matrices (each maps V tokens to
    its own directions), V + k_features when they are tied (one matrix).

    Examples:
        >>> shared_directions(151936, 131072, tied=False)   # Qwen3-30B-A3B, a 128k SAE
        434944
    """
    if not isinstance(tied, bool):
        raise InputTypeError(f"tied must be True or False, got {tied!r}")
    return (1 if tied else 2) * int(d_vocab) + int(d_sae)
