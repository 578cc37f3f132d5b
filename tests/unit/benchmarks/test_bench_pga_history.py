"""bench_pga_history's pure part: the reference row names what the reference computes."""

from benchmarks import bench_pga_history as B


def test_the_reference_row_says_before_the_error_bars_only_for_that_commit():
    assert B._ref_label(B.BEFORE_ERRORS) == "z alone, before the error bars"
    for later in ("8a475ab", "HEAD", "main"):
        label = B._ref_label(later)
        assert "before the error bars" not in label and "default" in label
