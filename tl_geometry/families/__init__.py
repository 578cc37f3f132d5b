"""The model-facing layer: one folder per paper family, each registering its metrics and owning its figures, reading, checks and command.

A family reads models only through [`tl_geometry.capture`][tl_geometry.capture], computes with the pure
functions of [`tl_geometry.metrics`][tl_geometry.metrics], and returns [`tl_geometry.GeometryReport`][tl_geometry.report.GeometryReport] rows
named ``<family>.<quantity>``. Importing this package registers the built-in metrics.

* [`capacity`][tl_geometry.families.capacity] — "epsilon", "capacity", "epsilon_activations" (arXiv 2606.02765)
* [`pga`][tl_geometry.families.pga] — "pga", "spectral" (arXiv 2605.17084)
* [`interaction`][tl_geometry.families.interaction] — "agop", "wtw_aofe", "depth_width", "nfa" (arXiv 2605.27989)
* [`sae`][tl_geometry.families.sae] — "sae" (SAE widths and decoder ε next to the capacity bound)
* [`intrinsic_dimension`][tl_geometry.families.intrinsic_dimension] — "intrinsic_dimension" (TwoNN, GRIDE)
* [`shape`][tl_geometry.families.shape] — "shape"
"""

from tl_geometry import registry as _registry
from tl_geometry.families import (  # noqa: F401  (register the metrics)
    capacity,
    interaction,
    intrinsic_dimension,  # the fourth family: its one line
    pga,
    sae,
    shape,
)

_registry._end_builtin_phase()  # metrics registered from here on are not built-ins
