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
        (["report", "--n-seqs", "0"], "--n-seqs must be an integer >= 1, got 0"),
        (["report", "--metrics", "shapee"], "unknown metric 'shapee'"),
        (["report", "--n-null", "1"], "--n-null must be an integer >= 2, got 1"),
        (["report", "--n-probes", "0"], "--n-probes must be an integer >= 2, got 0"),
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


@pytest.mark.needs_hooked
def test_model_too_big_is_refused_with_estimate(monkeypatch, tmp_path, capsys):
    from tests.helpers import tiny_config
    from tl_geometry.runs import pipeline

    big = tiny_config(n_layers=80, d_model=8192, d_head=128, n_heads=64, d_mlp=28672, d_vocab=128256, n_ctx=128)
    monkeypatch.setattr(pipeline, "config_for", lambda name: big)
    assert (
        main(
            [
                "report",
                "--model",
                "meta-llama/Llama-2-70b-hf",
                "--metrics",
                "shape",
                "--max-memory-gb",
                "16",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "needs about" in err and "GiB" in err and "16.0 GiB is available" in err


def _no_load(*args, **kwargs):
    raise AssertionError("the model was loaded before the inputs were checked")


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--corpus", "/nonexistent/corpus.txt"], "corpus '/nonexistent/corpus.txt': no such source"),
        (["--max-points", "1"], "--max-points must be an integer >= 2, got 1"),
        (["--n-null", "1"], "--n-null must be an integer >= 2, got 1"),
        (["--refit-nulls", "-1"], "--refit-nulls must be an integer >= 0, got -1"),
        (["--n-probes", "1"], "--n-probes must be an integer >= 2, got 1"),
        (["--seq-len", "1"], "--seq-len must be an integer >= 2, got 1"),
        (["--seed", "-1"], "seed must be a non-negative integer"),
        (["--device", "gpu"], "not a torch device"),
        (["--max-memory-gb", "0"], "--max-memory-gb must be a positive number"),
        (["--metrics", "shape", "shape"], "more than once"),
    ],
)
def test_report_checks_inputs_before_loading(argv, match, tmp_path, monkeypatch, capsys):
    from tl_geometry import models

    monkeypatch.setattr(models, "load", _no_load)
    assert main(["report", "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "\n" not in err
    assert not (tmp_path / "o").exists()


def test_report_unwritable_out_one_line_before_load(tmp_path, monkeypatch, capsys):
    import errno

    from tl_geometry import models
    from tl_geometry.io import outfile

    def denied(folder):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(models, "load", _no_load)
    monkeypatch.setattr(outfile, "_mkstemp", denied)  # the writability probe's, where it is looked up
    assert main(["report", "--out", str(tmp_path / "o"), "--metrics", "shape"]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot write to the folder" in err and "permission denied" in err and "\n" not in err


def test_report_into_a_directory_in_use_refused(tmp_path, monkeypatch, capsys):
    import os

    from tl_geometry import models
    from tl_geometry.io.outdir import OutputLock

    monkeypatch.setattr(models, "load", _no_load)
    with OutputLock(tmp_path):
        assert main(["report", "--out", str(tmp_path), "--force", "--metrics", "shape"]) == 2
    err = capsys.readouterr().err
    assert f"in use by another tl-geometry run (pid {os.getpid()}" in err


def _saved(tmp_path, name, report):
    path = tmp_path / name
    report.to_json(path)
    return str(path)


def test_render_refuses_two_runs_of_the_same_model(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from tests.helpers import make_report

    full = _saved(tmp_path, "full.json", make_report(families=("activations",), n_layers=4, seed=0, status="complete"))
    fast = _saved(tmp_path, "fast.json", make_report(families=("activations",), n_layers=4, seed=1, fast=True))
    assert main(["render", full, fast, "--out", str(tmp_path / "page")]) == 2
    err = capsys.readouterr().err
    assert "separate runs of the same model" in err and "for model synthetic-4L" in err and "agop.aofe," in err
    assert not (tmp_path / "page").exists()
    assert main(["render", full, full, "--out", str(tmp_path / "page")]) == 2
    assert "more than once" in capsys.readouterr().err


def test_render_combines_different_metrics_keeping_each_provenance(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    import json

    from tests.helpers import make_report

    act = _saved(tmp_path, "act.json", make_report(families=("activations",), corpus="pydoc", status="complete"))
    sae = _saved(
        tmp_path,
        "sae.json",
        make_report(families=("sae",), corpus="shakespeare", status="interrupted", missing_metrics=["sae"]),
    )
    assert main(["render", act, sae, "--out", str(tmp_path / "page"), "--dpi", "30"]) == 0
    assert "status: interrupted" in capsys.readouterr().err
    prov = json.loads((tmp_path / "page" / "report.json").read_text())["provenance"]
    assert prov["status"] == "interrupted" and prov["partial_sources"] == [sae]  # worst of the inputs
    assert "corpus" not in prov  # the inputs disagree: no single value for the page
    assert [s["corpus"] for s in prov["sources"]] == ["pydoc", "shakespeare"]
    assert 'class="banner"' in (tmp_path / "page" / "index.html").read_text()


def test_family_flags_set_only_the_metrics_being_run(tmp_path, monkeypatch, capsys):
    """A size flag goes to every metric being run that takes the keyword, and to no other (an
    option for a metric that is not run would be refused)."""
    from tl_geometry.runs import pipeline

    seen = {}

    def fake_run(req):
        seen["given"] = {m: dict(o) for m, o in req.request.given.items()}
        raise KeyboardInterrupt  # stop here: the request is what this test checks

    monkeypatch.setattr(pipeline, "run", fake_run)
    assert (
        main(["report", "--metrics", "pga", "--max-points", "64", "--n-null", "4", "--out", str(tmp_path / "o")]) == 130
    )
    assert seen["given"] == {"pga": {"max_points": 64, "n_null": 4}}
    assert main(["report", "--metrics", "pga", "spectral", "--refit-nulls", "9", "--out", str(tmp_path / "o")]) == 130
    assert seen["given"] == {"pga": {"refit_nulls": 9}}
    assert main(["report", "--n-probes", "4", "--out", str(tmp_path / "o")]) == 130  # nfa is not run by default
    assert seen["given"] == {"agop": {"n_probes": 4}}
    assert main(["report", "--metrics", "shape", "--n-null", "4", "--out", str(tmp_path / "o")]) == 2
    assert "--n-null applies to pga, none of which is being run" in capsys.readouterr().err
