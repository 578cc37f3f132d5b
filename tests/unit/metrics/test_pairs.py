"""The one pairwise-cosine engine (metrics._pairs.pair_pass) against a slow all-pairs reference."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from tl_geometry.metrics._pairs import pair_histogram_and_top, pair_pass


def _unit(n, d, seed):
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    x[3] = x[1]  # an exact duplicate: cos 1
    x[5] = -x[2]  # an exact opposite: cos -1
    return x / x.norm(dim=1, keepdim=True)


def _reference(U, bins, top_n, above):
    n = U.shape[0]
    cos = {(i, j): float(U[i] @ U[j]) for i, j in itertools.combinations(range(n), 2)}
    ordered = [max(-1.0, min(1.0, c)) for c in cos.values()] * 2
    counts, _ = np.histogram(ordered, bins=bins, range=(-1.0, 1.0))
    top = sorted(cos.items(), key=lambda kv: -kv[1])[:top_n]
    return counts, top, sum(abs(c) > above for c in cos.values()), max(abs(c) for c in cos.values())


@pytest.mark.parametrize("block", [4, 7, 64])
def test_pair_pass_equals_the_all_pairs_reference(block):
    U = _unit(23, 5, seed=block)
    r = pair_pass(U, bins=11, top_n=6, above=0.5, max_abs=True, block=block)
    counts, top, n_above, mx = _reference(U, 11, 6, 0.5)
    assert r.n_rows == 23 and r.n_pairs == 23 * 22 // 2
    assert r.counts.tolist() == counts.tolist() and int(r.counts.sum()) == 23 * 22
    assert [(i, j) for i, j, _ in r.top] == [ij for ij, _ in top]
    assert [c for *_, c in r.top] == pytest.approx([c for _, c in top], abs=1e-12)
    assert r.n_above == n_above
    assert r.max_abs == pytest.approx(mx, abs=1e-12) and r.max_abs == pytest.approx(1.0)


def test_fields_not_asked_for_are_none_and_the_view_agrees():
    U = _unit(9, 3, seed=1)
    r = pair_pass(U, above=0.9, block=4)
    assert r.counts is None and r.edges is None and r.top is None and r.max_abs is None and r.n_above >= 1
    counts, edges, top = pair_histogram_and_top(U, bins=5, top_n=2, block=4, progress=False)
    full = pair_pass(U, bins=5, top_n=2, block=4)
    assert torch.equal(counts, full.counts) and torch.equal(edges, full.edges) and top == full.top


def test_known_answer_orthonormal_rows():
    r = pair_pass(torch.eye(6, dtype=torch.float64), bins=2, top_n=1, above=0.0, max_abs=True, block=4)
    assert r.max_abs == 0.0 and r.n_above == 0 and r.counts.tolist() == [0, 30]  # cos 0 falls in the upper bin
