"""``tg.analyze``: run registered metrics on one model and merge their reports."""

from __future__ import annotations

import logging
import time
from typing import Any, Mapping, Sequence

from tl_geometry.registry import get_metric, list_metrics
from tl_geometry.report import GeometryReport, provenance_of

logger = logging.getLogger(__name__)


def analyze(
    model: Any,
    tokens: Any = None,
    *,
    metrics: Sequence[str] | None = None,
    hooks: Sequence[str] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    progress: bool = True,
    **provenance: Any,
) -> GeometryReport:
    """Run metrics on ``model`` (and ``tokens``) and return one merged :class:`GeometryReport`.

    Args:
        model: a HookedTransformer or TransformerBridge.
        tokens: (batch, pos) token ids; required when a chosen metric needs activations or
            gradients.
        metrics: registry names (default: every registered metric).
        hooks: hook names passed to every activation/gradient metric (default: each metric's own).
        options: per-metric keyword options, e.g. ``{"pga": {"n_null": 20}}``.
        progress: show a progress bar over metrics (``tqdm.auto``: a widget in Jupyter, text in a
            terminal) naming the metric being computed, and each metric's own bar (over batches,
            hooks or probes) when it takes a ``progress`` option.
        **provenance: extra provenance fields (corpus name, seed, ...).

    Raises:
        KeyError: an unknown metric name (lists the valid ones).
        ValueError: tokens missing for a metric that needs them.
    """
    from tqdm.auto import tqdm

    names = list(metrics) if metrics is not None else list_metrics()
    specs = [get_metric(n) for n in names]  # fail on an unknown name before any work
    options = dict(options or {})
    unknown_opts = set(options) - set(names)
    if unknown_opts:
        raise ValueError(f"options given for metrics not being run: {sorted(unknown_opts)}")
    if tokens is None:
        need = [s.name for s in specs if s.needs != "weights"]
        if need:
            raise ValueError(f"metrics {need} need tokens; pass tokens=tg.corpus.tokens(model, ...)")
    reports = []
    timings = {}
    bar = tqdm(specs, desc="metrics", unit="metric", disable=not progress)
    for spec in bar:
        bar.set_description(f"metrics: {spec.name}")  # the bar names the metric being computed
        t0 = time.perf_counter()
        kwargs = dict(options.get(spec.name, {}))
        if hooks is not None and spec.needs != "weights":
            kwargs["hooks"] = hooks
        if "progress" not in kwargs and _accepts(spec.fn, "progress"):
            kwargs["progress"] = progress  # its own bar (batches, hooks) under the metrics bar
        reports.append(spec(model, tokens, **kwargs))
        timings[spec.name] = round(time.perf_counter() - t0, 3)
        logger.info("metric %s took %.2fs", spec.name, timings[spec.name])
    prov = provenance_of(model)
    if tokens is not None and hasattr(tokens, "shape"):
        prov["tokens_shape"] = list(tokens.shape)
        prov["n_tokens"] = int(tokens.numel())
    prov.update(provenance)
    prov["metrics"] = names
    prov["timings_s"] = timings
    return GeometryReport.merge(*reports, **prov)


def _accepts(fn: Any, name: str) -> bool:
    """Whether ``fn`` names a keyword argument ``name`` (not through ``**kwargs``: a plugin that
    checks its options must not be handed one it never asked for)."""
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params and params[name].kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
