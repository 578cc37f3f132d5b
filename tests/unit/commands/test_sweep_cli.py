"""``tl-geometry sweep models``: the CLI over tl_geometry.runs.sweeps."""

import pytest

from tl_geometry.cli import main
from tl_geometry.commands._sweep_models import _parse_options
from tl_geometry.runtime.jobs import read_records

BASE = [
    "sweep",
    "models",
    "--metrics",
    "shape",
    "--corpus",
    "random",
    "--n-seqs",
    "2",
    "--seq-len",
    "8",
    "--loader",
    "tests.helpers:tiny_loader",
]


def test_models_sweep_runs_resumes_and_reports_failures(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    rc = main(BASE + ["--models", "tiny-L1", "--seeds", "0", "1", "--out", str(out), "--csv", str(tmp_path / "r.csv")])
    assert rc == 0
    assert "2 ran, 0 already done, 0 failed" in capsys.readouterr().out
    recs = read_records(out)
    assert sorted((r["params"]["model"], r["params"]["seed"]) for r in recs) == [("tiny-L1", 0), ("tiny-L1", 1)]
    assert (tmp_path / "r.csv").read_text().startswith("model,")
    rc = main(BASE + ["--models", "tiny-L1", "bogus", "--seeds", "0", "1", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 1 and "0 ran, 2 already done, 2 failed" in text  # "bogus" fails for both seeds
    assert "FAILED bogus checkpoint=None seed=0: ValueError: tiny_loader: unknown model name 'bogus'" in text


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--models", "a", "--option", "pga.k"], "--option must look like METRIC.NAME=VALUE"),
        (["--models", "a", "--metrics", "nope"], "unknown metric 'nope'"),
        (["--models", "a", "--n-seqs", "0"], "n_seqs must be a positive int"),
        (["--models", "a", "--loader", "not a loader"], "loader must look like"),
        (["--models", "a", "--working-dir", "."], "need --executor ray"),
        (["--models", "a", "--address", "auto"], "need --executor ray"),
        (["--models", "a", "--executor", "ray", "--runtime-env", "[1]"], "--runtime-env must be a JSON object"),
        (["--models", "a", "--executor", "ray", "--working-dir", "/no/such/dir"], "is not a directory"),
        (["--models", "a", "--executor", "ray", "--device", "cuda"], "device='cuda' with num_gpus=0"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys, argv, match):
    rc = main(["sweep", "models", "--out", str(tmp_path / "r.jsonl")] + argv)
    err = capsys.readouterr().err
    assert rc == 2 and match in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.jsonl").exists()


def test_zoo_model_with_checkpoint_is_recorded_as_error(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    rc = main(
        [
            "sweep",
            "models",
            "--models",
            "smollm2-135m",
            "--checkpoints",
            "1000",
            "--metrics",
            "shape",
            "--out",
            str(out),
        ]
    )
    assert rc == 1
    (rec,) = read_records(out)
    assert rec["status"] == "error" and "offline zoo model without training checkpoints" in rec["error"]


def test_parse_options():
    assert _parse_options(["pga.k=50", "pga.ccr=[0,1]", "agop.space=output", "x.flag=true"]) == {
        "pga": {"k": 50, "ccr": [0, 1]},
        "agop": {"space": "output"},
        "x": {"flag": True},
    }
    assert _parse_options(None) == {}
    # values are data, never code
    assert _parse_options(["a.b=__import__('os').system('x')"]) == {"a": {"b": "__import__('os').system('x')"}}


def test_gpu_request_without_gpus_exits_2_naming_the_resources(tmp_path, capsys):
    """The issue's hang: --num-gpus 1 on a node without GPUs. Now: exit 2 with the reason, nothing written."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("needs to start its own Ray cluster")
    out = tmp_path / "r.jsonl"
    rc = main(BASE + ["--models", "tiny-L1", "--executor", "ray", "--num-gpus", "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "num_gpus=1 but the Ray cluster has 0 GPU(s)" in err
    assert not out.exists() and not ray.is_initialized()
