"""``tg.analyze``: run registered metrics on one model (one shared capture pass) and merge their reports."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tl_geometry.base import _checks
from tl_geometry.errors import InputError
from tl_geometry.report import GeometryReport, provenance_of
from tl_geometry.runs import request as request_mod
from tl_geometry.runs.request import (  # noqa: F401 - public here since 0.1 (the checks live in runs.request)
    CAPTURE_MODES,
    OPTION_CHECKS,
    Request,
    accepts_option,
    check_options,
    takes_option,
)

if TYPE_CHECKING:
    from torch import Tensor

logger = logging.getLogger(__name__)


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
    fast: bool = False,
    attention_mask: Any = None,
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
        options: per-metric keyword options, e.g. ``{"pga": {"n_null": 20}}``, over the defaults.
            The defaults are those of ``tl-geometry report``, from one source: each family's
            declaration (``FamilySpec.report_options``, see
            [`tl_geometry.runs.request.report_options`][tl_geometry.runs.request.report_options]), so the same request gives the same rows
            here and in a report (e.g. ``pga``: CCR 0/1/5, 30 null subspaces, 1024 points;
            ``agop``: 16 probes; ``nfa``: 8; ``intrinsic_dimension``: 1024 points). Changed (see
            CHANGELOG.md, Unreleased): the defaults here used to be the functions' own (PGA: CCR 1
            only, 100 nulls, 2048 points; AGOP / NFA 64 probes); pass those in ``options`` to get them.
        fast: the defaults of ``report --fast`` (``FamilySpec.fast_options``) instead.
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
        attention_mask: (batch, pos) 0 / 1 like a tokenizer's (``tokenizer(texts, padding=True,
            return_tensors="pt").attention_mask``): the 0 positions are padding and never
            measured (the shared pass and the cache drop them, and the BOS after left pads).
            Without it, tokens that look padded (a run of the tokenizer's ``pad_token_id`` at
            the end or start of a row) are refused rather than measured with their pads; a
            metric that runs its own passes and takes no ``attention_mask`` (agop, nfa) is
            refused on padded tokens.
        **provenance: extra provenance fields (corpus name, seed, ...); the keys the run measures
            itself (``n_tokens``, ``tokens_shape``, ``metrics``, ``timings_s``, the model's, ...)
            cannot be given.

    Every input is checked once, before any work, into a
    [`tl_geometry.runs.request.Request`][tl_geometry.runs.request.Request] that the run reads.

    Raises:
        KeyError: an unknown metric name (lists the valid ones).
        ValueError: tokens missing for a metric that needs them; an unknown ``capture``; an
            option a metric does not take or a value it does not accept; a gradient metric
            asked for with ``cache``/``activations``; a hook missing from them.
        Whatever a metric raises (the first one).
    """
    source = None
    if cache is not None or activations is not None:
        if cache is not None and activations is not None:
            raise InputError("pass cache= or activations=, not both")
        source = cache if cache is not None else activations
        if activations is not None and hooks is None:
            if not isinstance(activations, Mapping) or not activations:
                raise InputError("activations must be a non-empty mapping hook name -> tensor (batch, pos, d)")
            hooks = [str(h) for h in activations]
        if capture != "shared":
            raise InputError("capture='separate' runs the model once per metric; with cached activations use 'shared'")
        if tokens is None:
            raise InputError("cached activations need the tokens they were computed from: pass tokens=")
    measured = sorted(set(provenance) & MEASURED_PROVENANCE)
    if measured:
        raise InputError(
            f"provenance keys {measured} are measured by the run and cannot be given; name yours otherwise "
            f"(measured: {', '.join(sorted(MEASURED_PROVENANCE))})"
        )
    mask = None
    if tokens is not None:
        from tl_geometry import capture as capture_mod

        if getattr(tokens, "ndim", None) == 2 and hasattr(tokens, "shape"):
            mask = capture_mod.check_attention_mask(tokens, attention_mask)
            if attention_mask is None:
                padded = capture_mod.padding_of(model, tokens)
                if padded:
                    raise InputError(
                        f"the tokens look padded: {padded}; pass attention_mask= (the tokenizer's, e.g. "
                        "tokenizer(texts, padding=True, return_tensors='pt').attention_mask) so the pads are not "
                        "measured, or pass unpadded tokens"
                    )
    elif attention_mask is not None:
        raise InputError("attention_mask= needs tokens=")
    req = request_mod.build(
        metrics,
        options,
        hooks=hooks,
        capture=capture,
        progress=progress,
        fast=fast,
        has_tokens=tokens is not None,
        cached=source is not None,
    )
    info: dict[str, Any] = {}
    if req.skipped:
        info["skipped"] = dict(req.skipped)
        logger.warning("not computed from cached activations: %s", info["skipped"])
    reports = []
    timings: dict[str, float] = {}
    for name, result, seconds in iter_metrics(
        model, tokens, req, progress=req.progress, capture_info=info, activations=source, attention_mask=mask
    ):
        if isinstance(result, BaseException):
            raise result
        reports.append(result)
        timings[name] = seconds
    if "_seconds" in info:  # the shared pass's time is a timing like the metrics' (not provenance proper)
        timings["capture"] = info.pop("_seconds")
    extra: dict[str, Any] = {"capture": info} if info else {}
    if mask is not None:
        extra["n_padding"] = int((~mask).sum())
        extra["n_tokens"] = int(mask.sum())  # the positions measured, not the padded batch's
    return merged(model, tokens, reports, req.metrics, timings, **extra, **provenance)


#: Provenance the run measures itself: a caller's ``**provenance`` may not overwrite it.
MEASURED_PROVENANCE = frozenset(
    {
        "n_tokens",
        "tokens_shape",
        "n_padding",
        "metrics",
        "timings_s",
        "capture",
        "n_layers",
        "d_model",
        "d_vocab",
        "n_ctx",
        "n_heads",
        "d_mlp",
        "dtype",
        "processing",
        "weight_processing",
        "tl_geometry_version",
        "transformer_lens_version",
    }
)


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


def iter_metrics(
    model: Any,
    tokens: Any,
    request: Request | Sequence[str],
    options: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    hooks: Sequence[str] | None = None,
    progress: bool = True,
    capture: str = "shared",
    capture_info: dict[str, Any] | None = None,
    activations: Any = None,
    attention_mask: Tensor | None = None,
) -> Iterator[tuple[str, GeometryReport | BaseException, float]]:
    """Compute the metrics of ``request`` one by one: yields ``(name, report or the exception it raised, seconds)``.

    ``request`` is a checked [`tl_geometry.runs.request.Request`][tl_geometry.runs.request.Request] (read as it is: its
    metrics, options, hooks and capture mode), or metric names, then built here from ``names``,
    ``options``, ``hooks``, ``capture`` and ``progress`` (the same defaults as `analyze`).
    ``progress`` is the bars drawn here (over metrics, and the shared pass).

    With ``capture="shared"`` the planned activation metrics are captured first, together, in one
    forward pass per batch size (``capture_info`` receives what was shared and how long it took);
    a metric whose plan or consumer failed yields its own exception and the others go on. The
    seconds a metric yields are its own (plan and finish); the shared pass's time is put in
    ``capture_info["_seconds"]``.
    With ``activations`` (an ``ActivationCache`` or a mapping hook → tensor) the shared pass is
    replayed from them ([`tl_geometry.capture.replay_shared`][tl_geometry.capture.activations.replay_shared]) instead of running the model;
    the request must have been built with ``cached=True`` (only weight metrics and planned
    activation metrics). ``attention_mask`` (boolean, False = padding) is dropped by the shared
    pass; a metric that runs its own passes gets it when it takes the keyword, and fails (its
    own error, the others go on) when it does not.
    """
    from tqdm.auto import tqdm

    if not isinstance(request, Request):
        request = request_mod.build(
            request,
            options,
            hooks=hooks,
            capture=capture,
            progress=progress,
            has_tokens=tokens is not None,
            cached=activations is not None,
        )
    if activations is not None and request.capture != "shared":
        raise InputError("capture='separate' runs the model once per metric; with cached activations use 'shared'")
    capture = request.capture
    specs = [request.specs[n] for n in request.metrics]
    kwargs = request.kwargs()
    _cap_k(model, kwargs, request.params)

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
                        attention_mask=attention_mask,
                        batch_size=batch_size,
                        progress=progress,
                        desc=f"replay ({', '.join(group)})",
                    )
                else:
                    capture_mod.run_shared(
                        model,
                        tokens,
                        passes,
                        attention_mask=attention_mask,
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
                own = dict(kwargs[spec.name])
                if attention_mask is not None and spec.needs != "weights":
                    if not request_mod.takes_option(spec.name, "attention_mask"):
                        raise InputError(
                            f"metric {spec.name!r} runs its own passes and takes no attention_mask: it would measure "
                            "the padding; pass unpadded tokens for it"
                        )
                    own["attention_mask"] = attention_mask
                result = spec(model, tokens, **own)
        except Exception as exc:  # noqa: BLE001 - handed to the caller, who decides
            result = exc
        seconds = round(time.perf_counter() - t0, 3)
        logger.info("metric %s took %.2fs", spec.name, seconds)
        yield spec.name, result, seconds


def _cap_k(model: Any, kwargs: dict[str, dict[str, Any]], params: Mapping[str, Any]) -> None:
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
        p = params.get(name)
        if "k" in kw or not p or "k" not in p:
            continue
        default = p["k"].default
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
