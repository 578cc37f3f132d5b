"""The influence-function (delta-method) standard error of the Subspace PGA z-score: our choice, with no re-sort.

The paper (Xu, arXiv 2605.17084) reports z without an error. Ours: the point-sample part of the
standard error is the delete-a-group jackknife of z *linearized* (the infinitesimal jackknife):
z₋g − z is replaced by its first-order expansion in the deletion of group g, and the jackknife
formula √((G−1)/G Σ_g (Δz_g − mean)²) is applied to those Δz_g. The literal refit
(``stderr="jackknife"``, `tl_geometry.metrics._pga_jackknife`) is its check. Derivation:

**One view.** For a view (the readout or a null basis) ρ is the Pearson correlation over the P
pairs of the reference ranks r and the view ranks q. Write α, β for the standardized ranks (mean 0,
mean square 1; σ = √((P²−1)/12) the rank sd). Deleting the points of group g does three things.

1. *The pairs with an end in g go* (the set D_g). Pearson over the rest, to first order in the
   deleted sums: Δρ = −(1/P) Σ_{p∈D_g} [α_p β_p − ρ/2 (α_p² + β_p²)].
2. *The remaining pairs are re-ranked.* A remaining pair p loses L_p = #{q ∈ D_g: x_q < x_p} ranks
   (x the reference values; the same for the view values y). The affine part of the loss (f·r_p,
   f = |D_g|/P) leaves a correlation unchanged; the rest moves ρ by −Σ_p L_p ∂ρ/∂r_p with
   ∂ρ/∂r_p = (β_p − ρ α_p)/(Pσ), and Σ_p L_p w_p = Σ_{q∈D_g} T_q with T_q = Σ_{p: x_p > x_q} w_p (a
   cumulative sum in the reference's sorted order). So Δρ = −(1/(Pσ)) Σ_{q∈D_g} (T^x_q + T^y_q),
   T^x over w = β − ρα in the reference's order, T^y over w = α − ρβ in the view's order.
3. *The values move:* the points are re-centered (μ₋g) and, at CCR-c ≥ 1, the top-c principal
   directions re-estimated. X = (H − μ)(I − Π) changes by ΔX = −1 Δμᵀ(I − Π) − (H − μ) ΔΠ, every
   cosine similarity by η_p (view) and ξ_p (reference). A rank moves by Δq_p ≈ P f(y_p)(η_p −
   E[η | y = y_p]) (f the density of the view values), hence Δρ = Σ_p (c^y_p η_p + c^x_p ξ_p) with
   c^y = f_y(y)(α − E[α | y])/σ and c^x = f_x(x)(β − E[β | x])/σ. Our choice: f and the
   conditional means are read off the sorted values over a window of ±⌈√P⌉ positions (no
   re-sort: the orders are those of the full sample). The similarities are linear in ΔX
   (∂s_ij/∂y_i = (u_j − s_ij u_i)/‖y_i‖, u the unit rows), so Δρ = ⟨ΔX, Γ⟩ with Γ built from
   Σ_j c_ij (u_j − s_ij u_i) (matrix–vector products with the pair weights c). First-order
   perturbation of the eigenvectors of Σ_{i∉g} (h_i − μ)(h_i − μ)ᵀ = (H − μ)ᵀ(H − μ) − S_g gives
   ΔΠ = Σ_{a≤c<b} (v_bᵀ(−S_g)v_a)/(s_a² − s_b²)(v_b v_aᵀ + v_a v_bᵀ) (s the singular values, v the
   right singular vectors, S_g = Σ_{i∈g} (h_i − μ)(h_i − μ)ᵀ), and Δμ = −Σ_{i∈g}(h_i − μ)/(N − n_g).
   Both are sums over the points of g, so Δρ = Σ_{i∈g} φ_i with
   φ_i = x_i·(Γᵀ1)/(N − n_g) + Σ_{a≤c<b} Z_ia Z_ib K_ba/(s_a² − s_b²), Z = (H − μ)Vᵀ and
   K_ba = v_bᵀ((H − μ)ᵀΓ + Γᵀ(H − μ))v_a.

**z.** z = (ρ_read − m)/s over n nulls, so Δz = (Δρ_read − Δm)/s − z Δs/s with
Δm = (1/n) Σ_q Δρ_q and Δs = Σ_q (ρ_q − m) Δρ_q / ((n − 1)s). Term 1 and the view side of term 2
need only each view's own sort and are computed for every null (one ``bincount`` per null beside
its sort; each pair's cell rides in the low bits of the sort's key, so no gather). The terms that need a view's ranks in the reference's
order (T^x, c^x) and the value terms of 3 are computed for the readout and the first
``refit_nulls`` nulls, whose mean stands for the null mean's (paired, as the jackknife's refit;
with ``refit_nulls`` = n_null the full Δm and Δs). With ``refit_nulls`` = 0 only term 1 is kept:
the first-order version of the jackknife with the full-sample ranks and directions held fixed.

Our choice: the derivative of a rank is the smoothed one of 3 (a rank is a step function of the
values); ties are ranked as they fall in the stable sort in 2 and 3 (exact only without ties).
"""

from __future__ import annotations

import functools
import math
import threading
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from tl_geometry.metrics._spearman import (
    _EPS,
    Pairs,
    PointGroups,
    RankedReference,
    _doubled_average_ranks_sorted,
    _packable,
    _packed_fits,
    _packed_order,
    _rank_order,
    pair_blocks,
    pair_endpoints,
    unit_rows,
)
from tl_geometry.metrics.thread_choice import limit_threads

__all__: list[str] = []

BLOCK_PRODUCTS = True
"""With all pairs (not subsampled) the products with the pair weights read the weight vector block
by block as matrices (`pair_blocks`: the order of `Pairs`), with no N × N matrix and no scatter;
subsampled pairs (or False) take the dense or chunked path below."""
DENSE_MAX_POINTS = 4096
"""Subsampled pairs: up to this many points the pair weights are summed into a dense N × N matrix (128 MiB at the limit); above it, in chunks of pairs."""


def _one_thread(fn):
    """Run ``fn``'s products on one torch thread: their float64 reductions (C V, (H − μ)Vᵀ, the
    direction terms) would otherwise differ in the last bits between thread counts, and the error
    must not depend on the machine's load (the same rule as the factorizations). They are small
    next to the sorts; inside a pooled null task the count is already one (no change)."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with limit_threads(1):
            return fn(*args, **kwargs)

    return wrapped


@functools.lru_cache(maxsize=2)
def _rank_constants(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """At sorted position j (no ties), with β_j the standardized rank and σ_g = √((m² − 1)/3) the
    sd of the doubled centered ranks g: β_j/σ_g (so that g·β/σ_g = αβ), β_j²/2,
    (Σ_{i≤j} β_i)/σ (σ = σ_g/2 the rank sd), and σ_g."""
    sg = math.sqrt((m * m - 1) / 3.0)
    beta = (2.0 * np.arange(m) + (1.0 - m)) / sg
    out = (beta / sg, beta * beta / 2.0, np.cumsum(beta) * (2.0 / sg))
    for a in out:
        a.flags.writeable = False
    return (*out, sg)


@dataclass
class ViewTerms:
    """What one view contributes: ρ, the per-cell sums of its view-side pair weights, and (full
    views) its per-group reference-side and value terms."""

    rho: float
    cells: np.ndarray  # (G²,) per-cell sums of the term-1 (+ view-side term-2) weights
    extra: np.ndarray | None = None  # (G,) Δρ of the view side of term 3, per deleted group
    b_x: np.ndarray | None = field(default=None, repr=False)  # the view's standardized ranks in the reference's order
    cells_y: np.ndarray | None = None  # (G²,) per-cell sums of the view-side term-2 weights (full views)
    ref_terms: np.ndarray | None = field(default=None, repr=False)  # (G,) its `ref_side`, if computed with it


@dataclass
class InfluenceContext:
    """Everything the views share at one hook and CCR level (built once per score)."""

    ref: RankedReference
    groups: PointGroups
    pairs: Pairs
    x: Tensor  # reference similarities, pair order
    X: Tensor  # (N, d) the points after centering and CCR
    Hc: Tensor  # (N, d) centered points
    Vh: Tensor  # (r, d) right singular vectors of Hc
    S: Tensor  # (r,) singular values
    ccr: int
    rank_terms: bool  # terms 2 and 3 (refit_nulls ≥ 1)
    n_full: int = 0  # nulls whose terms 2 (reference side) and 3 are computed
    shared: dict = field(default_factory=dict, repr=False)  # what does not depend on the CCR level (pair endpoints)
    # `ref_side` of the full-term nulls' sum, set by `add_full_null`
    null_ref_sum: np.ndarray | None = field(default=None, repr=False)
    _cache: dict = field(default_factory=dict, repr=False)
    _full: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # ----------------------------------------------------------------- shared pieces
    @property
    def m(self) -> int:
        return self.ref.n

    @property
    def n_left(self) -> np.ndarray:
        """(G,) pairs left when each group is deleted, |R_g|."""
        if "n_left" not in self._cache:
            counts = np.bincount(self.groups.cell, minlength=self.groups.n_groups**2).astype(np.float64)
            self._cache["n_left"] = self.groups.leave_out(counts)
        return self._cache["n_left"]

    def _packed_cells(self) -> tuple[np.ndarray, int] | None:
        """The sort payload that carries each pair's cell: (position in the reference's order) << b
        | cell, b = bits of G² − 1 (`_packed_order`'s ``shift``), so that a view's sort yields the
        cells in its order with no gather; None when the key, position and cell do not fit 63 bits."""
        if "packed_cells" not in self._cache:
            GG, pos = self.groups.n_groups**2, self.ref.pos
            b = (GG - 1).bit_length()
            out = None
            if pos is not None and _packed_fits(self.m, b):
                out = ((pos << b) | self.groups.cell, b)
            self._cache["packed_cells"] = out
        return self._cache["packed_cells"]

    def _cells_by_pos(self) -> np.ndarray:
        """The cell of each reference position, in the smallest integer type that holds G² (a faster gather)."""
        if "cells" not in self._cache:
            c = self.ref.cell_by_pos
            assert c is not None
            self._cache["cells"] = c.astype(np.int16) if self.groups.n_groups**2 <= np.iinfo(np.int16).max else c
        return self._cache["cells"]

    def _endpoints(self) -> tuple[np.ndarray, np.ndarray]:
        if "ij" not in self.shared:
            self.shared["ij"] = pair_endpoints(self.pairs)
        return self.shared["ij"]

    def _ref_order(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The reference's sorted order (pair indices), the standardized reference ranks and the
        cells in that order."""
        if "ref_order" not in self._cache:
            if self.ref.order is not None:  # no ties: the rank at sorted position j is j + 1 (no gather)
                o = self.ref.order
                g = 2.0 * np.arange(self.m) + (1.0 - self.m)
            else:
                o = np.argsort(self.ref.r2c.cpu().numpy(), kind="stable")
                g = self.ref.r2c.cpu().numpy().astype(np.float64)[o]
            a = g / math.sqrt(float((g * g).mean()))
            cells = self.ref.cell_by_pos  # groups.cell in the reference's order, where it has one (no ties)
            self._cache["ref_order"] = (o, a, self.groups.cell[o] if cells is None else cells)
        return self._cache["ref_order"]

    def _ref_cumsum(self) -> np.ndarray:
        """Σ_{≤j} of the standardized reference ranks in the reference's order, with a leading 0."""
        if "ca" not in self._cache:
            a_x = self._ref_order()[1]
            ca = np.empty(a_x.shape[0] + 1)
            ca[0] = 0.0
            np.cumsum(a_x, out=ca[1:])
            self._cache["ca"] = ca
        return self._cache["ca"]

    def _ref_sorted_values(self) -> np.ndarray:
        if "xs" not in self._cache:
            o = self._ref_order()[0]
            self._cache["xs"] = np.asarray(self.x.detach().cpu().numpy(), dtype=np.float64).take(o)
        return self._cache["xs"]

    def prepare(self) -> None:
        """Build the caches the views share (sort payload, cells, reference order and values, the
        points' factors, the pair blocks) in this thread, before the views run on a pool: each is
        then read, never built twice at once."""
        ref = self.ref
        if ref.pos is not None and ref.order is not None and ref.ref_cells is not None:
            if self._packed_cells() is None and ref.cell_by_pos is not None:
                self._cells_by_pos()
        _ = self.n_left
        if self.rank_terms:
            self._ref_order()
            self._ref_cumsum()
            self._ref_sorted_values()
            self._points()
            if BLOCK_PRODUCTS and self.pairs.i is None:
                self._blocks()
            else:
                self._endpoints()

    # ----------------------------------------------------------------- one view
    def view(self, y: Tensor, Y: Tensor | None = None, B: Tensor | None = None) -> ViewTerms:
        """ρ and the terms of one view with similarities ``y`` (pair order). With ``Y`` (the
        projected points) and ``B`` (the basis) also its value terms and its ranks in the
        reference's order (for `ref_side`)."""
        ref, m, GG = self.ref, self.m, self.groups.n_groups**2
        full = Y is not None and self.rank_terms
        pos, order, ref_cells = ref.pos, ref.order, ref.ref_cells
        fast, packed_p, shift = False, None, 0
        if pos is not None and order is not None and ref_cells is not None and _packable(y):
            packed = self._packed_cells()
            if packed is None:
                p, vn = _packed_order(y.detach().numpy(), pos, order)
            else:  # the cells come out of the sort in the low bits (read chunk by chunk below)
                packed_p, vn = _packed_order(y.detach().numpy(), packed[0], order, shift=packed[1])
                shift = packed[1]
                p = np.right_shift(packed_p, shift, out=self._work("p", m, np.int64))
            fast = vn is None
        if fast and order is not None and ref_cells is not None:
            gs = np.multiply(p, 2.0, out=self._work("gs", m))
            gs += 1.0 - m
            rho = ref._rho(torch.from_numpy(gs), None)  # as RankedReference.spearman: the same bits
            beta_s, beta2h, cb, sg = _rank_constants(m)
            lw, tmp, cbuf = _buffers()
            table = self._cells_by_pos()
            mask = (1 << shift) - 1

            def cells_of(a: int, b: int) -> np.ndarray:
                if packed_p is None:
                    return table.take(p[a:b])
                return np.bitwise_and(packed_p[a:b], mask, out=cbuf[: b - a])

            cells = np.zeros(GG)
            for a in range(0, m, _CHUNK):  # in chunks that stay in cache: α β − ρ β²/2, summed per cell
                b = min(m, a + _CHUNK)
                w, t = lw[: b - a], tmp[: b - a]
                np.multiply(gs[a:b], beta_s[a:b], out=w)
                np.multiply(beta2h[a:b], rho, out=t)
                w -= t
                cells += np.bincount(cells_of(a, b), weights=w, minlength=GG)
            cells -= (rho / 2.0 / (sg * sg)) * ref_cells[2]  # − ρ α²/2: a sum over the reference alone
            out = ViewTerms(rho, cells)
            if full:  # the view-side re-ranking T^y/σ = (−Σ_{≤j} α + ρ Σ_{≤j} β)/σ, and the values
                cg = self._work("cum", m + 1)  # Σ_{≤j} g, shared with the values' window means
                cg[0] = 0.0
                np.cumsum(gs, out=cg[1:])
                cells_y = np.zeros(GG)
                for a in range(0, m, _CHUNK):
                    b = min(m, a + _CHUNK)
                    w, t = lw[: b - a], tmp[: b - a]
                    np.multiply(cg[a + 1 : b + 1], -2.0 / (sg * sg), out=w)
                    np.multiply(cb[a:b], rho, out=t)
                    w += t
                    cells_y += np.bincount(cells_of(a, b), weights=w, minlength=GG)
                out.cells_y = cells_y
                b_x = np.empty(m)
                # the view's standardized ranks in the reference's order
                b_x[p] = np.multiply(beta_s, sg, out=self._work("sw", m))
                out.b_x = b_x
                o_y = np.take(order, p, out=self._work("o_y", m, np.int64))
                out.extra = self._view_value_terms(y, Y, B, o_y, gs, 1.0 / sg, cg)
            return out
        # ties, or not on CPU: the general path, in pair order
        v, o = _rank_order(y)
        o_np = o.cpu().numpy()
        q2s = None if v is None else _doubled_average_ranks_sorted(v)
        ss = (2.0 * np.arange(m) + (1.0 - m)) if q2s is None else (q2s - (m + 1)).double().cpu().numpy()
        gs = ref.r2c.cpu().numpy().astype(np.float64)[o_np]
        rho = ref.spearman(y)
        sg, sb = math.sqrt(float((gs * gs).mean())), math.sqrt(float((ss * ss).mean()))
        a, b_sorted = gs / sg, ss / sb
        lw = a * b_sorted - (rho / 2.0) * (a * a + b_sorted * b_sorted)
        cells_o = self.groups.cell[o_np]
        out = ViewTerms(rho, np.bincount(cells_o, weights=lw, minlength=GG))
        if full:
            ty = np.cumsum(a - rho * b_sorted) * (-2.0 / math.sqrt(sg * sb))
            out.cells_y = np.bincount(cells_o, weights=ty, minlength=GG)
            b_pair = np.empty(m)
            b_pair[o_np] = b_sorted
            out.b_x = b_pair[self._ref_order()[0]]
            out.extra = self._view_value_terms(y, Y, B, o_np, a, 1.0)
        return out

    def _work(self, name: str, m: int, dtype=np.float64) -> np.ndarray:
        """A work vector of m values for this thread, kept for the call (`shared`: all CCR levels).

        Our choice: a full-term view used ~10 fresh vectors of the pairs' length. In a process with
        a small heap (a notebook calling `pga_score`) the allocator handed their memory back to the
        OS and faulted it in again at every view (58 → 37 ms per full-term view at N = 1,024 once
        kept); in a report's process, whose heap holds the model, it mostly did not (no measurable
        change there). The pool's threads hold up to seven each for the layer instead: the peak of
        two concurrent full-term views, as before, held a little longer."""
        mine = self.shared.setdefault("work", {}).setdefault(threading.get_ident(), {})
        a = mine.get(name)
        if a is None or a.shape[0] != m or a.dtype != dtype:
            a = mine[name] = np.empty(m, dtype)
        return a

    def add_full_null(self, q: int, t: ViewTerms, n_null: int) -> None:
        """Record the terms of full-term null ``q``; the view that completes the ``n_full`` computes
        `ref_side` of their sum (Σ b_x, Σ ρ) at once, on its pool thread beside the other nulls.

        Where only some nulls are full their weights in Δz are equal (−1/(n_full·s), s the null
        std known only at the end) and `ref_side` is linear, so the sum is all that is needed; with
        every null full each has its own weight and `influence_point_se` does it."""
        if self.n_full >= n_null or t.b_x is None:
            return
        with self._lock:
            self._full[q] = t
            last = len(self._full) == self.n_full
        if last:
            ts = [self._full[k] for k in sorted(self._full)]  # in null order: the same bits on any schedule
            b_x = ts[0].b_x.copy()
            for u in ts[1:]:
                b_x += u.b_x
            self.null_ref_sum = self.ref_side(b_x, float(sum(u.rho for u in ts)))

    def _view_value_terms(self, y, Y, B, o_y, w_y, scale: float, cw: np.ndarray | None = None) -> np.ndarray:
        """Per deleted group: Δρ of the moved view values (term 3, view side: c^y), with α = scale · ``w_y``
        at the view's sorted positions (``cw``: the cumulative sum of ``w_y`` with a leading 0, if at hand)."""
        m = self.m
        sigma = math.sqrt((m * m - 1) / 12.0)
        ys = np.take(np.asarray(y.detach().cpu().numpy(), dtype=np.float64), o_y, out=self._work("ys", m))
        c_y = self._work("c", m)
        c_y[o_y] = _smoothed_weights(ys, w_y, cw, out=self._work("sw", m))
        phi = self._value_gradient(c_y, y, Y, B)  # linear in c: the scale after the sums
        return np.bincount(self.groups.group, weights=phi, minlength=self.groups.n_groups) * (scale / sigma)

    def ref_side(self, b_x: np.ndarray, rho: float) -> np.ndarray:
        """Per deleted group: Δρ of the reference-side terms of a view whose standardized ranks in
        the reference's order are ``b_x`` (term 2, T^x; term 3, c^x). Linear in (b_x, ρ): a
        weighted sum of views is one call."""
        m, G = self.m, self.groups.n_groups
        o_x, _, cells_x = self._ref_order()
        ca = self._ref_cumsum()
        sigma = math.sqrt((m * m - 1) / 12.0)
        cbx = self._work("cum", m + 1)  # Σ_{≤j} b_x, shared with the values' window means
        cbx[0] = 0.0
        np.cumsum(b_x, out=cbx[1:])
        dx_cells = np.zeros(G * G)
        lw, _, _ = _buffers()
        for a in range(0, m, _CHUNK):  # T^x / σ = (ρ Σ_{≤j} a_x − Σ_{≤j} b_x)/σ (Σ w = 0: the reverse sum is −cumsum)
            b = min(m, a + _CHUNK)
            w = lw[: b - a]
            np.multiply(ca[a + 1 : b + 1], rho, out=w)
            w -= cbx[a + 1 : b + 1]
            w *= 1.0 / sigma
            dx_cells += np.bincount(cells_x[a:b], weights=w, minlength=G * G)
        out = -(dx_cells.sum() - self.groups.leave_out(dx_cells)) / self.n_left  # Σ over D_g, / |R_g|
        c_x = self._work("c", m)
        c_x[o_x] = _smoothed_weights(self._ref_sorted_values(), b_x, cbx, out=self._work("sw", m))
        phi = self._value_gradient(c_x, self.x, self.X, None)  # linear in c: the 1/σ after the sums
        return out + np.bincount(self.groups.group, weights=phi, minlength=G) / sigma

    @_one_thread
    def _apply(self, c: np.ndarray, V: Tensor) -> Tensor:
        """C V with C the symmetric N × N matrix of the pair weights c (zero diagonal)."""
        if BLOCK_PRODUCTS and self.pairs.i is None:
            return self._apply_blocks(c, V)
        i, j = self._endpoints()
        N = self.X.shape[0]
        if N <= DENSE_MAX_POINTS:
            if "flat" not in self.shared:
                self.shared["flat"] = i * N + j
            C = torch.from_numpy(np.bincount(self.shared["flat"], weights=c, minlength=N * N).reshape(N, N))
            return C @ V + C.T @ V  # C holds the pairs i < j once
        out = torch.zeros_like(V)
        ct, it, jt = torch.from_numpy(c), torch.from_numpy(i), torch.from_numpy(j)
        step = max(1, (1 << 24) // max(1, V.shape[1]))
        for s in range(0, c.shape[0], step):
            cc, ii, jj = ct[s : s + step, None], it[s : s + step], jt[s : s + step]
            out.index_add_(0, ii, cc * V.index_select(0, jj))
            out.index_add_(0, jj, cc * V.index_select(0, ii))
        return out

    def _apply_blocks(self, c: np.ndarray, V: Tensor) -> Tensor:
        """`_apply` for all pairs: per block of rows, its triangle as a small dense matrix M
        (M V_a + Mᵀ V_a) and its pairs with the later rows as an na × nr view C_b of ``c``
        (C_b V_rest to the block's rows, C_bᵀ V_a to the later rows). Every weight is read twice
        and nothing is scattered (the N × N matrix took a scatter and two passes over N² values)."""
        ct = torch.from_numpy(np.ascontiguousarray(c, dtype=np.float64))
        out = torch.zeros_like(V)
        for a, na, off, nr, tri in self._blocks():
            Va, nt = V[a : a + na], tri.shape[1]
            if nt:
                M = torch.zeros(na, na, dtype=ct.dtype)
                M[tri[0], tri[1]] = ct[off : off + nt]
                out[a : a + na] += M @ Va + M.T @ Va
            if nr:
                Cb = ct[off + nt : off + nt + na * nr].view(na, nr)
                out[a : a + na] += Cb @ V[a + na :]
                out[a + na :] += (Va.T @ Cb).T  # row-major reads of C_b (C_bᵀ V_a is a strided gemm, 2× slower)
        return out

    def _blocks(self) -> list:
        """`pair_blocks` with each block's upper-triangle indices (shared by the CCR levels)."""
        if "blocks" not in self.shared:
            self.shared["blocks"] = [
                (a, na, off, nr, torch.triu_indices(na, na, 1)) for a, na, off, nr in pair_blocks(self.pairs)
            ]
        return self.shared["blocks"]

    @_one_thread
    def _points(self) -> tuple[Tensor, Tensor, Tensor, Tensor, np.ndarray]:
        """float64 CPU copies of X, the principal scores Z = (H − μ)Vᵀ, Vh, s², and N − n_g per point
        (all but X the same at every CCR level: in `shared`, computed once per layer)."""
        if "points" not in self.shared:
            Vh = self.Vh.to(torch.float64).cpu()
            Z = self.Hc.to(torch.float64).cpu() @ Vh.T
            counts = np.bincount(self.groups.group, minlength=self.groups.n_groups)
            left = (self.X.shape[0] - counts[self.groups.group]).astype(np.float64)
            S2 = self.S.to(torch.float64).cpu() ** 2
            self.shared["points"] = (Z, Vh, S2, left)
        if "X" not in self._cache:
            self._cache["X"] = self.X.to(torch.float64).cpu()
        return (self._cache["X"], *self.shared["points"])

    @_one_thread
    def _value_gradient(self, c: np.ndarray, s: Tensor, Y: Tensor, B: Tensor | None) -> np.ndarray:
        """φ_i (per point) of Σ_p c_p Δs_p for the view Y = X B (B None: the reference, Y = X)."""
        N = Y.shape[0]
        X, Z, Vh, S2, left = self._points()
        Y = Y.to(torch.float64).cpu()
        nrm = Y.norm(dim=1).clamp_min(_EPS)
        U = unit_rows(Y)
        cs = c * np.asarray(s.detach().cpu().numpy(), dtype=np.float64)
        if BLOCK_PRODUCTS and self.pairs.i is None:  # row sums of the weights c·s: C_s 1 from the blocks
            mvec = self._apply(cs, torch.ones(N, 1, dtype=torch.float64))[:, 0]
        else:
            i, j = self._endpoints()
            mvec = torch.from_numpy(np.bincount(i, weights=cs, minlength=N) + np.bincount(j, weights=cs, minlength=N))
        cc = self.ccr
        Bm = None if B is None else B.to(torch.float64).cpu()
        Vt = Vh[:cc].T  # (d, c)
        T = U @ (Vt if Bm is None else Bm.T @ Vt)  # (N, c): U Bᵀ v_a
        cols = torch.cat([T, Z[:, :cc] / nrm[:, None], (1.0 / nrm)[:, None]], dim=1)
        CV = self._apply(c, cols)
        back = U.T @ (CV[:, cc:] - mvec[:, None] * cols[:, cc:])  # (k, c + 1)
        back = back if Bm is None else Bm @ back  # (d, c + 1): Γᵀ Z_a and Γᵀ 1
        phi = (X @ back[:, cc]).numpy() / left  # centering: x_i · Γᵀ1 / (N − n_g)
        if cc:
            gv = (CV[:, :cc] - mvec[:, None] * T) / nrm[:, None]  # Γ v_a, (N, c)
            Kmat = Z[:, cc:].T @ gv + Vh[cc:] @ back[:, :cc]  # (r − c, c): K_ba
            with np.errstate(divide="ignore", invalid="ignore"):
                Kmat = Kmat / (S2[:cc][None, :] - S2[cc:][:, None])
            psi = ((Z[:, cc:] @ Kmat) * Z[:, :cc]).sum(1)  # the re-estimated directions
            phi = phi + psi.numpy() * (N / left)
        return phi


_LOCAL = threading.local()
_CHUNK = 1 << 15
"""Pairs per chunk of the per-null pass (three float64 vectors of it stay in a core's cache)."""


def _buffers() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Work vectors of `_CHUNK` values, one set per thread (the nulls run on a pool): two float64
    (512 KiB together) and one int64 (a chunk's cells)."""
    buf = getattr(_LOCAL, "buf", None)
    if buf is None or buf[0].shape[0] < _CHUNK:
        buf = (np.empty(_CHUNK), np.empty(_CHUNK), np.empty(_CHUNK, np.int64))
        _LOCAL.buf = buf
    return buf


def _smoothed_weights(
    vs: np.ndarray, w: np.ndarray, cw: np.ndarray | None = None, out: np.ndarray | None = None
) -> np.ndarray:
    """f(v)·(w − E[w | v]) at each position j of the sorted values ``vs`` (term 3): the density
    (hi − lo)/(P (v_hi − v_lo)) and the mean of w over the window [lo, hi] = [j − h, j + h] ∩ [0, P − 1],
    h = ⌈√P⌉ (0 where the window holds one value). ``cw``: the cumulative sum of w with a leading
    0 (P + 1 values) where the caller has it; ``out``: where to write (P values).

    Slices, no gathers; the windows of the middle positions in chunks that stay in a core's cache,
    into two per-thread work vectors (a full-length pass per step, with fresh vectors each call,
    was 2–3× slower)."""
    m = vs.shape[0]
    h = max(1, math.ceil(math.sqrt(m)))
    if 2 * h >= m:  # a handful of pairs: gathers
        j = np.arange(m)
        lo, hi = np.maximum(j - h, 0), np.minimum(j + h, m - 1)
        sp = vs[hi] - vs[lo]
        c0 = np.concatenate([[0.0], np.cumsum(w)])
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(sp > 0, (hi - lo) / (m * sp), 0.0)
        r = f * (w - (c0[hi + 1] - c0[lo]) / (hi - lo + 1))
        if out is None:
            return r
        out[:] = r
        return out
    if cw is None:
        cw = np.empty(m + 1)
        cw[0] = 0.0
        np.cumsum(w, out=cw[1:])
    if out is None:
        out = np.empty(m)
    e = np.arange(h)  # the edges: windows [0, j + h] and [j − h, m − 1]
    edges = (
        (slice(0, h), vs[h : 2 * h] - vs[0], e + h, cw[h + 1 : 2 * h + 1] / (e + h + 1)),
        (
            slice(m - h, m),
            vs[m - 1] - vs[m - 2 * h : m - h],
            2 * h - 1 - e,
            (cw[m] - cw[m - 2 * h : m - h]) / (2 * h - e),
        ),
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        for at, span, num, mean in edges:
            out[at] = np.where(span > 0, num / (span * m), 0.0) * (w[at] - mean)
        dens, inv = 2.0 * h / m, -1.0 / (2 * h + 1)  # the middle: num = 2h, 2h + 1 values
        sp_buf, mu_buf, _ = _buffers()
        for a in range(h, m - h, _CHUNK):
            b = min(m - h, a + _CHUNK)
            sp, mu = sp_buf[: b - a], mu_buf[: b - a]
            np.subtract(vs[a + h : b + h], vs[a - h : b - h], out=sp)
            np.subtract(cw[a + h + 1 : b + h + 1], cw[a - h : b - h], out=mu)
            mu *= inv
            mu += w[a:b]
            flat = not sp.min() > 0  # a zero-width window (ties) or NaN: density 0 there
            if flat:
                zero = ~(sp > 0)
            np.divide(dens, sp, out=sp)
            np.multiply(sp, mu, out=out[a:b])
            if flat:
                out[a:b][zero] = 0.0
    return out


def influence_point_se(
    read: ViewTerms, nulls: list[ViewTerms], ctx: InfluenceContext, null_std: float, z: float
) -> tuple[float, float]:
    """(stderr of z, stderr of ρ_read) from the point sample: the jackknife formula on the first-order Δz_g."""
    groups, n_left = ctx.groups, ctx.n_left

    def d_rho(t: ViewTerms, cells: np.ndarray | None = None) -> np.ndarray:
        c = t.cells if cells is None else cells
        return -(c.sum() - groups.leave_out(c)) / n_left

    def d_rho_y(t: ViewTerms) -> np.ndarray:
        assert t.cells_y is not None
        return d_rho(t, t.cells_y)

    rho_q = np.array([t.rho for t in nulls])
    n = rho_q.shape[0]
    coef = -(1.0 / null_std) * (1.0 / n + z * (rho_q - rho_q.mean()) / ((n - 1) * null_std))
    dr = d_rho(read)
    if read.b_x is not None and read.extra is not None and read.cells_y is not None:
        ref_terms = read.ref_terms if read.ref_terms is not None else ctx.ref_side(read.b_x, read.rho)
        dr = dr + d_rho_y(read) + read.extra + ref_terms
    dz = dr / null_std
    for q, t in enumerate(nulls):
        dz = dz + coef[q] * d_rho(t)
    full = [(q, t) for q, t in enumerate(nulls) if t.b_x is not None and t.extra is not None and t.cells_y is not None]
    if full:  # the null terms computed in full: all nulls (their own weights) or a few (the mean shift)
        w = coef[: len(full)] if len(full) == n else np.full(len(full), -1.0 / (len(full) * null_std))
        own = sum(wq * (t.extra + d_rho_y(t)) for wq, (_, t) in zip(w, full, strict=True))
        if len(full) < n and ctx.null_ref_sum is not None:  # equal weights: the sum's, from the pool
            ref_terms = w[0] * ctx.null_ref_sum
        else:
            b_x = sum(wq * t.b_x for wq, (_, t) in zip(w, full, strict=True))
            rho_w = float(sum(wq * t.rho for wq, (_, t) in zip(w, full, strict=True)))
            ref_terms = ctx.ref_side(b_x, rho_w)
        dz = dz + ref_terms + own
    G = groups.n_groups
    return _lin_se(dz, G), _lin_se(dr, G)


def _lin_se(d: np.ndarray, G: int) -> float:
    """√((G − 1)/G · Σ_g (d_g − mean d)²): the delete-a-group jackknife formula on first-order changes."""
    if not np.isfinite(d).all():
        return math.nan
    return float(math.sqrt((G - 1) / G * float(((d - d.mean()) ** 2).sum())))
