"""experiments.sae_training: an SAE trained by sae_lens on a tiny model, published to a local hub
cache and read back through SAE.from_pretrained — the published-SAE code path, offline."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

pytest.importorskip("sae_lens")

from tl_geometry.families import sae as S  # noqa: E402
from tl_geometry.families.sae import training as T  # noqa: E402

HOOK = "blocks.1.hook_resid_post"


@pytest.fixture(scope="module")
def trained(tiny_model, tmp_path_factory):
    tokens = torch.randint(0, 101, (64, 16), generator=torch.Generator().manual_seed(0))
    out = tmp_path_factory.mktemp("sae") / "sae"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        T.train_sae(
            tiny_model, tokens, hook=HOOK, out=out, d_sae=96, k=4, training_tokens=16384, batch_tokens=256, lr=3e-3
        )
    return out, tokens


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return tmp_path / "hub"


def test_trained_sae_is_saved_by_sae_lens(trained):
    out, _ = trained
    cfg = json.loads((out / "cfg.json").read_text())
    assert cfg["d_sae"] == 96 and cfg["d_in"] == 32 and cfg["k"] == 4
    assert cfg["metadata"]["hook_name"] == HOOK
    assert not out.with_name(out.name + ".partial").exists()


def test_training_is_a_resumable_unit(trained, tiny_model, monkeypatch):
    out, tokens = trained
    before = (out / "sae_weights.safetensors").stat().st_mtime_ns
    import sae_lens

    def boom(*a, **k):  # a finished SAE must be reused, not retrained
        raise AssertionError("retrained a finished SAE")

    monkeypatch.setattr(sae_lens, "LanguageModelSAETrainingRunner", boom)
    assert T.train_sae(tiny_model, tokens, hook=HOOK, out=out, d_sae=96, k=4) == out
    assert (out / "sae_weights.safetensors").stat().st_mtime_ns == before


def test_published_to_cache_loads_through_from_pretrained(trained, hub_cache, tiny_model):
    out, tokens = trained
    repo, sae_id = T.publish_to_cache(out, "local/tiny-saes")
    assert (repo, sae_id) == ("local/tiny-saes", HOOK)
    snap = hub_cache / "models--local--tiny-saes" / "snapshots"
    assert (snap / (hub_cache / "models--local--tiny-saes" / "refs" / "main").read_text() / HOOK / "cfg.json").is_file()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = S.load(repo, sae_id)
        direct = S.load(path=out)
    torch.testing.assert_close(loaded.W_dec, direct.W_dec)
    # a trained SAE reconstructs its training activations better than the mean does
    acts = tiny_model.run_with_cache(tokens[:8], names_filter=[HOOK])[1][HOOK].reshape(-1, 32)
    with torch.no_grad():
        rec = loaded.decode(loaded.encode(acts))
    fvu = ((rec - acts) ** 2).sum() / ((acts - acts.mean(0)) ** 2).sum()
    assert fvu < 1.0


def test_compare_reads_repo_reference(trained, hub_cache, tiny_model):
    out, _ = trained
    T.publish_to_cache(out, "local/tiny-saes")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = S.compare(tiny_model, saes=[f"local/tiny-saes:{HOOK}"])
    row = rep.filter("sae.d_sae").rows[0]
    assert row.value == 96 and row.hook == HOOK and row.extras["sae_id"] == f"local/tiny-saes:{HOOK}"
    de = S.decoder_epsilon(S.load(path=out))
    assert rep.value("sae.decoder_epsilon", hook=HOOK) == pytest.approx(de.epsilon)


def test_second_sae_joins_the_same_revision(trained, hub_cache, tmp_path):
    out, _ = trained
    T.publish_to_cache(out, "local/tiny-saes")
    T.publish_to_cache(out, "local/tiny-saes", sae_id="copy")
    rev = (hub_cache / "models--local--tiny-saes" / "refs" / "main").read_text()
    assert {p.name for p in (hub_cache / "models--local--tiny-saes" / "snapshots" / rev).iterdir()} == {HOOK, "copy"}


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"hook": "blocks.9.hook_resid_post"}, "not a hook of the model"),
        ({"hook": HOOK, "k": 200, "d_sae": 96}, "k must be smaller than d_sae"),
        ({"hook": HOOK, "training_tokens": 0}, "training_tokens must be a positive integer"),
    ],
)
def test_train_bad_inputs(tiny_model, tmp_path, kwargs, match):
    tokens = torch.randint(0, 101, (4, 16))
    with pytest.raises(ValueError, match=match):
        T.train_sae(tiny_model, tokens, out=tmp_path / "x", **kwargs)


def test_train_rejects_float_tokens(tiny_model, tmp_path):
    with pytest.raises(ValueError, match="2-D integer tensor"):
        T.train_sae(tiny_model, torch.rand(4, 16), hook=HOOK, out=tmp_path / "x")


def test_publish_bad_inputs(tmp_path, trained):
    with pytest.raises(ValueError, match="is not a saved SAE"):
        T.publish_to_cache(tmp_path, "local/x")
    with pytest.raises(ValueError, match="ORG/NAME"):
        T.publish_to_cache(trained[0], "no-slash", cache_dir=tmp_path)


def test_bad_sae_reference(tiny_model):
    with pytest.raises(ValueError, match="REPO:SAE_ID"):
        S.compare(tiny_model, saes=["/nonexistent/sae-dir"])


def test_decoder_capacity_row_follows_the_paper_rule(tiny_model):
    """sae.decoder_capacity = capacity_estimate(d_in, decoder ε): a count below ε 0.1, else NaN + reason."""
    import math

    import tl_geometry as tg

    g = torch.Generator().manual_seed(0)
    wide = torch.nn.functional.normalize(torch.randn(40, 32, generator=g), dim=1)  # random: ε ≈ 2/√32 ≈ 0.35
    rep = S.compare(tiny_model, saes=[wide])
    row = rep.filter("sae.decoder_capacity").rows[0]
    de = S.decoder_epsilon(wide)
    assert row.extras["decoder_epsilon"] == pytest.approx(de.epsilon)
    assert math.isnan(row.value) and row.extras["status"] == "indeterminate" and row.extras["reason"]
    # an orthogonal-ish decoder in more dimensions: ε < 0.1 → a count equal to the pure formula
    big = torch.linalg.qr(torch.randn(32, 32, generator=g))[0][:30]
    rep = S.compare(tiny_model, saes=[big])
    row = rep.filter("sae.decoder_capacity").rows[0]
    eps = S.decoder_epsilon(big).epsilon
    assert eps < 0.1 and row.extras["status"] == "count"
    assert row.value == pytest.approx(tg.capacity_estimate(32, eps).k)
    assert row.extras["d_sae_over_k"] == pytest.approx(30 / row.value)


@pytest.mark.parametrize("processing", ["tl", "none"])
def test_trained_sae_records_the_processing_of_its_model(processing, tmp_path):
    """cfg.json says how the model was processed; TransformerLens's default needs no kwargs, so sae_lens is quiet."""
    from sae_lens import SAE

    from tests.helpers import make_tiny_model
    from tl_geometry import models

    model = make_tiny_model()
    name, flags = models.processing_flags(processing)
    models._record_processing(model, name, flags)  # what tg.models.load records
    tokens = torch.randint(0, 101, (32, 16), generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = T.train_sae(
            model, tokens, hook=HOOK, out=tmp_path / "sae", d_sae=64, k=4, training_tokens=2048, batch_tokens=256
        )
    meta = json.loads((out / "cfg.json").read_text())["metadata"]
    expected = (
        {} if processing == "tl" else {"fold_ln": False, "center_writing_weights": False, "center_unembed": False}
    )
    assert meta["model_from_pretrained_kwargs"] == expected
    assert meta["tl_geometry_processing"] == {"name": processing, "flags": models.processing_of(model)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SAE.load_from_disk(str(out))
    said = [str(w.message) for w in caught if "model_from_pretrained_kwargs" in str(w.message)]
    assert len(said) == (0 if processing == "tl" else 1)
