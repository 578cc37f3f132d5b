"""A TransformerLens user's odd inputs get a clear error or the right number, never a traceback
(issue 33): int16 / uint8 / int32 token ids (measured as the int64 ids they are), meta tokens, an
attention-pattern hook, a gradient metric inside torch.inference_mode(), d = 0 vectors."""

from __future__ import annotations

import pytest
import torch

import tl_geometry as tg
from tl_geometry.errors import TLGeometryError

HOOKS = ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]


@pytest.fixture(scope="module")
def tokens(tiny_model):
    return torch.randint(1, tiny_model.cfg.d_vocab, (4, 8), generator=torch.Generator().manual_seed(0))


def _values(rep):
    return {(r.metric, r.hook): r.value for r in rep.rows}


@pytest.mark.parametrize("dtype", [torch.int16, torch.int32, torch.uint8])
def test_narrow_integer_token_ids_are_the_same_ids(tiny_model, tokens, dtype):
    small = tokens % min(tiny_model.cfg.d_vocab, 250)
    want = _values(tg.analyze(tiny_model, small, metrics=["spectral"], hooks=HOOKS, progress=False))
    got = _values(tg.analyze(tiny_model, small.to(dtype), metrics=["spectral"], hooks=HOOKS, progress=False))
    assert got == want


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda m, t: tg.analyze(m, t.to("meta"), metrics=["spectral"], progress=False),
            "tokens are on the meta device",
        ),
        (
            lambda m, t: tg.analyze(m, t, metrics=["spectral"], hooks=["blocks.0.attn.hook_pattern"], progress=False),
            r"not one vector per \(batch, pos\) position",
        ),
        (lambda m, t: tg.spectral_metrics(torch.zeros(10, 0)), r"H has d = 0 columns"),
        (lambda m, t: tg.similarity_stats(torch.zeros(10, 0)), r"d = 0 columns"),
    ],
)
def test_odd_inputs_are_one_clear_error(tiny_model, tokens, call, match):
    with pytest.raises(TLGeometryError, match=match):
        call(tiny_model, tokens)


def test_a_gradient_metric_inside_inference_mode_is_refused_clearly(tiny_model, tokens):
    with torch.inference_mode(), pytest.raises(TLGeometryError, match=r"cannot run inside torch.inference_mode"):
        tg.analyze(tiny_model, tokens, metrics=["agop"], options={"agop": {"n_probes": 2}}, progress=False)
    with torch.no_grad():  # no_grad is fine: the backward passes re-enable gradients
        rep = tg.analyze(tiny_model, tokens, metrics=["agop"], options={"agop": {"n_probes": 2}}, progress=False)
    assert rep.rows
