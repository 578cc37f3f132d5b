"""The report pipeline on a tiny model: partial and interrupted runs keep their results, marked."""

import os

import pytest

import tl_geometry as tg
from tests.helpers import make_byte_model
from tl_geometry.runs.pipeline import run_report


@pytest.fixture
def byte_model():
    return make_byte_model()


def _run(model, metrics, out=None, **kw):
    """``run_report`` on two 16-token sequences, without progress bars."""
    return run_report(model, n_seqs=2, seq_len=16, metrics=metrics, out=out, progress=False, **kw)


@pytest.fixture
def broken_metrics():
    @tg.register_metric("_t_fail", needs="activations")
    def fail(model, tokens, *, hooks=None):
        raise RuntimeError("metric exploded")

    @tg.register_metric("_t_interrupt", needs="weights")
    def interrupt(model, tokens, *, hooks=None):
        raise KeyboardInterrupt

    yield
    tg.unregister_metric("_t_fail")
    tg.unregister_metric("_t_interrupt")


def test_failed_metric_gives_partial_report(byte_model, broken_metrics, tmp_path):
    rep = _run(byte_model, ["shape", "_t_fail", "depth_width"], tmp_path / "r", figures=False)
    assert rep.provenance["status"] == "partial"
    assert "metric exploded" in rep.provenance["errors"]["_t_fail"]
    assert rep.value("shape.d_model") == 32 and "depth_width.ratio" in rep.metrics
    saved = tg.GeometryReport.from_json(tmp_path / "r" / "report.json")
    assert saved.provenance["status"] == "partial" and len(saved) == len(rep)


def test_interrupted_run_keeps_results_marked(byte_model, broken_metrics, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        _run(byte_model, ["shape", "_t_interrupt", "depth_width"], tmp_path / "r", figures=False)
    saved = tg.GeometryReport.from_json(tmp_path / "r" / "report.json")
    assert saved.provenance["status"] == "interrupted"
    assert "shape.n_layers" in saved.metrics and "depth_width.ratio" not in saved.metrics


def test_complete_run_with_figures(byte_model, tmp_path):
    rep = _run(byte_model, ["shape", "epsilon", "spectral"], tmp_path / "r")
    assert rep.provenance["status"] == "complete" and rep.provenance["n_tokens"] == 32
    files = {p.name for p in (tmp_path / "r").iterdir()}
    assert {"report.json", "report.md", "index.html", "spectral.png"} <= files


# ------------------------------------------------------------------ the swap: never lose a report


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")}


def _assert_marked(folder, status):
    """Every file a person opens says the run did not finish."""
    import json

    assert json.loads((folder / "report.json").read_text())["provenance"]["status"] == status
    assert "Partial results." in (folder / "report.md").read_text()
    assert 'class="banner"' in (folder / "index.html").read_text()


def test_fresh_interrupted_run_is_marked_in_every_file(byte_model, broken_metrics, tmp_path):
    out = tmp_path / "r"
    with pytest.raises(KeyboardInterrupt):
        _run(byte_model, ["shape", "_t_interrupt", "depth_width"], out)
    _assert_marked(out, "interrupted")  # no previous report: the partial one is promoted, marked
    assert "depth_width" in tg.GeometryReport.from_json(out / "report.json").provenance["missing_metrics"]
    assert not (out / "partial-run").exists() and not (out / ".tl-geometry.lock").exists()


def test_interrupted_force_run_keeps_the_previous_report(byte_model, broken_metrics, tmp_path):
    out = tmp_path / "r"
    _run(byte_model, ["shape", "spectral"], out)
    before = _snapshot(out)
    assert "spectral.png" in before and "index.html" in before
    with pytest.raises(KeyboardInterrupt):
        _run(byte_model, ["shape", "_t_interrupt", "spectral"], out, force=True)
    assert _snapshot(out) == before  # byte for byte: report.json, report.md, index.html, PNGs
    _assert_marked(out / "partial-run", "interrupted")
    assert not (out / ".tl-geometry.lock").exists()
    # the next complete run replaces both
    _run(byte_model, ["shape"], out, force=True)
    assert tg.GeometryReport.from_json(out / "report.json").provenance["status"] == "complete"
    assert not (out / "partial-run").exists() and not (out / "spectral.png").exists()


def test_failed_metric_is_marked_in_every_file(byte_model, broken_metrics, tmp_path):
    _run(byte_model, ["shape", "_t_fail"], tmp_path / "r", figures=False)
    _assert_marked(tmp_path / "r", "partial")
    assert "metric exploded" in (tmp_path / "r" / "index.html").read_text()


_KILL_SCRIPT = r"""
import os, sys, time
import tl_geometry as tg
from tests.helpers import make_byte_model
from tl_geometry.runs.pipeline import run_report

@tg.register_metric("_t_hang", needs="weights")
def hang(model, tokens, *, hooks=None):
    open(sys.argv[2], "w").close()  # tell the test we are inside the run
    time.sleep(120)

m = make_byte_model()
run_report(m, n_seqs=2, seq_len=16, metrics=["shape", "_t_hang", "depth_width"], out=sys.argv[1],
           force=True, progress=False)
"""


def test_sigkilled_force_run_keeps_the_previous_report(byte_model, tmp_path):
    """A real process killed with SIGKILL in the middle of a --force run: nothing of the
    previous report changes; the killed run's partial report is marked; its lock is taken over."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    out = tmp_path / "r"
    _run(byte_model, ["shape", "spectral"], out)
    before = _snapshot(out)
    script = tmp_path / "kill_me.py"
    script.write_text(_KILL_SCRIPT)
    ready = tmp_path / "ready"
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(out), str(ready)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert proc.poll() is None, proc.stdout.read().decode()
            assert time.monotonic() < deadline, "the child never reached the metric"
            time.sleep(0.1)
        # while it runs, a second run into the same directory is refused, naming the owner
        from tl_geometry.io.outdir import OutputLockedError

        with pytest.raises(OutputLockedError, match=f"pid {proc.pid}"):
            _run(byte_model, ["shape"], out, force=True)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _snapshot(out) == before
    _assert_marked(out / "partial-run", "running")  # written after "shape", before the kill
    assert "pid=" in (out / ".tl-geometry.lock").read_text()  # left by the dead process
    _run(byte_model, ["shape"], out, force=True)
    assert tg.GeometryReport.from_json(out / "report.json").provenance["status"] == "complete"
    assert not (out / "partial-run").exists() and not (out / ".tl-geometry.lock").exists()


# ------------------------------------------------------------------ the lock


def test_second_run_into_a_locked_directory_is_refused(byte_model, tmp_path, monkeypatch):
    from tl_geometry import models
    from tl_geometry.io.outdir import OutputLock, OutputLockedError

    out = tmp_path / "r"
    out.mkdir()
    monkeypatch.setattr(models, "load", _no_load)
    with OutputLock(out):  # another run holds it (flock on its own open file)
        with pytest.raises(OutputLockedError, match=r"in use by another tl-geometry run \(pid \d+"):
            run_report("smollm2-135m", metrics=["shape"], out=out, force=True, progress=False)
        with pytest.raises(OutputLockedError, match="in use"):  # the render path too
            from tl_geometry.render.html import write_outputs

            write_outputs(tg.GeometryReport.from_rows([], model="m"), out, force=True)
    assert [p.name for p in out.iterdir()] == []  # released and removed


def test_stale_lock_of_a_dead_process_is_taken_over(byte_model, tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    (out / ".tl-geometry.lock").write_text("pid=999999999\nhost=elsewhere\nstarted=yesterday\n")
    rep = _run(byte_model, ["shape"], out)
    assert rep.provenance["status"] == "complete" and (out / "report.json").is_file()
    assert not (out / ".tl-geometry.lock").exists()


# ------------------------------------------------------------------ every input before the model


def _no_load(*args, **kwargs):
    raise AssertionError("the model was loaded before the inputs were checked")


def _bad_inputs(tmp_path):
    """(run_report kwargs, error type, message) for every bad input we check before loading."""
    from tl_geometry.io.outdir import OutputExistsError

    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    ok = dict(out=tmp_path / "o", metrics=["shape"])
    return [
        (dict(ok, corpus="/nonexistent/corpus.txt"), ValueError, "as a file path it does not exist"),
        (dict(ok, corpus=str(tmp_path)), ValueError, "as a file path it is a directory"),
        (dict(ok, corpus=str(empty)), ValueError, "holds no text"),
        (dict(ok, corpus=b"bytes"), TypeError, "not bytes"),
        (dict(ok, corpus=[1, 2]), TypeError, "must yield strings"),
        (dict(ok, metrics=["shapee"]), KeyError, "unknown metric 'shapee'"),
        (dict(ok, metrics=[]), ValueError, "no metrics chosen"),
        (dict(ok, metrics=["shape", "shape"]), ValueError, "more than once"),
        (dict(ok, metrics=["pga"], options={"pga": {"n_null": 1}}), ValueError, "n_null=1 for metric 'pga'"),
        (dict(ok, metrics=["pga"], options={"pga": {"max_points": 1}}), ValueError, "max_points=1"),
        (
            dict(ok, metrics=["epsilon_activations"], options={"epsilon_activations": {"max_points": 0}}),
            ValueError,
            "max_points=0",
        ),
        (dict(ok, metrics=["agop"], options={"agop": {"n_probes": 1}}), ValueError, "n_probes=1 for metric 'agop'"),
        (dict(ok, metrics=["nfa"], options={"nfa": {"n_probes": 0}}), ValueError, "n_probes=0 for metric 'nfa'"),
        (dict(ok, metrics=["pga"], options={"pga": {"k": 0}}), ValueError, "option k=0"),
        (dict(ok, metrics=["pga"], options={"pga": {"ccr": [-1]}}), ValueError, "ccr"),
        (dict(ok, metrics=["pga"], options={"pga": {"n_nul": 5}}), ValueError, "did you mean 'n_null'"),
        (dict(ok, metrics=["pga"], options={"pga": 5}), ValueError, "must be a mapping"),
        (dict(ok, options={"pga": {"n_null": 5}}), ValueError, "not being run"),
        (dict(ok, n_seqs=0), ValueError, "n_seqs must be an integer >= 1"),
        (dict(ok, seq_len=1), ValueError, "seq_len must be an integer >= 2"),
        (dict(ok, n_seqs=True), ValueError, "n_seqs must be an integer"),
        (dict(ok, seed=-1), ValueError, "seed must be a non-negative integer"),
        (dict(ok, device="gpu"), ValueError, "not a torch device"),
        (dict(ok, max_memory_gb=0), ValueError, "max_memory_gb must be a positive number"),
        (dict(ok, out=a_file), NotADirectoryError, "exists and is not a directory"),
        (dict(ok, out=a_file / "sub"), NotADirectoryError, "is not a directory"),
        (dict(ok, out=full), OutputExistsError, "pass force=True"),
    ]


def test_every_bad_input_is_refused_before_the_model_loads(tmp_path, monkeypatch):
    from tl_geometry import models

    monkeypatch.setattr(models, "load", _no_load)
    cases = _bad_inputs(tmp_path)
    for kwargs, exc, match in cases:
        with pytest.raises(exc, match=match):
            run_report("smollm2-135m", progress=False, **kwargs)
    assert not (tmp_path / "o").exists()  # nothing created by a refused run
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["keep.txt"]
    assert len(cases) == 27


def test_cuda_device_without_cuda_refused(tmp_path, monkeypatch):
    import torch

    from tl_geometry import models

    monkeypatch.setattr(models, "load", _no_load)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="CUDA is not available"):
        run_report("smollm2-135m", metrics=["shape"], device="cuda", out=tmp_path / "o", progress=False)


def test_unwritable_output_directory_refused_before_load(tmp_path, monkeypatch):
    """A directory that refuses new files (simulated: the probe file gets EACCES, as for a
    read-only directory or mount; root ignores permission bits, so chmod alone cannot show it)."""
    import errno

    from tl_geometry import models
    from tl_geometry.io import outdir, outfile

    def denied(folder):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(models, "load", _no_load)
    monkeypatch.setattr(outfile, "_mkstemp", denied)  # the writability probe's, where it is looked up
    for out in (tmp_path / "ro", tmp_path / "ro" / "new" / "deeper"):
        (tmp_path / "ro").mkdir(exist_ok=True)
        with pytest.raises(outdir.OutputNotWritableError, match="cannot write to the .*permission denied"):
            run_report("smollm2-135m", metrics=["shape"], out=out, force=True, progress=False)
    assert not (tmp_path / "ro" / "new").exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_directory_refused_for_real(tmp_path, monkeypatch):
    from tl_geometry import models
    from tl_geometry.io import outdir

    monkeypatch.setattr(models, "load", _no_load)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(outdir.OutputNotWritableError, match="cannot write"):
            run_report("smollm2-135m", metrics=["shape"], out=ro, force=True, progress=False)
    finally:
        ro.chmod(0o755)


# ------------------------------------------------------------------ modes, progress, provenance


@pytest.mark.parametrize("umask, file_mode, dir_mode", [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750)])
def test_report_files_follow_the_umask(byte_model, tmp_path, umask, file_mode, dir_mode):
    import os
    import stat

    old = os.umask(umask)
    try:
        _run(byte_model, ["shape", "spectral"], tmp_path / "r")
    finally:
        os.umask(old)
    out = tmp_path / "r"
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert {"report.json", "report.md", "index.html", "spectral.png"} <= set(modes)
    assert modes == {name: file_mode for name in modes}, modes
    assert stat.S_IMODE(out.stat().st_mode) == dir_mode


def test_progress_false_silences_the_metrics_own_bars(byte_model, tmp_path, capsys):
    kw = dict(n_seqs=2, seq_len=16, metrics=["agop"], options={"agop": {"n_probes": 2}})
    run_report(byte_model, progress=True, **kw)
    assert "agop" in capsys.readouterr().err  # the bar this test looks for does exist
    run_report(byte_model, progress=False, **kw)
    assert capsys.readouterr().err == ""
    tg.analyze(
        byte_model,
        tg.corpus.tokens(byte_model, n_seqs=2, seq_len=16),
        metrics=["agop"],
        options={"agop": {"n_probes": 2}},
        progress=False,
    )
    assert capsys.readouterr().err == ""


def test_transformer_lens_version_recorded(byte_model):
    from importlib.metadata import version

    rep = _run(byte_model, ["shape"])
    assert rep.provenance["transformer_lens_version"] == version("transformer_lens") != "?"
