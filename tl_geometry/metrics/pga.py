"""Subspace PGA (Xu, arXiv 2605.17084): is a layer's distance structure organized for the readout?

For hidden states H (N, d) at one hook and the readout subspace V_k (top-k left singular vectors
of W_U), the PGA score asks whether the k-dimensional readout view of H keeps the ranking of
pairwise distances better than random k-dimensional views do:

1. center H; CCR-c removes the top-c principal directions of the centered H;
2. d_full = cosine distances over all N(N−1)/2 pairs of rows;
3. ρ_read = Spearman(d_full, d(H V_k));
4. ρ_q = Spearman(d_full, d(H Q)) for n_null Haar-random orthonormal (d, k) bases Q;
5. z = (ρ_read − mean ρ_q) / std ρ_q (ddof = 1).

The paper published no code; steps 1–5 are our reading of its text. Our choices where the paper is
silent are marked "Our choice:" below. One of them: z is a sampled number (n_null random
subspaces, N sampled points), so every [`PGAScore`][tl_geometry.metrics.pga.PGAScore] carries its standard error — a delete-one
jackknife over the nulls plus, for the points, by default (``stderr="influence"``) the first-order
(influence-function) version of a delete-a-group jackknife, with the re-ranking, the re-centering
and the re-estimated CCR directions and no re-sort (`tl_geometry.metrics._pga_influence` derives
it); ``stderr="jackknife"`` does the literal refit per deleted group, the check; ``stderr="none"``
gives z alone — and [`PGAScore.p_value`][tl_geometry.metrics.pga.PGAScore.p_value], the
p of z if the readout were one more random subspace ([`tl_geometry.metrics.significance`][tl_geometry.metrics.significance]). Spectral metrics (RankMe, α-ReQ, ...) live in
[`tl_geometry.metrics.spectral`][tl_geometry.metrics.spectral] and are re-exported here.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from tl_geometry.base import _checks
from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError
from tl_geometry.metrics._pga_influence import InfluenceContext, influence_point_se
from tl_geometry.metrics._pga_jackknife import _jackknife_se, _null_jackknife_z, _refit_jackknife
from tl_geometry.metrics._spearman import PointGroups, RankedReference, cosine_similarities, make_pairs
from tl_geometry.metrics.pga_bases import MAX_ELEMENTS, haar_bases, readout_basis  # noqa: F401  (MAX_ELEMENTS: its old home)
from tl_geometry.metrics.significance import z_p_value
from tl_geometry.metrics.spectral import *  # noqa: F401,F403
from tl_geometry.metrics.spectral import __all__ as _spectral_all
from tl_geometry.metrics.thread_choice import ThreadChoice, limit_threads, parallel_map, resolve

logger = logging.getLogger(__name__)

__all__ = [
    "readout_basis",
    "haar_bases",
    "PGAScore",
    "pga_score",
    "pga_profile",
    "pga_layer",
    "PC1Overlap",
    "pc1_overlap",
    "min_points",
    "check_n_points",
    "DEFAULT_MAX_PAIRS",
    "DEFAULT_N_GROUPS",
    "DEFAULT_REFIT_NULLS",
    "MIN_POINTS",
    "STDERR_METHOD",
    "STDERR_METHODS",
    "stderr_method",
    *_spectral_all,
]

DEFAULT_MAX_PAIRS = 1 << 22
"""Above this many pairs (N ≈ 2,897 points), a seeded random subset of pairs is used."""
MIN_POINTS = 10
"""Floor of [`min_points`][tl_geometry.metrics.pga.min_points]: 10 points give 45 pairs."""
DEFAULT_N_GROUPS = 20
"""Point groups of the delete-a-group jackknife behind the standard errors (at most N // 5)."""
DEFAULT_REFIT_NULLS = 4
"""Null subspaces whose point-sample terms are computed in full: refit per deleted group (``stderr="jackknife"``), or given their reference-side and value terms (``stderr="influence"``); the rest enter through their own sort."""
STDERR_METHODS = {
    "influence": "influence: delete-one jackknife over the null subspaces (null draw) + first-order delete-a-group "
    "jackknife over the points (point sample: pairs deleted, re-ranked, re-centered, CCR directions re-estimated; "
    "no re-sort), variances added",
    "jackknife": "jackknife: delete-one null subspace (null draw) + delete-a-group of points refit (point sample: "
    "re-centered, CCR directions re-estimated, re-ranked), variances added",
    "none": "none",
}
"""How `PGAScore.stderr` is computed, by the ``stderr`` argument (recorded in every result; see [`stderr_method`][tl_geometry.metrics.pga.stderr_method])."""
STDERR_METHOD = STDERR_METHODS["influence"]
"""The default's [`STDERR_METHODS`][tl_geometry.metrics.pga.STDERR_METHODS] entry."""
_FIXED = "; full-sample ranks, centering and CCR directions held fixed (refit_nulls=0)"


def _check_stderr(stderr: Any) -> str:
    """``stderr`` as one of "influence", "jackknife", "none" (True: "influence"; False / None: "none")."""
    if stderr is True:
        return "influence"
    if stderr is False or stderr is None:
        return "none"
    if isinstance(stderr, str) and stderr in STDERR_METHODS:
        return stderr
    raise InputError(
        f"stderr must be 'influence' (the default), 'jackknife' (the literal refit, its check) or 'none' "
        f"(also False: z alone), got {stderr!r}"
    )


def _check_refit_nulls(refit_nulls: Any) -> int:
    """``refit_nulls`` as a non-negative int (the one check, for the metric and the family)."""
    return _checks.integer(refit_nulls, "refit_nulls", why="0: keep the principal directions fixed", lo=0)


def stderr_method(stderr: Any = "influence", refit_nulls: int = DEFAULT_REFIT_NULLS) -> str:
    """The ``stderr_method`` text recorded for a ``stderr`` choice and ``refit_nulls`` (both
    checked: a bad one raises ``InputError``).

    Examples:
        >>> stderr_method("none"), stderr_method(False)
        ('none', 'none')
    """
    key = _check_stderr(stderr)
    refit_nulls = _check_refit_nulls(refit_nulls)
    return STDERR_METHODS[key] + (_FIXED if key != "none" and refit_nulls == 0 else "")


def min_points(k: int) -> int:
    """Fewest points (rows of H) PGA accepts for a k-dimensional readout: max(k + 1, 10).

    Our choice (the paper, with N in the thousands, does not need one): with N ≤ k the centered
    points span at most N − 1 < k dimensions, so the k-dimensional readout and null views each
    hold a subspace *larger* than the cloud, and z compares distortions of a handful of pairs
    (N = 3–5 points give 3–10 pairs); below 10 points (45 pairs) a rank correlation of pairwise
    distances has little resolution whatever k is. Use N ≫ k (the paper's scale: thousands).

    Examples:
        >>> min_points(100), min_points(4)
        (101, 10)
    """
    return max(_checks.integer(k, "k", lo=1) + 1, MIN_POINTS)


def check_n_points(n: int, k: int) -> None:
    """Raise ValueError when ``n`` points are too few for PGA with a k-dimensional readout.

    Our rule: N ≥ max(k + 1, MIN_POINTS) (the paper states no minimum; below k + 1 points every
    k-subspace can preserve the pairwise distances up to rank, so ρ_read carries no signal)."""
    need = min_points(k)
    if _checks.integer(n, "n", why="points", lo=0) < need:
        raise InputError(
            f"PGA needs at least max(k + 1, {MIN_POINTS}) = {need} points for k={k}, got N={n}; "
            f"sample more positions (max_points / more tokens) or use a smaller k"
        )


# ----------------------------------------------------------------------------- score
@dataclass(frozen=True)
class PGAScore(Tabular):
    """Result of [`pga_score`][tl_geometry.metrics.pga.pga_score] at one hook and one CCR level.

    Attributes:
        rho_read: Spearman(d_full, d_read).
        null_mean, null_std: mean and std (ddof=1) of the null ρ's.
        z: (rho_read − null_mean) / null_std.
        null_rhos: the n_null null ρ's.
        n_points, n_pairs: N and the number of pairs correlated.
        pairs_subsampled: True when N(N−1)/2 > max_pairs and a seeded subset of pairs was used.
        ccr, k, d, seed: the settings.
        stderr: standard error of z, √(stderr_null² + stderr_points²) ([`STDERR_METHOD`][tl_geometry.metrics.pga.STDERR_METHOD]).
        stderr_null: the part from drawing n_null null subspaces: delete-one jackknife over the
            nulls (NaN for n_null < 3). For normal null ρ's it is ≈ √(1/n + z²/(2(n−1))): it grows
            with |z|, so a large |z| needs many nulls to be pinned down, not to be detected.
        stderr_points: the part from the sample of N points: a delete-a-group jackknife over
            ``n_groups`` groups of points, first-order (``stderr="influence"``) or refit
            (``stderr="jackknife"``).
        stderr_rho: standard error of rho_read from the point sample (same jackknife).
        n_groups: G, the point groups of the jackknife (0 with ``stderr="none"``).
        stderr_method: how the standard errors were computed ([`stderr_method`][tl_geometry.metrics.pga.stderr_method];
            "none": z alone, every error NaN).
    """

    rho_read: float
    null_mean: float
    null_std: float
    z: float
    null_rhos: Float[Tensor, n_null]
    n_points: int
    n_pairs: int
    pairs_subsampled: bool
    ccr: int
    k: int
    d: int
    seed: int
    stderr: float = math.nan
    stderr_null: float = math.nan
    stderr_points: float = math.nan
    stderr_rho: float = math.nan
    n_groups: int = 0
    stderr_method: str = STDERR_METHOD

    @property
    def n_null(self) -> int:
        return int(self.null_rhos.numel())

    @property
    def p_value(self) -> float:
        """Two-sided p of z if the readout were one more random subspace
        ([`tl_geometry.metrics.significance.z_p_value`][tl_geometry.metrics.significance.z_p_value]; uncorrected for the number of hooks)."""
        return z_p_value(self.z, self.n_null)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["null_rhos"] = self.null_rhos.tolist()
        out["n_null"] = self.n_null
        out["p_value"] = self.p_value
        return out


def _check_H(H: Any, name: str = "H") -> Tensor:
    """H as a float32/float64 tensor (numpy accepted; float16/bfloat16 upcast to float32)."""
    H = _checks.float_matrix(H, name, shape="(N, d): one row per point", finite=False)
    if H.shape[0] < 3:
        raise InputError(f"{name} needs at least 3 points (rows) for a rank correlation, got N={H.shape[0]}")
    if not _checks.all_finite(H):
        raise InputError(f"{name} contains NaN or inf activations")
    return H


def _center_svd(H: Tensor, threads: ThreadChoice) -> tuple[Tensor, Tensor, Tensor, int]:
    """Centered H (float64), its right singular vectors / singular values and numerical rank.

    The rank counts singular values above S_max·eps·max(N, d), eps of the compute dtype (as
    ``torch.linalg.matrix_rank``): float32 activations carry no information below that. Our
    choice: float16 / bfloat16 input was upcast to float32 by `_check_H` (their own eps,
    2⁻¹⁰ / 2⁻⁷, times N ≥ 1,024 / 128 is ≥ 1 and would count every direction as noise), and the
    tolerance is capped at 1e-2 · S_max.
    """
    tol = min(torch.finfo(_checks.compute_dtype(H.dtype)).eps * max(H.shape), 1e-2)
    H = H.to(torch.float64)
    Hc = H - H.mean(0, keepdim=True)
    scale = H.abs().max().clamp_min(1e-300)
    if float(Hc.abs().max() / scale) < 1e-12:
        raise InputError("activations are constant across points (zero variance after centering); PGA is undefined")
    with threads.kernel("lapack", Hc.device):  # one thread: reproducible bits, immune to other work
        _, S, Vh = torch.linalg.svd(Hc, full_matrices=False)
    return Hc, S, Vh, int((S > S[0] * tol).sum())


def _remove_top(Hc: Tensor, Vh: Tensor, rank: int, c: int) -> Tensor:
    """CCR-c: project out the top-c principal directions of the centered H."""
    if c == 0:
        return Hc
    if c >= rank:
        raise InputError(f"ccr={c} removes all variance (centered H has numerical rank {rank})")
    P = Vh[:c]
    return Hc - (Hc @ P.T) @ P


def _orthonormal(B: Tensor, threads: ThreadChoice, atol: float = 1e-4) -> bool:
    """Whether the columns of B (…, d, k) are orthonormal (float32 bases pass at 1e-4)."""
    B = B.to(torch.float64)
    eye = torch.eye(B.shape[-1], dtype=torch.float64, device=B.device)
    with threads.kernel("dense", B.device):  # fewer if the cores are busy
        return bool(torch.allclose(B.transpose(-1, -2) @ B, eye.expand(*B.shape[:-2], -1, -1), atol=atol))


def _check_ccrs(ccrs: Sequence[int], N: int, d: int) -> None:
    """CCR levels below min(N − 1, d), the most directions the centered H can have."""
    if max(ccrs) >= min(N - 1, d):
        raise InputError(
            f"ccr={max(ccrs)} removes all variance: the centered H has rank <= min(N - 1, d) = {min(N - 1, d)}"
        )


def _check_common(d: int, readout: Any, n_null: Any, null_bases: Any, threads: ThreadChoice) -> tuple[Tensor, int]:
    readout = _checks.float_matrix(readout, "readout", shape="(d, k): an orthonormal basis", finite=False)
    if readout.shape[0] != d:
        raise InputError(
            f"readout basis has d={readout.shape[0]} rows but H has d={d} columns; "
            "the W_U/readout shape does not match the activations"
        )
    k = readout.shape[1]
    if not 1 <= k < d:
        raise InputError(f"k must satisfy 1 <= k < d={d}, got k={k}")
    if not torch.isfinite(readout).all():
        raise InputError("readout contains NaN or inf")
    if not _orthonormal(readout, threads):
        raise InputError("readout must have orthonormal columns; build it with readout_basis(W_U, k)")
    if null_bases is not None:
        null_bases = _checks.float_matrix(null_bases, "null_bases", ndim=3, shape="(n_null, d, k)")
        if tuple(null_bases.shape[1:]) != (d, k):
            raise InputError(f"null_bases must have shape (n_null, {d}, {k}), got {tuple(null_bases.shape)}")
        if not _orthonormal(null_bases, threads):
            raise InputError("null_bases must be orthonormal (n_null, d, k) bases, e.g. haar_bases(d, k, n_null)")
        n_null = null_bases.shape[0]
        if n_null < 2:
            raise InputError(f"null_bases must hold >= 2 bases (the null std needs two), got {n_null}")
    else:
        n_null = _checks.integer(n_null, "n_null", why="the null std needs two subspaces", lo=2)
    return readout.to(torch.float64), n_null


POOL_MIN_PAIRS = 1 << 15
"""Our choice: the null loop runs on a pool of threads ([`parallel_map`][tl_geometry.metrics.thread_choice.parallel_map]) from this many pairs on (N ≥ 257 points); smaller problems run the sequential loop, where a pool's start-up would cost more than it saves."""


def _spearman_and_groups(ref: RankedReference, y: Tensor) -> tuple[float, np.ndarray | None]:
    """ρ and, when the reference has groups, its leave-one-group-out values."""
    return ref.spearman_groups(y) if ref.groups is not None else (ref.spearman(y), None)


def _null_views(
    Hx: Tensor, pairs, bases: Tensor, batch: int, threads: ThreadChoice, evaluate, lead: Tensor | None = None
) -> tuple[Tensor, list]:
    """ρ of each null basis and what ``evaluate(q, Y, y)`` returns beside it (Y the projection, y its similarities).

    ``lead`` (the readout basis): evaluated first, as view q = 0, the null bases then as q = 1 … n
    (our choice: on the pool the readout runs beside the nulls instead of before them on one core).

    Our choice: on CPU, at report sizes, the nulls are spread over a pool of ``threads.workers()``
    threads, each projecting, computing similarities and sorting one null at a time on one core
    (the same ops as the sequential loop, so the same ρ's, bit for bit). Otherwise (small
    problems, a GPU, a pool of 1) the sequential loop: the batched projection on ``threads.dense``
    threads, the per-null similarities and sort on ``threads.sort`` (the load-aware choice,
    [`tl_geometry.runtime.threads.choose`][tl_geometry.runtime.threads.choose], gives one thread when other
    processes want the cores: a sort of N(N−1)/2 keys split over OpenMP threads costs ~4× the CPU
    when another process competes for them).
    """
    cpu = Hx.device.type == "cpu"
    workers = threads.workers() if cpu and pairs.n_pairs >= POOL_MIN_PAIRS else 1
    first = 0 if lead is None else 1
    n = bases.shape[0] + first

    def basis(q: int) -> Tensor:
        return bases[q - first] if q >= first else lead  # type: ignore[return-value]

    if workers > 1 and n > 1:
        Hx64 = Hx.to(torch.float64)

        def one(i: int):
            Y = torch.matmul(Hx64, basis(i).to(torch.float64))
            return evaluate(i, Y, cosine_similarities(Y, pairs))

        out = parallel_map(one, range(n), workers)
        return torch.tensor([r for r, _ in out], dtype=torch.float64), [e for _, e in out]
    rhos = torch.empty(n, dtype=torch.float64)
    extra: list = []
    if lead is not None:
        with limit_threads(1):  # the projection on one thread, as on the pool: the same bits either way
            Y = torch.matmul(Hx.to(torch.float64), lead.to(Hx.device, torch.float64))
        with threads.kernel("sort", Hx.device):
            r, e = evaluate(0, Y, cosine_similarities(Y, pairs))
            rhos[0] = r
            extra.append(e)
    for s in range(0, bases.shape[0], batch):
        with threads.kernel("dense", Hx.device):
            Y = torch.matmul(Hx, bases[s : s + batch].to(Hx.device, torch.float64))  # (b, N, k): one matmul per batch
        with threads.kernel("sort", Hx.device):
            for t in range(Y.shape[0]):
                r, e = evaluate(first + s + t, Y[t], cosine_similarities(Y[t], pairs))
                rhos[first + s + t] = r
                extra.append(e)
    return rhos, extra


def _score(
    Hx, readout, bases, pairs, groups, *, ccr, seed, batch, threads: ThreadChoice, mode: str, method: str, infl=None
) -> PGAScore:
    """The score. ``mode``: "none" (z alone), "fixed" (the jackknife of the full-sample ranks from
    per-group sums of one pass), "refit" (z alone here; `_refit_jackknife` gives the point part),
    "influence" (``infl``: the pieces of `_pga_influence.InfluenceContext` but the reference)."""
    with threads.kernel("sort", Hx.device):  # sorts, as the nulls
        x = cosine_similarities(Hx, pairs)
        ref = RankedReference.from_values(x)
        if mode in ("fixed", "influence"):
            ref = ref.with_groups(groups)
        if ref.ss == 0.0:
            raise InputError("all pairwise distances of H are equal; the rank correlation is undefined")
    ctx = InfluenceContext(ref, groups, pairs, x, Hx, ccr=ccr, **infl) if mode == "influence" else None
    n_full = ctx.n_full if ctx is not None else 0
    # the readout is view 0 of the loop over the null views (our choice: it runs on the pool beside
    # the nulls, its reference-side terms too, instead of before them on one core); null q is view q + 1
    if ctx is not None:
        ctx.prepare()  # the caches the views share, built once here rather than raced for on the pool

        def evaluate(q, Y, y):
            if q == 0:
                t = ctx.view(y, Y, readout)
                if t.b_x is not None:
                    t.ref_terms = ctx.ref_side(t.b_x, t.rho)
            elif q - 1 < n_full:
                t = ctx.view(y, Y, bases[q - 1])
                ctx.add_full_null(q - 1, t, bases.shape[0])
            else:
                t = ctx.view(y)
            return t.rho, t

    else:

        def evaluate(q, Y, y):
            return _spearman_and_groups(ref, y)

    rhos, extra = _null_views(Hx, pairs, bases, batch, threads, evaluate, lead=readout)
    rho, nulls = float(rhos[0]), rhos[1:].clone()
    read, extra = extra[0], extra[1:]
    rho_lo = None if ctx is not None else read
    mean, std = float(nulls.mean()), float(nulls.std(unbiased=True))
    if not math.isfinite(rho) or not torch.isfinite(nulls).all():
        raise InputError("a projected distance vector is constant (e.g. H has zero projection); ρ is undefined")
    if std == 0.0:
        raise InputError("the null ρ's have zero standard deviation; z is undefined (too few points or degenerate H?)")
    z = (rho - mean) / std
    se_points = se_rho = math.nan
    if mode == "fixed" and rho_lo is not None:
        nulls_lo = np.stack(extra)
        with np.errstate(invalid="ignore", divide="ignore"):
            z_lo = (rho_lo - nulls_lo.mean(0)) / nulls_lo.std(0, ddof=1)
        se_points, se_rho = _jackknife_se(z_lo), _jackknife_se(rho_lo)
    elif ctx is not None:
        se_points, se_rho = influence_point_se(read, extra, ctx, std, z)
    se_null = math.nan if mode == "none" else _null_jackknife_z(rho, nulls.numpy())
    d, k = readout.shape
    return PGAScore(
        rho,
        mean,
        std,
        z,
        nulls,
        Hx.shape[0],
        pairs.n_pairs,
        pairs.subsampled,
        ccr,
        k,
        d,
        seed,
        stderr=float(math.sqrt(se_null**2 + se_points**2)),
        stderr_null=se_null,
        stderr_points=se_points,
        stderr_rho=se_rho,
        n_groups=0 if groups is None or mode == "none" else groups.n_groups,
        stderr_method=method,
    )


def _batch_size(n: int, k: int, memory_mb: float) -> int:
    """Null bases projected per matmul: each holds an (N, k) float64 projection."""
    return max(1, min(64, int(min(memory_mb, 2.0**40) * 2**20 // (8 * n * k * 2))))


def pga_profile(
    H: Float[Tensor, "N d"],
    readout: Float[Tensor, "d k"],
    *,
    ccrs: Sequence[int] = (0, 1, 5, 10),
    n_null: int = 100,
    null_bases: Float[Tensor, "n_null d k"] | None = None,
    seed: int = 0,
    max_pairs: int | None = DEFAULT_MAX_PAIRS,
    memory_mb: float = 512,
    n_groups: int = DEFAULT_N_GROUPS,
    groups: Any = None,
    refit_nulls: int = DEFAULT_REFIT_NULLS,
    stderr: str | bool = "influence",
    threads: ThreadChoice | None = None,
) -> dict[int, PGAScore]:
    """PGA scores of one H at several CCR levels, sharing the centering, SVD and null bases.

    Definition (arXiv 2605.17084): at CCR-c, the top c principal directions of the centred H are
    removed, then z_c = (ρ_read − mean ρ_null) / sd ρ_null, with ρ the Spearman correlation of
    pairwise distances before and after projecting onto the readout subspace V_k (ρ_read) or a
    Haar-random k-subspace (ρ_null).

    Same arguments as [`pga_score`][tl_geometry.metrics.pga.pga_score] with ``ccrs`` a sequence of CCR levels; returns
    ``{ccr: PGAScore}``.
    """
    return pga_layer(
        H,
        readout,
        ccrs=ccrs,
        n_null=n_null,
        null_bases=null_bases,
        seed=seed,
        max_pairs=max_pairs,
        memory_mb=memory_mb,
        n_groups=n_groups,
        groups=groups,
        refit_nulls=refit_nulls,
        stderr=stderr,
        threads=threads,
    )[0]


def pga_layer(
    H: Float[Tensor, "N d"],
    readout: Float[Tensor, "d k"],
    *,
    ccrs: Sequence[int] = (0, 1, 5, 10),
    n_null: int = 100,
    null_bases: Float[Tensor, "n_null d k"] | None = None,
    seed: int = 0,
    max_pairs: int | None = DEFAULT_MAX_PAIRS,
    memory_mb: float = 512,
    n_groups: int = DEFAULT_N_GROUPS,
    groups: Any = None,
    refit_nulls: int = DEFAULT_REFIT_NULLS,
    stderr: str | bool = "influence",
    threads: ThreadChoice | None = None,
) -> tuple[dict[int, PGAScore], PC1Overlap]:
    """[`pga_profile`][tl_geometry.metrics.pga.pga_profile] and [`pc1_overlap`][tl_geometry.metrics.pga.pc1_overlap] of one H from one centering and SVD (what a report
    computes per hook): the same numbers as the two calls, one SVD fewer.

    Definitions as in [`pga_profile`][tl_geometry.metrics.pga.pga_profile] (z_c per CCR level c)
    and [`pc1_overlap`][tl_geometry.metrics.pga.pc1_overlap] (‖V_kᵀ p_1‖²), arXiv 2605.17084.
    """
    stderr = _check_stderr(stderr)
    n_groups = _checks.integer(n_groups, "n_groups", why="point groups of the jackknife", lo=2)
    refit_nulls = _check_refit_nulls(refit_nulls)
    ccrs = _checks.nonneg_int_list(single_ok=False)(list(ccrs) if isinstance(ccrs, (tuple, range)) else ccrs, "ccrs")
    seed = _checks.seed(seed)
    max_pairs = _checks.integer(max_pairs, "max_pairs", why="None: all pairs", lo=1, none_ok=True)
    memory_mb = _checks.real(memory_mb, "memory_mb", lo=0.0, lo_open=True)
    threads = resolve(threads)
    H = _check_H(H)
    N, d = H.shape
    readout, n_null = _check_common(d, readout, n_null, null_bases, threads)
    check_n_points(N, readout.shape[1])
    _check_ccrs(ccrs, N, d)
    if null_bases is not None:
        null_bases = _checks.float_matrix(null_bases, "null_bases", ndim=3, shape="(n_null, d, k)")
    else:
        null_bases = haar_bases(d, readout.shape[1], n_null, seed=seed)
    readout = readout.to(H.device)
    Hc, S, Vh, rank = _center_svd(H, threads)
    pairs = make_pairs(N, max_pairs, seed)
    if pairs.subsampled:
        logger.info(
            "PGA: %d points give %d pairs > max_pairs=%d; using %d seeded random pairs",
            N,
            N * (N - 1) // 2,
            max_pairs,
            pairs.n_pairs,
        )
    batch = _batch_size(N, readout.shape[1], memory_mb)
    mode = {"none": "none", "influence": "influence"}.get(stderr, "refit" if refit_nulls else "fixed")
    point_groups = None if mode == "none" else PointGroups.make(pairs, max(2, min(n_groups, N // 5)), seed, groups)
    method = stderr_method(stderr, refit_nulls)
    n_full = min(refit_nulls, n_null)
    shared: dict = {}  # the influence error's pair endpoints, shared by the CCR levels
    scores = {}
    for c in ccrs:
        Hx = _remove_top(Hc, Vh, rank, c)
        infl: dict[str, Any] | None = None
        if mode == "influence":
            infl = dict(Hc=Hc, Vh=Vh, S=S, rank_terms=n_full > 0, n_full=n_full, shared=shared)
        scores[c] = _score(
            Hx,
            readout,
            null_bases,
            pairs,
            point_groups,
            ccr=c,
            seed=seed,
            batch=batch,
            threads=threads,
            mode=mode,
            method=method,
            infl=infl,
        )
    if mode == "refit":
        scores.update(
            _refit_jackknife(
                H, Vh, readout, null_bases, scores, list(ccrs), point_groups, max_pairs, seed, n_full, threads
            )
        )
    return scores, _pc1(S, Vh, readout)


def pga_score(
    H: Float[Tensor, "N d"],
    readout: Float[Tensor, "d k"],
    *,
    n_null: int = 100,
    ccr: int = 1,
    null_bases: Float[Tensor, "n_null d k"] | None = None,
    seed: int = 0,
    max_pairs: int | None = DEFAULT_MAX_PAIRS,
    memory_mb: float = 512,
    n_groups: int = DEFAULT_N_GROUPS,
    groups: Any = None,
    refit_nulls: int = DEFAULT_REFIT_NULLS,
    stderr: str | bool = "influence",
    threads: ThreadChoice | None = None,
) -> PGAScore:
    """Subspace PGA z-score of hidden states H against the readout subspace (steps 1–5 of the module docstring).

    Args:
        H: (N, d) hidden states at one hook (any float dtype; computed in float64).
        readout: (d, k) orthonormal readout basis, e.g. [`readout_basis`][tl_geometry.metrics.pga_bases.readout_basis] of W_U.
        n_null: number of Haar-random null subspaces (ignored when ``null_bases`` is given).
        ccr: CCR level: remove the top-``ccr`` principal directions of the centered H first.
        null_bases: (n_null, d, k) orthonormal bases to use as the null (reproducible across
            implementations); default: [`haar_bases`][tl_geometry.metrics.pga_bases.haar_bases] with ``seed``.
        seed: seeds the null bases and, when pairs are subsampled, the pair sample.
        max_pairs: correlate at most this many pairs; above it a seeded random subset is used
            and ``pairs_subsampled`` is set (None: always all pairs).
        memory_mb: bound on the working memory of the batched null projections.
        n_groups: point groups of the jackknife behind ``stderr`` (at most N // 5 are used).
        groups: instead, one group label (0 … G−1) per row of H, e.g. whole sequences
            ([`tl_geometry.metrics.jackknife.group_labels`][tl_geometry.metrics.jackknife.group_labels] of each point's sequence): points
            of one sequence share a context and are not independent, so a jackknife meant to cover
            a fresh draw of text must delete them together (what ``tg.pga`` does).
        refit_nulls: the null subspaces whose point-sample terms are computed in full
            ([`DEFAULT_REFIT_NULLS`][tl_geometry.metrics.pga.DEFAULT_REFIT_NULLS]): with ``stderr="jackknife"`` each deleted group is
            re-centered, its top-c principal directions re-estimated and ρ_read and this many null
            ρ's recomputed from scratch (their mean shift stands for the null mean's; all of them:
            the null std too); with ``stderr="influence"`` these nulls get the reference-side and
            value terms of the first-order expansion. 0: the full-sample ranks, centering and
            directions held fixed (cheaper; overconfident when the top PCs change with the sample).
        stderr: how the standard error is computed. ``"influence"`` (default; our choice): the
            null part as below plus the first-order (influence-function, delta-method) delete-a-group
            jackknife over the points — the deleted pairs, the re-ranking of the rest, the
            re-centering and, at CCR ≥ 1, the re-estimated principal directions, with no re-sort and
            no refit (derivation: `tl_geometry.metrics._pga_influence`). ``"jackknife"``: the literal
            refit per deleted group (its check; about G·(1 + refit_nulls) extra sorts).
            ``"none"`` (or False): z alone at its own speed, the same z bit for bit, NaN errors and
            ``stderr_method`` "none".
        threads: the [`ThreadChoice`][tl_geometry.metrics.thread_choice.ThreadChoice] of the kernels (default
            [`INHERIT`][tl_geometry.metrics.thread_choice.INHERIT]: torch's setting, factorizations on one
            thread; ``tg.pga`` passes [`tl_geometry.runtime.threads.choose`][tl_geometry.runtime.threads.choose] ``()``, the load-aware
            choice). A choice changes the speed, at most the last bits of a number (a factorization on
            other than one thread, a batched product).

    Standard error (our choice; the paper reports z without one): z is a sampled number twice
    over — n_null random subspaces and N sampled points. ``stderr`` adds the variances of a
    delete-one jackknife over the nulls and a delete-a-group jackknife over the points
    (first-order by default, refit with ``stderr="jackknife"``), see
    [`PGAScore`][tl_geometry.metrics.pga.PGAScore]. It is calibrated across seeds (tests/unit/metrics/test_pga_stderr.py,
    benchmarks/check_pga_stderr_calibration.py).

    Our choice: cosine distance of a zero row (e.g. a point whose projection vanishes) is 1 to
    every other point; ties in distances get average ranks (as ``scipy.stats.spearmanr``).

    Raises:
        ValueError: fewer points than [`min_points`][tl_geometry.metrics.pga.min_points] (k) = max(k + 1, 10), NaN/inf, constant
            activations, readout not matching H, k ≥ d, n_null < 2, a null std of zero, a
            ``stderr`` other than "influence", "jackknife", "none", True or False.

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> V = readout_basis(torch.randn(32, 80, generator=g), 8)
        >>> H = torch.randn(80, 8, generator=g) @ V.T + 0.01 * torch.randn(80, 32, generator=g)
        >>> s = pga_score(H, V, n_null=20, ccr=0)   # H lies in the readout subspace
        >>> s.z > 5, s.n_pairs
        (True, 3160)
    """
    ccr = _checks.integer(ccr, "ccr", why="top principal directions removed", lo=0)
    return pga_profile(
        H,
        readout,
        ccrs=(ccr,),
        n_null=n_null,
        null_bases=null_bases,
        seed=seed,
        max_pairs=max_pairs,
        memory_mb=memory_mb,
        n_groups=n_groups,
        groups=groups,
        refit_nulls=refit_nulls,
        stderr=stderr,
        threads=threads,
    )[ccr]


# ----------------------------------------------------------------------------- PC1 migration
@dataclass(frozen=True)
class PC1Overlap(Tabular):
    """Overlap ‖V_kᵀ p_1‖² of the top principal direction with the readout subspace.

    Attributes:
        overlap: ‖V_kᵀ p_1‖² in [0, 1].
        expected: k/d, its mean for a uniformly random direction.
        ratio: overlap / expected.
        explained_variance: fraction of the total variance along p_1.
    """

    overlap: float
    expected: float
    ratio: float
    explained_variance: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def pc1_overlap(
    H: Float[Tensor, "N d"], readout: Float[Tensor, "d k"], *, threads: ThreadChoice | None = None
) -> PC1Overlap:
    """PC1 migration: how much of the top principal direction p_1 of the centered H lies in V_k.

    Definition (arXiv 2605.17084): overlap = ‖V_kᵀ p_1‖² ∈ [0, 1] with V_k the orthonormal readout
    basis (d × k) and p_1 the unit top right-singular vector of the centred H; a random
    k-subspace gives k/d on average. ``threads`` as in [`pga_score`][tl_geometry.metrics.pga.pga_score].

    Raises:
        ValueError: as [`pga_score`][tl_geometry.metrics.pga.pga_score] for bad H / readout.
    """
    H = _check_H(H)
    d = H.shape[1]
    threads = resolve(threads)
    readout, _ = _check_common(d, readout, 2, None, threads)
    _, S, Vh, _ = _center_svd(H, threads)
    return _pc1(S, Vh, readout)


def _pc1(S: Tensor, Vh: Tensor, readout: Tensor) -> PC1Overlap:
    p1 = Vh[0]
    ov = float(((readout.T @ p1.to(readout.device, readout.dtype)) ** 2).sum())
    exp = readout.shape[1] / Vh.shape[1]
    return PC1Overlap(ov, exp, ov / exp, float(S[0] ** 2 / (S**2).sum()))
