"""The machine's faults are one line, never a traceback (issue 33): a full device (`> /dev/full`),
a closed pipe, an output that cannot encode a character, SIGTERM (handled like Ctrl-C: the
results file's lock is removed, the finished jobs kept), Ctrl-C during start-up."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tests.helpers as H
from tl_geometry import cli

CALL = "from tl_geometry.cli import main; raise SystemExit(main({argv!r}))"


def _env(tmp_path, **extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [H.ROOT, env.get("PYTHONPATH", "")] if p)
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", TLG_LOAD_LOG=str(tmp_path / "loads.log"))
    env.update(extra)
    return env


def _run(tmp_path, argv, **kw):
    return subprocess.run(
        [sys.executable, "-c", CALL.format(argv=argv)], env=_env(tmp_path, **kw.pop("env", {})), cwd=tmp_path, **kw
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_stdout_on_a_full_device_is_one_line_exit_1(tmp_path):
    with open("/dev/full", "w") as full:
        out = _run(tmp_path, ["metrics"], stdout=full, stderr=subprocess.PIPE, text=True)
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr and "Exception ignored" not in out.stderr
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert lines == ["tl-geometry: error: the disk is full"], out.stderr


def test_an_ascii_terminal_gets_escapes_not_a_lost_run(tmp_path):
    out = _run(tmp_path, ["metrics"], capture_output=True, env={"PYTHONIOENCODING": "ascii"})
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    assert b"Traceback" not in out.stderr
    assert b"\\u03b5" in out.stdout  # ε written as an escape
    out.stdout.decode("ascii")  # every byte is ASCII


def test_sigterm_is_handled_like_ctrl_c(tmp_path):
    """A sweep killed with SIGTERM mid-job: exit 143 with one line, the finished job's record kept,
    the results file's lock removed; a rerun resumes."""
    results = tmp_path / "r.jsonl"
    argv = [
        "sweep", "models", "--models", "tiny-L1", "tiny-L1-b", "--metrics", "shape", "--corpus", "random",
        "--n-seqs", "2", "--seq-len", "8", "--loader", "tests.helpers:tiny_loader", "--out", str(results),
    ]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-c", CALL.format(argv=argv)],
        env=_env(tmp_path, TLG_HANG_ON="tiny-L1-b"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    hang = tmp_path / "loads.log.hang"
    try:
        deadline = time.monotonic() + 120
        while not hang.exists():
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the sweep never reached the hanging job"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err[-2000:]
    assert "Traceback" not in err and "terminated" in err.splitlines()[-1]
    recs = [json.loads(x) for x in results.read_text().splitlines()[1:]]
    assert [r["params"]["model"] for r in recs] == ["tiny-L1"]
    assert not (tmp_path / ".r.jsonl.lock").exists()


@pytest.mark.parametrize(
    "exc, status, words",
    [
        (BrokenPipeError(errno.EPIPE, "Broken pipe"), 141, None),
        (OSError(errno.ENOSPC, "No space left on device", "out/report.json"), 1, "out/report.json: the disk is full"),
        (OSError(errno.ENAMETOOLONG, "File name too long", "x" * 300), 2, "xxx"),
        (OSError(errno.EROFS, "Read-only file system", "/ro/out"), 2, "/ro/out"),
        (KeyboardInterrupt(), 130, "tl-geometry: interrupted"),
        (cli._Terminated(), 143, "tl-geometry: terminated"),
    ],
)
def test_each_fault_is_one_line_with_its_status(monkeypatch, capsys, exc, status, words):
    def boom(argv=None):
        raise exc

    monkeypatch.setattr(cli, "_main", boom)
    monkeypatch.setattr(cli, "_quiet_stdout", lambda: None)  # keep pytest's capture
    assert cli.main([]) == status
    err = capsys.readouterr().err
    if words is None:
        assert err == ""
    else:
        assert len(err.strip().splitlines()) == 1 and words in err


def test_another_os_error_is_a_bug_and_propagates(monkeypatch):
    def boom(argv=None):
        raise OSError(errno.EBADF, "Bad file descriptor")

    monkeypatch.setattr(cli, "_main", boom)
    with pytest.raises(OSError):
        cli.main([])
