"""Crash safety: SIGKILL a real sweep process in the middle of a job, resume, check exactly-once.

The sweep runs in a subprocess (``python -c``) with the ``tests.helpers:tiny_loader`` loader,
which hangs on the job named by ``TLG_HANG_ON`` after writing a marker file. We SIGKILL the
process while it hangs (mid-job, after earlier jobs were recorded), then resume with the same
results file and no hang.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests import helpers as H

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

MODELS = ["tiny-L1", "tiny-L2", "tiny-L1-b", "tiny-L2-b"]
SCRIPT = """
import sys, json
from tl_geometry.runs.sweeps import sweep
jobs = [dict(model=m, corpus="random", n_seqs=2, seq_len=8, loader="tests.helpers:tiny_loader")
        for m in json.loads(sys.argv[1])]
s = sweep(jobs, metrics=["shape", "epsilon"], out=sys.argv[2], progress=False)
print(json.dumps(s.to_dict()))
"""


def _env(tmp_path, **extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [H.ROOT, env.get("PYTHONPATH", "")] if p)
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", TLG_LOAD_LOG=str(tmp_path / "loads.log"))
    env.pop("TLG_HANG_ON", None)
    env.update(extra)
    return env


def _lines(path):
    """The record lines (after the results file's header line)."""
    lines = [l for l in open(path, encoding="utf-8").read().split("\n") if l]
    assert "tl_geometry_results" in json.loads(lines[0])
    return lines[1:]


def test_sigkill_mid_job_then_resume_is_exactly_once(tmp_path, monkeypatch):
    out = tmp_path / "results.jsonl"
    hang = tmp_path / "loads.log.hang"
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, json.dumps(MODELS), str(out)],
        env=_env(tmp_path, TLG_HANG_ON="tiny-L1-b"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not hang.exists():
            assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
            assert time.monotonic() < deadline, "the sweep never reached the hanging job"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    recs = [json.loads(l) for l in _lines(out)]
    assert [r["params"]["model"] for r in recs] == ["tiny-L1", "tiny-L2"]  # the two finished jobs
    # simulate the worst case as well: the kill also tore a record mid-write
    with open(out, "a", encoding="utf-8") as f:
        f.write(json.dumps(dict(recs[0], key="torn"))[:57])  # a torn LAST line: cut off on resume

    # resume (in this process: a fresh process was just exercised by the killed run)
    from tl_geometry.runs.sweeps import sweep

    jobs = [dict(model=m, corpus="random", n_seqs=2, seq_len=8, loader="tests.helpers:tiny_loader") for m in MODELS]
    monkeypatch.setenv("TLG_LOAD_LOG", str(tmp_path / "loads.log"))
    monkeypatch.delenv("TLG_HANG_ON", raising=False)
    summary = sweep(jobs, metrics=["shape", "epsilon"], out=out, progress=False)
    assert len(summary.skipped) == 2 and len(summary.ran) == 2 and not summary.failed

    # the results file is valid JSON lines, each job exactly once, rows whole
    recs = [json.loads(l) for l in _lines(out)]
    assert sorted(r["params"]["model"] for r in recs) == sorted(MODELS)
    assert len({r["key"] for r in recs}) == len(MODELS)
    for r in recs:
        assert r["status"] == "ok"
        n_layers = [row["value"] for row in r["rows"] if row["metric"] == "shape.n_layers"]
        assert n_layers == [float(r["params"]["model"][6])]
        assert any(row["metric"] == "epsilon.W_E" for row in r["rows"])
    # finished jobs were not loaded again; the killed job was redone
    loads = (tmp_path / "loads.log").read_text().split()
    assert loads == ["tiny-L1", "tiny-L2", "tiny-L1-b", "tiny-L1-b", "tiny-L2-b"]
