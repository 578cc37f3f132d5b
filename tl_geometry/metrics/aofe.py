"""AOFE and the weighted mean cos² of a Gram-like matrix (arXiv 2605.27989): how much of a matrix's energy couples different directions.

* **AOFE** (average off-diagonal Frobenius energy) ``= ‖S‖_F² − Σ_i S_ii²`` of the symmetrized
  S = (G + Gᵀ)/2; **AOFE ratio** ``= AOFE / ‖S‖_F²`` (0 for a diagonal G, 1 − 1/n for a rank-1
  all-equal G).
* **weighted mean cos²** ``= Σ_{i≠j} G_ij² / Σ_{i≠j} G_ii G_jj``: the authors' superposition
  measure of WᵀW or an AGOP.

Pure functions on tensors; re-exported by [`tl_geometry.metrics.interaction`][tl_geometry.metrics.interaction].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from tl_geometry.base import _checks
from tl_geometry.base.linalg import gram64
from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError

__all__ = ["AOFE", "aofe", "wtw_aofe", "weighted_mean_cos2"]

ROW_CHUNK = 8192
"""Rows of W converted to float64 at a time in [`wtw_aofe`][tl_geometry.metrics.aofe.wtw_aofe]."""


@dataclass(frozen=True)
class AOFE(Tabular):
    """AOFE of a square matrix (see `aofe`).

    Attributes:
        aofe: ‖G‖_F² − Σ_i G_ii² of the symmetrized G.
        ratio: aofe / ‖G‖_F², in [0, 1).
        frobenius2: ‖G‖_F² of the symmetrized G.
    """

    aofe: Float[Tensor, ""]
    ratio: Float[Tensor, ""]
    frobenius2: Float[Tensor, ""]

    def to_dict(self) -> dict:
        return {"aofe": float(self.aofe), "ratio": float(self.ratio), "frobenius2": float(self.frobenius2)}


def _check_square(G: Any, name: str = "G") -> Tensor:
    G = _checks.float_matrix(G, name, shape="(d, d), a square 2-D matrix", finite=False)
    if G.shape[0] != G.shape[1]:
        raise InputError(f"{name} must be a square 2-D matrix (d, d), got shape {tuple(G.shape)}")
    if G.shape[0] < 2:
        raise InputError(f"{name} must be at least 2 × 2 (no off-diagonal entries in {tuple(G.shape)})")
    if not torch.isfinite(G).all():
        raise InputError(f"{name} has non-finite entries")
    return G


def aofe(G: Float[Tensor, "d d"]) -> AOFE:
    """Average off-diagonal Frobenius energy of a (symmetrized) matrix.

    The paper's definition: with S = (G + Gᵀ)/2, ``AOFE = ‖S‖_F² − Σ_i S_ii²`` and
    ``ratio = AOFE / ‖S‖_F²``. Computed in float64.

    Args:
        G: a square matrix (an AGOP, a Gram WᵀW, ...).

    Returns:
        [`AOFE`][tl_geometry.metrics.aofe.AOFE] with float64 scalar tensors.

    Raises:
        TypeError: not a tensor. ValueError: not square, smaller than 2 × 2, non-finite, or all
        zero (the ratio is undefined).

    Examples:
        >>> import torch
        >>> float(aofe(torch.eye(3)).ratio)
        0.0
        >>> round(float(aofe(torch.ones(4, 4)).ratio), 4)  # (n² − n) / n²
        0.75
    """
    G = _check_square(G).detach().to(torch.float64)
    S = 0.5 * (G + G.T)
    frob2 = (S * S).sum()
    if frob2 == 0:
        raise InputError("G is all zero; the AOFE ratio is undefined")
    diag2 = (torch.diagonal(S) ** 2).sum()
    off = frob2 - diag2
    return AOFE(aofe=off, ratio=off / frob2, frobenius2=frob2)


def wtw_aofe(W: Float[Tensor, "n d"]) -> AOFE:
    """AOFE of the Gram ``WᵀW / n`` of a matrix whose rows are vectors (e.g. W_E, vocab × d).

    The paper's weight-side companion of the AGOP: how much the embedding's second moment
    couples different coordinates. The Gram is summed in float64 over blocks of ``ROW_CHUNK`` rows
    (working set: d² float64 plus one block, never a float64 copy of W).
    """
    W = _checks.float_matrix(W, "W", shape="(n, d): rows are vectors")
    G = gram64(W, rows=True, chunk=ROW_CHUNK)  # float64 Gram without a float64 copy of W
    return aofe(G / W.shape[0])


def weighted_mean_cos2(G: Float[Tensor, "d d"]) -> Float[Tensor, ""]:
    """Weighted mean cos² implied by a Gram-like matrix (the authors' ``weighted_mean_cos2_from_gram``).

    Reading ``G_ij = ⟨v_i, v_j⟩`` and ``d_i = G_ii = ‖v_i‖²``::

        Sup(G) = Σ_{i≠j} G_ij² / Σ_{i≠j} d_i d_j  =  Σ_{i≠j} w_ij cos²(v_i, v_j) / Σ_{i≠j} w_ij,
        w_ij = ‖v_i‖² ‖v_j‖²,

    in [0, 1] for a PSD G (WᵀW or an AGOP): 0 when the directions are orthogonal, 1 when they are
    all parallel. The authors compute it for WᵀW (``wtw_weighted_mean_cos2``) and for the AGOP
    (``agop_weighted_mean_cos2``) of the toy model. Unlike the AOFE ratio it does not approach 1
    merely because there are d² − d off-diagonal entries. The matrix is used as given (not
    symmetrized), as theirs; float64.

    Raises:
        ValueError: not square, smaller than 2 × 2, non-finite, or ``Σ_{i≠j} d_i d_j = 0`` (fewer
        than two non-zero diagonal entries; their code divides by 1e-12 instead and returns 0).

    Examples:
        >>> import torch
        >>> float(weighted_mean_cos2(torch.eye(3)))
        0.0
        >>> v = torch.tensor([[1.0, 2.0, -1.0]])
        >>> round(float(weighted_mean_cos2(v.T @ v)), 12)  # rank 1: all directions parallel
        1.0
    """
    G = _check_square(G).detach().to(torch.float64)
    d = torch.diagonal(G)
    den = d.sum() ** 2 - (d**2).sum()
    if not den > 0:
        raise InputError(
            "weighted mean cos² undefined: Σ_{i≠j} G_ii G_jj is not positive "
            "(G needs at least two positive diagonal entries)"
        )
    return ((G**2).sum() - (d**2).sum()) / den
