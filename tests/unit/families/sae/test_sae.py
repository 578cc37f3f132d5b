"""tl_geometry.families.sae: width parsing on sae_lens's real packaged directory, local SAEs, decoder ε,
compare against the capacity bound, the from_pretrained path through a fake HF cache, bad input.

No network: the directory is package data; SAEs are built locally from sae_lens configs.
"""

from __future__ import annotations

import json
import math
import sys
import warnings

import pytest
import torch

pytest.importorskip("sae_lens")

from tl_geometry.families import sae as S  # noqa: E402
from tl_geometry.families.capacity.hosts import published  # noqa: E402
from tl_geometry.metrics.capacity import capacity  # noqa: E402


# ----------------------------------------------------------------------------- helpers
def make_sae(d_in=32, d_sae=64, hook="blocks.0.hook_resid_post", kind="standard", seed=0):
    from sae_lens import StandardSAE, StandardSAEConfig, TopKSAE, TopKSAEConfig
    from sae_lens.saes.sae import SAEMetadata

    torch.manual_seed(seed)
    meta = SAEMetadata(hook_name=hook, model_name="tiny")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "topk":
            return TopKSAE(TopKSAEConfig(d_in=d_in, d_sae=d_sae, k=4, metadata=meta))
        return StandardSAE(StandardSAEConfig(d_in=d_in, d_sae=d_sae, metadata=meta))


def ref_pair_stats(X: torch.Tensor, threshold=None):
    """Slow reference: the full cosine matrix in float64, off-diagonal entries."""
    X = X.double()
    X = X[X.norm(dim=1) > 0]
    U = X / X.norm(dim=1, keepdim=True)
    C = U @ U.T
    n = C.shape[0]
    off = C[~torch.eye(n, dtype=torch.bool)]
    mean = off.mean().item()
    std = off.std(unbiased=False).item()
    out = {"mean": mean, "std": std, "epsilon": mean + 2 * std, "n": n}
    if threshold is not None:
        iu = torch.triu_indices(n, n, 1)
        vals = C[iu[0], iu[1]].abs()
        out["above"] = int((vals > threshold).sum())
        out["pairs"] = vals.numel()
    return out


@pytest.fixture(scope="module")
def all_widths():
    return S.widths(config="none")


@pytest.fixture(scope="module")
def directory():
    from sae_lens.loading.pretrained_saes_directory import get_pretrained_saes_directory

    return get_pretrained_saes_directory()


@pytest.fixture(scope="module")
def wide_model():
    """A random model whose W_E ε is below 0.2 (d_model 256: ε ≈ 2/√256 = 0.125)."""
    from tests.helpers import make_tiny_model

    return make_tiny_model(d_model=256, d_head=64, n_heads=4, d_mlp=64, n_layers=2, d_vocab=101)


@pytest.fixture(scope="module")
def class2_model():
    """A random model whose W_E ε is below 0.1, Class 2 (d_model 1024: ε ≈ 2/√1024 = 0.0625)."""
    from tests.helpers import make_tiny_model

    return make_tiny_model(d_model=1024, d_head=32, n_heads=2, d_mlp=32, n_layers=2, d_vocab=101)


# ----------------------------------------------------------------------------- parsing
@pytest.mark.parametrize(
    "texts, d_model, expected",
    [
        (("layer_20/width_16k/average_l0_71",), None, 16384),
        (("layer_5_width_1m_l0_big",), None, 2**20),
        (("layer_3/width_131k/canonical",), None, 131072),
        (("layer_0/width_65k/average_l0_12",), None, 65536),
        (("resid_post/layer_9_width_262k_l0_small",), None, 262144),
        (("embedding/width_4k/average_l0_14",), None, 4096),
        (("x", "y", "gemma-2-2b_topk_width-2pow14_date-1109"), None, 16384),
        (("layer0", "layer0.sae.pt", "qwen-scope-3.5-27b-w80k-l50"), None, 80 * 1024),
        (("layer0", "layer0.sae.pt", "qwen-scope-3-8b-base-w64k-l50"), None, 65536),
        (("blocks.0.hook_attn_out", "v5_128k_layer_0"), None, 131072),
        (("blocks.0.hook_resid_post", "v5_32k_layer_0.pt"), None, 32768),
        (("blocks.0.hook_z", "gpt2-small_L0_Hcat_z_lr1.20e-03_ds24576_bs4096_v9.pt"), None, 24576),
        (("blocks.8.hook_resid_pre_768",), None, 768),
        (("blocks.0.hook_mlp_out", "sae_group_gpt2_blocks.0.hook_mlp_out_24576:v1"), None, 24576),
        (("l0r_8x",), 4096, 32768),
        (("l25a_32x",), 4096, 131072),
        (("l0r_8x",), None, None),  # an expansion factor needs d_model
        (("blocks.0.hook_resid_pre", "blocks.0.hook_resid_pre", "gpt2-small-res-jb"), None, None),
        (("layer_3", "layer_3.safetensors", "mwhanna-qwen3-4b-transcoders"), None, None),
        (("blocks.12.hook_resid_post__trainer_0_step_14648",), None, None),  # a step is no width
    ],
)
def test_parse_width_rules(texts, d_model, expected):
    assert S.parse_width(*texts, d_model=d_model)[0] == expected


def test_k_suffix_means_nearest_power_of_two():
    # k: the power of two within 5% of N*1000, else N*1024
    for n, want in [
        (4, 4096),
        (16, 16384),
        (32, 32768),
        (65, 65536),
        (131, 131072),
        (262, 262144),
        (524, 524288),
        (80, 81920),
    ]:
        assert S.parse_width(f"width_{n}k")[0] == want


@pytest.mark.parametrize(
    "text, hook, layer",
    [
        ("blocks.12.hook_resid_post__trainer_0", "blocks.12.hook_resid_post", 12),
        ("blocks.8.hook_resid_pre_768", "blocks.8.hook_resid_pre", 8),
        ("blocks.3.attn.hook_z", "blocks.3.attn.hook_z", 3),
        ("layer_20/width_16k/canonical", None, 20),
        ("resid_post_layer_7_trainer_1", None, 7),
        ("l13m_8x", None, 13),
        ("2-res_sce-ajt", None, None),
    ],
)
def test_parse_hook(text, hook, layer):
    assert S.parse_hook(text) == (hook, layer)


# ----------------------------------------------------------------------------- the real directory
# Rows the id parser leaves unknown in sae_lens 6.54's directory (release -> count). A parser change
# (or a new sae_lens directory) shows up here.
EXPECTED_UNKNOWN = {
    "gpt2-small-res-jb": 13,
    "gpt2-small-res_sce-ajt": 3,
    "gpt2-small-res_scefr-ajt": 3,
    "gpt2-small-res_scl-ajt": 3,
    "gpt2-small-res_sle-ajt": 3,
    "gpt2-small-res_slefr-ajt": 3,
    "gpt2-small-res_sll-ajt": 3,
    "llama-3-8b-it-res-jh": 1,
    "llama_scope_r1_distill": 96,
    "mistral-7b-res-wg": 3,
    "pythia-70m-deduped-att-sm": 6,
    "pythia-70m-deduped-mlp-sm": 6,
    "pythia-70m-deduped-res-sm": 7,
    "sae_bench_pythia70m_sweep_gated_ctx128_0730": 40,
    "sae_bench_pythia70m_sweep_panneal_ctx128_0730": 56,
    "sae_bench_pythia70m_sweep_standard_ctx128_0712": 44,
    "sae_bench_pythia70m_sweep_topk_ctx128_0730": 48,
    "mwhanna-qwen3-4b-transcoders": 36,
    "mwhanna-qwen3-8b-transcoders": 36,
    "mwhanna-qwen3-14b-transcoders": 40,
    "mwhanna-qwen3-14b-transcoders-lowl0": 40,
    "mwhanna-qwen3-1.7b-transcoders-lowl0": 28,
    "mwhanna-qwen3-0.6b-transcoders-lowl0": 28,
    "mntss-gemma-2-2b-2.5m-clt-as-per-layer": 26,  # "2.5m" is the CLT's total, not a per-layer width
    "llama-3.1-8b-instruct-andyrdt": 7,
    "qwen2.5-7b-instruct-andyrdt": 7,
    "gpt-oss-20b-andyrdt": 6,
    "goodfire-llama-3.3-70b-instruct": 1,
    "goodfire-llama-3.1-8b-instruct": 1,
    "temporal-sae-gemma-2-2b": 1,
    "temporal-sae-llama-3.1-8b": 2,
    "deepseek-r1-distill-llama-8b-qresearch": 1,
}


def test_widths_cover_the_whole_directory(all_widths, directory):
    assert len(all_widths) == sum(len(v.saes_map) for v in directory.values())
    assert {w.release for w in all_widths} == set(directory)
    summary = S.width_summary(all_widths)
    assert set(summary["by_source"]) <= {"id", "unknown"}  # config="none"
    unknown = {r: len(ids) for r, ids in summary["unknown"].items()}
    expected = {r: n for r, n in EXPECTED_UNKNOWN.items() if r in directory}
    assert unknown == expected
    assert summary["by_source"]["unknown"] == sum(expected.values())
    assert summary["by_source"]["id"] == len(all_widths) - sum(expected.values())
    assert all(w.width_source == ("unknown" if w.d_sae is None else "id") for w in all_widths)


def test_widths_spot_checks_against_ids(all_widths):
    # plain reference: the width written in a gemma-scope id is the width parsed
    table = {
        "width_4k": 4096,
        "width_16k": 16384,
        "width_32k": 32768,
        "width_65k": 65536,
        "width_131k": 131072,
        "width_262k": 262144,
        "width_524k": 524288,
        "width_1m": 1048576,
    }
    checked = 0
    for w in all_widths:
        for key, value in table.items():
            if f"{key}/" in w.sae_id + "/" or f"{key}_" in w.sae_id:
                assert w.d_sae == value, w
                checked += 1
    assert checked > 10000
    by_key = {(w.release, w.sae_id): w for w in all_widths}
    assert by_key[("gemma-scope-2b-pt-res", "layer_20/width_16k/average_l0_71")].d_sae == 16384
    assert by_key[("gemma-scope-2b-pt-res", "layer_20/width_16k/average_l0_71")].layer == 20
    assert by_key[("gemma-scope-2-4b-pt-res", "layer_22_width_1m_l0_big")].d_sae == 2**20
    assert by_key[("llama_scope_lxr_8x", "l0r_8x")].d_sae == 8 * 4096  # d_model from the published table
    assert by_key[("gpt2-small-res-jb-feature-splitting", "blocks.8.hook_resid_pre_768")].d_sae == 768
    w = by_key[("gpt2-small-resid-post-v5-32k", "blocks.3.hook_resid_post")]
    assert (w.d_sae, w.hook_name, w.layer, w.rule) == (32768, "blocks.3.hook_resid_post", 3, "v5_Nk")
    assert by_key[("gpt2-small-res-jb", "blocks.0.hook_resid_pre")].width_source == "unknown"


def test_widths_filter_by_model(directory, tiny_model):
    rows = S.widths("gemma-2-2b", config="none")
    assert rows and {w.model for w in rows} == {"gemma-2-2b"}
    assert len(rows) == sum(len(v.saes_map) for v in directory.values() if v.model == "gemma-2-2b")
    # organisation prefix and -pt suffix are ignored; -it is another model
    rows = S.widths("gemma-3-1b", config="none")
    assert {w.model for w in rows} == {"google/gemma-3-1b-pt"}
    assert S.widths(tiny_model, config="none") == []
    rel = S.widths(releases=["gpt2-small-hook-z-kk"], config="none")
    for w in rel:  # "..._ds24576_bs4096_..." in the file name (layer 5 has ds49152)
        assert w.d_sae == int(w.path.split("_ds")[1].split("_")[0])
    assert {w.d_sae for w in rel} == {24576, 49152}
    assert all(w.to_dict()["release"] == "gpt2-small-hook-z-kk" for w in rel)


# ----------------------------------------------------------------------------- local SAEs, decoder ε
@pytest.mark.parametrize("kind", ["standard", "topk"])
def test_local_sae_roundtrip_and_decoder_epsilon(tmp_path, kind):
    sae = make_sae(kind=kind, d_sae=96)
    sae.save_model(tmp_path / kind)
    loaded = S.load(path=tmp_path / kind)
    assert type(loaded) is type(sae)
    torch.testing.assert_close(loaded.W_dec, sae.W_dec)
    de = S.decoder_epsilon(loaded, host=0.3)
    ref = ref_pair_stats(sae.W_dec.detach(), threshold=0.3)
    assert de.mean == pytest.approx(ref["mean"], abs=1e-6)
    assert de.std == pytest.approx(ref["std"], abs=1e-6)
    assert de.epsilon == pytest.approx(ref["epsilon"], abs=1e-6)
    assert (de.n_above, de.n_pairs) == (ref["above"], ref["pairs"])
    assert de.frac_above == ref["above"] / ref["pairs"]
    assert de.threshold_source == "given"
    assert json.dumps(de.to_dict(), default=str)
    no_host = S.decoder_epsilon(sae)
    assert no_host.threshold is None and math.isnan(no_host.frac_above)


def test_cosine_exceedance_matches_reference_blockwise():
    g = torch.Generator().manual_seed(1)
    X = torch.randn(50, 8, generator=g)
    X[[3, 17]] = 0.0  # zero rows are dropped
    for t in (0.0, 0.2, 0.5, 0.9):
        ref = ref_pair_stats(X, threshold=t)
        for block in (5, 64):
            assert S.cosine_exceedance(X, t, block_size=block) == (ref["above"], ref["pairs"])


def test_decoder_epsilon_random_gaussian_matches_random_packing_expectation():
    """Uniform unit vectors in R^d: cos has mean 0 and variance 1/d, so ε ≈ 2/√d; and
    P(|cos| > t) = I_{1−t²}((d−1)/2, 1/2) (the regularized incomplete beta function)."""
    from scipy.special import betainc

    d, n = 64, 1500
    W = torch.randn(n, d, generator=torch.Generator().manual_seed(0))
    t = 0.2
    de = S.decoder_epsilon(W, host=t)
    assert de.epsilon == pytest.approx(2 / math.sqrt(d), abs=0.01)
    assert abs(de.mean) < 0.005
    expected = betainc((d - 1) / 2, 0.5, 1 - t * t)
    assert de.frac_above == pytest.approx(expected, abs=0.005)


def test_decoder_epsilon_near_duplicates_is_high():
    g = torch.Generator().manual_seed(0)
    base = torch.randn(1, 64, generator=g)
    W = base + 0.01 * torch.randn(300, 64, generator=g)
    de = S.decoder_epsilon(W, host=0.1)
    assert de.epsilon > 0.95 and de.model_class == "class1"
    assert de.frac_above == 1.0


def test_decoder_epsilon_host_model_measures_w_e(wide_model):
    sae = make_sae(d_in=256, d_sae=80, hook="blocks.1.hook_resid_post")
    de = S.decoder_epsilon(sae, host=wide_model)
    ref_host = ref_pair_stats(wide_model.W_E.detach())
    assert de.threshold == pytest.approx(ref_host["epsilon"], abs=1e-6)
    assert de.threshold_source == "measured"
    ref = ref_pair_stats(sae.W_dec.detach(), threshold=de.threshold)
    assert (de.n_above, de.n_pairs) == (ref["above"], ref["pairs"])


# ----------------------------------------------------------------------------- compare
def test_compare_local_saes_on_a_model(class2_model, tmp_path):
    a = make_sae(d_in=1024, d_sae=64, hook="blocks.0.hook_resid_post", seed=1)
    b = make_sae(d_in=1024, d_sae=128, hook="blocks.1.hook_mlp_out", kind="topk", seed=2)
    b.save_model(tmp_path / "b")
    rep = S.compare(class2_model, saes=[a, tmp_path / "b"], tied=False)
    ref = ref_pair_stats(class2_model.W_E.detach())
    eps = ref["epsilon"]
    assert eps < 0.1
    assert rep.value("epsilon.W_E") == pytest.approx(eps, abs=1e-6)
    k = capacity(1024, rep.value("epsilon.W_E"), form="full")
    assert rep.value("capacity.W_E") == k
    cap = rep.filter("capacity.W_E").rows[0].extras
    assert cap["status"] == "count" and cap["preset"] == "paper" and cap["k_3sigma"] > k
    ratios = {r.hook: r for r in rep.filter("sae.capacity_ratio").rows}
    assert ratios["blocks.0.hook_resid_post"].value == pytest.approx(64 / k)
    assert ratios["blocks.1.hook_mlp_out"].value == pytest.approx(128 / k)
    assert ratios["blocks.1.hook_mlp_out"].layer == 1
    assert ratios["blocks.0.hook_resid_post"].extras["preset"] == "paper"
    shared = {r.hook: r.value for r in rep.filter("sae.shared_ratio").rows}
    assert shared["blocks.0.hook_resid_post"] == pytest.approx((2 * 101 + 64) / k)  # untied: Eq. 2, 2V
    de = rep.value("sae.decoder_epsilon", hook="blocks.0.hook_resid_post")
    assert de == pytest.approx(ref_pair_stats(a.W_dec.detach())["epsilon"], abs=1e-6)
    frac = rep.value("sae.frac_above_host_epsilon", hook="blocks.0.hook_resid_post")
    ref = ref_pair_stats(a.W_dec.detach(), threshold=rep.value("epsilon.W_E"))
    assert frac == pytest.approx(ref["above"] / ref["pairs"])
    row = rep.filter("sae.d_sae", hook="blocks.0.hook_resid_post").rows[0]
    assert row.extras["epsilon_source"] == "measured" and row.extras["release"] == "local"
    assert rep.provenance["sae_n"] == 2 and rep.provenance["capacity_preset"] == "paper"
    # tied host: V + d_sae (Eq. 2); unknown: no ratio, said so
    rep = S.compare(class2_model, saes=[a], tied=True, decoder_stats=False)
    assert rep.value("sae.shared_ratio") == pytest.approx((101 + 64) / k)
    rep = S.compare(class2_model, saes=[a], decoder_stats=False)
    assert math.isnan(rep.value("sae.shared_ratio"))
    assert rep.filter("sae.shared_ratio").rows[0].extras["verdict"] == "tied unknown"
    with pytest.raises(TypeError, match="tied must be"):
        S.compare(class2_model, saes=[a], tied="yes")
    # a model built by tg.models.load carries what transformers tied: used without reading the checkpoint
    class2_model._tl_geometry_tied = True
    try:
        rep = S.compare(class2_model, saes=[a], decoder_stats=False)
    finally:
        del class2_model._tl_geometry_tied
    row = rep.filter("sae.shared_ratio").rows[0]
    assert row.value == pytest.approx((101 + 64) / k) and row.extras["tied"] is True
    assert "loaded Hugging Face model" in row.extras["tied_source"]
    with pytest.raises(ValueError, match="accepted: \\['paper'\\]"):
        S.compare("Llama-2-7B", preset="library")
    with pytest.raises(ValueError, match="unknown form"):
        S.compare("Llama-2-7B", form="nope")


def test_shared_directions_is_eq_2():
    assert S.shared_directions(1000, 10, tied=False) == 2010
    assert S.shared_directions(1000, 10, tied=True) == 1010
    with pytest.raises(TypeError, match="tied must be"):
        S.shared_directions(1000, 10, tied=None)


@pytest.mark.parametrize("fixture,cls", [("tiny_model", "class1"), ("wide_model", "boundary")])
def test_compare_host_without_a_count_is_indeterminate(fixture, cls, request):
    """Class 1 (d 32: ε ≈ 0.35) and boundary (d 256: ε ≈ 0.125) hosts: no count, so no ratios."""
    model = request.getfixturevalue(fixture)
    d = model.cfg.d_model
    rep = S.compare(model, saes=[make_sae(d_in=d, d_sae=64)], tied=True)
    assert rep.filter("epsilon.W_E").rows[0].extras["model_class"] == cls
    assert math.isnan(rep.value("capacity.W_E"))
    assert rep.filter("capacity.W_E").rows[0].extras["status"] == "indeterminate"
    for metric in ("sae.capacity_ratio", "sae.shared_ratio"):
        row = rep.filter(metric).rows[0]
        assert math.isnan(row.value) and row.extras["verdict"] == "indeterminate"
        assert row.extras["reason"] and row.extras["preset"] == "paper"


def test_compare_published_names_with_directory_saes():
    """Published Table 1 hosts that have SAEs in the directory. Llama-3.1-8B (ε 0.05542) and
    Gemma-2-27B (ε 0.09013) are class 2: ratios; Gemma-2-2B (ε 0.35084) is class 1: indeterminate."""
    table = published()
    for name, table_name, indeterminate in [
        ("meta-llama/Llama-3.1-8B", "Llama-3.1-8B", False),
        ("gemma-2-27b", "Gemma-2-27B", False),
        ("gemma-2-2b", "Gemma-2-2B", True),
    ]:
        rep = S.compare(name, config="none")
        d, eps = table[table_name]
        assert rep.value("epsilon.W_E") == eps
        assert rep.filter("epsilon.W_E").rows[0].extras["epsilon_source"] == "published"
        if indeterminate:
            assert math.isnan(rep.value("capacity.W_E"))
        else:
            assert rep.value("capacity.W_E") == pytest.approx(capacity(d, eps, form="full"))
        k = rep.value("capacity.W_E")
        rows = rep.filter("sae.capacity_ratio").rows
        assert len(rows) == rep.provenance["sae_n"] > 0
        d_sae = {(r.extras["release"], r.extras["sae_id"]): r.value for r in rep.filter("sae.d_sae").rows}
        for r in rows:
            if indeterminate:
                assert math.isnan(r.value) and r.extras["verdict"] == "indeterminate"
            else:
                assert r.value == pytest.approx(d_sae[(r.extras["release"], r.extras["sae_id"])] / k)
        assert all(r.model == table_name for r in rep.rows)
    rep = S.compare("meta-llama/Llama-3.1-8B", config="none")
    assert {r.value for r in rep.filter("sae.d_sae").rows} == {32768.0, 131072.0}
    shared = rep.filter("sae.shared_ratio").rows[0]
    assert shared.extras["tied"] is False  # Llama-3.1-8B has a separate lm_head: 2V
    assert shared.value == pytest.approx(
        (2 * 128256 + rep.filter("sae.d_sae").rows[0].value) / rep.value("capacity.W_E")
    )
    assert rep.provenance["sae_n_unknown_width"] == 2  # temporal-sae-llama-3.1-8b


def test_compare_qwen3_30b_a3b_shared_ratio_is_0_77():
    """Qwen3-30B-A3B is untied (2V): a 128k SAE gives (2·151936 + 131072) / 5.67e5 ≈ 0.77, not 0.50."""
    sae = make_sae(d_in=2048, d_sae=131072 // 64, hook="blocks.3.hook_resid_post")
    rep = S.compare("Qwen3-30B-A3B", saes=[sae], decoder_stats=False, config="none")
    k = rep.value("capacity.W_E")
    assert f"{k:.2e}" == "5.67e+05"  # the paper's Table 1
    row = next(r for r in rep.filter("sae.shared_ratio").rows if r.extras.get("release") == "local")
    assert row.extras["tied"] is False
    assert row.value == pytest.approx((2 * 151936 + 131072 // 64) / k)
    assert round((2 * 151936 + 131072) / k, 2) == 0.77


def test_compare_published_name_with_local_sae_and_no_directory_saes():
    sae = make_sae(d_in=4096, d_sae=16, hook="blocks.3.hook_resid_post")
    rep = S.compare("Llama-2-7B", saes=[sae], decoder_stats=False)
    k = capacity(4096, 0.0645, form="full")
    assert 3e7 < k < 5e7  # the paper: about 4×10^7 directions
    assert rep.value("sae.capacity_ratio") == pytest.approx(16 / k)
    assert math.isnan(rep.value("sae.shared_ratio"))  # Llama-2-7B's d_vocab is not in D_VOCAB
    assert rep.filter("sae.shared_ratio").rows[0].extras["verdict"] == "d_vocab unknown"
    rep = S.compare("Llama-2-7B", saes=[sae], d_vocab=32000, decoder_stats=False)
    assert rep.value("sae.shared_ratio") == pytest.approx((2 * 32000 + 16) / k)  # Llama-2 is untied


def test_registered_metric_returns_only_sae_rows(wide_model):
    import tl_geometry as tg

    spec = tg.get_metric("sae")
    assert spec.needs == "weights"
    rep = spec(wide_model, None, saes=[make_sae(d_in=256, d_sae=32)])
    assert rep.metrics == {
        "sae.d_sae",
        "sae.capacity_ratio",
        "sae.shared_ratio",
        "sae.decoder_epsilon",
        "sae.frac_above_host_epsilon",
        "sae.decoder_capacity",
    }
    assert len(spec(wide_model, None).rows) == 0  # no SAE of a random model in the directory


def test_plot_sae_widths(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    rep = S.compare("gemma-2-27b", config="none")
    fig = S.plot_sae_widths(rep, path=tmp_path / "w.png")
    assert (tmp_path / "w.png").stat().st_size > 1000
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("capacity k = 4.76e+10" in s for s in labels) and any("d_vocab" in s for s in labels)
    assert any("k − V" in s and "tied" in s for s in labels)  # Gemma-2-27B ties: V, not 2V
    fig3 = S.plot_sae_widths(S.compare("gemma-2-2b", config="none"))  # Class 1: no count drawn
    texts = [t.get_text() for t in fig3.axes[0].texts]
    assert any("capacity indeterminate" in t for t in texts)
    assert not any("capacity k" in t.get_text() for t in (fig3.axes[0].get_legend() or fig3.axes[0]).get_texts())
    fig2 = S.plot_sae_widths(S.widths("gpt2-small", config="none"))
    assert len(fig2.axes[0].get_xticklabels()) > 5
    import matplotlib.pyplot as plt

    plt.close("all")


# ----------------------------------------------------------------------------- hub path, offline
def _fake_cache(root, repo_id, folder, sae):
    """A Hugging Face cache holding one sae_lens-format SAE: refs/main -> snapshot/<folder>/..."""
    from safetensors.torch import save_file

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo_dir = root / f"models--{repo_id.replace('/', '--')}"
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(commit)
    snap = repo_dir / "snapshots" / commit / folder
    sae.save_model(snap)
    save_file({"sparsity": torch.zeros(sae.cfg.d_sae)}, str(snap / "sparsity.safetensors"))
    return root


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    root = tmp_path / "hub"
    root.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return root


def test_from_pretrained_through_a_fake_local_cache(hf_cache):
    sae = make_sae(d_in=32, d_sae=48, hook="blocks.0.hook_resid_pre")
    _fake_cache(hf_cache, "jbloom/GPT2-Small-SAEs-Reformatted", "blocks.0.hook_resid_pre", sae)
    loaded = S.load(release="gpt2-small-res-jb", sae_id="blocks.0.hook_resid_pre")
    torch.testing.assert_close(loaded.W_dec, sae.W_dec)
    # the cached config gives this SAE's width; the other ids of the release stay unknown
    rows = {w.sae_id: w for w in S.widths(releases="gpt2-small-res-jb")}
    w = rows["blocks.0.hook_resid_pre"]
    assert (w.d_sae, w.d_in, w.width_source, w.hook_name) == (48, 32, "config", "blocks.0.hook_resid_pre")
    assert rows["blocks.1.hook_resid_pre"].width_source == "unknown"
    # a file missing from the cached snapshot: a clear error, not a hub call
    with pytest.raises(S.HubUnavailableError, match="lacks a file"):
        S.load(release="gpt2-small-res-jb", sae_id="blocks.1.hook_resid_pre")


def test_from_pretrained_with_converter_hook():
    sae = make_sae(d_in=32, d_sae=40)
    cfg = sae.cfg.to_dict()
    state = {k: v.detach().clone() for k, v in sae.state_dict().items()}

    def converter(repo_id, folder_name, device="cpu", force_download=False, cfg_overrides=None):
        assert repo_id == "jbloom/GPT2-Small-OAI-v5-32k-resid-post-SAEs" and folder_name == "v5_32k_layer_2.pt"
        return {**cfg, **(cfg_overrides or {})}, dict(state), None

    loaded = S.load(release="gpt2-small-resid-post-v5-32k", sae_id="blocks.2.hook_resid_post", converter=converter)
    torch.testing.assert_close(loaded.W_dec, sae.W_dec)


# ----------------------------------------------------------------------------- bad input
def test_offline_without_cache_fails_fast_and_clearly(hf_cache):
    with pytest.raises(
        S.HubUnavailableError,
        match="HF_HUB_OFFLINE is set and repository 'jbloom/GPT2-Small-SAEs-Reformatted' is not in the local",
    ):
        S.load(release="gpt2-small-res-jb", sae_id="blocks.0.hook_resid_pre")
    with pytest.raises(S.HubUnavailableError, match="config='hub' needs the Hugging Face hub"):
        S.widths("gpt2-small", config="hub")


def test_unreachable_hub_without_cache_fails_fast(hf_cache, monkeypatch):
    """Not offline by flag, but the endpoint refuses connections: no DNS/retry loop, a clear error."""
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # discard port: refused
    from tl_geometry.io import hub

    monkeypatch.setattr(hub, "_REACH", {})
    with pytest.raises(S.HubUnavailableError, match=r"the hub did not answer within 0.5 s and repository"):
        S.load(release="gpt2-small-res-jb", sae_id="blocks.0.hook_resid_pre", timeout=0.5)
    # cached: read from the cache with the hub forced offline for the call
    sae = make_sae(d_in=32, d_sae=24, hook="blocks.0.hook_resid_pre")
    _fake_cache(hf_cache, "jbloom/GPT2-Small-SAEs-Reformatted", "blocks.0.hook_resid_pre", sae)
    loaded = S.load(release="gpt2-small-res-jb", sae_id="blocks.0.hook_resid_pre", timeout=0.5)
    torch.testing.assert_close(loaded.W_dec, sae.W_dec)
    assert constants.HF_HUB_OFFLINE is False  # restored


def test_unknown_release_and_sae_id_list_close_matches():
    with pytest.raises(ValueError, match=r"unknown sae_lens release 'gemma-scope-2b-pt-rez'.*gemma-scope-2b-pt-res"):
        S.load(release="gemma-scope-2b-pt-rez", sae_id="x")
    with pytest.raises(
        ValueError, match=r"unknown sae_id 'layer_20/width_16k/average_l0_7'.*layer_20/width_16k/average_l0_71"
    ):
        S.load(release="gemma-scope-2b-pt-res", sae_id="layer_20/width_16k/average_l0_7")
    with pytest.raises(ValueError, match="unknown sae_lens release 'nope'"):
        S.widths(releases=["nope"])
    with pytest.raises(ValueError, match=r"no SAE for model 'gemma-2-2bb'.*gemma-2-2b"):
        S.widths("gemma-2-2bb")
    with pytest.raises(ValueError, match="config must be"):
        S.widths(config="web")


def test_load_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="pass release=... and sae_id=..."):
        S.load()
    with pytest.raises(ValueError, match="not both"):
        S.load(release="gpt2-small-res-jb", path=tmp_path)
    with pytest.raises(ValueError, match="expected a directory with cfg.json"):
        S.load(path=tmp_path / "missing")


def test_sae_hook_not_in_model_and_wrong_d_in(tiny_model):
    with pytest.raises(ValueError, match=r"SAE hook 'blocks.7.hook_resid_post' is not a hook of the model"):
        S.compare(tiny_model, saes=[make_sae(d_in=32, hook="blocks.7.hook_resid_post")])
    with pytest.raises(ValueError, match=r"SAE d_in = 16 does not match the model's d_model = 32"):
        S.decoder_epsilon(make_sae(d_in=16), host=tiny_model)
    with pytest.raises(ValueError, match=r"has d_in = 16, but the host's d_model = 4096"):
        S.compare("Llama-2-7B", saes=[make_sae(d_in=16)])
    with pytest.raises(ValueError, match=r"d_in = 16 does not match the host's d_model = 4096"):
        S.decoder_epsilon(make_sae(d_in=16), host="Llama-2-7B")


def test_unknown_host_name_and_bad_matrices():
    with pytest.raises(ValueError, match="no published ε for 'gpt2-small'.*pass a loaded model"):
        S.compare("gpt2-small")
    with pytest.raises(TypeError, match="expected a sae_lens SAE"):
        S.decoder_epsilon([[1.0, 0.0]])
    with pytest.raises(ValueError, match="threshold must lie in"):
        S.cosine_exceedance(torch.randn(4, 3), 1.5)
    with pytest.raises(ValueError, match="expected a 2-D tensor"):
        S.cosine_exceedance(torch.randn(4), 0.1)
    with pytest.raises(ValueError, match="at least 2 non-zero rows"):
        S.cosine_exceedance(torch.zeros(3, 2), 0.1)


def test_sae_lens_not_installed_names_the_extra(monkeypatch, tmp_path):
    (tmp_path / "cfg.json").write_text("{}")
    monkeypatch.setitem(sys.modules, "sae_lens", None)  # import sae_lens -> ImportError
    with pytest.raises(S.SAELensNotInstalledError, match=r"pip install 'tl-geometry\[sae\]'"):
        S.widths()
    with pytest.raises(ImportError, match="sae_lens"):
        S.load(path=tmp_path)


# ----------------------------------------------------------------------------- CLI
def test_cli_widths_and_compare(tmp_path, capsys):
    import matplotlib

    matplotlib.use("Agg")
    from tl_geometry.cli import main

    assert (
        main(
            [
                "sae",
                "widths",
                "--model",
                "meta-llama/Llama-3.1-8B",
                "--config",
                "none",
                "--json",
                str(tmp_path / "w.json"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "llama_scope_lxr_8x" in out and "32,768" in out and "unknown width: temporal-sae-llama-3.1-8b (2)" in out
    data = json.loads((tmp_path / "w.json").read_text())
    assert data["summary"]["n"] == len(data["rows"]) == len(S.widths("meta-llama/Llama-3.1-8B", config="none"))
    assert (
        main(
            [
                "sae",
                "compare",
                "--model",
                "gemma-2-27b",
                "--config",
                "none",
                "--out",
                str(tmp_path / "r.json"),
                "--figure",
                str(tmp_path / "f.png"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "Gemma-2-27B" in out and "published" in out and "gemma-scope-27b-pt-res" in out
    assert (tmp_path / "f.png").exists() and (tmp_path / "r.json").exists()
    assert main(["sae", "widths", "--release", "nope"]) == 2
    assert "unknown sae_lens release 'nope'" in capsys.readouterr().err
