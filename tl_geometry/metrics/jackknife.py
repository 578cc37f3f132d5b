"""Delete-a-group jackknife: group labels of whole sequences and the standard error.

Shared by the sampled metrics (ε of activations, spectral metrics); pure tensors.
"""

from __future__ import annotations

from typing import Any

import torch
from jaxtyping import Int
from torch import Tensor

from tl_geometry.errors import InputError

__all__ = ["group_labels", "jackknife_se"]


def group_labels(owners: Any, n_groups: int) -> Int[Tensor, " n"]:
    """Group label per row for a delete-a-group jackknife: whole owners (e.g. sequences) per group.

    Definition (the grouped jackknife these labels feed): with θ_(g) the estimate without group
    g of G, se = √((G − 1)/G · Σ_g (θ_(g) − θ̄)²).

    Rows whose ``owners`` (a 1-D integer id per row, e.g. the sequence of each sampled position)
    are equal always share a group; the sorted distinct owners are cut into ``min(n_groups,
    n_owners)`` contiguous runs of about equal row counts. With a single owner, the rows (in
    their order) are cut into ``n_groups`` contiguous blocks instead.

    Our choice: positions of one sequence are correlated (they share a context), so a jackknife
    that split them across groups would treat correlated points as independent and understate
    the error of a statistic meant to describe text in general; keeping each sequence in one
    group makes it a cluster jackknife whose resampling unit is the sequence.

    Raises:
        InputError: ``owners`` not 1-D, fewer than 2 rows, or ``n_groups`` < 2.

    Examples:
        >>> group_labels(torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]), 2).tolist()
        [0, 0, 0, 0, 1, 1, 1, 1]
    """
    owners = torch.as_tensor(owners)
    if owners.ndim != 1 or owners.numel() < 2:
        raise InputError(f"owners must be a 1-D id per row with >= 2 rows, got shape {tuple(owners.shape)}")
    if isinstance(n_groups, bool) or not isinstance(n_groups, int) or n_groups < 2:
        raise InputError(f"n_groups must be an integer >= 2, got {n_groups!r}")
    n = owners.numel()
    uniq, inv, counts = torch.unique(owners, return_inverse=True, return_counts=True)
    if uniq.numel() < 2:  # one sequence: contiguous blocks of rows
        return torch.div(torch.arange(n) * min(n_groups, n), n, rounding_mode="floor")
    g = min(n_groups, uniq.numel())
    # cut the cumulative row count of the sorted owners into g about-equal runs
    mid = torch.cumsum(counts, 0) - counts.double() / 2
    owner_group = torch.div(mid * g, n, rounding_mode="floor").long().clamp(0, g - 1)
    # relabel to 0..G'-1 (a run can be empty when one owner holds many rows)
    _, owner_group = torch.unique(owner_group, return_inverse=True)
    return owner_group[inv]


def jackknife_se(reps: Tensor) -> Tensor:
    """Delete-a-group jackknife standard error, ``sqrt((G−1)/G · Σ_g (θ_(g) − θ̄)²)`` per column.

    Args:
        reps: (G, k) the k statistics recomputed without each of the G groups (NaN propagates).

    Examples:
        >>> float(jackknife_se(torch.tensor([[1.0], [3.0]]))[0])
        1.0
    """
    G = reps.shape[0]
    return ((G - 1) / G * ((reps - reps.mean(0)) ** 2).sum(0)).sqrt()
