"""Spectral metrics of hidden states: RankMe, α-ReQ, isotropy, condition number.

All four are functions of the eigenvalues λ_1 ≥ λ_2 ≥ … of the covariance of the centered hidden
states. Eigenvalues below λ_max·1e-10 are dropped ("kept spectrum"). Definitions (DESIGN.md):

* RankMe = exp(−Σ p_i log p_i), p_i = λ_i / Σλ (Garrido et al. 2023 use singular values of the
  embeddings; Our choice, following DESIGN.md: covariance eigenvalues);
* α-ReQ = α in log λ_i ≈ c − α log i, least squares over the ranks ``fit_range`` (1-based,
  inclusive start, exclusive stop; default: all kept ranks);
* isotropy = (Σλ)² / (d Σλ²), 1 for a perfectly isotropic cloud, 1/d for a rank-one cloud
  (d = ambient dimension, dropped eigenvalues count as zeros);
* condition number = λ_max / λ_min over the kept spectrum.

The covariance streams through :class:`StreamingCovariance` in float64 (batch means and
centered scatter matrices merged with Chan et al.'s pairwise update), so millions of tokens fit in
O(d²) memory.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor
from tl_geometry.metrics._validate import reject_meta

__all__ = ["SpectralMetrics", "StreamingCovariance", "spectral_metrics", "spectral_from_covariance"]

_REL_CUTOFF = 1e-10


@dataclass(frozen=True)
class SpectralMetrics:
    """Spectral summary of a covariance.

    Attributes:
        rankme, alpha_req, isotropy, condition_number: see the module docstring.
        n_kept: eigenvalues above λ_max·1e-10.
        d: ambient dimension.
        n_points: number of points the covariance was estimated from (0 if unknown).
        eigenvalues: the kept eigenvalues, descending.
    """

    rankme: float
    alpha_req: float
    isotropy: float
    condition_number: float
    n_kept: int
    d: int
    n_points: int
    eigenvalues: Float[Tensor, "n_kept"]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["eigenvalues"] = self.eigenvalues.tolist()
        return out


class StreamingCovariance:
    """Float64 covariance of rows streamed in batches: ``update(x)``, ``compute()``, ``reset()``.

    Examples:
        >>> acc = StreamingCovariance()
        >>> x = torch.randn(100, 4, dtype=torch.float64)
        >>> acc.update(x[:30]); acc.update(x[30:])
        >>> bool(torch.allclose(acc.compute(), torch.cov(x.T)))
        True
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.n = 0
        self.mean: Tensor | None = None
        self.m2: Tensor | None = None  # Σ (x − mean)(x − mean)ᵀ

    def update(self, x: Float[Tensor, "n d"]) -> None:
        """Add the rows of ``x`` (any float dtype; upcast to float64 on x's device)."""
        if not isinstance(x, Tensor) or x.ndim != 2:
            raise ValueError(f"expected 2-D (n, d) activations, got {getattr(x, 'shape', type(x))}")
        reject_meta(x, "activations")
        if self.mean is not None and x.shape[1] != self.mean.shape[0]:
            raise ValueError(f"expected d={self.mean.shape[0]} columns, got {x.shape[1]}")
        if x.shape[0] == 0:
            return
        x = x.detach().to(torch.float64)
        if not torch.isfinite(x).all():
            raise ValueError("activations contain NaN or inf")
        nb = x.shape[0]
        mb = x.mean(0)
        xc = x - mb
        m2b = xc.T @ xc
        if self.mean is None:
            self.n, self.mean, self.m2 = nb, mb, m2b
            return
        n = self.n + nb
        delta = (mb - self.mean.to(mb.device)).to(self.mean.device)
        self.m2 = self.m2 + m2b.to(self.m2.device) + torch.outer(delta, delta) * (self.n * nb / n)
        self.mean = self.mean + delta * (nb / n)
        self.n = n

    def compute(self) -> Float[Tensor, "d d"]:
        """The unbiased covariance (ddof = 1)."""
        if self.n < 2:
            raise ValueError(f"need at least 2 points for a covariance, got {self.n}")
        return self.m2 / (self.n - 1)

    def spectral(self, fit_range: tuple[int, int] | None = None) -> SpectralMetrics:
        """:func:`spectral_from_covariance` of the accumulated covariance."""
        return spectral_from_covariance(self.compute(), fit_range=fit_range, n_points=self.n)


def spectral_from_covariance(
    cov: Float[Tensor, "d d"], *, fit_range: tuple[int, int] | None = None, n_points: int = 0
) -> SpectralMetrics:
    """Spectral metrics from a covariance matrix (see the module docstring for definitions).

    Raises:
        ValueError: not square, non-finite, zero covariance (constant activations), or a
            ``fit_range`` outside the kept ranks / with fewer than 2 ranks.
    """
    if not isinstance(cov, Tensor) or cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
        raise ValueError(f"covariance must be a square 2-D tensor, got {getattr(cov, 'shape', type(cov))}")
    cov = cov.detach().to(torch.float64)
    if not torch.isfinite(cov).all():
        raise ValueError("covariance contains NaN or inf")
    d = cov.shape[0]
    lam = torch.linalg.eigvalsh((cov + cov.T) / 2).flip(0)
    if float(lam[0]) <= 0.0:
        raise ValueError("covariance is zero (constant activations); spectral metrics are undefined")
    lam = lam[lam > lam[0] * _REL_CUTOFF]
    n = lam.numel()
    p = lam / lam.sum()
    rankme = float(torch.exp(-(p * torch.log(p)).sum()))
    alpha = float("nan")  # a single kept eigenvalue and no fit_range: no slope to fit
    if fit_range is None:
        lo, hi = 1, n + 1
    else:
        lo, hi = int(fit_range[0]), int(fit_range[1])
        if not (1 <= lo < hi <= n + 1) or hi - lo < 2:
            raise ValueError(
                f"fit_range {tuple(fit_range)} must satisfy 1 <= start < stop <= n_kept+1={n + 1} with >= 2 ranks"
            )
    if hi - lo >= 2:
        x = torch.log(torch.arange(lo, hi, dtype=torch.float64))
        y = torch.log(lam[lo - 1 : hi - 1])
        xc = x - x.mean()
        alpha = float(-(xc * (y - y.mean())).sum() / (xc**2).sum())
    isotropy = float(lam.sum() ** 2 / (d * (lam**2).sum()))
    return SpectralMetrics(rankme, alpha, isotropy, float(lam[0] / lam[-1]), n, d, int(n_points), lam.float())


def spectral_metrics(H: Float[Tensor, "N d"], *, fit_range: tuple[int, int] | None = None) -> SpectralMetrics:
    """RankMe, α-ReQ, isotropy and condition number of hidden states H (rows = points).

    Equivalent to streaming H through :class:`StreamingCovariance` and calling ``spectral()``.

    Raises:
        ValueError: not 2-D, fewer than 2 rows, NaN/inf, constant rows.

    Examples:
        >>> m = spectral_metrics(torch.randn(5000, 8, generator=torch.Generator().manual_seed(0)))
        >>> 7.9 < m.rankme <= 8.0
        True
    """
    acc = StreamingCovariance()
    acc.update(H)
    return acc.spectral(fit_range)

