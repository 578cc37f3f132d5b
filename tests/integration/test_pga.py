"""Subspace PGA, spectral metrics and convergence on SmolLM2-135M with pydoc text.

The full 30-layer profile (N=2048, 100 nulls, CCR 0/1/5) is ``benchmarks/pga_profile_smollm2.py``;
here six layers, 512 points and 20 nulls keep the test short.
"""

import math
import warnings

import pytest
import torch

import tl_geometry as tg

pytestmark = pytest.mark.integration

LAYERS = [0, 6, 12, 18, 24, 29]
OPTS = dict(k=100, n_null=20, ccr=[0, 1, 5], max_points=512, seed=0)


@pytest.fixture(scope="module")
def random_smollm2(smollm2):
    """A model of SmolLM2's config with TransformerLens's random initialisation."""
    import copy

    from transformer_lens import HookedTransformer

    cfg = copy.deepcopy(smollm2.cfg)
    cfg.init_weights = True  # pretrained configs say False: the weights would be uninitialised memory
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        model = HookedTransformer(cfg).eval()
    model.set_tokenizer(smollm2.tokenizer)
    return model


@pytest.fixture(scope="module")
def profiles(smollm2, random_smollm2, pydoc_tokens):
    hooks = tg.capture.resid_hooks(smollm2, "post", LAYERS)
    return {
        "trained": tg.pga(smollm2, pydoc_tokens, hooks=hooks, progress=False, **OPTS),
        "random": tg.pga(random_smollm2, pydoc_tokens, hooks=hooks, progress=False, **OPTS),
    }


def test_profile_shape_and_agreement_with_pure_function(smollm2, pydoc_tokens, profiles):
    r = profiles["trained"]
    assert len(r.filter("pga.z")) == len(LAYERS) * 3
    assert r.provenance["weight_processing"]  # W_U depends on fold_ln / center_unembed: recorded
    for row in r.filter("pga.z").rows:
        assert math.isfinite(row.value) and row.extras["n_points"] == 512 and not row.extras["pairs_subsampled"]
    # one layer recomputed from the captured activations with the pure functions
    h = "blocks.12.hook_resid_post"
    cap = tg.capture.collect(smollm2, pydoc_tokens, [h], max_points=512, seed=0, progress=False)
    V = tg.readout_basis(tg.capture.weight(smollm2, "W_U"), 100)
    s = tg.pga_score(cap.acts[h], V, ccr=5, null_bases=tg.haar_bases(576, 100, 20, seed=0))
    assert r.value("pga.z", hook=h, ccr=5) == pytest.approx(s.z, abs=1e-6)


def test_trained_profile_differs_from_random_init(profiles):
    """The trained model's readout subspace is special somewhere; the random model's is not."""
    z = {kind: {(row.layer, row.extras["ccr"]): row.value for row in rep.filter("pga.z").rows}
         for kind, rep in profiles.items()}
    trained_max = max(abs(v) for v in z["trained"].values())
    random_mean = sum(abs(v) for v in z["random"].values()) / len(z["random"])
    assert trained_max > 5
    assert trained_max > 2 * random_mean
    # PC1 overlap: random init sits near k/d
    exp = 100 / 576
    for row in profiles["random"].filter("pga.pc1_overlap").rows:
        assert row.extras["expected"] == pytest.approx(exp)


def test_spectral_on_smollm2(smollm2, pydoc_tokens):
    hooks = tg.capture.resid_hooks(smollm2, "post", [0, 15, 29])
    r = tg.spectral(smollm2, pydoc_tokens, hooks=hooks, progress=False)
    for h in hooks:
        rankme = r.value("spectral.rankme", hook=h)
        assert 1.0 < rankme <= 576
        assert 0 < r.value("spectral.isotropy", hook=h) <= 1
        assert r.value("spectral.condition_number", hook=h) >= 1
        assert r.filter("spectral.rankme", hook=h).rows[0].extras["n_points"] == 8 * 127


def test_convergence_trained_vs_random(smollm2, random_smollm2):
    from tl_geometry import convergence as cv

    texts = tg.corpus.pydoc_texts()[:24]
    r = cv.model_convergence({"trained": smollm2, "random": random_smollm2}, texts, k=50, n_null=10, max_len=64)
    assert len(r.filter("convergence.z")) == 2  # mean and last pooling
    for row in r.filter("convergence.rho_full").rows:
        assert -1 <= row.value <= 1


def test_cli_pga_on_smollm2(monkeypatch, smollm2, tmp_path, capsys):
    from tl_geometry import cli

    monkeypatch.setattr(tg.models, "load", lambda name, device="cpu": smollm2)
    rc = cli.main(["pga", "--layers", "3", "20", "--n-seqs", "4", "--seq-len", "64", "--n-null", "5", "--ccr", "0", "5",
                   "--max-points", "200", "--out", str(tmp_path / "r.json")])
    assert rc == 0
    assert "blocks.20.hook_resid_post" in capsys.readouterr().out
    assert len(tg.GeometryReport.from_json(tmp_path / "r.json").filter("pga.z")) == 4
