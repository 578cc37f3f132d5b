"""Neural feature ansatz (Radhakrishnan et al., Science 2024; arXiv 2605.27989): does a layer's weight Gram W Wᵀ follow its AGOP?

r = Pearson correlation of the off-diagonal entries of W Wᵀ with those of the AGOP G (and of
G^(1/2)), with jackknife standard errors over probe groups. Pure functions on tensors;
re-exported by [`tl_geometry.metrics.interaction`][tl_geometry.metrics.interaction].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from tl_geometry.base import _checks
from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError
from tl_geometry.metrics.aofe import _check_square
from tl_geometry.metrics.thread_choice import ThreadChoice, resolve

__all__ = ["NFACorrelation", "nfa_correlation", "nfa_jackknife", "offdiag_pearson"]


@dataclass(frozen=True)
class NFACorrelation(Tabular):
    """Neural-feature-ansatz agreement between a weight Gram and an AGOP.

    Definition (neural feature ansatz, as used in arXiv 2605.27989): r = Pearson correlation of
    the off-diagonal entries (i < j) of W Wᵀ with those of G = E_x[J(x)ᵀ J(x)] (the AGOP), and
    the same against G^(1/2).

    Attributes:
        pearson: Pearson r of the off-diagonal entries (i < j) of W Wᵀ and of G.
        pearson_sqrt: the same against G^(1/2) (principal square root, negative eigenvalues
            clipped to 0).
        n_pairs: number of off-diagonal entries compared, d(d − 1)/2.
        pearson_stderr, pearson_sqrt_stderr: standard errors from the AGOP's probe noise
            ([`nfa_jackknife`][tl_geometry.metrics.nfa.nfa_jackknife]); 0.0 for an exact AGOP.
        stderr_method: ``"exact"`` or ``"jackknife over K probe groups"``.
    """

    pearson: float
    pearson_sqrt: float
    n_pairs: int
    pearson_stderr: float = 0.0
    pearson_sqrt_stderr: float = 0.0
    stderr_method: str = "exact"

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _pearson(x: Tensor, y: Tensor) -> float:
    x, y = x - x.mean(), y - y.mean()
    den = x.norm() * y.norm()
    if den == 0:
        raise InputError("Pearson correlation undefined: constant off-diagonal entries")
    return float((x * y).sum() / den)


def nfa_correlation(
    W_in: Float[Tensor, "d h"], G: Float[Tensor, "d d"], *, threads: ThreadChoice | None = None
) -> NFACorrelation:
    """Pearson correlation of the off-diagonal entries of ``W_in W_inᵀ`` with those of G and G^(1/2).

    The neural feature ansatz (Radhakrishnan et al., Science 2024) states that a trained layer's
    Gram ``W Wᵀ`` (with W mapping the layer input, here TL's ``W_in`` of shape d_model × d_mlp)
    is proportional to a power of the AGOP taken with respect to that input; powers 1 and 1/2
    are both in use. ``threads``: the [`ThreadChoice`][tl_geometry.metrics.thread_choice.ThreadChoice] of the eigendecomposition of G (default: one thread).

    Raises:
        ValueError: shapes disagree, fewer than 3 dimensions (≤ 1 pair), non-finite entries.
    """
    W_in = _checks.float_matrix(W_in, "W_in", shape="(d_model, d_mlp)")
    G = _check_square(G)
    if W_in.shape[0] != G.shape[0]:
        raise InputError(f"W_in has {W_in.shape[0]} input rows but G is {tuple(G.shape)}")
    if G.shape[0] < 3:
        raise InputError("need d >= 3 for a correlation over off-diagonal pairs")
    W = W_in.detach().double()
    gram = W @ W.T
    Gs = 0.5 * (G.double() + G.double().T)
    with resolve(threads).kernel("lapack", Gs.device):  # one thread: reproducible bits, immune to other work
        evals, evecs = torch.linalg.eigh(Gs)
    root = (evecs * evals.clamp_min(0).sqrt()) @ evecs.T
    iu = torch.triu_indices(G.shape[0], G.shape[0], 1)
    off = lambda M: M[iu[0], iu[1]]  # noqa: E731
    return NFACorrelation(_pearson(off(gram), off(Gs)), _pearson(off(gram), off(root)), int(iu.shape[1]))


def nfa_jackknife(
    W_in: Float[Tensor, "d h"],
    G: Float[Tensor, "d d"],
    replicates: list[Tensor],
    *,
    threads: ThreadChoice | None = None,
) -> NFACorrelation:
    """[`nfa_correlation`][tl_geometry.metrics.nfa.nfa_correlation] with delete-a-group jackknife standard errors over probe groups.

    ``replicates`` are the AGOP estimates without each probe group ([`leave_group_out`][tl_geometry.metrics.interaction.leave_group_out]); the
    correlations are recomputed on each and ``se = sqrt((K−1)/K · Σ_k (r_(k) − r̄)²)``. Our choice:
    this covers the probe estimator's noise for the given tokens (the same jackknife as the AOFE
    ratio's), not a fresh draw of text. ``threads`` as in [`nfa_correlation`][tl_geometry.metrics.nfa.nfa_correlation].

    Raises:
        InputError: fewer than 2 replicates, or any error of [`nfa_correlation`][tl_geometry.metrics.nfa.nfa_correlation].
    """
    from tl_geometry.metrics.jackknife import jackknife_se

    if len(replicates) < 2:
        raise InputError(f"the jackknife needs at least 2 leave-group-out AGOPs, got {len(replicates)}")
    full = nfa_correlation(W_in, G, threads=threads)
    reps = [nfa_correlation(W_in, R, threads=threads) for R in replicates]
    se = jackknife_se(torch.tensor([[r.pearson, r.pearson_sqrt] for r in reps], dtype=torch.float64)).tolist()
    return NFACorrelation(
        full.pearson, full.pearson_sqrt, full.n_pairs, se[0], se[1], f"jackknife over {len(reps)} probe groups"
    )


def offdiag_pearson(A: Float[Tensor, "d d"], B: Float[Tensor, "d d"]) -> float:
    """Pearson correlation of the off-diagonal entries of two square matrices (all d(d − 1) of them).

    The authors' NFA check (``pearson_corr_offdiag`` in their ``Double_descent/data_scaling.py``,
    applied to WᵀW and the toy's AGOP, i.e. power 1): flatten every entry with i ≠ j of A and of B
    (no symmetrization), subtract the means, ``r = Σ a b / √(Σ a² Σ b²)``, in float64. For symmetric
    A and B it equals `NFACorrelation.pearson` (the i < j entries, each pair counted once:
    duplicating every point leaves a Pearson correlation unchanged).

    Raises:
        ValueError: shapes differ, not square, smaller than 2 × 2, non-finite, or either set of
        off-diagonal entries constant (the correlation is undefined; their code returns 0 there).

    Examples:
        >>> import torch
        >>> A = torch.tensor([[1., 2., 3.], [4., 5., 6.], [7., 8., 9.]])
        >>> round(offdiag_pearson(A, 2 * A + 1), 12)
        1.0
    """
    A, B = _check_square(A, "A"), _check_square(B, "B")
    if A.shape != B.shape:
        raise InputError(f"A and B must have the same shape, got {tuple(A.shape)} and {tuple(B.shape)}")
    off = ~torch.eye(A.shape[0], dtype=torch.bool, device=A.device)
    return _pearson(A.detach()[off].double(), B.detach()[off].double())
