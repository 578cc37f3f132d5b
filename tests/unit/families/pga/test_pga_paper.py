"""PGA paper preset and weight processing: the unprocessed model reproduces Hugging Face's
hidden_states and raw unembedding; processed models are flagged; every row records preset and
processing; too few points are refused."""

import warnings

import pytest
import torch

import tl_geometry as tg
from tl_geometry import capture, models
from tl_geometry.render.readings import hook_position
from tl_geometry.report import Row


def _hf(kind):
    """A tiny random transformers model with non-trivial norm weights (and biases for LayerNorm)."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    if kind == "llama":  # RMSNorm, rotary, untied unembedding
        hf = LlamaForCausalLM(
            LlamaConfig(
                vocab_size=97,
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=3,
                num_attention_heads=4,
                num_key_value_heads=2,
                max_position_embeddings=64,
                tie_word_embeddings=False,
            )
        )
    else:  # Pythia's architecture: LayerNorm (center_writing_weights changes the residual stream)
        hf = GPTNeoXForCausalLM(
            GPTNeoXConfig(
                vocab_size=97,
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=3,
                num_attention_heads=4,
                max_position_embeddings=64,
                rotary_pct=0.25,
            )
        )
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.mul_(1 + 0.5 * torch.rand_like(p))
            if "norm" in name and name.endswith("bias"):
                p.add_(0.3 * torch.randn_like(p))
    return hf.eval()


@pytest.fixture(scope="module", params=["llama", "neox"])
def hf_pair(request):
    hf = _hf(request.param)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = models.from_hf(hf, None, name=f"tiny-{request.param}", processing="none")
        tl = models.from_hf(hf, None, name=f"tiny-{request.param}", processing="tl")
    return request.param, hf, raw, tl


def test_unprocessed_model_is_hugging_faces(hf_pair):
    kind, hf, raw, tl = hf_pair
    toks = torch.randint(0, 97, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = hf(toks, output_hidden_states=True)
    hooks = capture.hidden_state_hooks(raw)
    assert hooks == [
        "blocks.0.hook_resid_pre",
        "blocks.0.hook_resid_post",
        "blocks.1.hook_resid_post",
        "unembed.hook_in",
    ]
    assert len(hooks) == len(out.hidden_states) == raw.cfg.n_layers + 1
    _, cache = raw.run_with_cache(toks, names_filter=hooks)
    for h, ref in zip(hooks, out.hidden_states):
        torch.testing.assert_close(cache[h], ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(raw.W_U, hf.get_output_embeddings().weight.T, atol=0, rtol=0)
    # the processed model's W_U is not the raw unembedding (fold_ln, center_unembed) ...
    assert (tl.W_U - raw.W_U).abs().max() > 1e-3
    # ... its final state lacks the final norm's weight, and for LayerNorm models
    # center_writing_weights changes the residual stream itself
    _, cache_tl = tl.run_with_cache(toks, names_filter=hooks)
    assert (cache_tl["unembed.hook_in"] - out.hidden_states[-1]).abs().max() > 1e-2
    moved = (cache_tl["blocks.1.hook_resid_post"] - out.hidden_states[2]).abs().max()
    assert (moved > 1e-3) if kind == "neox" else (moved < 1e-5)


def test_processing_is_recorded(hf_pair, request):
    _, _, raw, tl = hf_pair
    assert models.processing_name(raw) == "none" and models.processing_name(tl) == "tl"
    assert raw._tl_geometry_processing == {"fold_ln": False, "center_writing_weights": False, "center_unembed": False}
    # what TransformerLens did: it skips center_writing_weights for an RMSNorm model (llama) although asked
    centered = "llama" not in request.node.name
    assert tl._tl_geometry_processing == {"fold_ln": True, "center_writing_weights": centered, "center_unembed": True}
    assert tl._tl_geometry_processing_asked["center_writing_weights"] is True
    assert tg.GeometryReport.from_rows([], model=raw).provenance["processing"] == "none"
    assert models.processing_flags("tl", center_unembed=False) == (
        "custom",
        {"fold_ln": True, "center_writing_weights": True, "center_unembed": False, "fold_value_biases": True},
    )
    assert models.processing_name(torch.nn.Linear(2, 2)) == "unknown"


def test_bad_processing_name():
    with pytest.raises(ValueError, match="processing must be one of \\['none', 'tl'\\], got 'raw'"):
        models.load("smollm2-135m", processing="raw")
    with pytest.raises(ValueError, match="processing must be one of"):
        models.processing_flags("TL")


def test_paper_preset_rows_hooks_and_warnings(hf_pair):
    _, _, raw, tl = hf_pair
    toks = torch.randint(0, 97, (4, 12), generator=torch.Generator().manual_seed(2))
    opts = dict(k=4, n_null=4, ccr=[0, 1], max_points=30, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the unprocessed model: no warning
        r = tg.pga(raw, toks, preset="paper", **opts)
    assert [h for h in dict.fromkeys(x.hook for x in r.rows)] == capture.hidden_state_hooks(raw)
    for row in r.rows:
        assert row.extras["preset"] == "paper" and row.extras["processing"] == "none"
    assert r.provenance["pga"]["preset"] == "paper" and r.provenance["processing"] == "none"
    # a processed model: a warning naming what differs, rows say so
    with pytest.warns(UserWarning, match="fold_ln multiplied the final norm's weight into W_U.*center_unembed"):
        rp = tg.pga(tl, toks, preset="paper", **opts)
    assert {x.extras["processing"] for x in rp.rows} == {"tl"}
    # the library preset: resid_post everywhere, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rl = tg.pga(tl, toks, **opts)
    assert {x.hook for x in rl.rows} == set(capture.resid_hooks(tl, "post"))
    assert {(x.extras["preset"], x.extras["processing"]) for x in rl.rows} == {("library", "tl")}


def test_spectral_preset_hooks_and_rows(hf_pair):
    _, _, raw, _ = hf_pair
    toks = torch.randint(0, 97, (4, 12), generator=torch.Generator().manual_seed(2))
    r = tg.spectral(raw, toks, preset="paper", progress=False)
    assert list(dict.fromkeys(x.hook for x in r.rows)) == capture.hidden_state_hooks(raw)
    assert {(x.extras["preset"], x.extras["processing"]) for x in r.rows} == {("paper", "none")}
    assert {x.hook for x in tg.spectral(raw, toks, progress=False).rows} == set(capture.resid_hooks(raw, "post"))
    with pytest.raises(ValueError, match="preset must be one of"):
        tg.spectral(raw, toks, preset="hf", progress=False)


def test_paper_preset_unknown_processing_warns(tiny_model, tiny_tokens):
    with pytest.warns(UserWarning, match="processing of this HookedTransformer is unknown"):
        r = tg.pga(tiny_model, tiny_tokens, preset="paper", k=4, n_null=4, max_points=30, progress=False)
    assert {x.extras["processing"] for x in r.rows} == {"unknown"}


def test_paper_preset_on_bridges(tiny_bridge, tiny_tokens, monkeypatch):
    # a bridge on raw weights (never processed) is the unprocessed model: no warning
    assert models.processing_name(tiny_bridge) == "none"
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        r = tg.pga(tiny_bridge, tiny_tokens, preset="paper", k=4, n_null=4, max_points=30, progress=False)
    assert {x.extras["processing"] for x in r.rows} == {"none"}
    assert {x.hook for x in r.rows} == set(capture.hidden_state_hooks(tiny_bridge))
    # after process_weights the bridge keeps no flags: processing unknown, a warning saying so
    monkeypatch.setattr(tiny_bridge, "_weights_processed", True)
    assert models.processing_name(tiny_bridge) == "unknown"
    with pytest.warns(UserWarning, match="TransformerBridge's weights were processed"):
        tg.pga(tiny_bridge, tiny_tokens, preset="paper", k=4, n_null=4, max_points=30, progress=False)


def test_bad_preset(tiny_model, tiny_tokens):
    with pytest.raises(ValueError, match="preset must be one of \\['library', 'paper'\\], got 'raw'"):
        tg.pga(tiny_model, tiny_tokens, preset="raw", progress=False)


# ----------------------------------------------------------------------------- too few points
def test_min_points():
    assert tg.min_points(100) == 101 and tg.min_points(3) == tg.MIN_POINTS == 10


@pytest.mark.parametrize("N,k,need", [(5, 3, 10), (9, 2, 10), (20, 20, 21), (60, 100, 101)])
def test_too_few_points_are_refused(N, k, need):
    g = torch.Generator().manual_seed(0)
    d = max(2 * k, 16)
    V = tg.readout_basis(torch.randn(d, 3 * d, generator=g), k)
    H = torch.randn(N, d, generator=g)
    msg = f"at least max\\(k \\+ 1, 10\\) = {need} points for k={k}, got N={N}"
    with pytest.raises(ValueError, match=msg):
        tg.pga_score(H, V, n_null=4)
    with pytest.raises(ValueError, match=msg):
        tg.pga_profile(H, V, ccrs=(0,), n_null=4)
    # exactly the minimum is accepted
    H = torch.randn(need, d, generator=g)
    assert tg.pga_score(H, V, n_null=4, ccr=0).n_points == need


def test_registered_pga_refuses_too_few_points(tiny_model, tiny_tokens):
    with pytest.raises(ValueError, match="at least max\\(k \\+ 1, 10\\) = 10 points for k=4, got N=8"):
        tg.pga(tiny_model, tiny_tokens, k=4, n_null=4, max_points=8, progress=False)


# ----------------------------------------------------------------------------- plotting positions
@pytest.mark.parametrize(
    "hook,pos",
    [
        ("blocks.0.hook_resid_pre", -1.0),
        ("blocks.3.hook_resid_pre", 2.0),
        ("blocks.3.hook_resid_post", 3.0),
        ("unembed.hook_in", 5.0),
        ("ln_final.hook_normalized", 5.0),
        ("hook_embed", -1.0),
    ],
)
def test_hook_position(hook, pos):
    from tl_geometry.report import layer_of

    assert hook_position(Row(model="m", metric="pga.z", value=0.0, hook=hook, layer=layer_of(hook)), 5) == pos
