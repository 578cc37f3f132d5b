"""tl_geometry: geometry of a TransformerLens model's latent space.

Three families of metrics from three 2026 papers:

* capacity (arXiv 2606.02765): ε = μ + 2σ of pairwise cosines, capacity bound k(d, ε);
* pga (arXiv 2605.17084): Subspace PGA z-scores of the readout subspace, spectral metrics;
* interaction (arXiv 2605.27989): AGOP, AOFE, depth/width ratio.

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

__version__ = "0.1.0"

from tl_geometry.errors import InputError, InputTypeError, TLGeometryError, UnknownNameError  # noqa: E402
from tl_geometry.report import GeometryReport, Row  # noqa: E402
from tl_geometry.registry import (  # noqa: E402
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
from tl_geometry import capture, corpus, models  # noqa: E402

# tier 1: pure functions and their results
from tl_geometry.metrics.capacity import (  # noqa: E402
    FORMS,
    PRESETS,
    CapacityEstimate,
    CapacityWarning,
    PublishedEpsilon,
    PublishedRow,
    SimilarityAccumulator,
    SimilarityStats,
    ZeroRowsWarning,
    capacity,
    capacity_epsilon,
    capacity_estimate,
    log10_capacity,
    min_n,
    model_class_of,
    published,
    published_epsilon,
    published_rows,
    sensitivity,
    similarity_stats,
)
from tl_geometry.metrics.pga import (  # noqa: E402
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
from tl_geometry.metrics.spectral import (  # noqa: E402
    REPTRIX_FIT_RANGE,
    SpectralMetrics,
    StreamingCovariance,
    power_law_fit,
    spectral_from_covariance,
    spectral_metrics,
)
from tl_geometry.metrics.interaction import (  # noqa: E402
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

# tier 2: model-facing calls (importing the families registers the built-in metrics)
from tl_geometry import families  # noqa: E402
from tl_geometry.families.capacity import embedding_epsilon  # noqa: E402
from tl_geometry.families.pga import pga, spectral  # noqa: E402
from tl_geometry.families.interaction import agop, agop_report, nfa  # noqa: E402

# tier 3: reports
from tl_geometry.analysis import analyze  # noqa: E402
from tl_geometry import convergence, html, jobs, packing, plotting, sae, threads, weights_reader  # noqa: E402  (optional deps load lazily)
from tl_geometry.sweep import SweepJob, SweepSummary, sweep, sweep_report  # noqa: E402
from tl_geometry.reproduce import reproduce  # noqa: E402  (the module stays importable as tl_geometry.reproduce via from-imports)
from tl_geometry.tables import to_pandas  # noqa: E402  (a DataFrame of a result, or a dict / list of results)

from tl_geometry import registry as _registry  # noqa: E402

_registry._end_builtin_phase()  # metrics registered from here on are not built-ins

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
    "nfa",
    # experiments and sweeps
    "SweepJob",
    "SweepSummary",
    "sweep",
    "sweep_report",
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
