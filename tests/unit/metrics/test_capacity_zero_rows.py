"""ZeroRowsWarning: most rows dropped as zero (e.g. float16 underflow) is said, not silent."""

import warnings

import pytest
import torch

import tl_geometry as tg
from tl_geometry.metrics.capacity import SimilarityAccumulator, ZeroRowsWarning


def _tiny(scale, n=50, d=64, seed=0):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * scale


def test_float16_underflow_warns_with_counts_and_remedy():
    x32 = _tiny(1e-8).float()
    x16 = x32.half()  # most entries fall below float16's smallest subnormal
    n_zero = int((x16.float().norm(dim=1) == 0).sum())  # reference: rows that became exactly 0
    assert n_zero * 2 > len(x16)  # the case under test: most rows
    with pytest.warns(
        ZeroRowsWarning,
        match=rf"{n_zero} of 50 rows have norm 0 .* remaining {50 - n_zero} rows.*torch.float16.*float32",
    ):
        st = tg.similarity_stats(x16, progress=False)
    assert st.n_dropped == n_zero
    # the remedy works: in float32 nothing is dropped and no warning is raised
    with warnings.catch_warnings():
        warnings.simplefilter("error", ZeroRowsWarning)
        ok = tg.similarity_stats(x32, progress=False)
    assert ok.n_dropped == 0 and ok.n_vectors == 50


def test_accumulator_warns_too_and_bfloat16_is_named():
    x = torch.zeros(10, 8)
    x[:3] = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    acc = SimilarityAccumulator()
    acc.update(x[:5].bfloat16())
    acc.update(x[5:])
    with pytest.warns(ZeroRowsWarning, match="7 of 10 rows .*torch.bfloat16"):
        acc.compute()


def test_a_few_padding_rows_do_not_warn_and_zero_rows_in_float32_warn_without_dtype_hint():
    x = torch.randn(20, 8, generator=torch.Generator().manual_seed(2))
    x[:10] = 0  # exactly half: not "most"
    with warnings.catch_warnings():
        warnings.simplefilter("error", ZeroRowsWarning)
        tg.similarity_stats(x, progress=False)
    x[10] = 0
    with pytest.warns(ZeroRowsWarning, match="11 of 20 rows.*not zeroed or underflowed upstream") as rec:
        tg.similarity_stats(x, progress=False)
    assert "float16" not in str(rec[0].message)


def test_all_rows_underflowed_error_says_why():
    with pytest.raises(
        ValueError, match=r"got 0 \(of 50 rows\); the input was torch.float16: small values may have underflowed"
    ):
        tg.similarity_stats(_tiny(1e-9).half(), progress=False)
