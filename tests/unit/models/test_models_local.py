"""A checkpoint a user saved with the pinned transformers loads through ``tg.models.load(dir)``.

Tiny random GPT-2, GPT-NeoX, Llama and Gemma / Gemma 2 / Gemma 3 models are saved with
``save_pretrained`` (no tokenizer, no hub); the loaded TransformerLens model must give HF's logits.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import tl_geometry as tg

pytestmark = pytest.mark.needs_hooked

V, D = 97, 32


def _configs():
    import transformers as tf

    common = dict(vocab_size=V, max_position_embeddings=64, hidden_size=D, num_hidden_layers=2, intermediate_size=64)
    gemma = dict(common, num_attention_heads=4, num_key_value_heads=2, head_dim=8)
    return {
        "gpt2": (tf.GPT2Config(vocab_size=V, n_positions=64, n_embd=D, n_layer=2, n_head=4), tf.GPT2LMHeadModel),
        "gpt2-n_inner": (
            tf.GPT2Config(vocab_size=V, n_positions=64, n_embd=D, n_layer=2, n_head=4, n_inner=48),
            tf.GPT2LMHeadModel,
        ),
        "neox": (tf.GPTNeoXConfig(**common, num_attention_heads=4, rotary_pct=0.25), tf.GPTNeoXForCausalLM),
        "llama": (tf.LlamaConfig(**common, num_attention_heads=4, num_key_value_heads=2), tf.LlamaForCausalLM),
        "gemma": (tf.GemmaConfig(**dict(gemma, num_key_value_heads=1)), tf.GemmaForCausalLM),
        # windows shorter than the test's 20 tokens: the local layers' masks matter
        "gemma2": (tf.Gemma2Config(**gemma, sliding_window=6), tf.Gemma2ForCausalLM),
        "gemma3": (
            tf.Gemma3TextConfig(
                **dict(gemma, num_hidden_layers=3),
                sliding_window=4,
                layer_types=["sliding_attention", "sliding_attention", "full_attention"],
            ),
            tf.Gemma3ForCausalLM,
        ),
    }


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """{architecture: (checkpoint dir, the HF model)} saved once per module."""
    torch.manual_seed(0)
    out = {}
    for arch, (config, cls) in _configs().items():
        hf = cls(config).eval()
        path = tmp_path_factory.mktemp(arch)
        hf.save_pretrained(path)
        out[arch] = (path, hf)
    return out


TOKENS = torch.randint(0, V, (2, 20), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("arch", list(_configs()))
@pytest.mark.parametrize("processing", ["none", "tl"])
def test_saved_checkpoint_loads_with_hf_logits(saved, arch, processing):
    path, hf = saved[arch]
    model = tg.models.load(path, processing=processing)
    assert model.tokenizer is None  # saved without one: the model runs on token ids
    with torch.no_grad():
        ours, ref = model(TOKENS), hf(TOKENS).logits
    if processing == "none":
        torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
    else:  # center_unembed shifts every logit of a position by one constant: compare log-probs
        torch.testing.assert_close(ours.log_softmax(-1), ref.log_softmax(-1), atol=1e-5, rtol=1e-5)


def test_gpt2_without_n_ctx_in_its_config(saved):
    """transformers 5's GPT2Config has no n_ctx (TransformerLens 3.9 reads it): the context is n_positions."""
    path, hf = saved["gpt2"]
    assert "n_ctx" not in hf.config.to_dict()
    assert tg.models.load(path).cfg.n_ctx == 64


@pytest.fixture
def small_model(saved):
    return tg.models.load(saved["llama"][0])  # d_model 32: below pga's default k = 100


def test_default_k_is_capped_below_d_model_with_a_warning(small_model):
    tokens = torch.randint(0, V, (4, 16), generator=torch.Generator().manual_seed(1))
    with pytest.warns(UserWarning, match=r"default k=100 is not below this model's d_model=32; using k=16"):
        rep = tg.analyze(small_model, tokens, metrics=["pga"], options={"pga": {"n_null": 4}}, progress=False)
    assert rep.rows


def test_a_given_k_is_not_capped(small_model):
    tokens = torch.randint(0, V, (4, 16), generator=torch.Generator().manual_seed(1))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        with pytest.raises(tg.errors.InputError, match=r"k must satisfy 1 <= k < d_model=32"):
            tg.analyze(small_model, tokens, metrics=["pga"], options={"pga": {"k": 40, "n_null": 4}}, progress=False)
