"""Weight copies that autograd would keep, saved by reference instead.

TransformerLens multiplies by fresh copies of its weights in every forward pass: the gated MLP by
``W_gate.T.contiguous()``, ``W_in.T.contiguous()`` and ``W_out.T.contiguous()``, the attention by
rearranged ``W_Q`` / ``W_K`` / ``W_V`` / ``W_O`` (``einops.rearrange(...)``, then ``F.linear``).
``F.linear`` saves its weight for the gradient with respect to its input, so a forward with the
graph kept holds a second copy of the blocks' weights until its last backward pass: at 1 B
parameters 3.3 GiB beside the 3.7 GiB model, the largest part of AGOP's working set.

[`weights_by_reference`][tl_geometry.capture.saved_weights.weights_by_reference] (our choice, no
paper's) installs ``torch.autograd.graph.saved_tensors_hooks`` for the forwards run inside it:
a saved tensor whose storage holds exactly the values of one of the model's parameters rearranged
— its dimensions permuted, then laid out contiguously — is saved as (parameter, permutation, shape,
strides) and rebuilt
when a backward pass needs it: as a view of the parameter where the saved tensor's values are one
(``F.linear(x, W.T.contiguous())`` saves the copy's transpose, which holds ``W`` itself: the MLP's
weights and ``W_O``), otherwise as a fresh copy with the saved tensor's strides (one layer's at a
time, freed after use: ``W_Q``, ``W_K``, ``W_V``). Either holds the same values; the rebuilt copy
also has the same strides, a view may not, so the backward's products may sum in another order
(rounding-level differences at most; the tests allow them). A saved tensor is matched only when
its element count, dtype and device are a parameter's, a few probe elements agree, and then
every element (``torch.equal``: one read of the weight, about what making the copy cost); a
parameter saved as itself (a HuggingFace model's ``F.linear(x, weight)`` on a TransformerBridge)
is kept as it is. Everything else is saved as usual. A parameter changed in place between the
forward and a backward is refused at the backward (its version counter moved).

The cost: one comparison of each saved weight with its parameter per forward, and one copy of the
attention's Q/K/V weights per backward pass.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from tl_geometry.base import _checks
from tl_geometry.errors import InputError

__all__ = ["MIN_NUMEL", "weights_by_reference"]

MIN_NUMEL = 256
"""Matrices with fewer elements are not matched (too small to matter; 1-D parameters never are)."""


class _Ref:
    """A saved weight copy: rebuilt from its parameter at backward, with the saved tensor's strides."""

    __slots__ = ("param", "perm", "shape", "stride", "version", "view")

    def __init__(self, param: Tensor, perm: tuple[int, ...], t: Tensor, view: bool):
        self.param, self.perm, self.version, self.view = param, perm, param._version, view
        self.shape, self.stride = t.shape, t.stride()

    def rebuild(self) -> Tensor:
        if self.param._version != self.version:
            raise RuntimeError(
                "a parameter was changed in place between the forward pass and its backward pass; "
                "the saved weight cannot be rebuilt (run the forward again after changing weights)"
            )
        if self.view:  # the saved tensor is the parameter's permuted view: no copy
            return self.param.detach().permute(self.perm)
        flat = self.param.detach().permute(self.perm).contiguous().view(-1)
        return flat.as_strided(self.shape, self.stride, 0)


_Key = tuple[int, torch.dtype, torch.device, tuple[float, ...]]


class _Matcher:
    """Which saved tensors are a parameter's values (see the module), found by lookup.

    At construction every candidate parameter (≥ 2-D, at least ``min_numel`` elements, floating
    point) is indexed under each permutation of its dimensions by a fingerprint: its element count,
    dtype, device and the values of the permuted view at three row-major positions (first, middle,
    last). A saved tensor is looked up twice — by the same three elements of its own logical order
    (a permuted *view* of a parameter) and of its storage (a rearranged *copy*) — and only the
    entries found are compared element by element (``torch.equal``). Before this index every saved
    tensor was probed against every parameter of its size: on SmolLM2-135M (90 MLP matrices of one
    size) that took ~5 s a forward, more than the forward itself.
    """

    def __init__(self, model: Any, min_numel: int):
        self.params: list[Tensor] = []
        self.numels: set[int] = set()
        self.index: dict[_Key, list[tuple[int, tuple[int, ...], torch.Size]]] = {}
        self.storages: set[int] = set()
        for p in model.parameters():
            if p.dim() >= 2 and p.numel() >= min_numel and p.is_floating_point():
                i = len(self.params)
                self.params.append(p)
                self.numels.add(p.numel())
                self.storages.add(p.untyped_storage().data_ptr())
                for perm in itertools.permutations(range(p.dim())):
                    view = p.detach().permute(perm)
                    key = (p.numel(), p.dtype, p.device, _probes(view))
                    self.index.setdefault(key, []).append((i, perm, view.shape))
        self.matched = 0

    def pack(self, t: Any) -> Any:
        if not isinstance(t, Tensor) or t.numel() not in self.numels:
            return t
        if t.requires_grad or t.storage_offset() != 0 or not t.is_floating_point():
            return t
        storage = t.untyped_storage()
        if storage.data_ptr() in self.storages:  # a parameter itself, or a view of one
            return t
        if storage.nbytes() != t.numel() * t.element_size():  # a view of a larger tensor
            return t
        flat = t.as_strided((t.numel(),), (1,), 0)  # the storage (a copy is one contiguous block)
        head = (t.numel(), t.dtype, t.device)
        # (param, view before copy, permutation): the order of a scan of every parameter (permutations
        # sort as itertools yields them)
        found = [(i, 0, perm) for i, perm, shape in self.index.get((*head, _probes(t)), ()) if shape == t.shape]
        found += [(i, 1, perm) for i, perm, _ in self.index.get((*head, _probes(flat)), ())]
        for i, copy, perm in sorted(found):
            view = self.params[i].detach().permute(perm)
            if copy and torch.equal(flat.view(view.shape), view):
                self.matched += 1
                return _Ref(self.params[i], perm, t, view=False)
            if not copy and torch.equal(t, view):
                self.matched += 1
                return _Ref(self.params[i], perm, t, view=True)
        return t

    @staticmethod
    def unpack(x: Any) -> Tensor:
        return x.rebuild() if isinstance(x, _Ref) else x


def _probes(a: Tensor) -> tuple[float, ...]:
    """The first, middle and last elements of ``a`` in row-major order of its shape (a cheap
    fingerprint before comparing every element; indices unravelled in Python, no tensor ops)."""
    n = a.numel()
    out = []
    for i in (0, n // 2, n - 1):
        idx = []
        for size in reversed(a.shape):
            i, r = divmod(i, size)
            idx.append(r)
        out.append(a[tuple(reversed(idx))].item())
    return tuple(out)


@contextlib.contextmanager
def weights_by_reference(model: Any, *, enabled: bool = True, min_numel: int = MIN_NUMEL) -> Iterator[Any]:
    """Context manager: the forward passes run inside it save rearranged copies of ``model``'s
    parameters by reference (see the module). Yields the matcher (``.matched``: how many saved
    tensors were replaced). The graph built inside may be used after it exits: each saved tensor
    carries its own rebuild. ``enabled=False``: nothing is installed (autograd's own saving)."""
    if not callable(getattr(model, "parameters", None)):
        raise InputError(
            f"weights_by_reference needs a model with .parameters() (a torch.nn.Module), got {type(model).__name__}"
        )
    if not _checks.is_int(min_numel) or min_numel < 1:
        raise InputError(f"min_numel must be a positive integer (elements of a matrix), got {min_numel!r}")
    if not enabled:
        yield None
        return
    m = _Matcher(model, min_numel)
    with torch.autograd.graph.saved_tensors_hooks(m.pack, m.unpack):
        yield m
