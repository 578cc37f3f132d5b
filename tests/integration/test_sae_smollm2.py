"""tl_geometry.families.sae on the offline SmolLM2-135M: measured ε, local SAEs on its hooks, bad input."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

pytestmark = pytest.mark.integration
pytest.importorskip("sae_lens")

from tl_geometry import capacity, embedding_epsilon  # noqa: E402
from tl_geometry.families import sae as S  # noqa: E402


def make_sae(d_in, d_sae, hook, seed=0):
    from sae_lens import StandardSAE, StandardSAEConfig
    from sae_lens.saes.sae import SAEMetadata

    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return StandardSAE(StandardSAEConfig(d_in=d_in, d_sae=d_sae, metadata=SAEMetadata(hook_name=hook)))


@pytest.fixture(scope="module")
def smollm2_eps(smollm2):
    return embedding_epsilon(smollm2, progress=False)


def test_no_directory_saes_for_smollm2(smollm2):
    assert S.widths(smollm2, config="none") == []


def test_compare_smollm2_with_local_saes(smollm2, smollm2_eps, tmp_path):
    a = make_sae(576, 2048, "blocks.10.hook_resid_post", seed=1)
    b = make_sae(576, 4608, "blocks.29.hook_mlp_out", seed=2)
    b.save_model(tmp_path / "b")
    rep = S.compare(smollm2, saes=[a, tmp_path / "b"])
    eps = rep.value("epsilon.W_E")
    assert eps == pytest.approx(smollm2_eps.epsilon, rel=1e-9)
    assert rep.filter("epsilon.W_E").rows[0].extras["epsilon_source"] == "measured"
    assert rep.provenance["d_model"] == 576 and rep.provenance["d_vocab"] == 49152
    vacuous = eps >= 0.1  # no count outside Class 2 (the paper preset)
    for row in rep.filter("sae.capacity_ratio").rows:
        if vacuous:
            assert math.isnan(row.value) and row.extras["verdict"] == "indeterminate"
        else:
            d_sae = {"blocks.10.hook_resid_post": 2048, "blocks.29.hook_mlp_out": 4608}[row.hook]
            assert row.value == pytest.approx(d_sae / capacity(576, eps, form="full"))
    assert {r.layer for r in rep.filter("sae.d_sae").rows} == {10, 29}
    # SmolLM2 ties W_U to W_E (its GGUF has no output.weight): read from the loaded model, not the file
    from tl_geometry.families.capacity.weights_reader import find_embedding
    from tl_geometry.models import zoo_file

    assert smollm2._tl_geometry_tied is True is find_embedding(zoo_file("smollm2-135m"), matrix="unembed").tied
    shared = rep.filter("sae.shared_ratio").rows[0].extras
    assert shared["tied"] is True and "loaded Hugging Face model" in shared["tied_source"]
    # decoder ε of a random 2048 × 576 decoder: ≈ 2/√576 (random packing), few pairs above the host ε
    de = S.decoder_epsilon(a, host=smollm2)
    assert de.epsilon == pytest.approx(2 / math.sqrt(576), abs=0.01)
    assert de.threshold == pytest.approx(eps, rel=1e-9)
    assert rep.value("sae.frac_above_host_epsilon", hook="blocks.10.hook_resid_post") == pytest.approx(de.frac_above)


def test_bad_saes_on_smollm2(smollm2):
    with pytest.raises(
        ValueError, match=r"SAE hook 'blocks.30.hook_resid_post' is not a hook of the model \(n_layers=30\)"
    ):
        S.compare(smollm2, saes=[make_sae(576, 64, "blocks.30.hook_resid_post")])
    with pytest.raises(ValueError, match=r"SAE d_in = 768 does not match the model's d_model = 576"):
        S.decoder_epsilon(make_sae(768, 64, "blocks.3.hook_resid_post"), host=smollm2)


@pytest.mark.slow
def test_sae_trained_by_sae_lens_end_to_end(smollm2, tmp_path, monkeypatch):
    """Train on SmolLM2's early residual stream with sae_lens, publish to a local hub cache, load it
    back with SAE.from_pretrained (offline) and compare it with the capacity bound."""
    from huggingface_hub import constants

    import tl_geometry as tg
    from tl_geometry.families.sae import training as sae_training

    hook = "blocks.3.hook_resid_post"
    tokens = tg.corpus.tokens(smollm2, "shakespeare", n_seqs=256, seq_len=128, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = sae_training.train_sae(
            smollm2,
            tokens,
            hook=hook,
            out=tmp_path / "sae",
            d_sae=1152,
            k=16,
            training_tokens=32_768,
            batch_tokens=512,
            lr=1e-3,
        )
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
        repo, sae_id = sae_training.publish_to_cache(out, "local/smollm2-135m-saes")
        sae = S.load(repo, sae_id)
    assert (int(sae.cfg.d_in), int(sae.cfg.d_sae)) == (576, 1152)
    # it learned something: held-out (pydoc) reconstruction beats the mean
    held = tg.corpus.tokens(smollm2, "pydoc", n_seqs=4, seq_len=128, seed=1)
    acts = tg.capture.collect(smollm2, held, [hook], max_points=None, progress=False).acts[hook]
    with torch.no_grad():
        rec = sae.decode(sae.encode(acts))
    assert float(((rec - acts) ** 2).sum() / ((acts - acts.mean(0)) ** 2).sum()) < 0.9
    rep = S.compare(smollm2, saes=[f"{repo}:{sae_id}"])
    assert rep.value("sae.d_sae", hook=hook) == 1152
    # decoder ε against a slow all-pairs reference
    W = torch.nn.functional.normalize(sae.W_dec.detach().double(), dim=1)
    cos = (W @ W.T)[~torch.eye(W.shape[0], dtype=torch.bool)]
    assert rep.value("sae.decoder_epsilon", hook=hook) == pytest.approx(
        float(cos.mean() + 2 * cos.std(unbiased=False)), rel=1e-6
    )
