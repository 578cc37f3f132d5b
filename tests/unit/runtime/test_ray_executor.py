"""The Ray executor: resources checked before submitting, one actor per model, tokens in the
object store, the same ``--loader`` resolution as the local executor, rows equal to local rows."""

from __future__ import annotations

import os
import textwrap

import pytest
import torch

from tests import helpers as H
from tl_geometry.errors import InputError
from tl_geometry.runs.sweeps import sweep
from tl_geometry.runtime.jobs import read_records
from tl_geometry.runtime.ray_executor import check_resources

SEEDS = [0, 1, 2]
JOBS = [
    dict(model="tiny-L2", corpus="random", n_seqs=2, seq_len=8, seed=s, loader="tests.helpers:tiny_loader")
    for s in SEEDS
]
METRICS = ["shape", "epsilon", "spectral"]


def _rows(path):
    return {r["params"]["seed"]: r["rows"] for r in read_records(path) if r["status"] == "ok"}


@pytest.mark.parametrize(
    ("cpus", "gpus", "device", "have", "match"),
    [
        (1, 1, "cpu", {"CPU": 2.0}, r"num_gpus=1 but the Ray cluster has 0 GPU\(s\).*wait forever"),
        (1, 0, "cuda", {"CPU": 2.0, "GPU": 1.0}, r"device='cuda' with num_gpus=0"),
        (4, 0, "cpu", {"CPU": 2.0}, r"num_cpus=4 but the Ray cluster has 2 CPU"),
    ],
)
def test_requests_the_cluster_cannot_serve_are_refused(cpus, gpus, device, have, match):
    with pytest.raises(InputError, match=match):
        check_resources(cpus, gpus, device=device, resources=have)
    check_resources(1, 0, device="cpu", resources=have)  # a request that fits passes


def test_cuda_without_gpus_is_refused_before_ray_starts(tmp_path):
    jobs = [dict(JOBS[0], device="cuda")]
    with pytest.raises(InputError, match="num_gpus=0"):
        sweep(jobs, metrics=["shape"], out=tmp_path / "r.jsonl", executor="ray", progress=False)
    assert not (tmp_path / "r.jsonl").exists()


def test_address_needs_ray(tmp_path):
    with pytest.raises(InputError, match="for executor='ray'"):
        sweep(JOBS[:1], metrics=["shape"], out=tmp_path / "r.jsonl", address="auto", progress=False)


LOADER = textwrap.dedent(
    """
    import os
    from tests.helpers import portable_tiny_model

    def load(job):
        with open(os.environ["MY_LOG"], "a") as f:
            f.write(job["model"] + "\\n")
        return portable_tiny_model(1)
    """
)


@pytest.mark.slow
def test_loader_in_the_current_directory_resolves_locally_and_on_ray(tmp_path, monkeypatch):
    """``--loader my_loader_mod:load`` with the module in the current directory (not on sys.path):
    the local executor and a Ray cluster started by the sweep import it the same way."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("needs to start its own Ray cluster")
    work = tmp_path / "work"
    work.mkdir()
    (work / "my_loader_mod.py").write_text(LOADER)
    monkeypatch.chdir(work)
    monkeypatch.setenv("MY_LOG", str(tmp_path / "loads.log"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([H.ROOT, os.environ.get("PYTHONPATH", "")]).strip(os.pathsep))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    jobs = [dict(model="m", corpus="random", n_seqs=1, seq_len=4, seed=s, loader="my_loader_mod:load") for s in (0, 1)]
    local = sweep(jobs, metrics=["shape"], out=tmp_path / "local.jsonl", progress=False)
    assert not local.failed and len(local.ran) == 2
    remote = sweep(jobs, metrics=["shape"], out=tmp_path / "ray.jsonl", executor="ray", progress=False)
    assert not remote.failed, remote.failed
    assert _rows(tmp_path / "local.jsonl") == _rows(tmp_path / "ray.jsonl")
    assert (tmp_path / "loads.log").read_text().split() == ["m", "m"]  # once per executor, not per seed
    assert not ray.is_initialized()  # the sweep shut down the cluster it started


@pytest.fixture(scope="module")
def ray_session(tmp_path_factory):
    ray = pytest.importorskip("ray", reason="ray not installed (optional extra tl-geometry[ray])")
    log = tmp_path_factory.mktemp("ray") / "loads.log"
    path = os.pathsep.join([H.ROOT, os.environ.get("PYTHONPATH", "")]).strip(os.pathsep)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": path, "OMP_NUM_THREADS": "1", "TLG_LOAD_LOG": str(log)}},
    )
    yield ray, log
    ray.shutdown()


def test_gpu_request_on_a_cluster_without_gpus_is_a_clear_error(tmp_path, ray_session):
    with pytest.raises(InputError, match=r"num_gpus=1 but the Ray cluster has 0 GPU"):
        sweep(JOBS, metrics=["shape"], out=tmp_path / "r.jsonl", executor="ray", num_gpus=1, progress=False)
    with pytest.raises(InputError, match=r"num_cpus=3 but the Ray cluster has 2 CPU"):
        sweep(JOBS, metrics=["shape"], out=tmp_path / "r.jsonl", executor="ray", num_cpus=3, progress=False)


@pytest.mark.slow
def test_one_actor_per_model_loads_it_once_and_equals_local(tmp_path, ray_session, monkeypatch):
    _, log = ray_session
    local_log = tmp_path / "local.log"
    monkeypatch.setenv("TLG_LOAD_LOG", str(local_log))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the Ray workers run with one thread (OMP_NUM_THREADS=1)
    try:
        local = sweep(JOBS, metrics=METRICS, out=tmp_path / "local.jsonl", progress=False)
        per_job = sweep(JOBS, metrics=METRICS, out=tmp_path / "per_job.jsonl", reuse_models=False, progress=False)
    finally:
        torch.set_num_threads(threads)
    assert local_log.read_text().split() == ["tiny-L2"] + ["tiny-L2"] * len(SEEDS)  # reuse: 1; per job: 3
    before = log.read_text().split() if log.exists() else []
    remote = sweep(JOBS, metrics=METRICS, out=tmp_path / "ray.jsonl", executor="ray", progress=False)
    assert len(remote.ran) == len(SEEDS) and not remote.failed and len(local.ran) == len(per_job.ran) == 3
    assert log.read_text().split()[len(before) :] == ["tiny-L2"]  # one load in the model's actor
    want = _rows(tmp_path / "local.jsonl")
    assert want == _rows(tmp_path / "per_job.jsonl") == _rows(tmp_path / "ray.jsonl")  # identical numbers
    assert want[0] != want[1]  # the seeds differ: a sweep that ignored them could not pass


@pytest.mark.slow
def test_tokens_through_the_object_store_equal_local(tmp_path, ray_session):
    tokens = torch.randint(0, 53, (3, 6), generator=torch.Generator().manual_seed(5))
    kw = dict(metrics=["spectral"], tokens=tokens, progress=False)
    local = sweep(JOBS[:2], out=tmp_path / "local.jsonl", **kw)
    remote = sweep(JOBS[:2], out=tmp_path / "ray.jsonl", executor="ray", **kw)
    assert not local.failed and not remote.failed
    a, b = _rows(tmp_path / "local.jsonl"), _rows(tmp_path / "ray.jsonl")
    assert a == b and a[0] == a[1]  # the same tokens for both seeds: the same rows
    recs = read_records(tmp_path / "ray.jsonl")
    assert all(r["params"]["tokens"].endswith(":3x6") for r in recs)
    # other tokens: another job key (not skipped as done)
    again = sweep(JOBS[:2], out=tmp_path / "ray.jsonl", metrics=["spectral"], tokens=(tokens + 1) % 53, progress=False)
    assert len(again.ran) == 2


def test_more_gpus_than_this_machine_has_is_refused_before_ray_starts(monkeypatch):
    """A local Ray would start (35 s) and then wait forever: refused first, from this machine's
    own counts (issue 33)."""
    ray = pytest.importorskip("ray")
    from tl_geometry.errors import InputError
    from tl_geometry.runtime import ray_executor

    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # as in a fresh process (other tests start one)
    monkeypatch.setattr(ray_executor, "init_ray", lambda *a, **k: pytest.fail("Ray was started"))
    monkeypatch.setattr(ray_executor, "_this_machine", lambda: {"CPU": 2.0, "GPU": 0.0})

    def run(cpus, gpus):  # run_ray yields: the refusal comes at the first record
        kw = dict(num_cpus=cpus, num_gpus=gpus, progress=False, catch=True, on_error=str, desc="t")
        return list(ray_executor.run_ray([{"x": 1}], lambda p: {}, lambda *a: {}, **kw))

    with pytest.raises(InputError, match=r"num_gpus=4 but the Ray cluster has 0 GPU"):
        run(1, 4)
    with pytest.raises(InputError, match=r"num_cpus=64 but the Ray cluster has 2 CPU"):
        run(64, 0)


def test_render_refuses_a_dpi_outside_its_range(tmp_path, capsys):
    from tl_geometry.cli import main

    for dpi in ("100000", "5"):
        assert main(["render", "nothing.json", "--out", str(tmp_path / "o"), "--dpi", dpi]) == 2
        err = capsys.readouterr().err
        assert "--dpi must be from 10 to 600" in err and len(err.strip().splitlines()) == 1
