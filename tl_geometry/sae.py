"""SAE adapter: published SAE widths (sae_lens) next to the capacity bound, and SAE decoder ε.

The capacity paper (Guha, arXiv 2606.02765) bounds how many directions with pairwise
|cos| ≤ ε fit in d_model dimensions, k(d, ε) (:func:`tl_geometry.capacity`). Sparse
autoencoders claim a number of features d_sae per hook. This module puts the two side by side:

* :func:`widths` — one :class:`SAEWidth` per SAE of sae_lens's packaged pretrained directory
  (release, id, model, hook, d_sae and where d_sae came from);
* :func:`load` — ``SAE.from_pretrained`` / ``SAE.load_from_disk`` with a fast, clear failure
  offline;
* :func:`compare` — a :class:`~tl_geometry.report.GeometryReport` with d_sae / capacity and
  the shared ratio per SAE (the paper's shared-resource reading, its Eq. 2: token embeddings,
  unembeddings and features draw on one pool of near-orthogonal directions, k ≈ 2V + k_features
  for untied models and V + k_features for tied ones), so (2V + d_sae) / k or (V + d_sae) / k;
* :func:`decoder_epsilon` — ε of an SAE's decoder rows and the exact fraction of decoder pairs
  whose |cos| exceeds the host model's ε.

sae_lens is an optional dependency (``pip install 'tl-geometry[sae]'``), imported only inside the
functions that need it. The width parser and the blockwise pair count are pure functions and
work without it.

Our choices where the paper is silent:

* **Widths from ids.** sae_lens's directory has no width field. ``width_source="config"`` when
  the SAE's config was read (from the local HF cache, or the hub with ``config="hub"``);
  otherwise d_sae is parsed from the id, then the repository path, then the release name, then
  the repo id, by the first matching rule of :data:`WIDTH_RULES` (``"id"``); else
  ``"unknown"``. ``Nk`` means the power of two nearest N·1000 when it is within 5 % of it
  (``16k`` → 16384, ``131k`` → 131072, ``1m`` → 1048576), else N·1024 (``80k`` → 81920).
* **No count, no ratio.** The capacity is the paper's (:func:`tl_geometry.capacity_estimate`,
  preset ``"paper"``): a count only for ε < 0.1. For a boundary (0.1 ≤ ε ≤ 0.2) or Class-1
  (ε > 0.2) host the capacity is indeterminate, and so are the ratios: NaN with
  ``verdict="indeterminate"`` and the reason in ``extras["reason"]``, never a number.
* **Tied or not.** The shared ratio needs to know whether the host ties its embedding and
  unembedding: ``tied=`` when given; else the published table's ``tied`` column (from each
  model's Hugging Face ``tie_word_embeddings``); else, for an offline-zoo model, whether its
  checkpoint has a separate output tensor; else unknown (NaN, ``verdict="tied unknown"``).
* **Published ε.** With only a model name, ε and d_model come from the paper's Table 1
  (:func:`tl_geometry.published`, labelled ``epsilon_source="published"``); sae_lens names map
  to it ignoring an organisation prefix, case, and a ``-pt``/``-base``/``-it``/``-instruct``
  suffix (``google/gemma-3-1b-pt`` → Gemma-3-1B). d_vocab for those models comes from
  :data:`D_VOCAB` (their tokenizers' vocabulary sizes).
* **Exceedance** counts unordered pairs i < j of non-zero decoder rows with |cos| > ε_host
  (strictly greater), exactly, in float32 blocks.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Sequence

import torch
from torch import Tensor

from tl_geometry import hub
from tl_geometry.hosts import HostEpsilon, close_names, find_host, host_epsilon, normalize_name, published_hosts
from tl_geometry.registry import register_metric
from tl_geometry.report import GeometryReport, model_name

logger = logging.getLogger(__name__)

__all__ = [
    "SAEWidth",
    "WIDTH_RULES",
    "D_VOCAB",
    "parse_width",
    "parse_hook",
    "widths",
    "width_summary",
    "load",
    "compare",
    "DecoderEpsilon",
    "decoder_epsilon",
    "cosine_exceedance",
    "published_host",
    "shared_directions",
    "plot_sae_widths",
    "SAELensNotInstalledError",
    "HubUnavailableError",
]

WidthSource = Literal["config", "id", "unknown"]

#: Vocabulary sizes (tokenizer ``vocab_size`` of each model's Hugging Face config) of the
#: published-table models that have SAEs in sae_lens's directory; used by :func:`compare` when
#: only a name is given. Our column ``d_vocab`` of the published-hosts data file, not the paper's.
D_VOCAB: dict[str, int] = {h.name: h.d_vocab for h in published_hosts().values() if h.d_vocab is not None}


class SAELensNotInstalledError(ImportError):
    """sae_lens is needed and missing (install the ``sae`` extra)."""


class HubUnavailableError(OSError):
    """The Hugging Face hub cannot be used (offline / unreachable) and the files are not cached."""


def _sae_lens():
    try:
        import sae_lens  # noqa: F401
    except ImportError as exc:  # exercised by monkeypatching sys.modules
        from importlib.metadata import PackageNotFoundError, version

        try:
            tl = f"; installed: transformer-lens {version('transformer-lens')}"
        except PackageNotFoundError:
            tl = ""
        raise SAELensNotInstalledError(
            "tl_geometry.sae needs sae_lens, which is not installed: pip install 'tl-geometry[sae]' "
            f"(sae-lens>=6.50,<7, which needs transformer-lens < 4{tl})"
        ) from exc
    return sae_lens


def _directory() -> dict:
    _sae_lens()
    from sae_lens.loading.pretrained_saes_directory import get_pretrained_saes_directory

    return get_pretrained_saes_directory()


# ----------------------------------------------------------------------------- width parsing
def _k(n: str, unit: str) -> int:
    """``16k`` → 16384: the power of two within 5 % of N·1000 (N·10⁶ for m), else N·1024 (N·2²⁰)."""
    x = float(n) * (1_000 if unit.lower() == "k" else 1_000_000)
    p = 2 ** round(math.log2(x))
    if abs(p - x) <= 0.05 * x:
        return int(p)
    return int(round(float(n) * (1024 if unit.lower() == "k" else 2**20)))


#: (name, regex, value) in order; the first rule that matches the id, then the path, then the
#: release name, then the repo id, gives d_sae. ``value(match, d_model)`` returns an int or None.
WIDTH_RULES: tuple[tuple[str, re.Pattern, Callable[[re.Match, int | None], int | None]], ...] = (
    ("width_Nk", re.compile(r"width[_-]?(\d+(?:\.\d+)?)([km])(?![a-z0-9])", re.I), lambda m, d: _k(m[1], m[2])),
    ("2powN", re.compile(r"2pow(\d+)(?![0-9])", re.I), lambda m, d: 2 ** int(m[1])),
    ("wNk", re.compile(r"(?<![a-z0-9])w[_-]?(\d+(?:\.\d+)?)([km])(?![a-z0-9])", re.I), lambda m, d: _k(m[1], m[2])),
    ("v5_Nk", re.compile(r"v5[_-](\d+)([km])(?![a-z0-9])", re.I), lambda m, d: _k(m[1], m[2])),
    ("dsN", re.compile(r"(?<![a-z0-9])ds(\d+)(?![0-9])", re.I), lambda m, d: int(m[1])),
    ("hook_N", re.compile(r"hook_[a-z_]*?[a-z]_(\d{3,})(?![0-9])", re.I), lambda m, d: int(m[1])),
    # expansion factor (Llama Scope "l0r_8x"): factor × d_model, only when d_model is known
    ("Nx", re.compile(r"(?<![a-z0-9])(\d+)x(?![a-z0-9])", re.I), lambda m, d: int(m[1]) * d if d else None),
)


def parse_width(*texts: str | None, d_model: int | None = None) -> tuple[int | None, str | None]:
    """d_sae parsed from the first text (id, path, release, repo id) that a rule matches.

    Rules (:data:`WIDTH_RULES`, first match wins): ``width_16k``/``width-1m`` (k, m as described
    in the module docstring), ``2pow14`` → 16384, ``w32k``/``W80K``/``w-32k``, ``v5_32k``,
    ``ds24576``, a number after a hook name (``hook_resid_pre_768``, ``hook_mlp_out_24576:v1``),
    and an expansion factor ``8x`` × ``d_model`` (when ``d_model`` is given).

    Returns:
        (d_sae, rule name) or (None, None).

    Examples:
        >>> parse_width("layer_20/width_16k/average_l0_71")
        (16384, 'width_Nk')
        >>> parse_width("layer_5_width_1m_l0_big")
        (1048576, 'width_Nk')
        >>> parse_width("blocks.3.hook_resid_post__trainer_1", "x", "sae_bench_width-2pow14_date")
        (16384, '2powN')
        >>> parse_width("l0r_8x", d_model=4096)
        (32768, 'Nx')
        >>> parse_width("blocks.0.hook_resid_pre")
        (None, None)
    """
    for text in texts:
        if not text:
            continue
        for name, rx, value in WIDTH_RULES:
            m = rx.search(str(text))
            if m:
                v = value(m, d_model)
                if v:
                    return int(v), name
    return None, None


_HOOK_RX = re.compile(r"blocks\.(\d+)\.((?:attn\.|mlp\.)?hook_[a-z]+(?:_[a-z]+)*)")
_LAYER_RX = re.compile(r"(?:^|[/_.-])(?:layer_?|l)(\d+)(?:[amr]?(?=[_/.-]|$))", re.I)


def parse_hook(*texts: str | None) -> tuple[str | None, int | None]:
    """(TransformerLens hook name, layer) named in an id or path, e.g.
    ``blocks.8.hook_resid_pre_768`` → (``blocks.8.hook_resid_pre``, 8); ``layer_12/width_16k``
    → (None, 12); nothing → (None, None).

    Examples:
        >>> parse_hook("blocks.12.hook_resid_post__trainer_0")
        ('blocks.12.hook_resid_post', 12)
        >>> parse_hook("layer_20/width_16k/canonical")
        (None, 20)
    """
    for text in texts:
        if text:
            m = _HOOK_RX.search(str(text))
            if m:
                return f"blocks.{m[1]}.{m[2]}", int(m[1])
    for text in texts:
        if text:
            m = _LAYER_RX.search(str(text))
            if m:
                return None, int(m[1])
    return None, None


@dataclass(frozen=True)
class SAEWidth:
    """One SAE of sae_lens's pretrained directory and its width.

    Attributes:
        release: sae_lens release name.
        sae_id: id within the release.
        model: the model name sae_lens records (e.g. ``gemma-2-2b``, ``google/gemma-3-4b-pt``).
        repo_id: Hugging Face repository.
        path: path inside the repository.
        hook_name: TransformerLens hook, when the id or config names one.
        layer: layer, when the hook, id or config gives one.
        d_sae: number of features, or None when unknown.
        width_source: ``"config"``, ``"id"`` or ``"unknown"``.
        rule: the :data:`WIDTH_RULES` name that parsed the width (``"config"`` for configs).
        d_in: input dimension from the config (None unless ``width_source="config"``).
    """

    release: str
    sae_id: str
    model: str
    repo_id: str
    path: str
    hook_name: str | None
    layer: int | None
    d_sae: int | None
    width_source: WidthSource
    rule: str | None = None
    d_in: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _norm_model(name: str) -> str:
    """Key of a sae_lens model name: :func:`tl_geometry.hosts.normalize_name` without a
    ``-pt``/``-base``/``-hf`` suffix (``google/gemma-3-4b-pt`` and ``gemma-3-4b`` match)."""
    s = str(name).split("/")[-1]
    for suffix in ("-pt", "-base", "-hf"):
        if s.lower().endswith(suffix):
            s = s[: -len(suffix)]
    return normalize_name(s)


def _model_keys(model: Any) -> set[str]:
    """Normalized names a model (or name) goes by in sae_lens's directory."""
    if isinstance(model, str):
        return {_norm_model(model)}
    names = {model_name(model)}
    cfg = getattr(model, "cfg", None)
    for attr in ("model_name", "tokenizer_name"):
        v = getattr(cfg, attr, None)
        if isinstance(v, str):
            names.add(v)
    try:  # TL aliases: HookedTransformer's cfg.model_name "gpt2" is sae_lens's "gpt2-small"
        from transformer_lens.loading_from_pretrained import MODEL_ALIASES

        low = {_norm_model(n) for n in names}
        for official, aliases in MODEL_ALIASES.items():
            if _norm_model(official) in low:
                names.update(aliases)
    except Exception:  # pragma: no cover - TL layout changed
        pass
    return {_norm_model(n) for n in names}


def _hub_cache_dir() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def _repo_cached(repo_id: str) -> bool:
    return (_hub_cache_dir() / f"models--{repo_id.replace('/', '--')}").is_dir()


class _forced_offline:
    """Context manager: huggingface_hub offline mode on (reads the local cache only)."""

    def __enter__(self):
        from huggingface_hub import constants

        self._old = constants.HF_HUB_OFFLINE
        constants.HF_HUB_OFFLINE = True
        return self

    def __exit__(self, *exc):
        from huggingface_hub import constants

        constants.HF_HUB_OFFLINE = self._old
        return False


def _config_dict(release: str, sae_id: str) -> dict[str, Any]:
    from sae_lens.loading.pretrained_sae_loaders import load_sae_config_from_huggingface

    return load_sae_config_from_huggingface(release, sae_id)


def _from_config(cfg: dict[str, Any]) -> tuple[int | None, int | None, str | None]:
    meta = cfg.get("metadata") or {}
    hook = cfg.get("hook_name") or (meta.get("hook_name") if isinstance(meta, dict) else None)
    d_sae = cfg.get("d_sae")
    d_in = cfg.get("d_in")
    return (int(d_sae) if d_sae else None), (int(d_in) if d_in else None), hook


_close = close_names


def _is_repo_id(name: str) -> bool:
    """``ORG/NAME``: a Hugging Face repository id rather than a sae_lens release name."""
    return bool(re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", name))


def _check_releases(directory: dict, releases: str | Sequence[str] | None) -> list[str]:
    if releases is None:
        return list(directory)
    if isinstance(releases, str):
        releases = [releases]
    for r in releases:
        if r not in directory:
            raise ValueError(
                f"unknown sae_lens release {r!r}; close matches: {_close(r, directory)} "
                f"({len(directory)} releases; list them with tl_geometry.sae.widths())"
            )
    return list(releases)


def widths(
    model: Any = None,
    *,
    releases: str | Sequence[str] | None = None,
    config: Literal["cache", "hub", "none"] = "cache",
    d_model: int | None = None,
) -> list[SAEWidth]:
    """One :class:`SAEWidth` per SAE in sae_lens's packaged pretrained directory.

    Args:
        model: keep only SAEs of this model: a sae_lens model name (``"gemma-2-2b"``,
            ``"google/gemma-3-4b-pt"``; matched ignoring an organisation prefix, case and a
            ``-pt``/``-base`` suffix) or a TransformerLens model (its name and TL aliases).
            None: every SAE.
        releases: keep only these releases.
        config: where ``width_source="config"`` may come from: ``"cache"`` (default) reads the
            SAE's config with sae_lens's ``load_sae_config_from_huggingface`` only for releases
            whose repository is in the local Hugging Face cache, with the hub forced offline;
            ``"hub"`` reads every config from the hub (one request per SAE: filter first);
            ``"none"`` parses ids only.
        d_model: width of the residual stream, for expansion-factor ids (``8x``); by default
            the published table's d_model of the SAE's model, when it has one.

    Returns:
        list of :class:`SAEWidth` in directory order.

    Raises:
        SAELensNotInstalledError: sae_lens missing.
        ValueError: unknown release (close matches listed), a model name with no SAE in the
            directory (close matches listed), bad ``config``.
        HubUnavailableError: ``config="hub"`` while offline or unreachable.
    """
    if config not in ("cache", "hub", "none"):
        raise ValueError(f"config must be 'cache', 'hub' or 'none', got {config!r}")
    directory = _directory()
    rels = _check_releases(directory, releases)
    keys = None if model is None else _model_keys(model)
    if isinstance(model, str) and keys is not None:
        models = {v.model for v in directory.values()}
        if not any(_norm_model(m) in keys for m in models):
            raise ValueError(
                f"no SAE for model {model!r} in sae_lens's directory; close matches: "
                f"{_close(model, sorted(models))}"
            )
    if config == "hub" and (hub.offline() or not hub.reachable(2.0)):
        raise HubUnavailableError(
            "config='hub' needs the Hugging Face hub, which is offline (HF_HUB_OFFLINE) or "
            "unreachable; use config='cache' or 'none'"
        )
    out: list[SAEWidth] = []
    for release in rels:
        info = directory[release]
        if keys is not None and _norm_model(info.model) not in keys:
            continue
        dm = d_model if d_model is not None else _published_d_model(info.model)
        read_config = config == "hub" or (config == "cache" and _repo_cached(info.repo_id))
        for sae_id, path in info.saes_map.items():
            hook, layer = parse_hook(sae_id, path)
            d_sae, rule = parse_width(sae_id, path, release, info.repo_id, d_model=dm)
            source: WidthSource = "id" if d_sae else "unknown"
            d_in = None
            if read_config:
                try:
                    if config == "cache":
                        with _forced_offline():
                            cfg = _config_dict(release, sae_id)
                    else:
                        cfg = _config_dict(release, sae_id)
                    c_sae, d_in, c_hook = _from_config(cfg)
                    if c_sae:
                        d_sae, rule, source = c_sae, "config", "config"
                        hook = c_hook or hook
                        if c_hook:
                            layer = parse_hook(c_hook)[1]
                except Exception as exc:  # not (fully) cached, or a loader that needs weights
                    logger.debug("no config for %s/%s: %s", release, sae_id, exc)
            out.append(
                SAEWidth(
                    release=release, sae_id=sae_id, model=info.model, repo_id=info.repo_id, path=str(path),
                    hook_name=hook, layer=layer, d_sae=d_sae, width_source=source, rule=rule, d_in=d_in,
                )
            )
    return out


def width_summary(rows: Sequence[SAEWidth]) -> dict[str, Any]:
    """Counts by ``width_source`` and the unknown rows grouped by release.

    Returns:
        ``{"n": ..., "by_source": {...}, "by_rule": {...}, "unknown": {release: [sae_id, ...]}}``.
    """
    by_source: dict[str, int] = {}
    by_rule: dict[str, int] = {}
    unknown: dict[str, list[str]] = {}
    for w in rows:
        by_source[w.width_source] = by_source.get(w.width_source, 0) + 1
        if w.rule:
            by_rule[w.rule] = by_rule.get(w.rule, 0) + 1
        if w.d_sae is None:
            unknown.setdefault(w.release, []).append(w.sae_id)
    return {"n": len(rows), "by_source": by_source, "by_rule": by_rule, "unknown": unknown}


# ----------------------------------------------------------------------------- published hosts
def published_host(name: str) -> tuple[str, int, float] | None:
    """(table name, d_model, ε) of the capacity paper's Table 1 for a (sae_lens) model name.

    ``google/gemma-3-1b-pt`` → ("Gemma-3-1B", 1152, 0.20164); None when the table has no entry
    (:func:`tl_geometry.hosts.find_host`).
    """
    hit = find_host(name)
    return None if hit is None else (hit.name, hit.d_model, hit.epsilon)


def _published_d_model(name: str) -> int | None:
    hit = published_host(name)
    return hit[1] if hit else None


# ----------------------------------------------------------------------------- loading
def load(
    release: str | None = None,
    sae_id: str | None = None,
    *,
    path: str | os.PathLike | None = None,
    device: str = "cpu",
    dtype: str = "float32",
    converter: Callable | None = None,
    timeout: float = 2.0,
):
    """Load one SAE: ``SAE.from_pretrained(release, sae_id)`` or ``SAE.load_from_disk(path)``.

    Offline behaviour: with ``HF_HUB_OFFLINE`` set, or when the hub does not answer within
    ``timeout`` seconds, the SAE is read from the local Hugging Face cache only; if its
    repository is not cached, :class:`HubUnavailableError` is raised at once (no 20-second DNS
    retry loop). A custom ``converter`` (sae_lens's loader hook) skips these checks.

    Args:
        release, sae_id: sae_lens pretrained release and id; or a Hugging Face repository id
            (``"ORG/NAME"``, not a sae_lens release) and the SAE's folder in it, read the same way
            (e.g. a repository laid out by
            :func:`tl_geometry.experiments.sae_training.publish_to_cache`).
        path: a directory written by ``sae.save_model`` (cfg.json + sae_weights.safetensors).
        device, dtype: passed to sae_lens.
        converter: sae_lens ``PretrainedSaeHuggingfaceLoader`` (``from_pretrained`` only).
        timeout: seconds allowed for the hub reachability probe.

    Returns:
        a sae_lens ``SAE``.

    Raises:
        ValueError: neither or both of (release, sae_id) and path; unknown release or sae_id
            (close matches listed); path missing or without cfg.json; a truncated or corrupt
            weights file in path (``CorruptFileError``, with the expected and actual size).
        HubUnavailableError: offline / unreachable and not in the local cache.
        SAELensNotInstalledError: sae_lens missing.
    """
    if path is not None:
        if release is not None or sae_id is not None:
            raise ValueError("pass either path=... or release=... and sae_id=..., not both")
        p = Path(path)
        if not p.is_dir() or not (p / "cfg.json").is_file():
            raise ValueError(f"no SAE at {str(p)!r}: expected a directory with cfg.json (written by sae.save_model)")
        _sae_lens()
        from sae_lens import SAE

        from tl_geometry.weights_reader import check_weights_file

        for f in sorted(p.glob("*.safetensors")):
            check_weights_file(f)  # truncated/corrupt: CorruptFileError with the sizes, not a safetensors trace
        return SAE.load_from_disk(p, device=device, dtype=dtype)
    if release is None or sae_id is None:
        raise ValueError("pass release=... and sae_id=... (a sae_lens pretrained SAE), or path=... (a saved SAE)")
    directory = _directory()
    if release not in directory and _is_repo_id(release):
        # not a sae_lens release: a Hugging Face repository (e.g. one laid out by
        # experiments.sae_training.publish_to_cache); sae_lens reads <repo>/<sae_id>/ from it
        repo = release
    else:
        _check_releases(directory, release)
        ids = directory[release].saes_map
        if sae_id not in ids:
            raise ValueError(
                f"unknown sae_id {sae_id!r} in release {release!r}; close matches: {_close(sae_id, ids)} "
                f"({len(ids)} ids in the release)"
            )
        repo = directory[release].repo_id
    from sae_lens import SAE

    if converter is not None:
        return SAE.from_pretrained(release, sae_id, device=device, dtype=dtype, converter=converter)
    offline = hub.offline()
    reason = "HF_HUB_OFFLINE is set" if offline else None
    if not offline and not hub.reachable(timeout):
        offline, reason = True, f"the hub did not answer within {timeout:g} s"
    if offline and not _repo_cached(repo):
        raise HubUnavailableError(
            f"cannot load {release}/{sae_id}: {reason} and repository {repo!r} is not in the local "
            f"Hugging Face cache ({_hub_cache_dir()}); download it where the hub is reachable, or "
            "pass path= to an SAE saved with sae.save_model"
        )
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        if offline:
            with _forced_offline():
                return SAE.from_pretrained(release, sae_id, device=device, dtype=dtype)
        return SAE.from_pretrained(release, sae_id, device=device, dtype=dtype)
    except LocalEntryNotFoundError as exc:
        raise HubUnavailableError(
            f"cannot load {release}/{sae_id}: {reason}, and the local cache of {repo!r} lacks a file "
            f"this SAE needs ({exc.__class__.__name__}: {str(exc).splitlines()[0]})"
        ) from exc


# ----------------------------------------------------------------------------- decoder ε
def cosine_exceedance(
    vectors: Tensor, threshold: float, *, block_size: int = 2048
) -> tuple[int, int]:
    """Exact count of unordered pairs i < j of non-zero rows with |cos(v_i, v_j)| > threshold.

    Blockwise (float32 products of ``block_size`` rows), memory O(block_size²), time O(n²·d).

    Returns:
        (n_above, n_pairs) with n_pairs = n(n−1)/2 over the non-zero rows.

    Raises:
        ValueError: not 2-D, fewer than 2 non-zero rows, threshold outside [0, 1], bad block.

    Examples:
        >>> import torch
        >>> cosine_exceedance(torch.tensor([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0]]), 0.5)
        (1, 3)
    """
    if not isinstance(vectors, Tensor) or vectors.ndim != 2:
        raise ValueError(f"expected a 2-D tensor (n, d), got {getattr(vectors, 'shape', type(vectors).__name__)}")
    if not (0.0 <= float(threshold) <= 1.0) or math.isnan(float(threshold)):
        raise ValueError(f"threshold must lie in [0, 1] (a |cos| level), got {threshold}")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    x = vectors.detach().float()
    norms = x.norm(dim=1)
    u = x[norms > 0] / norms[norms > 0, None]
    n = u.shape[0]
    if n < 2:
        raise ValueError(f"need at least 2 non-zero rows, got {n}")
    t = float(threshold)
    above = 0
    for i in range(0, n, block_size):
        a = u[i : i + block_size]
        for j in range(i, n, block_size):
            c = (a @ u[j : j + block_size].T).abs_() > t
            if i == j:
                c = torch.triu(c, diagonal=1)
            above += int(c.sum())
    return above, n * (n - 1) // 2


@dataclass(frozen=True)
class DecoderEpsilon:
    """ε of an SAE's decoder rows, and how many decoder pairs exceed the host model's ε.

    Attributes:
        stats: :class:`~tl_geometry.metrics.capacity.SimilarityStats` of the decoder rows
            (d_sae vectors in R^{d_in}); ``mean``, ``std``, ``epsilon``, ... are forwarded.
        threshold: the host ε compared against (None: no host given).
        threshold_source: ``"measured"`` (host model's W_E), ``"published"`` (Table 1) or
            ``"given"``; None without a host.
        n_pairs: unordered pairs of non-zero decoder rows (0 without a host).
        n_above: pairs with |cos| > threshold.
        frac_above: n_above / n_pairs (NaN without a host).
    """

    stats: Any
    threshold: float | None
    threshold_source: str | None
    n_pairs: int
    n_above: int
    frac_above: float

    def __getattr__(self, name: str):
        # forward SimilarityStats fields (mean, std, epsilon, d, model_class, ...)
        if name != "stats" and "stats" in self.__dict__:
            return getattr(self.__dict__["stats"], name)
        raise AttributeError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.stats.to_dict(),
            "threshold": self.threshold,
            "threshold_source": self.threshold_source,
            "n_pairs": self.n_pairs,
            "n_above": self.n_above,
            "frac_above": self.frac_above,
        }


def _decoder(sae: Any) -> Tensor:
    if isinstance(sae, Tensor):
        return sae.detach()
    W = getattr(sae, "W_dec", None)
    if not isinstance(W, Tensor):
        raise TypeError(f"expected a sae_lens SAE (with W_dec) or a (d_sae, d_in) tensor, got {type(sae).__name__}")
    return W.detach()


def _sae_hook(sae: Any) -> str | None:
    cfg = getattr(sae, "cfg", None)
    meta = getattr(cfg, "metadata", None)
    return getattr(meta, "hook_name", None) or getattr(cfg, "hook_name", None)


def _check_sae_on_model(sae: Any, W_dec: Tensor, model: Any) -> None:
    d_model = int(model.cfg.d_model)
    if W_dec.shape[1] != d_model:
        raise ValueError(
            f"SAE d_in = {W_dec.shape[1]} does not match the model's d_model = {d_model}; "
            "this SAE was trained on another model or hook"
        )
    hook = None if isinstance(sae, Tensor) else _sae_hook(sae)
    if hook is not None and hook not in model.hook_dict:
        raise ValueError(
            f"SAE hook {hook!r} is not a hook of the model (n_layers={model.cfg.n_layers}); "
            f"closest: {difflib.get_close_matches(hook, list(model.hook_dict), n=3, cutoff=0.5)}"
        )


def decoder_epsilon(
    sae: Any,
    *,
    host: Any = None,
    block_size: int = 2048,
) -> DecoderEpsilon:
    """Similarity statistics of an SAE's decoder rows and their exceedance of the host's ε.

    Capacity paper (arXiv 2606.02765): ε = μ + 2σ of pairwise cosines. Applied here to the
    decoder W_dec (d_sae, d_in): its rows are the directions the SAE writes. With a host, also
    the exact fraction of decoder pairs whose |cos| exceeds the host model's ε — are the SAE's
    features packed within the deviation the model tolerates in its own embedding?

    Args:
        sae: a sae_lens SAE (reads ``W_dec``) or a (d_sae, d_in) tensor.
        host: None, a float ε, a published model name (Table 1), or a TransformerLens model (ε
            measured from its W_E; the SAE's d_in and hook are checked against it).
        block_size: rows per block of the exact pair count.

    Returns:
        :class:`DecoderEpsilon`.

    Raises:
        TypeError: not an SAE or tensor.
        ValueError: d_in ≠ the host's d_model, SAE hook not in the host model, unknown
            published name, fewer than 2 non-zero rows.
    """
    from tl_geometry.metrics.capacity import similarity_stats

    W = _decoder(sae)
    if W.ndim != 2:
        raise ValueError(f"decoder must be 2-D (d_sae, d_in), got shape {tuple(W.shape)}")
    if host is not None and not isinstance(host, (str, int, float)):
        _check_sae_on_model(sae, W, host)
    stats = similarity_stats(W, progress=False)
    if host is None:
        return DecoderEpsilon(stats, None, None, 0, 0, float("nan"))
    he = host_epsilon(host)
    eps = he.epsilon
    if he.d_model is not None and he.d_model != W.shape[1]:
        raise ValueError(
            f"SAE d_in = {W.shape[1]} does not match the host's d_model = {he.d_model} "
            f"({he.published_as or 'host'})"
        )
    if not 0 <= eps <= 1:
        raise ValueError(f"host ε must lie in [0, 1], got {eps}")
    n_above, n_pairs = cosine_exceedance(W, eps, block_size=block_size)
    return DecoderEpsilon(stats, eps, he.source, n_pairs, n_above, n_above / n_pairs)


# ----------------------------------------------------------------------------- compare
def _load_ref(ref: str):
    """An SAE named by a string: an existing directory (``load(path=...)``) or ``REPO:SAE_ID``
    (``load(repo, sae_id)``: a Hugging Face repository, read from the local cache offline)."""
    if Path(ref).exists():
        return load(path=ref)
    repo, sep, sae_id = ref.partition(":")
    if sep and sae_id and _is_repo_id(repo):
        return load(repo, sae_id)
    raise ValueError(f"no SAE at {ref!r}: expected a directory saved by sae_lens (cfg.json + "
                     "sae_weights.safetensors) or REPO:SAE_ID of a cached repository "
                     "(e.g. local/my-saes:blocks.3.hook_resid_post)")


def shared_directions(d_vocab: int, d_sae: int, *, tied: bool) -> int:
    """Directions an SAE's features and the vocabulary ask of the shared pool (capacity paper, Eq. 2).

    k ≈ 2V + k_features for separate embedding and unembedding matrices (each maps V tokens to
    its own directions), V + k_features when they are tied (one matrix).

    Examples:
        >>> shared_directions(151936, 131072, tied=False)   # Qwen3-30B-A3B, a 128k SAE
        434944
    """
    if not isinstance(tied, bool):
        raise TypeError(f"tied must be True or False, got {tied!r}")
    return (1 if tied else 2) * int(d_vocab) + int(d_sae)


def _host_tied(model_or_name: Any, he: HostEpsilon) -> tuple[bool | None, str]:
    """(tied, where that came from) for a host; (None, "unknown") when nothing says."""
    hit = he.host
    if hit is None and not isinstance(model_or_name, str):
        hit = find_host(model_name(model_or_name))
    if hit is not None:
        return hit.tied, "published table (tie_word_embeddings of the model's HF config)"
    if not isinstance(model_or_name, str):
        try:
            from tl_geometry.models import ZOO, canonical_name, zoo_file
            from tl_geometry.weights_reader import find_embedding

            key = canonical_name(getattr(model_or_name, "_tl_geometry_name", "") or "")
            if key in ZOO:
                return find_embedding(zoo_file(key), matrix="unembed").tied, "checkpoint (no separate output tensor)"
        except Exception as exc:  # the zoo file may be absent: unknown, not an error
            logger.info("could not tell whether the host ties its embeddings: %s", exc)
    return None, "unknown"


def compare(
    model_or_name: Any,
    *,
    releases: str | Sequence[str] | None = None,
    saes: Sequence[Any] | None = None,
    form: str = "full",
    preset: str = "paper",
    d_vocab: int | None = None,
    tied: bool | None = None,
    config: Literal["cache", "hub", "none"] = "cache",
    decoder_stats: bool = True,
) -> GeometryReport:
    """SAE widths against the host model's capacity bound, as a :class:`GeometryReport`.

    For a host with embedding ε (measured from a loaded model's W_E, or the paper's published
    value for a name) and width d_model, the capacity bound k = capacity(d_model, ε, form)
    (full form by default) as the paper reports it (:func:`tl_geometry.capacity_estimate`).
    Per SAE: d_sae, d_sae / k, and the shared ratio (2V + d_sae) / k for an untied host or
    (V + d_sae) / k for a tied one (capacity paper, Eq. 2: embedding and unembedding each take
    V directions unless they are one matrix). A host without a count (boundary or Class 1,
    ε ≥ 0.1) gets NaN ratios with ``verdict="indeterminate"`` and the reason.

    Rows: ``epsilon.W_E`` (extras mean, std, n_vectors, n_dropped, d, model_class,
    epsilon_source), ``capacity.W_E`` (form, epsilon, d), and per SAE ``sae.d_sae``,
    ``sae.capacity_ratio``, ``sae.shared_ratio`` (extras release, sae_id, hook_name,
    width_source, epsilon_source, verdict, ...); for SAE objects given in ``saes`` also
    ``sae.decoder_epsilon``, ``sae.frac_above_host_epsilon`` and ``sae.decoder_capacity`` (the
    capacity estimate at (d_in, decoder ε): how many directions the bound allows at the SAE's own
    packing, extras ``status``, ``reason``, ``d_sae_over_k``).

    Args:
        model_or_name: a TransformerLens model, or a model name in the published ε table
            (``"gemma-2-2b"``, ``"meta-llama/Llama-3.1-8B"``, ``"Gemma-3-1B"``, ...).
        releases: only SAEs of these sae_lens releases.
        saes: extra SAEs: sae_lens SAE objects, directories written by sae_lens, or
            ``"REPO:SAE_ID"`` strings (a Hugging Face repository read from the local cache with
            ``SAE.from_pretrained``); their d_in must equal d_model and their hook must exist on a
            model host.
        form: capacity form (``"full"``, ``"adjusted"``, ``"jl"``, ``"jl_random"``).
        preset: the rule for count vs indeterminate (``"paper"``), recorded in every row.
        d_vocab: override the vocabulary size (default: the model's, or :data:`D_VOCAB`).
        tied: whether the host ties embedding and unembedding (default: the published table,
            else the zoo checkpoint, else unknown and the shared ratio is NaN).
        config: passed to :func:`widths`.
        decoder_stats: compute decoder ε rows for SAEs given in ``saes``.

    Raises:
        ValueError: a name without published ε (close names listed), d_in ≠ d_model, SAE hook
            not in the model, unknown release.
        SAELensNotInstalledError: sae_lens missing.
    """
    from tl_geometry.metrics.capacity import FORMS, PRESETS, capacity_estimate

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; accepted: {list(PRESETS)}")
    if form not in FORMS:
        raise ValueError(f"unknown form {form!r}; expected one of {sorted(FORMS)}")
    if isinstance(model_or_name, (int, float)):
        raise TypeError(f"expected a model or a model name, got {type(model_or_name).__name__}")
    he = host_epsilon(model_or_name)
    eps, source = he.epsilon, he.source
    if tied is not None and not isinstance(tied, bool):
        raise TypeError(f"tied must be None, True or False, got {tied!r}")
    is_name = isinstance(model_or_name, str)
    d_model = he.d_model
    host_name = (he.published_as or model_or_name) if is_name else model_name(model_or_name)
    if d_vocab is None:
        d_vocab = he.d_vocab
    tied_source = "given"
    if tied is None:
        tied, tied_source = _host_tied(model_or_name, he)
    st = he.stats
    est = capacity_estimate(d_model, eps, mean=st.mean if st else None, std=st.std if st else None,
                            preset=preset, form=form)
    k = est.k if est.k is not None else float("nan")
    model_class = est.model_class
    rows: list[dict[str, Any]] = [
        {
            "metric": "epsilon.W_E",
            "value": eps,
            "extras": {
                "mean": st.mean if st else None, "std": st.std if st else None,
                "n_vectors": st.n_vectors if st else None, "n_dropped": st.n_dropped if st else None,
                "d": d_model, "model_class": model_class, "epsilon_source": source,
                "published_as": he.published_as, "matrix": "W_E",
            },
        },
        {"metric": "capacity.W_E", "value": k,
         "extras": {"form": form, "preset": preset, "epsilon": eps, "d": d_model, "status": est.status,
                    "reason": est.reason, "model_class": model_class, "log10_k": est.log10_k,
                    "epsilon_3sigma": est.epsilon_3sigma, "k_3sigma": est.k_3sigma}},
    ]

    # SAEs of the directory
    entries: list[dict[str, Any]] = []
    n_unknown: dict[str, int] = {}
    try:
        dir_rows = widths(model_or_name, releases=releases, config=config, d_model=d_model)
    except ValueError as exc:
        if releases is not None or not str(exc).startswith("no SAE for model"):
            raise
        dir_rows = []
    for w in dir_rows:
        if w.d_sae is None:
            n_unknown[w.release] = n_unknown.get(w.release, 0) + 1
            continue
        if w.d_in is not None and w.d_in != d_model:
            logger.info("skipping %s/%s: d_in %s != d_model %s", w.release, w.sae_id, w.d_in, d_model)
            continue
        entries.append({"d_sae": w.d_sae, "release": w.release, "sae_id": w.sae_id, "hook_name": w.hook_name,
                        "width_source": w.width_source, "sae_model": w.model})
    # SAEs given
    for i, s in enumerate(saes or ()):
        label = None
        if isinstance(s, (str, os.PathLike)):
            label = str(s)
            s = _load_ref(label)
        W = _decoder(s)
        if W.shape[1] != d_model:
            raise ValueError(f"SAE {label or i} has d_in = {W.shape[1]}, but the host's d_model = {d_model}")
        if not is_name:
            _check_sae_on_model(s, W, model_or_name)
        entry = {"d_sae": int(W.shape[0]), "release": "local", "sae_id": label or f"sae[{i}]",
                 "hook_name": _sae_hook(s), "width_source": "config", "sae_model": None}
        if decoder_stats:
            de = decoder_epsilon(W, host=eps)
            entry["decoder"] = de
        entries.append(entry)

    common = {"epsilon_source": source, "epsilon": eps, "capacity": k, "d_model": d_model, "d_vocab": d_vocab,
              "form": form, "preset": preset, "model_class": model_class, "capacity_status": est.status,
              "tied": tied, "tied_source": tied_source}
    for e in entries:
        extras = {**common, **{k_: v for k_, v in e.items() if k_ not in ("d_sae", "decoder")}}
        hook = e["hook_name"]
        if not est.is_count:
            ratio = shared = float("nan")
            verdict = shared_verdict = "indeterminate"
            extras["reason"] = est.reason
        else:
            ratio = e["d_sae"] / k
            verdict = "ok" if e["d_sae"] <= k else "exceeds bound"
            if d_vocab is None or tied is None:
                shared = float("nan")
                shared_verdict = "d_vocab unknown" if d_vocab is None else "tied unknown"
            else:
                shared = shared_directions(d_vocab, e["d_sae"], tied=tied) / k
                shared_verdict = "ok" if shared <= 1 else "exceeds bound"
        rows.append({"metric": "sae.d_sae", "value": float(e["d_sae"]), "hook": hook, "extras": dict(extras)})
        rows.append({"metric": "sae.capacity_ratio", "value": ratio, "hook": hook, "extras": {**extras, "verdict": verdict}})
        rows.append({"metric": "sae.shared_ratio", "value": shared, "hook": hook,
                     "extras": {**extras, "verdict": shared_verdict,
                                "directions": None if tied is None or d_vocab is None
                                else shared_directions(d_vocab, e["d_sae"], tied=tied)}})
        de = e.get("decoder")
        if de is not None:
            rows.append({"metric": "sae.decoder_epsilon", "value": de.epsilon, "hook": hook,
                         "extras": {**extras, "mean": de.mean, "std": de.std, "model_class": de.model_class}})
            rows.append({"metric": "sae.frac_above_host_epsilon", "value": de.frac_above, "hook": hook,
                         "extras": {**extras, "n_pairs": de.n_pairs, "n_above": de.n_above}})
            # the bound at the SAE's own packing: how many directions fit in d_in at the decoder's ε
            dec = capacity_estimate(d_model, de.epsilon, preset=preset, form=form)
            rows.append({"metric": "sae.decoder_capacity", "value": dec.k if dec.is_count else float("nan"),
                         "hook": hook,
                         "extras": {**extras, "decoder_epsilon": de.epsilon, "status": dec.status,
                                    "reason": dec.reason, "decoder_class": dec.model_class,
                                    "d_sae_over_k": e["d_sae"] / dec.k if dec.is_count else None}})
    prov = {"sae_n": len(entries), "sae_n_unknown_width": sum(n_unknown.values()),
            "sae_unknown_by_release": n_unknown, "capacity_form": form, "capacity_preset": preset,
            "epsilon_source": source}
    if is_name:
        return GeometryReport.from_rows(rows, model=host_name, **prov)
    return GeometryReport.from_rows(rows, model=model_or_name, **prov)


@register_metric("sae", needs="weights", description="SAE widths (sae_lens) vs the capacity bound; decoder ε of given SAEs")
def sae_metric(model, tokens=None, *, hooks=None, releases=None, saes=None, form="full", preset="paper", config="cache"):
    """SAE widths vs the capacity bound (:func:`compare`); only ``sae.*`` rows (ε and capacity
    rows come from the capacity family). Empty, with a log message, when sae_lens is missing."""
    try:
        rep = compare(model, releases=releases, saes=saes, form=form, preset=preset, config=config)
    except SAELensNotInstalledError as exc:
        logger.warning("%s", exc)
        return GeometryReport.from_rows([], model=model, sae_skipped=str(exc))
    return GeometryReport(rows=rep.filter(prefix="sae.").rows, provenance=rep.provenance)


from tl_geometry.registry import FamilySpec, FigureSpec, RowSpec, register_family  # noqa: E402

_SAE_EXTRAS = ("epsilon_source", "epsilon", "capacity", "d_model", "d_vocab", "form", "preset", "model_class",
               "capacity_status", "tied", "tied_source", "release", "sae_id", "hook_name", "width_source", "sae_model")
_ANY_SAE = "an SAE for the model (in sae_lens's directory, or given in saes=)"
_GIVEN = "SAE objects given in saes="
register_family(FamilySpec(
    "sae", title="SAE comparison", paper="capacity paper (arXiv 2606.02765) against sae_lens's SAE widths",
    metrics=("sae",),
    rows=tuple(RowSpec(name, per="item", extras=_SAE_EXTRAS + more, optional=("reason",), when=when, description=what)
               for name, more, when, what in (
        ("sae.d_sae", (), _ANY_SAE, "the SAE's width (features)"),
        ("sae.capacity_ratio", ("verdict",), _ANY_SAE, "d_sae / k (NaN where k is indeterminate)"),
        ("sae.shared_ratio", ("verdict", "directions"), _ANY_SAE, "(2V + d_sae) / k untied, (V + d_sae) / k tied"),
        ("sae.decoder_epsilon", ("mean", "std"), _GIVEN, "ε of the decoder's rows"),
        ("sae.frac_above_host_epsilon", ("n_pairs", "n_above"), _GIVEN, "share of decoder pairs above the host's ε"),
        ("sae.decoder_capacity", ("decoder_epsilon", "status", "reason", "decoder_class", "d_sae_over_k"), _GIVEN,
         "the capacity at (d_in, decoder ε)"),
    )),
    figures=(FigureSpec("sae_widths", "tl_geometry.plotting:plot_sae_widths", "SAE widths vs the capacity bound",
                        rows=("sae.d_sae", "capacity.W_E")),),
    read="tl_geometry.readings:read_sae",
    order=50,
))


# ----------------------------------------------------------------------------- figure
def plot_sae_widths(report_or_rows: Any, *, ax=None, path: str | os.PathLike | None = None, title: str | None = None):
    """Figure: SAE widths by release (log scale) against the capacity bound, vocabulary marked.

    Args:
        report_or_rows: a :func:`compare` report, or a list of :class:`SAEWidth` (then no bound
            is drawn).
        ax: a matplotlib Axes to draw on (default: a new figure).
        path: also save the figure there.
        title: figure title (default: the model).

    Returns:
        the matplotlib Figure.
    """
    import matplotlib.pyplot as plt

    from tl_geometry.metrics._capacity_forms import CLASS2_BELOW

    points: dict[str, list[float]] = {}
    bound = d_vocab = tied = None
    reason = ""
    model = None
    if isinstance(report_or_rows, GeometryReport):
        for r in report_or_rows.rows:
            if r.metric == "sae.d_sae":
                points.setdefault(str(r.extras.get("release")), []).append(r.value)
                bound = r.extras.get("capacity", bound)
                d_vocab = r.extras.get("d_vocab", d_vocab)
                tied = r.extras.get("tied", tied)
            elif r.metric == "capacity.W_E":
                bound = r.value
                reason = r.extras.get("reason") or reason
            elif r.metric == "epsilon.W_E" and not reason and r.value >= CLASS2_BELOW:
                reason = f"ε = {r.value:.3g} ≥ {CLASS2_BELOW}"
        model = report_or_rows.provenance.get("model")
    else:
        for w in report_or_rows:
            if w.d_sae:
                points.setdefault(w.release, []).append(float(w.d_sae))
    if not points and bound is None:
        raise ValueError("nothing to plot: no SAE widths and no capacity bound")
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(points) + 3), 4.5))
    else:
        fig = ax.figure
    names = sorted(points, key=lambda r: (min(points[r]), r))
    for i, r in enumerate(names):
        ys = sorted(set(points[r]))
        ax.scatter([i] * len(ys), ys, s=18, color="C0", zorder=3)
    ax.set_yscale("log")
    ax.set_xlim(-0.6, max(len(names), 1) - 0.4)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("SAE width d_sae (features)")
    if d_vocab:
        ax.axhline(d_vocab, color="C2", ls="--", lw=1, label=f"vocabulary d_vocab = {int(d_vocab):,}")
    if bound is not None and math.isfinite(bound):
        ax.axhline(bound, color="C3", ls="-", lw=1.5, label=f"capacity k = {bound:.3g}")
        vocab_dirs = None if not d_vocab or tied is None else (1 if tied else 2) * d_vocab
        if vocab_dirs and bound > vocab_dirs:
            what = "V" if tied else "2V"
            ax.axhline(bound - vocab_dirs, color="C1", ls="-.", lw=1,
                       label=f"k − {what} = {bound - vocab_dirs:.3g} (shared pool, {'tied' if tied else 'untied'})")
    elif bound is not None:
        ax.text(0.01, 0.97, "capacity indeterminate (no count: " + (reason[:80] or f"ε ≥ {CLASS2_BELOW}") + ")",
                transform=ax.transAxes, va="top", fontsize=8)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best")
    ax.set_title(title or (f"SAE widths vs capacity bound: {model}" if model else "SAE widths by release"))
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
