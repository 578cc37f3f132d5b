"""Tiny random models for unit tests (no pretrained weights, no network).

Import from here (``from tiny_models import make_tiny_model``), not from ``conftest``: with two
conftest.py files (tests/ and tests/integration/) the name ``conftest`` is ambiguous.
"""

import warnings

import torch


def _hooked_transformer_classes():
    try:
        from transformer_lens import HookedTransformer, HookedTransformerConfig
    except ImportError as exc:  # TransformerLens 4 removed them; bridge tests still run (ci/tl4)
        raise ImportError(
            "this test builds a HookedTransformer, which TransformerLens 4 removed: mark it "
            "@pytest.mark.needs_hooked (users of the tiny_model fixture are marked by tests/conftest.py), "
            "and the TL-4 lane deselects it"
        ) from exc
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


class ByteTokenizer:
    """A tokenizer for tiny models: UTF-8 bytes shifted by one (id 0 is BOS); no download."""

    bos_token_id = 0
    padding_side = "right"

    def encode(self, text, add_special_tokens=False):
        return [b + 1 for b in text.encode("utf-8")]


def make_byte_model(**overrides):
    """A tiny random model (d_vocab 300) with :class:`ByteTokenizer`, so real text can be tokenized."""
    m = make_tiny_model(d_vocab=300, **overrides)
    m.tokenizer = ByteTokenizer()
    return m


def load_script(name: str):
    """Import ``scripts/<name>.py`` (not a package) as a module, for tests of the scripts."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
