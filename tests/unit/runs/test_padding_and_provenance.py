"""Padding is never measured silently and measured provenance is never overwritten (issue 33).

A padded batch used to be measured pads and all (40 pads per row moved ε 0.635 → 0.946, RankMe
23 → 47): ``tg.analyze`` now takes ``attention_mask=`` (the pads dropped, the numbers those of the
unpadded text) and refuses tokens that look padded without one; ``n_tokens=-5`` used to replace
the measured count."""

from __future__ import annotations

import pytest
import torch

import tl_geometry as tg
from tests.helpers import ByteTokenizer, make_byte_model
from tl_geometry import capture
from tl_geometry.errors import InputError

PAD = 299
METRICS = ["epsilon_activations", "spectral"]
HOOKS = ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]


class PadTokenizer(ByteTokenizer):
    pad_token_id = PAD


@pytest.fixture(scope="module")
def model():
    m = make_byte_model()
    m.tokenizer = PadTokenizer()
    return m


@pytest.fixture(scope="module")
def real():
    g = torch.Generator().manual_seed(0)
    t = torch.randint(1, 250, (4, 10), generator=g)
    t[:, 0] = 0  # BOS
    return t


def _padded(real, n_pad):
    pads = torch.full((real.shape[0], n_pad), PAD)
    tokens = torch.cat([real, pads], dim=1)
    mask = torch.cat([torch.ones_like(real), torch.zeros_like(pads)], dim=1)
    return tokens, mask


def _values(rep):
    return {(r.metric, r.hook): r.value for r in rep.rows}


def test_padded_tokens_without_a_mask_are_refused(model, real):
    tokens, _ = _padded(real, 6)
    with pytest.raises(InputError, match=r"look padded: row 0 ends with 6 pad tokens \(pad_token_id=299"):
        tg.analyze(model, tokens, metrics=METRICS, hooks=HOOKS, progress=False)
    assert capture.padding_of(model, real) is None  # unpadded: nothing to refuse
    one = real.clone()
    one[:, -1] = PAD  # a single pad id (often the EOS, which real text holds) is not padding
    assert capture.padding_of(model, one) is None


def test_with_the_mask_the_pads_are_not_measured(model, real):
    tokens, mask = _padded(real, 6)
    want = tg.analyze(model, real, metrics=METRICS, hooks=HOOKS, progress=False)
    got = tg.analyze(model, tokens, metrics=METRICS, hooks=HOOKS, progress=False, attention_mask=mask)
    a, b = _values(want), _values(got)
    assert a.keys() == b.keys()
    for k in a:
        assert b[k] == pytest.approx(a[k], rel=1e-4, abs=1e-6), k
    assert got.provenance["n_tokens"] == real.numel() and got.provenance["n_padding"] == 24
    # and measured with the pads, the numbers move: what the mask prevents
    loose = tg.analyze(
        model, tokens, metrics=METRICS, hooks=HOOKS, progress=False, attention_mask=torch.ones_like(mask)
    )
    assert any(abs(_values(loose)[k] - a[k]) > 1e-3 for k in a)


def test_the_cache_path_drops_the_pads_too(model, real):
    tokens, mask = _padded(real, 6)
    _, cache = model.run_with_cache(tokens)
    want = _values(tg.analyze(model, real, metrics=METRICS, hooks=HOOKS, progress=False))
    got = _values(
        tg.analyze(model, tokens, cache=cache, metrics=METRICS, hooks=HOOKS, progress=False, attention_mask=mask)
    )
    assert all(got[k] == pytest.approx(want[k], rel=1e-4, abs=1e-6) for k in want)


def test_a_metric_that_cannot_mask_is_refused_on_padded_tokens(model, real):
    tokens, mask = _padded(real, 6)
    with pytest.raises(InputError, match=r"metric 'agop' runs its own passes and takes no attention_mask"):
        tg.analyze(model, tokens, metrics=["agop"], hooks=HOOKS, progress=False, attention_mask=mask)


@pytest.mark.parametrize(
    "mask, match",
    [
        (torch.ones(4, 9), r"attention_mask has shape \(4, 9\), tokens \(4, 10\)"),
        (torch.full((4, 10), 2), r"only 0 \(padding\) and 1"),
        ([[1] * 10] * 4, r"must be a \(batch, pos\) tensor"),
        (torch.zeros(4, 10), r"leaves no real token in row\(s\) \[0, 1, 2, 3\]"),
    ],
)
def test_a_bad_mask_is_refused(model, real, mask, match):
    with pytest.raises((ValueError, TypeError), match=match):
        tg.analyze(model, real, metrics=METRICS, hooks=HOOKS, progress=False, attention_mask=mask)


def test_a_left_padded_rows_bos_is_dropped_like_position_0(model):
    tokens = torch.tensor([[PAD, PAD, 0, 5, 6], [0, 7, 8, 9, 10]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    keep = capture.valid_mask(model, tokens, mask)
    assert keep.tolist() == [[False, False, False, True, True], [False, True, True, True, True]]


@pytest.mark.parametrize("key", ["n_tokens", "tokens_shape", "n_padding", "d_model", "timings_s"])
def test_measured_provenance_cannot_be_overwritten(model, real, key):
    with pytest.raises(InputError, match=rf"provenance keys \['{key}'\] are measured by the run"):
        tg.analyze(model, real, metrics=["spectral"], hooks=HOOKS, progress=False, **{key: -5})
    rep = tg.analyze(model, real, metrics=["spectral"], hooks=HOOKS, progress=False, corpus="mine")
    assert rep.provenance["corpus"] == "mine" and rep.provenance["n_tokens"] == real.numel()
