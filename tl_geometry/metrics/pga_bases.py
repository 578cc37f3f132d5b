"""The subspaces of Subspace PGA (Xu, arXiv 2605.17084): the readout basis V_k and the Haar-random null bases.

* V_k: the top-k left singular vectors of the unembedding W_U (the readout subspace);
* the null: n Haar-random orthonormal (d, k) bases, the random subspaces z is measured against,
  z = (ρ_read − mean ρ_null) / sd ρ_null.

Re-exported by [`tl_geometry.metrics.pga`][tl_geometry.metrics.pga], which computes the score.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from tl_geometry.base import _checks
from tl_geometry.base.linalg import gram64
from tl_geometry.errors import InputError
from tl_geometry.metrics.thread_choice import ThreadChoice, resolve

__all__ = ["readout_basis", "haar_bases", "MAX_ELEMENTS"]

MAX_ELEMENTS = 2**36
"""The most numbers a generated array may hold (2**36 float64 = 512 GiB): beyond it a size is a mistake."""


def readout_basis(
    W_U: Float[Tensor, "d_model d_vocab"], k: int, *, threads: ThreadChoice | None = None
) -> Float[Tensor, "d_model k"]:
    """Orthonormal basis V_k of the readout subspace: the top-k left singular vectors of W_U.

    ``W_U`` is TransformerLens's unembedding (d_model, d_vocab) as the model holds it. The paper
    works on the raw unembedding (``tg.models.load(name, processing="none")``); TransformerLens's
    processing (``fold_ln``, ``center_unembed``) changes it — on SmolLM2-135M the top-100 subspaces
    of the raw and processed W_U overlap 0.80 — and reports record the processing. Computed in
    float64 from the eigenvectors of W_U W_Uᵀ (d × d, summed over blocks of vocabulary columns:
    `tl_geometry.base.linalg.gram64`), returned in float32 or the input's wider
    float dtype. ``threads``: the [`ThreadChoice`][tl_geometry.metrics.thread_choice.ThreadChoice] of the eigendecomposition
    (default: one thread).

    Raises:
        ValueError: not 2-D, non-finite, or k outside 1 ≤ k < d_model (k ≤ d_vocab).

    Examples:
        >>> V = readout_basis(torch.randn(8, 20), 3)
        >>> V.shape, bool(torch.allclose(V.T @ V, torch.eye(3), atol=1e-5))
        (torch.Size([8, 3]), True)
    """
    W_U = _checks.float_matrix(W_U, "W_U", shape="(d_model, d_vocab)", finite=False)
    d, v = W_U.shape
    if not _checks.is_int(k) or not 1 <= k < d or k > v:
        raise InputError(f"k must satisfy 1 <= k < d_model={d} (and k <= d_vocab={v}), got {k!r}")
    try:  # in float64 column blocks: no float64 copy of W_U (Gemma-3-270M's would be 1.34 GB)
        G = gram64(W_U.detach(), check_finite=True)
    except InputError:
        raise InputError("W_U contains NaN or inf") from None
    with resolve(threads).kernel("lapack", G.device):  # one thread: reproducible bits, immune to other work
        evals, evecs = torch.linalg.eigh(G)
    V = evecs[:, torch.argsort(evals, descending=True)[:k]]
    out_dtype = W_U.dtype if W_U.dtype == torch.float64 else torch.float32
    return V.to(out_dtype)


def haar_bases(d: int, k: int, n: int, *, seed: int = 0, dtype=torch.float64) -> Float[Tensor, "n d k"]:
    """``n`` Haar-random orthonormal (d, k) bases: QR of a Gaussian matrix, sign-fixed (R_ii > 0).

    Definition: G ∈ R^{d×k} with i.i.d. N(0, 1) entries, G = QR, Q ← Q·diag(sign(R_ii)); then Q is
    uniform (Haar) on the Stiefel manifold. These are the random subspaces of Subspace PGA's null
    distribution (arXiv 2605.17084, Sec. 3: z = (ρ_read − mean ρ_null) / sd ρ_null).

    Bases are drawn one after another from one ``torch.Generator`` seeded with ``seed``, so the
    i-th basis does not depend on how many are drawn.
    """
    d = _checks.integer(d, "d")
    k = _checks.integer(k, "k")
    n = _checks.integer(n, "n", why="bases", lo=0)
    if not 1 <= k <= d:
        raise InputError(f"need 1 <= k <= d, got k={k}, d={d}")
    if n * d * k > MAX_ELEMENTS:
        raise InputError(
            f"haar_bases(d={d}, k={k}, n={n}) would hold {n * d * k:,} numbers (more than {MAX_ELEMENTS:,})"
        )
    g = torch.Generator().manual_seed(_checks.seed(seed))
    out = torch.empty(n, d, k, dtype=torch.float64)
    for i in range(n):
        Q, R = torch.linalg.qr(torch.randn(d, k, generator=g, dtype=torch.float64))
        sign = torch.sign(torch.diagonal(R))
        out[i] = Q * torch.where(sign == 0, torch.ones_like(sign), sign)
    return out.to(dtype)
