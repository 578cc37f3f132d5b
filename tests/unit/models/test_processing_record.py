"""Provenance records the processing TransformerLens did: it skips center_writing_weights for RMSNorm models."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tl_geometry import models

TL_FLAGS = {"fold_ln": True, "center_writing_weights": True, "center_unembed": True, "fold_value_biases": True}


@pytest.mark.parametrize(
    "cfg, centered",
    [
        (SimpleNamespace(normalization_type="RMSPre"), False),  # Llama, SmolLM2, Gemma after fold_ln
        (SimpleNamespace(normalization_type="RMS"), False),
        (SimpleNamespace(normalization_type="LNPre"), True),  # GPT-2, Pythia after fold_ln
        (SimpleNamespace(normalization_type="LN", final_rms=True), False),
        (SimpleNamespace(normalization_type="LN", positional_embedding_type="shortformer"), False),
        (SimpleNamespace(normalization_type="LN", original_architecture="Olmo2ForCausalLM"), False),  # post-norm
        (SimpleNamespace(normalization_type="LN", original_architecture="GPT2LMHeadModel"), True),
    ],
)
def test_recorded_flag_is_what_transformerlens_did(cfg, centered):
    m = SimpleNamespace(cfg=cfg)
    models._record_processing(m, "tl", dict(TL_FLAGS))
    done = models.processing_of(m)
    assert done["center_writing_weights"] is centered
    assert done["fold_ln"] and done["center_unembed"]
    assert m._tl_geometry_processing_asked["center_writing_weights"] is True  # what was asked is kept
    assert models.processing_name(m) == "tl"


def test_a_loaded_rmsnorm_model_records_no_centering(tmp_path):
    import tl_geometry as tg
    from tests.unit.models.test_models import _write_hf_dir

    _write_hf_dir(tmp_path / "tiny-llama")
    model = models.load(str(tmp_path / "tiny-llama"))
    assert model.cfg.normalization_type in ("RMS", "RMSPre")
    assert models.processing_of(model)["center_writing_weights"] is False
    prov = tg.GeometryReport.from_rows([], model=model).provenance
    assert prov["weight_processing"]["center_writing_weights"] is False and prov["processing"] == "tl"
