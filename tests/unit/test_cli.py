import pytest

from tl_geometry.cli import main


def test_metrics_lists_builtins(capsys):
    assert main(["metrics"]) == 0
    assert "shape" in capsys.readouterr().out


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "report" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, match",
    [
        (["report", "--n-seqs", "0"], "--n-seqs must be >= 1"),
        (["report", "--metrics", "shapee"], "unknown metric 'shapee'"),
        (["report", "--n-null", "1"], "--n-null must be >= 2"),
        (["report", "--n-probes", "0"], "--n-probes must be >= 2"),
    ],
)
def test_bad_arguments_one_line(argv, match, capsys, tmp_path):
    assert main(argv + ["--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "\n" not in err


def test_existing_out_dir_refused(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("mine")
    assert main(["report", "--out", str(tmp_path), "--metrics", "shape"]) == 2
    assert "--force" in capsys.readouterr().err
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["report", "--n-seqs", "many"])
    assert e.value.code == 2


def test_model_too_big_is_refused_with_estimate(monkeypatch, tmp_path, capsys):
    from tiny_models import tiny_config
    from tl_geometry import pipeline

    big = tiny_config(n_layers=80, d_model=8192, d_head=128, n_heads=64, d_mlp=28672, d_vocab=128256, n_ctx=128)
    monkeypatch.setattr(pipeline, "config_for", lambda name: big)
    assert main(["report", "--model", "meta-llama/Llama-2-70b-hf", "--metrics", "shape",
                 "--max-memory-gb", "16", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "needs about" in err and "GiB" in err and "16.0 GiB is available" in err
