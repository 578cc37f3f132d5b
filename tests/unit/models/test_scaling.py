"""``tg.models.scaled``: random-init SmolLM2- and Gemma-3-family models of a chosen size (tiny ones here)."""

from __future__ import annotations

import pytest
import torch

import tl_geometry as tg
from tl_geometry.models import scaling as scaled_mod

pytestmark = pytest.mark.needs_hooked


@pytest.mark.parametrize("family", ["smollm2", "gemma-3"])
@pytest.mark.parametrize("target", [2e6, 5e6])
def test_the_counted_parameters_are_the_built_models(family, target):
    model = tg.models.scaled(family, target, vocab_size=300, n_layers=2)
    sc = model._tl_geometry_scaled
    assert sum(p.numel() for p in model.parameters()) == sc.n_params
    assert (model.cfg.n_layers, model.cfg.d_model, model.cfg.d_mlp, model.cfg.d_vocab) == (
        2,
        sc.d_model,
        sc.d_mlp,
        300,
    )
    tokens = torch.randint(0, 300, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = model(tokens)
    assert logits.shape == (2, 9, 300) and torch.isfinite(logits).all()


@pytest.mark.parametrize("family", ["smollm2", "gemma-3"])
@pytest.mark.parametrize("target", [5e8, 1e9])
def test_research_sizes_are_met_within_five_percent(family, target):
    """The shapes of the benchmark's 0.5 B and 1 B models, from the config alone (nothing built)."""
    sc = tg.models.scaled_config(family, target)
    assert abs(sc.n_params / target - 1) < 0.05
    assert sc.n_heads * sc.d_head == sc.d_model or family == "gemma-3"
    if family == "smollm2":
        assert (sc.d_head, sc.n_heads // sc.n_key_value_heads, sc.d_vocab) == (64, 3, 49152)
        assert sc.hf_config.architectures == ["LlamaForCausalLM"]
    else:
        assert (sc.d_head, sc.n_heads, sc.n_key_value_heads, sc.d_vocab, sc.d_mlp) == (
            256,
            4,
            1,
            262144,
            6 * sc.d_model,
        )
        assert sc.hf_config.architectures == ["Gemma3ForCausalLM"]
        assert "full_attention" in sc.hf_config.layer_types and "sliding_attention" in sc.hf_config.layer_types
    assert sc.weights_bytes == 4 * sc.n_params


def test_a_larger_target_gives_a_larger_model():
    sizes = [tg.models.scaled_config("smollm2", t).n_params for t in (2e8, 5e8, 1e9, 2e9)]
    assert sizes == sorted(sizes) and len(set(sizes)) == 4


def test_the_gemma_family_has_its_architecture():
    model = tg.models.scaled("gemma-3", 5e6, vocab_size=300, n_layers=6)
    assert model.cfg.original_architecture == "Gemma3ForCausalLM"
    assert model.cfg.use_qk_norm and model.cfg.use_normalization_before_and_after
    assert model.cfg.attn_types == ["local"] * 5 + ["global"]
    assert (model.cfg.rotary_base, model.cfg.rotary_base_local) == (1_000_000.0, 10_000.0)


def test_the_smollm2_family_has_its_architecture():
    cfg = tg.models.scaled("smollm2", 2e6, vocab_size=300, n_layers=2).cfg
    assert (cfg.original_architecture, cfg.act_fn, cfg.gated_mlp, cfg.normalization_type) == (
        "LlamaForCausalLM",
        "silu",
        True,
        "RMS",
    )
    assert (cfg.rotary_base, cfg.eps, cfg.n_key_value_heads * 3) == (100000.0, 1e-5, cfg.n_heads)


def test_seeded_and_recorded():
    a = tg.models.scaled("smollm2", 2e6, vocab_size=300, n_layers=2, seed=1)
    b = tg.models.scaled("smollm2", 2e6, vocab_size=300, n_layers=2, seed=1)
    c = tg.models.scaled("smollm2", 2e6, vocab_size=300, n_layers=2, seed=2)
    assert torch.equal(a.W_E, b.W_E) and not torch.equal(a.W_E, c.W_E)
    assert a.W_E.std() > 0  # initialised, not left empty
    assert tg.models.processing_name(a) == "none"
    assert tg.models.model_name_of(a).startswith("smollm2-scaled-") and "random-init" in tg.models.model_name_of(a)


def test_no_transformers_model_is_built(monkeypatch):
    """From the config alone: one copy of the weights, TransformerLens's own."""
    import transformers

    def refuse(*args, **kwargs):
        raise AssertionError("a transformers model was built")

    monkeypatch.setattr(transformers.LlamaForCausalLM, "__init__", refuse)
    monkeypatch.setattr(transformers.Gemma3ForCausalLM, "__init__", refuse)
    tg.models.scaled("smollm2", 2e6, vocab_size=300, n_layers=2)
    tg.models.scaled("gemma-3", 2e6, vocab_size=300, n_layers=2)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: tg.models.scaled_config("gpt2", 1e8), r"family must be one of \['gemma-3', 'smollm2'\], got 'gpt2'"),
        (lambda: tg.models.scaled_config("smollm2", 1e5), "below the smallest 'smollm2' model"),
        (lambda: tg.models.scaled_config("smollm2", "big"), "n_params"),
        (lambda: tg.models.scaled_config("smollm2", 1e8, n_layers=0), "n_layers"),
        (lambda: tg.models.scaled_config("smollm2", 1e8, vocab_size=1), "vocab_size"),
    ],
)
def test_bad_inputs_say_what_is_accepted(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_count_matches_a_hand_count_of_smollm2_135m():
    """The family's own 135M model, counted by hand from its shape (TL holds W_U apart from W_E)."""
    f = scaled_mod.FAMILIES["smollm2"]
    assert scaled_mod._count(f, 30, 576, 49152) == 162_985_152
