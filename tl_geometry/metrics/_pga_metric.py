"""Registered metrics "pga" and "spectral": thin wrappers reading models through capture."""

from __future__ import annotations

import logging
from typing import Any, Sequence

from tl_geometry import capture
from tl_geometry.metrics.pga import DEFAULT_MAX_PAIRS, haar_bases, pc1_overlap, pga_profile, readout_basis
from tl_geometry.metrics.spectral import StreamingCovariance
from tl_geometry.registry import register_metric
from tl_geometry.report import GeometryReport

logger = logging.getLogger(__name__)


def _ccr_list(ccr: int | Sequence[int]) -> list[int]:
    ccrs = [ccr] if isinstance(ccr, int) else list(ccr)
    if not ccrs or not all(isinstance(c, int) and c >= 0 for c in ccrs):
        raise ValueError(f"ccr must be a non-negative int or a list of them, got {ccr!r}")
    return sorted(set(ccrs))


@register_metric("pga", needs="activations", description="Subspace PGA z per layer (readout vs random subspaces), PC1 overlap")
def pga(
    model: Any,
    tokens: Any,
    *,
    hooks: Sequence[str] | None = None,
    k: int = 100,
    n_null: int = 100,
    ccr: int | Sequence[int] = 1,
    max_points: int = 2048,
    seed: int = 0,
    max_pairs: int | None = DEFAULT_MAX_PAIRS,
    batch_size: int = 8,
    memory_mb: float = 512,
    progress: bool = True,
) -> GeometryReport:
    """Subspace PGA profile: z of the readout subspace at every hook, for one or several CCR levels.

    Activations at ``hooks`` (default: every ``blocks.{l}.hook_resid_post``) are gathered for one
    seeded sample of at most ``max_points`` positions shared by all hooks (BOS and padding
    dropped); the readout basis is the top-``k`` left singular vectors of ``W_U``; the same
    ``n_null`` Haar-random bases (from ``seed``) serve every hook and CCR level. See
    :func:`tl_geometry.pga_score` for the score.

    Rows: ``pga.z`` and ``pga.rho_read`` per hook and CCR level (extras ccr, k, rho_read,
    null_mean, null_std, n_points, n_pairs, n_null, pairs_subsampled, seed) and
    ``pga.pc1_overlap`` per hook (extras expected = k/d, ratio, explained_variance).

    Raises:
        ValueError: k ≥ d_model, bad ccr, bad hooks/tokens, or any error of :func:`pga_score`.
    """
    capture.check_model(model)
    d = int(model.cfg.d_model)
    if not isinstance(k, int) or not 1 <= k < d:
        raise ValueError(f"k must satisfy 1 <= k < d_model={d}, got k={k!r}")
    ccrs = _ccr_list(ccr)
    hooks = capture.validate_hooks(model, hooks if hooks is not None else capture.resid_hooks(model, "post"))
    readout = readout_basis(capture.weight(model, "W_U"), k)
    cap = capture.collect(model, tokens, hooks, max_points=max_points, seed=seed, batch_size=batch_size, progress=progress)
    bases = haar_bases(d, k, n_null, seed=seed)

    from tqdm.auto import tqdm

    rows = []
    for h in tqdm(hooks, desc="pga", disable=not progress, leave=False):
        H = cap.acts[h]
        prof = pga_profile(H, readout, ccrs=ccrs, null_bases=bases, seed=seed, max_pairs=max_pairs, memory_mb=memory_mb)
        for c, s in prof.items():
            extras = {
                "ccr": c, "k": k, "rho_read": s.rho_read, "null_mean": s.null_mean, "null_std": s.null_std,
                "n_points": s.n_points, "n_pairs": s.n_pairs, "n_null": s.n_null,
                "pairs_subsampled": s.pairs_subsampled, "seed": seed,
            }
            rows.append({"metric": "pga.z", "value": s.z, "hook": h, "extras": extras})
            rows.append({"metric": "pga.rho_read", "value": s.rho_read, "hook": h, "extras": extras})
        pc = pc1_overlap(H, readout)
        rows.append({"metric": "pga.pc1_overlap", "value": pc.overlap, "hook": h,
                     "extras": {"expected": pc.expected, "ratio": pc.ratio, "explained_variance": pc.explained_variance, "k": k}})
    return GeometryReport.from_rows(
        rows, model=model, pga={"k": k, "n_null": n_null, "ccr": ccrs, "max_points": max_points, "seed": seed,
                                "readout": "top-k left singular vectors of W_U", "n_points": cap.n_points},
    )


@register_metric("spectral", needs="activations", description="RankMe, alpha-ReQ, isotropy, condition number per hook")
def spectral(
    model: Any,
    tokens: Any,
    *,
    hooks: Sequence[str] | None = None,
    fit_range: tuple[int, int] | None = None,
    batch_size: int = 8,
    progress: bool = True,
) -> GeometryReport:
    """Spectral metrics of the activations at every hook, streamed over all (non-BOS) tokens.

    Rows ``spectral.rankme``, ``spectral.alpha_req``, ``spectral.isotropy``,
    ``spectral.condition_number`` per hook (extras n_points, d, n_kept).
    """
    capture.check_model(model)
    hooks = capture.validate_hooks(model, hooks if hooks is not None else capture.resid_hooks(model, "post"))
    accs = {h: StreamingCovariance() for h in hooks}
    capture.run(model, tokens, hooks, lambda h, a: accs[h].update(a), batch_size=batch_size, progress=progress, desc="spectral")
    rows = []
    for h in hooks:
        m = accs[h].spectral(fit_range)
        extras = {"n_points": m.n_points, "d": m.d, "n_kept": m.n_kept}
        for name in ("rankme", "alpha_req", "isotropy", "condition_number"):
            rows.append({"metric": f"spectral.{name}", "value": getattr(m, name), "hook": h, "extras": extras})
    return GeometryReport.from_rows(rows, model=model)
