"""Loading one SAE: a sae_lens release, a Hugging Face repository in the local cache, or a saved folder.

Offline behaviour ([`tl_geometry.io.hub`][tl_geometry.io.hub]): with ``HF_HUB_OFFLINE`` set, or when the hub does not
answer within the timeout, the SAE is read from the local cache only, and a repository that is
not cached fails at once with [`HubUnavailableError`][tl_geometry.io.hub.HubUnavailableError].
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from tl_geometry.errors import InputError
from tl_geometry.families.sae._lens import _sae_lens
from tl_geometry.families.sae.directory import _check_releases, _close, _directory, _is_repo_id
from tl_geometry.io import hub
from tl_geometry.io.hub import HubUnavailableError

__all__ = ["load"]


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
    repository is not cached, [`HubUnavailableError`][tl_geometry.io.hub.HubUnavailableError] is raised at once (no 20-second DNS
    retry loop). A custom ``converter`` (sae_lens's loader hook) skips these checks.

    Args:
        release, sae_id: sae_lens pretrained release and id; or a Hugging Face repository id
            (``"ORG/NAME"``, not a sae_lens release) and the SAE's folder in it, read the same way
            (e.g. a repository laid out by
            [`tl_geometry.families.sae.training.publish_to_cache`][tl_geometry.families.sae.training.publish_to_cache]).
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
            raise InputError("pass either path=... or release=... and sae_id=..., not both")
        p = Path(path)
        if not p.is_dir() or not (p / "cfg.json").is_file():
            raise InputError(f"no SAE at {str(p)!r}: expected a directory with cfg.json (written by sae.save_model)")
        _sae_lens()
        from sae_lens import SAE

        from tl_geometry.io.weight_files import check_weights_file

        for f in sorted(p.glob("*.safetensors")):
            check_weights_file(f)  # truncated/corrupt: CorruptFileError with the sizes, not a safetensors trace
        return SAE.load_from_disk(p, device=device, dtype=dtype)
    if release is None or sae_id is None:
        raise InputError("pass release=... and sae_id=... (a sae_lens pretrained SAE), or path=... (a saved SAE)")
    directory = _directory()
    if release not in directory and _is_repo_id(release):
        # not a sae_lens release: a Hugging Face repository (e.g. one laid out by
        # tl_geometry.families.sae.training.publish_to_cache); sae_lens reads <repo>/<sae_id>/ from it
        repo = release
    else:
        _check_releases(directory, release)
        ids = directory[release].saes_map
        if sae_id not in ids:
            raise InputError(
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
    if offline and not hub.repo_cached(repo):
        raise HubUnavailableError(
            f"cannot load {release}/{sae_id}: {reason} and repository {repo!r} is not in the local "
            f"Hugging Face cache ({hub.cache_dir()}); download it where the hub is reachable, or "
            "pass path= to an SAE saved with sae.save_model"
        )
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        if offline:
            with hub.forced_offline():
                return SAE.from_pretrained(release, sae_id, device=device, dtype=dtype)
        return SAE.from_pretrained(release, sae_id, device=device, dtype=dtype)
    except LocalEntryNotFoundError as exc:
        raise HubUnavailableError(
            f"cannot load {release}/{sae_id}: {reason}, and the local cache of {repo!r} lacks a file "
            f"this SAE needs ({exc.__class__.__name__}: {str(exc).splitlines()[0]})"
        ) from exc


def _load_ref(ref: str):
    """An SAE named by a string: an existing directory (``load(path=...)``) or ``REPO:SAE_ID``
    (``load(repo, sae_id)``: a Hugging Face repository, read from the local cache offline)."""
    if Path(ref).exists():
        return load(path=ref)
    repo, sep, sae_id = ref.partition(":")
    if sep and sae_id and _is_repo_id(repo):
        return load(repo, sae_id)
    raise InputError(
        f"no SAE at {ref!r}: expected a directory saved by sae_lens (cfg.json + "
        "sae_weights.safetensors) or REPO:SAE_ID of a cached repository "
        "(e.g. local/my-saes:blocks.3.hook_resid_post)"
    )
