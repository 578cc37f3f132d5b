"""The one verdict rule (tl_geometry.metrics.significance.verdicts / extreme) on simulated nulls and planted effects.

A PGA z under the null is the z of one more exchangeable draw against n_null draws (the readout is
one more random subspace): z = (x0 − mean x_1..n)/std(x_1..n, ddof = 1), x iid normal. A window of
15 (the intermediate peak of a 31-hook profile) or 9 hooks (the late minimum) is scanned and its
extreme read; the issue's stderr of z is ±0.3.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tl_geometry.errors import InputError
from tl_geometry.metrics import significance as sig

N_SAMPLES = 1000
N_NULL = 100
SE = 0.3


def _null_z(rng: np.random.Generator, n_samples: int, m: int, n_null: int = N_NULL) -> np.ndarray:
    """(n_samples, m) z-scores of the readout against n_null random subspaces when the readout is one of them."""
    x = rng.standard_normal((n_samples, m, n_null + 1))
    nulls = x[..., 1:]
    return (x[..., 0] - nulls.mean(-1)) / nulls.std(-1, ddof=1)


def _old_rule(z: np.ndarray, se: float, kind: str) -> bool:
    """The rule reproduce used before: the extreme of the window, decided when |v| > 2·stderr alone."""
    v = z.max() if kind == "max" else z.min()
    return bool(abs(v) > 2 * se)


def _new_rule(z: np.ndarray, se: float, kind: str) -> bool:
    return sig.extreme(z.tolist(), [se] * z.size, kind=kind, n_null=N_NULL).decided


@pytest.mark.parametrize(("m", "kind"), [(15, "max"), (9, "min")])
def test_extreme_of_a_null_window_is_decided_in_under_5_percent(m, kind):
    z = _null_z(np.random.default_rng(35 + m), N_SAMPLES, m)
    new = np.mean([_new_rule(row, SE, kind) for row in z])
    old = np.mean([_old_rule(row, SE, kind) for row in z])
    assert new < 0.05, new
    # the same test fails the old rule: the extreme of m null z's is beyond 2 · 0.3 most of the time
    assert old > 0.5, old


@pytest.mark.parametrize(("m", "kind", "shift"), [(15, "max", 8.0), (9, "min", -8.0)])
def test_a_planted_effect_is_found_in_over_95_percent(m, kind, shift):
    z = _null_z(np.random.default_rng(7 + m), N_SAMPLES, m)
    z[:, m // 2] += shift
    got = [sig.extreme(row.tolist(), [SE] * m, kind=kind, n_null=N_NULL) for row in z]
    want = "positive" if shift > 0 else "negative"
    assert np.mean([v.call == want for v in got]) > 0.95
    assert np.mean([v.index == m // 2 for v in got]) > 0.95


def test_the_issues_intermediate_peak_reads_inconclusive():
    # +0.92 ± 0.3 at n_null = 100: beyond 2 stderr (the old rule said "positive") but inside the
    # chance band (p ≈ 0.36), alone and as the peak of a 15-hook window
    one = sig.verdicts([0.92], [0.3], n_null=100)[0]
    assert one.call == "inconclusive" and one.beyond_stderr and not one.chance
    assert 0.3 < one.p < 0.4
    assert "chance band at n_null = 100" in one.words and "(failed)" in one.words and "(passed)" in one.words
    window = [0.92] + [0.1 * i for i in range(-7, 7)]
    peak = sig.extreme(window, [0.3] * 15, kind="max", n_null=100)
    assert peak.index == 0 and peak.call == "inconclusive" and peak.m == 15
    assert peak.words.startswith("max over 15 hooks") and "Holm over 15 hooks" in peak.words


def test_each_test_can_block_the_call():
    # chance passes, stderr fails
    v = sig.verdicts([5.0], [3.0], n_null=100)[0]
    assert v.chance and not v.beyond_stderr and v.call == "inconclusive"
    assert "(passed)" in v.words.split(";")[0] and "(failed)" in v.words.split(";")[1]
    # alone it passes; in a family of 40 Holm blocks it
    assert sig.verdicts([2.5], [0.3], n_null=1000)[0].call == "positive"
    fam = sig.verdicts([2.5] + [0.0] * 39, [0.3] * 40, n_null=1000)
    assert fam[0].call == "inconclusive" and fam[0].p_adjusted > 0.05 and fam[0].m == 40
    # an unknown stderr does not block and is said so
    u = sig.verdicts([-9.0], [math.nan], n_null=100)[0]
    assert u.call == "negative" and "stderr unknown" in u.words


def test_normal_p_matches_a_slow_reference():
    from statistics import NormalDist

    vals, ses = [0.5, -0.9, 0.05, 1.4], [0.2, 0.3, 0.1, 0.5]
    got = sig.verdicts(vals, ses, reference=0.1)
    raw = [2 * (1 - NormalDist().cdf(abs(v - 0.1) / s)) for v, s in zip(vals, ses, strict=True)]
    order = sorted(range(4), key=lambda i: raw[i])
    adj, run = [0.0] * 4, 0.0
    for j, i in enumerate(order):  # Holm, written out
        run = max(run, min(1.0, (4 - j) * raw[i]))
        adj[i] = run
    for g, p, a in zip(got, raw, adj, strict=True):
        assert g.p == pytest.approx(p, rel=1e-9) and g.p_adjusted == pytest.approx(a, rel=1e-9)
    # 2.0, 3.3, 0.5, 2.6 stderrs: Holm 0.091, 0.0034, 0.62, 0.028
    assert [g.call for g in got] == ["inconclusive", "negative", "inconclusive", "positive"]


def test_normal_null_differences_are_decided_in_under_5_percent():
    rng = np.random.default_rng(3)
    se = rng.uniform(0.1, 1.0, (N_SAMPLES, 9))
    d = rng.standard_normal((N_SAMPLES, 9)) * se
    rate = np.mean([sig.extreme(r.tolist(), s.tolist(), kind="min").decided for r, s in zip(d, se, strict=True)])
    assert rate < 0.05


def test_bad_inputs_are_named():
    with pytest.raises(InputError, match="same length"):
        sig.verdicts([1.0, 2.0], [0.1])
    with pytest.raises(InputError, match="kind must be 'max' or 'min'"):
        sig.extreme([1.0], [0.1], kind="peak")
    with pytest.raises(InputError, match="reference must be 0 with n_null"):
        sig.verdicts([1.0], [0.1], n_null=10, reference=0.2)
    with pytest.raises(InputError, match="one per value"):
        sig.verdicts([1.0, 2.0], [0.1, 0.1], n_null=[10])
    with pytest.raises(InputError, match="n_null must be an integer >= 2"):
        sig.verdicts([1.0], [0.1], n_null=1)
    with pytest.raises(InputError, match="alpha must lie in"):
        sig.verdicts([1.0], [0.1], alpha=1.5)
    with pytest.raises(InputError, match="at least one finite value"):
        sig.extreme([math.nan], [0.1], kind="max")
