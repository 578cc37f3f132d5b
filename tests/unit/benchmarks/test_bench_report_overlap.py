"""benchmarks/bench_report_overlap.py: the cases' times from the workers' clocks (fast, no model)."""

from __future__ import annotations

import pytest

from benchmarks import bench_report_overlap as bro


def test_case_timings_sum_one_after_the_other_and_take_the_later_side_by_side():
    parts = {  # [wall, CPU] per round, the warm-up round first
        "agop (torch's threads)": [[99.0, 99.0], [40.0, 70.0], [42.0, 71.0], [41.0, 69.0]],
        "pga (torch's threads)": [[99.0, 99.0], [50.0, 85.0], [49.0, 86.0], [52.0, 88.0]],
        "agop (one core, beside pga)": [[99.0, 99.0], [56.0, 55.0], [57.0, 56.0], [58.0, 57.0]],
        "pga (one core, beside agop)": [[99.0, 99.0], [71.0, 70.0], [55.0, 54.0], [72.0, 71.0]],
    }
    seq, ovl = bro.case_timings(parts)
    assert seq.times == [90.0, 91.0, 93.0] and seq.cpu == [155.0, 157.0, 157.0]  # warm-up dropped
    assert ovl.times == [71.0, 57.0, 72.0] and ovl.cpu == [125.0, 110.0, 128.0]
    assert seq.best == 90.0 and ovl.median == pytest.approx(71.0)
