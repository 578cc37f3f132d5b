"""A cache is checked against the model and the tokens before it is measured (issue 33): one
forward on the first sequence; another model's cache (same shape), another token batch's, or an
activation of the wrong width is refused naming the hook — it used to be measured (PGA z off by
up to 48; a 7-wide activation accepted for a 32-wide hook by spectral and ε)."""

from __future__ import annotations

import pytest
import torch

import tl_geometry as tg
from tests.helpers import make_tiny_model
from tl_geometry.errors import InputError

HOOKS = ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]


@pytest.fixture(scope="module")
def models():
    return make_tiny_model(seed=0), make_tiny_model(seed=1)


@pytest.fixture(scope="module")
def tokens(models):
    return torch.randint(1, models[0].cfg.d_vocab, (6, 10), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("metric", ["spectral", "epsilon_activations", "pga"])
def test_the_right_cache_is_accepted_and_gives_the_live_numbers(models, tokens, metric):
    model = models[0]
    _, cache = model.run_with_cache(tokens)
    opts = {"pga": {"k": 8, "n_null": 5}} if metric == "pga" else None
    live = tg.analyze(model, tokens, metrics=[metric], hooks=HOOKS, options=opts, progress=False)
    cached = tg.analyze(model, tokens, cache=cache, metrics=[metric], hooks=HOOKS, options=opts, progress=False)
    a = {(r.metric, r.hook): r.value for r in live.rows}
    b = {(r.metric, r.hook): r.value for r in cached.rows}
    assert a.keys() == b.keys() and all(a[k] == pytest.approx(b[k], rel=1e-5, abs=1e-6) for k in a)


@pytest.mark.parametrize("metric", ["spectral", "epsilon_activations", "pga"])
def test_another_models_cache_of_the_same_shape_is_refused(models, tokens, metric):
    _, other = models[1].run_with_cache(tokens)
    with pytest.raises(InputError, match=r"do not come from this model on these tokens"):
        tg.analyze(models[0], tokens, cache=other, metrics=[metric], hooks=HOOKS, progress=False)


def test_a_cache_of_other_tokens_is_refused(models, tokens):
    _, cache = models[0].run_with_cache(tokens.flip(0))
    with pytest.raises(InputError, match=r"'blocks.0.hook_resid_post' do not come from this model"):
        tg.analyze(models[0], tokens, cache=cache, metrics=["spectral"], hooks=HOOKS, progress=False)


@pytest.mark.parametrize("metric", ["spectral", "epsilon_activations"])
def test_an_activation_of_the_wrong_width_is_refused(models, tokens, metric):
    d = models[0].cfg.d_model
    acts = {h: torch.randn(*tokens.shape, 7) for h in HOOKS}
    with pytest.raises(InputError, match=rf"are 7 wide but this model's 'blocks.0.hook_resid_post' is {d} wide"):
        tg.analyze(models[0], tokens, activations=acts, metrics=[metric], hooks=HOOKS, progress=False)
