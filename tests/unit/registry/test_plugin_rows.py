"""A plugin can never break a report (issue 33): a plugin row of the wrong type, or one named like
a built-in's row, fails that plugin's metric alone — the report carries the others and says
``status: partial`` — never a traceback, never a report whose built-in rows a plugin wrote."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tl_geometry as tg
from tl_geometry.registry import MetricResultError
from tl_geometry.report import GeometryReport, Row


@pytest.fixture
def plugin():
    made = []

    def make(rows):
        name = f"plugin_rows_{len(made)}"

        def fn(model, tokens=None, **kw):
            return GeometryReport(rows=tuple(rows), provenance={})

        tg.register_metric(name, needs="weights")(fn)
        made.append(name)
        return name

    yield make
    for n in made:
        tg.unregister_metric(n)


@pytest.mark.parametrize(
    "row, match",
    [
        (Row(model="m", hook=None, layer=None, metric="x.v", value="abc"), r"value must be a number, got 'abc'"),
        (Row(model="m", hook=None, layer=None, metric="x.v", value=True), r"value must be a number, got True"),
        (Row(model="m", hook=3, layer=None, metric="x.v", value=1.0), r"hook must be a string or None"),
        (Row(model="m", hook=None, layer="two", metric="x.v", value=1.0), r"layer must be an int or None"),
        (Row(model="m", hook=None, layer=None, metric="", value=1.0), r"metric name must be a non-empty string"),
        (Row(model="m", hook=None, layer=None, metric="pga.z", value=1.0), r"'pga.z' is a built-in row name"),
        (Row(model="m", hook=None, layer=None, metric="epsilon.W_E", value=1.0), r"is a built-in row name"),
    ],
)
def test_a_bad_plugin_row_fails_its_metric_alone(tiny_model, plugin, row, match):
    name = plugin([row])
    with pytest.raises(MetricResultError, match=match):
        tg.analyze(tiny_model, metrics=[name], progress=False)
    # in a report run: that metric fails, the built-in beside it is kept (the partial path)
    from tl_geometry.runs.analysis import iter_metrics

    results = {n: r for n, r, _ in iter_metrics(tiny_model, None, [name, "depth_width"], progress=False)}
    assert isinstance(results[name], MetricResultError) and isinstance(results["depth_width"], GeometryReport)


def test_good_plugin_rows_pass_numpy_numbers_included(tiny_model, plugin):
    name = plugin(
        [
            Row(model="m", hook=None, layer=None, metric="mine.a", value=np.float32(0.5)),
            Row(model="m", hook="blocks.0.hook_resid_post", layer=np.int64(0), metric="mine.b", value=3),
        ]
    )
    rep = tg.analyze(tiny_model, metrics=[name], progress=False)
    assert [r.metric for r in rep.rows] == ["mine.a", "mine.b"]
    json.dumps(rep.to_dict())
