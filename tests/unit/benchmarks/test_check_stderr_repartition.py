"""benchmarks/check_stderr_repartition.py: its subset statistics against slow references (fast, no model)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmarks import calibrate_stderr as cal
from benchmarks import check_stderr_repartition as rep
from tl_geometry.metrics.jackknife import jackknife_se


def test_subset_error_is_the_delete_one_jackknife_of_the_mean():
    x = np.random.default_rng(0).lognormal(0, 1, 50)  # skewed, as per-sequence traces are
    vals, ses = rep.mean_subsets(x, 20, 8, np.random.default_rng(1))
    again = np.random.default_rng(1)
    for v, s in zip(vals, ses):
        sub = x[again.choice(len(x), 8, replace=False)]
        loo = torch.tensor([[np.delete(sub, i).mean()] for i in range(8)], dtype=torch.float64)
        assert v == pytest.approx(sub.mean(), rel=1e-12)
        assert s == pytest.approx(float(jackknife_se(loo)[0]), rel=1e-9)


def test_subset_calibration_equals_calibrate_stderr_statistics():
    rng = np.random.default_rng(2)
    v, s = list(rng.normal(0, 2, 30)), list(rng.uniform(0.5, 3, 30))
    ratio, cover = rep.subset_calibration(v, s)
    hits, pairs = cal.pair_coverage(v, s)
    assert ratio == pytest.approx(cal.spread_ratio(v, s), rel=1e-12)
    assert cover == pytest.approx(hits / pairs, rel=1e-12)
