"""Loading keeps one copy of the weights, and gives exactly TransformerLens's own model.

``wrap_hf`` runs TL's processing without its deep copies and makes the processed tensors the
parameters; these tests hold it to TL's own loader (``HookedTransformer(cfg)`` +
``load_and_process_state_dict`` on ``get_pretrained_state_dict``'s output) bit for bit, on tiny random
Llama (tied embedding), Gemma 3, GPT-2 and GPT-NeoX models built from configs (no download), under
every processing the project offers; then that a model handed over is freed and a model passed in
is left as it was.
"""

from __future__ import annotations

import gc
import tempfile
import warnings
import weakref

import pytest
import torch

import tl_geometry as tg
from tl_geometry import models
from tl_geometry.models import hf_loading

pytestmark = pytest.mark.needs_hooked

V, D = 97, 32


def _hf(arch: str, seed: int = 0):
    import transformers as tf

    common = dict(vocab_size=V, max_position_embeddings=64, hidden_size=D, num_hidden_layers=2, intermediate_size=64)
    configs = {
        "llama-tied": (
            tf.LlamaConfig(**common, num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True),
            tf.LlamaForCausalLM,
        ),
        "gemma3": (
            tf.Gemma3TextConfig(
                **dict(common, num_hidden_layers=3),
                num_attention_heads=4,
                num_key_value_heads=2,
                head_dim=8,
                sliding_window=4,
                layer_types=["sliding_attention", "sliding_attention", "full_attention"],
            ),
            tf.Gemma3ForCausalLM,
        ),
        "gpt2": (tf.GPT2Config(vocab_size=V, n_positions=64, n_embd=D, n_layer=2, n_head=4), tf.GPT2LMHeadModel),
        "neox": (tf.GPTNeoXConfig(**common, num_attention_heads=4, rotary_pct=0.25), tf.GPTNeoXForCausalLM),
    }
    config, cls = configs[arch]
    torch.manual_seed(seed)
    hf = cls(config).eval()
    with torch.no_grad():  # random norms and biases, so that every processing step changes something
        for p in hf.parameters():
            if p.ndim == 1:
                p.add_(0.3 * torch.randn_like(p))
    return hf


ARCHS = ["llama-tied", "gemma3", "gpt2", "neox"]
OPTIONS = {  # the presets, and flags over them (recorded as "custom")
    "tl": dict(processing="tl"),
    "none": dict(processing="none"),
    "fold_ln only": dict(processing="none", fold_ln=True),
    "tl without center_unembed": dict(processing="tl", center_unembed=False),
}
PROCESSINGS = {k: models.processing_flags(**v) for k, v in OPTIONS.items()}


def _tl_reference(hf, processed, dtype=torch.float32):
    """TransformerLens's own loader on the same config: what wrap_hf did before (its copies included)."""
    from transformer_lens import HookedTransformer
    from transformer_lens.loading_from_pretrained import get_pretrained_state_dict

    _, flags = processed
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = hf_loading._tl_config(
            hf, hf.config, tmp, name=None, device=torch.device("cpu"), dtype=dtype, n_ctx=64, fold_ln=flags["fold_ln"]
        )
        sd = get_pretrained_state_dict(tmp, cfg, hf_model=hf, dtype=dtype)
        ref = HookedTransformer(cfg, move_to_device=False)
        ref.load_and_process_state_dict(sd, **flags)
    return ref.eval()


def _assert_bit_identical(ours, ref):
    a, b = ours.state_dict(), ref.state_dict()
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert torch.equal(a[k], b[k]), f"{k}: max |diff| {(a[k].double() - b[k].double()).abs().max()}"
        assert a[k].is_contiguous() == b[k].is_contiguous(), k
    assert ours.cfg.normalization_type == ref.cfg.normalization_type
    assert sorted(ours.hook_dict) == sorted(ref.hook_dict)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("processing", list(PROCESSINGS))
def test_state_dict_is_bit_identical_to_transformer_lens_loader(arch, processing):
    processed = PROCESSINGS[processing]
    ref = _tl_reference(_hf(arch), processed)
    # handed over (what tg.models.load does) and passed in (from_hf): the same model
    owned = hf_loading.wrap_hf(
        hf_loading._Owned(_hf(arch)),
        None,
        name=None,
        device=torch.device("cpu"),
        dtype=torch.float32,
        n_ctx=64,
        processed=processed,
    )
    _assert_bit_identical(owned, ref)
    passed = tg.models.from_hf(_hf(arch), **OPTIONS[processing])
    _assert_bit_identical(passed, ref)
    tokens = torch.randint(0, V, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.equal(owned(tokens), ref(tokens))


def test_bfloat16_is_processed_in_float32_as_transformer_lens_does():
    processed = PROCESSINGS["tl"]
    ref = _tl_reference(_hf("llama-tied").to(torch.bfloat16), processed, dtype=torch.bfloat16)
    ours = tg.models.from_hf(_hf("llama-tied").to(torch.bfloat16), dtype=torch.bfloat16)
    assert ours.W_E.dtype == torch.bfloat16
    _assert_bit_identical(ours, ref)


def test_without_tl_private_fold_helpers_the_public_step_gives_the_same(monkeypatch):
    """Another TransformerLens without the per-layer fold functions: TL's public fold_layer_norm (with its copy)."""
    processed = PROCESSINGS["tl"]
    ref = _tl_reference(_hf("gpt2"), processed)
    assert hf_loading._tl_fold_steps() is not None  # TL 3.9 has them
    monkeypatch.setattr(hf_loading, "_tl_fold_steps", lambda: None)
    _assert_bit_identical(tg.models.from_hf(_hf("gpt2")), ref)


@pytest.mark.parametrize("arch", ["llama-tied", "gpt2"])
def test_a_model_passed_in_stays_its_owners(arch):
    hf = _hf(arch)
    before = {k: v.clone() for k, v in hf.state_dict().items()}
    model = tg.models.from_hf(hf, processing="none")  # "none": tensors the conversion could have adopted as they are
    after = hf.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.requires_grad for p in hf.parameters())  # TL's loader switches these off only for models it loads
    theirs = hf_loading._storages(hf)
    assert not theirs & {p.untyped_storage().data_ptr() for p in model.parameters()}
    with torch.no_grad():
        model.W_E.mul_(2.0)  # ours is ours: writing it leaves theirs alone
    assert all(torch.equal(before[k], hf.state_dict()[k]) for k in before)


def test_no_two_parameters_share_memory():
    model = tg.models.from_hf(_hf("llama-tied"), processing="none")  # tied: W_U is W_E's transpose in the checkpoint
    ptrs = [p.untyped_storage().data_ptr() for p in model.parameters() if p.numel()]
    assert len(ptrs) == len(set(ptrs))
    assert torch.equal(model.W_U, model.W_E.T)


@pytest.mark.parametrize("processing", ["tl", "none"])
def test_load_frees_the_transformers_model(monkeypatch, tmp_path, processing):
    """tg.models.load hands the transformers model over: once the TL model is built nothing holds it."""
    hf = _hf("llama-tied")
    hf.save_pretrained(tmp_path)
    del hf
    refs = []
    real = models.load_hf_path

    def load_hf_path(path, dtype=torch.float32):
        hf, tok = real(path, dtype=dtype)
        refs.append(weakref.ref(hf))
        refs.append(weakref.ref(hf.model.layers[0].self_attn.q_proj.weight))  # one of its weights
        return hf, tok

    monkeypatch.setattr(models, "load_hf_path", load_hf_path)
    model = tg.models.load(tmp_path, processing=processing)
    gc.collect()
    assert refs and all(r() is None for r in refs), "the transformers model (or a weight of it) is still alive"
    assert model.cfg.n_layers == 2


def test_from_hf_does_not_free_the_model_passed_in():
    hf = _hf("gpt2")
    ref = weakref.ref(hf)
    tg.models.from_hf(hf)
    gc.collect()
    assert ref() is hf


def test_the_holder_hands_over_once():
    owned = hf_loading._Owned(object())
    owned.take()
    with pytest.raises(RuntimeError, match="already handed over"):
        owned.take()


def test_a_shape_that_differs_is_refused_as_torch_would():
    model = tg.models.from_hf(_hf("gpt2"), processing="none")
    with pytest.raises(RuntimeError, match=r"size mismatch for embed\.W_E"):
        hf_loading._assign(model, {"embed.W_E": torch.zeros(3, 3)}, frozenset())


def test_release_memory_runs_anywhere():
    hf_loading.release_memory()  # glibc: malloc_trim; elsewhere nothing (no error either way)


# ------------------------------------------------------------------ a GGUF's tokenizer arrays, decoded once
def test_config_calls_see_no_tokenizer_arrays_and_the_same_config(tmp_path):
    """The config (and weight) calls get the reader without the vocabulary arrays, and the config
    transformers builds is the same: the vocabulary's size comes from the array's length."""
    pytest.importorskip("gguf")
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    from tests.unit.models.test_models_gemma_zoo import write_gguf

    path = write_gguf(tmp_path / "m.gguf", vocab=50)
    with hf_loading._gguf_parsed_once() as once:
        full = load_gguf_checkpoint(path, return_tensors=False)
        once.hide_tokenizer = True
        hidden = load_gguf_checkpoint(path, return_tensors=False)
        import gguf

        reader = gguf.GGUFReader(path)
        assert "tokenizer.ggml.tokens" not in reader.fields and "tokenizer.ggml.tokens" in reader._reader.fields
        assert reader.tensors is reader._reader.tensors  # everything else is the reader's
    assert len(full["tokenizer"]["tokens"]) == 50 and "tokens" not in hidden["tokenizer"]
    assert hidden["config"] == full["config"] and hidden["config"]["vocab_size"] == 50


def test_the_reader_is_restored_after_the_block(tmp_path):
    gguf = pytest.importorskip("gguf")
    real = gguf.GGUFReader
    with hf_loading._gguf_parsed_once() as once:
        once.hide_tokenizer = True
        assert gguf.GGUFReader is not real
    assert gguf.GGUFReader is real
