"""Room **render**: what a report looks like to a reader — figures, readings, HTML and markdown.

* [`plotting`][tl_geometry.render.plotting] — the figures each family declares (matplotlib, Agg);
* [`readings`][tl_geometry.render.readings] — plain-language readings and the summary table;
* [`html`][tl_geometry.render.html] — the self-contained `index.html`, `report.md` and PNG figures.

These modules iterate the declared families (`tl_geometry.registry`) and contain no family's name.
"""
