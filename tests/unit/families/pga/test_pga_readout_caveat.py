"""The library preset's readout caveat (docs/gemma_pga.md): fold_ln moves W_U's top-k subspace onto the
final norm's weight when that weight spans orders of magnitude (Gemma); every affected PGA row says so."""

from __future__ import annotations

import warnings

import pytest
import torch

from tests.helpers import make_tiny_model
from tl_geometry.families.pga import FOLD_LN_SPREAD, pga, readout_caveat

pytestmark = pytest.mark.needs_hooked


def _folded(spread: float | None):
    m = make_tiny_model(normalization_type="RMSPre")
    if spread is not None:
        w = torch.ones(m.cfg.d_model)
        w[0] = 1.0 / spread
        m._tl_geometry_final_norm_w = w
    return m


def test_caveat_only_when_folded_and_spread():
    assert readout_caveat(make_tiny_model(normalization_type="RMS")) is None  # nothing folded
    assert readout_caveat(_folded(FOLD_LN_SPREAD / 2)) is None
    text = readout_caveat(_folded(FOLD_LN_SPREAD * 10))
    assert text is not None and "1,000×" in text and "preset='paper'" in text
    m = _folded(None)  # no recorded weight: only the Gemma architectures are flagged
    assert readout_caveat(m) is None
    m.cfg.original_architecture = "Gemma3ForCausalLM"
    assert "Gemma" in (readout_caveat(m) or "")


def test_every_library_row_carries_it():
    m = _folded(FOLD_LN_SPREAD * 10)
    tokens = torch.randint(1, m.cfg.d_vocab, (4, 16), generator=torch.Generator().manual_seed(0))
    with pytest.warns(UserWarning, match="fold_ln folded"):
        rep = pga(m, tokens, k=8, n_null=4, max_points=60, ccr=[0], progress=False)
    assert rep.rows and all("fold_ln folded" in r.extras["readout_caveat"] for r in rep.rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        plain = pga(_folded(2.0), tokens, k=8, n_null=4, max_points=60, ccr=[0], progress=False)
    assert all("readout_caveat" not in r.extras for r in plain.rows)
