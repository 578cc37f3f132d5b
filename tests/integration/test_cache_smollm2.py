"""On SmolLM2-135M: every activation metric from ``run_with_cache``'s cache equals the capture path's."""

from __future__ import annotations

import math

import pytest

import tl_geometry as tg

HOOKS = ["blocks.3.hook_resid_post", "blocks.15.hook_resid_post", "blocks.29.hook_resid_post"]
OPTIONS = {"pga": {"n_null": 20, "max_points": 512}, "epsilon_activations": {"max_points": 512}}


@pytest.mark.slow
def test_cache_equals_capture_smollm2(smollm2, pydoc_tokens):
    kw = dict(metrics=["pga", "spectral", "epsilon_activations"], hooks=HOOKS, options=OPTIONS, progress=False)
    ref = tg.analyze(smollm2, pydoc_tokens, **kw)
    _, cache = smollm2.run_with_cache(pydoc_tokens, names_filter=HOOKS)
    got = tg.analyze(smollm2, pydoc_tokens, cache=cache, **kw)
    a = {(r.metric, r.hook, r.extras.get("ccr")): r.value for r in ref.rows}
    b = {(r.metric, r.hook, r.extras.get("ccr")): r.value for r in got.rows}
    assert a.keys() == b.keys() and len(a) >= 3 * 9
    for k in a:
        if math.isnan(a[k]):
            assert math.isnan(b[k]), k
        else:
            assert b[k] == pytest.approx(a[k], rel=1e-5, abs=1e-6), k
