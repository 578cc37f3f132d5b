"""Room **runs**: a request → its run → its outputs. What `tg.analyze`, `tl-geometry report`,
sweeps and `reproduce` do with the registry, the capture layer and the render room.

* [`request`][tl_geometry.runs.request] — one request: a run's metrics and options, checked once, before any model loads;
* [`analysis`][tl_geometry.runs.analysis] — `tg.analyze`: every registered metric, one shared capture pass;
* [`pipeline`][tl_geometry.runs.pipeline] — `tl-geometry report` as a Python function;
* [`sweeps`][tl_geometry.runs.sweeps] — crash-safe, resumable sweeps over many models;
* [`reproduction`][tl_geometry.runs.reproduction] — the papers' published numbers next to ours;
* [`cli_args`][tl_geometry.runs.cli_args] — the arguments every sub-command shares, checked before any model loads.
"""
