from types import SimpleNamespace

import pytest
import torch

from tl_geometry import capture


def _no_hooks_left(model):
    return all(len(hp.fwd_hooks) == 0 and len(hp.bwd_hooks) == 0 for hp in model.hook_dict.values())


def test_collect_matches_run_with_cache(any_tiny_model, tiny_tokens):
    model = any_tiny_model
    hooks = capture.standard_hooks(model)
    got = capture.collect(model, tiny_tokens, hooks, max_points=40, seed=1, progress=False, batch_size=4)
    _, cache = model.run_with_cache(tiny_tokens)
    b, t = got.positions.T
    assert got.n_points == 40
    for h in hooks:
        assert got.acts[h].dtype == torch.float32
        torch.testing.assert_close(got.acts[h], cache[h][b, t].float(), rtol=1e-5, atol=1e-5)
    assert _no_hooks_left(model)


def test_run_streams_every_position_in_order(tiny_model, tiny_tokens):
    seen = []
    n = capture.run(
        tiny_model, tiny_tokens, ["blocks.1.hook_resid_mid"], lambda h, a: seen.append(a), batch_size=4, progress=False
    )
    assert n == tiny_tokens.numel() and sum(len(a) for a in seen) == n
    _, cache = tiny_model.run_with_cache(tiny_tokens)
    torch.testing.assert_close(torch.cat(seen), cache["blocks.1.hook_resid_mid"].flatten(0, 1), rtol=1e-5, atol=1e-5)


def test_sample_is_seeded_and_bounded(tiny_model, tiny_tokens):
    a = capture.sample_positions(tiny_model, tiny_tokens, 30, seed=0)
    b = capture.sample_positions(tiny_model, tiny_tokens, 30, seed=0)
    c = capture.sample_positions(tiny_model, tiny_tokens, 30, seed=1)
    assert int(a.sum()) == 30 and torch.equal(a, b) and not torch.equal(a, c)
    assert int(capture.sample_positions(tiny_model, tiny_tokens, 10_000).sum()) == tiny_tokens.numel()


def test_bos_and_padding_dropped(tiny_model, monkeypatch):
    monkeypatch.setattr(tiny_model, "tokenizer", SimpleNamespace(bos_token_id=7, padding_side="right"), raising=False)
    tokens = torch.tensor([[7, 1, 2, 3], [7, 4, 5, 6]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    got = []
    n = capture.run(tiny_model, tokens, ["hook_embed"], lambda h, a: got.append(a), attention_mask=mask, progress=False)
    assert n == 3 + 1
    torch.testing.assert_close(torch.cat(got), tiny_model.W_E[torch.tensor([1, 2, 3, 4])])


def test_stops_after_last_needed_hook(tiny_model, tiny_tokens):
    calls = []
    with tiny_model.hooks(fwd_hooks=[("blocks.2.hook_resid_post", lambda a, hook: calls.append(1))]):
        capture.run(tiny_model, tiny_tokens, ["blocks.0.hook_resid_post"], lambda h, a: None, progress=False)
        assert calls == []
        capture.run(
            tiny_model, tiny_tokens, ["blocks.0.hook_resid_post"], lambda h, a: None, progress=False, stop_early=False
        )
        assert calls


def test_unknown_hook_lists_closest(any_tiny_model):
    with pytest.raises(ValueError, match=r"unknown hook 'blocks.1.hook_resid_psot'.*blocks.1.hook_resid_post"):
        capture.validate_hooks(any_tiny_model, ["blocks.1.hook_resid_psot"])


@pytest.mark.parametrize(
    "hooks, err, match",
    [
        ([], ValueError, "hooks is empty"),
        (lambda n: True, TypeError, "list of hook names"),
        (["hook_embed", "hook_embed"], ValueError, "duplicate"),
        ([3], TypeError, "must be a string"),
    ],
)
def test_bad_hook_lists(tiny_model, hooks, err, match):
    with pytest.raises(err, match=match):
        capture.validate_hooks(tiny_model, hooks)


def test_consumer_error_removes_hooks(any_tiny_model, tiny_tokens):
    def boom(h, a):
        raise RuntimeError("consumer failed")

    with pytest.raises(RuntimeError, match="consumer failed"):
        capture.run(any_tiny_model, tiny_tokens, ["blocks.0.hook_resid_post"], boom, progress=False)
    assert _no_hooks_left(any_tiny_model)


@pytest.mark.parametrize(
    "tokens, err, match",
    [
        (torch.zeros(2, 65, dtype=torch.long), ValueError, "exceeds the model's n_ctx=64"),
        (torch.zeros(0, 5, dtype=torch.long), ValueError, "tokens is empty"),
        (torch.zeros(2, 5), TypeError, "integer tensor"),
        (torch.full((1, 4), 500), ValueError, r"token ids must lie in \[0, 101\)"),
        ([[1, 2]], TypeError, "torch integer tensor"),
    ],
)
def test_bad_tokens(tiny_model, tokens, err, match):
    with pytest.raises(err, match=match):
        capture.collect(tiny_model, tokens, ["hook_embed"], progress=False)


def test_not_a_model():
    with pytest.raises(TypeError, match="expected a TransformerLens"):
        capture.validate_hooks(object(), ["hook_embed"])


def test_gradients_equal_tl_backward_cache(tiny_model, tiny_tokens):
    """Our autograd capture against TL's own backward hooks (run_with_cache incl_bwd)."""
    from transformer_lens.utilities import lm_cross_entropy_loss

    hooks = ["blocks.0.hook_resid_pre", "blocks.2.hook_resid_mid", "ln_final.hook_normalized"]
    ours = capture.gradients(tiny_model, tiny_tokens, hooks, lambda logits: lm_cross_entropy_loss(logits, tiny_tokens))
    _, cache = tiny_model.run_with_cache(tiny_tokens, return_type="loss", incl_bwd=True)
    tiny_model.zero_grad(set_to_none=True)
    for h in hooks:
        torch.testing.assert_close(ours[h], cache[h + "_grad"], rtol=1e-4, atol=1e-6)
    assert _no_hooks_left(tiny_model)


def test_gradients_bridge_match_autograd_on_hooked(tiny_bridge, tiny_tokens):
    g = capture.gradients(tiny_bridge, tiny_tokens, ["blocks.1.hook_resid_pre"], lambda l: l[:, -1, :5].sum())
    assert g["blocks.1.hook_resid_pre"].shape == (*tiny_tokens.shape, 32)
    # only positions <= last can influence the last position's logits (causal), so all are used;
    # a scalar of position 0 only has zero gradient at later positions:
    g0 = capture.gradients(tiny_bridge, tiny_tokens, ["blocks.1.hook_resid_pre"], lambda l: l[:, 0].sum())
    assert torch.all(g0["blocks.1.hook_resid_pre"][:, 1:] == 0) and g0["blocks.1.hook_resid_pre"][:, 0].abs().sum() > 0
    assert _no_hooks_left(tiny_bridge)


def test_gradients_scalar_independent_of_hooks(tiny_model, tiny_tokens):
    with pytest.raises(ValueError, match="does not depend"):
        capture.gradients(tiny_model, tiny_tokens, ["hook_embed"], lambda logits: torch.tensor(1.0))
    with pytest.raises(ValueError, match="scalar tensor"):
        capture.gradients(tiny_model, tiny_tokens, ["hook_embed"], lambda logits: logits.sum(-1))
    assert _no_hooks_left(tiny_model)


@pytest.mark.needs_hooked
def test_eval_mode_restored(tiny_tokens):
    from tests.helpers import make_tiny_model

    m = make_tiny_model().train()
    capture.collect(m, tiny_tokens, ["hook_embed"], progress=False)
    assert m.training


def test_weight_accessor(tiny_model):
    assert capture.weight(tiny_model, "W_U").shape == (32, 101)
    with pytest.raises(ValueError, match="has no weight 'W_X'"):
        capture.weight(tiny_model, "W_X")


def test_weight_dotted_path_and_optional(tiny_model):
    torch.testing.assert_close(capture.weight(tiny_model, "blocks.1.ln2.w"), tiny_model.blocks[1].ln2.w.detach())
    assert capture.weight(tiny_model, "blocks.1.ln2.nothing", optional=True) is None
    with pytest.raises(ValueError, match="has no weight 'blocks.9.ln2.w'"):
        capture.weight(tiny_model, "blocks.9.ln2.w")
