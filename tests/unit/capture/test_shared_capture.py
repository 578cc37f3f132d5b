"""One forward pass feeding every activation metric: capture.run_shared, MetricPlan, analyze(capture=...).

The promise: sharing never changes a number. Each consumer of a shared pass receives exactly the
rows it would receive alone, and a report computed with one shared pass equals the report computed
with one pass per metric, row for row.
"""

from __future__ import annotations

import math

import pytest
import torch

import tl_geometry as tg
from tl_geometry import capture
from tl_geometry.registry import MetricPlan
from tl_geometry.runs.analysis import iter_metrics

HOOKS = ["blocks.0.hook_resid_post", "blocks.2.hook_resid_post"]
ACT_METRICS = ["pga", "spectral", "epsilon_activations"]
SMALL = {"pga": {"k": 8, "n_null": 4, "ccr": [0, 1], "max_points": 40}, "epsilon_activations": {"max_points": 30}}


class Recorder:
    """A plain consumer: keeps every batch it is given, per hook."""

    def __init__(self, hooks, positions=None):
        self.hooks, self.positions = list(hooks), positions
        self.got = {h: [] for h in self.hooks}

    def update(self, hook, acts):
        self.got[hook].append(acts.clone())

    def stacked(self):
        return {h: torch.cat(v) for h, v in self.got.items()}


class ForwardCounter:
    def __init__(self, model):
        self.n = 0
        self.handle = model.register_forward_pre_hook(self._count)

    def _count(self, module, args):
        self.n += 1

    def close(self):
        self.handle.remove()


def _rows(report):
    return [(r.metric, r.hook, r.value, sorted((k, repr(v)) for k, v in r.extras.items())) for r in report.rows]


def test_each_consumer_of_a_shared_pass_gets_what_it_gets_alone(tiny_model, tiny_tokens):
    sample = capture.sample_positions(tiny_model, tiny_tokens, 23, seed=3)
    specs = [(HOOKS, None), (HOOKS[:1], sample), (["blocks.1.hook_resid_pre", HOOKS[1]], sample.clone())]
    alone = []
    for hooks, pos in specs:
        r = Recorder(hooks, pos)
        capture.run_shared(tiny_model, tiny_tokens, [r], batch_size=4, progress=False)
        alone.append(r.stacked())
    together = [Recorder(h, p) for h, p in specs]
    delivered = capture.run_shared(tiny_model, tiny_tokens, together, batch_size=4, progress=False)
    for a, t in zip(alone, together):
        s = t.stacked()
        assert a.keys() == s.keys()
        for h in a:
            assert torch.equal(a[h], s[h])
    n_valid = int(capture.valid_mask(tiny_model, tiny_tokens).sum())
    assert delivered == [n_valid, 23, 23]
    # and the sample is the one capture.collect keeps
    col = capture.collect(tiny_model, tiny_tokens, HOOKS[:1], max_points=23, seed=3, batch_size=4, progress=False)
    assert torch.equal(col.acts[HOOKS[0]], together[1].stacked()[HOOKS[0]])


def test_run_is_run_shared_with_one_consumer(any_tiny_model, tiny_tokens):
    got = []
    n = capture.run(
        any_tiny_model, tiny_tokens, HOOKS, lambda h, a: got.append((h, a.shape[0])), batch_size=4, progress=False
    )
    r = Recorder(HOOKS)
    assert capture.run_shared(any_tiny_model, tiny_tokens, [r], batch_size=4, progress=False) == [n]
    assert [x for x in got if x[0] == HOOKS[0]] == [(HOOKS[0], a.shape[0]) for a in r.got[HOOKS[0]]]


def test_shared_report_equals_separate_report_and_runs_one_pass(tiny_model, tiny_tokens):
    counter = ForwardCounter(tiny_model)
    try:
        shared = tg.analyze(tiny_model, tiny_tokens, metrics=ACT_METRICS, options=SMALL, progress=False)
        n_shared, counter.n = counter.n, 0
        separate = tg.analyze(
            tiny_model, tiny_tokens, metrics=ACT_METRICS, options=SMALL, progress=False, capture="separate"
        )
        n_separate = counter.n
    finally:
        counter.close()
    assert _rows(shared) == _rows(separate)
    batches = math.ceil(tiny_tokens.shape[0] / 8)
    assert n_shared == batches and n_separate == 3 * batches
    assert shared.provenance["capture"]["mode"] == "shared"
    assert shared.provenance["capture"]["metrics"] == ACT_METRICS
    assert shared.provenance["capture"]["forward_passes"] == 1
    assert separate.provenance["capture"] == {"mode": "separate"}
    assert "capture" in shared.provenance["timings_s"] and "capture" not in separate.provenance["timings_s"]


def test_plans_with_different_batch_sizes_share_within_their_size(tiny_model, tiny_tokens):
    opts = {**SMALL, "spectral": {"batch_size": 3}}
    rep = tg.analyze(tiny_model, tiny_tokens, metrics=ACT_METRICS, options=opts, progress=False)
    ref = tg.analyze(tiny_model, tiny_tokens, metrics=ACT_METRICS, options=opts, progress=False, capture="separate")
    assert rep.provenance["capture"]["forward_passes"] == 2
    assert _rows(rep) == _rows(ref)


def test_a_metric_alone_equals_its_plan_run(tiny_model, tiny_tokens):
    a = tg.get_metric("pga")(tiny_model, tiny_tokens, **SMALL["pga"], progress=False)
    plan = tg.get_metric("pga").plan(tiny_model, tiny_tokens, **SMALL["pga"], progress=False)
    assert isinstance(plan, MetricPlan) and plan.name == "pga"
    assert _rows(a) == _rows(plan.run())


@pytest.fixture
def failing_metric():
    class Broken:
        hooks, positions = [HOOKS[0]], None

        def update(self, hook, acts):
            raise ArithmeticError("consumer broke")

    def plan(model, tokens, *, hooks=None):
        return MetricPlan("broken_consumer", model, tokens, [Broken()], lambda: tg.GeometryReport.from_rows([]))

    @tg.register_metric("broken_consumer", needs="activations", plan=plan)
    def broken(model, tokens, *, hooks=None):
        return plan(model, tokens).run()

    yield "broken_consumer"
    tg.unregister_metric("broken_consumer")


def test_a_failing_consumer_fails_only_its_metric_and_hooks_are_removed(tiny_model, tiny_tokens, failing_metric):
    names = ["spectral", failing_metric, "epsilon_activations"]
    opts = {"epsilon_activations": SMALL["epsilon_activations"]}
    out = {n: r for n, r, _ in iter_metrics(tiny_model, tiny_tokens, names, opts, progress=False)}
    assert isinstance(out[failing_metric], ArithmeticError)
    assert isinstance(out["spectral"], tg.GeometryReport) and isinstance(out["epsilon_activations"], tg.GeometryReport)
    assert out["spectral"].rows and out["epsilon_activations"].rows
    with pytest.raises(ArithmeticError, match="consumer broke"):
        tg.analyze(tiny_model, tiny_tokens, metrics=names, options=opts, progress=False)
    assert all(not hp.fwd_hooks for hp in tiny_model.hook_dict.values())


def test_a_failing_plan_fails_only_its_metric(tiny_model, tiny_tokens):
    bad = {**SMALL, "pga": {**SMALL["pga"], "k": 10_000}}  # k >= d_model: refused by the plan
    out = {n: r for n, r, _ in iter_metrics(tiny_model, tiny_tokens, ACT_METRICS, bad, progress=False)}
    assert isinstance(out["pga"], ValueError) and "k must satisfy" in str(out["pga"])
    assert isinstance(out["spectral"], tg.GeometryReport)


def test_bad_inputs(tiny_model, tiny_tokens):
    with pytest.raises(ValueError, match="capture must be one of"):
        tg.analyze(tiny_model, tiny_tokens, metrics=["spectral"], capture="twice", progress=False)
    with pytest.raises(TypeError, match="update"):
        capture.run_shared(tiny_model, tiny_tokens, [object()], progress=False)
    with pytest.raises(ValueError, match="batch_size"):
        capture.run_shared(tiny_model, tiny_tokens, [Recorder(HOOKS)], batch_size=0, progress=False)
    with pytest.raises(ValueError, match="blocks.0.hook_resid_psot"):
        capture.run_shared(tiny_model, tiny_tokens, [Recorder(["blocks.0.hook_resid_psot"])], progress=False)
    with pytest.raises(ValueError, match="plan="):
        tg.register_metric("weights_with_plan", needs="weights", plan=lambda *a, **k: None)
    assert capture.run_shared(tiny_model, tiny_tokens, [], progress=False) == []
