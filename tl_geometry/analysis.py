"""``tg.analyze``: run registered metrics on one model and merge their reports."""

from __future__ import annotations

import difflib
import inspect
import logging
import numbers
import time
from typing import Any, Callable, Mapping, Sequence

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
    options = check_options(names, options)  # names, option names and values, before any work
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
        if "progress" not in kwargs and takes_option(spec.name, "progress"):
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


# ---------------------------------------------------------------- option validation
# Metrics whose registered function forwards ``**options`` to another function: its signature
# says which options are accepted.
def _forwarded() -> dict[str, Callable]:
    from tl_geometry.capture_agop import agop, nfa

    return {"agop": agop, "nfa": nfa}


def _option_params(name: str) -> dict[str, inspect.Parameter] | None:
    """The keyword options metric ``name`` accepts (None: it takes any ``**options``)."""
    fn = get_metric(name).fn
    target = _forwarded().get(name, fn) if get_metric(name).builtin else fn
    try:
        params = dict(inspect.signature(target).parameters)
    except (TypeError, ValueError):  # no signature to read: cannot tell, let the metric decide
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    skip = {"model", "tokens", "hooks"}
    return {
        k: p for i, (k, p) in enumerate(params.items())
        if k not in skip and i >= 2 and p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    }


def accepts_option(metric: str, option: str) -> bool:
    """Whether registered metric ``metric`` may be given keyword option ``option`` (True for a
    metric taking any ``**options``)."""
    params = _option_params(metric)
    return params is None or option in params


def takes_option(metric: str, option: str) -> bool:
    """Whether registered metric ``metric`` names keyword option ``option`` (for the built-ins
    that forward ``**options``, in the function they forward to; a plugin's ``**options`` does
    not count: it must not be handed an option it never asked for)."""
    params = _option_params(metric)
    return params is not None and option in params


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _int_at_least(lo: int, *, none_ok: bool = False):
    def check(v):
        if v is None and none_ok:
            return None
        if not _is_int(v) or v < lo:
            return f"an integer >= {lo}" + (" or None" if none_ok else "")
        return None
    return check


def _ccr(v):
    vals = [v] if _is_int(v) else v
    if not isinstance(vals, (list, tuple)) or not vals or not all(_is_int(c) and c >= 0 for c in vals):
        return "a non-negative integer or a non-empty list of them"
    return None


def _positive_number(v):
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 < v < float("inf"):
        return "a positive finite number"
    return None


def _boolean(v):
    return None if isinstance(v, bool) else "True or False"


#: Checks of option values shared by the built-in metrics, applied wherever a metric takes the
#: option (the metrics check them again; these only move the error before any model work).
OPTION_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "n_null": _int_at_least(2),
    "n_probes": _int_at_least(2),
    "max_points": _int_at_least(2, none_ok=True),
    "k": _int_at_least(1),
    "seed": _int_at_least(0),
    "batch_size": _int_at_least(1),
    "n_groups": _int_at_least(2, none_ok=True),
    "projection_dim": _int_at_least(2),
    "max_pairs": _int_at_least(1, none_ok=True),
    "ccr": _ccr,
    "memory_mb": _positive_number,
    "progress": _boolean,
    "exact": _boolean,
}


def check_options(
    names: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """Validate per-metric ``options`` for metrics ``names`` without touching a model.

    Refuses: options for a metric not being run; options that are not a mapping; an option the
    metric does not take (with the accepted ones and a close match); a value outside what
    :data:`OPTION_CHECKS` accepts (e.g. ``n_null`` < 2, ``max_points`` < 2, ``n_probes`` < 2).

    Returns:
        A fresh ``{metric: {option: value}}`` dict.

    Raises:
        ValueError: naming the metric, the option, the value and what is accepted.
    """
    options = dict(options or {})
    unknown_metrics = set(options) - set(names)
    if unknown_metrics:
        raise ValueError(f"options given for metrics not being run: {sorted(unknown_metrics)}; running {list(names)}")
    out: dict[str, dict[str, Any]] = {}
    for metric, opts in options.items():
        if not isinstance(opts, Mapping):
            raise ValueError(f"options for metric {metric!r} must be a mapping of option names to values, got {type(opts).__name__}")
        params = _option_params(metric)
        for key, value in opts.items():
            if params is not None and key not in params:
                close = difflib.get_close_matches(str(key), list(params), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(
                    f"metric {metric!r} has no option {key!r}{hint}; it accepts: {', '.join(sorted(params)) or 'none'}"
                )
            check = OPTION_CHECKS.get(key)
            problem = check(value) if check else None
            if problem:
                raise ValueError(f"option {key}={value!r} for metric {metric!r} is not valid: expected {problem}")
        out[metric] = dict(opts)
    return out
