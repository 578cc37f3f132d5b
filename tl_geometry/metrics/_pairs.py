"""Blockwise passes over all pairs of unit rows: exact histogram and top-N most similar pairs.

Used by :func:`tl_geometry.metrics.capacity.similarity_stats` when a histogram or the top pairs
are asked for. Memory is O(block² + n·d) whatever n; time is O(n²·d) (one float32 matrix
product per pair of blocks, only blocks I ≤ J are computed: the similarity matrix is
symmetric).
"""

from __future__ import annotations

import torch
from torch import Tensor


def pair_histogram_and_top(
    U: Tensor,
    *,
    bins: int | None,
    top_n: int = 0,
    block: int = 4096,
    progress: bool = True,
) -> tuple[Tensor | None, Tensor | None, list[tuple[int, int, float]]]:
    """Histogram of cos(u_i, u_j) over all ordered pairs i ≠ j and the top-N unordered pairs.

    Args:
        U: (n, d) unit rows, float32 (or float64).
        bins: number of equal bins on [-1, 1], or None for no histogram.
        top_n: number of most similar unordered pairs (i < j) to return.
        block: rows per block.

    Returns:
        (counts int64 (bins,) or None, edges (bins+1,) or None, [(i, j, cos), ...] sorted by cos
        descending, indices into U's rows).
    """
    from tqdm.auto import tqdm

    n = U.shape[0]
    counts = torch.zeros(bins, dtype=torch.float64) if bins else None
    top_vals = torch.empty(0, dtype=U.dtype)
    top_idx = torch.empty((0, 2), dtype=torch.long)
    starts = list(range(0, n, block))
    pairs = [(a, b) for ai, a in enumerate(starts) for b in starts[ai:]]
    for a, b in tqdm(pairs, desc="pair blocks", disable=not progress, leave=False):
        Ua, Ub = U[a : a + block], U[b : b + block]
        S = (Ua @ Ub.T).clamp_(-1.0, 1.0)
        if counts is not None:
            h = torch.histc(S, bins=bins, min=-1.0, max=1.0).double()
            if a == b:  # diagonal block: both orders already present; remove the self-pairs
                h -= torch.histc(S.diagonal(), bins=bins, min=-1.0, max=1.0).double()
            else:  # off-diagonal block stands for itself and its transpose
                h *= 2
            counts += h
        if top_n > 0:
            if a == b:
                S = S.masked_fill(~torch.ones_like(S, dtype=torch.bool).triu(1), float("-inf"))
            m = min(top_n, S.numel())
            vals, flat = torch.topk(S.flatten(), m)
            keep = torch.isfinite(vals)
            vals, flat = vals[keep], flat[keep]
            idx = torch.stack([flat // S.shape[1] + a, flat % S.shape[1] + b], dim=1)
            top_vals = torch.cat([top_vals, vals])
            top_idx = torch.cat([top_idx, idx])
            if top_vals.numel() > top_n:
                top_vals, order = torch.topk(top_vals, top_n)
                top_idx = top_idx[order]
    edges = torch.linspace(-1.0, 1.0, bins + 1, dtype=torch.float64) if bins else None
    order = torch.argsort(top_vals, descending=True)
    top = [(int(top_idx[o, 0]), int(top_idx[o, 1]), float(top_vals[o])) for o in order]
    return (counts.round().long() if counts is not None else None), edges, top
