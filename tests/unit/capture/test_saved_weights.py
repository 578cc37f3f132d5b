"""Weight copies saved by reference: the same gradients, the copies not kept, refusals."""

import pytest
import torch
import torch.nn.functional as F

from tl_geometry.capture import backward
from tl_geometry.capture.saved_weights import weights_by_reference


class _Lin(torch.nn.Module):
    """tanh(x W) through a fresh rearranged copy of W, as TransformerLens multiplies (``F.linear(x, W.T.contiguous())``)."""

    def __init__(self, copy: str = "transpose"):
        super().__init__()
        torch.manual_seed(0)
        self.W = torch.nn.Parameter(torch.randn(160, 192), requires_grad=False)  # d_model, d_mlp
        self.W3 = torch.nn.Parameter(torch.randn(4, 160, 48), requires_grad=False)  # head, d_model, d_head
        self.copy = copy

    def forward(self, x):
        if self.copy == "transpose":
            h = F.linear(x, self.W.T.contiguous())  # (.., 160) -> (.., 192)
        elif self.copy == "itself":
            h = F.linear(x, self.W.T)  # a view of the parameter, no copy
        else:  # attention-like: (head d_head) d_model
            h = F.linear(x, self.W3.permute(0, 2, 1).reshape(192, 160))
        return torch.tanh(h)


def _grad(module, x, enabled):
    x = x.clone().requires_grad_(True)
    with weights_by_reference(module, enabled=enabled) as m:
        y = module(x)
    (g,) = torch.autograd.grad((y * y).sum(), x)
    return g, (m.matched if m is not None else None)


@pytest.mark.parametrize("copy", ["transpose", "rearranged"])
def test_a_rearranged_copy_is_saved_by_reference_with_the_same_gradient(copy):
    mod, x = _Lin(copy), torch.randn(3, 5, 160)
    g0, _ = _grad(mod, x, enabled=False)
    g1, matched = _grad(mod, x, enabled=True)
    assert matched == 1
    if copy == "rearranged":  # rebuilt as a copy with the saved strides: the same bits
        assert torch.equal(g0, g1)
    else:  # the parameter itself as a view: the same values, the product may sum in another order
        torch.testing.assert_close(g0, g1, rtol=1e-6, atol=1e-6)


def test_the_copy_is_not_kept_by_the_graph():
    import weakref

    mod = _Lin("transpose")
    for enabled in (False, True):
        x = torch.randn(2, 160, requires_grad=True)
        with weights_by_reference(mod, enabled=enabled):
            c = mod.W.T.contiguous()
            ref = weakref.ref(c)
            y = F.linear(x, c)
            del c
        assert (ref() is None) == enabled  # autograd's own saving keeps the copy alive with the graph
        (g,) = torch.autograd.grad(y.sum(), x)
        torch.testing.assert_close(g, torch.ones(2, 192) @ mod.W.T)


def test_a_tensor_that_is_not_a_parameter_is_saved_as_usual():
    mod, x = _Lin("transpose"), torch.randn(4, 160)
    other = torch.randn(160, 192)  # W's shape and element count, other values
    xx = x.clone().requires_grad_(True)
    with weights_by_reference(mod) as m:
        y = F.linear(xx, other.T.contiguous())
    assert m.matched == 0
    (g,) = torch.autograd.grad(y.sum(), xx)
    torch.testing.assert_close(g, torch.ones(4, 192) @ other.T)


def test_a_parameter_saved_as_itself_is_left_alone():
    _, matched = _grad(_Lin("itself"), torch.randn(2, 160), enabled=True)
    assert matched == 0


def test_a_parameter_changed_before_the_backward_is_refused():
    mod = _Lin("transpose")
    x = torch.randn(2, 160, requires_grad=True)
    with weights_by_reference(mod):
        y = mod(x)
    with torch.no_grad():
        mod.W.mul_(2.0)
    with pytest.raises(RuntimeError, match="changed in place between the forward pass and its backward"):
        torch.autograd.grad(y.sum(), x)


@pytest.mark.needs_hooked
def test_agop_is_the_same_with_and_without(monkeypatch):
    import tl_geometry as tg

    model = tg.models.scaled("smollm2", 2e6, vocab_size=300, n_layers=1)
    tokens = _tl_tokens()
    out, matched = {}, []
    from tl_geometry.capture import saved_weights

    pack = saved_weights._Matcher.pack

    def counting(self, t):
        r = pack(self, t)
        matched.append(isinstance(r, saved_weights._Ref))
        return r

    monkeypatch.setattr(saved_weights._Matcher, "pack", counting)
    monkeypatch.setattr(backward, "COPIES_AS_VIEWS", False)  # TL's own layout: its copies are made and matched
    for flag in (False, True):
        monkeypatch.setattr(backward, "SAVE_WEIGHTS_BY_REFERENCE", flag)
        out[flag] = tg.agop(model, tokens, n_probes=3, progress=False)
    assert sum(matched) >= 7  # one layer's Q, K, V, O, gate, in, out at least
    a, b = out[False], out[True]
    assert list(a.matrices) == list(b.matrices)
    for h in a.matrices:  # rounding-level at most (views of the MLP weights: another summation order)
        _assert_rounding(a.matrices[h], b.matrices[h])


def _assert_rounding(A, B):
    """B is A up to float32 rounding, relative to A's scale (an element near zero may differ in
    its own leading digits when the products sum in another order: measured 6e-7 of ‖A‖, 3e-7 of
    max |A| on one machine, 0 on another)."""
    assert float((A - B).norm()) <= 1e-5 * float(A.norm())
    assert float((A - B).abs().max()) <= 1e-5 * float(A.abs().max())


@pytest.mark.parametrize(
    "model, kw, message",
    [
        (object(), {}, "weights_by_reference needs a model with .parameters() (a torch.nn.Module), got object"),
        (torch.nn.Linear(2, 2), {"min_numel": 0}, "min_numel must be a positive integer (elements of a matrix), got 0"),
        (
            torch.nn.Linear(2, 2),
            {"min_numel": 2.5},
            "min_numel must be a positive integer (elements of a matrix), got 2.5",
        ),
    ],
)
def test_bad_inputs_are_refused(model, kw, message):
    from tl_geometry.errors import InputError

    with pytest.raises(InputError) as e, weights_by_reference(model, **kw):
        pass
    assert str(e.value) == message


def _scan(params, t):
    """The slow reference: every parameter of t's size, every permutation, view before copy, in order;
    (parameter, permutation, is a view) of the first whose values t holds, else None."""
    import itertools

    flat = t.as_strided((t.numel(),), (1,), 0)
    for p in params:
        if (
            p.numel() != t.numel()
            or p.dtype != t.dtype
            or p.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
        ):
            continue
        perms = list(itertools.permutations(range(p.dim())))
        for perm in perms:
            v = p.detach().permute(perm)
            if v.shape == t.shape and torch.equal(t, v):
                return p, perm, True
        for perm in perms:
            v = p.detach().permute(perm)
            if torch.equal(flat.view(v.shape), v):
                return p, perm, False
    return None


def test_the_lookup_finds_what_a_scan_of_every_parameter_finds():
    """The fingerprint index against a scan of every parameter and permutation: views, copies of
    every layout, near-copies (one element changed: first, middle, last, elsewhere), unrelated tensors
    of a parameter's size, and a model with many matrices of one size (as SmolLM2's 90 MLP matrices)."""
    from tl_geometry.capture import saved_weights

    torch.manual_seed(1)
    model = torch.nn.ParameterList(
        [torch.nn.Parameter(torch.randn(24, 40)) for _ in range(6)]
        + [torch.nn.Parameter(torch.randn(40, 24)), torch.nn.Parameter(torch.randn(3, 16, 20))]
    )
    params = list(model)
    m = saved_weights._Matcher(model, 256)
    cases = []
    for p in params:
        for perm in __import__("itertools").permutations(range(p.dim())):
            v = p.detach().permute(perm)
            c = v.clone(memory_format=torch.contiguous_format)  # a copy, even for the identity
            cases += [v, c, c.T if c.dim() == 2 else c.permute(2, 0, 1)]  # the parameter's own view: kept as is
            for where in (0, v.numel() // 2, v.numel() - 1, 7):
                near = v.contiguous().clone().view(-1)
                near[where] += 1.0
                cases.append(near.view(v.shape))
        cases.append(torch.randn(p.shape))
    hits = 0
    for t in cases:
        want = _scan(params, t)
        got = m.pack(t)
        if want is None:
            assert got is t
        else:
            hits += 1
            assert isinstance(got, saved_weights._Ref)
            assert (got.param is want[0], got.perm, got.view) == (True, want[1], want[2])
            assert torch.equal(got.rebuild(), t)
    assert hits == 2 * (7 * 2 + 6) and m.matched == hits  # both copies of every permutation of every parameter


# --- copies_as_views: TransformerLens's copied weights stored in the copy's layout -----------------


def _tl_model():
    import tl_geometry as tg

    return tg.models.scaled("smollm2", 2e6, vocab_size=300, n_layers=2)  # gated MLP, grouped-query attention


def _tl_tokens():
    return torch.randint(1, 300, (2, 12), generator=torch.Generator().manual_seed(0))


def _snapshot(model):
    return {n: (p, p.detach().clone()) for n, p in model.named_parameters()}


def _assert_restored(model, before):
    for n, p in model.named_parameters():
        q, values = before[n]
        assert p is q, n  # the same Parameter objects
        assert p.is_contiguous(), n
        assert torch.equal(p, values), n


@pytest.mark.needs_hooked
def test_copies_as_views_moves_tls_copied_weights_and_restores_them():
    from tl_geometry.capture.saved_weights import copies_as_views

    model = _tl_model()
    before = _snapshot(model)
    tokens = _tl_tokens()
    with torch.no_grad():
        y0 = model(tokens)
    with copies_as_views(model) as names:
        assert sorted(names) == sorted(
            [
                *(
                    f"blocks.{i}.{n}"
                    for i in range(2)
                    for n in ("attn.W_Q", "attn._W_K", "attn._W_V", "attn.W_O", "mlp.W_in", "mlp.W_gate", "mlp.W_out")
                ),
                "unembed.W_U",
            ]
        )
        for n, p in model.named_parameters():  # values and shapes as before, only strides moved
            assert p.shape == before[n][1].shape and torch.equal(p, before[n][1]), n
        mlp, attn = model.blocks[0].mlp, model.blocks[0].attn
        # TL's copies are views of the parameters now
        for w in (mlp.W_in, mlp.W_gate, mlp.W_out):
            assert w.T.contiguous().data_ptr() == w.data_ptr()
        assert attn.W_Q.permute(0, 2, 1).reshape(-1, attn.W_Q.shape[1]).data_ptr() == attn.W_Q.data_ptr()
        assert attn.W_O.permute(2, 0, 1).reshape(attn.W_O.shape[2], -1).data_ptr() == attn.W_O.data_ptr()
        W_U = model.unembed.W_U  # Unembed's F.linear(x, W_U.T.contiguous()): a view too
        assert W_U.T.contiguous().data_ptr() == W_U.data_ptr()
        with torch.no_grad():
            y1 = model(tokens)
        # no moved weight is copied for autograd to save, the unembedding's W_U included
        assert _saved_copies(model, tokens) == []
    # in TL's own layout the same forward saves copies of Q, O, gate, in, out of both layers (the
    # grouped K / V are copied too, by repeat_interleave or rearrange, and not always matched)
    own = set(_saved_copies(model, tokens))
    assert {n for n in names if "_W_" not in n} <= own and "unembed.W_U" in own
    torch.testing.assert_close(y1, y0, rtol=1e-5, atol=1e-6)
    _assert_restored(model, before)


def _saved_copies(model, tokens) -> list[str]:
    """The parameters whose copies a forward with the graph kept saves (by the matcher)."""
    from tl_geometry.capture import saved_weights

    names = {id(p): n for n, p in model.named_parameters()}
    found = []
    real = saved_weights._Matcher.pack

    def pack(self, t):
        r = real(self, t)
        if isinstance(r, saved_weights._Ref):
            found.append(names[id(r.param)])
        return r

    def start(x, hook):
        return x.detach().requires_grad_(True)

    saved_weights._Matcher.pack = pack
    try:
        with torch.enable_grad(), backward.frozen_parameters(model), weights_by_reference(model):
            y = model.run_with_hooks(tokens, fwd_hooks=[("hook_embed", start)])
    finally:
        saved_weights._Matcher.pack = real
    assert y.requires_grad
    return found


@pytest.mark.needs_hooked
def test_copies_as_views_restores_the_layout_on_error():
    from tl_geometry.capture.saved_weights import copies_as_views

    model = _tl_model()
    before = _snapshot(model)
    with pytest.raises(ValueError, match="boom"), copies_as_views(model) as names:
        assert names and not model.blocks[0].mlp.W_in.is_contiguous()
        raise ValueError("boom")
    _assert_restored(model, before)


@pytest.mark.needs_hooked
def test_agop_restores_the_layout_when_a_probe_pass_fails(monkeypatch):
    import tl_geometry as tg

    model = _tl_model()
    before = _snapshot(model)
    tokens = _tl_tokens()
    seen = []

    def failing(*a, **k):
        seen.append(model.blocks[0].mlp.W_in.is_contiguous())
        raise RuntimeError("backward failed")

    monkeypatch.setattr(backward, "_probe_vjps", failing)
    with pytest.raises(RuntimeError, match="backward failed"):
        tg.agop(model, tokens, n_probes=2, progress=False)
    assert seen == [False]  # the pass ran with the weights moved
    _assert_restored(model, before)


@pytest.mark.needs_hooked
def test_agop_is_the_same_with_copies_as_views_or_not(monkeypatch):
    import tl_geometry as tg

    model = _tl_model()
    before = _snapshot(model)
    tokens = _tl_tokens()
    out = {}
    for flag in (False, True):
        monkeypatch.setattr(backward, "COPIES_AS_VIEWS", flag)
        out[flag] = tg.agop(model, tokens, n_probes=3, progress=False)
    a, b = out[False], out[True]
    assert (a.provenance["agop_weights_as_views"], b.provenance["agop_weights_as_views"]) == (0, 15)
    assert list(a.matrices) == list(b.matrices)
    for h in a.matrices:  # float32 rounding at most (the products read the weights in another order)
        _assert_rounding(a.matrices[h], b.matrices[h])
        assert b[h].ratio == pytest.approx(a[h].ratio, rel=1e-5)
    _assert_restored(model, before)


def test_copies_as_views_leaves_other_models_alone():
    from tl_geometry.capture.saved_weights import copies_as_views

    lin = torch.nn.Linear(8, 4)
    with copies_as_views(lin) as names:
        assert names == [] and lin.weight.is_contiguous()


@pytest.mark.needs_hooked
def test_copies_as_views_leaves_tied_weights_tied():
    from tl_geometry.capture.saved_weights import copies_as_views

    model = _tl_model()
    mlp = model.blocks[0].mlp
    mlp.W_gate.data = mlp.W_in.data  # tied: one storage, two parameters
    with copies_as_views(model) as names, copies_as_views(model, enabled=False) as none:
        assert "blocks.0.mlp.W_in" not in names and "blocks.0.mlp.W_gate" not in names
        assert "blocks.1.mlp.W_in" in names and none == []
        assert mlp.W_in.data_ptr() == mlp.W_gate.data_ptr()


def test_copies_as_views_refuses_what_is_not_a_module():
    from tl_geometry.capture.saved_weights import copies_as_views
    from tl_geometry.errors import InputError

    with pytest.raises(InputError) as e, copies_as_views(object()):
        pass
    assert str(e.value) == "copies_as_views needs a model with .named_modules() (a torch.nn.Module), got object"


@pytest.mark.needs_hooked
def test_copies_as_views_returns_the_freed_heap_after_moving(monkeypatch):
    """The heap is handed back twice on exit, before the restore (the passes' graphs are freed) and
    after it (the moved layouts' storages), and only when something moved (a model with nothing
    to move pays no garbage collection)."""
    from tl_geometry.capture.saved_weights import copies_as_views
    from tl_geometry.models import hf_loading

    calls = []
    monkeypatch.setattr(hf_loading, "release_memory", lambda: calls.append(1))
    with copies_as_views(torch.nn.Linear(8, 4)):
        pass
    assert calls == []
    with copies_as_views(_tl_model()) as names:
        assert names and calls == []
    assert calls == [1, 1]


def test_copies_as_views_leaves_a_transformer_bridge_alone(tiny_bridge):
    """A TransformerBridge runs HuggingFace modules (``F.linear(x, weight)``: no copies to undo):
    nothing is moved, and AGOP records it."""
    import tl_geometry as tg
    from tl_geometry.capture.saved_weights import copies_as_views

    with copies_as_views(tiny_bridge) as names:
        assert names == []
    tokens = torch.randint(0, 101, (2, 8), generator=torch.Generator().manual_seed(0))
    assert tg.agop(tiny_bridge, tokens, n_probes=2, progress=False).provenance["agop_weights_as_views"] == 0
