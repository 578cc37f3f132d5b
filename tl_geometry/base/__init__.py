"""Room 0, **base**: what every other room may use and which uses nothing of the package but
[`tl_geometry.errors`][tl_geometry.errors].

* `_checks` — the one validation layer: argument checks shared by the pure functions,
  `tg.analyze` and the CLI (each error names the argument and what it accepts);
* [`tables`][tl_geometry.base.tables] — `to_pandas()` for every result type;
* [`lazy`][tl_geometry.base.lazy] — a callable named by a ``"module:attribute"`` string, imported when first called;
* [`numbers`][tl_geometry.base.numbers] — the one number formatter of every table and reading.
"""
