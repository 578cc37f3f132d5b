"""Spectral metrics of hidden states: RankMe, α-ReQ, isotropy, condition number.

All are functions of the eigenvalues λ_1 ≥ λ_2 ≥ … of the covariance of the centered hidden
states. Eigenvalues below λ_max·1e-10 are dropped ("kept spectrum"). Definitions:

* **RankMe** (Garrido et al., ICML 2023, eq. 1) = exp(−Σ p_k log p_k) with p_k = s_k / Σ s over
  the *singular values* s_k of the (centered) representation matrix; s_k = √((N−1) λ_k), and the
  factor √(N−1) cancels in p. Garrido et al. add ε = 1e-7 to p_k; we drop eigenvalues below
  λ_max·1e-10 instead (the same to within ~1e-6 on real spectra).
* **rankme_eig** = the same entropy with p_k = λ_k / Σλ (covariance eigenvalues, i.e. squared
  singular values: what reptrix's ``get_rank`` computes). It is smaller than RankMe for any
  non-flat spectrum; it is *not* Garrido et al.'s RankMe and is kept under its own name.
* **α-ReQ** (Agrawal et al., NeurIPS 2022) is the decay α of a power law λ_i ≈ c·i^(−α). Two fits,
  both offered by name, each with its R²:

  - ``alpha_req`` (Our choice, the library default): ordinary least squares of log λ_i on
    log i over the ranks ``fit_range`` (1-based, inclusive start, exclusive stop; default all
    kept ranks); ``alpha_req_r2`` is that fit's R² over the same ranks.
  - ``alpha_req_reptrix``: reptrix's ``get_powerlaw`` (the α-ReQ authors' group's library):
    weighted least squares with weights 1/i over ranks 11–100 (reptrix's default
    ``fit_range = np.arange(10, 100)``, 0-based), clipped to the kept ranks;
    ``alpha_req_reptrix_r2`` is the (unweighted) R² of log λ over the same ranks. (reptrix's own
    R² uses ranks 12–500 and 12–100, an off-by-one of its indexing; we use the fitted ranks.)

  Both fits give the same α on an exact power law; elsewhere they differ (a 2048 × 576 Gaussian
  cloud: 0.50 by least squares over all ranks, 0.14 by reptrix's fit). The PGA paper (Xu, arXiv
  2605.17084) reports α-ReQ without saying which fit or which ranks it used (it published no
  code): neither fit is known to be the paper's.
* **isotropy** = (Σλ)² / (d Σλ²), 1 for a perfectly isotropic cloud, 1/d for a rank-one cloud
  (d = ambient dimension, dropped eigenvalues count as zeros);
* **condition number** = λ_max / λ_min over the kept spectrum.

The covariance streams through [`StreamingCovariance`][tl_geometry.metrics.spectral.StreamingCovariance] in float64 (batch means and
centered scatter matrices merged with Chan et al.'s pairwise update), so millions of tokens fit in
O(d²) memory.

**Standard errors** (``SpectralMetrics.stderr``): a delete-a-group jackknife over groups of
points (``group_sizes`` of [`StreamingCovariance`][tl_geometry.metrics.spectral.StreamingCovariance], or ``groups`` of
[`spectral_metrics`][tl_geometry.metrics.spectral.spectral_metrics]). Each leave-group-out covariance follows exactly from the total and the
group's moments by Chan et al.'s downdate (no second pass over the points); every metric is
recomputed on it (one ``eigvalsh`` per group) and ``se = sqrt((G−1)/G · Σ_g (θ_(g) − θ̄)²)``.
Our choice (the papers give no uncertainty): groups of whole sequences (see
[`tl_geometry.metrics.jackknife.group_labels`][tl_geometry.metrics.jackknife.group_labels]), 10 by default in the "spectral" metric, so
the error covers a fresh draw of text; a group is held as its raw rows while that is smaller than
its d × d float64 scatter matrix, so memory stays ≤ (G + 1)·d² float64 per hook.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from tl_geometry.base import _checks
from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError
from tl_geometry.metrics.jackknife import jackknife_se
from tl_geometry.metrics.thread_choice import ThreadChoice, resolve

__all__ = [
    "SpectralMetrics",
    "StreamingCovariance",
    "spectral_metrics",
    "spectral_from_covariance",
    "spectral_jackknife",
    "SPECTRAL_FIELDS",
    "power_law_fit",
    "REPTRIX_FIT_RANGE",
]

_REL_CUTOFF = 1e-10
SPECTRAL_FIELDS = ("rankme", "rankme_eig", "alpha_req", "alpha_req_reptrix", "isotropy", "condition_number")
"""The scalar metrics of [`SpectralMetrics`][tl_geometry.metrics.spectral.SpectralMetrics] that carry a standard error."""
REPTRIX_FIT_RANGE = (11, 101)
"""reptrix's default α-ReQ fit ranks (1-based, stop exclusive): ranks 11–100."""


@dataclass(frozen=True)
class SpectralMetrics(Tabular):
    """Spectral summary of a covariance.

    Definitions (the spectral baselines of arXiv 2605.17084; details in the module docstring):
    with λ_i the covariance eigenvalues and p_i = √λ_i / Σ_j √λ_j, RankMe = exp(−Σ p_i log p_i);
    α-ReQ is the decay α of λ_i ≈ c·i^(−α); isotropy = (Σλ)² / (d Σλ²); condition_number =
    λ_max / λ_min over the kept spectrum.

    Attributes:
        rankme: RankMe as Garrido et al. define it (singular values).
        alpha_req, alpha_req_r2: α-ReQ by least squares over ``fit_range`` (ours) and its R².
        isotropy, condition_number: see the module docstring.
        rankme_eig: the covariance-eigenvalue entropy rank (not Garrido et al.'s RankMe).
        alpha_req_reptrix, alpha_req_reptrix_r2: α-ReQ as reptrix fits it (weights 1/i, ranks
            11–100 clipped to the kept ranks) and its R²; NaN with fewer than 2 such ranks.
        n_kept: eigenvalues above λ_max·1e-10.
        d: ambient dimension.
        n_points: number of points the covariance was estimated from (0 if unknown).
        eigenvalues: the kept eigenvalues, descending.
        stderr: metric name ([`SPECTRAL_FIELDS`][tl_geometry.metrics.spectral.SPECTRAL_FIELDS]) → standard error in the metric's units;
            empty when not estimated (no point groups given).
        stderr_method: ``"jackknife over G point groups"``, or ``"none"`` when not estimated.
        n_groups: jackknife groups (0 when not estimated).
    """

    rankme: float
    alpha_req: float
    isotropy: float
    condition_number: float
    n_kept: int
    d: int
    n_points: int
    eigenvalues: Float[Tensor, " n_kept"]
    rankme_eig: float = float("nan")
    alpha_req_r2: float = float("nan")
    alpha_req_reptrix: float = float("nan")
    alpha_req_reptrix_r2: float = float("nan")
    stderr: Mapping[str, float] = field(default_factory=dict)
    stderr_method: str = "none"
    n_groups: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["eigenvalues"] = self.eigenvalues.tolist()
        out["stderr"] = dict(self.stderr)
        return out


class _Moments:
    """Count, mean and centered scatter (float64) of some rows: the state Chan et al. merge."""

    def __init__(self) -> None:
        self.n = 0
        self.mean: Tensor | None = None
        self.m2: Tensor | None = None  # Σ (x − mean)(x − mean)ᵀ

    def add(self, x: Tensor) -> None:
        mb = x.mean(0)
        xc = x - mb
        self._merge(x.shape[0], mb, xc.T @ xc)

    def merge(self, other: _Moments) -> None:
        """Add another part's moments (Chan et al.'s pairwise update); ``other`` is left unchanged."""
        if other.mean is not None:
            assert other.m2 is not None
            self._merge(other.n, other.mean.clone(), other.m2.clone())

    def _merge(self, nb: int, mb: Tensor, m2b: Tensor) -> None:
        if self.mean is None:
            self.n, self.mean, self.m2 = nb, mb, m2b
            return
        assert self.m2 is not None  # set together with self.mean
        n = self.n + nb
        delta = (mb - self.mean.to(mb.device)).to(self.mean.device)
        self.m2 = self.m2 + m2b.to(self.m2.device) + torch.outer(delta, delta) * (self.n * nb / n)
        self.mean = self.mean + delta * (nb / n)
        self.n = n


class _Group:
    """One jackknife group: its raw rows while they take less memory than a d × d float64
    scatter matrix, then its `_Moments` (exact either way)."""

    def __init__(self) -> None:
        self.rows: list[Tensor] = []
        self.n_rows = 0
        self.moments: _Moments | None = None

    def add(self, x: Tensor) -> None:
        if self.moments is not None:
            self.moments.add(x.to(torch.float64))
            self.n_rows += x.shape[0]
            return
        self.rows.append(x)
        self.n_rows += x.shape[0]
        d = x.shape[1]
        if self.n_rows * d * x.element_size() > d * d * 8:
            self.moments = self.get()
            self.rows = []

    def merge(self, other: _Group) -> None:
        """Add another shard's rows of the same group (``other`` is left unchanged)."""
        if other.n_rows == 0:
            return
        if self.moments is None and other.moments is None:
            for x in other.rows:
                self.add(x.clone())
            return
        self.moments = self.get()
        self.rows = []
        self.moments.merge(other.get())
        self.n_rows += other.n_rows

    def get(self) -> _Moments:
        if self.moments is not None:
            return self.moments
        m = _Moments()
        if self.rows:
            m.add(torch.cat(self.rows).to(torch.float64))
        return m


class StreamingCovariance:
    """Float64 covariance of rows streamed in batches: ``update(x)``, ``compute()``, ``merge``, ``reset()``.

    An [`Accumulator`][tl_geometry.metrics.accumulator.Accumulator]: rows streamed in any split, or
    sharded over several accumulators then merged in any order, give the same covariance and the
    same jackknife standard errors (tested in ``tests/unit/metrics/test_accumulators.py``).

    Args:
        group_sizes: for jackknife standard errors ([`spectral`][tl_geometry.metrics.spectral.StreamingCovariance.spectral]): the first
            ``group_sizes[0]`` rows streamed form group 0, the next ``group_sizes[1]`` group 1, …
            (rows past the total join the last group). None: no groups, no standard errors.
            Memory: at most one d × d float64 matrix per group besides the total's.
        first_row: the place in the whole stream of the first row this accumulator sees (default
            0). Only the groups use it: a shard of a grouped stream that starts at row 300 is
            ``StreamingCovariance(group_sizes, first_row=300)``, so its rows join the groups they
            belong to, and merging it with the other shards gives the one-stream groups.

    Examples:
        >>> acc = StreamingCovariance()
        >>> x = torch.randn(100, 4, dtype=torch.float64)
        >>> acc.update(x[:30]); acc.update(x[30:])
        >>> bool(torch.allclose(acc.compute(), torch.cov(x.T)))
        True
    """

    def __init__(self, group_sizes: Sequence[int] | None = None, *, first_row: int = 0) -> None:
        if group_sizes is not None:
            ok = isinstance(group_sizes, (list, tuple)) and all(_checks.is_int(g) for g in group_sizes)
            sizes = [int(g) for g in group_sizes] if ok else []
            if len(sizes) < 2 or any(g < 1 for g in sizes):
                raise InputError(
                    f"group_sizes must be a list of >= 2 positive integer row counts, got {_checks.describe(group_sizes)}"
                )
            self._ends = torch.tensor(sizes).cumsum(0).tolist()
        else:
            self._ends = []
        self.first_row = _checks.integer(first_row, "first_row", lo=0)
        self.reset()

    def reset(self) -> None:
        """Forget every row (``group_sizes`` and ``first_row`` stay)."""
        self.n = 0
        self.mean: Tensor | None = None
        self.m2: Tensor | None = None  # Σ (x − mean)(x − mean)ᵀ
        self.groups = [_Group() for _ in self._ends]
        self._next_row = self.first_row  # stream position of the next row update() adds
        self._spans: list[tuple[int, int]] = []  # stream rows held, [start, stop) ranges, sorted and disjoint

    def _add_span(self, start: int, stop: int) -> None:
        spans = sorted([*self._spans, (start, stop)])
        out = [spans[0]]
        for a, b in spans[1:]:
            if a <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], b))
            else:
                out.append((a, b))
        self._spans = out

    def update(self, x: Float[Tensor, "n d"]) -> None:
        """Add the rows of ``x`` (any float dtype; upcast to float64 on x's device)."""
        x = _checks.float_matrix(x, "activations", shape="(n, d): one row per point", finite=False)
        if self.mean is not None and x.shape[1] != self.mean.shape[0]:
            raise InputError(f"expected d={self.mean.shape[0]} columns, got {x.shape[1]}")
        if x.shape[0] == 0:
            return
        x = x.detach()
        x64 = x.to(torch.float64)
        if not torch.isfinite(x64).all():
            raise InputError("activations contain NaN or inf")
        start = self._next_row
        self._next_row += x.shape[0]
        self._add_span(start, self._next_row)
        if self.groups:  # split the rows at the group boundaries
            row = 0
            for k, end in enumerate(self._ends):
                last = k == len(self._ends) - 1
                take = x.shape[0] - row if last else max(0, min(x.shape[0] - row, end - (start + row)))
                if take > 0:
                    self.groups[k].add(x[row : row + take])
                    row += take
                if row >= x.shape[0]:
                    break
        total = _Moments()
        total.n, total.mean, total.m2 = self.n, self.mean, self.m2
        total.add(x64)
        self.n, self.mean, self.m2 = total.n, total.mean, total.m2

    def merge(self, other: StreamingCovariance) -> StreamingCovariance:
        """Add the rows another accumulator holds (``other`` is left unchanged); returns ``self``.

        The totals and each jackknife group merge by Chan et al.'s pairwise update (count, mean
        and centered scatter; a group still held as raw rows keeps them). Rows updated after a
        merge continue the stream after the last row either side held. An empty accumulator is
        the identity.

        Raises:
            InputTypeError: ``other`` is not a ``StreamingCovariance``.
            InputError: different ``group_sizes``, rows of a different d or on a different device,
                ``other is self``, or (with groups) the two hold overlapping stream rows: shards of
                a grouped stream need their ``first_row``.
        """
        from tl_geometry.errors import InputTypeError

        if not isinstance(other, StreamingCovariance):
            raise InputTypeError(f"can only merge another StreamingCovariance, got {type(other).__name__}")
        if other is self:
            raise InputError("cannot merge a StreamingCovariance into itself")
        if other._ends != self._ends:
            raise InputError(
                f"cannot merge covariances of different group_sizes: group ends {self._ends} and {other._ends}"
            )
        if other.mean is None:
            return self
        if self.mean is not None:
            if other.mean.shape != self.mean.shape:
                raise InputError(
                    f"cannot merge covariances of different d: {self.mean.shape[0]} and {other.mean.shape[0]}"
                )
            if other.mean.device != self.mean.device:
                raise InputError(
                    f"cannot merge covariances on different devices: {self.mean.device} and {other.mean.device}"
                )
            overlap = [(a, b) for a, b in self._spans for c, e in other._spans if a < e and c < b]
            if self._ends and overlap:
                raise InputError(
                    f"cannot merge grouped covariances holding the same stream rows ({self._spans} and {other._spans}): "
                    "give each shard its first_row"
                )
        total = _Moments()
        total.n, total.mean, total.m2 = self.n, self.mean, self.m2
        other_total = _Moments()
        other_total.n, other_total.mean, other_total.m2 = other.n, other.mean, other.m2
        total.merge(other_total)
        self.n, self.mean, self.m2 = total.n, total.mean, total.m2
        for mine, theirs in zip(self.groups, other.groups, strict=True):
            mine.merge(theirs)
        for a, b in other._spans:
            self._add_span(a, b)
        self._next_row = max(self._next_row, other._next_row)
        return self

    def compute(self) -> Float[Tensor, "d d"]:
        """The unbiased covariance (ddof = 1)."""
        if self.n < 2:
            raise InputError(f"need at least 2 points for a covariance, got {self.n}")
        assert self.m2 is not None  # n >= 2: update() has run
        return self.m2 / (self.n - 1)

    def leave_out(self, k: int) -> tuple[Float[Tensor, "d d"], int]:
        """The covariance of every row but group ``k``'s (Chan et al.'s merge solved for one part).

        With the total (n, mean, M2) and group g (n_g, mean_g, M2_g): the rest has
        n_r = n − n_g, mean_r = (n·mean − n_g·mean_g)/n_r and
        M2_r = M2 − M2_g − (n_r·n_g/n)·(mean_g − mean_r)(mean_g − mean_r)ᵀ.

        Returns:
            (covariance with ddof = 1, n_r).
        """
        g = self.groups[k].get()
        assert self.mean is not None and self.m2 is not None
        n_r = self.n - g.n
        if n_r < 2:
            raise InputError(f"leaving out group {k} ({g.n} of {self.n} rows) leaves fewer than 2 rows")
        if g.n == 0:
            return self.compute(), self.n
        assert g.mean is not None and g.m2 is not None
        mean_g, m2_g = g.mean.to(self.mean.device), g.m2.to(self.m2.device)
        mean_r = (self.n * self.mean - g.n * mean_g) / n_r
        delta = mean_g - mean_r
        m2_r = self.m2 - m2_g - torch.outer(delta, delta) * (n_r * g.n / self.n)
        return m2_r / (n_r - 1), n_r

    def spectral(
        self, fit_range: tuple[int, int] | None = None, *, threads: ThreadChoice | None = None
    ) -> SpectralMetrics:
        """[`spectral_from_covariance`][tl_geometry.metrics.spectral.spectral_from_covariance] of the accumulated covariance, with jackknife standard
        errors over the groups when ``group_sizes`` was given ([`spectral_jackknife`][tl_geometry.metrics.spectral.spectral_jackknife]).
        ``threads`` as in [`spectral_from_covariance`][tl_geometry.metrics.spectral.spectral_from_covariance]."""
        m = spectral_from_covariance(self.compute(), fit_range=fit_range, n_points=self.n, threads=threads)
        filled = [k for k, g in enumerate(self.groups) if g.n_rows or g.moments is not None]
        if len(filled) < 2:
            return m
        return spectral_jackknife(m, [self.leave_out(k)[0] for k in filled], fit_range=fit_range, threads=threads)


def spectral_jackknife(
    full: SpectralMetrics,
    leave_outs: Sequence[Tensor],
    *,
    fit_range: tuple[int, int] | None = None,
    threads: ThreadChoice | None = None,
) -> SpectralMetrics:
    """``full`` with delete-a-group jackknife standard errors from the leave-group-out covariances.

    Every metric of [`SPECTRAL_FIELDS`][tl_geometry.metrics.spectral.SPECTRAL_FIELDS] is recomputed on each covariance
    ([`spectral_from_covariance`][tl_geometry.metrics.spectral.spectral_from_covariance]) and ``se = sqrt((G−1)/G · Σ_g (θ_(g) − θ̄)²)``. A metric
    that is undefined on a replicate (e.g. a ``fit_range`` past a replicate's kept ranks) gets a
    NaN standard error. ``threads`` as in [`spectral_from_covariance`][tl_geometry.metrics.spectral.spectral_from_covariance].

    Raises:
        InputError: fewer than 2 covariances.
    """
    G = len(leave_outs)
    if G < 2:
        raise InputError(f"the jackknife needs at least 2 leave-group-out covariances, got {G}")
    reps = []
    for cov in leave_outs:
        try:
            r = spectral_from_covariance(cov, fit_range=fit_range, threads=threads)
            reps.append([float(getattr(r, f)) for f in SPECTRAL_FIELDS])
        except InputError:
            reps.append([float("nan")] * len(SPECTRAL_FIELDS))
    se = jackknife_se(torch.tensor(reps, dtype=torch.float64)).tolist()
    return replace(
        full,
        stderr=dict(zip(SPECTRAL_FIELDS, (float(v) for v in se))),
        stderr_method=f"jackknife over {G} point groups",
        n_groups=G,
    )


def spectral_from_covariance(
    cov: Float[Tensor, "d d"],
    *,
    fit_range: tuple[int, int] | None = None,
    n_points: int = 0,
    threads: ThreadChoice | None = None,
) -> SpectralMetrics:
    """Spectral metrics from a covariance matrix (see the module docstring for definitions).

    ``threads``: the [`ThreadChoice`][tl_geometry.metrics.thread_choice.ThreadChoice] of the eigendecomposition (default: one thread).

    Raises:
        ValueError: not square, non-finite, zero covariance (constant activations), or a
            ``fit_range`` outside the kept ranks / with fewer than 2 ranks.
    """
    cov = _checks.float_matrix(cov, "covariance", shape="(d, d)", finite=False)
    if cov.shape[0] != cov.shape[1]:
        raise InputError(f"covariance must be a square 2-D matrix (d, d), got shape {tuple(cov.shape)}")
    n_points = _checks.integer(n_points, "n_points", lo=0)
    cov = cov.detach().to(torch.float64)
    if not torch.isfinite(cov).all():
        raise InputError("covariance contains NaN or inf")
    d = cov.shape[0]
    with resolve(threads).kernel("lapack", cov.device):  # one thread: reproducible bits, immune to other work
        lam = torch.linalg.eigvalsh((cov + cov.T) / 2).flip(0)
    if float(lam[0]) <= 0.0:
        raise InputError("covariance is zero (constant activations); spectral metrics are undefined")
    lam = lam[lam > lam[0] * _REL_CUTOFF]
    n = lam.numel()
    rankme = _entropy_rank(lam.sqrt())
    rankme_eig = _entropy_rank(lam)
    alpha, r2 = float("nan"), float("nan")  # a single kept eigenvalue and no fit_range: no slope to fit
    if fit_range is None:
        lo, hi = 1, n + 1
    else:
        lo, hi = _check_fit_range(fit_range)
        if not (1 <= lo < hi <= n + 1) or hi - lo < 2:
            raise InputError(
                f"fit_range {tuple(fit_range)} must satisfy 1 <= start < stop <= n_kept+1={n + 1} with >= 2 ranks"
            )
    if hi - lo >= 2:
        alpha, r2 = power_law_fit(lam, (lo, hi), weighted=False)
    rlo, rhi = REPTRIX_FIT_RANGE[0], min(REPTRIX_FIT_RANGE[1], n + 1)
    alpha_rx, r2_rx = power_law_fit(lam, (rlo, rhi), weighted=True) if rhi - rlo >= 2 else (float("nan"),) * 2
    isotropy = float(lam.sum() ** 2 / (d * (lam**2).sum()))
    return SpectralMetrics(
        rankme,
        alpha,
        isotropy,
        float(lam[0] / lam[-1]),
        n,
        d,
        int(n_points),
        lam.float(),
        rankme_eig=rankme_eig,
        alpha_req_r2=r2,
        alpha_req_reptrix=alpha_rx,
        alpha_req_reptrix_r2=r2_rx,
    )


def _entropy_rank(x: Tensor) -> float:
    """exp(−Σ p log p) with p = x / Σx (x > 0)."""
    p = x / x.sum()
    return float(torch.exp(-(p * torch.log(p)).sum()))


def _check_fit_range(fit_range: Any) -> tuple[int, int]:
    """(start, stop) as two integers, or an error saying what a fit range is."""
    if not isinstance(fit_range, (tuple, list)) or len(fit_range) != 2 or not all(_checks.is_int(v) for v in fit_range):
        raise _checks.ArgumentError(
            f"fit_range must be (start, stop): two integer ranks, 1-based, stop exclusive; got {_checks.describe(fit_range)}"
        )
    return int(fit_range[0]), int(fit_range[1])


def power_law_fit(
    eigenvalues: Float[Tensor, " n"], fit_range: tuple[int, int], *, weighted: bool = False
) -> tuple[float, float]:
    """(α, R²) of the power law log λ_i ≈ c − α log i over ranks ``fit_range``.

    Args:
        eigenvalues: positive eigenvalues, descending (λ_1 first).
        fit_range: 1-based ranks, inclusive start, exclusive stop (at least 2 ranks).
        weighted: False: ordinary least squares (``alpha_req``); True: weights 1/i, as reptrix's
            ``get_powerlaw`` (``alpha_req_reptrix``).

    Returns:
        α and the R² = 1 − SS_res/SS_tot of log λ over the fitted ranks (unweighted sums; NaN when
        log λ is constant there).

    Examples:
        >>> lam = torch.arange(1, 51, dtype=torch.float64) ** -1.5
        >>> a, r2 = power_law_fit(lam, (11, 51), weighted=True)
        >>> round(a, 9), round(r2, 9)
        (1.5, 1.0)
    """
    eigenvalues = _checks.float_matrix(eigenvalues, "eigenvalues", ndim=1, shape="(n,): descending")
    lo, hi = _check_fit_range(fit_range)
    n = eigenvalues.numel()
    if not (1 <= lo < hi <= n + 1) or hi - lo < 2:
        raise InputError(f"fit_range {tuple(fit_range)} must satisfy 1 <= start < stop <= n+1={n + 1} with >= 2 ranks")
    lam = eigenvalues.detach().to(torch.float64)[lo - 1 : hi - 1]
    if not bool((lam > 0).all()):
        raise InputError("power_law_fit needs positive eigenvalues over the fit range")
    i = torch.arange(lo, hi, dtype=torch.float64)
    x, y = torch.log(i), torch.log(lam)
    w = 1.0 / i if weighted else torch.ones_like(i)
    xm, ym = (w * x).sum() / w.sum(), (w * y).sum() / w.sum()
    slope = (w * (x - xm) * (y - ym)).sum() / (w * (x - xm) ** 2).sum()
    pred = ym + slope * (x - xm)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - pred) ** 2).sum()) / ss_tot if ss_tot > 0 else float("nan")
    return float(-slope), r2


def spectral_metrics(
    H: Float[Tensor, "N d"],
    *,
    fit_range: tuple[int, int] | None = None,
    groups: Any = None,
    threads: ThreadChoice | None = None,
) -> SpectralMetrics:
    """RankMe, α-ReQ, isotropy and condition number of hidden states H (rows = points).

    Equivalent to streaming H through [`StreamingCovariance`][tl_geometry.metrics.spectral.StreamingCovariance] and calling ``spectral()``.
    ``groups`` (a label per row, e.g. [`tl_geometry.metrics.jackknife.group_labels`][tl_geometry.metrics.jackknife.group_labels] of each
    row's sequence): also delete-a-group jackknife standard errors (``stderr``) over those groups.
    ``threads`` as in [`spectral_from_covariance`][tl_geometry.metrics.spectral.spectral_from_covariance].

    Raises:
        ValueError: not 2-D, fewer than 2 rows, NaN/inf, constant rows.

    Examples:
        >>> m = spectral_metrics(torch.randn(5000, 8, generator=torch.Generator().manual_seed(0)))
        >>> 7.9 < m.rankme <= 8.0
        True
    """
    H = _checks.float_matrix(H, "H", shape="(N, d): one row per point", finite=False)
    if H.shape[1] == 0:
        raise InputError(f"H has d = 0 columns (shape {tuple(H.shape)}): a spectrum needs at least one dimension")
    if fit_range is not None:
        _check_fit_range(fit_range)  # its type now; its range once the kept ranks are known
    if groups is None:
        acc = StreamingCovariance()
        acc.update(H)
        return acc.spectral(fit_range, threads=threads)
    labels = torch.as_tensor(groups).long()
    if labels.shape != (H.shape[0],):
        raise InputError(
            f"groups must hold one label per row of H, got {tuple(labels.shape)} for H {getattr(H, 'shape', None)}"
        )
    order = torch.argsort(labels.cpu(), stable=True)
    acc = StreamingCovariance(torch.unique(labels, return_counts=True)[1].tolist())
    acc.update(H[order.to(H.device)])
    return acc.spectral(fit_range, threads=threads)
