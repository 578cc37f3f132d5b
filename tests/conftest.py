"""Shared fixtures. Unit tests use tiny random models only; never the network."""

import os
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402


def _hooked_transformer_classes():
    try:
        from transformer_lens import HookedTransformer, HookedTransformerConfig
    except ImportError:  # TransformerLens 4 removed them; bridge tests still run (ci/tl4)
        pytest.skip("needs HookedTransformer (TransformerLens < 4)")
    return HookedTransformer, HookedTransformerConfig


def tiny_config(**overrides):
    _, HookedTransformerConfig = _hooked_transformer_classes()

    kw = dict(
        n_layers=3, d_model=32, n_ctx=64, d_head=8, n_heads=4, d_mlp=64, d_vocab=101,
        act_fn="gelu", normalization_type="LN", seed=0,
    )
    kw.update(overrides)
    return HookedTransformerConfig(**kw)


def make_tiny_model(**overrides):
    HookedTransformer, _ = _hooked_transformer_classes()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        model = HookedTransformer(tiny_config(**overrides))
    return model.eval()


def make_tiny_bridge(**overrides):
    from transformer_lens.model_bridge import TransformerBridge

    kw = dict(n_layers=3, d_model=32, n_ctx=64, d_head=8, n_heads=4, d_mlp=64, d_vocab=101,
              act_fn="gelu", normalization_type="LN")
    kw.update(overrides)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        bridge = TransformerBridge.boot_native(kw)
    return bridge.eval()


@pytest.fixture(scope="session")
def tiny_model():
    """A 3-layer, d_model=32, d_vocab=101 random HookedTransformer (no tokenizer)."""
    return make_tiny_model()


@pytest.fixture(scope="session")
def tiny_bridge():
    """The same shape as ``tiny_model`` as a TransformerBridge (boot_native, random weights)."""
    return make_tiny_bridge()


@pytest.fixture(params=["hooked", "bridge"])
def any_tiny_model(request):
    return request.getfixturevalue("tiny_model" if request.param == "hooked" else "tiny_bridge")


@pytest.fixture(scope="session")
def tiny_tokens():
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 101, (6, 16), generator=g)
