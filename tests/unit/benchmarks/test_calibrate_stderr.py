"""benchmarks/calibrate_stderr.py: its statistics against slow references and known answers, its
disjoint text samples, and its resume (on the tiny byte-level model; seconds)."""

from __future__ import annotations

import itertools
import json
import math
import statistics

import numpy as np
import pytest

from benchmarks import _util
from benchmarks import calibrate_stderr as cal


def slow_ratio(values, stderrs):
    ok = [(v, s) for v, s in zip(values, stderrs) if math.isfinite(v) and math.isfinite(s)]
    if len(ok) < 2:
        return math.nan
    sd = statistics.stdev([v for v, _ in ok])
    rms = math.sqrt(sum(s * s for _, s in ok) / len(ok))
    return sd / rms


def slow_coverage(values, stderrs, z=1.96):
    ok = [(v, s) for v, s in zip(values, stderrs) if math.isfinite(v) and math.isfinite(s)]
    hits = pairs = 0
    for (vi, si), (vj, sj) in itertools.combinations(ok, 2):
        pairs += 1
        hits += abs(vi - vj) <= z * math.sqrt(si * si + sj * sj)
    return hits, pairs


def test_ratio_and_coverage_equal_the_slow_reference():
    rng = np.random.default_rng(0)
    for trial in range(50):
        k = int(rng.integers(2, 9))
        v = list(rng.normal(3.0, 2.0, k))
        s = list(rng.uniform(0.2, 3.0, k))
        if trial % 3 == 0:  # missing values and errors are skipped, not counted
            v[0], s[-1] = math.nan, math.inf
        assert cal.spread_ratio(v, s) == pytest.approx(slow_ratio(v, s), rel=1e-12, nan_ok=True)
        assert cal.pair_coverage(v, s, z=1.96) == slow_coverage(v, s)


def test_pooled_calibration_equals_the_slow_reference():
    rng = np.random.default_rng(1)
    by_hook = {f"h{i}": [(float(rng.normal()), float(rng.uniform(0.5, 1.5))) for _ in range(5)] for i in range(11)}
    by_hook["h_one"] = [(1.0, 0.1)]  # one sample: no spread, left out
    c = cal.calibration(by_hook, z=1.96)
    ratios = [slow_ratio(*zip(*obs)) for h, obs in by_hook.items() if h != "h_one"]
    hits, pairs = map(sum, zip(*(slow_coverage(*zip(*obs)) for obs in by_hook.values())))
    assert c.n_hooks == 11 and c.n_samples == 5 and c.n_pairs == pairs == 110
    assert c.median_ratio == pytest.approx(statistics.median(ratios), rel=1e-12)
    assert c.p90_ratio == pytest.approx(float(np.percentile(ratios, 90)), rel=1e-12)
    assert c.coverage == pytest.approx(hits / pairs, rel=1e-12)


@pytest.mark.parametrize(
    "scale, median_ratio, coverage",
    [
        # calibrated: coverage 95 %; ratio = the median of sqrt(chi2_5 / 5) (K = 6 samples)
        (1.0, math.sqrt(4.3515 / 5), 0.95),
        # errors half the true sd: ratio twice that; coverage P(|Z| <= 1.96 / 2) = 0.673
        (0.5, 2 * math.sqrt(4.3515 / 5), 0.6729),
        # errors twice the true sd: coverage P(|Z| <= 3.92) ≈ 1
        (2.0, 0.5 * math.sqrt(4.3515 / 5), 0.99991),
    ],
)
def test_known_answer_on_gaussian_draws(scale, median_ratio, coverage):
    """Gaussian draws with a known sd per hook: the reported error is scale × the true sd."""
    rng = np.random.default_rng(7)
    by_hook = {}
    for h in range(800):
        mu, sd = rng.normal(0, 10), rng.uniform(0.1, 5.0)
        by_hook[str(h)] = [(float(mu + sd * rng.standard_normal()), scale * sd) for _ in range(6)]
    c = cal.calibration(by_hook)
    assert c.n_pairs == 800 * 15
    assert c.coverage == pytest.approx(coverage, abs=0.015)
    assert c.median_ratio == pytest.approx(median_ratio, rel=0.05)


def slow_pooled(by_hook):
    sq = []
    for obs in by_hook.values():
        ok = [(v, s) for v, s in obs if math.isfinite(v) and math.isfinite(s)]
        if len(ok) >= 2:
            sq.append(slow_ratio(*zip(*ok)) ** 2)
    return math.sqrt(sum(sq) / len(sq))


def test_pooled_ratio_and_its_jackknife_equal_the_slow_reference():
    rng = np.random.default_rng(3)
    by_hook = {
        f"h{i}": [(float(rng.normal(i, 1 + i)), float(rng.uniform(0.5, 2.0))) for _ in range(7)] for i in range(5)
    }
    by_hook["h0"][2] = (math.nan, 1.0)  # skipped inside its hook; the replicates still delete by sample
    K = 7
    reps = [slow_pooled({h: obs[:i] + obs[i + 1 :] for h, obs in by_hook.items()}) for i in range(K)]
    mean = sum(reps) / K
    want_se = math.sqrt((K - 1) / K * sum((r - mean) ** 2 for r in reps))
    c = cal.calibration(by_hook)
    assert c.pooled_ratio == pytest.approx(slow_pooled(by_hook), rel=1e-12)
    assert c.pooled_ratio_se == pytest.approx(want_se, rel=1e-12)
    assert math.isnan(cal.pooled_ratio_jackknife({"a": [(1.0, 1.0), (2.0, 1.0)]}))  # K = 2: no jackknife


@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_pooled_ratio_known_answer_and_its_error_matches_its_spread(scale):
    """Errors scale × the true sd: the pooled ratio is near 1 / scale, and its jackknife error over
    the samples is about the sd of the pooled ratio over independent repetitions (hooks of one
    sample share a common shock, as the hooks of one text sample do)."""
    rng = np.random.default_rng(11)
    pooled, ses = [], []
    for _ in range(300):
        shock = rng.standard_normal(8)  # one per sample, shared by its hooks
        by_hook = {}
        for h in range(7):
            sd = 1.0 + h
            by_hook[str(h)] = [
                (float(sd * (0.8 * shock[k] + 0.6 * rng.standard_normal())), scale * sd) for k in range(8)
            ]
        c = cal.calibration(by_hook)
        pooled.append(c.pooled_ratio)
        ses.append(c.pooled_ratio_se)
    assert float(np.median(pooled)) == pytest.approx(1 / scale, rel=0.08)
    assert float(np.median(ses)) == pytest.approx(float(np.std(pooled)), rel=0.35)


def test_factors_are_not_calibrated_as_errors():
    rows = [
        {"metric": "id.gride", "hook": "a", "value": 3.0, "extras": {"n1": 4, "stderr": 0.2, "stderr_inflation": 1.5}}
    ]
    samples = [{"rows": rows}, {"rows": rows}]
    assert cal.stderr_fields(samples) == ["stderr"]
    assert "stderr_inflation" not in cal.table(samples, components=True)


def test_labels_split_pga_by_ccr_and_gride_by_n1():
    rows = [
        {"metric": "pga.z", "hook": "a", "value": 1.0, "extras": {"ccr": 1, "stderr": 0.5}},
        {"metric": "pga.z", "hook": "a", "value": 2.0, "extras": {"ccr": 5, "stderr": 0.5, "stderr_null": 0.1}},
        {"metric": "id.gride", "hook": "a", "value": 3.0, "extras": {"n1": 4, "stderr": 0.2}},
        {"metric": "agop.aofe", "hook": "b", "value": 4.0, "extras": {"stderr_probes": 0.3, "stderr": 0.4}},
    ]
    samples = [{"rows": rows}, {"rows": rows}]
    got = cal.collect(samples)
    assert sorted(got) == ["agop.aofe", "id.gride n1=4", "pga.z ccr=1", "pga.z ccr=5"]
    assert got["pga.z ccr=5"] == {"a": [(2.0, 0.5), (2.0, 0.5)]}
    assert cal.collect(samples, "stderr_null") == {"pga.z ccr=5": {"a": [(2.0, 0.1), (2.0, 0.1)]}}
    assert cal.stderr_fields(samples) == ["stderr", "stderr_null", "stderr_probes"]


@pytest.fixture(scope="module")
def byte_model():  # a HookedTransformer: the tests using it carry needs_hooked
    return _util.byte_model()


@pytest.mark.needs_hooked
def test_samples_are_disjoint_and_stable(byte_model):
    import tl_geometry as tg

    five = cal.disjoint_samples(byte_model, 5, 4, 32, seed=3)
    rows = [tuple(r.tolist()) for b in five for r in b]
    assert len(rows) == len(set(rows)) == 20  # no chunk in two samples (nor twice in one)
    assert all(b.shape == (4, 32) for b in five)
    three = cal.disjoint_samples(byte_model, 3, 4, 32, seed=3)
    assert all((a == b).all() for a, b in zip(three, five))  # more samples never change the first
    assert (five[0] == tg.corpus.tokens(byte_model, "pydoc", n_seqs=4, seq_len=32, seed=3)).all()
    with pytest.raises(ValueError, match="need .* chunks; pydoc has"):
        cal.disjoint_samples(byte_model, 10**6, 4, 32)


def _lines(out):
    return [json.loads(l) for l in (out / cal.SAMPLES_FILE).read_text().splitlines()]


@pytest.mark.needs_hooked
def test_writes_each_sample_and_resumes(tmp_path, capsys):
    out = tmp_path / "cal"
    base = ["--small", "--out", str(out), "--metrics", "epsilon_activations", "spectral"]
    assert cal.main([*base, "--samples", "2"]) == 0
    first = _lines(out)
    assert [s["sample"] for s in first] == [0, 1]
    assert {r["metric"] for r in first[0]["rows"]} >= {"epsilon_activations", "spectral.rankme"}
    assert all(math.isfinite(r["extras"]["stderr"]) for r in first[0]["rows"])
    # a killed run leaves a torn last line: ignored, and the next sample follows it on its own line
    with open(out / cal.SAMPLES_FILE, "a") as fh:
        fh.write('{"sample": 2, "rows": [')
    capsys.readouterr()
    assert cal.main([*base, "--samples", "3"]) == 0
    printed = capsys.readouterr().out
    assert "computing [2]" in printed and "| spectral.rankme | `stderr` |" in printed
    again = cal.read_samples(out / cal.SAMPLES_FILE)
    assert [s["sample"] for s in again] == [0, 1, 2]
    assert again[:2] == first  # the stored samples are not recomputed
    assert (out / "table.md").read_text().count("| epsilon_activations |") == 1
    with pytest.raises(SystemExit, match="other settings .*n_seqs.*pass another --out"):
        cal.main([*base, "--samples", "3", "--n-seqs", "4"])
    with pytest.raises(SystemExit):
        cal.main([*base, "--samples", "1"])
    assert "--samples must be >= 2" in capsys.readouterr().err
