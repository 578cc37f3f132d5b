"""The PGA family (Xu, arXiv 2605.17084), model-facing: ``tg.pga`` and the registered "pga" and "spectral".

Activations through the capture layer (a [`tl_geometry.capture.Sample`][tl_geometry.capture.activations.Sample] for PGA, a
streaming covariance for the spectral metrics; one shared forward pass in a report), W_U through
[`tl_geometry.capture.weight`][tl_geometry.capture.hooks.weight]; the math is in [`tl_geometry.metrics.pga`][tl_geometry.metrics.pga] and
[`tl_geometry.metrics.spectral`][tl_geometry.metrics.spectral].
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import Any

from tl_geometry import capture
from tl_geometry.errors import InputError
from tl_geometry.families.pga.reading import RANK_NAMES
from tl_geometry.metrics.jackknife import group_labels
from tl_geometry.metrics.pga import (
    DEFAULT_MAX_PAIRS,
    DEFAULT_N_GROUPS,
    DEFAULT_REFIT_NULLS,
    check_n_points,
    haar_bases,
    pga_layer,
    readout_basis,
    stderr_method,
)
from tl_geometry.metrics.spectral import StreamingCovariance
from tl_geometry.models import GEMMA_ARCHITECTURES, processing_name, processing_of
from tl_geometry.registry import (
    FamilySpec,
    FigureSpec,
    MetricPlan,
    RowSpec,
    planned_metric,
    register_family,
)
from tl_geometry.report import GeometryReport
from tl_geometry.runtime.threads import choose as choose_threads
from tl_geometry.runtime.threads import parallel_map

logger = logging.getLogger(__name__)


def _ccr_list(ccr: int | Sequence[int]) -> list[int]:
    ccrs = [ccr] if isinstance(ccr, int) else list(ccr)
    if not ccrs or not all(isinstance(c, int) and c >= 0 for c in ccrs):
        raise InputError(f"ccr must be a non-negative int or a list of them, got {ccr!r}")
    return sorted(set(ccrs))


PRESETS: dict[str, dict[str, str | None]] = {
    "paper": {"processing": "none", "hooks": "hidden_states"},
    "library": {"processing": None, "hooks": "resid_post"},
}
"""PGA presets. "paper": what the Subspace PGA paper works on (Xu, arXiv 2605.17084) — the unprocessed model (raw hidden states, raw W_U) at the hooks of Hugging Face's ``hidden_states`` (embeddings, each block's output, the last entry after the final norm). "library" (default): the model as loaded (TransformerLens's processing by default) at every ``blocks.{l}.hook_resid_post``."""

_WHAT_DIFFERS = {
    "fold_ln": "fold_ln multiplied the final norm's weight into W_U (the readout subspace differs)",
    "center_unembed": "center_unembed removed W_U's mean over the vocabulary (the readout subspace differs)",
    "center_writing_weights": "center_writing_weights centered every write to the residual stream "
    "(LayerNorm models: the hidden states themselves differ)",
}


def check_paper_model(model: Any) -> None:
    """Warn when a model handed to the paper preset is not the unprocessed model, naming what differs."""
    flags = processing_of(model)
    how = "load it with tg.models.load(name, processing='none') (or TransformerLens's from_pretrained_no_processing)"
    if flags is None and getattr(model, "_weights_processed", None) is True:
        warnings.warn(
            "PGA preset 'paper' expects the unprocessed model, but this TransformerBridge's weights were processed "
            "(process_weights / enable_compatibility_mode: by default fold_ln, center_writing_weights, "
            "center_unembed), so the readout subspace differs from the raw W_U and z can change sign; boot a fresh "
            "bridge and use enable_compatibility_mode(no_processing=True), or tg.models.load(name, processing='none')",
            UserWarning,
            stacklevel=3,
        )
        return
    if flags is None:
        warnings.warn(
            f"PGA preset 'paper' expects the unprocessed model (raw hidden states and raw W_U); the weight "
            f"processing of this {type(model).__name__} is unknown (not recorded by tl_geometry), so the "
            f"readout subspace may differ from the paper's and z can change sign; {how}",
            UserWarning,
            stacklevel=3,
        )
        return
    on = [k for k in ("fold_ln", "center_unembed", "center_writing_weights") if flags.get(k)]
    if on:
        warnings.warn(
            "PGA preset 'paper' expects the unprocessed model, but this one was processed: "
            + "; ".join(_WHAT_DIFFERS[k] for k in on)
            + f". On SmolLM2-135M this moves the top-100 readout subspace (overlap 0.80) and flips z at CCR-1 in "
            f"layers 2–8 from about −1.5 (raw) to about +0.4 (processed); {how}",
            UserWarning,
            stacklevel=3,
        )


FOLD_LN_SPREAD = 100.0
"""The library preset's readout caveat: fold_ln multiplies W_U's rows by the final norm's weight w. When
max|w| / min|w| exceeds this, the readout subspace is set by that weight more than by the unembedding
(Gemma-3-270M: 1,605, its top-100 subspace shares 0.21 of the raw one, and z reads −12 … −227 at every
block output; SmolLM2-135M: 3.8, overlap 0.80; docs/gemma_pga.md)."""


def readout_caveat(model: Any) -> str | None:
    """Why the readout subspace of a model whose final norm was folded into W_U is not the paper's; else None.

    fold_ln is read off the config (TransformerLens 3 turns ``RMS``/``LN`` into ``RMSPre``/``LNPre``
    when it folds) or, for a TransformerBridge (whose config keeps ``RMS``/``LN``), off the flags
    `tl_geometry.models` recorded. The final norm's weight is the one `tl_geometry.models` recorded
    before processing (``model._tl_geometry_final_norm_w``); without it, the Gemma architectures
    (whose final-norm weights span three orders of magnitude) are flagged.
    """
    folded = getattr(model.cfg, "normalization_type", None) in ("RMSPre", "LNPre")
    if not folded and not (getattr(model, "_tl_geometry_processing", None) or {}).get("fold_ln"):
        return None  # not folded: W_U is the unembedding's own
    w = getattr(model, "_tl_geometry_final_norm_w", None)
    if w is not None:
        a = w.detach().abs().double()
        spread = float(a.max() / a.min().clamp_min(1e-30))
        if spread <= FOLD_LN_SPREAD:
            return None
        what = f"the final norm's weight (|w| from {float(a.min()):.3g} to {float(a.max()):.3g}, {spread:,.0f}×)"
    elif (
        getattr(model.cfg, "original_architecture", None) or getattr(model.cfg, "architecture", None)
    ) in GEMMA_ARCHITECTURES:
        what = "Gemma's final-norm weight (1 + w: 0.19 to 301 on Gemma-3-270M)"
    else:
        return None
    return (
        f"PGA preset 'library': fold_ln folded {what} into W_U, so the readout subspace is set by that weight "
        "more than by the unembedding, and its smallest entries fall on the residual stream's massive-activation "
        "dimensions, which the folded readout then excludes (Gemma-3-270M: top-100 overlap with the raw readout "
        "0.21; z −12 … −227 at every block output against −35 … +3.5 with the raw W_U). These z are not the "
        "paper's quantity; use preset='paper' (tg.models.load(name, processing='none'))"
    )


@planned_metric(
    "pga", needs="activations", description="Subspace PGA z per layer (readout vs random subspaces), PC1 overlap"
)
def pga(
    model: Any,
    tokens: Any,
    *,
    preset: str = "library",
    hooks: Sequence[str] | None = None,
    k: int = 100,
    n_null: int = 100,
    ccr: int | Sequence[int] = 1,
    max_points: int = 2048,
    seed: int = 0,
    max_pairs: int | None = DEFAULT_MAX_PAIRS,
    batch_size: int = 8,
    memory_mb: float = 512,
    stderr: str | bool = "influence",
    refit_nulls: int = DEFAULT_REFIT_NULLS,
    progress: bool = True,
) -> MetricPlan:
    """Subspace PGA profile: z of the readout subspace at every hook, for one or several CCR levels.

    Activations at ``hooks`` are gathered for one seeded sample of at most ``max_points``
    positions shared by all hooks (BOS and padding dropped); the readout basis is the top-``k``
    left singular vectors of ``W_U``; the same ``n_null`` Haar-random bases (from ``seed``) serve
    every hook and CCR level. See [`tl_geometry.pga_score`][tl_geometry.metrics.pga.pga_score] for the score.

    Args:
        model: a TransformerLens model, or a model name (loaded with the preset's processing:
            ``"none"`` for ``preset="paper"``, TransformerLens's for ``"library"``).
        tokens: (batch, pos) token ids.
        preset: ``"paper"``: the paper's setting — the unprocessed model (raw hidden states, raw
            W_U; a processed model gets a warning naming what differs) and, by default, the hooks
            of Hugging Face's ``hidden_states`` ([`tl_geometry.capture.hidden_state_hooks`][tl_geometry.capture.hooks.hidden_state_hooks]:
            embeddings, blocks 0 … n−2, the final normalized state). ``"library"`` (default): the
            model as it is, every ``blocks.{l}.hook_resid_post``.
        hooks: explicit hook names (override the preset's).
        k, n_null, ccr, max_points, seed, max_pairs, memory_mb: see [`tl_geometry.pga_profile`][tl_geometry.metrics.pga.pga_profile].
        stderr: ``"influence"`` (default: the first-order point-sample error, no re-sort),
            ``"jackknife"`` (the literal refit per deleted group, its check) or ``"none"`` / False
            (z alone, NaN errors); see [`tl_geometry.pga_score`][tl_geometry.metrics.pga.pga_score]. Recorded in every row's
            ``stderr_method`` and in provenance.
        refit_nulls: null subspaces whose point-sample terms are computed in full (default 4;
            the rest enter through their own sort; ``n_null`` gives the complete linearization,
            each full-term null costing about four others: twice the time at 30 nulls; 0 holds the
            ranks and directions fixed). The number used,
            at most ``n_null`` (0 with ``stderr="none"``), is recorded in every row's
            ``refit_nulls`` and in provenance. How far 4 lies from ``n_null``: docs/pga.md.

    Rows: ``pga.z`` and ``pga.rho_read`` per hook and CCR level (extras preset, processing, ccr,
    k, rho_read, null_mean, null_std, n_points, n_pairs, n_null, pairs_subsampled, seed, and the
    standard error: ``stderr`` in the units of the value, ``stderr_method``, ``n_groups``; on
    ``pga.z`` also ``stderr_null`` and ``stderr_points``, its two parts, and ``p_value``, the
    uncorrected two-sided p of z against random subspaces) and
    ``pga.pc1_overlap`` per hook (extras preset, processing, expected = k/d, ratio,
    explained_variance). ``processing`` is the model's weight processing (``"none"``, ``"tl"``,
    ``"custom"`` or ``"unknown"``). With ``preset="library"`` on a model whose fold_ln moved the
    readout subspace to the final norm's weight ([`readout_caveat`][tl_geometry.families.pga.readout_caveat]:
    Gemma), a warning is raised and every row carries its text in ``extras["readout_caveat"]``.

    Raises:
        ValueError: unknown preset, k ≥ d_model, bad ccr, bad hooks/tokens, fewer sampled points
            than [`tl_geometry.min_points`][tl_geometry.metrics.pga.min_points] (k), or any error of [`pga_score`][tl_geometry.metrics.pga.pga_score].
    """
    if preset not in PRESETS:
        raise InputError(f"preset must be one of {sorted(PRESETS)}, got {preset!r}")
    method = stderr_method(stderr, refit_nulls)  # refuses a bad stderr or refit_nulls before any work
    if isinstance(model, str):
        from tl_geometry import models

        model = models.load(model, processing=PRESETS[preset]["processing"] or "tl")
    capture.check_model(model)
    if preset == "paper":
        check_paper_model(model)
    d = int(model.cfg.d_model)
    if not isinstance(k, int) or not 1 <= k < d:
        raise InputError(f"k must satisfy 1 <= k < d_model={d}, got k={k!r}")
    ccrs = _ccr_list(ccr)
    if hooks is None:
        hooks = capture.hidden_state_hooks(model) if preset == "paper" else capture.resid_hooks(model, "post")
    hooks = capture.validate_hooks(model, hooks)
    processing = processing_name(model)
    caveat = readout_caveat(model) if preset == "library" else None
    if caveat is not None:
        warnings.warn(caveat, UserWarning, stacklevel=3)
    readout = readout_basis(capture.weight(model, "W_U"), k, threads=choose_threads())
    sample = capture.Sample(model, tokens, hooks, max_points=max_points, seed=seed)
    check_n_points(int(sample.positions.sum()), k)

    def finish() -> GeometryReport:
        from tqdm.auto import tqdm

        cap = sample.result()
        bases = haar_bases(d, k, n_null, seed=seed)
        refit_used = 0 if method == "none" else min(refit_nulls, bases.shape[0])  # what the scores did
        # jackknife groups of whole sequences (a sequence's positions share a context)
        labels = group_labels(cap.positions[:, 0], DEFAULT_N_GROUPS)
        rows = []
        tag = {"preset": preset, "processing": processing}
        if caveat is not None:  # beside every number it affects
            tag["readout_caveat"] = caveat
        for h in tqdm(hooks, desc="pga", disable=not progress, leave=False):
            H = cap.acts[h]
            prof, pc = pga_layer(  # the profile and the PC1 overlap from one SVD of H
                H,
                readout,
                ccrs=ccrs,
                null_bases=bases,
                seed=seed,
                max_pairs=max_pairs,
                memory_mb=memory_mb,
                groups=labels,
                stderr=stderr,
                refit_nulls=refit_nulls,
                threads=choose_threads(),  # chosen per hook: a long report follows the machine's load
            )
            for c, s in prof.items():
                extras = {
                    **tag,
                    "ccr": c,
                    "k": k,
                    "rho_read": s.rho_read,
                    "null_mean": s.null_mean,
                    "null_std": s.null_std,
                    "n_points": s.n_points,
                    "n_pairs": s.n_pairs,
                    "n_null": s.n_null,
                    "pairs_subsampled": s.pairs_subsampled,
                    "seed": seed,
                    "n_groups": s.n_groups,
                    "stderr_method": s.stderr_method,
                    "refit_nulls": refit_used,
                }
                z_extras = {
                    **extras,
                    "stderr": s.stderr,
                    "stderr_null": s.stderr_null,
                    "stderr_points": s.stderr_points,
                    "p_value": s.p_value,
                }
                rows.append({"metric": "pga.z", "value": s.z, "hook": h, "extras": z_extras})
                rows.append(
                    {
                        "metric": "pga.rho_read",
                        "value": s.rho_read,
                        "hook": h,
                        "extras": {**extras, "stderr": s.stderr_rho},
                    }
                )
            rows.append(
                {
                    "metric": "pga.pc1_overlap",
                    "value": pc.overlap,
                    "hook": h,
                    "extras": {
                        **tag,
                        "expected": pc.expected,
                        "ratio": pc.ratio,
                        "explained_variance": pc.explained_variance,
                        "k": k,
                    },
                }
            )
        return GeometryReport.from_rows(
            rows,
            model=model,
            pga={
                "preset": preset,
                "processing": processing,
                "k": k,
                "n_null": n_null,
                "ccr": ccrs,
                "max_points": max_points,
                "seed": seed,
                "readout": "top-k left singular vectors of W_U",
                "readout_caveat": caveat,
                "n_points": cap.n_points,
                "stderr": method,
                "refit_nulls": refit_used,
            },
        )

    return MetricPlan("pga", model, tokens, [sample], finish, batch_size=batch_size, progress=progress)


@planned_metric("spectral", needs="activations", description="RankMe, alpha-ReQ, isotropy, condition number per hook")
def spectral(
    model: Any,
    tokens: Any,
    *,
    preset: str = "library",
    hooks: Sequence[str] | None = None,
    fit_range: tuple[int, int] | None = None,
    n_groups: int = 10,
    batch_size: int = 8,
    progress: bool = True,
) -> MetricPlan:
    """Spectral metrics of the activations at every hook, streamed over all (non-BOS) tokens.

    Rows per hook: ``spectral.rankme`` (Garrido et al.: singular values), ``spectral.rankme_eig``
    (covariance eigenvalues), ``spectral.alpha_req`` (least squares over ``fit_range``, extra
    ``r2``), ``spectral.alpha_req_reptrix`` (reptrix's 1/i-weighted fit over ranks 11–100, extra
    ``r2``), ``spectral.isotropy``, ``spectral.condition_number``; extras n_points, d, n_kept,
    ``preset`` and the model's weight ``processing``, ``stderr`` (in the row's units) and
    ``stderr_method``. See [`tl_geometry.metrics.spectral`][tl_geometry.metrics.spectral].

    Standard errors: a delete-a-group jackknife over ``n_groups`` groups of whole sequences (fewer
    with fewer sequences), each replicate from the covariance downdate. Our choice: the sequence
    is the resampling unit (its positions share a context), so the error covers a fresh draw of
    text; 10 groups keep the added cost at 10 ``eigvalsh`` per hook.

    ``preset`` picks the default hooks as in [`pga`][tl_geometry.families.pga.pga]: ``"paper"`` Hugging Face's
    ``hidden_states`` ([`tl_geometry.capture.hidden_state_hooks`][tl_geometry.capture.hooks.hidden_state_hooks]), ``"library"`` every
    ``blocks.{l}.hook_resid_post``.

    Raises:
        ValueError: unknown preset, bad hooks/tokens, a ``fit_range`` outside the kept ranks.
    """
    if preset not in PRESETS:
        raise InputError(f"preset must be one of {sorted(PRESETS)}, got {preset!r}")
    if isinstance(n_groups, bool) or not isinstance(n_groups, int) or n_groups < 2:
        raise InputError(f"n_groups must be an integer >= 2 (jackknife groups), got {n_groups!r}")
    capture.check_model(model)
    if hooks is None:
        hooks = capture.hidden_state_hooks(model) if preset == "paper" else capture.resid_hooks(model, "post")
    hooks = capture.validate_hooks(model, hooks)
    tokens = capture.check_tokens(model, tokens)

    # jackknife groups of whole sequences, in the (batch, pos) order the rows stream in
    owners = capture.valid_mask(model, tokens).nonzero()[:, 0]
    sizes = group_labels(owners, n_groups).bincount().tolist() if owners.numel() >= 2 else None
    accs = {h: StreamingCovariance(sizes if sizes and len(sizes) >= 2 else None) for h in hooks}

    def finish() -> GeometryReport:
        processing = processing_name(model)
        rows = []
        # the hooks on a pool of threads (each eigvalsh on one thread, as it always runs: the same
        # bits); the plain loop when the choice is a pool of 1 (busy cores, or "inherit")
        tc = choose_threads()
        if tc.workers() > 1:
            spectra = parallel_map(lambda h: accs[h].spectral(fit_range, threads=tc), hooks, tc.workers())
        else:
            spectra = [accs[h].spectral(fit_range, threads=tc) for h in hooks]
        for h, m in zip(hooks, spectra):
            extras = {"n_points": m.n_points, "d": m.d, "n_kept": m.n_kept, "preset": preset, "processing": processing}
            r2 = {"alpha_req": m.alpha_req_r2, "alpha_req_reptrix": m.alpha_req_reptrix_r2}
            for name in SPECTRAL_ROWS:
                ex = {**extras, "r2": r2[name]} if name in r2 else dict(extras)
                ex["stderr"] = m.stderr.get(name, float("nan"))
                ex["stderr_method"] = m.stderr_method if m.stderr else "none: fewer than 2 point groups"
                rows.append({"metric": f"spectral.{name}", "value": getattr(m, name), "hook": h, "extras": ex})
        return GeometryReport.from_rows(rows, model=model)

    covariance = capture.FnPass(hooks, lambda h, a: accs[h].update(a))
    return MetricPlan("spectral", model, tokens, [covariance], finish, batch_size=batch_size, progress=progress)


SPECTRAL_ROWS = ("rankme", "rankme_eig", "alpha_req", "alpha_req_reptrix", "isotropy", "condition_number")
"""The per-hook rows of the "spectral" metric, in order."""


_TAG = ("preset", "processing")

_SPECTRAL_WHAT = {
    "rankme": "RankMe (Garrido et al.): exp of the entropy of p = s/Σs, singular values s = √λ",
    "rankme_eig": "von Neumann effective rank: exp of the entropy of p = λ/Σλ (eigenvalues; not RankMe)",
}
"""What the two entropy ranks are (row descriptions; only the first is RankMe)."""

register_family(
    FamilySpec(
        "pga",
        title="Subspace PGA",
        paper="Xu, arXiv 2605.17084",
        metrics=("pga",),
        rows=tuple(
            RowSpec(
                name,
                per="hook",
                extras=_TAG
                + (
                    "ccr",
                    "k",
                    "rho_read",
                    "null_mean",
                    "null_std",
                    "n_points",
                    "n_pairs",
                    "n_null",
                    "pairs_subsampled",
                    "seed",
                    "n_groups",
                    "stderr_method",
                    "refit_nulls",
                    "stderr",
                )
                + more,
                optional=("readout_caveat",),
                description=what,
            )
            for name, what, more in (
                (
                    "pga.z",
                    "z of the readout subspace per hook and CCR level, with its standard error",
                    ("stderr_null", "stderr_points", "p_value"),
                ),
                ("pga.rho_read", "ρ_read of the readout subspace per hook and CCR level, with its standard error", ()),
            )
        )
        + (
            RowSpec(
                "pga.pc1_overlap",
                per="hook",
                extras=_TAG + ("expected", "ratio", "explained_variance", "k"),
                optional=("readout_caveat",),
                description="‖V_kᵀ PC1‖²: PC1 of the activations in the readout subspace (random: k/d)",
            ),
        ),
        figures=(
            FigureSpec(
                "pga_z",
                "tl_geometry.families.pga.figures:plot_pga",
                "Subspace PGA z by layer, one line per CCR",
                rows=("pga.z", "pga.pc1_overlap"),
            ),
        ),
        read="tl_geometry.families.pga.reading:read_pga",
        checks="tl_geometry.families.pga.checks",
        command="tl_geometry.families.pga.cli",
        # 30 nulls: at this size the stderr of z is dominated by the text sample (median stderr_null
        # 0.15–0.24 against stderr_points 0.40–1.1 at 50 nulls on SmolLM2), so 50 → 30 nulls widens it
        # by < 8 % and pays for the re-estimated CCR directions of the error (docs/pga.md).
        report_options={"pga": {"ccr": [0, 1, 5], "n_null": 30, "max_points": 1024}},
        fast_options={"pga": {"ccr": [0, 1, 5], "n_null": 20, "max_points": 512}},
        order=20,
    )
)

register_family(
    FamilySpec(
        "spectral",
        title="Spectral",
        paper="beside Subspace PGA (arXiv 2605.17084): RankMe (Garrido et al., ICML 2023), "
        "α-ReQ (Agrawal et al., NeurIPS 2022)",
        metrics=("spectral",),
        rows=tuple(
            RowSpec(
                f"spectral.{name}",
                per="hook",
                extras=("n_points", "d", "n_kept")
                + _TAG
                + (("r2",) if name.startswith("alpha_req") else ())
                + ("stderr", "stderr_method"),
                description=_SPECTRAL_WHAT.get(name, f"{name} of the activation covariance"),
            )
            for name in SPECTRAL_ROWS
        ),
        figures=(
            FigureSpec(
                "spectral",
                "tl_geometry.families.pga.figures:plot_spectral",
                "Spectral metrics by layer (±2 standard errors where a row carries one)",
                rows=tuple(f"spectral.{n}" for n in SPECTRAL_ROWS),
            ),
        ),
        read="tl_geometry.families.pga.reading:read_spectral",
        labels=RANK_NAMES,
        order=30,
    )
)
