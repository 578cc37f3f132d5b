"""Pure metric functions on tensors, one module per paper family (no model, hook or report code).

Rule of the house: nothing here imports the capture layer, the families, the registry, the
report, models or plotting (``tests/unit/house/test_import_rules.py`` checks it on the source). The
math takes tensors and returns frozen dataclasses; the model-facing metrics that feed it live in
[`tl_geometry.families`][tl_geometry.families].
"""
