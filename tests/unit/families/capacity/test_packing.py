"""Packing simulation and refit of the capacity forms (capacity paper, Sec. 4)."""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import torch

import tl_geometry.families.capacity.packing as packing
from tests.helpers import paper_scale
from tl_geometry.errors import InputError

# The authors' packing sweep is package data (reproduce reads it from an installed wheel too).
DATA = Path(str(resources.files("tl_geometry").joinpath("data/capacity")))


# ----------------------------------------------------------------------------- references
def ref_max_abs_cos(x: torch.Tensor) -> float:
    u = torch.nn.functional.normalize(x.double(), dim=1)
    return max(abs(float(u[i] @ u[j])) for i in range(len(u)) for j in range(len(u)) if i != j)


def ref_r2_mape(y, pred):
    y, pred = np.asarray(y), np.asarray(pred)
    r2 = 1 - ((y - pred) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    nz = y != 0
    return r2, 100 * np.mean(np.abs((y[nz] - pred[nz]) / y[nz]))


# ----------------------------------------------------------------------------- gradient
@pytest.mark.parametrize("p", [1, 1.5, 2, 3, 4, 9, 11, 20, 3.5])  # p = 1 once looped forever
@pytest.mark.timeout(60)
@pytest.mark.parametrize("block", [7, 256])
def test_hand_gradient_equals_autograd(p, block):
    X = torch.randn(40, 6, dtype=torch.float64, requires_grad=True)
    U = torch.nn.functional.normalize(X, dim=1)
    G = (U @ U.T).masked_fill(torch.eye(40, dtype=torch.bool), 0.0)
    (G.abs() ** p).sum().backward()
    g, worst = packing.packing_grad(X.detach(), p, block=block)
    torch.testing.assert_close(g, X.grad, rtol=1e-10, atol=1e-12)
    assert worst == pytest.approx(float(G.detach().abs().max()), abs=1e-12)


def test_max_abs_cos_matches_reference():
    x = torch.randn(30, 4)
    assert packing.max_abs_cos(x, block=8) == pytest.approx(ref_max_abs_cos(x), abs=1e-6)


# ----------------------------------------------------------------------------- random packing
def test_random_packing_is_min_over_trials_of_max_abs_cos():
    k, d, trials, seed = 12, 5, 7, 3
    gen = torch.Generator().manual_seed(seed)
    ref = min(ref_max_abs_cos(torch.randn(k, d, generator=gen)) for _ in range(trials))
    assert packing.random_packing(k, d, trials=trials, seed=seed, device="cpu") == pytest.approx(ref, abs=1e-6)


def test_random_packing_two_vectors_on_a_line():
    assert packing.random_packing(2, 1, trials=3, seed=0, device="cpu") == pytest.approx(1.0)


# ----------------------------------------------------------------------------- optimized packing
@pytest.mark.parametrize(
    "k,d,p,optimum",
    [
        (3, 2, 8, 0.5),  # three lines at 60 degrees
        (4, 3, 8, 1 / 3),  # cube diagonals (regular simplex lines)
        (6, 3, 8, 1 / math.sqrt(5)),  # icosahedron diagonals: 6 equiangular lines in R^3
        (5, 8, 2, 0.0),  # k <= d: exactly orthogonal
    ],
)
def test_optimized_packing_reaches_known_optima(k, d, p, optimum):
    eps, U = packing.optimized_packing(k, d, steps=1500, seed=0, lr=0.01, p=p, device="cpu", return_vectors=True)
    assert eps == pytest.approx(optimum, abs=0.02)
    assert eps >= optimum - 1e-6  # never below the true optimum
    torch.testing.assert_close(U.norm(dim=1), torch.ones(k))
    assert eps == pytest.approx(ref_max_abs_cos(U), abs=0.02)  # read one step before the last update


def test_optimized_packing_is_seeded():
    a = packing.optimized_packing(20, 4, steps=50, seed=1, device="cpu")
    b = packing.optimized_packing(20, 4, steps=50, seed=1, device="cpu")
    c = packing.optimized_packing(20, 4, steps=50, seed=2, device="cpu")
    assert a == b and a != c


def test_optimized_packing_one_step_is_the_initial_draw():
    gen = torch.Generator().manual_seed(5)
    x = torch.nn.functional.normalize(torch.randn(15, 4, generator=gen), dim=1)
    assert packing.optimized_packing(15, 4, steps=1, seed=5, device="cpu") == pytest.approx(
        ref_max_abs_cos(x), abs=1e-6
    )


@pytest.mark.parametrize(
    "k,d,lr,p",
    [
        (2000, 32, 0.005, 11),  # m = 40 (k <= 4000): int(40 / ln 32) = 11
        (32000, 768, 0.005, 9),  # m = 60: int(60 / ln 768) = 9
        (8000, 3072, 0.0025, 6),  # m = 50 (d >= 3072): int(50 / ln 3072) = 6
        (2000, 4096, 0.0025, 4),  # k <= 4000 wins: int(40 / ln 4096) = 4
        (4000, 2, 0.005, 20),  # capped at 20
    ],
)
def test_paper_schedule(k, d, lr, p):
    assert packing.paper_schedule(k, d) == {"lr": lr, "p": p, "steps": 5000}


# ----------------------------------------------------------------------------- fit
def test_fit_recovers_known_constants():
    rows = [
        [k, d, math.sqrt(0.5 * math.log(k**1.1 / d) ** 1.3 / d**0.9)]
        for k in (1000, 4000, 16000, 64000)
        for d in (32, 128, 512)
    ]
    res = packing.fit(rows, form="full")
    assert res.params == pytest.approx({"C": 0.5, "a": 1.1, "b": 1.3, "c": 0.9}, rel=1e-4)
    assert res.r2 == pytest.approx(1.0) and res.mape < 1e-3


def test_fit_reproduces_the_paper_on_optimized_packing():
    data = json.loads((DATA / "optimized_packing.json").read_text())
    adj = packing.fit(data, form="adjusted")
    assert adj.params["C"] == pytest.approx(1.293, abs=0.001)
    assert adj.r2 == pytest.approx(0.9984, abs=2e-4) and adj.mape == pytest.approx(7.9, abs=0.1)
    full = packing.fit(data, form="full")
    assert full.params == pytest.approx({"C": 0.458, "a": 1.067, "b": 1.447, "c": 0.972}, abs=0.001)
    assert full.r2 == pytest.approx(0.9998, abs=2e-4) and full.mape == pytest.approx(5.4, abs=0.1)
    jl = packing.fit(data, form="jl")
    assert jl.mape == pytest.approx(975, rel=0.01)
    # metrics against a plain recomputation
    k, d, y = np.array(data).T
    pred = np.where(k > d, np.sqrt(1.293 * np.log(np.clip(k / d, 1.00001, None)) / d), 0.0)
    r2, mape = ref_r2_mape(
        y, np.where(k > d, np.sqrt(adj.params["C"] * np.log(np.clip(k / d, 1.00001, None)) / d), 0.0)
    )
    assert (adj.r2, adj.mape) == pytest.approx((r2, mape))
    assert ref_r2_mape(y, pred)[1] == pytest.approx(7.9, abs=0.1)


def test_fit_reproduces_the_paper_on_random_packing():
    res = packing.fit(DATA / "random_packing.json", form="jl_random")
    assert res.params["C"] == pytest.approx(3.029, abs=0.001)
    assert res.r2 == pytest.approx(0.9985, abs=2e-4) and res.mape == pytest.approx(1.3, abs=0.05)
    assert res.to_dict()["form"] == "jl"


@pytest.mark.parametrize(
    "data,kw,exc,match",
    [
        ([[1, 2, 0.1], [3, 4, 0.2]], dict(form="cubic"), ValueError, "unknown form"),
        ([[1, 2], [3, 4]], {}, ValueError, r"rows \[k, d, eps\*\]"),
        ([[100, 2, 0.1]], {}, ValueError, "at least 2 rows"),
        ([[100, 2, float("nan")], [200, 2, 0.1]], {}, ValueError, "NaN or inf"),
        ("/nonexistent/packing.json", {}, FileNotFoundError, "no such packing data file"),
    ],
)
def test_fit_bad_input(data, kw, exc, match):
    with pytest.raises(exc, match=match):
        packing.fit(data, **kw)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: packing.optimized_packing(1, 3), "k must be >= 2"),
        (lambda: packing.optimized_packing(5, 0), "d must be a positive integer"),
        (lambda: packing.optimized_packing(5, 2.5), "d must be a positive integer"),
        (lambda: packing.optimized_packing(5, 2, steps=0), "steps must be >= 1"),
        (lambda: packing.optimized_packing(5, 2, lr=-1.0), "lr and p must be positive"),
        (lambda: packing.random_packing(5, 2, trials=0), "trials must be >= 1"),
        (lambda: packing.sweep([(5, 2)], "x.jsonl", kind="annealed"), "kind must be"),
    ],
)
def test_packing_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ----------------------------------------------------------------------------- sweep
def test_sweep_appends_and_resumes(tmp_path, monkeypatch):
    path = tmp_path / "sweep.jsonl"
    cells = [(6, 2), (8, 3)]
    rows = packing.sweep(cells, path, kind="optimized", steps=20, seed=0, device="cpu", progress=False)
    assert sorted((k, d) for k, d, _ in rows) == sorted(cells)
    assert rows[0][2] == pytest.approx(packing.optimized_packing(6, 2, steps=20, seed=0, device="cpu"))
    assert len(path.read_text().splitlines()) == 3  # the header, then one line per cell

    # resume: finished cells are not recomputed, new cells are
    calls = []
    real = packing.optimized_packing
    monkeypatch.setattr(packing, "optimized_packing", lambda k, d, **kw: calls.append((k, d)) or real(k, d, **kw))
    with path.open("a") as f:
        f.write('{"key": "torn')  # a killed run's partial line
    rows2 = packing.sweep(cells + [(5, 2)], path, kind="optimized", steps=20, seed=0, device="cpu", progress=False)
    assert calls == [(5, 2)]
    assert len(rows2) == 3
    assert sorted(packing.load_reference(path)) == sorted(rows2)
    assert packing.fit(rows2 + [[100, 2, 0.9]], form="jl").n == 4


def test_random_sweep(tmp_path):
    rows = packing.sweep([(4, 2)], tmp_path / "r.jsonl", kind="random", trials=3, device="cpu", progress=False)
    assert rows[0][2] == pytest.approx(packing.random_packing(4, 2, trials=3, seed=0, device="cpu"))


def test_sweep_p_override_is_part_of_the_key(tmp_path):
    path = tmp_path / "p.jsonl"
    a = packing.sweep([(6, 2)], path, kind="optimized", steps=20, device="cpu", progress=False)
    b = packing.sweep([(6, 2)], path, kind="optimized", steps=20, p=20, device="cpu", progress=False)
    assert len(path.read_text().splitlines()) == 3  # the header, then one line per cell
    assert b[0][2] == pytest.approx(packing.optimized_packing(6, 2, steps=20, p=20, device="cpu"))
    assert a[0][2] == pytest.approx(packing.optimized_packing(6, 2, steps=20, device="cpu"))


# ----------------------------------------------------------------------------- seeds and tolerances
def test_seed_spread_matches_numpy():
    eps = {2: 0.3993, 0: 0.4037, 1: 0.4032, 3: 0.4019}
    s = packing.seed_spread(2000, 32, eps)
    ref = np.array([0.4037, 0.4032, 0.3993, 0.4019])
    assert s.seeds == (0, 1, 2, 3) and s.eps == (0.4037, 0.4032, 0.3993, 0.4019) and s.n == 4
    assert s.mean == pytest.approx(ref.mean()) and s.sd == pytest.approx(ref.std(ddof=1))
    assert s.sem == pytest.approx(ref.std(ddof=1) / 2)


def test_cell_tolerance_is_n_sd_of_one_run_minus_the_mean():
    # Var(x − mean of n) = sd² (1 + 1/n) for i.i.d. runs
    assert packing.cell_tolerance(0.002, 3) == pytest.approx(3 * 0.002 * math.sqrt(4 / 3))
    assert packing.cell_tolerance(0.002, 1, n_sd=2) == pytest.approx(2 * 0.002 * math.sqrt(2))
    rng = np.random.default_rng(0)
    x = rng.normal(0, 0.01, size=(20000, 4))
    diff = x[:, 0] - x[:, 1:].mean(1)
    assert diff.std() == pytest.approx(packing.cell_tolerance(0.01, 3, n_sd=1), rel=0.03)


def _delta_method_sd(rows, sd, form="adjusted", h=1e-6):
    """Slow reference: linearize the fit in each row's ε* by finite differences."""
    base = packing.fit(rows, form=form).params["C"]
    var = 0.0
    for i, s in enumerate(sd):
        moved = [list(r) for r in rows]
        moved[i][2] += h
        var += ((packing.fit(moved, form=form).params["C"] - base) / h * s) ** 2
    return math.sqrt(var)


def test_fit_noise_matches_the_delta_method():
    rows = [[2000, 32, 0.3859], [2000, 64, 0.2363], [2000, 128, 0.1469], [2000, 256, 0.0911]]
    sd = [0.003, 0.002, 0.001, 0.001]
    got = packing.fit_noise(rows, sd, form="adjusted", draws=400, seed=1)
    assert got["C"] == pytest.approx(_delta_method_sd(rows, sd), rel=0.15)
    assert packing.fit_noise(rows, [0.0] * 4, form="adjusted", draws=3)["C"] == pytest.approx(0.0, abs=1e-12)
    assert packing.fit_noise(rows, sd, draws=5, seed=2) == packing.fit_noise(rows, sd, draws=5, seed=2)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: packing.seed_spread(2000, 32, {0: 0.4}), "at least 2 seeds"),
        (lambda: packing.seed_spread(2000, 32, {0: 0.4, 1: float("nan")}), "NaN or inf"),
        (lambda: packing.cell_tolerance(-1.0, 3), "sd must be finite and >= 0"),
        (lambda: packing.cell_tolerance(0.1, 0), "n >= 1"),
        (lambda: packing.fit_noise([[2000, 32, 0.4], [2000, 64, 0.2]], [0.1], draws=3), "one per row"),
        (lambda: packing.fit_noise([[2000, 32, 0.4], [2000, 64, 0.2]], [0.1, 0.1], draws=1), "draws must be >= 2"),
    ],
)
def test_seed_helpers_bad_input(call, match):
    with pytest.raises(InputError, match=match):
        call()


# ----------------------------------------------------------------------------- the paper's cell
def _shipped(k, d):
    from tl_geometry.families.capacity.checks import shipped_packing_subset

    cells = shipped_packing_subset()
    if (k, d) not in cells:
        pytest.fail(f"cell k={k}, d={d} is not in tl_geometry/data/packing_subset.json")
    return packing.seed_spread(k, d, cells[(k, d)])


def test_paper_cell_2000x32_is_outside_our_seed_spread():
    """The finding `reproduce` states: the published schedule (p = 11) does not reach the published cell.

    The tolerance is the one `reproduce` uses: 3 sd of (one run − our n-seed mean).
    """
    from tl_geometry.families.capacity.checks import PACKING_N_SD

    paper = {(k, d): e for k, d, e in json.loads((DATA / "optimized_packing.json").read_text())}[(2000, 32)]
    assert paper == pytest.approx(0.3859, abs=1e-4)
    s = _shipped(2000, 32)
    assert s.n >= 3 and s.sd < 0.01 * s.mean  # seeds agree to well under 1 %
    assert abs(paper - s.mean) > packing.cell_tolerance(s.sd, s.n, n_sd=PACKING_N_SD)


@pytest.mark.slow
@paper_scale("optimized packing k = 2000, d = 32, 5,000 Adam steps", 55)
def test_optimized_packing_2000x32_reproduces_our_shipped_seeds():
    """The paper's schedule (Adam, 5,000 steps, lr 0.005, p = 11) on k = 2000, d = 32, seed 0, against
    the shipped seeds with the tolerance `reproduce` uses (3 sd of one run − the mean of n)."""
    from tl_geometry.families.capacity.checks import PACKING_N_SD

    s = _shipped(2000, 32)
    eps = packing.optimized_packing(2000, 32, seed=0, device="cpu")
    assert abs(eps - s.mean) <= packing.cell_tolerance(s.sd, s.n, n_sd=PACKING_N_SD)
    # The same seed reproduces its shipped value only on the same BLAS kernel: 5,000 Adam steps amplify
    # rounding. Measured 2026-12-03 on an Intel Xeon (torch MKL, AVX-512): 0.40225 for seed 0 against the
    # shipped 0.40373 (1.6 sd of the seeds), so the cross-machine contract is the tolerance above; a
    # same-seed value must still lie within it.
    assert abs(eps - s.eps[s.seeds.index(0)]) <= packing.cell_tolerance(s.sd, 1, n_sd=PACKING_N_SD)
