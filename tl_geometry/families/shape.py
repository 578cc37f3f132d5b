"""The "shape" metric: the model's shape, the numbers every report starts with (weights only)."""

from __future__ import annotations

from tl_geometry.registry import FamilySpec, RowSpec, register_family, register_metric
from tl_geometry.report import GeometryReport

__all__: list[str] = []

_FIELDS = ("n_layers", "d_model", "d_vocab", "n_ctx", "n_heads", "d_mlp", "d_head")


@register_metric("shape", needs="weights", description="model shape: n_layers, d_model, d_vocab, ...")
def shape_metric(model, tokens=None, *, hooks=None):
    """Model shape from ``model.cfg`` (n_layers, d_model, d_vocab, n_ctx, n_heads, d_mlp, d_head)."""
    cfg = model.cfg
    rows = [
        {"metric": f"shape.{k}", "value": float(getattr(cfg, k))} for k in _FIELDS if getattr(cfg, k, None) is not None
    ]
    return GeometryReport.from_rows(rows, model=model)


register_family(
    FamilySpec(
        "shape",
        metrics=("shape",),
        rows=tuple(
            RowSpec(
                f"shape.{k}",
                per="model",
                description=f"model.cfg.{k}",
                when="the model has an MLP" if k == "d_mlp" else "",
            )
            for k in _FIELDS
        ),
        order=70,
    )
)
