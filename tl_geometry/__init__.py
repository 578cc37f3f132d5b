"""tl_geometry: geometry of a TransformerLens model's latent space.

Five families of metrics ([`tl_geometry.families`][tl_geometry.families]), three of them from three 2026 papers:

* capacity (arXiv 2606.02765): ε = μ + 2σ of pairwise cosines, capacity bound k(d, ε);
* pga (arXiv 2605.17084): Subspace PGA z-scores of the readout subspace, spectral metrics;
* interaction (arXiv 2605.27989): AGOP, AOFE, depth/width ratio;
* sae: published SAE widths and SAE decoder ε next to the capacity bound;
* intrinsic_dimension (Valeriani et al., NeurIPS 2023): TwoNN and GRIDE per layer;

plus the model's shape (n_layers, d_model, ...), which every report starts with.

The public API has three tiers (``__all__`` lists them):

1. **pure functions** on tensors returning frozen dataclasses ([`tl_geometry.metrics`][tl_geometry.metrics]):
   ``similarity_stats``, ``capacity``, ``pga_score``, ``spectral_metrics``, ``aofe``, ...;
2. **model-facing calls** returning typed results or reports ([`tl_geometry.families`][tl_geometry.families]):
   ``embedding_epsilon``, ``pga``, ``agop``, ``nfa``, ``depth_width_ratio``;
3. **reports** through ``analyze`` (every registered metric, one shared capture pass) and the
   registry (``register_metric``, ``list_metrics``; ``register_family`` declares a family's rows,
   figures and reading to the rendering), returning [`GeometryReport`][tl_geometry.report.GeometryReport].

Errors a caller can fix are [`tl_geometry.errors.TLGeometryError`][tl_geometry.errors.TLGeometryError] (bad inputs are also
``ValueError``). The exact definitions are in docs/definitions.md.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY: dict[str, tuple[str, str | None]] = {
    "InputError": ("tl_geometry.errors", "InputError"),
    "InputTypeError": ("tl_geometry.errors", "InputTypeError"),
    "TLGeometryError": ("tl_geometry.errors", "TLGeometryError"),
    "UnknownNameError": ("tl_geometry.errors", "UnknownNameError"),
    "GeometryReport": ("tl_geometry.report", "GeometryReport"),
    "Row": ("tl_geometry.report", "Row"),
    "FamilySpec": ("tl_geometry.registry", "FamilySpec"),
    "FigureSpec": ("tl_geometry.registry", "FigureSpec"),
    "RowSpec": ("tl_geometry.registry", "RowSpec"),
    "get_family": ("tl_geometry.registry", "get_family"),
    "get_metric": ("tl_geometry.registry", "get_metric"),
    "list_families": ("tl_geometry.registry", "list_families"),
    "list_metrics": ("tl_geometry.registry", "list_metrics"),
    "load_plugins": ("tl_geometry.registry", "load_plugins"),
    "register_family": ("tl_geometry.registry", "register_family"),
    "register_metric": ("tl_geometry.registry", "register_metric"),
    "unregister_family": ("tl_geometry.registry", "unregister_family"),
    "unregister_metric": ("tl_geometry.registry", "unregister_metric"),
    "capture": ("tl_geometry.capture", None),
    "corpus": ("tl_geometry.io.corpus", None),
    "models": ("tl_geometry.models", None),
    "FORMS": ("tl_geometry.metrics.capacity", "FORMS"),
    "PRESETS": ("tl_geometry.metrics.capacity", "PRESETS"),
    "CapacityEstimate": ("tl_geometry.metrics.capacity", "CapacityEstimate"),
    "CapacityWarning": ("tl_geometry.metrics.capacity", "CapacityWarning"),
    "PublishedEpsilon": ("tl_geometry.families.capacity.hosts", "PublishedEpsilon"),
    "PublishedRow": ("tl_geometry.families.capacity.hosts", "PublishedRow"),
    "SimilarityAccumulator": ("tl_geometry.metrics.capacity", "SimilarityAccumulator"),
    "SimilarityStats": ("tl_geometry.metrics.capacity", "SimilarityStats"),
    "ZeroRowsWarning": ("tl_geometry.metrics.capacity", "ZeroRowsWarning"),
    "capacity": ("tl_geometry.metrics.capacity", "capacity"),
    "capacity_epsilon": ("tl_geometry.metrics.capacity", "capacity_epsilon"),
    "capacity_estimate": ("tl_geometry.metrics.capacity", "capacity_estimate"),
    "log10_capacity": ("tl_geometry.metrics.capacity", "log10_capacity"),
    "min_n": ("tl_geometry.metrics.capacity", "min_n"),
    "model_class_of": ("tl_geometry.metrics.capacity", "model_class_of"),
    "published": ("tl_geometry.families.capacity.hosts", "published"),
    "published_epsilon": ("tl_geometry.families.capacity.hosts", "published_epsilon"),
    "published_rows": ("tl_geometry.families.capacity.hosts", "published_rows"),
    "sensitivity": ("tl_geometry.metrics.capacity", "sensitivity"),
    "similarity_stats": ("tl_geometry.metrics.capacity", "similarity_stats"),
    "DEFAULT_MAX_PAIRS": ("tl_geometry.metrics.pga", "DEFAULT_MAX_PAIRS"),
    "MIN_POINTS": ("tl_geometry.metrics.pga", "MIN_POINTS"),
    "PC1Overlap": ("tl_geometry.metrics.pga", "PC1Overlap"),
    "PGAScore": ("tl_geometry.metrics.pga", "PGAScore"),
    "check_n_points": ("tl_geometry.metrics.pga", "check_n_points"),
    "haar_bases": ("tl_geometry.metrics.pga", "haar_bases"),
    "min_points": ("tl_geometry.metrics.pga", "min_points"),
    "pc1_overlap": ("tl_geometry.metrics.pga", "pc1_overlap"),
    "pga_layer": ("tl_geometry.metrics.pga", "pga_layer"),
    "pga_profile": ("tl_geometry.metrics.pga", "pga_profile"),
    "pga_score": ("tl_geometry.metrics.pga", "pga_score"),
    "readout_basis": ("tl_geometry.metrics.pga", "readout_basis"),
    "REPTRIX_FIT_RANGE": ("tl_geometry.metrics.spectral", "REPTRIX_FIT_RANGE"),
    "SpectralMetrics": ("tl_geometry.metrics.spectral", "SpectralMetrics"),
    "StreamingCovariance": ("tl_geometry.metrics.spectral", "StreamingCovariance"),
    "power_law_fit": ("tl_geometry.metrics.spectral", "power_law_fit"),
    "spectral_from_covariance": ("tl_geometry.metrics.spectral", "spectral_from_covariance"),
    "spectral_metrics": ("tl_geometry.metrics.spectral", "spectral_metrics"),
    "AOFE": ("tl_geometry.metrics.interaction", "AOFE"),
    "EFFICIENT_INTERVAL": ("tl_geometry.metrics.interaction", "EFFICIENT_INTERVAL"),
    "AGOPAccumulator": ("tl_geometry.metrics.interaction", "AGOPAccumulator"),
    "AGOPResult": ("tl_geometry.metrics.interaction", "AGOPResult"),
    "HookAGOP": ("tl_geometry.metrics.interaction", "HookAGOP"),
    "LossCorrelation": ("tl_geometry.metrics.interaction", "LossCorrelation"),
    "NFACorrelation": ("tl_geometry.metrics.interaction", "NFACorrelation"),
    "aofe": ("tl_geometry.metrics.interaction", "aofe"),
    "depth_width_ratio": ("tl_geometry.metrics.interaction", "depth_width_ratio"),
    "in_efficient_interval": ("tl_geometry.metrics.interaction", "in_efficient_interval"),
    "loss_correlations": ("tl_geometry.metrics.interaction", "loss_correlations"),
    "nfa_correlation": ("tl_geometry.metrics.interaction", "nfa_correlation"),
    "offdiag_pearson": ("tl_geometry.metrics.interaction", "offdiag_pearson"),
    "projection_matrix": ("tl_geometry.metrics.interaction", "projection_matrix"),
    "weighted_mean_cos2": ("tl_geometry.metrics.interaction", "weighted_mean_cos2"),
    "wtw_aofe": ("tl_geometry.metrics.interaction", "wtw_aofe"),
    "families": ("tl_geometry.families", None),
    "embedding_epsilon": ("tl_geometry.families.capacity", "embedding_epsilon"),
    "pga": ("tl_geometry.families.pga", "pga"),
    "spectral": ("tl_geometry.families.pga", "spectral"),
    "agop": ("tl_geometry.families.interaction", "agop"),
    "agop_report": ("tl_geometry.families.interaction", "agop_report"),
    "intrinsic_dimension": ("tl_geometry.families.intrinsic_dimension", "intrinsic_dimension"),
    "nfa": ("tl_geometry.families.interaction", "nfa"),
    "analyze": ("tl_geometry.runs.analysis", "analyze"),
    "html": ("tl_geometry.render.html", None),
    "jobs": ("tl_geometry.runtime.jobs", None),
    "plotting": ("tl_geometry.render.plotting", None),
    "threads": ("tl_geometry.runtime.threads", None),
    "convergence": ("tl_geometry.families.pga.convergence", None),
    "packing": ("tl_geometry.families.capacity.packing", None),
    "sae": ("tl_geometry.families.sae", None),
    "weights_reader": ("tl_geometry.families.capacity.weights_reader", None),
    "SweepJob": ("tl_geometry.runs.sweeps", "SweepJob"),
    "SweepSummary": ("tl_geometry.runs.sweeps", "SweepSummary"),
    "sweep": ("tl_geometry.runs.sweeps", "sweep"),
    "sweep_report": ("tl_geometry.runs.sweeps", "sweep_report"),
    "reproduce": ("tl_geometry.runs.reproduction", "reproduce"),
    "study": ("tl_geometry.studies", "study"),
    "StudyResult": ("tl_geometry.studies", "StudyResult"),
    "to_pandas": ("tl_geometry.base.tables", "to_pandas"),
}
"""Where each public name lives: ``name -> (module, attribute)`` (attribute None: the module itself). Imported on first access (PEP 562), so ``import tl_geometry`` loads no model, capture, rendering or thread-control code, and ``import tl_geometry.metrics.pga`` loads only the math."""

__all__ = [
    # errors a caller can fix (input errors are also ValueError / TypeError / KeyError)
    "TLGeometryError",
    "InputError",
    "InputTypeError",
    "UnknownNameError",
    # reports and the registry
    "GeometryReport",
    "Row",
    "analyze",
    "get_metric",
    "list_metrics",
    "load_plugins",
    "register_metric",
    "unregister_metric",
    # family declarations (rows, figures, readings)
    "FamilySpec",
    "FigureSpec",
    "RowSpec",
    "get_family",
    "list_families",
    "register_family",
    "unregister_family",
    # tier 1: pure functions (capacity)
    "FORMS",
    "PRESETS",
    "CapacityEstimate",
    "CapacityWarning",
    "PublishedEpsilon",
    "PublishedRow",
    "SimilarityAccumulator",
    "SimilarityStats",
    "ZeroRowsWarning",
    "capacity",
    "capacity_epsilon",
    "capacity_estimate",
    "log10_capacity",
    "min_n",
    "model_class_of",
    "published",
    "published_epsilon",
    "published_rows",
    "sensitivity",
    "similarity_stats",
    # tier 1 (pga, spectral)
    "DEFAULT_MAX_PAIRS",
    "MIN_POINTS",
    "PC1Overlap",
    "PGAScore",
    "check_n_points",
    "haar_bases",
    "min_points",
    "pc1_overlap",
    "pga_layer",
    "pga_profile",
    "pga_score",
    "readout_basis",
    "REPTRIX_FIT_RANGE",
    "SpectralMetrics",
    "StreamingCovariance",
    "power_law_fit",
    "spectral_from_covariance",
    "spectral_metrics",
    # tier 1 (interaction)
    "AOFE",
    "EFFICIENT_INTERVAL",
    "AGOPAccumulator",
    "AGOPResult",
    "HookAGOP",
    "LossCorrelation",
    "NFACorrelation",
    "aofe",
    "depth_width_ratio",
    "in_efficient_interval",
    "loss_correlations",
    "nfa_correlation",
    "offdiag_pearson",
    "projection_matrix",
    "weighted_mean_cos2",
    "wtw_aofe",
    # tier 2: model-facing
    "embedding_epsilon",
    "pga",
    "spectral",
    "agop",
    "agop_report",
    "intrinsic_dimension",
    "nfa",
    # experiments and sweeps
    "SweepJob",
    "SweepSummary",
    "sweep",
    "sweep_report",
    "study",
    "StudyResult",
    "reproduce",
    "to_pandas",
    # modules
    "capture",
    "corpus",
    "models",
    "families",
    "convergence",
    "html",
    "jobs",
    "packing",
    "plotting",
    "sae",
    "threads",
    "weights_reader",
]


#: Modules that moved into a room folder (issue 32): old dotted name -> new. ``import
#: tl_geometry.pipeline`` (or ``tg.hub``) still works, with a DeprecationWarning naming the new
#: place; the package itself never uses an old name (tests/unit/house/test_import_rules.py).
_MOVED: dict[str, str] = {
    "tl_geometry._checks": "tl_geometry.base._checks",
    "tl_geometry.tables": "tl_geometry.base.tables",
    "tl_geometry.corpus": "tl_geometry.io.corpus",
    "tl_geometry.hub": "tl_geometry.io.hub",
    "tl_geometry.weight_files": "tl_geometry.io.weight_files",
    "tl_geometry.outdir": "tl_geometry.io.outdir",
    "tl_geometry.outfile": "tl_geometry.io.outfile",
    "tl_geometry.threads": "tl_geometry.runtime.threads",
    "tl_geometry.jobs": "tl_geometry.runtime.jobs",
    "tl_geometry.ray_executor": "tl_geometry.runtime.ray_executor",
    "tl_geometry.family_registry": "tl_geometry.registry.family_specs",
    "tl_geometry.plotting": "tl_geometry.render.plotting",
    "tl_geometry.readings": "tl_geometry.render.readings",
    "tl_geometry.html": "tl_geometry.render.html",
    "tl_geometry.analysis": "tl_geometry.runs.analysis",
    "tl_geometry.pipeline": "tl_geometry.runs.pipeline",
    "tl_geometry.sweeps": "tl_geometry.runs.sweeps",
    "tl_geometry.reproduction": "tl_geometry.runs.reproduction",
    "tl_geometry.reproduction_rows": "tl_geometry.runs.reproduction_rows",
    "tl_geometry.reproduction_markdown": "tl_geometry.runs.reproduction_markdown",
    "tl_geometry.cli_args": "tl_geometry.runs.cli_args",
}


def _moved(old: str) -> Any:
    import warnings

    new = _MOVED[old]
    warnings.warn(f"{old} moved to {new}; import it from there", DeprecationWarning, stacklevel=3)
    module = importlib.import_module(new)
    sys.modules[old] = module
    return module


class _MovedFinder:
    """``import tl_geometry.<old>`` → the module at its new place, under both names (no file at
    the old path). The import system stamps the alias's spec on the module; ``exec_module`` puts
    the module's own spec back."""

    _specs: dict[str, Any] = {}

    @staticmethod
    def find_spec(fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _MOVED:
            return None
        import importlib.util

        loader: Any = _MovedFinder  # a loader by its two methods below
        return importlib.util.spec_from_loader(fullname, loader)

    @staticmethod
    def create_module(spec: Any) -> Any:
        module: Any = _moved(spec.name)
        _MovedFinder._specs[spec.name] = module.__spec__
        return module

    @staticmethod
    def exec_module(module: Any) -> None:
        for old, own in _MovedFinder._specs.items():
            if id(sys.modules.get(old)) == id(module):
                module.__spec__ = own


if not any(isinstance(f, type) and f.__name__ == "_MovedFinder" for f in sys.meta_path):
    sys.meta_path.append(_MovedFinder)


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        if f"tl_geometry.{name}" in _MOVED:
            return _moved(f"tl_geometry.{name}")
        raise AttributeError(f"module 'tl_geometry' has no attribute {name!r}") from None
    obj = importlib.import_module(module)
    if attr is not None:
        obj = getattr(obj, attr)
    globals()[name] = obj  # cached: the next access is a plain attribute
    return obj


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:  # what the names are, for type checkers and IDEs
    from tl_geometry.errors import InputError, InputTypeError, TLGeometryError, UnknownNameError
    from tl_geometry.report import GeometryReport, Row
    from tl_geometry.registry import (
        FamilySpec,
        FigureSpec,
        RowSpec,
        get_family,
        get_metric,
        list_families,
        list_metrics,
        load_plugins,
        register_family,
        register_metric,
        unregister_family,
        unregister_metric,
    )
    from tl_geometry.metrics.capacity import (
        FORMS,
        PRESETS,
        CapacityEstimate,
        CapacityWarning,
        SimilarityAccumulator,
        SimilarityStats,
        ZeroRowsWarning,
        capacity,
        capacity_epsilon,
        capacity_estimate,
        log10_capacity,
        min_n,
        model_class_of,
        sensitivity,
        similarity_stats,
    )
    from tl_geometry.families.capacity.hosts import (
        PublishedEpsilon,
        PublishedRow,
        published,
        published_epsilon,
        published_rows,
    )
    from tl_geometry.metrics.pga import (
        DEFAULT_MAX_PAIRS,
        MIN_POINTS,
        PC1Overlap,
        PGAScore,
        check_n_points,
        haar_bases,
        min_points,
        pc1_overlap,
        pga_layer,
        pga_profile,
        pga_score,
        readout_basis,
    )
    from tl_geometry.metrics.spectral import (
        REPTRIX_FIT_RANGE,
        SpectralMetrics,
        StreamingCovariance,
        power_law_fit,
        spectral_from_covariance,
        spectral_metrics,
    )
    from tl_geometry.metrics.interaction import (
        AOFE,
        EFFICIENT_INTERVAL,
        AGOPAccumulator,
        AGOPResult,
        HookAGOP,
        LossCorrelation,
        NFACorrelation,
        aofe,
        depth_width_ratio,
        in_efficient_interval,
        loss_correlations,
        nfa_correlation,
        offdiag_pearson,
        projection_matrix,
        weighted_mean_cos2,
        wtw_aofe,
    )
    from tl_geometry.families.capacity import embedding_epsilon
    from tl_geometry.families.pga import pga, spectral
    from tl_geometry.families.interaction import agop, agop_report, nfa
    from tl_geometry.families.intrinsic_dimension import intrinsic_dimension
    from tl_geometry.runs.analysis import analyze
    from tl_geometry.runs.sweeps import SweepJob, SweepSummary, sweep, sweep_report
    from tl_geometry.runs.reproduction import reproduce
    from tl_geometry.studies import StudyResult, study
    from tl_geometry.base.tables import to_pandas
    from tl_geometry import capture
    from tl_geometry.io import corpus
    from tl_geometry import models
    from tl_geometry import families
    from tl_geometry.render import html
    from tl_geometry.runtime import jobs
    from tl_geometry.render import plotting
    from tl_geometry.runtime import threads
    from tl_geometry.families.pga import convergence
    from tl_geometry.families.capacity import packing
    from tl_geometry.families import sae
    from tl_geometry.families.capacity import weights_reader
