"""``tg.analyze``: run registered metrics on one model (one shared capture pass) and merge their reports."""

from __future__ import annotations

import difflib
import inspect
import logging
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tl_geometry.base import _checks
from tl_geometry.errors import InputError
from tl_geometry.registry import get_metric, list_metrics
from tl_geometry.report import GeometryReport, provenance_of

logger = logging.getLogger(__name__)


CAPTURE_MODES = ("shared", "separate")
"""How activation metrics read the model: "shared" (default) feeds every metric registered with a plan ([`tl_geometry.registry.MetricPlan`][tl_geometry.registry.MetricPlan]) from ONE forward pass over the tokens; "separate" runs each metric's own pass (what the report did before; same numbers)."""


def analyze(
    model: Any,
    tokens: Any = None,
    *,
    metrics: Sequence[str] | None = None,
    hooks: Sequence[str] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    progress: bool = True,
    capture: str = "shared",
    cache: Any = None,
    activations: Mapping[str, Any] | None = None,
    **provenance: Any,
) -> GeometryReport:
    """Run metrics on ``model`` (and ``tokens``) and return one merged [`GeometryReport`][tl_geometry.report.GeometryReport].

    The flow: every activation metric that declares a plan (pga, spectral, epsilon_activations
    and any plugin registered with ``plan=``) hands its consumers to ONE shared forward pass over
    ``tokens`` ([`tl_geometry.capture.run_shared`][tl_geometry.capture.activations.run_shared]); then each computes its rows. Weight and
    gradient metrics read the model themselves.

    Args:
        model: a HookedTransformer or TransformerBridge.
        tokens: (batch, pos) token ids; required when a chosen metric needs activations or
            gradients.
        metrics: registry names, or one name as a string (default: every registered metric);
            a name given twice is refused.
        hooks: hook names passed to every activation/gradient metric (default: each metric's own).
        options: per-metric keyword options, e.g. ``{"pga": {"n_null": 20}}``.
        progress: show a progress bar over metrics (``tqdm.auto``: a widget in Jupyter, text in a
            terminal) naming the metric being computed, and each metric's own bar (over batches,
            hooks or probes) when it takes a ``progress`` option.
        capture: ``"shared"`` (one forward pass for all planned activation metrics) or
            ``"separate"`` (one per metric); recorded in ``provenance["capture"]``.
        cache: a TransformerLens ``ActivationCache`` from ``model.run_with_cache(tokens)`` (the
            same ``tokens``): the activation metrics read it instead of running the model
            ([`tl_geometry.capture.replay_shared`][tl_geometry.capture.activations.replay_shared]). Rows equal the capture path's: the
            same BOS/padding positions are dropped (a naive ``reshape(-1, d)`` would keep BOS
            and change the numbers), the same positions sampled, the same batches summed.
        activations: instead of ``cache``, a mapping hook name → tensor of shape
            (batch, pos, d) like a cache entry, or (batch·pos, d) with every position in
            (batch, pos) order (read back as (batch, pos, d)); ``hooks`` defaults to its keys.
            Rows already filtered (BOS dropped) cannot be matched to positions and are refused.
            With ``cache`` or ``activations``, metrics that need gradients (``agop``, ``nfa``)
            or a forward pass of their own cannot run: named explicitly in ``metrics`` they
            are refused; by default they are skipped and listed in
            ``provenance["capture"]["skipped"]``. Weight metrics run as usual.
        **provenance: extra provenance fields (corpus name, seed, ...).

    Raises:
        KeyError: an unknown metric name (lists the valid ones).
        ValueError: tokens missing for a metric that needs them; an unknown ``capture``; a
            gradient metric asked for with ``cache``/``activations``; a hook missing from them.
        Whatever a metric raises (the first one).
    """
    names = _checks.names(metrics, "metrics") if metrics is not None else list_metrics()
    progress = _checks.flag(progress, "progress")
    info: dict[str, Any] = {}
    source = None
    if cache is not None or activations is not None:
        if cache is not None and activations is not None:
            raise InputError("pass cache= or activations=, not both")
        source = cache if cache is not None else activations
        if activations is not None and hooks is None:
            if not isinstance(activations, Mapping) or not activations:
                raise InputError("activations must be a non-empty mapping hook name -> tensor (batch, pos, d)")
            hooks = [str(h) for h in activations]
        names, skipped = replayable(names, explicit=metrics is not None)
        if skipped:
            info["skipped"] = skipped
            logger.warning("not computed from cached activations: %s", skipped)
    reports = []
    timings: dict[str, float] = {}
    for name, result, seconds in iter_metrics(
        model,
        tokens,
        names,
        options,
        hooks=hooks,
        progress=progress,
        capture=capture,
        capture_info=info,
        activations=source,
    ):
        if isinstance(result, BaseException):
            raise result
        reports.append(result)
        timings[name] = seconds
    if "_seconds" in info:  # the shared pass's time is a timing like the metrics' (not provenance proper)
        timings["capture"] = info.pop("_seconds")
    extra = {"capture": info} if info else {}
    return merged(model, tokens, reports, names, timings, **extra, **provenance)


def replayable(names: Sequence[str], *, explicit: bool) -> tuple[list[str], dict[str, str]]:
    """Split ``names`` into the metrics that can be computed from cached activations (weight
    metrics, and activation metrics registered with a plan) and the others, with the reason.

    Raises:
        InputError: ``explicit`` (the user named the metrics) and some cannot be computed from a
            cache; the message names them and why.
    """
    keep, skipped = [], {}
    for n in names:
        spec = get_metric(n)
        if spec.needs == "weights" or (spec.needs == "activations" and spec.plan is not None):
            keep.append(n)
        elif spec.needs == "gradients":
            skipped[n] = "needs gradients (a backward pass through the model); a cache holds none"
        else:
            skipped[n] = "registered without a plan= (it runs its own forward pass)"
    if skipped and explicit:
        raise InputError(
            f"metrics {sorted(skipped)} cannot be computed from cached activations ("
            + "; ".join(f"{k}: {v}" for k, v in skipped.items())
            + "); drop them from metrics=, or run them on the model without cache=/activations="
        )
    return keep, skipped


def merged(
    model: Any,
    tokens: Any,
    reports: Sequence[GeometryReport],
    names: Sequence[str],
    timings: Mapping[str, float],
    **provenance: Any,
) -> GeometryReport:
    """``reports`` merged with the provenance [`analyze`][tl_geometry.runs.analysis.analyze] records (model, tokens, metrics, timings)."""
    prov = provenance_of(model)
    if tokens is not None and hasattr(tokens, "shape"):
        prov["tokens_shape"] = list(tokens.shape)
        prov["n_tokens"] = int(tokens.numel())
    prov.update(provenance)
    prov["metrics"] = list(names)
    prov["timings_s"] = dict(timings)
    return GeometryReport.merge(*reports, **prov)


class _Guarded:
    """A pass whose consumer's first error is kept (for its metric) instead of stopping the shared pass."""

    def __init__(self, inner: Any, box: dict[str, BaseException]):
        self.inner, self.box = inner, box
        self.hooks, self.positions = inner.hooks, inner.positions

    def update(self, hook: str, acts: Any) -> None:
        if "error" in self.box:
            return
        try:
            self.inner.update(hook, acts)
        except Exception as exc:  # noqa: BLE001 - attributed to this pass's metric, raised by it
            self.box["error"] = exc


def check_request(
    names: Any, options: Any, tokens: Any, capture: Any, hooks: Any
) -> tuple[list[str], list[Any], dict[str, dict[str, Any]], list[str] | None]:
    """Every check of an [`analyze`][tl_geometry.runs.analysis.analyze] request that needs no model: the capture mode, the metric
    names (one string is one name; a name given twice is refused; unknown names list the valid
    ones), the hooks, the options and whether tokens are needed. Returns (names, specs, options, hooks)."""
    _checks.choice(capture, "capture", CAPTURE_MODES)
    names = _checks.names(names, "metrics")
    if hooks is not None:
        hooks = _checks.names(hooks, "hooks")
    specs = [get_metric(n) for n in names]
    options = check_options(names, options)
    if tokens is None:
        need = [s.name for s in specs if s.needs != "weights"]
        if need:
            raise InputError(f"metrics {need} need tokens; pass tokens=tg.corpus.tokens(model, ...)")
    return names, specs, options, hooks


def iter_metrics(
    model: Any,
    tokens: Any,
    names: Sequence[str],
    options: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    hooks: Sequence[str] | None = None,
    progress: bool = True,
    capture: str = "shared",
    capture_info: dict[str, Any] | None = None,
    activations: Any = None,
) -> Iterator[tuple[str, GeometryReport | BaseException, float]]:
    """Compute metrics ``names`` one by one: yields ``(name, report or the exception it raised, seconds)``.

    With ``capture="shared"`` the planned activation metrics are captured first, together, in one
    forward pass per batch size (``capture_info`` receives what was shared and how long it took);
    a metric whose plan or consumer failed yields its own exception and the others go on. The
    seconds a metric yields are its own (plan and finish); the shared pass's time is put in
    ``capture_info["_seconds"]``.
    With ``activations`` (an ``ActivationCache`` or a mapping hook → tensor) the shared pass is
    replayed from them ([`tl_geometry.capture.replay_shared`][tl_geometry.capture.activations.replay_shared]) instead of running the model;
    only weight metrics and planned activation metrics are accepted (see `replayable`).
    Every name, option and the tokens are checked before any work.
    """
    from tqdm.auto import tqdm

    if activations is not None:
        if capture != "shared":
            raise InputError("capture='separate' runs the model once per metric; with cached activations use 'shared'")
        if tokens is None:
            raise InputError("cached activations need the tokens they were computed from: pass tokens=")
    names, specs, options, hooks = check_request(names, options, tokens, capture, hooks)
    if activations is not None:
        replayable(names, explicit=True)
    kwargs: dict[str, dict[str, Any]] = {}
    for spec in specs:
        kw = dict(options.get(spec.name, {}))
        if hooks is not None and spec.needs != "weights":
            kw["hooks"] = hooks
        if "progress" not in kw and takes_option(spec.name, "progress"):
            kw["progress"] = progress  # its own bar (batches, hooks) under the metrics bar
        kwargs[spec.name] = kw
    _cap_k(model, kwargs)

    plans: dict[str, Any] = {}
    failed: dict[str, BaseException] = {}
    boxes: dict[str, dict[str, BaseException]] = {}
    plan_s: dict[str, float] = {}
    if capture == "shared":
        for spec in specs:
            if spec.plan is None:
                continue
            t0 = time.perf_counter()
            try:
                plans[spec.name] = spec.checked_plan(spec.plan(model, tokens, **kwargs[spec.name]))
            except Exception as exc:  # noqa: BLE001 - this metric fails; the others go on
                failed[spec.name] = exc
            plan_s[spec.name] = time.perf_counter() - t0
        groups: dict[int, list[str]] = {}
        for name, plan in plans.items():
            groups.setdefault(int(plan.batch_size), []).append(name)
        from tl_geometry import capture as capture_mod

        t0 = time.perf_counter()
        for batch_size, group in groups.items():
            passes = []
            for name in group:
                boxes[name] = {}
                passes += [_Guarded(p, boxes[name]) for p in plans[name].passes]
            try:
                if activations is not None:  # the user's cache: the same rows, no forward pass
                    capture_mod.replay_shared(
                        model,
                        tokens,
                        activations,
                        passes,
                        batch_size=batch_size,
                        progress=progress,
                        desc=f"replay ({', '.join(group)})",
                    )
                else:
                    capture_mod.run_shared(
                        model,
                        tokens,
                        passes,
                        batch_size=batch_size,
                        progress=progress,
                        desc=f"capture ({', '.join(group)})",
                    )
            except Exception as exc:  # noqa: BLE001 - every metric of this pass fails with it
                for name in group:
                    failed.setdefault(name, exc)
        if capture_info is not None and plans:
            if activations is not None:
                capture_info.update({"mode": "cache", "metrics": list(plans), "forward_passes": 0})
            else:
                capture_info.update({"mode": "shared", "metrics": list(plans), "forward_passes": len(groups)})
            capture_info["_seconds"] = round(time.perf_counter() - t0, 3)
    elif capture_info is not None:
        capture_info["mode"] = "separate"

    bar = tqdm(specs, desc="metrics", unit="metric", disable=not progress)
    for spec in bar:
        bar.set_description(f"metrics: {spec.name}")  # the bar names the metric being computed
        t0 = time.perf_counter() - plan_s.get(spec.name, 0.0)
        result: GeometryReport | BaseException
        try:
            if spec.name in failed:
                raise failed[spec.name]
            if spec.name in plans:
                if "error" in boxes.get(spec.name, {}):
                    raise boxes[spec.name]["error"]
                result = spec.checked(plans[spec.name].finish(), "finished with")
            else:
                result = spec(model, tokens, **kwargs[spec.name])
        except Exception as exc:  # noqa: BLE001 - handed to the caller, who decides
            result = exc
        seconds = round(time.perf_counter() - t0, 3)
        logger.info("metric %s took %.2fs", spec.name, seconds)
        yield spec.name, result, seconds


# ---------------------------------------------------------------- option validation
def _option_params(name: str) -> dict[str, inspect.Parameter] | None:
    """The keyword options metric ``name`` accepts (None: it takes any ``**options``)."""
    spec = get_metric(name)
    target = spec.options_of or spec.fn  # a metric forwarding **options declares where they go
    try:
        params = dict(inspect.signature(target).parameters)
    except (TypeError, ValueError):  # no signature to read: cannot tell, let the metric decide
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    skip = {"model", "tokens", "hooks"}
    return {
        k: p
        for i, (k, p) in enumerate(params.items())
        if k not in skip
        and i >= 2
        and p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    }


def accepts_option(metric: str, option: str) -> bool:
    """Whether registered metric ``metric`` may be given keyword option ``option`` (True for a
    metric taking any ``**options``)."""
    params = _option_params(metric)
    return params is None or option in params


def _cap_k(model: Any, kwargs: dict[str, dict[str, Any]]) -> None:
    """Cap a default subspace dimension ``k`` that a small model cannot hold (in place, with a warning).

    Our choice: a metric whose ``k`` option was not given and whose default (pga: 100) is not
    below the model's ``d_model`` runs with ``k = d_model // 2`` (at least 1), so the default
    options work on any model; the warning names the cap and how to choose another. A ``k`` the
    caller gave is never changed (an impossible one is refused by the metric).
    """
    d = getattr(getattr(model, "cfg", None), "d_model", None)
    if d is None or not _checks.is_int(d):
        return
    for name, kw in kwargs.items():
        params = _option_params(name)
        if "k" in kw or not params or "k" not in params:
            continue
        default = params["k"].default
        if not _checks.is_int(default) or default < d:
            continue
        cap = max(1, int(d) // 2)
        warnings.warn(
            f"{name}: the default k={default} is not below this model's d_model={d}; using k={cap} "
            f"(d_model // 2); pass options={{{name!r}: {{'k': ...}}}} to choose another",
            UserWarning,
            stacklevel=3,
        )
        kw["k"] = cap


def takes_option(metric: str, option: str) -> bool:
    """Whether registered metric ``metric`` names keyword option ``option`` (for the built-ins
    that forward ``**options``, in the function they forward to; a plugin's ``**options`` does
    not count: it must not be handed an option it never asked for)."""
    params = _option_params(metric)
    return params is not None and option in params


OPTION_CHECKS: dict[str, _checks.Check] = {
    "n_null": _checks.int_at_least(2),
    "n_probes": _checks.int_at_least(2),
    "max_points": _checks.int_at_least(2, none_ok=True),
    "k": _checks.int_at_least(1),
    "seed": _checks.SEED,
    "batch_size": _checks.int_at_least(1),
    "n_groups": _checks.int_at_least(2, none_ok=True),
    "projection_dim": _checks.int_at_least(2),
    "max_pairs": _checks.int_at_least(1, none_ok=True),
    "refit_nulls": _checks.int_at_least(0),
    "ccr": _checks.nonneg_int_list(),
    "memory_mb": _checks.positive_real(),
    "progress": _checks.boolean,
    "exact": _checks.boolean,
}
"""Checks of option values shared by the built-in metrics (`tl_geometry.base._checks`, the one validation layer), applied wherever a metric takes the option (the metrics check them again; these only move the error before any model work)."""


def check_options(names: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """Validate per-metric ``options`` for metrics ``names`` without touching a model.

    Refuses: options for a metric not being run; options that are not a mapping; an option the
    metric does not take (with the accepted ones and a close match); a value outside what
    `OPTION_CHECKS` accepts (e.g. ``n_null`` < 2, ``max_points`` < 2, ``n_probes`` < 2).

    Returns:
        A fresh ``{metric: {option: value}}`` dict.

    Raises:
        ValueError: naming the metric, the option, the value and what is accepted.
    """
    if options is not None and not isinstance(options, Mapping):
        raise _checks.ArgumentError(
            f"options must map metric names to option mappings, e.g. {{'pga': {{'n_null': 20}}}}; "
            f"got {_checks.describe(options)}"
        )
    options = dict(options or {})
    unknown_metrics = set(options) - set(names)
    if unknown_metrics:
        raise InputError(f"options given for metrics not being run: {sorted(unknown_metrics)}; running {list(names)}")
    out: dict[str, dict[str, Any]] = {}
    for metric, opts in options.items():
        if not isinstance(opts, Mapping):
            raise InputError(
                f"options for metric {metric!r} must be a mapping of option names to values, got {type(opts).__name__}"
            )
        params = _option_params(metric)
        for key, value in opts.items():
            if params is not None and key not in params:
                close = difflib.get_close_matches(str(key), list(params), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise InputError(
                    f"metric {metric!r} has no option {key!r}{hint}; it accepts: {', '.join(sorted(params)) or 'none'}"
                )
            check = OPTION_CHECKS.get(key)
            problem = check.problem(value) if check else None
            if problem:
                raise _checks.ArgumentError(
                    f"option {key}={value!r} for metric {metric!r} is not valid: expected {problem}"
                )
        out[metric] = dict(opts)
    return out
