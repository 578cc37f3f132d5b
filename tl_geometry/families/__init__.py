"""The model-facing layer: one module per paper family, each registering its metrics.

A family module reads models only through :mod:`tl_geometry.capture`, computes with the pure
functions of :mod:`tl_geometry.metrics`, and returns :class:`tl_geometry.GeometryReport` rows
named ``<family>.<quantity>``. Importing this package registers the built-in metrics.

* :mod:`~tl_geometry.families.capacity` — "epsilon", "capacity", "epsilon_activations" (arXiv 2606.02765)
* :mod:`~tl_geometry.families.pga` — "pga", "spectral" (arXiv 2605.17084)
* :mod:`~tl_geometry.families.interaction` — "agop", "wtw_aofe", "depth_width", "nfa" (arXiv 2605.27989)
* :mod:`~tl_geometry.families.shape` — "shape"
"""

from tl_geometry.families import capacity, interaction, pga, shape  # noqa: F401  (register the metrics)
