"""Toy double descent: data, closed-form AGOP, the interior test-loss peak, resume."""

import dataclasses

import pytest
import torch


pytestmark = pytest.mark.usefixtures("one_thread")  # many small passes: see conftest

from tl_geometry.experiments import toy_superposition as toy


def test_toy_data_sparsity_and_norm():
    g = torch.Generator().manual_seed(0)
    X = toy.toy_data(4000, 50, 0.9, generator=g)
    nz = (X > 0).float().mean()
    assert abs(float(nz) - 0.1) < 0.01
    norms = X.norm(dim=1)
    assert torch.allclose(norms[norms > 0], torch.ones_like(norms[norms > 0]), atol=1e-6)
    with pytest.raises(ValueError, match="at least one sample"):
        toy.toy_data(0, 5, 0.5, generator=g)


def test_closed_form_agop_equals_autograd_reference():
    g = torch.Generator().manual_seed(1)
    W, b = torch.randn(3, 7, generator=g, dtype=torch.float64), torch.randn(7, generator=g, dtype=torch.float64) * 0.3
    X = toy.toy_data(20, 7, 0.5, generator=g).double()
    f = lambda x: torch.relu(x @ W.T @ W + b)  # noqa: E731
    ref = sum(J @ J.T for J in (torch.autograd.functional.jacobian(f, x) for x in X)) / len(X)  # output space E[J Jᵀ]
    torch.testing.assert_close(toy.toy_agop(W, b, X), ref)


@pytest.mark.parametrize("kw, match", [(dict(n_features=1), "n_features"), (dict(sparsity=1.0), "sparsity"),
                                       (dict(steps=0), "positive"), (dict(warmup=1.0), "warmup")])
def test_toy_config_bad(kw, match):
    with pytest.raises(ValueError, match=match):
        toy.ToyConfig(**kw)


def test_double_descent_interior_peak(tmp_path):
    """CPU-scaled paper setting (100 features → 2, sparsity 0.95): the test loss peaks at an
    interior training-set size (T = 64 with seed 0) above both the smallest and largest T."""
    sizes = (4, 16, 64, 256, 1024)
    recs = toy.toy_sweep(sizes, toy.CPU_TOY, results=tmp_path / "toy.jsonl", progress=False)
    loss = [r["test_loss"] for r in recs]
    peak = max(range(len(sizes)), key=loss.__getitem__)
    assert 0 < peak < len(sizes) - 1, loss
    assert loss[peak] > 1.5 * max(loss[0], loss[-1]), loss
    assert recs[0]["train_loss"] < 0.05 < recs[-1]["train_loss"]  # memorizes few points, not many
    assert all(0 <= r["aofe_ratio"] < 1 for r in recs)
    toy.plot_toy(recs, tmp_path / "toy.png")
    assert (tmp_path / "toy.png").stat().st_size > 1000


def test_toy_sweep_resumes(tmp_path, monkeypatch):
    cfg = dataclasses.replace(toy.CPU_TOY, steps=5, n_test=50, n_features=10)
    path = tmp_path / "toy.jsonl"
    real, calls, crash = toy.train_toy, [], [True]

    def crashing(n, c):
        calls.append(n)
        if crash[0] and len(calls) == 2:
            raise RuntimeError("simulated kill")
        return real(n, c)

    monkeypatch.setattr(toy, "train_toy", crashing)
    with pytest.raises(RuntimeError, match="simulated kill"):
        toy.toy_sweep((3, 5, 7), cfg, results=path, progress=False)
    calls.clear()
    crash[0] = False
    recs = toy.toy_sweep((3, 5, 7), cfg, results=path, progress=False)
    assert [r["n_train"] for r in recs] == [3, 5, 7] and calls == [5, 7]
    with pytest.raises(ValueError, match="positive integers"):
        toy.toy_sweep((), cfg)
