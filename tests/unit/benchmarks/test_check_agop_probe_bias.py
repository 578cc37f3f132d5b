"""benchmarks/check_agop_probe_bias.py: its deviations against a slow reference, and its --small run."""

from __future__ import annotations

import types

import pytest

from benchmarks import check_agop_probe_bias as cab


def _stat(aofe, aofe_deb, ratio, ratio_deb, se_a, se_r):
    return types.SimpleNamespace(
        aofe=aofe, aofe_debiased=aofe_deb, ratio=ratio, ratio_debiased=ratio_deb, aofe_stderr=se_a, ratio_stderr=se_r
    )


def test_deviations_divide_by_the_runs_own_error():
    ref = {"a": _stat(10.0, 9.0, 0.5, 0.4, 1.0, 0.1), "b": _stat(20.0, 18.0, 0.6, 0.5, 2.0, 0.2)}
    runs = {1: {"a": _stat(12.0, 9.5, 0.55, 0.38, 2.0, 0.05), "b": _stat(21.0, 17.0, 0.8, 0.5, 4.0, 0.1)}}
    got = cab.deviations(ref, runs)
    assert got["aofe"][1] == pytest.approx([(12 - 10) / 2, (21 - 20) / 4])
    assert got["aofe_debiased"][1] == pytest.approx([(9.5 - 9) / 2, (17 - 18) / 4])  # the AOFE's error
    assert got["ratio"][1] == pytest.approx([(0.55 - 0.5) / 0.05, (0.8 - 0.6) / 0.1])
    assert got["ratio_debiased"][1] == pytest.approx([(0.38 - 0.4) / 0.05, 0.0])  # the ratio's error


def test_a_json_destination_in_a_missing_folder_is_refused_before_any_work(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cab.main(["--small", "--json", str(tmp_path / "nowhere" / "out.json")])
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.slow
def test_small_runs(capsys):
    assert cab.main(["--small"]) == 0
    out = capsys.readouterr().out
    assert "aofe_debiased" in out and "seed 2" in out
