"""Spectral metrics: dense numpy reference, streaming == one call, known spectra, bad input."""

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

import tl_geometry as tg
from tl_geometry.metrics.spectral import StreamingCovariance, spectral_from_covariance


def reference_rankme(X):
    """Garrido et al. (2023) eq. 1 on the centered matrix: singular values s, p = s/Σs, exp(H(p))."""
    X = np.asarray(X, dtype=np.float64)
    s = np.linalg.svd(X - X.mean(0), compute_uv=False)
    s = s[s**2 > s[0] ** 2 * 1e-10]
    p = s / s.sum()
    return np.exp(-(p * np.log(p)).sum())


def reference_fit(lam, lo, hi, weighted):
    """np.polyfit of log λ on log i over ranks lo..hi-1; weights 1/i enter polyfit as w = 1/√i
    (polyfit minimizes Σ (w·residual)²). Returns (α, R² over the same ranks)."""
    i = np.arange(lo, hi, dtype=np.float64)
    x, y = np.log(i), np.log(lam[lo - 1 : hi - 1])
    slope, icpt = np.polyfit(x, y, 1, w=1 / np.sqrt(i) if weighted else None)
    r2 = 1 - ((y - (icpt + slope * x)) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    return -slope, r2


def reference_spectral(X, fit_range=None):
    """Dense numpy: covariance eigenvalues, kept above λ_max·1e-10, then the formulas."""
    X = np.asarray(X, dtype=np.float64)
    lam = np.sort(np.linalg.eigvalsh(np.cov(X.T)))[::-1]
    lam = lam[lam > lam[0] * 1e-10]
    p = lam / lam.sum()
    rankme_eig = np.exp(-(p * np.log(p)).sum())
    lo, hi = fit_range or (1, len(lam) + 1)
    alpha, r2 = reference_fit(lam, lo, hi, weighted=False)
    iso = lam.sum() ** 2 / (X.shape[1] * (lam**2).sum())
    return reference_rankme(X), alpha, iso, lam[0] / lam[-1], len(lam), rankme_eig, r2, lam


@pytest.mark.parametrize("fit_range", [None, (2, 8)])
def test_matches_dense_reference(fit_range):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(300, 12, generator=g) @ torch.randn(12, 12, generator=g) + 5.0
    m = tg.spectral_metrics(X, fit_range=fit_range)
    rankme, alpha, iso, cond, n, rankme_eig, r2, lam = reference_spectral(X.numpy(), fit_range)
    assert m.rankme == pytest.approx(rankme, rel=1e-9)
    assert m.rankme_eig == pytest.approx(rankme_eig, rel=1e-9)
    assert m.rankme_eig < m.rankme  # squaring sharpens p: the eigenvalue entropy rank is smaller
    assert m.alpha_req == pytest.approx(alpha, rel=1e-9)
    assert m.alpha_req_r2 == pytest.approx(r2, rel=1e-9)
    # reptrix's ranks 11–100 clipped to the 12 kept: ranks 11 and 12
    a_rx, r2_rx = reference_fit(lam, 11, 13, weighted=True)
    assert m.alpha_req_reptrix == pytest.approx(a_rx, rel=1e-9)
    assert m.alpha_req_reptrix_r2 == pytest.approx(r2_rx, abs=1e-9)
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
    one = tg.spectral_metrics(
        torch.randn(100, 1, generator=g, dtype=torch.float64) * torch.randn(1, 8, dtype=torch.float64)
    )
    assert one.n_kept == 1 and one.rankme == pytest.approx(1.0) and one.isotropy == pytest.approx(1 / 8)
    assert np.isnan(one.alpha_req)
    # power law λ_i = i^-2 gives α = 2 exactly
    lam = torch.arange(1, 21, dtype=torch.float64) ** -2.0
    m = spectral_from_covariance(torch.diag(lam))
    assert m.alpha_req == pytest.approx(2.0) and m.condition_number == pytest.approx(400.0)


def test_rankme_on_known_spectra():
    # covariance eigenvalues λ = (4, 1, 1): singular values ∝ (2, 1, 1), p = (1/2, 1/4, 1/4),
    # RankMe = exp(½ ln 2 + ½ ln 4) = 2^1.5; the eigenvalue variant has p = (2/3, 1/6, 1/6)
    m = spectral_from_covariance(torch.diag(torch.tensor([4.0, 1.0, 1.0], dtype=torch.float64)))
    assert m.rankme == pytest.approx(2**1.5, rel=1e-12)
    assert m.rankme_eig == pytest.approx(np.exp(-(2 / 3 * np.log(2 / 3) + 2 / 6 * np.log(1 / 6))), rel=1e-12)
    # a matrix with prescribed singular values (1, 2, 3, 4) and zero column means
    g = torch.Generator().manual_seed(3)
    U, _ = torch.linalg.qr(torch.randn(50, 4, generator=g, dtype=torch.float64))
    U = U - U.mean(0)
    U, _ = torch.linalg.qr(U)  # centered and orthonormal
    V, _ = torch.linalg.qr(torch.randn(6, 4, generator=g, dtype=torch.float64))
    s = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    X = U @ torch.diag(s) @ V.T + 7.0
    p = s / s.sum()
    assert tg.spectral_metrics(X).rankme == pytest.approx(float(torch.exp(-(p * p.log()).sum())), rel=1e-9)
    # flat spectrum: both variants equal the number of directions
    flat = spectral_from_covariance(torch.eye(5, dtype=torch.float64))
    assert flat.rankme == pytest.approx(5.0) and flat.rankme_eig == pytest.approx(5.0)


@pytest.mark.parametrize("weighted", [False, True])
def test_power_law_fit_matches_weighted_polyfit(weighted):
    g = torch.Generator().manual_seed(4)
    X = torch.randn(3000, 150, generator=g, dtype=torch.float64) * torch.arange(1, 151, dtype=torch.float64) ** -0.7
    m = tg.spectral_metrics(X)
    lam = np.sort(np.linalg.eigvalsh(np.cov(X.numpy().T)))[::-1]
    a, r2 = tg.power_law_fit(torch.from_numpy(lam.copy()), (11, 101), weighted=weighted)
    ra, rr2 = reference_fit(lam, 11, 101, weighted)
    assert a == pytest.approx(ra, rel=1e-9) and r2 == pytest.approx(rr2, rel=1e-9)
    if weighted:
        assert m.alpha_req_reptrix == pytest.approx(ra, rel=1e-9) and m.alpha_req_reptrix_r2 == pytest.approx(
            rr2, rel=1e-9
        )


def test_alpha_fits_on_an_exact_power_law_and_a_gaussian_cloud():
    lam = torch.arange(1, 201, dtype=torch.float64) ** -1.3
    m = spectral_from_covariance(torch.diag(lam))
    for a, r2 in ((m.alpha_req, m.alpha_req_r2), (m.alpha_req_reptrix, m.alpha_req_reptrix_r2)):
        assert a == pytest.approx(1.3, rel=1e-12) and r2 == pytest.approx(1.0, abs=1e-12)
    # not a power law: the two fits disagree (fit ranges and weights differ) and R² < 1
    g = torch.Generator().manual_seed(0)
    cloud = tg.spectral_metrics(torch.randn(2048, 256, generator=g))
    assert abs(cloud.alpha_req - cloud.alpha_req_reptrix) > 0.02
    assert cloud.alpha_req_r2 < 0.95
    # fewer than 12 kept ranks: no reptrix fit
    assert np.isnan(spectral_from_covariance(torch.eye(8, dtype=torch.float64)).alpha_req_reptrix)


def test_power_law_fit_bad_input():
    lam = torch.arange(1, 11, dtype=torch.float64) ** -1.0
    with pytest.raises(ValueError, match="fit_range"):
        tg.power_law_fit(lam, (11, 101))
    with pytest.raises(ValueError, match="positive eigenvalues"):
        tg.power_law_fit(torch.tensor([1.0, 0.0, -1.0]), (1, 4))


def test_serializes():
    """to_dict survives JSON: every field comes back with its value (NaN as NaN)."""
    m = tg.spectral_metrics(torch.randn(20, 4, generator=torch.Generator().manual_seed(0)))
    back = json.loads(json.dumps(m.to_dict()))
    assert set(back) == {f.name for f in dataclasses.fields(m)}
    assert back["eigenvalues"] == m.eigenvalues.tolist() and len(back["eigenvalues"]) == 4
    for name, got in back.items():
        if name == "eigenvalues":
            continue
        want = getattr(m, name)
        if isinstance(want, float) and math.isnan(want):
            assert isinstance(got, float) and math.isnan(got), name
        else:
            assert got == want and type(got) is type(want), name


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
    assert {
        f"spectral.{n}"
        for n in ("rankme", "rankme_eig", "alpha_req", "alpha_req_reptrix", "isotropy", "condition_number")
    } == r.metrics
    # same as collecting everything and calling the pure function
    cap = tg.capture.collect(model, tiny_tokens, hooks, max_points=None, progress=False)
    for h in hooks:
        ref = tg.spectral_metrics(cap.acts[h])
        assert r.value("spectral.rankme", hook=h) == pytest.approx(ref.rankme, rel=1e-6)
        assert r.filter("spectral.rankme", hook=h).rows[0].extras["n_points"] == cap.n_points
        assert r.filter("spectral.alpha_req", hook=h).rows[0].extras["r2"] == pytest.approx(ref.alpha_req_r2, rel=1e-6)
        assert r.value("spectral.rankme_eig", hook=h) == pytest.approx(ref.rankme_eig, rel=1e-6)
