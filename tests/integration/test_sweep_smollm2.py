"""Sweeps on the real model (SmolLM2-135M): resume, seeds, one load per model for all its seeds."""

import pytest

from tl_geometry.runs.sweeps import sweep, sweep_report
from tl_geometry.runtime.jobs import read_records

pytestmark = pytest.mark.integration

OPTS = {"pga": {"k": 20, "n_null": 8, "max_points": 256, "progress": False}, "epsilon": {"matrices": ["W_E"]}}


def test_sweep_seeds_on_smollm2_resume_and_seed_semantics(smollm2, tmp_path):
    out = tmp_path / "r.jsonl"
    loads = []

    def loader(job):  # reuse the session's model instead of loading it again per job
        loads.append(job["seed"])
        return smollm2

    jobs = [dict(model="smollm2-135m", corpus="pydoc", n_seqs=4, seq_len=64, seed=s) for s in (0, 1)]
    hooks = [f"blocks.{l}.hook_resid_post" for l in (3, 15, 27)]
    s = sweep(jobs, metrics=["epsilon", "pga"], options=OPTS, hooks=hooks, out=out, loader=loader, progress=False)
    assert len(s.ran) == 2 and not s.failed, s.failed
    s2 = sweep(jobs, metrics=["epsilon", "pga"], options=OPTS, hooks=hooks, out=out, loader=loader, progress=False)
    # one load for both seeds of the model (kept between its jobs); the rerun loads nothing
    assert s2.ran == () and loads == [0]
    rep = sweep_report(out)
    eps = rep.filter("epsilon.W_E").rows
    assert len(eps) == 2 and eps[0].value == eps[1].value  # weights: seed-independent
    assert eps[0].model == "smollm2-135m"
    z = {(r.hook, r.extras["job_seed"]): r.value for r in rep.filter("pga.z").rows}
    assert len(z) == 6 and all(v == v for v in z.values())
    assert z[(hooks[0], 0)] != z[(hooks[0], 1)]  # another corpus sample and null: sampled numbers move
    prov = [r["provenance"] for r in read_records(out)]
    assert {p["seed"] for p in prov} == {0, 1} and all(p["corpus"] == "pydoc" for p in prov)
