"""Interaction family: AGOP at hook points, AOFE, NFA correlation, depth/width ratio.

Sun, Yang, Zhang, Du, "Law of Neural Interaction: Depth–Width Shape, Interaction Efficiency,
and Generalization", arXiv 2605.27989.

* The **AGOP** (average gradient outer product) of a function F with respect to an input a is
  ``G = E[Jᵀ J]``, ``J = ∂F/∂a``. At a hook h of a language model (input space, our default)
  J_{b,t} = ∂F_b/∂a_{b,t} with F_b all logits of sequence b; averaged over sequences and kept
  positions. The paper's next-token shape sweep uses ``space="output"``, ``E[(PJ)(PJ)ᵀ]`` with J
  the Jacobian of the last-position logits w.r.t. the input embeddings and P a fixed Gaussian
  projection to 64 dimensions (seed 42); its TinyGPT depth scan uses ``space="loss"``, ``E[g gᵀ]``
  with g the gradient of the summed cross-entropy w.r.t. each token embedding.
* **AOFE** (average off-diagonal Frobenius energy) ``= ‖G‖_F² − Σ_i G_ii²`` of the symmetrized
  G; **AOFE ratio** ``= AOFE / ‖G‖_F²`` (0 for a diagonal G, 1 − 1/n for a rank-1 all-equal G):
  how much of the gradient energy couples different directions.
* **R_D/W** ``= n_layers / d_model``; the paper's efficient interval is [0.023, 0.047].

The AOFE and weighted mean cos² are in [`tl_geometry.metrics.aofe`][tl_geometry.metrics.aofe], the NFA
correlation in [`tl_geometry.metrics.nfa`][tl_geometry.metrics.nfa]; both are re-exported here. This module
is the math only: pure functions on tensors (it never imports a model, a hook or the capture layer). ``tg.agop`` / ``tg.nfa``, which read a model, are in
[`tl_geometry.families.interaction`][tl_geometry.families.interaction]; the gradient loops in [`tl_geometry.capture.backward`][tl_geometry.capture.backward].
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from tl_geometry.base import _checks
from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError
from tl_geometry.metrics.aofe import AOFE, aofe, weighted_mean_cos2, wtw_aofe
from tl_geometry.metrics.nfa import NFACorrelation, nfa_correlation, nfa_jackknife, offdiag_pearson

logger = logging.getLogger(__name__)

__all__ = [
    "AOFE",
    "aofe",
    "AGOPResult",
    "HookAGOP",
    "AGOPAccumulator",
    "ONE_TEXT_GROUP_NOTE",
    "agop_compute_bytes",
    "agop_state_bytes",
    "pack_symmetric",
    "unpack_symmetric",
    "wtw_aofe",
    "projection_matrix",
    "NFACorrelation",
    "nfa_correlation",
    "nfa_jackknife",
    "leave_group_out",
    "offdiag_pearson",
    "weighted_mean_cos2",
    "LossCorrelation",
    "loss_correlations",
    "depth_width_ratio",
    "in_efficient_interval",
    "EFFICIENT_INTERVAL",
]

EFFICIENT_INTERVAL: tuple[float, float] = (0.023, 0.047)
"""The paper's efficient depth/width interval for R_D/W = n_layers / d_model."""


def projection_matrix(
    d_out: int, d_in: int, *, seed: int = 0, convention: str = "library", device: Any = "cpu"
) -> Float[Tensor, "k v"]:
    """The output-space AGOP's fixed Gaussian projection P (d_out × d_in), entries N(0, 1)/√d_out.

    ``convention="paper"``: drawn as the authors' code does (``torch.manual_seed(seed);
    torch.randn(d_out, d_in, device=device) / √d_out``, seed 42 in their shape sweep): a fresh
    generator on ``device`` seeded with ``seed`` (on CUDA the draw comes from the CUDA generator, as
    theirs did). ``"library"`` (ours): a CPU generator seeded with ``seed + 7919``, moved to ``device``.
    """
    d_out = _checks.integer(d_out, "d_out", lo=2)
    d_in = _checks.integer(d_in, "d_in", lo=1)
    seed = _checks.seed(seed)
    _checks.choice(convention, "convention", ("paper", "library"))
    if d_out * d_in > 2**36:
        raise InputError(f"projection_matrix({d_out}, {d_in}) would hold {d_out * d_in:,} numbers (more than 2**36)")
    if convention == "paper":
        g = torch.Generator(device=device).manual_seed(int(seed))
        return torch.randn(d_out, d_in, generator=g, device=device) / d_out**0.5
    if convention != "library":
        raise InputError(f"convention must be 'paper' or 'library', got {convention!r}")
    g = torch.Generator().manual_seed(int(seed) + 7919)
    return (torch.randn(d_out, d_in, generator=g) / d_out**0.5).to(device)


# ----------------------------------------------------------------------------- AGOP statistics
@dataclass(frozen=True)
class HookAGOP(Tabular):
    """AGOP summary at one hook.

    Attributes:
        aofe, ratio, trace, frobenius: of the estimated G (ratio = AOFE ratio).
        stderr: probe-estimator standard error of G in Frobenius norm,
            sqrt(E‖Ĝ − G‖_F²) estimated from the per-probe-group estimates (0 when exact).
        rel_stderr: stderr / ‖Ĝ‖_F.
        aofe_stderr, ratio_stderr, trace_stderr: the standard errors the rows carry: the
            delete-a-group jackknife over text groups and the one over probe groups combined in
            quadrature, ``√(se_text² + se_probes²)``, when text groups were accumulated; the probe
            jackknife alone when they were not (``n_text_groups == 0``); NaN when text groups were
            asked for but the text held a single group (one sequence: see ``stderr_note``).
        n_probes: probes used (0 when exact). n_positions: positions averaged over.
        aofe_debiased, ratio_debiased: delete-a-group jackknife (over the probe groups)
            bias-corrected AOFE and ratio. Probe noise adds mostly off-diagonal energy, so the
            plug-in ``ratio`` of a few-probe estimate is biased upwards; for large n_probes the two
            agree. Equal to the plug-in values when exact.
        n_groups: probe groups of the jackknife (0 when exact).
        aofe_stderr_probes, ratio_stderr_probes, trace_stderr_probes: the jackknife over probe
            groups alone (the estimator's noise for these tokens); NaN when exact.
        aofe_stderr_text, ratio_stderr_text, trace_stderr_text: the jackknife over text groups
            (groups of whole sequences) alone; NaN without text groups or with a single one.
        n_text_groups: text groups that held positions (0: none accumulated).
        stderr_note: why a standard error is NaN or partial ("" when nothing is missing).
    """

    aofe: float
    ratio: float
    trace: float
    frobenius: float
    stderr: float
    rel_stderr: float
    aofe_stderr: float
    ratio_stderr: float
    trace_stderr: float
    n_probes: int
    n_positions: int
    aofe_debiased: float = float("nan")
    ratio_debiased: float = float("nan")
    n_groups: int = 0
    aofe_stderr_probes: float = float("nan")
    ratio_stderr_probes: float = float("nan")
    trace_stderr_probes: float = float("nan")
    aofe_stderr_text: float = float("nan")
    ratio_stderr_text: float = float("nan")
    trace_stderr_text: float = float("nan")
    n_text_groups: int = 0
    stderr_note: str = ""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


ONE_TEXT_GROUP_NOTE = (
    "one text group (a single sequence): the error over the text is undefined (positions of one sequence "
    "share their context, so they are not split); stderr_text and the combined stderr are NaN, stderr_probes "
    "is the probe noise for this text only"
)
"""``HookAGOP.stderr_note`` when text groups were asked for but the text held only one."""


def _scalars(G: Tensor) -> tuple[float, float, float]:
    a = aofe(G)
    return float(a.aofe), float(a.ratio), float(torch.trace(G.double()))


def _jackknife(reps: list[tuple[float, float, float]]) -> list[float]:
    jt = torch.tensor(reps, dtype=torch.float64)
    K = jt.shape[0]
    return ((K - 1) / K * ((jt - jt.mean(0)) ** 2).sum(0)).sqrt().tolist()


def agop_state_bytes(d: int, n_hooks: int = 1, *, n_groups: int = 8, text_groups: int | None = 8) -> int:
    """Bytes of [`AGOPAccumulator`][tl_geometry.metrics.interaction.AGOPAccumulator]'s sums for
    ``n_hooks`` hooks of width d: ``(n_groups + text_groups) · d(d+1)/2 · 4`` per hook (float32
    upper triangles: the sums of g gᵀ are symmetric).

    Examples:
        >>> agop_state_bytes(576, 31) / 2**30  # SmolLM2-135M, every resid_pre and unembed.hook_in
        0.3...
    """
    k = int(n_groups) + (int(text_groups) if text_groups else 0)
    return k * _n_packed(int(d)) * 4 * int(n_hooks)


def _n_packed(d: int) -> int:
    return d * (d + 1) // 2


def _width(p: Tensor) -> int:
    """d of packed triangles of d(d+1)/2 entries (the last dimension of ``p``)."""
    return (math.isqrt(8 * p.shape[-1] + 1) - 1) // 2


_TRI_CACHE: dict[tuple[int, str], tuple[Tensor, Tensor, Tensor, Tensor]] = {}


def _tri(d: int, device: torch.device) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The packed layout of a symmetric d × d matrix: for the entries (i, j), i ≤ j, row by row,
    their flat indices ``i·d + j`` and ``j·d + i``, the packed positions of the diagonal, and
    the Frobenius weights (1 on the diagonal, 2 off it). Cached per (d, device)."""
    key = (int(d), str(device))
    hit = _TRI_CACHE.get(key)
    if hit is None:
        i, j = torch.triu_indices(d, d, device=device)
        diag = (i == j).nonzero().flatten()
        w = torch.full((i.numel(),), 2.0, dtype=torch.float64, device=device)
        w[diag] = 1.0
        hit = _TRI_CACHE[key] = (i * d + j, j * d + i, diag, w)
    return hit


def pack_symmetric(M: Float[Tensor, "*b d d"]) -> Float[Tensor, "*b t"]:
    """The upper triangles (i ≤ j, row by row) of symmetric d × d matrices: t = d(d+1)/2 entries
    each. [`unpack_symmetric`][tl_geometry.metrics.interaction.unpack_symmetric] is its inverse.

    Examples:
        >>> import torch
        >>> pack_symmetric(torch.tensor([[1.0, 2.0], [2.0, 3.0]])).tolist()
        [1.0, 2.0, 3.0]

    Raises:
        InputError: ``M`` is not a tensor of square matrices (…, d, d).
    """
    if not isinstance(M, Tensor) or M.ndim < 2 or M.shape[-1] != M.shape[-2]:
        raise InputError(f"pack_symmetric needs square matrices (..., d, d), got {getattr(M, 'shape', type(M))}")
    d = M.shape[-1]
    return M.reshape(*M.shape[:-2], d * d).index_select(-1, _tri(d, M.device)[0])


def unpack_symmetric(p: Float[Tensor, "*b t"], d: int) -> Float[Tensor, "*b d d"]:
    """The full symmetric d × d matrices of packed upper triangles
    ([`pack_symmetric`][tl_geometry.metrics.interaction.pack_symmetric]): M[i, j] = M[j, i] = p[k]
    for the k-th entry (i ≤ j) in row order.

    Raises:
        InputError: the last dimension of ``p`` is not d(d+1)/2.
    """
    if p.shape[-1] != _n_packed(d):
        raise InputError(f"a packed {d} x {d} matrix has {_n_packed(d)} entries, got {p.shape[-1]}")
    upper, lower, _, _ = _tri(d, p.device)
    out = p.new_zeros(*p.shape[:-1], d * d)
    out[..., upper] = p
    out[..., lower] = p
    return out.reshape(*p.shape[:-1], d, d)


def _packed_scalars(p: Tensor, d: int) -> tuple[float, float, float]:
    """``_scalars`` of the symmetric matrix packed in ``p`` (float64), without unpacking it:
    ‖G‖_F² = Σ w·p² (w = 2 off the diagonal), AOFE = ‖G‖_F² − Σ diag², ratio, trace."""
    _, _, diag, w = _tri(d, p.device)
    dg = p[diag]
    frob2 = float((w * p * p).sum())
    if frob2 == 0:
        raise InputError("G is all zero; the AOFE ratio is undefined")
    off = frob2 - float((dg * dg).sum())
    return off, off / frob2, float(dg.sum())


def agop_compute_bytes(d: int) -> int:
    """Bytes of [`AGOPAccumulator.compute`][tl_geometry.metrics.interaction.AGOPAccumulator.compute]'s
    temporaries for one hook: bytes = 4 · d² · 8, an upper bound of four float64 d × d matrices
    (the packed total and one packed replicate, half that each; G and ``aofe``'s symmetrized copy
    and square), whatever the number of groups."""
    return 4 * int(d) ** 2 * 8


class AGOPAccumulator:
    """Streaming accumulator of per-probe-group (and per-text-group) sums of g gᵀ (pure tensors, no model).

    Probe p goes to group ``p % n_groups``; ``update(g, probe=p, key=hook)`` adds ``gᵀ g`` for the
    rows g (n, d) of one probe's gradients at one hook (``key``; one accumulator serves several
    hooks). ``compute(key)`` divides by probes × positions: G = Σ_p Σ_i g_pi g_piᵀ / (P·N). The
    positions N are counted from probe 0's rows.

    Text groups (``text_groups`` set): every update also names the text group of its rows
    (``text_group=j``, 0 ≤ j < text_groups; groups of whole sequences, chosen by the caller, e.g.
    with [`tl_geometry.metrics.jackknife.group_labels`][tl_geometry.metrics.jackknife.group_labels]),
    and ``compute`` adds a delete-a-group jackknife over them: ``G_(−j) = (Σ − T_j) / (P·(N − N_j))``
    with T_j the sum of g gᵀ of group j over every probe and N_j its positions. The probe jackknife
    measures the estimator's noise for *these* tokens; the text jackknife, the spread of a fresh
    draw of text (our choice of unit: the sequence, since positions of one sequence share a
    context). The rows' standard error combines the two in quadrature
    (``HookAGOP.aofe_stderr`` …). Probes are drawn afresh for every batch, so each text group's
    replicate also carries its own probe noise: the quadrature counts that noise twice, and is
    conservative by at most √2 where probe noise dominates (with report settings text noise
    dominates: the probe-only error was 2–4× too small across fresh text samples).

    The Gram ``gᵀg`` of one update is computed once and its upper triangle added to its probe
    group and its text group (one GEMM per probe and hook, as without text groups). The sums are
    kept as packed upper triangles (``sums[key]``: (n_groups, d(d+1)/2)), half the memory of the
    full matrices (SmolLM2-135M at report settings: 0.30 GiB instead of 0.59 GiB); ``compute``
    works on the packed form and unpacks G only, and
    [`group_sums`][tl_geometry.metrics.interaction.AGOPAccumulator.group_sums] gives the full
    matrices where a caller needs them.

    Working set: ``(n_groups + text_groups) · d(d+1)/2 · 4`` bytes per hook
    ([`agop_state_bytes`][tl_geometry.metrics.interaction.agop_state_bytes]), plus
    ``compute``'s four float64 d × d temporaries
    ([`agop_compute_bytes`][tl_geometry.metrics.interaction.agop_compute_bytes]; no float64 copy
    of the group sums). Callers that hold many wide hooks process them in chunks
    ([`tl_geometry.families.interaction.agop`][tl_geometry.families.interaction.agop]'s ``state_mb``).

    An [`Accumulator`][tl_geometry.metrics.accumulator.Accumulator]: the rows may come in any split
    and from several accumulators ``merge``d (shards of positions, or of probes), in any order.
    The sums are float32 (as before this protocol), so splits agree to float32 rounding (1e-5).
    The older call ``update(key, probe, g)`` (what the probe loops of
    [`tl_geometry.capture.backward`][tl_geometry.capture.backward] call; ``update(key, probe, g, j)``
    with a text group) is the same update.

    Our choice: the estimator's error is measured over groups of probes (batch means) rather than
    per probe, which bounds memory at ``n_groups × d²`` per hook whatever ``n_probes``; with
    ``n_groups == n_probes`` it is the plain per-probe standard error.
    """

    DEFAULT_KEY = "agop"
    """The key of ``update(g, probe=p)`` when none is given."""

    def __init__(self, n_probes: int, n_groups: int | None = None, *, text_groups: int | None = None):
        if int(n_probes) < 2:
            raise InputError(f"n_probes must be >= 2 to estimate a standard error, got {n_probes}")
        self.n_probes = int(n_probes)
        self.n_groups = min(self.n_probes, 8 if n_groups is None else int(n_groups))
        if self.n_groups < 2:
            raise InputError(f"n_groups must be >= 2, got {n_groups}")
        if text_groups is not None and (isinstance(text_groups, bool) or int(text_groups) < 1):
            raise InputError(f"text_groups must be None (no text jackknife) or an integer >= 1, got {text_groups!r}")
        self.text_groups = None if text_groups is None else int(text_groups)
        self.reset()

    def reset(self) -> None:
        """Forget every gradient (``n_probes``, ``n_groups`` and ``text_groups`` stay)."""
        self.sums: dict[str, Tensor] = {}
        """Per key, the probe groups' sums of g gᵀ as packed upper triangles (n_groups, d(d+1)/2),
        float32 ([`group_sums`][tl_geometry.metrics.interaction.AGOPAccumulator.group_sums]: full)."""
        self.n_positions: dict[str, int] = {}
        self.text_sums: dict[str, Tensor] = {}
        self.text_positions: dict[str, list[int]] = {}

    @overload
    def update(
        self, g: Float[Tensor, "n d"], /, *, probe: int, key: str = DEFAULT_KEY, text_group: int | None = None
    ) -> None: ...

    @overload
    def update(self, key: str, probe: int, g: Float[Tensor, "n d"], /) -> None: ...

    @overload
    def update(self, key: str, probe: int, g: Float[Tensor, "n d"], text_group: int, /) -> None: ...

    def update(
        self, *args: Any, probe: int | None = None, key: str | None = None, text_group: int | None = None
    ) -> None:
        """Add the rows g (n, d) of probe ``probe``'s gradients at ``key``: ``update(g, probe=p, key=h)``
        (``text_group=j`` too when the accumulator has text groups).

        The older positional form ``update(h, p, g)`` (``update(h, p, g, j)``) is the same call.
        """
        if args and isinstance(args[0], str):  # update(key, probe, g[, j]): the probe loops' consumer form
            if len(args) not in (3, 4) or probe is not None or key is not None or text_group is not None:
                raise _checks.ArgumentError("the positional form is update(key, probe, g) or update(key, probe, g, j)")
            key, probe, g = args[:3]
            text_group = args[3] if len(args) == 4 else None
        else:
            if len(args) != 1 or probe is None:
                raise _checks.ArgumentError("update takes the gradients and a probe: update(g, probe=p, key=hook)")
            g = args[0]
        key = self.DEFAULT_KEY if key is None else key
        probe = int(probe)
        J = self.text_groups
        if J is None and text_group is not None:
            raise InputError("this accumulator has no text groups (text_groups=None); drop text_group")
        if J is not None:
            if text_group is None or isinstance(text_group, bool) or not 0 <= int(text_group) < J:
                raise InputError(f"text_group must be an integer in [0, {J}) (text_groups={J}), got {text_group!r}")
            text_group = int(text_group)
        if not torch.isfinite(g).all():
            raise InputError(f"non-finite gradient at {key!r}")
        g = g.detach().float()
        d = g.shape[1]
        if key not in self.sums:
            t = _n_packed(d)
            self.sums[key] = torch.zeros(self.n_groups, t, dtype=torch.float32, device=g.device)
            self.n_positions[key] = 0
            if J is not None:
                self.text_sums[key] = torch.zeros(J, t, dtype=torch.float32, device=g.device)
                self.text_positions[key] = [0] * J
        elif d != _width(self.sums[key]):
            raise InputError(f"gradients at {key!r} have width {d}, earlier ones {_width(self.sums[key])}")
        M = pack_symmetric(g.T @ g)  # one Gram's upper triangle, added to the probe group and the text group
        self.sums[key][probe % self.n_groups] += M
        if J is not None and text_group is not None:
            self.text_sums[key][text_group] += M
        if probe == 0:
            self.n_positions[key] += g.shape[0]
            if J is not None and text_group is not None:
                self.text_positions[key][text_group] += g.shape[0]

    def merge(self, other: AGOPAccumulator) -> AGOPAccumulator:
        """Add another accumulator's sums and position counts (``other`` is left unchanged); returns ``self``.

        Shards may split the positions (each shard sees every probe of its rows) or the probes
        (probe p's rows in one shard): sums of g gᵀ add, and the positions add because only
        probe 0's rows count them; the text groups' sums add group by group. An accumulator with
        no key yet is the identity.

        Raises:
            InputTypeError: ``other`` is not an ``AGOPAccumulator``.
            InputError: different ``n_probes``, ``n_groups`` or ``text_groups``, different keys
                (hooks), a key's sums of a different d or on a different device, or ``other is self``.
        """
        from tl_geometry.errors import InputTypeError

        if not isinstance(other, AGOPAccumulator):
            raise InputTypeError(f"can only merge another AGOPAccumulator, got {type(other).__name__}")
        if other is self:
            raise InputError("cannot merge an AGOPAccumulator into itself")
        if (other.n_probes, other.n_groups, other.text_groups) != (self.n_probes, self.n_groups, self.text_groups):
            raise InputError(
                f"cannot merge AGOP accumulators of different n_probes/n_groups/text_groups: "
                f"{self.n_probes}/{self.n_groups}/{self.text_groups} and "
                f"{other.n_probes}/{other.n_groups}/{other.text_groups}"
            )
        if not other.sums:
            return self
        if self.sums and set(self.sums) != set(other.sums):
            only_self, only_other = sorted(set(self.sums) - set(other.sums)), sorted(set(other.sums) - set(self.sums))
            raise InputError(
                f"cannot merge AGOP accumulators with different keys: only in this one {only_self}, "
                f"only in the other {only_other}"
            )
        for key, S in other.sums.items():
            mine = self.sums.get(key)
            if mine is not None and mine.shape != S.shape:
                raise InputError(
                    f"cannot merge AGOP accumulators of different d at {key!r}: {_width(mine)} and {_width(S)}"
                )
            if mine is not None and mine.device != S.device:
                raise InputError(
                    f"cannot merge AGOP accumulators on different devices at {key!r}: {mine.device} and {S.device}"
                )
        for key, S in other.sums.items():
            if key in self.sums:
                self.sums[key] += S
                self.n_positions[key] += other.n_positions[key]
                if self.text_groups is not None:
                    self.text_sums[key] += other.text_sums[key]
                    self.text_positions[key] = [
                        a + b for a, b in zip(self.text_positions[key], other.text_positions[key])
                    ]
            else:
                self.sums[key] = S.clone()
                self.n_positions[key] = other.n_positions[key]
                if self.text_groups is not None:
                    self.text_sums[key] = other.text_sums[key].clone()
                    self.text_positions[key] = list(other.text_positions[key])
        return self

    def group_sums(self, key: str) -> Float[Tensor, "K d d"]:
        """The probe groups' sums of g gᵀ at ``key`` as full (n_groups, d, d) float32 matrices
        (unpacked from ``sums``: a copy, for
        [`leave_group_out`][tl_geometry.metrics.interaction.leave_group_out])."""
        if key not in self.sums:
            raise InputError(f"nothing accumulated at {key!r}; keys: {sorted(self.sums)}")
        return unpack_symmetric(self.sums[key], _width(self.sums[key]))

    def drop(self, key: str) -> None:
        """Free ``key``'s sums (after ``compute``): what a caller holding many hooks does hook by hook."""
        for store in (self.sums, self.text_sums, self.n_positions, self.text_positions):
            store.pop(key, None)

    def group_counts(self) -> list[int]:
        """Probes per group (probe p is in group p % n_groups)."""
        return [len(range(k, self.n_probes, self.n_groups)) for k in range(self.n_groups)]

    def compute(self, key: str | None = None) -> tuple[Float[Tensor, "d d"], HookAGOP]:
        """(G, its [`HookAGOP`][tl_geometry.metrics.interaction.HookAGOP] statistics) at ``key``.

        G = Σ_k S_k / (P·N) with S_k the sum of g gᵀ of probe group k; ``key`` None: the only key
        accumulated (an error when there are several). Every replicate is formed in float64 one at
        a time (``agop_compute_bytes``), never a float64 copy of all the group sums.
        """
        if key is None:
            if len(self.sums) != 1:
                raise InputError(f"compute() needs a key: this accumulator holds {sorted(self.sums) or 'none'}")
            key = next(iter(self.sums))
        if key not in self.sums:
            raise InputError(f"nothing accumulated at {key!r}; keys: {sorted(self.sums)}")
        S, N, P, K = self.sums[key], self.n_positions[key], self.n_probes, self.n_groups
        d = _width(S)
        if N == 0:
            raise InputError(f"no positions accumulated at {key!r}")
        n_k = self.group_counts()
        w = _tri(d, S.device)[3]
        total = torch.zeros(S.shape[1:], dtype=torch.float64, device=S.device)  # packed, like the sums
        for k in range(K):
            total += S[k]
        Gp = total / (P * N)
        var1 = 0.0  # per-probe Frobenius variance from the group means
        jack = []  # delete-a-group jackknife over the probe groups, for the non-linear scalars
        for k in range(K):
            Sk = S[k].double()
            var1 += n_k[k] * float((w * (Sk / (n_k[k] * N) - Gp) ** 2).sum())
            jack.append(_packed_scalars((total - Sk) / ((P - n_k[k]) * N), d))
            del Sk
        var1 /= K - 1
        stderr = float(math.sqrt(var1 / P))
        jse = _jackknife(jack)
        G = unpack_symmetric(Gp, d)
        a, r, tr = _scalars(G)
        fro = float(G.norm())
        # jackknife bias correction: the plug-in AOFE/ratio of a noisy Ĝ are biased upwards
        # (probe noise is mostly off-diagonal); for quadratic statistics this is the U-statistic
        jmean = torch.tensor(jack, dtype=torch.float64).mean(0)
        a_bc, r_bc, _ = (K * torch.tensor([a, r, tr], dtype=torch.float64) - (K - 1) * jmean).tolist()
        nan3 = [float("nan")] * 3
        tse, combined, n_text, note = nan3, list(jse), 0, ""
        if self.text_groups is not None:
            T, Nj = self.text_sums[key], self.text_positions[key]
            present = [j for j, c in enumerate(Nj) if c > 0]
            n_text = len(present)
            if n_text >= 2:
                tjack = [_packed_scalars((total - T[j].double()) / (P * (N - Nj[j])), d) for j in present]
                tse = _jackknife(tjack)
                combined = [math.sqrt(x * x + y * y) for x, y in zip(jse, tse)]
            else:
                combined, note = nan3, ONE_TEXT_GROUP_NOTE
        stats = HookAGOP(
            a,
            r,
            tr,
            fro,
            stderr,
            stderr / fro if fro > 0 else float("nan"),
            combined[0],
            combined[1],
            combined[2],
            P,
            N,
            a_bc,
            r_bc,
            K,
            jse[0],
            jse[1],
            jse[2],
            tse[0],
            tse[1],
            tse[2],
            n_text,
            note,
        )
        return G.float(), stats


def leave_group_out(
    sums: Float[Tensor, "K d d"], probes_per_group: list[int], n_positions: int
) -> list[Float[Tensor, "d d"]]:
    """The AGOP estimates without each probe group: ``(Σ_j S_j − S_k) / ((P − n_k)·N)`` for every k.

    ``sums`` are the per-group sums of g gᵀ
    ([`AGOPAccumulator.group_sums`][tl_geometry.metrics.interaction.AGOPAccumulator.group_sums]), ``probes_per_group``
    the probes in each ([`AGOPAccumulator.group_counts`][tl_geometry.metrics.interaction.AGOPAccumulator.group_counts]), ``n_positions`` = N. The
    replicates of a delete-a-group jackknife of any function of G (e.g. the NFA correlation).
    """
    S = sums.double()
    if S.ndim != 3 or S.shape[0] != len(probes_per_group) or S.shape[0] < 2:
        raise InputError(f"sums must be (K >= 2, d, d) with K = len(probes_per_group), got {tuple(S.shape)}")
    P, total = sum(probes_per_group), S.sum(0)
    return [(total - S[k]) / ((P - n_k) * n_positions) for k, n_k in enumerate(probes_per_group)]


def exact_stats(G: Float[Tensor, "d d"], n_positions: int) -> HookAGOP:
    """[`HookAGOP`][tl_geometry.metrics.interaction.HookAGOP] of an exactly computed AGOP (all standard errors 0)."""
    a, r, tr = _scalars(G)
    return HookAGOP(a, r, tr, float(G.double().norm()), 0.0, 0.0, 0.0, 0.0, 0.0, 0, int(n_positions), a, r)


@dataclass(frozen=True)
class AGOPResult(Tabular):
    """AGOPs at one or more hooks (see [`agop`][tl_geometry.families.interaction.agop]).

    Attributes:
        matrices: hook → G (d × d, float32; 64 × 64 in output space).
        stats: hook → [`HookAGOP`][tl_geometry.metrics.interaction.HookAGOP].
        space: "input", "output" or "loss" (``tl_geometry.families.interaction.SPACES``).
        exact: True when computed from exact Jacobians (always in loss space).
        seed: probe seed.
        group_replicates: hook → the AGOP estimates without each probe group
            ([`leave_group_out`][tl_geometry.metrics.interaction.leave_group_out]), for a jackknife of other functions of G; only with
            ``agop(..., keep_groups=True)`` and probes (None otherwise).
    """

    matrices: Mapping[str, Float[Tensor, "d d"]]
    stats: Mapping[str, HookAGOP]
    space: str
    exact: bool
    seed: int
    provenance: Mapping[str, Any] = field(default_factory=dict)
    group_replicates: Mapping[str, list[Tensor]] | None = field(default=None, repr=False, compare=False)

    @property
    def hooks(self) -> list[str]:
        return list(self.stats)

    def __getitem__(self, hook: str) -> HookAGOP:
        return self.stats[hook]

    def to_dict(self) -> dict:
        return {
            "space": self.space,
            "exact": self.exact,
            "seed": self.seed,
            "stats": {h: s.to_dict() for h, s in self.stats.items()},
            "provenance": dict(self.provenance),
        }

    def records(self) -> list[dict[str, Any]]:
        """One table row per hook: hook, space, exact, seed and the hook's [`HookAGOP`][tl_geometry.metrics.interaction.HookAGOP] fields."""
        head = {"space": self.space, "exact": self.exact, "seed": self.seed}
        return [{"hook": h, **head, **s.records()[0]} for h, s in self.stats.items()]


@dataclass(frozen=True)
class LossCorrelation(Tabular):
    """Correlation of one metric with the loss over the runs of a sweep (see [`loss_correlations`][tl_geometry.metrics.interaction.loss_correlations]).

    Attributes:
        metric: the metric's name.
        regime: ``"all"`` or ``"size >= N"``.
        pearson, spearman: the correlations (NaN when undefined: fewer than 3 runs or a constant).
        n: number of runs used (runs with a non-finite value are dropped).
    """

    metric: str
    regime: str
    pearson: float
    spearman: float
    n: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _corr(x: np.ndarray, y: np.ndarray) -> float:
    if x.size < 3:
        return float("nan")
    x, y = x - x.mean(), y - y.mean()
    den = float(np.sqrt((x * x).sum() * (y * y).sum()))
    return float((x * y).sum() / den) if den > 0 else float("nan")


def _vector(values: Any, name: str) -> np.ndarray:
    """Per-run numbers as a 1-D float64 array (NaN allowed: runs without a value are skipped)."""
    if isinstance(values, (str, bytes, Mapping)) or values is None:
        raise _checks.ArgumentError(
            f"{name} must be a sequence or 1-D array of numbers, got {_checks.describe(values)}"
        )
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise _checks.ArgumentError(
            f"{name} must be a sequence or 1-D array of numbers, got {_checks.describe(values)}"
        ) from None
    if arr.ndim != 1:
        raise _checks.ArgumentError(f"{name} must be 1-D (one number per run), got shape {arr.shape}")
    return arr


def loss_correlations(
    loss, metrics: Mapping[str, Any], *, sizes=None, large_from: int | None = 1000
) -> list[LossCorrelation]:
    """Pearson and Spearman correlations between each metric and the loss over a sweep.

    The authors' ``print_correlations`` (toy double descent): one point per run (size × seed),
    correlated over all runs and over the large-data regime ``size >= large_from`` (1000 in their
    code). Spearman is Pearson of the ranks; ties get their average rank
    (``scipy.stats.rankdata``; their code breaks ties by position, which only differs with ties).

    Args:
        loss: per-run losses (sequence or 1-D array).
        metrics: name → per-run values, each as long as ``loss``.
        sizes: per-run training-set sizes; needed for the large-data regime.
        large_from: the regime's lower size bound, or None for the global correlations only.

    Returns:
        For each metric, a [`LossCorrelation`][tl_geometry.metrics.interaction.LossCorrelation] for "all" and (with sizes) one for
        "size >= large_from".

    Raises:
        ValueError: lengths disagree or no metric is given.
    """
    from scipy.stats import rankdata

    y = _vector(loss, "loss")
    if not isinstance(metrics, Mapping) or not metrics:
        raise InputError(f"metrics must map at least one name to per-run values, got {_checks.describe(metrics)}")
    large_from = _checks.integer(large_from, "large_from", none_ok=True)
    s = None if sizes is None else _vector(sizes, "sizes")
    if s is not None and s.shape != y.shape:
        raise InputError(f"sizes has {s.size} entries but loss has {y.size}")
    out = []
    for name, vals in metrics.items():
        x = _vector(vals, f"metrics[{name!r}]")
        if x.shape != y.shape:
            raise InputError(f"metric {name!r} has {x.size} values but loss has {y.size}")
        keep = np.isfinite(x) & np.isfinite(y)
        regimes = [("all", keep)]
        if s is not None and large_from is not None:
            regimes.append((f"size >= {large_from}", keep & (s >= large_from)))
        for label, m in regimes:
            xs, ys = x[m], y[m]
            sp = _corr(rankdata(xs), rankdata(ys)) if xs.size else float("nan")
            out.append(LossCorrelation(str(name), label, _corr(xs, ys), sp, int(m.sum())))
    return out


# ----------------------------------------------------------------------------- depth/width
def depth_width_ratio(model_or_cfg: Any) -> float:
    """R_D/W = n_layers / d_model of a model, a config, or a mapping with those keys.

    Examples:
        >>> depth_width_ratio({"n_layers": 30, "d_model": 576})
        0.052083333333333336
    """
    cfg = getattr(model_or_cfg, "cfg", model_or_cfg)
    get = cfg.get if isinstance(cfg, Mapping) else (lambda k: getattr(cfg, k, None))
    n_layers, d_model = get("n_layers"), get("d_model")
    if n_layers is None or d_model is None:
        raise InputError(f"need n_layers and d_model; {type(model_or_cfg).__name__} has neither a cfg nor those fields")
    if not (_checks.is_int(n_layers) and _checks.is_int(d_model)):
        raise InputError(f"n_layers and d_model must be integers, got {n_layers!r}, {d_model!r}")
    if n_layers < 1 or d_model < 1:
        raise InputError(f"n_layers and d_model must be >= 1, got {n_layers}, {d_model}")
    return int(n_layers) / int(d_model)


def in_efficient_interval(ratio: float, interval: tuple[float, float] = EFFICIENT_INTERVAL) -> bool:
    """Whether R_D/W lies in the paper's efficient interval (closed)."""
    ratio = _checks.real(ratio, "ratio")
    if (
        not isinstance(interval, (tuple, list))
        or len(interval) != 2
        or any(_checks.real_in().problem(v) for v in interval)
        or interval[0] > interval[1]
    ):
        raise _checks.ArgumentError(f"interval must be (low, high) with low <= high, got {_checks.describe(interval)}")
    return interval[0] <= ratio <= interval[1]
