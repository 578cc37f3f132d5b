"""Subspace PGA: pga_score against a slow scipy reference, known answers, bad inputs, the metric."""

import json
import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import pdist
from scipy.stats import rankdata, spearmanr

import tl_geometry as tg
from tl_geometry.metrics._spearman import RankedReference, make_pairs


# ----------------------------------------------------------------------------- references
def _ref_prepare(H, ccr):
    X = H.double().numpy()
    X = X - X.mean(0)
    if ccr:
        _, _, Vt = np.linalg.svd(X, full_matrices=False)
        X = X - X @ Vt[:ccr].T @ Vt[:ccr]
    return X


def _cos_dist_pairs(X, i, j):
    a, b = X[i], X[j]
    return 1 - (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def reference_pga(H, V, bases, ccr, pairs=None):
    """Obviously-correct PGA: pdist + spearmanr per subspace, a loop over the same null bases."""
    X = _ref_prepare(H, ccr)
    if pairs is None:
        dist = lambda Y: pdist(Y, "cosine")  # noqa: E731
    else:
        i, j = pairs.i.numpy(), pairs.j.numpy()
        dist = lambda Y: _cos_dist_pairs(Y, i, j)  # noqa: E731
    d_full = dist(X)
    rho = spearmanr(d_full, dist(X @ V.double().numpy()))[0]
    nulls = np.array([spearmanr(d_full, dist(X @ Q.double().numpy()))[0] for Q in bases])
    return rho, nulls, (rho - nulls.mean()) / nulls.std(ddof=1)


def _setup(N, d, k, n_null, seed=0):
    g = torch.Generator().manual_seed(seed)
    V = tg.readout_basis(torch.randn(d, 3 * d, generator=g), k)
    H = torch.randn(N, d, generator=g) * torch.linspace(0.3, 2.0, d)
    return H, V, tg.haar_bases(d, k, n_null, seed=seed + 1)


# ----------------------------------------------------------------------------- vs reference
@pytest.mark.parametrize(
    "N,d,k,ccr",
    [(40, 12, 3, 0), (50, 16, 4, 1), (64, 20, 5, 5), (300, 8, 2, 1)],  # 300 > one 256-row block
)
def test_pga_score_matches_scipy_reference(N, d, k, ccr):
    H, V, bases = _setup(N, d, k, 12)
    s = tg.pga_score(H, V, ccr=ccr, null_bases=bases)
    rho, nulls, z = reference_pga(H, V, bases, ccr)
    assert s.rho_read == pytest.approx(rho, abs=1e-6)
    np.testing.assert_allclose(s.null_rhos.numpy(), nulls, atol=1e-6)
    assert s.z == pytest.approx(z, abs=1e-6)
    assert s.null_mean == pytest.approx(nulls.mean(), abs=1e-6)
    assert s.null_std == pytest.approx(nulls.std(ddof=1), abs=1e-6)
    assert (s.n_points, s.n_pairs, s.n_null, s.ccr, s.k, s.d) == (N, N * (N - 1) // 2, 12, ccr, k, d)
    assert not s.pairs_subsampled


def test_subsampled_pairs_match_reference_on_the_same_pairs():
    H, V, bases = _setup(80, 10, 3, 8)
    s = tg.pga_score(H, V, ccr=1, null_bases=bases, max_pairs=1000, seed=3)
    assert s.pairs_subsampled and s.n_pairs == 1000
    pairs = make_pairs(80, 1000, 3)
    assert bool((pairs.i < pairs.j).all())
    rho, nulls, z = reference_pga(H, V, bases, 1, pairs)
    assert s.rho_read == pytest.approx(rho, abs=1e-6)
    assert s.z == pytest.approx(z, abs=1e-6)
    # same seed, same pairs; another seed, other pairs
    assert tg.pga_score(H, V, ccr=1, null_bases=bases, max_pairs=1000, seed=3).z == s.z
    assert tg.pga_score(H, V, ccr=1, null_bases=bases, max_pairs=1000, seed=4).z != s.z


@pytest.mark.parametrize("seed", range(5))
def test_rank_engine_handles_ties_like_scipy(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 30, (500,), generator=g).double()  # many ties in both vectors
    y = (x + torch.randint(-15, 15, (500,), generator=g)).double()
    ref = RankedReference.from_values(x)
    assert ref.spearman(y) == pytest.approx(spearmanr(x.numpy(), y.numpy())[0], abs=1e-12)
    assert ref.ss == pytest.approx(((rankdata(x.numpy()) - 250.5) ** 2).sum())
    # no ties in y: the fast path
    y2 = torch.randn(500, generator=g, dtype=torch.float64)
    assert ref.spearman(y2) == pytest.approx(spearmanr(x.numpy(), y2.numpy())[0], abs=1e-12)
    # negative values and -0.0 / +0.0 compare equal
    y3 = torch.tensor([0.0, -0.0, -1.5, 2.0, -1.5] * 100, dtype=torch.float64)
    assert ref.spearman(y3) == pytest.approx(spearmanr(x.numpy(), y3.numpy())[0], abs=1e-12)


def test_default_null_bases_are_seeded():
    H, V, _ = _setup(30, 10, 3, 2)
    a = tg.pga_score(H, V, n_null=10, seed=5)
    b = tg.pga_score(H, V, n_null=10, seed=5, null_bases=tg.haar_bases(10, 3, 10, seed=5))
    assert a.z == b.z
    assert tg.pga_score(H, V, n_null=10, seed=6).z != a.z


def test_profile_equals_separate_scores():
    H, V, bases = _setup(40, 12, 3, 6)
    prof = tg.pga_profile(H, V, ccrs=(0, 1, 5), null_bases=bases)
    for c in (0, 1, 5):
        assert prof[c].z == pytest.approx(tg.pga_score(H, V, ccr=c, null_bases=bases).z, abs=1e-12)


def test_layer_equals_profile_and_pc1_overlap():
    """pga_layer shares one SVD between the profile and the PC1 overlap: the same numbers, exactly."""
    H, V, bases = _setup(40, 12, 3, 6)
    prof, pc = tg.pga_layer(H, V, ccrs=(0, 1, 5), null_bases=bases)
    ref = tg.pga_profile(H, V, ccrs=(0, 1, 5), null_bases=bases)
    assert {c: s.to_dict() for c, s in prof.items()} == {c: s.to_dict() for c, s in ref.items()}
    assert pc == tg.pc1_overlap(H, V)


# ----------------------------------------------------------------------------- known answers
def test_inside_readout_gives_large_positive_z():
    g = torch.Generator().manual_seed(0)
    V = tg.readout_basis(torch.randn(32, 80, generator=g), 8)
    H = torch.randn(80, 8, generator=g) @ V.T + 0.01 * torch.randn(80, 32, generator=g)
    s = tg.pga_score(H, V, n_null=30, ccr=0)
    assert s.rho_read > 0.99 and s.rho_read > float(s.null_rhos.max())
    assert s.z > 5


def test_orthogonal_complement_gives_strongly_negative_z():
    g = torch.Generator().manual_seed(0)
    V = tg.readout_basis(torch.randn(32, 80, generator=g), 8)
    P_perp = torch.eye(32) - V @ V.T
    H = torch.randn(80, 32, generator=g) @ P_perp + 1e-3 * torch.randn(80, 32, generator=g)
    s = tg.pga_score(H, V, n_null=30, ccr=0)
    assert abs(s.rho_read) < 0.2 and s.rho_read < float(s.null_rhos.min())
    assert s.z < -10


def test_isotropic_gaussian_gives_small_z_on_average():
    zs = []
    for seed in range(8):
        g = torch.Generator().manual_seed(100 + seed)
        V = tg.readout_basis(torch.randn(16, 40, generator=g), 4)
        zs.append(tg.pga_score(torch.randn(60, 16, generator=g), V, n_null=20, ccr=0, seed=seed).z)
    assert abs(float(np.mean(zs))) < 1.0
    assert float(np.std(zs)) < 3.0


# ----------------------------------------------------------------------------- bases
def test_readout_basis_spans_top_left_singular_vectors():
    g = torch.Generator().manual_seed(0)
    W = torch.randn(12, 50, generator=g)
    V = tg.readout_basis(W, 5)
    U, _, _ = np.linalg.svd(W.double().numpy(), full_matrices=False)
    np.testing.assert_allclose(V.double().numpy() @ V.double().numpy().T, U[:, :5] @ U[:, :5].T, atol=1e-5)
    assert V.dtype == torch.float32
    assert tg.readout_basis(W.double(), 5).dtype == torch.float64


def test_haar_bases_orthonormal_and_prefix_stable():
    B = tg.haar_bases(10, 4, 6, seed=2)
    np.testing.assert_allclose((B.transpose(1, 2) @ B).numpy(), np.broadcast_to(np.eye(4), (6, 4, 4)), atol=1e-12)
    assert torch.equal(tg.haar_bases(10, 4, 3, seed=2), B[:3])
    # Haar: the average projector over many bases is (k/d)·I
    P = tg.haar_bases(6, 2, 600, seed=0)
    np.testing.assert_allclose((P @ P.transpose(1, 2)).mean(0).numpy(), np.eye(6) * 2 / 6, atol=0.05)


def test_pc1_overlap_known_answers_and_reference():
    g = torch.Generator().manual_seed(0)
    V = tg.readout_basis(torch.randn(16, 40, generator=g), 4)
    inside = V[:, 0]
    H = 10 * torch.randn(200, 1, generator=g) * inside + torch.randn(200, 16, generator=g)
    pc = tg.pc1_overlap(H, V)
    assert pc.overlap > 0.95 and pc.expected == 4 / 16 and pc.ratio == pytest.approx(pc.overlap * 4)
    X = H.double().numpy()
    evals, evecs = np.linalg.eigh(np.cov(X.T))
    p1 = evecs[:, -1]
    assert pc.overlap == pytest.approx(float(((V.double().numpy().T @ p1) ** 2).sum()), abs=1e-9)
    assert pc.explained_variance == pytest.approx(evals[-1] / evals.sum(), abs=1e-9)
    outside = (torch.eye(16) - V @ V.T)[:, 0]
    H2 = 10 * torch.randn(200, 1, generator=g) * outside / outside.norm() + torch.randn(200, 16, generator=g)
    assert tg.pc1_overlap(H2, V).overlap < 0.05


def test_results_serialize():
    H, V, bases = _setup(20, 8, 2, 4)
    d = tg.pga_score(H, V, null_bases=bases).to_dict()
    assert len(d["null_rhos"]) == 4 and d["n_null"] == 4
    json.dumps(d)
    json.dumps(tg.pc1_overlap(H, V).to_dict())


# ----------------------------------------------------------------------------- bad input
def test_bad_inputs():
    H, V, bases = _setup(20, 8, 2, 4)
    with pytest.raises(ValueError, match="at least 3 points"):
        tg.pga_score(H[:2], V)
    with pytest.raises(ValueError, match="2-D"):
        tg.pga_score(H[0], V)
    bad = H.clone()
    bad[3, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN or inf"):
        tg.pga_score(bad, V)
    bad[3, 1] = float("inf")
    with pytest.raises(ValueError, match="NaN or inf"):
        tg.pga_score(bad, V)
    with pytest.raises(ValueError, match="does not match"):
        tg.pga_score(H[:, :6], V)
    with pytest.raises(ValueError, match="k must satisfy"):
        tg.pga_score(H, torch.eye(8))
    with pytest.raises(ValueError, match="k must satisfy"):
        tg.readout_basis(torch.randn(8, 30), 8)
    with pytest.raises(ValueError, match="2-D"):
        tg.readout_basis(torch.randn(8), 2)
    with pytest.raises(ValueError, match="constant"):
        tg.pga_score(torch.ones(10, 8) * 3.0, V)
    with pytest.raises(ValueError, match="null_bases must have shape"):
        tg.pga_score(H, V, null_bases=bases[:, :5])
    with pytest.raises(ValueError, match="orthonormal columns"):
        tg.pga_score(H, 2 * V)
    with pytest.raises(ValueError, match="null_bases must be orthonormal"):
        tg.pga_score(H, V, null_bases=torch.randn(4, 8, 2))
    with pytest.raises(ValueError, match="n_null must be an integer >= 2"):
        tg.pga_score(H, V, n_null=1)
    with pytest.raises(ValueError, match="zero standard deviation"):
        tg.pga_score(H, V, null_bases=bases[:1].repeat(5, 1, 1))
    with pytest.raises(ValueError, match="removes all variance"):
        tg.pga_score(torch.randn(10, 1) * torch.randn(1, 8), V, ccr=1)
    with pytest.raises(ValueError, match="non-negative"):
        tg.pga_profile(H, V, ccrs=(-1,))


# ----------------------------------------------------------------------------- registered metric
def test_pga_metric_on_tiny_model(any_tiny_model, tiny_tokens):
    model = any_tiny_model
    hooks = tg.capture.resid_hooks(model, "post")
    r = tg.pga(model, tiny_tokens, k=6, n_null=8, ccr=[0, 1], max_points=50, seed=1, progress=False)
    assert {"pga.z", "pga.rho_read", "pga.pc1_overlap"} <= r.metrics
    assert len(r.filter("pga.z")) == 2 * len(hooks)
    # the same numbers as the pure function on the captured activations
    cap = tg.capture.collect(model, tiny_tokens, hooks, max_points=50, seed=1, progress=False)
    V = tg.readout_basis(tg.capture.weight(model, "W_U"), 6)
    bases = tg.haar_bases(model.cfg.d_model, 6, 8, seed=1)
    for layer, h in enumerate(hooks):
        s = tg.pga_score(cap.acts[h], V, ccr=1, null_bases=bases, seed=1)
        row = [x for x in r.filter("pga.z", hook=h).rows if x.extras["ccr"] == 1][0]
        assert row.layer == layer
        assert row.value == pytest.approx(s.z, abs=1e-9)
        assert row.extras["n_points"] == 50 and row.extras["n_null"] == 8 and row.extras["k"] == 6
        assert r.value("pga.pc1_overlap", hook=h) == pytest.approx(tg.pc1_overlap(cap.acts[h], V).overlap)
    assert math.isfinite(r.filter("pga.pc1_overlap").rows[0].extras["expected"])
    tg.GeometryReport.from_json(r.to_json())  # JSON round trip


def test_pga_metric_bad_arguments(tiny_model, tiny_tokens):
    with pytest.raises(ValueError, match="k must satisfy 1 <= k < d_model=32"):
        tg.pga(tiny_model, tiny_tokens, k=32, progress=False)
    with pytest.raises(ValueError, match="ccr must be"):
        tg.pga(tiny_model, tiny_tokens, k=4, ccr=[-1], progress=False)
    with pytest.raises(ValueError, match="unknown hook"):
        tg.pga(tiny_model, tiny_tokens, k=4, hooks=["blocks.9.hook_resid_post"], progress=False)


def test_pga_is_registered_and_runs_through_analyze(tiny_model, tiny_tokens):
    assert "pga" in tg.list_metrics() and "spectral" in tg.list_metrics()
    r = tg.analyze(
        tiny_model,
        tiny_tokens,
        metrics=["pga"],
        options={"pga": {"k": 4, "n_null": 4, "max_points": 30, "ccr": 1}},  # the default is the report's CCR 0/1/5
        progress=False,
    )
    assert len(r.filter("pga.z")) == tiny_model.cfg.n_layers


# ----------------------------------------------------------------------------- CLI
def test_cli_pga(monkeypatch, tmp_path, capsys, tiny_model, tiny_tokens):
    from tl_geometry import cli

    asked = []
    monkeypatch.setattr(
        tg.models, "load", lambda name, device="cpu", processing="tl": asked.append(processing) or tiny_model
    )
    monkeypatch.setattr(tg.corpus, "tokens", lambda model, source, **kw: tiny_tokens)
    out = tmp_path / "r.json"
    rc = cli.main(
        [
            "pga",
            "--k",
            "4",
            "--n-null",
            "4",
            "--ccr",
            "0",
            "1",
            "--max-points",
            "40",
            "--layers",
            "0",
            "2",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "z CCR-0" in text and "blocks.2.hook_resid_post" in text
    r = tg.GeometryReport.from_json(out)
    assert len(r.filter("pga.z")) == 4 and len(r.filter("spectral.rankme")) == 2
    assert asked == ["tl"] and {row.extras["preset"] for row in r.filter("pga.z").rows} == {"library"}
    assert {row.extras["stderr_method"].split(":")[0] for row in r.filter("pga.z").rows} == {"influence"}
    # --stderr none: the same z, no errors, recorded
    args = ["pga", "--k", "4", "--n-null", "4", "--ccr", "0", "1", "--max-points", "40", "--layers", "0", "2"]
    assert cli.main([*args, "--stderr", "none", "--out", str(tmp_path / "none.json")]) == 0
    r0 = tg.GeometryReport.from_json(tmp_path / "none.json")
    assert [row.value for row in r0.filter("pga.z").rows] == [row.value for row in r.filter("pga.z").rows]
    assert {row.extras["stderr_method"] for row in r0.filter("pga.z").rows} == {"none"}
    assert r0.provenance["pga"]["stderr"] == "none"
    # --refit-nulls: passed on and recorded (the default is the library's); a bad one refused before the load
    assert r.provenance["pga"]["refit_nulls"] == tg.metrics.pga.DEFAULT_REFIT_NULLS
    assert cli.main([*args, "--refit-nulls", "2", "--out", str(tmp_path / "r2.json")]) == 0
    r2 = tg.GeometryReport.from_json(tmp_path / "r2.json")
    assert r2.provenance["pga"]["refit_nulls"] == 2 and {x.extras["refit_nulls"] for x in r2.filter("pga.z").rows} == {
        2
    }
    capsys.readouterr()
    asked.clear()
    assert cli.main([*args, "--refit-nulls", "-1", "--out", str(tmp_path / "bad.json")]) == 2
    assert "--refit-nulls must be an integer >= 0, got -1" in capsys.readouterr().err and asked == []
    capsys.readouterr()
    # the paper preset loads the unprocessed model and uses Hugging Face's hidden_states hooks
    with pytest.warns(UserWarning, match="processing of this HookedTransformer is unknown"):
        rc = cli.main(
            [
                "pga",
                "--preset",
                "paper",
                "--k",
                "4",
                "--n-null",
                "4",
                "--ccr",
                "1",
                "--max-points",
                "40",
                "--out",
                str(out),
                "--force",  # replaces the first run's file (refused without it)
            ]
        )
    assert rc == 0 and asked[-1] == "none"
    r = tg.GeometryReport.from_json(out)
    assert [row.hook for row in r.filter("pga.z").rows] == tg.capture.hidden_state_hooks(tiny_model)
    assert r.provenance["preset"] == "paper"
    assert "preset 'paper'" in capsys.readouterr().out
    assert cli.main(["pga", "--k", "32"]) == 2
    assert "k must satisfy" in capsys.readouterr().err
    assert cli.main(["pga", "--n-null", "1"]) == 2
    with pytest.raises(SystemExit) as exc:  # argparse's choices
        cli.main(["pga", "--stderr", "bootstrap"])
    assert exc.value.code == 2 and "invalid choice: 'bootstrap'" in capsys.readouterr().err
    assert cli.main(["pga", "--layers", "0", "--hooks", "blocks.0.hook_resid_post"]) == 2
