"""One loader for both TransformerLens generations (tl_geometry.models.bridge).

Runs in both lanes: on TransformerLens 3 (main venv) the TransformerLens-4 path is taken by
setting ``tl_generation`` to 4 (``TransformerBridge.boot_transformers`` exists in 3.9 too), and
the tests marked ``needs_hooked`` compare it with the HookedTransformer loader; on TransformerLens 4
(ci/tl4/run.sh) it is the path every load takes. Tiny random Hugging Face models, no download.
"""

from __future__ import annotations

import copy
import importlib.metadata
import math
import sys

import pytest
import torch

import tl_geometry as tg
from tl_geometry import models
from tl_geometry.models import bridge
from tl_geometry.report import provenance_of

TL_MAJOR = int(importlib.metadata.version("transformer-lens").split(".")[0])
V, D = 97, 32
TOKENS = torch.randint(0, V, (2, 20), generator=torch.Generator().manual_seed(0))
HOOKS = ["hook_embed", "blocks.0.hook_resid_pre", "blocks.1.hook_resid_post", "ln_final.hook_normalized"]


def _hf(arch: str):
    """A tiny random transformers causal LM (fixed seed)."""
    import transformers as tf

    common = dict(vocab_size=V, max_position_embeddings=64, hidden_size=D, num_hidden_layers=2, intermediate_size=64)
    gemma = dict(common, num_attention_heads=4, num_key_value_heads=2, head_dim=8)
    config, cls = {
        "gpt2": (tf.GPT2Config(vocab_size=V, n_positions=64, n_embd=D, n_layer=2, n_head=4), tf.GPT2LMHeadModel),
        "neox": (tf.GPTNeoXConfig(**common, num_attention_heads=4, rotary_pct=0.25), tf.GPTNeoXForCausalLM),
        "llama": (tf.LlamaConfig(**common, num_attention_heads=4, num_key_value_heads=2), tf.LlamaForCausalLM),
        "gemma3": (
            tf.Gemma3TextConfig(
                **dict(gemma, num_hidden_layers=3),
                sliding_window=4,
                layer_types=["sliding_attention", "sliding_attention", "full_attention"],
            ),
            tf.Gemma3ForCausalLM,
        ),
    }[arch]
    torch.manual_seed(0)
    # Gemma's RMSNorm weight is stored as w (applied as 1 + w) and initialised at 0: move it off 0
    # so the final-norm record and fold_ln have something to fold
    hf = cls(config).eval()
    with torch.no_grad():
        for n, p in hf.named_parameters():
            if "norm" in n or "ln_" in n:
                p.add_(0.1 * torch.randn_like(p))
    return hf


ARCHS = ["gpt2", "neox", "llama", "gemma3"]


@pytest.fixture
def tl4(monkeypatch):
    """Take the TransformerLens-4 path (it is the only one on 4.x)."""
    monkeypatch.setattr(bridge, "tl_generation", lambda: 4)


def _wrap(hf, processing="tl", **kw):
    return bridge.wrap_bridge(
        hf,
        None,
        name=kw.pop("name", "tiny"),
        device=torch.device("cpu"),
        dtype=kw.pop("dtype", torch.float32),
        n_ctx=kw.pop("n_ctx", 64),
        processed=models.processing_flags(processing, **kw),
    )


# ------------------------------------------------------------------ generation helpers
def test_tl_generation_is_the_installed_major_version():
    assert models.tl_generation() == TL_MAJOR
    has = True
    try:
        from transformer_lens import HookedTransformer  # noqa: F401
    except ImportError:
        has = False
    assert has == (TL_MAJOR < 4)


def _no_hooked(monkeypatch):
    """Make ``from transformer_lens import HookedTransformer`` fail, as on TransformerLens 4."""
    import transformer_lens

    if TL_MAJOR < 4:
        monkeypatch.delattr(transformer_lens, "HookedTransformer")
    monkeypatch.setitem(sys.modules, "transformer_lens.HookedTransformer", None)


def test_require_hooked_names_what_and_the_install(monkeypatch):
    _no_hooked(monkeypatch)
    with pytest.raises(ImportError, match=r"my analysis needs TransformerLens's HookedTransformer") as info:
        models.require_hooked("my analysis", instead="pass a TransformerBridge")
    msg = str(info.value)
    assert "pip install 'transformer-lens>=3,<4'" in msg and msg.endswith("; pass a TransformerBridge")
    assert isinstance(info.value, tg.errors.TLGeometryError)


@pytest.mark.skipif(TL_MAJOR >= 4, reason="HookedTransformer exists only on TransformerLens 3")
def test_require_hooked_passes_where_it_exists():
    assert models.require_hooked("anything") is None


def test_tinygpt_says_it_needs_hooked_transformer(monkeypatch):
    """On TransformerLens 4 TinyGPT (a HookedTransformer) is refused with the reason, not a raw ImportError."""
    from tl_geometry.families.interaction import tinygpt

    _no_hooked(monkeypatch)
    for build in (lambda: tinygpt.build_model(2, 16), lambda: tinygpt.tinygpt_config(2, 16)):
        with pytest.raises(bridge.HookedTransformerUnavailable, match=r"TinyGPT .*transformer-lens>=3,<4"):
            build()


# ------------------------------------------------------------------ the bridge gives the checkpoint's numbers
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("processing", ["tl", "none"])
def test_bridge_gives_hf_logits_and_records_its_processing(arch, processing):
    hf = _hf(arch)
    with torch.no_grad():
        ref = hf(TOKENS).logits
    b = _wrap(copy.deepcopy(hf), processing)
    with torch.no_grad():
        out = b(TOKENS)
    if processing == "none":
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(b.W_U, hf.get_output_embeddings().weight.T)  # the raw unembedding
    else:  # center_unembed shifts each position's logits by one constant: compare log-probs
        torch.testing.assert_close(out.log_softmax(-1), ref.log_softmax(-1), atol=1e-5, rtol=1e-5)
        assert not torch.allclose(out, ref, atol=1e-3)  # processing did change the logits
    rms = arch in ("llama", "gemma3")  # TransformerLens skips center_writing_weights after an RMSNorm
    assert b._tl_geometry_processing == {
        "fold_ln": processing == "tl",
        "center_writing_weights": processing == "tl" and not rms,
        "center_unembed": processing == "tl",
    }
    prov = provenance_of(b)
    assert prov["model_class"] == "TransformerBridge" and prov["processing"] == processing
    assert prov["model"] == "tiny" and b.cfg.model_name == "tiny" and b.tokenizer is None


def test_custom_flags_are_recorded_as_custom():
    b = _wrap(_hf("llama"), "tl", center_unembed=False)
    assert models.processing_name(b) == "custom" and b._tl_geometry_processing["center_unembed"] is False
    # without center_unembed the logits are the checkpoint's up to float rounding (fold_ln is exact)
    hf = _hf("llama")
    with torch.no_grad():
        torch.testing.assert_close(b(TOKENS), hf(TOKENS).logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_final_norm_weight_is_the_applied_one(arch):
    """Recorded before fold_ln folds it into W_U (what tg.pga's readout caveat reads); Gemma applies 1 + w."""
    hf = _hf(arch)
    w = hf.model.norm.weight.detach().clone()
    applied = 1 + w if arch == "gemma3" else w
    for processing in ("tl", "none"):
        b = _wrap(copy.deepcopy(hf), processing)
        torch.testing.assert_close(b._tl_geometry_final_norm_w, applied)


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_the_pga_readout_caveat_sees_a_folded_bridge(arch, monkeypatch):
    """A bridge keeps cfg.normalization_type "RMS" when fold_ln folds: the caveat reads the recorded flags."""
    from tl_geometry.families import pga

    hf = _hf(arch)
    b = _wrap(copy.deepcopy(hf), "tl")
    monkeypatch.setattr(pga, "FOLD_LN_SPREAD", 1.0)  # the tiny model's weights spread little: flag any spread
    assert "fold_ln folded" in pga.readout_caveat(b)
    assert pga.readout_caveat(_wrap(copy.deepcopy(hf), "none")) is None
    del b._tl_geometry_final_norm_w  # without the record, Gemma is flagged by its architecture
    assert (pga.readout_caveat(b) is not None) == (arch == "gemma3")


def test_gemma_w_e_is_the_checkpoints_without_the_embedding_scale():
    """Pinned: on the bridge, Gemma's W_E is the raw embedding (TransformerLens 3 folds √d_model into
    it); the activations carry the scale, and ε of W_E (scale-free) is unchanged."""
    hf = _hf("gemma3")
    raw = hf.model.embed_tokens.weight.detach().clone()
    b = _wrap(copy.deepcopy(hf), "tl")
    torch.testing.assert_close(b.W_E, raw, atol=0, rtol=0)
    _, cache = b.run_with_cache(TOKENS, names_filter=["hook_embed"])
    torch.testing.assert_close(cache["hook_embed"], raw[TOKENS] * math.sqrt(D), atol=1e-5, rtol=1e-5)
    a, s = tg.embedding_epsilon(b.W_E, progress=False), tg.embedding_epsilon(b.W_E * math.sqrt(D), progress=False)
    assert a.epsilon == pytest.approx(s.epsilon, rel=1e-6)


def test_dtype_and_n_ctx_follow_the_options():
    b = _wrap(_hf("llama"), "tl", dtype=torch.float64, n_ctx=16)
    assert b.W_E.dtype == torch.float64 and b.cfg.n_ctx == 16
    assert _wrap(_hf("llama"), "tl", n_ctx=10_000).cfg.n_ctx == 64  # capped at the model's positions


# ------------------------------------------------------------------ against TransformerLens 3's loader
@pytest.mark.needs_hooked
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("processing", ["tl", "none"])
def test_bridge_equals_the_hooked_transformer_loader(arch, processing):
    """The same HF model through both generations' loaders: the same weights, activations and logits
    (Gemma's W_E up to the √d_model TransformerLens 3 folds in)."""
    from tl_geometry.models.hf_loading import wrap_hf

    hf = _hf(arch)
    processed = models.processing_flags(processing)
    ht = wrap_hf(
        copy.deepcopy(hf),
        None,
        name="tiny",
        device=torch.device("cpu"),
        dtype=torch.float32,
        n_ctx=64,
        processed=processed,
    )
    b = _wrap(copy.deepcopy(hf), processing)
    with torch.no_grad():
        l3, c3 = ht.run_with_cache(TOKENS, names_filter=lambda n: n in HOOKS)
        l4, c4 = b.run_with_cache(TOKENS, names_filter=HOOKS)
    torch.testing.assert_close(l4, l3, atol=1e-5, rtol=1e-5)
    for h in HOOKS:
        torch.testing.assert_close(c4[h], c3[h], atol=1e-5, rtol=1e-5)
    scale = math.sqrt(D) if arch == "gemma3" else 1.0
    torch.testing.assert_close(b.W_E * scale, ht.W_E, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(b.W_U, ht.W_U, atol=1e-6, rtol=1e-6)
    assert provenance_of(b)["weight_processing"] == provenance_of(ht)["weight_processing"]
    assert models.processing_name(b) == models.processing_name(ht) == processing
    if processing == "tl":
        torch.testing.assert_close(b._tl_geometry_final_norm_w, ht._tl_geometry_final_norm_w)
    eps3 = tg.embedding_epsilon(ht, progress=False).epsilon
    assert tg.embedding_epsilon(b, progress=False).epsilon == pytest.approx(eps3, rel=1e-6)


# ------------------------------------------------------------------ tg.models.load / from_hf / random_like on TL 4
@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    from tests.unit.models.test_models import _write_hf_dir

    d = tmp_path_factory.mktemp("models") / "tiny-llama"
    return d, _write_hf_dir(d)


def test_load_of_a_path_is_a_processed_bridge(tl4, hf_dir):
    path, hf = hf_dir
    model = models.load(path)
    assert bridge.is_bridge(model) and models.processing_name(model) == "tl"
    assert model.tokenizer is not None and model.to_tokens("w1 w2", prepend_bos=False).tolist() == [[4, 5]]
    prov = provenance_of(model)
    assert prov["model_path"] == str(path.resolve()) and prov["model"] == "tiny-llama" and prov["processing"] == "tl"
    toks = TOKENS % 64
    with torch.no_grad():
        torch.testing.assert_close(model(toks).log_softmax(-1), hf(toks).logits.log_softmax(-1), atol=1e-5, rtol=1e-5)
    raw = models.load(path, processing="none")
    assert models.processing_name(raw) == "none" and provenance_of(raw)["weight_processing"]["fold_ln"] is False


def test_load_of_a_zoo_name_wraps_its_file(tl4, hf_dir, monkeypatch, tmp_path):
    path = tmp_path / "zoo.gguf"
    seen = []
    monkeypatch.setattr(bridge, "zoo_file", lambda key: path)
    monkeypatch.setattr(
        models.hf_loading, "load_hf_gguf", lambda p, *, dtype: seen.append(p) or models.load_hf_path(hf_dir[0])
    )
    model = models.load("smollm2-135m")
    assert bridge.is_bridge(model) and model._tl_geometry_path == str(path) and seen == [path]
    assert model.cfg.default_prepend_bos is True and model.cfg.model_name == "smollm2-135m"
    assert provenance_of(model)["processing"] == "tl"


def test_load_refuses_bad_names_and_unreachable_hub_names(tl4, monkeypatch):
    for name in ("", None, 3):
        with pytest.raises(ValueError, match="non-empty string"):
            models.load(name)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(models.ModelNotAvailableError, match="from_hf") as info:
        models.load("definitely-not-a-model-xyz")
    assert "TransformerBridge" in str(info.value)
    with pytest.raises(ValueError, match="processing must be one of"):
        models.load("smollm2-135m", processing="folded")


def test_from_hf_leaves_your_model_as_it_was(tl4):
    hf = _hf("gpt2")
    before = {k: v.clone() for k, v in hf.state_dict().items()}
    kinds = [type(m).__name__ for m in hf.modules()]
    model = models.from_hf(hf, name="mine")
    assert bridge.is_bridge(model) and models.model_name_of(model) == "mine"
    assert models.processing_name(model) == "tl"
    assert [type(m).__name__ for m in hf.modules()] == kinds
    assert all(torch.equal(before[k], v) for k, v in hf.state_dict().items())
    with pytest.raises(ValueError, match="processing must be one of"):
        models.from_hf(hf, processing="folded")


def test_random_like_of_a_bridge(tl4):
    b = _wrap(_hf("llama"), "tl", name="base")
    r1, r2 = models.random_like(b, seed=3), models.random_like(b, seed=3)
    assert bridge.is_bridge(r1) and models.model_name_of(r1) == "base-random-init"
    assert torch.equal(r1.W_E, r2.W_E) and not torch.equal(r1.W_E, b.W_E)
    assert not torch.equal(models.random_like(b, seed=4).W_E, r1.W_E)
    assert models.processing_name(r1) == "tl" and r1.cfg.d_model == b.cfg.d_model
    assert torch.isfinite(r1(TOKENS)).all()


def test_random_like_of_a_native_bridge(tiny_bridge):
    r1, r2 = models.random_like(tiny_bridge, seed=1), models.random_like(tiny_bridge, seed=1)
    assert torch.equal(r1.W_E, r2.W_E) and not torch.equal(r1.W_E, tiny_bridge.W_E)
    assert r1.W_E.std() > 0 and models.model_name_of(r1).endswith("-random-init")


def test_cli_report_on_a_path_uses_the_bridge(tl4, hf_dir, tmp_path):
    from tl_geometry.cli import main

    out = tmp_path / "rep"
    rc = main(
        ["report", "--model", str(hf_dir[0]), "--metrics", "shape", "epsilon", "--corpus", "pydoc"]
        + ["--n-seqs", "2", "--seq-len", "8", "--out", str(out), "--no-figures"]
    )
    assert rc == 0
    rep = tg.GeometryReport.from_json(out / "report.json")
    assert rep.provenance["model_class"] == "TransformerBridge" and rep.provenance["processing"] == "tl"
    assert rep.value("epsilon.W_E") == pytest.approx(
        tg.embedding_epsilon(models.load(hf_dir[0]), progress=False).epsilon
    )
