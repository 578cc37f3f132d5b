"""The capacity family (Guha, arXiv 2606.02765), model-facing: ε of a model's matrices and activations.

``tg.embedding_epsilon`` and the registered metrics "epsilon", "capacity", "epsilon_activations":
weights through [`tl_geometry.capture.weight`][tl_geometry.capture.hooks.weight], activations through a
[`tl_geometry.capture.Sample`][tl_geometry.capture.activations.Sample] (one shared forward pass in a report); the math is in
[`tl_geometry.metrics.capacity`][tl_geometry.metrics.capacity].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from torch import Tensor

from tl_geometry import capture
from tl_geometry.errors import InputError
from tl_geometry.metrics.capacity import SimilarityStats, similarity_stats
from tl_geometry.metrics.jackknife import group_labels
from tl_geometry.registry import (
    FamilySpec,
    FigureSpec,
    MetricPlan,
    RowSpec,
    planned_metric,
    register_family,
    register_metric,
)
from tl_geometry.report import GeometryReport

__all__ = ["embedding_epsilon", "matrix_provenance"]

_MATRICES = ("W_E", "W_U")


def embedding_epsilon(model_or_matrix: Any, *, matrix: str = "W_E", **options: Any) -> SimilarityStats:
    """[`similarity_stats`][tl_geometry.metrics.capacity.similarity_stats] of a model's embedding (rows = tokens) or of a given matrix.

    Args:
        model_or_matrix: a TransformerLens model, or an (n, d) tensor/array whose rows are
            the vectors (then ``matrix`` is ignored).
        matrix: ``"W_E"`` (d_vocab, d_model), used as is, or ``"W_U"`` (d_model, d_vocab),
            transposed so that rows are tokens.
        **options: passed to [`similarity_stats`][tl_geometry.metrics.capacity.similarity_stats] (histogram, top_n, ...).

    Note:
        A model loaded with ``center_writing_weights`` has W_E with each row's mean over
        d_model removed; ε of the processed W_E differs from the raw checkpoint's. Compare
        like with like (see ``docs/capacity.md``).
    """
    if isinstance(model_or_matrix, (Tensor, np.ndarray)):
        return similarity_stats(model_or_matrix, **options)
    if matrix not in ("W_E", "W_U"):
        raise InputError(f"matrix must be 'W_E' or 'W_U', got {matrix!r}")
    w = capture.weight(model_or_matrix, matrix)
    return similarity_stats(w.T if matrix == "W_U" else w, **options)


def matrix_provenance(model, matrix: str) -> dict[str, Any]:
    """Is the model's W_E / W_U the raw checkpoint matrix (the paper's) or TL-processed?

    ``raw``: True / False / None (unknown). TransformerLens's ``center_writing_weights`` removes
    each W_E row's mean for LayerNorm models only (normalization_type LN / LNPre); ``fold_ln``
    and ``center_unembed`` change W_U. The flags come from ``model._tl_geometry_processing``
    (set by [`tl_geometry.models`][tl_geometry.models]); without them the answer is unknown where it matters.
    """
    proc = getattr(model, "_tl_geometry_processing", None)
    norm = getattr(getattr(model, "cfg", None), "normalization_type", None)
    layer_norm = norm in ("LN", "LNPre")
    if matrix == "W_E":
        if not layer_norm:
            raw, why = True, f"normalization {norm}: TransformerLens does not center W_E"
        elif proc is None:
            raw, why = None, "LayerNorm model with unknown TransformerLens processing"
        else:
            raw = not proc.get("center_writing_weights", True)
            why = "center_writing_weights " + ("off" if raw else "on: W_E rows are centered")
    else:
        if proc is None:
            raw, why = None, "unknown TransformerLens processing"
        else:
            changed = [f for f in ("fold_ln", "center_unembed") if proc.get(f, True) and (f != "fold_ln" or norm)]
            raw = not changed
            why = "no processing" if raw else f"{' and '.join(changed)} changed W_U"
    return {"matrix": matrix, "raw": raw, "raw_why": why, "processing": dict(proc) if proc else None}


def _stats_extras(st) -> dict[str, Any]:
    return {
        "mean": st.mean,
        "std": st.std,
        "n_vectors": st.n_vectors,
        "n_dropped": st.n_dropped,
        "d": st.d,
        "model_class": st.model_class,
    }


EXACT = {"stderr": 0.0, "stderr_method": "exact"}
"""The convention for exact rows (a weight matrix's ε, the capacity formula on it, ...): the value has no sampling error, so ``extras["stderr"] = 0.0`` and ``extras["stderr_method"] = "exact"``."""


def _check_matrices(matrices: Sequence[str]) -> list[str]:
    if isinstance(matrices, str):
        matrices = [matrices]
    bad = [m for m in matrices if m not in _MATRICES]
    if bad or not matrices:
        raise InputError(f"matrices must be a non-empty subset of {_MATRICES}, got {list(matrices)}")
    return list(matrices)


def _histogram(model, matrix: str, rows: int | None, bins: int, seed: int) -> dict[str, Any]:
    """Exact histogram over all ordered pairs of a seeded sample of ``rows`` rows (all if None)."""
    import torch

    w = capture.weight(model, matrix)
    w = w.T if matrix == "W_U" else w
    if rows is not None and rows < w.shape[0]:
        gen = torch.Generator().manual_seed(int(seed))
        w = w[torch.randperm(w.shape[0], generator=gen)[:rows].sort().values.to(w.device)]
    st = similarity_stats(w, histogram=True, histogram_bins=bins, progress=False)
    assert st.histogram is not None  # histogram=True
    counts, edges = st.histogram
    return {"histogram": {"counts": counts.tolist(), "edges": edges.tolist()}, "histogram_rows": int(w.shape[0])}


@register_metric("epsilon", needs="weights", description="ε = μ + 2σ of pairwise cosines of W_E / W_U rows")
def epsilon_metric(
    model,
    tokens=None,
    *,
    hooks=None,
    matrices: Sequence[str] = _MATRICES,
    histogram_rows: int | None = 4096,
    histogram_bins: int = 100,
    seed: int = 0,
    progress: bool = False,
):
    """ε = μ + 2σ of pairwise cosines of the rows of W_E and W_U (rows = tokens), exact.

    μ, σ, ε are exact over all rows. The cosine histogram in ``extras["histogram"]``
    (``{"counts", "edges"}``, for the report's figure) is exact over all pairs of a seeded
    sample of ``histogram_rows`` rows (``None``: all rows, O(n²·d); ``0``: no histogram);
    ``extras["histogram_rows"]`` says how many.
    """
    if histogram_rows is not None and (
        not isinstance(histogram_rows, int) or histogram_rows < 0 or histogram_rows == 1
    ):
        raise InputError(f"histogram_rows must be None, 0 or an integer >= 2, got {histogram_rows!r}")
    rows = []
    for m in _check_matrices(matrices):
        st = embedding_epsilon(model, matrix=m, progress=progress)
        extras = {**_stats_extras(st), **matrix_provenance(model, m), **EXACT}
        if histogram_rows != 0:
            extras.update(_histogram(model, m, histogram_rows, histogram_bins, seed))
        rows.append({"metric": f"epsilon.{m}", "value": st.epsilon, "extras": extras})
    return GeometryReport.from_rows(rows, model=model)


@register_metric(
    "capacity", needs="weights", description="capacity k(d, ε) from W_E / W_U's ε, as the paper reports it"
)
def capacity_metric(
    model,
    tokens=None,
    *,
    hooks=None,
    form: str = "full",
    preset: str = "paper",
    matrices: Sequence[str] = _MATRICES,
    progress: bool = False,
):
    """Capacity k(d_model, ε) with ε from W_E and W_U, as the capacity paper reports it.

    One row per matrix (``capacity.W_E``, ``capacity.W_U``) from
    [`tl_geometry.capacity_estimate`][tl_geometry.metrics.capacity.capacity_estimate]: the value is the count for a Class-2 ε (< 0.1) and NaN
    otherwise, with ``extras`` status ("count"/"indeterminate"), reason, preset, form, epsilon,
    d, model_class, log10_k, below_d, and the authors' μ + 3σ figures (epsilon_3sigma,
    k_3sigma). The paper's matrix is the raw input embedding: ``extras["raw"]`` says whether
    this model's matrix is the checkpoint's (see [`matrix_provenance`][tl_geometry.families.capacity.matrix_provenance]).
    """
    from tl_geometry.metrics.capacity import FORMS, PRESETS, capacity_estimate

    if preset not in PRESETS:
        raise InputError(f"unknown preset {preset!r}; accepted: {list(PRESETS)}")
    if form not in FORMS:
        raise InputError(f"unknown form {form!r}; expected one of {sorted(FORMS)}")
    rows = []
    for m in _check_matrices(matrices):
        st = embedding_epsilon(model, matrix=m, progress=progress)
        eps_ok = st.epsilon < 1
        est = capacity_estimate(st.d, mean=st.mean, std=st.std, preset=preset, form=form) if eps_ok else None
        extras = {
            "form": form,
            "preset": preset,
            "epsilon": st.epsilon,
            "d": st.d,
            "model_class": st.model_class,
            **matrix_provenance(model, m),
            **EXACT,
        }
        if est is None:
            extras.update(status="indeterminate", reason=f"ε = {st.epsilon:.5g} ≥ 1: outside the formula's domain")
            value = float("nan")
        else:
            extras.update(
                {
                    k: v
                    for k, v in est.to_dict().items()
                    if k in ("status", "reason", "log10_k", "below_d", "epsilon_3sigma", "k_3sigma", "mean", "std")
                }
            )
            value = est.k if est.k is not None else float("nan")
        rows.append({"metric": f"capacity.{m}", "value": value, "extras": extras})
    return GeometryReport.from_rows(rows, model=model, capacity_preset=preset)


@planned_metric(
    "epsilon_activations", needs="activations", description="ε of a seeded sample of token activations per hook"
)
def epsilon_activations_metric(
    model,
    tokens,
    *,
    hooks=None,
    max_points: int = 2048,
    seed: int = 0,
    n_groups: int = 20,
    batch_size: int = 8,
    progress: bool = False,
) -> MetricPlan:
    """ε = μ + 2σ of pairwise cosines of a bounded, seeded sample of token activations per hook.

    Default hooks: every ``blocks.{l}.hook_resid_post``. Each row carries W_E's ε in
    ``extras["epsilon_W_E"]`` to test the paper's caveat that the embedding's ε stands for the
    whole latent space.

    ``extras["stderr"]`` is the standard error of ε (``mean_stderr``, ``std_stderr`` those of μ
    and σ): a delete-a-group jackknife over ``n_groups`` groups of whole sequences
    ([`tl_geometry.metrics.jackknife.group_labels`][tl_geometry.metrics.jackknife.group_labels]; fewer groups when there are fewer
    sequences), exact from the Gram moments ([`tl_geometry.metrics.capacity.similarity_jackknife`][tl_geometry.metrics.capacity.similarity_jackknife]).
    Our choice: the resampling unit is the sequence, so the error covers a fresh draw of text as
    well as of positions; ``extras["stderr_method"]`` names it.
    """
    if isinstance(n_groups, bool) or not isinstance(n_groups, int) or n_groups < 2:
        raise InputError(f"n_groups must be an integer >= 2 (jackknife groups), got {n_groups!r}")
    if tokens is None:
        raise InputError("epsilon_activations needs tokens (e.g. tl_geometry.io.corpus.tokens(model, 'pydoc', ...))")
    hooks = capture.resid_hooks(model, "post") if hooks is None else capture.validate_hooks(model, hooks)
    sample = capture.Sample(model, tokens, hooks, max_points=max_points, seed=seed)

    def finish() -> GeometryReport:
        captured = sample.result()
        eps_we = embedding_epsilon(model, matrix="W_E", progress=False).epsilon
        labels = group_labels(captured.positions[:, 0], n_groups) if captured.n_points >= 2 else None
        rows = []
        for h in hooks:
            try:
                st = similarity_stats(captured.acts[h], groups=labels, progress=False)
            except InputError:  # too few points for any leave-group-out replicate: ε without an error
                st = similarity_stats(captured.acts[h], progress=False)
                nan = float("nan")
                st = replace(
                    st, mean_stderr=nan, std_stderr=nan, epsilon_stderr=nan, stderr_method="none: too few points"
                )
            extras = {
                **_stats_extras(st),
                "epsilon_W_E": eps_we,
                "max_points": max_points,
                "seed": seed,
                "stderr": st.epsilon_stderr,
                "stderr_method": st.stderr_method,
                "mean_stderr": st.mean_stderr,
                "std_stderr": st.std_stderr,
            }
            rows.append({"metric": "epsilon_activations", "value": st.epsilon, "hook": h, "extras": extras})
        return GeometryReport.from_rows(rows, model=model, seed=seed, n_points=captured.n_points)

    return MetricPlan("epsilon_activations", model, tokens, [sample], finish, batch_size=batch_size, progress=progress)


_STATS = ("mean", "std", "n_vectors", "n_dropped", "d", "model_class")
_PROVENANCE = ("matrix", "raw", "raw_why", "processing")
_SE = ("stderr", "stderr_method")
_ESTIMATE = ("log10_k", "below_d", "epsilon_3sigma", "k_3sigma", "mean", "std")

register_family(
    FamilySpec(
        "capacity",
        title="Capacity",
        paper="Guha, arXiv 2606.02765",
        metrics=("epsilon", "capacity", "epsilon_activations"),
        rows=tuple(
            RowSpec(
                f"epsilon.{m}",
                per="model",
                by="epsilon",
                extras=_STATS + _PROVENANCE + _SE,
                optional=("histogram", "histogram_rows"),
                description=f"ε = μ + 2σ of pairwise cosines of {m}'s rows (histogram unless histogram_rows=0)",
            )
            for m in _MATRICES
        )
        + tuple(
            RowSpec(
                f"capacity.{m}",
                per="model",
                by="capacity",
                extras=("form", "preset", "epsilon", "d", "model_class", "status", "reason") + _PROVENANCE + _SE,
                optional=_ESTIMATE,
                description=f"capacity k(d, ε) from {m}'s ε, NaN where the paper gives no count",
            )
            for m in _MATRICES
        )
        + (
            RowSpec(
                "epsilon_activations",
                per="hook",
                by="epsilon_activations",
                extras=_STATS + ("epsilon_W_E", "max_points", "seed") + _SE + ("mean_stderr", "std_stderr"),
                description="ε of a seeded sample of token activations",
            ),
        ),
        figures=(
            FigureSpec(
                "cosine_histogram",
                "tl_geometry.families.capacity.figures:plot_cosine_histogram",
                "Pairwise cosine histogram of W_E / W_U with μ and ε",
                rows=("epsilon.W_E", "epsilon.W_U"),
            ),
            FigureSpec(
                "capacity_curve",
                "tl_geometry.families.capacity.figures:plot_capacity_curve",
                "Capacity bound vs ε, this model and published models",
                rows=("epsilon.W_E", "epsilon.W_U", "capacity.W_E", "capacity.W_U"),
            ),
            FigureSpec(
                "epsilon_by_layer",
                "tl_geometry.families.capacity.figures:plot_epsilon_by_layer",
                "ε of the activations by layer",
                rows=("epsilon_activations",),
            ),
        ),
        read="tl_geometry.families.capacity.reading:read_capacity",
        explain="tl_geometry.families.capacity.reading:explain_nan",
        checks="tl_geometry.families.capacity.checks",
        command="tl_geometry.families.capacity.cli",
        report_options={"epsilon_activations": {"max_points": 2048}},
        fast_options={"epsilon_activations": {"max_points": 512}},
        plot="capacity_curve",
        order=10,
    )
)
