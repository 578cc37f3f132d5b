"""Determinism: the same seed gives a byte-identical report.json (timing fields excluded), in this
process and in a fresh one with another hash seed; another seed changes sampled quantities only."""

import json
import os
import subprocess
import sys

import pytest
import torch

import tl_geometry as tg
from tests import helpers as H
from tl_geometry.report import GeometryReport

# Small options so every metric runs in well under a second on the tiny model (d_model = 16).
OPTIONS = {
    "epsilon_activations": {"max_points": 40},
    "pga": {"k": 3, "n_null": 6, "max_points": 40, "progress": False},
    "spectral": {"progress": False},
    "agop": {"n_probes": 4, "progress": False},
}
WEIGHT_METRICS = ["shape", "epsilon", "capacity", "depth_width", "wtw_aofe"]
SAMPLED_METRICS = ["epsilon_activations", "pga", "agop"]  # take a seed
METRICS = WEIGHT_METRICS + ["spectral"] + SAMPLED_METRICS
TIMING_FIELDS = ("timings_s",)

SCRIPT = """
import sys, json, torch
torch.set_num_threads(1)
sys.path.insert(0, sys.argv[1])
import tests.unit.report.test_determinism as T
print(T.report_json(int(sys.argv[2])))
"""


def _registered(names):
    """``names``, failing (not skipping) when a built-in metric this test relies on is not registered."""
    missing = sorted(set(names) - set(tg.list_metrics()))
    assert not missing, f"built-in metrics not registered: {missing}"
    return list(names)


def report_json(seed: int) -> str:
    """report.json text of every metric on the tiny model with ``seed`` (timing fields dropped)."""
    model = H.portable_tiny_model(2, 16)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, model.cfg.d_vocab, (3, 12), generator=g)
    metrics = _registered(METRICS)
    opts = {}
    for m in metrics:
        o = dict(OPTIONS.get(m, {}))
        if m in SAMPLED_METRICS:
            o["seed"] = seed
        if o:
            opts[m] = o
    rep = tg.analyze(model, tokens, metrics=metrics, options=opts, progress=False, seed=seed)
    prov = {k: v for k, v in rep.provenance.items() if k not in TIMING_FIELDS}
    return GeometryReport(rows=rep.rows, provenance=prov).to_json()


@pytest.fixture
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_same_seed_is_byte_identical_across_runs_and_processes(tmp_path, one_thread):
    a = report_json(0)
    b = report_json(0)
    assert a == b
    # a fresh interpreter with a different hash seed (set/dict order, lazy init) gives the same bytes
    env = dict(os.environ, PYTHONHASHSEED="12345", OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, H.ROOT, "0"], env=env, capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    c = proc.stdout.decode().strip()
    assert c == a.strip()
    (tmp_path / "a.json").write_text(a)
    assert GeometryReport.from_json(tmp_path / "a.json").to_json() == a  # stable through a file
    rows = json.loads(a)["rows"]
    assert {r["metric"].split(".")[0] for r in rows} >= {"shape", "epsilon"}
    assert all(r["value"] == r["value"] for r in rows if isinstance(r["value"], float))


def test_other_seed_changes_sampled_quantities_only(one_thread):
    a = GeometryReport.from_json(report_json(0))
    b = GeometryReport.from_json(report_json(1))
    assert len(a.rows) == len(b.rows)
    changed = set()
    for ra, rb in zip(a.rows, b.rows):
        assert (ra.metric, ra.hook) == (rb.metric, rb.hook)
        both_nan = ra.value != ra.value and rb.value != rb.value  # e.g. an indeterminate capacity
        if ra.value != rb.value and not both_nan:
            changed.add(ra.metric.split(".")[0])
    # weights-only metrics and the (unsampled) spectrum never move with the seed
    weight_rows = [
        r.metric for r in a.rows if r.metric.split(".")[0] in {"shape", "epsilon", "capacity", "depth_width", "wtw"}
    ]
    assert weight_rows and not changed & {"shape", "epsilon", "capacity", "depth_width", "wtw", "spectral"}
    assert set(SAMPLED_METRICS) <= {r.metric.split(".")[0] for r in a.rows}
    assert changed, "no sampled quantity changed with the seed"
    assert changed <= {"epsilon_activations", "pga", "agop"}


def test_sweep_is_deterministic(tmp_path, one_thread):
    from tl_geometry.runs.sweeps import sweep

    jobs = [dict(model="tiny-L2", corpus="random", n_seqs=2, seq_len=10, seed=3, loader="tests.helpers:tiny_loader")]
    metrics = _registered(["shape", "epsilon", "pga"])
    opts = {"pga": {"k": 3, "n_null": 5, "max_points": 16, "progress": False}}
    for name in ("a", "b"):
        sweep(jobs, metrics=metrics, options=opts, out=tmp_path / f"{name}.jsonl", progress=False)
    from tl_geometry.runs.sweeps import sweep_report

    ra = [r.to_dict() for r in sweep_report(tmp_path / "a.jsonl").rows]
    rb = [r.to_dict() for r in sweep_report(tmp_path / "b.jsonl").rows]
    assert ra == rb and len(ra) > 0
