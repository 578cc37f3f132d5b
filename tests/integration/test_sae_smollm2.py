"""tl_geometry.sae on the offline SmolLM2-135M: measured ε, local SAEs on its hooks, bad input."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

pytestmark = pytest.mark.integration
pytest.importorskip("sae_lens")

from tl_geometry import sae as S  # noqa: E402
from tl_geometry.metrics.capacity import capacity, embedding_epsilon  # noqa: E402


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
    vacuous = eps > 0.2
    for row in rep.filter("sae.capacity_ratio").rows:
        if vacuous:
            assert math.isnan(row.value) and row.extras["verdict"] == "bound vacuous"
        else:
            d_sae = {"blocks.10.hook_resid_post": 2048, "blocks.29.hook_mlp_out": 4608}[row.hook]
            assert row.value == pytest.approx(d_sae / capacity(576, eps, form="full"))
    assert {r.layer for r in rep.filter("sae.d_sae").rows} == {10, 29}
    # decoder ε of a random 2048 × 576 decoder: ≈ 2/√576 (random packing), few pairs above the host ε
    de = S.decoder_epsilon(a, host=smollm2)
    assert de.epsilon == pytest.approx(2 / math.sqrt(576), abs=0.01)
    assert de.threshold == pytest.approx(eps, rel=1e-9)
    assert rep.value("sae.frac_above_host_epsilon", hook="blocks.10.hook_resid_post") == pytest.approx(de.frac_above)


def test_bad_saes_on_smollm2(smollm2):
    with pytest.raises(ValueError, match=r"SAE hook 'blocks.30.hook_resid_post' is not a hook of the model \(n_layers=30\)"):
        S.compare(smollm2, saes=[make_sae(576, 64, "blocks.30.hook_resid_post")])
    with pytest.raises(ValueError, match=r"SAE d_in = 768 does not match the model's d_model = 576"):
        S.decoder_epsilon(make_sae(768, 64, "blocks.3.hook_resid_post"), host=smollm2)
