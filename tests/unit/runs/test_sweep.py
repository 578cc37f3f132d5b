"""tl_geometry.runs.sweeps: resumable multi-model sweeps, local and Ray executors."""

import gc
import os
import sys
import weakref

import pytest

from tests import helpers as H
from tl_geometry.runs.sweeps import SweepJob, SweepSummary, sweep, sweep_report
from tl_geometry.runtime.jobs import read_records

JOBS = [
    dict(model="tiny-L1", corpus="random", n_seqs=2, seq_len=8, loader="tests.helpers:tiny_loader"),
    dict(model="tiny-L2", corpus="random", n_seqs=2, seq_len=8, loader="tests.helpers:tiny_loader"),
]


def _ok_rows(path):
    return {r["params"]["model"]: r["rows"] for r in read_records(path) if r["status"] == "ok"}


def _shape_value(rows, name):
    (v,) = [r["value"] for r in rows if r["metric"] == name]
    return v


@pytest.fixture
def load_log(tmp_path, monkeypatch):
    log = tmp_path / "loads.log"
    monkeypatch.setenv("TLG_LOAD_LOG", str(log))
    return lambda: log.read_text().split() if log.exists() else []


def test_sweep_runs_each_job_and_resumes(tmp_path, load_log):
    out = tmp_path / "r.jsonl"
    s = sweep(JOBS, metrics=["shape"], out=out, progress=False)
    assert isinstance(s, SweepSummary) and len(s.ran) == 2 and not s.failed and not s.skipped
    rows = _ok_rows(out)
    assert _shape_value(rows["tiny-L1"], "shape.n_layers") == 1
    assert _shape_value(rows["tiny-L2"], "shape.n_layers") == 2
    assert {r["model"] for r in rows["tiny-L2"]} == {"tiny-L2"}  # rows named after the job
    # one line per job, the job's rows whole in that line
    assert len(open(out).read().splitlines()) == 3  # the header line, then one line per job
    # rerun: nothing loaded, everything skipped
    s2 = sweep(JOBS, metrics=["shape"], out=out, progress=False)
    assert s2.ran == () and len(s2.skipped) == 2
    assert load_log() == ["tiny-L1", "tiny-L2"]
    # adding a job runs only that job
    s3 = sweep(JOBS + [dict(JOBS[0], model="tiny-L3")], metrics=["shape"], out=out, progress=False)
    assert len(s3.ran) == 1 and load_log()[-1] == "tiny-L3"
    rep = s3.report()
    assert sorted(r.value for r in rep.filter("shape.n_layers").rows) == [1, 2, 3]


def test_changing_metrics_reruns_the_job(tmp_path, load_log):
    out = tmp_path / "r.jsonl"
    sweep(JOBS[:1], metrics=["shape"], out=out, progress=False)
    sweep(JOBS[:1], metrics=["shape", "epsilon"], out=out, progress=False)  # other metrics: a different key
    assert load_log() == ["tiny-L1", "tiny-L1"]
    keys = [r["key"] for r in read_records(out)]
    assert len(set(keys)) == 2


def test_failed_job_recorded_skipped_then_retried_on_request(tmp_path, load_log, monkeypatch):
    out = tmp_path / "r.jsonl"
    monkeypatch.setenv("TLG_FAIL_ON", "tiny-L2")
    s = sweep(JOBS, metrics=["shape"], out=out, progress=False)
    assert len(s.ran) == 1 and len(s.failed) == 1
    (err,) = [r for r in read_records(out) if r["status"] == "error"]
    assert err["error"] == "RuntimeError: planned failure" and "Traceback" in err["traceback"]
    assert sweep_report(out).filter("shape.n_layers").rows[0].value == 1  # errors carry no rows
    s2 = sweep(JOBS, metrics=["shape"], out=out, progress=False)
    assert s2.ran == () and not s2.failed and len(s2.skipped) == 2
    monkeypatch.delenv("TLG_FAIL_ON")
    s3 = sweep(JOBS, metrics=["shape"], out=out, retry_errors=True, progress=False)
    assert len(s3.ran) == 1 and len(s3.skipped) == 1
    assert load_log() == ["tiny-L1", "tiny-L2", "tiny-L2"]
    assert sorted(_ok_rows(out)) == ["tiny-L1", "tiny-L2"]


def test_model_is_freed_after_each_job(tmp_path):
    refs = []

    def loader(job):
        m = H.portable_tiny_model(1)
        refs.append(weakref.ref(m))
        return m

    sweep(
        [dict(model="a", corpus="random", n_seqs=1, seq_len=4), dict(model="b", corpus="random", n_seqs=1, seq_len=4)],
        metrics=["shape"],
        out=tmp_path / "r.jsonl",
        loader=loader,
        progress=False,
    )
    gc.collect()
    assert len(refs) == 2 and all(r() is None for r in refs)


@pytest.mark.parametrize("cycle", [False, True])
@pytest.mark.parametrize("reuse", [True, False])
def test_the_previous_model_is_freed_before_the_next_loads(tmp_path, monkeypatch, cycle, reuse):
    # freed by reference counting, the full collection (0.3 s per job in a process with torch) is skipped;
    # a model held by a reference cycle is collected all the same
    refs, alive_at_load, collects = [], [], []
    real = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *a: collects.append(1) or real(*a))

    def loader(job):
        alive_at_load.append([r() is not None for r in refs])
        m = H.portable_tiny_model(1)
        if cycle:
            m.__dict__["_cycle"] = [m]  # only the garbage collector frees it
        refs.append(weakref.ref(m))
        return m

    jobs = [dict(model=n, corpus="random", n_seqs=1, seq_len=4) for n in ("a", "b")]
    gc.disable()  # no automatic collection: only the sweep's own may free a cycle
    try:
        probe = H.portable_tiny_model(1)  # does this model type hold cycles of its own? (TL 4's bridge does)
        probe_ref = weakref.ref(probe)
        del probe
        needs_gc = cycle or probe_ref() is not None
        real()
        sweep(jobs, metrics=["shape"], out=tmp_path / "r.jsonl", loader=loader, progress=False, reuse_models=reuse)
        assert alive_at_load == [[], [False]]
        assert all(r() is None for r in refs)
    finally:
        gc.enable()
    assert (len(collects) >= 2) if needs_gc else not collects


def test_python_callable_loader_and_plain_names(tmp_path):
    seen = []

    def loader(job):
        seen.append(job)
        return H.portable_tiny_model(1)

    sweep(
        ["m1", SweepJob("m2", corpus="random", n_seqs=1, seq_len=4)],
        metrics=["shape"],
        out=tmp_path / "r.jsonl",
        loader=loader,
        progress=False,
    )
    assert [j["model"] for j in seen] == ["m1", "m2"]
    assert seen[0]["corpus"] == "pydoc" and seen[0]["checkpoint"] is None


def test_loader_errors_are_recorded_not_raised(tmp_path):
    out = tmp_path / "r.jsonl"
    s = sweep([dict(model="x", loader="tl_geometry_no_such_module:load")], metrics=["shape"], out=out, progress=False)
    assert "cannot import loader module" in next(iter(s.failed.values()))
    s = sweep(
        [dict(model="y", loader="tl_geometry.runs.sweeps:no_such_fn")], metrics=["shape"], out=out, progress=False
    )
    assert "has no callable 'no_such_fn'" in next(iter(s.failed.values()))


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(jobs=[], metrics=["shape"]), ValueError, "jobs is empty"),
        (dict(jobs=["a"], metrics=["shape"], executor="dask"), ValueError, "executor must be one of"),
        (dict(jobs=["a", "a"], metrics=["shape"]), ValueError, "duplicate jobs"),
        (dict(jobs=["a"], metrics=["no_such_metric"]), KeyError, "unknown metric 'no_such_metric'"),
        (dict(jobs=["a"], metrics=[]), ValueError, "metrics is empty"),
        (
            dict(jobs=["a"], metrics=["shape"], options={"pga": {}}),
            ValueError,
            "options given for metrics not being run",
        ),
        (dict(jobs=["a"], metrics=["shape"], num_cpus=-1), ValueError, "num_cpus and num_gpus must be >= 0"),
        (dict(jobs=[dict(model="a", batch=3)], metrics=["shape"]), ValueError, r"unknown job fields \['batch'\]"),
        (dict(jobs=[dict(model="a", n_seqs=0)], metrics=["shape"]), ValueError, "n_seqs must be a positive int"),
        (dict(jobs=[dict(model="a", seed=1.5)], metrics=["shape"]), ValueError, "seed must be a non-negative integer"),
        (dict(jobs=[dict(model="")], metrics=["shape"]), ValueError, "model must be a non-empty string"),
        (dict(jobs=[dict(model="a", loader="os.system('x')")], metrics=["shape"]), ValueError, "loader must look like"),
        (dict(jobs=[3], metrics=["shape"]), TypeError, "a job must be a SweepJob, a model name or a dict"),
    ],
)
def test_bad_arguments(tmp_path, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        sweep(out=tmp_path / "r.jsonl", progress=False, **kwargs)
    assert not (tmp_path / "r.jsonl").exists()  # nothing written for a rejected sweep


def test_out_is_a_directory(tmp_path):
    with pytest.raises(ValueError, match="is a directory"):
        sweep(["a"], metrics=["shape"], out=tmp_path, progress=False)


def test_ray_missing_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ValueError, match=r"executor='ray' needs ray"):
        sweep(JOBS[:1], metrics=["shape"], out=tmp_path / "r.jsonl", executor="ray", progress=False)


@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray", reason="ray not installed (optional extra tl-geometry[ray])")
    # workers import the "tests.helpers:tiny_loader" loader by name
    path = os.pathsep.join([H.ROOT, os.environ.get("PYTHONPATH", "")]).strip(os.pathsep)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": path, "OMP_NUM_THREADS": "1"}},
    )
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_executor_matches_local(tmp_path, ray_session):
    import torch

    # one good job, one whose loader fails (an unknown tiny model name): same outcome on both executors
    jobs = [JOBS[1], dict(JOBS[0], model="no-such-tiny")]
    metrics = ["shape", "epsilon"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the Ray workers run with one thread (OMP_NUM_THREADS=1)
    try:
        local = sweep(jobs, metrics=metrics, out=tmp_path / "local.jsonl", progress=False)
    finally:
        torch.set_num_threads(threads)
    remote = sweep(jobs, metrics=metrics, out=tmp_path / "ray.jsonl", executor="ray", num_cpus=1, progress=False)
    assert local.ran == remote.ran and len(remote.ran) == 1
    assert set(remote.failed) == set(local.failed) and len(remote.failed) == 1
    assert "unknown model name 'no-such-tiny'" in next(iter(remote.failed.values()))
    local_rows, ray_rows = _ok_rows(tmp_path / "local.jsonl"), _ok_rows(tmp_path / "ray.jsonl")
    assert any(r["metric"].startswith("epsilon") for r in ray_rows["tiny-L2"])
    assert local_rows == ray_rows  # identical numbers, not just close
    # resume on Ray: nothing left to do
    again = sweep(jobs, metrics=metrics, out=tmp_path / "ray.jsonl", executor="ray", progress=False)
    assert again.ran == () and len(again.skipped) == 2
