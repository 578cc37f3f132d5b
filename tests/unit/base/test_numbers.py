"""tl_geometry.base.numbers.fmt_number: the one number formatter, in each style its callers pass."""

import math

import numpy as np
import pytest

from tl_geometry.base.numbers import fmt_number


@pytest.mark.parametrize(
    "v, text",
    [
        (0.123456, "0.123"),
        (12.3456, "12.3"),
        (0.0, "0"),
        (123456.0, "1.23e+05"),
        (0.000999, "9.99e-04"),
        (float("nan"), "nan"),
        (float("-inf"), "-inf"),
        (None, "None"),
        (np.float32(0.5), "0.5"),
        ("x", "x"),
        (True, "True"),
    ],
)
def test_the_default_style_is_the_readings(v, text):
    assert fmt_number(v) == text


def test_digits_and_scientific_bounds():
    assert fmt_number(0.123456, 2) == "0.12" and fmt_number(123456.0, 4) == "1.235e+05"
    assert fmt_number(5e-4, 4, small=1e-4) == "0.0005" and fmt_number(5e-4, 4) == "5.000e-04"
    assert fmt_number(12345.0, 3, big=1e4, sci_digits=2) == "1.23e+04"
    assert fmt_number(1e-7, 6, big=math.inf, small=0.0) == "1e-07"  # g only, as format_value


def test_page_style():
    page = dict(sci_digits=2, big=1e4, none="—", nonfinite="—", below_one="decimals", ints="plain")
    assert [fmt_number(v, 3, **page) for v in (None, float("nan"), 0.5, 2.5, 12345.0, 123456)] == [
        "—",
        "—",
        "0.500",
        "2.5",
        "1.23e+04",
        "123456",
    ]


def test_reproduce_style():
    repro = dict(sci_digits=3, big=1e6, none="—", ints="grouped")
    got = [fmt_number(v, 6, **repro) for v in (None, True, 12345, 123456789, 0.1234567, 2e6, float("nan"))]
    assert got == ["—", "True", "12,345", "1.23e+08", "0.123457", "2.000e+06", "nan"]
    assert fmt_number(np.int64(12345), 6, **repro) == "12,345"
