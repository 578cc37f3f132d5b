"""Convergence, pooling, probes and trajectories (tl_geometry.families.pga.convergence) on tiny models."""

import numpy as np
import pytest
import torch
from scipy.spatial.distance import pdist
from scipy.stats import spearmanr

import tl_geometry as tg
from tl_geometry.families.pga import convergence as cv


# ----------------------------------------------------------------------------- pooling
@pytest.mark.parametrize("pooling", ["mean", "last"])
def test_pooled_matches_cache(any_tiny_model, tiny_tokens, pooling):
    model = any_tiny_model
    hooks = tg.capture.resid_hooks(model, "post", [0, 2])
    mask = torch.ones_like(tiny_tokens)
    mask[1, 10:] = 0  # padding at the end of sequence 1
    mask[4, 3:] = 0
    out = cv.pooled(model, tiny_tokens, hooks, pooling=pooling, attention_mask=mask, batch_size=4)
    _, cache = model.run_with_cache(tiny_tokens, attention_mask=mask)
    for h in hooks:
        acts = cache[h]
        for b in range(tiny_tokens.shape[0]):
            n = int(mask[b].sum())
            ref = acts[b, :n].mean(0) if pooling == "mean" else acts[b, n - 1]
            np.testing.assert_allclose(out[h][b].numpy(), ref.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_pooled_bad_inputs(tiny_model, tiny_tokens):
    hooks = ["blocks.0.hook_resid_post"]
    with pytest.raises(ValueError, match="pooling must be one of"):
        cv.pooled(tiny_model, tiny_tokens, hooks, pooling="max")
    mask = torch.ones_like(tiny_tokens)
    mask[2] = 0
    with pytest.raises(ValueError, match="no tokens"):
        cv.pooled(tiny_model, tiny_tokens, hooks, attention_mask=mask)


# ----------------------------------------------------------------------------- convergence
def _ref_convergence(A, B, Va, Vb, Qa, Qb):
    A = A.double().numpy() - A.double().numpy().mean(0)
    B = B.double().numpy() - B.double().numpy().mean(0)
    rho = lambda X, Y: spearmanr(pdist(X, "cosine"), pdist(Y, "cosine"))[0]  # noqa: E731
    full = rho(A, B)
    read = rho(A @ Va.double().numpy(), B @ Vb.double().numpy())
    nulls = np.array([rho(A @ Qa[i].numpy(), B @ Qb[i].numpy()) for i in range(len(Qa))])
    return full, read, (read - nulls.mean()) / nulls.std(ddof=1)


def test_convergence_matches_reference():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(30, 12, generator=g)
    B = torch.cat([A[:, :6], torch.randn(30, 10, generator=g)], 1) @ torch.randn(16, 16, generator=g)
    Va, Vb = (
        tg.readout_basis(torch.randn(12, 40, generator=g), 3),
        tg.readout_basis(torch.randn(16, 40, generator=g), 3),
    )
    s = cv.convergence_score(A, B, Va, Vb, n_null=10, seed=4)
    full, read, z = _ref_convergence(A, B, Va, Vb, tg.haar_bases(12, 3, 10, seed=4), tg.haar_bases(16, 3, 10, seed=5))
    assert s.rho_full == pytest.approx(full, abs=1e-9)
    assert s.rho_readout == pytest.approx(read, abs=1e-9)
    assert s.z == pytest.approx(z, abs=1e-6)


def test_convergence_known_answer_rotation():
    g = torch.Generator().manual_seed(1)
    A = torch.randn(25, 8, generator=g)
    R, _ = torch.linalg.qr(torch.randn(8, 8, generator=g))
    V = tg.readout_basis(torch.randn(8, 30, generator=g), 3)
    s = cv.convergence_score(A, A @ R, V, R.T @ V, n_null=10)  # same texts, rotated space, matching readouts
    assert s.rho_full == pytest.approx(1.0) and s.rho_readout == pytest.approx(1.0)
    assert s.z > 2


def test_convergence_bad_inputs():
    A, V = torch.randn(10, 6), tg.readout_basis(torch.randn(6, 20), 2)
    with pytest.raises(ValueError, match="one row per text"):
        cv.convergence_score(A, A[:9], V, V)
    with pytest.raises(ValueError, match="at least 3 texts"):
        cv.convergence_score(A[:2], A[:2], V, V)
    with pytest.raises(ValueError, match="do not match"):
        cv.convergence_score(A, A[:, :5], V, V)
    with pytest.raises(ValueError, match="constant"):
        cv.convergence_score(torch.ones(10, 6), A, V, V)
    with pytest.raises(ValueError, match="n_null must be"):
        cv.convergence_score(A, A, V, V, n_null=1)
    with pytest.raises(ValueError, match="NaN or inf"):
        cv.convergence_score(A * float("nan"), A, V, V)


# ----------------------------------------------------------------------------- probes
def test_linear_probe_known_answers():
    g = torch.Generator().manual_seed(0)
    y = torch.arange(80) % 2
    X = torch.randn(80, 5, generator=g) + 6.0 * y[:, None].float()
    r = cv.linear_probe(X, y.tolist(), seed=0)
    assert r.accuracy == 1.0 and r.n_test == 20 and r.n_classes == 2 and r.chance == 0.5
    noise = cv.linear_probe(torch.randn(400, 5, generator=g), (torch.arange(400) % 2).tolist(), seed=0)
    assert noise.accuracy < 0.7
    with pytest.raises(ValueError, match="at least 2 classes"):
        cv.linear_probe(X, [0] * 80)
    with pytest.raises(ValueError, match="one label per row"):
        cv.linear_probe(X, [0, 1] * 10)


def test_probe_accuracy_per_layer(tiny_model, tiny_tokens):
    labels = [int(t[1]) % 2 for t in tiny_tokens]
    r = cv.probe_accuracy(tiny_model, tiny_tokens.repeat(4, 1), labels * 4, pooling="last", test_size=0.5)
    assert len(r.filter("probe.accuracy")) == tiny_model.cfg.n_layers
    assert all(0.0 <= row.value <= 1.0 for row in r.rows)
    with pytest.raises(ValueError, match="one label per sequence"):
        cv.probe_accuracy(tiny_model, tiny_tokens, labels[:3])


# ----------------------------------------------------------------------------- trajectories
@pytest.mark.needs_hooked
def test_trajectory_table_resume_and_heatmap(tmp_path, tiny_tokens):
    from tests.helpers import make_tiny_model

    models = {"step0": make_tiny_model(seed=1), "step1": make_tiny_model(seed=2)}
    opts = dict(k=4, n_null=4, ccr=[0, 1], max_points=40)
    path = tmp_path / "traj.jsonl"
    r = cv.pga_trajectory(models, tiny_tokens, results=str(path), progress=False, **opts)
    df = r.to_pandas()
    z = df[df.metric == "pga.z"]
    assert sorted(z.checkpoint.unique()) == ["step0", "step1"] and len(z) == 2 * 3 * 2
    # the same rows as tg.pga on one model
    ref = tg.pga(models["step1"], tiny_tokens, progress=False, **opts)
    assert r.value("pga.z", hook="blocks.2.hook_resid_post", ccr=1, checkpoint="step1") == pytest.approx(
        ref.value("pga.z", hook="blocks.2.hook_resid_post", ccr=1)
    )

    def boom():
        raise AssertionError("finished checkpoints must not be reloaded")

    again = cv.pga_trajectory({"step0": boom, "step1": boom}, tiny_tokens, results=str(path), progress=False, **opts)
    assert [x.value for x in again.rows] == [x.value for x in r.rows]
    import matplotlib

    matplotlib.use("Agg")
    fig = cv.plot_trajectory(r, ccr=1)
    assert fig.axes
    with pytest.raises(ValueError, match="no rows with ccr=5"):
        cv.plot_trajectory(r, ccr=5)
    with pytest.raises(ValueError, match="checkpoint"):
        cv.plot_trajectory(ref)
