"""Spectral metrics: dense numpy reference, streaming == one call, known spectra, bad input."""

import json

import numpy as np
import pytest
import torch

import tl_geometry as tg
from tl_geometry.metrics.spectral import StreamingCovariance, spectral_from_covariance


def reference_spectral(X, fit_range=None):
    """Dense numpy: covariance eigenvalues, kept above λ_max·1e-10, then the four formulas."""
    X = np.asarray(X, dtype=np.float64)
    lam = np.sort(np.linalg.eigvalsh(np.cov(X.T)))[::-1]
    lam = lam[lam > lam[0] * 1e-10]
    p = lam / lam.sum()
    rankme = np.exp(-(p * np.log(p)).sum())
    lo, hi = fit_range or (1, len(lam) + 1)
    slope = np.polyfit(np.log(np.arange(lo, hi)), np.log(lam[lo - 1 : hi - 1]), 1)[0]
    iso = lam.sum() ** 2 / (X.shape[1] * (lam**2).sum())
    return rankme, -slope, iso, lam[0] / lam[-1], len(lam)


@pytest.mark.parametrize("fit_range", [None, (2, 8)])
def test_matches_dense_reference(fit_range):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(300, 12, generator=g) @ torch.randn(12, 12, generator=g) + 5.0
    m = tg.spectral_metrics(X, fit_range=fit_range)
    rankme, alpha, iso, cond, n = reference_spectral(X.numpy(), fit_range)
    assert m.rankme == pytest.approx(rankme, rel=1e-9)
    assert m.alpha_req == pytest.approx(alpha, rel=1e-9)
    assert m.isotropy == pytest.approx(iso, rel=1e-9)
    assert m.condition_number == pytest.approx(cond, rel=1e-7)
    assert (m.n_kept, m.d, m.n_points) == (n, 12, 300)


def test_streaming_equals_one_call():
    g = torch.Generator().manual_seed(1)
    X = (torch.randn(1000, 10, generator=g) * torch.linspace(0.1, 3, 10) + 100.0).float()
    acc = StreamingCovariance()
    for chunk in torch.split(X, [1, 2, 97, 400, 500]):
        acc.update(chunk)
    acc.update(X[:0])  # an empty batch is a no-op
    np.testing.assert_allclose(acc.compute().numpy(), np.cov(X.double().numpy().T), rtol=1e-10, atol=1e-12)
    a, b = acc.spectral(), tg.spectral_metrics(X)
    for f in ("rankme", "alpha_req", "isotropy", "condition_number"):
        assert getattr(a, f) == pytest.approx(getattr(b, f), rel=1e-9)
    acc.reset()
    assert acc.n == 0
    with pytest.raises(ValueError, match="at least 2 points"):
        acc.compute()


def test_known_spectra():
    g = torch.Generator().manual_seed(0)
    iso = tg.spectral_metrics(torch.randn(20000, 16, generator=g))
    assert iso.rankme > 15.9 and iso.isotropy > 0.99 and iso.condition_number < 1.2
    # rank one: RankMe 1, isotropy 1/d
    one = tg.spectral_metrics(torch.randn(100, 1, generator=g, dtype=torch.float64) * torch.randn(1, 8, dtype=torch.float64))
    assert one.n_kept == 1 and one.rankme == pytest.approx(1.0) and one.isotropy == pytest.approx(1 / 8)
    assert np.isnan(one.alpha_req)
    # power law λ_i = i^-2 gives α = 2 exactly
    lam = torch.arange(1, 21, dtype=torch.float64) ** -2.0
    m = spectral_from_covariance(torch.diag(lam))
    assert m.alpha_req == pytest.approx(2.0) and m.condition_number == pytest.approx(400.0)


def test_serializes():
    json.dumps(tg.spectral_metrics(torch.randn(20, 4)).to_dict())


def test_bad_inputs():
    with pytest.raises(ValueError, match="2-D"):
        tg.spectral_metrics(torch.randn(10))
    with pytest.raises(ValueError, match="NaN or inf"):
        tg.spectral_metrics(torch.tensor([[1.0, float("nan")], [0.0, 1.0], [2.0, 3.0]]))
    with pytest.raises(ValueError, match="constant"):
        tg.spectral_metrics(torch.ones(10, 3))
    with pytest.raises(ValueError, match="at least 2 points"):
        tg.spectral_metrics(torch.randn(1, 3))
    with pytest.raises(ValueError, match="fit_range"):
        tg.spectral_metrics(torch.randn(50, 4), fit_range=(1, 9))
    with pytest.raises(ValueError, match="fit_range"):
        tg.spectral_metrics(torch.randn(50, 4), fit_range=(2, 3))
    acc = StreamingCovariance()
    acc.update(torch.randn(5, 3))
    with pytest.raises(ValueError, match="expected d=3"):
        acc.update(torch.randn(5, 4))
    with pytest.raises(ValueError, match="square"):
        spectral_from_covariance(torch.randn(3, 4))


def test_spectral_metric_on_tiny_model(any_tiny_model, tiny_tokens):
    model = any_tiny_model
    hooks = tg.capture.resid_hooks(model, "post")
    r = tg.spectral(model, tiny_tokens, progress=False)
    assert {f"spectral.{n}" for n in ("rankme", "alpha_req", "isotropy", "condition_number")} == r.metrics
    # same as collecting everything and calling the pure function
    cap = tg.capture.collect(model, tiny_tokens, hooks, max_points=None, progress=False)
    for h in hooks:
        ref = tg.spectral_metrics(cap.acts[h])
        assert r.value("spectral.rankme", hook=h) == pytest.approx(ref.rankme, rel=1e-6)
        assert r.filter("spectral.rankme", hook=h).rows[0].extras["n_points"] == cap.n_points
