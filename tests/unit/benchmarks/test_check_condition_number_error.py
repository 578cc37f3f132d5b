"""benchmarks/check_condition_number_error.py: the first-order replicates against exact eigenvalues."""

from __future__ import annotations

import math

import pytest
import torch

from benchmarks import check_condition_number_error as ccn


def test_first_order_replicates_match_eigvalsh_for_a_small_perturbation():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(200, 6, generator=g, dtype=torch.float64) * torch.tensor(
        [5.0, 3, 2, 1.5, 1, 0.5], dtype=torch.float64
    )
    C = A.T @ A / 199
    cond, reps = ccn.first_order_cond(C, [C + 1e-6 * torch.eye(6, dtype=torch.float64), C.clone()])
    lam = torch.linalg.eigvalsh(C)
    assert cond == pytest.approx(float(lam[-1] / lam[0]), rel=1e-12)
    exact = float((lam[-1] + 1e-6) / (lam[0] + 1e-6))  # a shift of the identity moves every eigenvalue by it
    assert reps[0] == pytest.approx(exact, rel=1e-10) and reps[1] == pytest.approx(cond, rel=1e-12)


def test_jackknife_se_is_the_grouped_formula():
    reps = [1.0, 2.0, 4.0]
    mean = 7 / 3
    assert ccn.jackknife_se(reps) == pytest.approx(math.sqrt(2 / 3 * sum((r - mean) ** 2 for r in reps)))


@pytest.mark.slow
def test_small_runs(capsys):
    assert ccn.main(["--small"]) == 0
    assert "first-order" in capsys.readouterr().out
