"""Train a small SAE with sae_lens's own training code, offline, and publish it to a local hub cache.

Published SAEs live on the Hugging Face hub, which these machines cannot reach. To measure a
real SAE end to end — trained by sae_lens, saved by sae_lens, loaded back through the same
``SAE.from_pretrained`` code path a published SAE takes — this module

1. trains an SAE with `sae_lens.LanguageModelSAETrainingRunner` on a TransformerLens
   model's activations at one hook, feeding it an in-memory token dataset
   (``override_model=`` / ``override_dataset=``: no hub, no dataset download), and saves it with
   sae_lens (``cfg.json`` + ``sae_weights.safetensors``) — [`train_sae`][tl_geometry.families.sae.training.train_sae];
2. lays the saved SAE out as a local Hugging Face cache repository
   (``models--ORG--NAME/snapshots/<rev>/<sae_id>/…`` with ``refs/main``) —
   [`publish_to_cache`][tl_geometry.families.sae.training.publish_to_cache]. ``tl_geometry.families.sae.load(repo_id, sae_id)`` then reads it with
   ``SAE.from_pretrained`` offline, exactly as it reads a cached published SAE.

The decoder ε of that SAE next to the capacity bound is [`tl_geometry.families.sae.compare`][tl_geometry.families.sae.comparison.compare]
(``tl-geometry sae compare --model M --sae PATH``).

Our choices (there is no paper protocol here): a TopK SAE (sae_lens's ``topk`` architecture;
robust without an L1 sweep), expansion 8, k = 32, Adam lr 4e-4, seed 0, the hook's activations
as the model produces them (no normalisation). These are CPU-sized defaults for a cross-check,
not a recipe for a good SAE.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from tl_geometry.errors import InputError

__all__ = ["train_sae", "publish_to_cache", "SAE_FILES"]

logger = logging.getLogger(__name__)

SAE_FILES = ("cfg.json", "sae_weights.safetensors")
"""Files sae_lens writes for an inference SAE and reads in ``from_pretrained``/``load_from_disk``."""


def _is_complete(out: Path) -> bool:
    return all((out / f).is_file() for f in SAE_FILES)


def train_sae(
    model: Any,
    tokens: torch.Tensor,
    *,
    hook: str,
    out: str | os.PathLike,
    d_sae: int | None = None,
    expansion: int = 8,
    k: int = 32,
    training_tokens: int = 200_000,
    batch_tokens: int = 1024,
    lr: float = 4e-4,
    seed: int = 0,
    overwrite: bool = False,
) -> Path:
    """Train a TopK SAE on ``model``'s activations at ``hook`` with sae_lens; save it to ``out``.

    Uses sae_lens's ``LanguageModelSAETrainingRunner`` with ``override_model=model`` and an
    in-memory dataset of ``tokens`` (column ``input_ids``; sae_lens cycles through it when
    ``training_tokens`` exceeds it). The run is one unit of work: when ``out`` already holds a
    complete SAE (``cfg.json`` and ``sae_weights.safetensors``) it is returned as is unless
    ``overwrite=True`` — a killed run leaves no complete SAE, so rerunning retrains.

    The saved ``cfg.json`` records the processing the model was loaded with
    ([`tl_geometry.models.processing_of`][tl_geometry.models.processing_of]): ``metadata.model_from_pretrained_kwargs`` holds the
    ``HookedTransformer.from_pretrained`` flags that rebuild it (``{}`` for TransformerLens's
    default processing, so sae_lens does not warn at load; ``fold_ln`` / ``center_writing_weights``
    / ``center_unembed`` False for an unprocessed model) and ``metadata.tl_geometry_processing``
    every flag with the preset's name (flags ``None`` when the model's processing is unknown).

    Args:
        model: a ``HookedTransformer`` (sae_lens's training runner needs its ``run_with_cache``).
        tokens: (n_seqs, seq_len) token ids; seq_len is the SAE's context size.
        hook: the TransformerLens hook name, e.g. ``"blocks.3.hook_resid_post"``.
        out: output directory.
        d_sae: number of latents (default ``expansion * d_model``).
        expansion: d_sae / d_model when ``d_sae`` is not given.
        k: active latents per token (TopK).
        training_tokens: tokens seen in training.
        batch_tokens: tokens per optimizer step.
        lr: Adam learning rate.
        seed: sae_lens's seed (initialisation and shuffling).
        overwrite: retrain even if ``out`` holds a complete SAE.

    Returns:
        ``out`` as a Path.

    Raises:
        ValueError: tokens not 2-D integers, hook not on the model, k >= d_sae, non-positive sizes.
        SAELensNotInstalledError: sae_lens missing.
    """
    if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.dtype.is_floating_point:
        raise InputError(
            "tokens must be a 2-D integer tensor (n_seqs, seq_len) of token ids, "
            f"got {type(tokens).__name__} {getattr(tokens, 'shape', '')}"
        )
    hook_dict = getattr(model, "hook_dict", None)
    if hook_dict is None or not hasattr(model, "run_with_cache"):
        raise InputError(f"expected a TransformerLens HookedTransformer, got {type(model).__name__}")
    if hook not in hook_dict:
        import difflib

        raise InputError(
            f"hook {hook!r} is not a hook of the model; closest: "
            f"{difflib.get_close_matches(hook, list(hook_dict), n=3, cutoff=0.5)}"
        )
    d_model = int(model.cfg.d_model)
    d_sae = int(d_sae) if d_sae is not None else int(expansion) * d_model
    for name, v in (("d_sae", d_sae), ("k", k), ("training_tokens", training_tokens), ("batch_tokens", batch_tokens)):
        if int(v) < 1:
            raise InputError(f"{name} must be a positive integer, got {v}")
    if k >= d_sae:
        raise InputError(f"k must be smaller than d_sae, got k={k}, d_sae={d_sae}")
    out = Path(out)
    if _is_complete(out) and not overwrite:
        logger.info("SAE already trained at %s; pass overwrite=True to retrain", out)
        return out
    from tl_geometry.families.sae import _sae_lens

    _sae_lens()  # the clear "pip install tl-geometry[sae]" error when sae_lens is missing
    import datasets
    from sae_lens import (
        LanguageModelSAERunnerConfig,
        LanguageModelSAETrainingRunner,
        LoggingConfig,
        TopKTrainingSAEConfig,
    )

    from tl_geometry.models import processing_name, processing_of

    # The processing the model was actually loaded with, as sae_lens records it: the keyword
    # arguments of HookedTransformer.from_pretrained that rebuild it. TL's defaults are fold_ln /
    # center_writing_weights / center_unembed all True, so TL processing is {} (and sae_lens, which
    # warns at load whenever the dict is non-empty, stays quiet); an unprocessed model records the
    # flags it was loaded without. sae_lens's own default ({"center_writing_weights": False}) would
    # claim a processing the model did not have.
    flags = processing_of(model)
    pretrained_kwargs = {} if flags is None else {f: False for f, on in flags.items() if not on}
    n_seqs, ctx = (int(s) for s in tokens.shape)
    ds = datasets.Dataset.from_dict({"input_ids": tokens.cpu().tolist()})
    # sae_lens's mixing buffer holds n_batches_in_buffer * context_size activations per refill and
    # must hold at least one training batch
    n_buffer = max(8, -(-2 * batch_tokens // ctx))
    cfg = LanguageModelSAERunnerConfig(
        sae=TopKTrainingSAEConfig(d_in=d_model, d_sae=d_sae, k=k),
        model_name=str(getattr(model.cfg, "model_name", "model")),
        model_from_pretrained_kwargs=pretrained_kwargs,
        hook_name=hook,
        dataset_path="",
        is_dataset_tokenized=True,
        streaming=False,
        context_size=ctx,
        training_tokens=int(training_tokens),
        train_batch_size_tokens=int(batch_tokens),
        store_batch_size_prompts=max(1, min(16, n_seqs)),
        n_batches_in_buffer=n_buffer,
        n_batches_for_norm_estimate=10,
        device="cpu",
        lr=float(lr),
        seed=int(seed),
        prepend_bos=False,  # the tokens already carry whatever BOS the corpus gave them
        exclude_special_tokens=False,
        logger=LoggingConfig(log_to_wandb=False),
        output_path=str(out),
        checkpoint_path=None,
        n_checkpoints=0,
        verbose=False,
    )
    tmp = out.with_name(out.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    cfg.output_path = str(tmp)
    LanguageModelSAETrainingRunner(cfg, override_dataset=ds, override_model=model).run()
    # every flag and the preset's name, under the metadata (sae_lens keeps unknown metadata keys)
    saved = json.loads((tmp / "cfg.json").read_text())
    saved.setdefault("metadata", {})["tl_geometry_processing"] = {"name": processing_name(model), "flags": flags}
    (tmp / "cfg.json").write_text(json.dumps(saved, indent=2))
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)  # complete only once every file is written
    return out


def publish_to_cache(
    sae_dir: str | os.PathLike,
    repo_id: str,
    *,
    sae_id: str | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> tuple[str, str]:
    """Lay a saved SAE out as a repository of a local Hugging Face hub cache.

    After this, ``SAE.from_pretrained(repo_id, sae_id)`` (and [`tl_geometry.families.sae.load`][tl_geometry.families.sae.loading.load]) reads
    it offline through huggingface_hub's cache lookup — the code path a downloaded published SAE
    takes. The layout is the hub's: ``models--ORG--NAME/refs/main`` holding a revision hash and
    ``models--ORG--NAME/snapshots/<rev>/<sae_id>/{cfg.json, sae_weights.safetensors}`` (copies,
    not the hub's blob symlinks; huggingface_hub reads either).

    Args:
        sae_dir: a directory written by sae_lens (``save_model`` / the training runner).
        repo_id: ``"ORG/NAME"``, a name no published release uses (e.g. ``"local/smollm2-saes"``).
        sae_id: folder inside the repository (default: the SAE's hook name).
        cache_dir: the hub cache (default: huggingface_hub's ``HF_HUB_CACHE``).

    Returns:
        (repo_id, sae_id) to pass to [`tl_geometry.families.sae.load`][tl_geometry.families.sae.loading.load].

    Raises:
        ValueError: ``sae_dir`` lacks cfg.json / sae_weights.safetensors, repo_id not ``ORG/NAME``.
    """
    src = Path(sae_dir)
    missing = [f for f in SAE_FILES if not (src / f).is_file()]
    if missing:
        raise InputError(f"{str(src)!r} is not a saved SAE: missing {missing} (expected {list(SAE_FILES)})")
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise InputError(f"repo_id must look like 'ORG/NAME', got {repo_id!r}")
    if sae_id is None:
        cfg = json.loads((src / "cfg.json").read_text())
        sae_id = (cfg.get("metadata") or {}).get("hook_name") or cfg.get("hook_name") or src.name
    from tl_geometry.io import hub

    repo = hub.repo_cache(repo_id, cache_dir)  # cache_dir None: huggingface_hub's HF_HUB_CACHE
    ref = repo / "refs" / "main"
    if ref.is_file() and (repo / "snapshots" / ref.read_text().strip()).is_dir():
        rev = ref.read_text().strip()  # add this SAE to the repository's current revision
    else:
        digest = hashlib.sha1()
        for f in SAE_FILES:
            digest.update((src / f).read_bytes())
        rev = digest.hexdigest()
    dest = repo / "snapshots" / rev / sae_id
    dest.mkdir(parents=True, exist_ok=True)
    for f in SAE_FILES:
        shutil.copyfile(src / f, dest / f)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(rev)
    return repo_id, sae_id
