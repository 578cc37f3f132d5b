"""sae_lens's directory of pretrained releases: one [`SAEWidth`][tl_geometry.families.sae.directory.SAEWidth] per SAE, and the published hosts.

[`widths`][tl_geometry.families.sae.directory.widths] lists every SAE of the packaged directory with its width (from its config when
it is cached or ``config="hub"``, else parsed from its id, [`tl_geometry.families.sae.ids`][tl_geometry.families.sae.ids]);
[`published_host`][tl_geometry.families.sae.directory.published_host] maps a sae_lens model name to the capacity paper's Table 1
([`tl_geometry.families.capacity.hosts`][tl_geometry.families.capacity.hosts]).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError
from tl_geometry.families.capacity.hosts import close_names, find_host, normalize_name, published_hosts
from tl_geometry.families.sae._lens import _sae_lens
from tl_geometry.families.sae.ids import parse_hook, parse_width
from tl_geometry.io import hub
from tl_geometry.io.hub import HubUnavailableError
from tl_geometry.report import model_name

logger = logging.getLogger(__name__)

__all__ = ["SAEWidth", "D_VOCAB", "widths", "width_summary", "published_host"]

WidthSource = Literal["config", "id", "unknown"]


D_VOCAB: dict[str, int] = {h.name: h.d_vocab for h in published_hosts().values() if h.d_vocab is not None}
"""Vocabulary sizes (tokenizer ``vocab_size`` of each model's Hugging Face config) of the published-table models that have SAEs in sae_lens's directory; used by [`compare`][tl_geometry.families.sae.comparison.compare] when only a name is given. Our column ``d_vocab`` of the published-hosts data file, not the paper's."""


def _directory() -> dict:
    _sae_lens()
    from sae_lens.loading.pretrained_saes_directory import get_pretrained_saes_directory

    return get_pretrained_saes_directory()


@dataclass(frozen=True)
class SAEWidth(Tabular):
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
        rule: the [`WIDTH_RULES`][tl_geometry.families.sae.ids.WIDTH_RULES] name that parsed the width (``"config"`` for configs).
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
    """Key of a sae_lens model name: [`tl_geometry.families.capacity.hosts.normalize_name`][tl_geometry.families.capacity.hosts.normalize_name] without a
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
            raise InputError(
                f"unknown sae_lens release {r!r}; close matches: {_close(r, directory)} "
                f"({len(directory)} releases; list them with tl_geometry.families.sae.widths())"
            )
    return list(releases)


def widths(
    model: Any = None,
    *,
    releases: str | Sequence[str] | None = None,
    config: Literal["cache", "hub", "none"] = "cache",
    d_model: int | None = None,
) -> list[SAEWidth]:
    """One [`SAEWidth`][tl_geometry.families.sae.directory.SAEWidth] per SAE in sae_lens's packaged pretrained directory.

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
        list of [`SAEWidth`][tl_geometry.families.sae.directory.SAEWidth] in directory order.

    Raises:
        SAELensNotInstalledError: sae_lens missing.
        ValueError: unknown release (close matches listed), a model name with no SAE in the
            directory (close matches listed), bad ``config``.
        HubUnavailableError: ``config="hub"`` while offline or unreachable.
    """
    if config not in ("cache", "hub", "none"):
        raise InputError(f"config must be 'cache', 'hub' or 'none', got {config!r}")
    directory = _directory()
    rels = _check_releases(directory, releases)
    keys = None if model is None else _model_keys(model)
    if isinstance(model, str) and keys is not None:
        models = {v.model for v in directory.values()}
        if not any(_norm_model(m) in keys for m in models):
            raise InputError(
                f"no SAE for model {model!r} in sae_lens's directory; close matches: {_close(model, sorted(models))}"
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
        read_config = config == "hub" or (config == "cache" and hub.repo_cached(info.repo_id))
        for sae_id, path in info.saes_map.items():
            hook, layer = parse_hook(sae_id, path)
            d_sae, rule = parse_width(sae_id, path, release, info.repo_id, d_model=dm)
            source: WidthSource = "id" if d_sae else "unknown"
            d_in = None
            if read_config:
                try:
                    if config == "cache":
                        with hub.forced_offline():
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
                    release=release,
                    sae_id=sae_id,
                    model=info.model,
                    repo_id=info.repo_id,
                    path=str(path),
                    hook_name=hook,
                    layer=layer,
                    d_sae=d_sae,
                    width_source=source,
                    rule=rule,
                    d_in=d_in,
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


def published_host(name: str) -> tuple[str, int, float] | None:
    """(table name, d_model, ε) of the capacity paper's Table 1 for a (sae_lens) model name.

    ``google/gemma-3-1b-pt`` → ("Gemma-3-1B", 1152, 0.20164); None when the table has no entry
    ([`tl_geometry.families.capacity.hosts.find_host`][tl_geometry.families.capacity.hosts.find_host]).
    """
    hit = find_host(name)
    return None if hit is None else (hit.name, hit.d_model, hit.epsilon)


def _published_d_model(name: str) -> int | None:
    hit = published_host(name)
    return hit[1] if hit else None
