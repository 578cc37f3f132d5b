"""Exact Spearman correlation of pairwise cosine similarities against one fixed reference.

The PGA score compares the ranking of the N(N−1)/2 pairwise distances of the full hidden
states with the ranking in many k-dimensional subspaces. This module ranks the reference once
and then, for each subspace, needs one sort of its similarities and a dot product:

With ``r`` the (average) ranks of the reference and ``o`` the permutation that sorts the
subspace similarities, the subspace rank of pair ``o[j]`` is ``j + 1`` (no ties), so

    Σ_i (r_i − r̄)(q_i − q̄) = Σ_j (r_{o[j]} − r̄) · j,

a gather of the (small, integer) centered reference ranks and a dot with ``arange``; no scatter
of the subspace ranks is needed. Ties are found from the sorted values and then handled exactly
like ``scipy.stats.rankdata(method="average")``. Ranks are held doubled (2·rank is an integer for
average ranks) so that every sum is exact in float64.

Spearman(1 − cos_a, 1 − cos_b) = Spearman(cos_a, cos_b), so cosine *similarities* are ranked.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from tl_geometry.errors import InputError

_EPS = 1e-30


def pair_count(n: int) -> int:
    return n * (n - 1) // 2


@dataclass(frozen=True)
class Pairs:
    """Which pairs (i < j) of N points enter the correlation, and in which (fixed) order.

    All pairs are enumerated block by block: rows are cut into blocks of ``block`` points; for
    blocks a ≤ b the pairs of the block product (a, b) follow in row-major order (for a = b only
    i < j). The order is irrelevant to a rank correlation as long as every vector uses the same
    one, and it lets each Gram block be written straight into the output (half the flops of a
    full N×N Gram, no gather).

    Attributes:
        n_points: N.
        block: rows per block (exact mode).
        i, j: row indices of subsampled pairs (None when all pairs are used).
        subsampled: True when a seeded random subset of pairs is used.
    """

    n_points: int
    block: int
    i: Tensor | None
    j: Tensor | None
    subsampled: bool

    @property
    def n_pairs(self) -> int:
        return pair_count(self.n_points) if self.i is None else int(self.i.numel())


def make_pairs(n: int, max_pairs: int | None, seed: int, block: int = 256) -> Pairs:
    """All N(N−1)/2 pairs, or ``max_pairs`` pairs drawn uniformly (with a seed) when there are more.

    Our choice (the paper is silent): subsampled pairs are drawn i.i.d. uniformly over unordered
    pairs i ≠ j (with replacement, which is immaterial when N(N−1)/2 ≫ max_pairs).
    """
    if max_pairs is None or pair_count(n) <= max_pairs:
        return Pairs(n, block, None, None, False)
    g = torch.Generator().manual_seed(int(seed) + 7919)
    i = torch.randint(0, n, (max_pairs,), generator=g)
    j = torch.randint(0, n - 1, (max_pairs,), generator=g)
    j = j + (j >= i).long()  # uniform over j != i
    return Pairs(n, block, torch.minimum(i, j), torch.maximum(i, j), True)


def pair_endpoints(pairs: Pairs) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (i, j) of every pair, in the order of `Pairs` (NumPy int64)."""
    if pairs.i is not None and pairs.j is not None:
        return pairs.i.numpy().astype(np.int64), pairs.j.numpy().astype(np.int64)
    n, bs = pairs.n_points, pairs.block
    ii, jj = [], []
    for a in range(0, n, bs):
        na = min(bs, n - a)
        ti, tj = np.triu_indices(na, 1)
        ii.append(ti + a)
        jj.append(tj + a)
        if a + bs < n:
            rest = np.arange(a + bs, n)
            ii.append(np.repeat(np.arange(a, a + na), rest.shape[0]))
            jj.append(np.tile(rest, na))
    return np.concatenate(ii).astype(np.int64), np.concatenate(jj).astype(np.int64)


def pair_blocks(pairs: Pairs) -> list[tuple[int, int, int, int]]:
    """The blocks of all pairs in the order of `Pairs`, as ``(a, na, off, nr)``: rows a … a + na − 1
    (one block), whose pairs start at ``off`` with the na(na − 1)/2 pairs i < j inside the block
    (``triu_indices`` order), followed by the na × nr pairs with the nr rows after the block
    (row-major: a matrix view of the pair vector). Exact mode only (``pairs.i`` None)."""
    if pairs.i is not None:
        raise InputError("pair_blocks needs all pairs (subsampled pairs have no block order)")
    n, bs, off, out = pairs.n_points, pairs.block, 0, []
    for a in range(0, n, bs):
        na = min(bs, n - a)
        nr = n - a - na
        out.append((a, na, off, nr))
        off += na * (na - 1) // 2 + na * nr
    return out


@dataclass(frozen=True)
class PointGroups:
    """A seeded split of the N points into G groups, for a delete-a-group jackknife over points.

    Each pair (i, j) falls in the cell ``group[i]·G + group[j]``; deleting group g deletes every
    pair with an end in g. Sums of per-pair quantities per cell give every leave-one-group-out sum
    from one pass over the pairs (total − row g − column g + cell (g, g)).

    Attributes:
        n_groups: G.
        group: (N,) group of each point.
        cell: (P,) cell of each pair, in the order of `Pairs`.
    """

    n_groups: int
    group: np.ndarray = field(repr=False)
    cell: np.ndarray = field(repr=False)

    @classmethod
    def make(cls, pairs: Pairs, n_groups: int, seed: int, labels: Any = None) -> PointGroups:
        """Points dealt round-robin into ``n_groups`` groups after a seeded permutation, or the
        given ``labels`` (one group id in 0 … G−1 per point, every group non-empty)."""
        n = pairs.n_points
        if labels is not None:
            group = np.asarray(torch.as_tensor(labels).cpu(), dtype=np.int64)
            if group.ndim != 1 or group.shape[0] != n:
                raise InputError(f"groups must be one label per point (N={n}), got shape {group.shape}")
            n_groups = int(group.max()) + 1 if n else 0
            if group.min() < 0 or n_groups < 2 or np.bincount(group, minlength=n_groups).min() == 0:
                raise InputError(
                    f"groups must label the points 0 … G−1 with G >= 2 and no empty group, got labels "
                    f"{sorted(set(group.tolist()))[:10]}"
                )
        else:
            if not 2 <= n_groups <= n:
                raise InputError(f"n_groups must satisfy 2 <= n_groups <= N={n}, got {n_groups}")
            perm = np.random.default_rng(int(seed) + 104729).permutation(n)
            group = np.empty(n, dtype=np.int64)
            group[perm] = np.arange(n) % n_groups
        i, j = pair_endpoints(pairs)
        cell = group[i] * n_groups + group[j]
        return cls(n_groups, group, cell)

    def leave_out(self, per_cell: np.ndarray) -> np.ndarray:
        """(…, G·G) per-cell sums → (…, G) sums over the pairs left when each group is deleted."""
        G = self.n_groups
        M = per_cell.reshape(*per_cell.shape[:-1], G, G)
        diag = np.diagonal(M, axis1=-2, axis2=-1)
        return M.sum((-2, -1))[..., None] - M.sum(-1) - M.sum(-2) + diag


def unit_rows(Y: Tensor) -> Tensor:
    """Rows scaled to unit norm; a zero row stays zero (cosine 0 with every other row)."""
    return Y / Y.norm(dim=-1, keepdim=True).clamp_min(_EPS)


def cosine_similarities(Y: Tensor, pairs: Pairs, chunk: int = 1 << 20) -> Tensor:
    """Cosine similarities of the rows of ``Y`` (N, k) at ``pairs``, in the order of `Pairs`."""
    U = unit_rows(Y)
    if pairs.i is not None and pairs.j is not None:  # sampled pairs: i and j are set together
        parts = []
        for s in range(0, pairs.n_pairs, chunk):
            i, j = pairs.i[s : s + chunk].to(U.device), pairs.j[s : s + chunk].to(U.device)
            parts.append((U.index_select(0, i) * U.index_select(0, j)).sum(-1))
        return torch.cat(parts)
    n, bs = U.shape[0], pairs.block
    out = torch.empty(pair_count(n), dtype=U.dtype, device=U.device)
    off = 0
    for a in range(0, n, bs):
        Ua = U[a : a + bs]
        na = Ua.shape[0]
        tri = torch.triu_indices(na, na, 1, device=U.device)
        G = Ua @ Ua.T
        out[off : off + tri.shape[1]] = G[tri[0], tri[1]]
        off += tri.shape[1]
        if a + bs < n:
            rest = U[a + bs :]
            m = na * rest.shape[0]
            torch.matmul(Ua, rest.T, out=out[off : off + m].view(na, rest.shape[0]))
            off += m
    return out


def _sort(x: Tensor) -> tuple[Tensor, Tensor]:
    """Sorted order-preserving integer keys of float ``x`` and the sorting permutation.

    IEEE floats map to integers of the same width whose order is the float order (flip the
    magnitude bits of negatives). ``x + 0.0`` turns −0.0 into +0.0 so equal floats get equal keys.
    The general path (any device, any length); on CPU `_order` is several times faster.
    """
    itype = {torch.float64: torch.int64, torch.float32: torch.int32}[x.dtype]
    b = (x + 0.0).view(itype)
    mask = torch.iinfo(itype).max
    return torch.sort(b ^ ((b >> (torch.iinfo(itype).bits - 1)) & mask), stable=True)


_PACK_MAX = 1 << 31
"""Above this length (2**31, so that a 32-bit key and the index fit one int64) `_order` falls back to `_sort`."""


def _packable(x: Tensor) -> bool:
    return (
        x.device.type == "cpu"
        and x.ndim == 1
        and x.dtype in (torch.float64, torch.float32)
        and 2 <= x.numel() <= _PACK_MAX
    )


def _packed_order(
    xn: np.ndarray, payload: np.ndarray, index: np.ndarray | None, shift: int = 0
) -> tuple[np.ndarray, np.ndarray | None]:
    """The payloads of ``xn``'s elements in the order of a sort of ``xn``, and the sorted values
    where ``xn`` has ties (None: no ties).

    ``payload`` holds distinct integers in [0, M) (the element's index, or its position in the
    reference's order), shifted left by ``shift`` bits that may carry other data (`_packed_fits`;
    the influence error's cell of each pair, which then comes out of the sort with no gather);
    ``index`` maps ``payload >> shift`` back to the element (None: that is the index). The extra
    bits sit below the distinct part, so they change no order.

    Exact float64 order, from one sort of *packed* int64 keys: the order-preserving 32-bit key of
    ``float32(x)`` in the high bits, the payload in the low bits (all keys distinct, so any sort
    gives the same answer; NumPy's SIMD sort of int64 is ~10× faster here than
    ``torch.sort`` of the 64-bit float keys, which falls back to a comparison sort for negative
    keys). Rounding to float32 is monotone (x ≤ y ⇒ f32(x) ≤ f32(y)), so the packed order is the
    float64 order except inside groups of equal float32 keys (~0.4 % of the pairs of a PGA null);
    those members alone are re-sorted by their float64 values with a stable sort (float32 input
    needs no such step: its key is exact). With the index as payload this is exactly a stable sort.
    """
    m = xn.shape[0]
    bits = (m - 1).bit_length() + shift
    f = xn.astype(np.float32) if xn.dtype != np.float32 else xn.copy()
    f += np.float32(0.0)  # −0.0 → +0.0: equal floats, equal keys
    b = f.view(np.int32)
    b ^= (b >> 31) | np.int32(-(2**31))  # order-preserving as uint32: flip negatives, set the sign of positives
    key = b.view(np.uint32).astype(np.int64)
    key <<= bits
    key |= payload
    key.sort()
    low = key & ((1 << bits) - 1)
    key >>= bits
    dup = key[1:] == key[:-1]
    if not dup.any():
        return low, None
    member = np.zeros(m, dtype=bool)
    member[1:] = dup
    member[:-1] |= dup
    at = np.flatnonzero(member)  # positions of the members of groups of equal float32 keys
    sub = low[at]
    ids = sub >> shift if shift else sub
    v = xn[ids if index is None else index[ids]]
    if xn.dtype != np.float32:
        o = np.argsort(v, kind="stable")
        sub, v = sub[o], v[o]
        low[at] = sub
    if not (v[1:] == v[:-1]).any():
        return low, None
    ids = low >> shift if shift else low
    return low, xn[ids if index is None else index[ids]]


def _packed_fits(m: int, shift: int) -> bool:
    """Whether a 32-bit key, the position among ``m`` elements and ``shift`` more bits fit one non-negative int64."""
    return 32 + (m - 1).bit_length() + shift <= 63


def _order(x: Tensor) -> tuple[np.ndarray, bool]:
    """The stable sorting permutation of a 1-D CPU float ``x`` (`_packed_order` with the
    index as payload) and whether ``x`` has ties."""
    xn = x.detach().numpy()
    o, v = _packed_order(xn, _arange(xn.shape[0]), None)
    return o, v is not None


def _rank_order(x: Tensor) -> tuple[Tensor | None, Tensor]:
    """The stable sorting permutation of ``x`` and, where ``x`` may have ties, a vector in sorted
    order whose equal neighbours are exactly the ties (None: no ties)."""
    if _packable(x):
        o_np, ties = _order(x)
        o = torch.from_numpy(o_np)
        return ((x.detach() + 0.0).index_select(0, o) if ties else None), o
    return _sort(x)


@functools.lru_cache(maxsize=2)
def _arange(m: int) -> np.ndarray:
    a = np.arange(m, dtype=np.int64)
    a.flags.writeable = False
    return a


@functools.lru_cache(maxsize=2)
def _centered_ranks(m: int) -> tuple[np.ndarray, np.ndarray]:
    s = 2.0 * _arange(m) + (1.0 - m)
    s2 = s * s
    s.flags.writeable = False
    s2.flags.writeable = False
    return s, s2


@functools.lru_cache(maxsize=2)
def _arange64(m: int) -> Tensor:
    return torch.arange(m, dtype=torch.float64)


def _doubled_average_ranks_sorted(v: Tensor) -> Tensor | None:
    """2·(average rank) at each position of the sorted vector ``v``; None when there are no ties."""
    m = v.shape[-1]
    eq = v[1:] == v[:-1]
    if not bool(eq.any()):
        return None
    pos = torch.arange(m, device=v.device)
    new = torch.ones(m, dtype=torch.bool, device=v.device)
    new[1:] = ~eq
    last = torch.ones(m, dtype=torch.bool, device=v.device)
    last[:-1] = ~eq
    start = torch.cummax(torch.where(new, pos, 0), 0).values
    end = torch.cummin(torch.where(last, pos, m - 1).flip(0), 0).values.flip(0)
    return start + end + 2  # 1-based: (start + 1) + (end + 1)


@dataclass(frozen=True)
class RankedReference:
    """The reference vector ranked once: doubled, centered average ranks and their sum of squares.

    On CPU, when the reference has no ties, also its sorting permutation ``order`` and each
    element's position in it, ``pos`` (NumPy int64): `spearman` then sorts a vector with
    the reference positions as payload and needs no gather of the ranks.
    """

    r2c: Tensor  # 2·rank − (M + 1), int32 or int64, exact
    ss: float  # Σ (rank − mean)²
    n: int
    order: np.ndarray | None = field(default=None, repr=False, compare=False)
    pos: np.ndarray | None = field(default=None, repr=False, compare=False)
    groups: PointGroups | None = field(default=None, repr=False, compare=False)
    ref_cells: np.ndarray | None = field(default=None, repr=False, compare=False)
    """per-cell reference sums (count, Σ r, Σ r²) with r = 2·(rank − mean), and the cell of each element in the reference's sorted order (fast path)"""
    cell_by_pos: np.ndarray | None = field(default=None, repr=False, compare=False)

    def with_groups(self, groups: PointGroups) -> RankedReference:
        """This reference with per-cell sums for `spearman_groups` (one pass over the pairs)."""
        if groups.cell.shape[0] != self.n:
            raise InputError(f"groups cover {groups.cell.shape[0]} pairs but the reference has {self.n}")
        GG = groups.n_groups**2
        r = self.r2c.cpu().numpy().astype(np.float64)
        ref_cells = np.stack(
            [
                np.bincount(groups.cell, minlength=GG).astype(np.float64),
                np.bincount(groups.cell, weights=r, minlength=GG),
                np.bincount(groups.cell, weights=r * r, minlength=GG),
            ]
        )
        cell_by_pos = None if self.order is None else groups.cell[self.order]
        return dataclasses.replace(self, groups=groups, ref_cells=ref_cells, cell_by_pos=cell_by_pos)

    @classmethod
    def from_values(cls, x: Tensor) -> RankedReference:
        m = x.shape[-1]
        v, o = _rank_order(x)
        r2s = None if v is None else _doubled_average_ranks_sorted(v)
        order = pos = None
        if r2s is None:
            r2s = torch.arange(2, 2 * m + 1, 2, device=x.device)
            if o.device.type == "cpu" and _packable(x):
                order = o.numpy()
                pos = np.empty(m, dtype=np.int64)
                pos[order] = _arange(m)
        r2 = torch.empty(m, dtype=torch.int64, device=x.device)
        r2[o] = r2s
        r2c = r2 - (m + 1)
        ss = float((r2c.double() ** 2).sum()) / 4.0
        dtype = torch.int32 if 2 * m + 2 < 2**31 else torch.int64
        return cls(r2c.to(dtype), ss, m, order, pos)

    def _aligned(self, y: Tensor, want_cells: bool) -> tuple[Tensor, Tensor | None, np.ndarray | None]:
        """In ``y``'s sorted order: 2·(r − r̄) of the reference, ``y``'s doubled average ranks where
        ``y`` has ties (None: no ties, the rank at sorted position j is j + 1), and, when asked, the
        cell (`PointGroups`) of each element."""
        m = self.n
        if y.shape[-1] != m:
            raise InputError(f"y has {y.shape[-1]} values but the reference has {m}")
        cells = None
        if self.pos is not None and _packable(y):
            p, vn = _packed_order(y.detach().numpy(), self.pos, self.order)  # reference positions in y's order
            if want_cells and self.cell_by_pos is not None:
                cells = self.cell_by_pos.take(p)
            p <<= 1
            p += 1 - m  # 2·(r − r̄) = 2·position + 1 − M
            g = torch.from_numpy(p.astype(np.float64))
            v = None if vn is None else torch.from_numpy(vn) + 0.0
        else:
            v, o = _rank_order(y)
            if o.device.type == "cpu" and self.r2c.device.type == "cpu":
                g = torch.from_numpy(self.r2c.numpy().take(o.numpy()).astype(np.float64))
            else:
                g = self.r2c.index_select(0, o).double()  # 2·(r − r̄) in y's sorted order
            if want_cells and self.groups is not None:
                cells = self.groups.cell.take(o.cpu().numpy())
        q2 = None if v is None else _doubled_average_ranks_sorted(v)
        return g, q2, cells

    def spearman(self, y: Tensor) -> float:
        """Spearman correlation between the reference and ``y`` (same length); NaN if ``y`` is constant."""
        if self.ss == 0.0:
            return float("nan")
        g, q2, _ = self._aligned(y, False)
        return self._rho(g, q2)

    def _rho(self, g: Tensor, q2: Tensor | None) -> float:
        m = self.n
        if q2 is None:
            # q_j = j + 1 and Σ g = 0, so the centering of q drops out.
            ar = _arange64(m) if g.device.type == "cpu" else torch.arange(m, dtype=torch.float64, device=g.device)
            cov = float(torch.dot(g, ar)) / 2.0
            ssq = m * (m * m - 1) / 12.0
        else:
            q2c = (q2 - (m + 1)).double()
            cov = float(torch.dot(g, q2c)) / 4.0
            ssq = float((q2c**2).sum()) / 4.0
        if ssq == 0.0:
            return float("nan")
        return cov / math.sqrt(self.ss * ssq)

    def spearman_groups(self, y: Tensor) -> tuple[float, np.ndarray]:
        """Spearman correlation and its G leave-one-group-out values (`PointGroups`).

        The full value is `spearman`'s, exactly. Leaving out group g, the correlation is the
        Pearson correlation of the *full-sample* ranks over the pairs that remain (our choice: it
        needs no re-sort; deleting a random group of points deletes pairs evenly across the
        ranks, so the remaining ranks are, to first order, an affine map of their re-ranked
        values, and the jackknife spread is what matters). Needs `with_groups`.
        """
        if self.groups is None or self.ref_cells is None:
            raise InputError("spearman_groups needs a reference with groups (RankedReference.with_groups)")
        m, GG = self.n, self.groups.n_groups**2
        if self.ss == 0.0:
            return float("nan"), np.full(self.groups.n_groups, np.nan)
        g, q2, cells = self._aligned(y, True)
        rho = self._rho(g, q2)
        assert cells is not None
        gn = g.cpu().numpy()
        if q2 is None:
            s, s2 = _centered_ranks(m)  # 2·(q − q̄), q the rank, and its square
        else:
            s = (q2 - (m + 1)).double().cpu().numpy()
            s2 = s * s
        n, sr, srr = (self.groups.leave_out(a) for a in self.ref_cells)
        ss_, sss, srs = (self.groups.leave_out(np.bincount(cells, weights=w, minlength=GG)) for w in (s, s2, gn * s))
        with np.errstate(invalid="ignore", divide="ignore"):
            cov = srs - sr * ss_ / n
            var = (srr - sr * sr / n) * (sss - ss_ * ss_ / n)
            loo = cov / np.sqrt(var)
        return rho, loo
