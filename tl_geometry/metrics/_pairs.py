"""The one blockwise engine over all pairs of unit rows: histogram, top-N pairs, exceedance, max |cos|.

Every question about the pairwise cosines of n rows that the exact moments (O(n d²), in
[`tl_geometry.metrics.capacity`][tl_geometry.metrics.capacity]) cannot answer goes through `pair_pass`: the cosine
histogram and the most similar pairs ([`tl_geometry.similarity_stats`][tl_geometry.metrics.capacity.similarity_stats]), the number of pairs
above a |cos| level (an SAE decoder against its host's ε) and the worst-case |cos| (vector
packing). Memory is O(block² + n·d) whatever n; time is O(n²·d) (one matrix product per pair of
blocks; only blocks I ≤ J are computed, the similarity matrix being symmetric).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class PairSummary:
    """What one pass over all pairs i ≠ j of unit rows found (fields not asked for are None).

    Attributes:
        n_rows: n; n_pairs: unordered pairs n(n−1)/2.
        counts, edges: histogram of cos over all ordered pairs on [-1, 1] (``bins``).
        top: the ``top_n`` most similar unordered pairs ``(i, j, cos)``, i < j, by cos descending.
        n_above: unordered pairs with |cos| > ``above``.
        max_abs: max_{i≠j} |cos|.
    """

    n_rows: int
    n_pairs: int
    counts: Tensor | None = None
    edges: Tensor | None = None
    top: list[tuple[int, int, float]] | None = None
    n_above: int | None = None
    max_abs: float | None = None


@torch.no_grad()
def pair_pass(
    U: Tensor,
    *,
    bins: int | None = None,
    top_n: int = 0,
    above: float | None = None,
    max_abs: bool = False,
    block: int = 4096,
    progress: bool = False,
) -> PairSummary:
    """One blockwise pass over all pairs of the (already unit) rows of ``U``.

    Args:
        U: (n, d) unit rows, float32 (or float64).
        bins: equal bins on [-1, 1] for the histogram of cos over ordered pairs (None: none).
        top_n: number of most similar unordered pairs to keep (0: none).
        above: count unordered pairs with |cos| > above (None: no count).
        max_abs: find max_{i≠j} |cos|.
        block: rows per block.
        progress: a tqdm bar over blocks.
    """
    from tqdm.auto import tqdm

    n = U.shape[0]
    counts = torch.zeros(bins, dtype=torch.float64) if bins else None
    top_vals = torch.empty(0, dtype=U.dtype)
    top_idx = torch.empty((0, 2), dtype=torch.long)
    n_above = 0
    best = 0.0
    starts = list(range(0, n, block))
    pairs = [(a, b) for ai, a in enumerate(starts) for b in starts[ai:]]
    for a, b in tqdm(pairs, desc="pair blocks", disable=not progress, leave=False):
        Ua, Ub = U[a : a + block], U[b : b + block]
        S = Ua @ Ub.T
        if above is not None or max_abs:  # before clamping: the products as computed
            A = S.abs()
            if a == b:
                A.diagonal().zero_()  # self-pairs
            if max_abs and A.numel():
                best = max(best, float(A.max()))  # both orders of a diagonal block: as max_abs_cos always did
            if above is not None:
                n_above += int((A.triu(1) if a == b else A).gt_(float(above)).sum())
            del A
        if counts is None and top_n <= 0:
            continue
        S.clamp_(-1.0, 1.0)
        upper = torch.ones_like(S, dtype=torch.bool).triu(1) if a == b else None  # pairs i < j of a diagonal block
        if counts is not None and bins:
            h = torch.histc(S, bins=bins, min=-1.0, max=1.0).double()
            if a == b:  # diagonal block: both orders already present; remove the self-pairs
                h -= torch.histc(S.diagonal(), bins=bins, min=-1.0, max=1.0).double()
            else:  # off-diagonal block stands for itself and its transpose
                h *= 2
            counts += h
        if top_n > 0:
            T = S.masked_fill(~upper, float("-inf")) if upper is not None else S
            m = min(top_n, T.numel())
            vals, flat = torch.topk(T.flatten(), m)
            keep = torch.isfinite(vals)
            vals, flat = vals[keep], flat[keep]
            idx = torch.stack([flat // T.shape[1] + a, flat % T.shape[1] + b], dim=1)
            top_vals = torch.cat([top_vals, vals])
            top_idx = torch.cat([top_idx, idx])
            if top_vals.numel() > top_n:
                top_vals, order = torch.topk(top_vals, top_n)
                top_idx = top_idx[order]
    edges = torch.linspace(-1.0, 1.0, bins + 1, dtype=torch.float64) if bins else None
    top = None
    if top_n > 0:
        order = torch.argsort(top_vals, descending=True)
        top = [(int(top_idx[o, 0]), int(top_idx[o, 1]), float(top_vals[o])) for o in order]
    return PairSummary(
        n_rows=n,
        n_pairs=n * (n - 1) // 2,
        counts=counts.round().long() if counts is not None else None,
        edges=edges,
        top=top,
        n_above=n_above if above is not None else None,
        max_abs=best if max_abs else None,
    )


def pair_histogram_and_top(
    U: Tensor,
    *,
    bins: int | None,
    top_n: int = 0,
    block: int = 4096,
    progress: bool = True,
) -> tuple[Tensor | None, Tensor | None, list[tuple[int, int, float]]]:
    """Histogram of cos(u_i, u_j) over all ordered pairs i ≠ j and the top-N unordered pairs
    (`pair_pass` with ``bins`` and ``top_n``).

    Returns:
        (counts int64 (bins,) or None, edges (bins+1,) or None, [(i, j, cos), ...] sorted by cos
        descending, indices into U's rows).
    """
    r = pair_pass(U, bins=bins, top_n=top_n, block=block, progress=progress)
    return r.counts, r.edges, (r.top or [])
