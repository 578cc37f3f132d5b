"""A model given as a path to the real SmolLM2 GGUF loads through transformers' GGUF path, offline."""

import pytest
import torch

pytestmark = pytest.mark.integration


def test_gguf_path_loads_the_file():
    import tl_geometry as tg
    from tl_geometry.families.capacity.weights_reader import read_embedding

    path = tg.models.zoo_file()
    raw = tg.models.load(str(path), processing="none")  # a path string, never a hub name
    assert raw._tl_geometry_name == "smollm2-135m"  # the zoo's file is named by its model, not its stem
    assert raw._tl_geometry_path == str(path.resolve())
    assert (raw.cfg.n_layers, raw.cfg.d_model, raw.cfg.d_vocab) == (30, 576, 49152)
    # unprocessed W_E is the file's embedding, dequantized (reference: gguf's own dequantizer, streamed)
    torch.testing.assert_close(raw.W_E, read_embedding(path), rtol=0, atol=1e-6)
    tokens = tg.corpus.tokens(raw, "pydoc", n_seqs=1, seq_len=16, seed=0)
    assert torch.isfinite(raw(tokens)).all()
