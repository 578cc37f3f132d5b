"""benchmarks/check_report_phases.py: its phase peaks against a slow reference (fast, no model)."""

from __future__ import annotations

from benchmarks import check_report_phases as crp


def test_phase_peaks_take_the_largest_sample_inside_each_interval():
    t0 = 100.0
    samples = [(100.0 + 0.1 * i, 1000 + (i * 37) % 23) for i in range(60)]  # 6 s of samples
    marks = [("a", 102.0, 1.5), ("b", 103.0, 1.0), ("tiny", 103.02, 0.01), ("c", 105.9, 2.9)]
    got = crp.phase_peaks(samples, marks, t0)
    assert [g[0] for g in got] == ["(load and setup)", "a", "b", "tiny", "c"]

    def slow(lo, hi):
        vals = [r for t, r in samples if lo <= t <= hi]
        return max(vals) if vals else None

    assert got[0][3] == max(r for t, r in samples if t < 100.5)  # before the first metric started
    for (name, end, sec), (n, a, b, peak) in zip(marks, got[1:], strict=True):
        assert n == name and abs(a - (end - sec - t0)) < 1e-9 and abs(b - (end - t0)) < 1e-9
        assert peak == slow(end - sec, end)
    assert got[3][3] is None  # shorter than the sampling interval: no sample inside


def test_the_rss_timeline_is_this_process_resident_set():
    import time

    from benchmarks import _util

    with _util.PeakRSS(0.005, keep=True) as mem:
        time.sleep(0.05)
    assert mem.samples and all(r > 10 * 2**20 for _, r in mem.samples)  # a Python process with the package imported
    assert [t for t, _ in mem.samples] == sorted(t for t, _ in mem.samples) and mem.peak >= max(
        r for _, r in mem.samples
    )
