"""Weight copies that autograd would keep: saved by reference, or made views by laying the weights out as the copies.

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

[`copies_as_views`][tl_geometry.capture.saved_weights.copies_as_views] (our choice, no paper's)
removes both, and TransformerLens's own copies, for the passes run inside it: each weight TL
rearranges is stored in the layout TL asks for (``W_in`` / ``W_gate`` / ``W_out`` transposed,
``W_Q`` / ``W_K`` / ``W_V`` as (head, d_head, d_model), ``W_O`` as (d_model, head, d_head), the
unembedding's ``W_U`` as (d_vocab, d_model): TL's ``Unembed`` multiplies by ``W_U.T.contiguous()``,
a copy of the whole unembedding in every forward, 0.625 GiB transient on Gemma-3-270M) and
presented in its usual shape as a permuted view of that storage. The parameter's values, shape and
identity do not change; its strides do, so TL's ``.T.contiguous()`` and ``einops.rearrange`` return
views of the parameter: nothing is copied in the forward, autograd saves the view (the matcher
keeps a parameter's own storage as it is) and no rebuild runs at backward. On SmolLM2-135M
(``tg.agop``, 8 × 128 tokens, 16 probes, 2 cores, ``benchmarks/bench_agop_layout.py``) 1.06× faster
alone (1.27× less CPU time) and 1.19× beside one CPU-bound process; the products read the weights
in another order, so results move in the last float32 bits only. On exit every moved parameter is
laid out contiguously again (the same values, the usual strides).
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

__all__ = ["MIN_NUMEL", "copies_as_views", "weights_by_reference"]

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


# TransformerLens's parameter name → the permutation of it that TL multiplies by (``F.linear``'s
# (out, in) weight): the gated MLP's ``W.T.contiguous()``, attention's rearranges
# "head d_model d_head -> (head d_head) d_model" and "head d_head d_model -> d_model (head d_head)".
_TL_LAYOUTS: dict[str, tuple[int, ...]] = {
    "W_in": (1, 0),
    "W_gate": (1, 0),
    "W_out": (1, 0),
    "W_Q": (0, 2, 1),
    "W_K": (0, 2, 1),
    "W_V": (0, 2, 1),
    "_W_K": (0, 2, 1),
    "_W_V": (0, 2, 1),
    "W_O": (2, 0, 1),
    "W_U": (1, 0),  # the unembedding's F.linear(x, W_U.T.contiguous()): a (d_vocab, d_model) copy per forward
}


def _tl_copying_modules() -> tuple[type, ...]:
    """TransformerLens's modules that multiply by rearranged copies of their weights (none where
    TransformerLens, or one of these classes, cannot be imported: then nothing is moved)."""
    found: list[type] = []
    try:
        from transformer_lens.components.mlps.gated_mlp import GatedMLP

        found.append(GatedMLP)
    except ImportError:
        pass
    try:
        from transformer_lens.components.abstract_attention import AbstractAttention

        found.append(AbstractAttention)
    except ImportError:
        pass
    try:
        from transformer_lens.components.unembed import Unembed

        found.append(Unembed)
    except ImportError:
        pass
    return tuple(found)


@contextlib.contextmanager
def copies_as_views(model: Any, *, enabled: bool = True) -> Iterator[list[str]]:
    """Context manager: inside it, the weights TransformerLens copies in every forward (see the
    module) are stored in the layout of the copy, so the copies are views. Yields the names of the
    parameters moved. Only TransformerLens's gated MLPs, attention modules and unembedding are
    touched, and only their floating-point parameters that are contiguous and share no storage with
    another parameter (tied weights stay tied); any other model (a TransformerBridge's HuggingFace
    modules) is left as it is. On exit, error or not, every moved parameter is contiguous again with
    the same values, and the freed heap is returned to the OS before and after the restore (without
    it, Gemma-3-270M's process kept 0.2–0.3 GiB more after ``tg.agop``, and the restore's copies
    landed on the passes' heap).
    Do not train or change the weights inside: the layout is restored by copying the values."""
    if not callable(getattr(model, "named_modules", None)):
        raise InputError(
            f"copies_as_views needs a model with .named_modules() (a torch.nn.Module), got {type(model).__name__}"
        )
    kinds: tuple[type, ...] = _tl_copying_modules() if enabled else ()
    moved: list[tuple[str, Tensor, tuple[int, ...]]] = []
    if kinds:
        owners: dict[int, int] = {}
        for p in model.parameters():
            ptr = p.untyped_storage().data_ptr()
            owners[ptr] = owners.get(ptr, 0) + 1
        for mod_name, mod in model.named_modules():
            if not isinstance(mod, kinds) or not isinstance(mod, torch.nn.Module):
                continue
            for name, p in mod.named_parameters(recurse=False):
                perm = _TL_LAYOUTS.get(name)
                if perm is None or p.dim() != len(perm) or not p.is_floating_point() or not p.is_contiguous():
                    continue
                if owners[p.untyped_storage().data_ptr()] != 1:
                    continue
                moved.append((f"{mod_name}.{name}", p, perm))
    try:
        for _, p, perm in moved:
            inv = tuple(sorted(range(len(perm)), key=perm.__getitem__))
            p.data = p.data.permute(perm).contiguous().permute(inv)
        yield [n for n, _, _ in moved]
    finally:
        from tl_geometry.models.hf_loading import release_memory

        if moved:  # the passes' graphs are freed: hand their heap back before the restore's copies
            release_memory()
        for _, p, _ in moved:
            if not p.data.is_contiguous():
                p.data = p.data.contiguous()
        if moved:  # the moved layouts' storages were freed on the heap: hand them back to the OS
            release_memory()
