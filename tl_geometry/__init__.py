"""tl_geometry: geometry of a TransformerLens model's latent space.

Three families of metrics from three 2026 papers:

* capacity (arXiv 2606.02765): ε = μ + 2σ of pairwise cosines, capacity bound k(d, ε);
* pga (arXiv 2605.17084): Subspace PGA z-scores of the readout subspace, spectral metrics;
* interaction (arXiv 2605.27989): AGOP, AOFE, depth/width ratio.

The exact definitions are in docs/definitions.md; the stable names are importable from
:mod:`tl_geometry` as below.
"""

__version__ = "0.1.0"

from tl_geometry.report import GeometryReport, Row  # noqa: E402
from tl_geometry.registry import (  # noqa: E402
    get_metric,
    list_metrics,
    load_plugins,
    register_metric,
    unregister_metric,
)
from tl_geometry import capture, corpus, models  # noqa: E402
from tl_geometry.metrics.capacity import *  # noqa: E402,F401,F403
from tl_geometry.metrics.pga import *  # noqa: E402,F401,F403
from tl_geometry.metrics.interaction import *  # noqa: E402,F401,F403
from tl_geometry.metrics import basic as _basic  # noqa: E402,F401  (registers "shape")
from tl_geometry.analysis import analyze  # noqa: E402
from tl_geometry import convergence, html, jobs, packing, plotting, sae, threads, weights_reader  # noqa: E402  (optional deps load lazily)
from tl_geometry.sweep import SweepJob, SweepSummary, sweep, sweep_report  # noqa: E402
from tl_geometry.reproduce import reproduce  # noqa: E402  (the module stays importable as tl_geometry.reproduce via from-imports)

from tl_geometry import registry as _registry  # noqa: E402

_registry._end_builtin_phase()  # metrics registered from here on are not built-ins
