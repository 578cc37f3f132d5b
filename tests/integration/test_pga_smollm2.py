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
def profile(smollm2, pydoc_tokens):
    hooks = tg.capture.resid_hooks(smollm2, "post", LAYERS)
    return tg.pga(smollm2, pydoc_tokens, hooks=hooks, progress=False, **OPTS)


def test_profile_shape_and_agreement_with_pure_function(smollm2, pydoc_tokens, profile):
    r = profile
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


def test_profile_pattern_of_smollm2(profile):
    """What the full profile (benchmarks/pga_profile_smollm2.py) shows, at test size.

    SmolLM2-135M has no positive mid-layer z; its last layer is strongly negative (the readout
    subspace sees the final residual stream's distances worse than random subspaces), and PC1
    moves into the readout subspace between layers 6 and 12 (about 0.04 → 0.18, k/d = 0.174).
    """
    last = "blocks.29.hook_resid_post"
    assert profile.value("pga.z", hook=last, ccr=0) < -3
    assert profile.value("pga.z", hook=last, ccr=1) < -3
    pc1 = {row.layer: row.value for row in profile.filter("pga.pc1_overlap").rows}
    assert pc1[12] > 2 * pc1[6]
    assert pc1[6] < 100 / 576 < pc1[12] + 0.05


@pytest.fixture(scope="module")
def smollm2_raw():
    """SmolLM2-135M unprocessed (processing="none"): what the paper preset needs."""
    return tg.models.load("smollm2-135m", processing="none")


def test_processing_changes_only_the_readout_on_an_rmsnorm_model(smollm2, smollm2_raw, pydoc_tokens):
    assert tg.models.processing_name(smollm2_raw) == "none" and tg.models.processing_name(smollm2) == "tl"
    # TL's processed W_U is the raw one with the final RMSNorm weight folded in (fold_ln) and its
    # mean over the vocabulary removed (center_unembed)
    W, w = smollm2_raw.W_U.double(), smollm2_raw.ln_final.w.double()
    rebuilt = w[:, None] * W
    rebuilt = rebuilt - rebuilt.mean(1, keepdim=True)
    torch.testing.assert_close(rebuilt, smollm2.W_U.double(), atol=1e-5, rtol=1e-5)
    V_raw, V_tl = tg.readout_basis(smollm2_raw.W_U, 100), tg.readout_basis(smollm2.W_U, 100)
    assert float((V_raw.T @ V_tl).pow(2).sum() / 100) < 0.95  # processing moves the readout subspace
    # RMSNorm: no center_writing_weights, so the block outputs are the same tensors
    h = ["blocks.6.hook_resid_post"]
    a = tg.capture.collect(smollm2_raw, pydoc_tokens[:2], h, max_points=None, progress=False).acts[h[0]]
    b = tg.capture.collect(smollm2, pydoc_tokens[:2], h, max_points=None, progress=False).acts[h[0]]
    # equal up to float32 rounding of the folded weights, which grows with SmolLM2's massive
    # activations (|a| up to ~800) and with the CPU's kernels (a 0.05 element difference on
    # one CI machine, 2e-4 on another): compare each token's vector relative to its norm
    rel = (a - b).norm(dim=-1) / a.norm(dim=-1)
    assert float(rel.max()) < 1e-3, float(rel.max())
    # what centering the writing weights would have done is far outside that tolerance
    centered = a - a.mean(-1, keepdim=True)
    assert float(((centered - a).norm(dim=-1) / a.norm(dim=-1)).median()) > 1e-2


def test_paper_preset_on_smollm2(smollm2, smollm2_raw, pydoc_tokens):
    """The paper preset at test size: the final normalized state is strongly negative, and PC1 of
    layer 6 (the dominant direction) sits above chance in the raw readout but below it in the
    processed one (benchmarks/pga_profile_smollm2.py shows the whole profile)."""
    hooks = ["blocks.0.hook_resid_pre", "blocks.6.hook_resid_post", "unembed.hook_in"]
    assert set(hooks) <= set(tg.capture.hidden_state_hooks(smollm2_raw))
    opts = dict(hooks=hooks, k=100, n_null=20, ccr=[1], max_points=512, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the unprocessed model: no warning
        r = tg.pga(smollm2_raw, pydoc_tokens, preset="paper", **opts)
    assert {(row.extras["preset"], row.extras["processing"]) for row in r.rows} == {("paper", "none")}
    assert r.value("pga.z", hook="unembed.hook_in", ccr=1) < -3
    with pytest.warns(UserWarning, match="fold_ln"):
        rp = tg.pga(smollm2, pydoc_tokens, preset="paper", **opts)
    chance = 100 / 576
    assert r.value("pga.pc1_overlap", hook=hooks[1]) > chance > rp.value("pga.pc1_overlap", hook=hooks[1])


def test_spectral_on_smollm2(smollm2, pydoc_tokens):
    hooks = tg.capture.resid_hooks(smollm2, "post", [0, 15, 29])
    r = tg.spectral(smollm2, pydoc_tokens, hooks=hooks, progress=False)
    for h in hooks:
        rankme = r.value("spectral.rankme", hook=h)
        assert 1.0 < rankme <= 576
        assert 0 < r.value("spectral.isotropy", hook=h) <= 1
        assert r.value("spectral.condition_number", hook=h) >= 1
        assert r.filter("spectral.rankme", hook=h).rows[0].extras["n_points"] == 8 * 127


def test_convergence_between_layers(smollm2):
    """Two "models" (here two depths of SmolLM2) order the distances between 16 texts alike."""
    from tl_geometry.families.pga import convergence as cv

    texts = tg.corpus.pydoc_texts()[:16]
    hooks = {"layer20": "blocks.20.hook_resid_post", "layer22": "blocks.22.hook_resid_post"}
    r = cv.model_convergence(
        {"layer20": smollm2, "layer22": smollm2}, texts, hooks=hooks, k=50, n_null=10, max_len=32, pooling="mean"
    )
    assert len(r.filter("convergence.z")) == 1
    assert 0.5 < r.value("convergence.rho_full") <= 1


def test_cli_pga_on_smollm2(monkeypatch, smollm2, tmp_path, capsys):
    from tl_geometry import cli

    monkeypatch.setattr(tg.models, "load", lambda name, device="cpu", **kw: smollm2)
    rc = cli.main(
        [
            "pga",
            "--layers",
            "3",
            "20",
            "--n-seqs",
            "4",
            "--seq-len",
            "64",
            "--n-null",
            "5",
            "--ccr",
            "0",
            "5",
            "--max-points",
            "200",
            "--out",
            str(tmp_path / "r.json"),
        ]
    )
    assert rc == 0
    assert "blocks.20.hook_resid_post" in capsys.readouterr().out
    assert len(tg.GeometryReport.from_json(tmp_path / "r.json").filter("pga.z")) == 4
