"""Float64 Gram matrices of large float32 matrices, without a float64 copy of them.

An unembedding is d_model × d_vocab: Gemma-3-270M's is 640 × 262,144, 0.67 GB in float32 and 1.34 GB
as a float64 copy. Its d × d Gram in float64 needs only one block of columns in float64 at a time.
"""

from __future__ import annotations

import torch
from torch import Tensor

from tl_geometry.errors import InputError

__all__ = ["CHUNK", "gram64"]

CHUNK = 8192
"""Columns (or rows) converted to float64 at a time: 8 · d · CHUNK bytes of float64 copies."""


def gram64(W: Tensor, *, rows: bool = False, chunk: int = CHUNK, check_finite: bool = False) -> Tensor:
    """The float64 Gram of a 2-D ``W``, summed over blocks of ``chunk`` columns or rows.

    ``rows=False``: ``W Wᵀ`` (W of shape (d, n), e.g. TransformerLens's W_U (d_model, d_vocab));
    ``rows=True``: ``Wᵀ W`` (W of shape (n, d): rows are vectors, e.g. W_E). Working set: the d × d
    result and one float64 block. ``check_finite``: raise on a NaN or inf in ``W`` (checked block by
    block, no full-size mask).

    Raises:
        InputError: W not a 2-D floating-point tensor, or ``check_finite`` and W holds a NaN or inf.

    Examples:
        >>> W = torch.randn(3, 20000)
        >>> bool(torch.allclose(gram64(W), W.double() @ W.double().T))
        True
    """
    if not isinstance(W, Tensor) or W.ndim != 2 or not W.is_floating_point():
        raise InputError(
            f"gram64 needs a 2-D floating-point tensor, got {type(W).__name__} "
            f"{tuple(getattr(W, 'shape', ()))} {getattr(W, 'dtype', '')}".rstrip()
        )
    n = W.shape[0] if rows else W.shape[1]
    d = W.shape[1] if rows else W.shape[0]
    G = torch.zeros(d, d, dtype=torch.float64, device=W.device)
    for c in range(0, n, chunk):
        B = (W[c : c + chunk] if rows else W[:, c : c + chunk]).to(torch.float64)
        if check_finite and not torch.isfinite(B).all():
            raise InputError("the matrix contains NaN or inf")
        G += B.T @ B if rows else B @ B.T
    return G
