"""One request: what a run measures and with which options, checked once, before any model loads.

[`build`][tl_geometry.runs.request.build] turns what a caller asked for (metric names, per-metric options, hooks,
the capture mode, ``fast``, and — from ``tl-geometry report`` — the size flags) into a frozen
[`Request`][tl_geometry.runs.request.Request]; [`build_report`][tl_geometry.runs.request.build_report] adds the text, the device and the output
directory of a report ([`ReportRequest`][tl_geometry.runs.request.ReportRequest]). Every check that needs no model happens
there, once, with an error naming the bad input and what is accepted; `tg.analyze`,
[`tl_geometry.runs.pipeline.run_report`][tl_geometry.runs.pipeline.run_report] and ``tl-geometry report`` build one and hand it down, and the
later stages read it without checking again.

The options a metric runs with come from one source, whoever asks:

1. the family's declaration (``FamilySpec.report_options``, or ``fast_options`` with ``fast``) —
   [`report_options`][tl_geometry.runs.request.report_options];
2. a size flag of ``tl-geometry report`` (``--n-null``, ``--n-probes``, ``--max-points``, ``--refit-nulls``; `FLAGS`),
   given to **every** metric being run whose signature takes that keyword
   ([`metrics_taking`][tl_geometry.runs.request.metrics_taking]: no hand table);
3. the caller's own ``options={metric: {...}}``;

each overriding the one before, then ``progress`` for a metric that takes it. Each metric's
registry entry and options signature are looked up once, into the request.
"""

from __future__ import annotations

import difflib
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tl_geometry import registry
from tl_geometry.base import _checks
from tl_geometry.errors import InputError

CAPTURE_MODES = ("shared", "separate")
"""How activation metrics read the model: "shared" (default) feeds every metric registered with a plan ([`tl_geometry.registry.MetricPlan`][tl_geometry.registry.MetricPlan]) from ONE forward pass over the tokens; "separate" runs each metric's own pass (the same numbers)."""

FLAGS = {
    "n_null": "null subspaces",
    "n_probes": "gradient probes",
    "max_points": "sampled token positions",
    "refit_nulls": "null subspaces whose point-sample error terms are computed in full",
}
"""The keyword options ``tl-geometry report`` exposes as flags (``--n-null`` ...), with the words of
their help. Which metrics a flag reaches, and its defaults, are not listed anywhere: every metric
being run whose options signature takes the keyword ([`metrics_taking`][tl_geometry.runs.request.metrics_taking]), with its family's
declared value ([`flag_defaults`][tl_geometry.runs.request.flag_defaults])."""

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

Params = Mapping[str, inspect.Parameter] | None


# ---------------------------------------------------------------- what the metrics declare
def option_params(name: str) -> dict[str, inspect.Parameter] | None:
    """The keyword options registered metric ``name`` accepts (None: it takes any ``**options``)."""
    spec = registry.get_metric(name)
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
    params = option_params(metric)
    return params is None or option in params


def takes_option(metric: str, option: str) -> bool:
    """Whether registered metric ``metric`` names keyword option ``option`` (for the built-ins
    that forward ``**options``, in the function they forward to; a plugin's ``**options`` does
    not count: it must not be handed an option it never asked for)."""
    params = option_params(metric)
    return params is not None and option in params


def metrics_taking(option: str, names: Sequence[str] | None = None) -> list[str]:
    """The metrics of ``names`` (default: every registered one) whose signature names ``option``:
    where a report flag goes."""
    return [n for n in (registry.list_metrics() if names is None else names) if takes_option(n, option)]


def report_options(*, fast: bool = False) -> dict[str, dict[str, Any]]:
    """Options per metric as each family declares them (``FamilySpec.report_options`` /
    ``fast_options``): the one source of the defaults of `tg.analyze` and ``tl-geometry report``.
    Our choices, sized so that the SmolLM2-135M report stays within minutes on a 2-core CPU
    (benchmarks/bench_report.py); the functions' own defaults stay the papers' (e.g. ``tg.pga``:
    2048 points, 100 nulls, CCR 1)."""
    out: dict[str, dict[str, Any]] = {}
    for fam in registry.families():
        for metric, opts in (fam.fast_options if fast else fam.report_options).items():
            out[metric] = dict(opts)
    return out


def not_in_default_report() -> dict[str, str]:
    """``{metric: why}``: registered metrics the report runs only when named in ``metrics=`` /
    ``--metrics``, as each family declares them (``FamilySpec.not_in_default_report``; our choice)."""
    return {m: why for fam in registry.families() for m, why in fam.not_in_default_report.items()}


def default_metrics() -> list[str]:
    """The metrics a report runs by default: every registered one except [`not_in_default_report`][tl_geometry.runs.request.not_in_default_report]."""
    left_out = not_in_default_report()
    return [n for n in registry.list_metrics() if n not in left_out]


def flag_defaults(option: str, *, fast: bool = False) -> dict[str, Any]:
    """``{metric: value}``: what each registered metric that takes ``option`` runs with when the
    flag is not given (its family's declaration, else the function's own default)."""
    declared = report_options(fast=fast)
    out = {}
    for name in metrics_taking(option):
        if option in declared.get(name, {}):
            out[name] = declared[name][option]
        else:
            params = option_params(name) or {}
            out[name] = params[option].default if option in params else None
    return out


def flag_help(option: str) -> str:
    """The help text of a report size flag, its defaults read from [`flag_defaults`][tl_geometry.runs.request.flag_defaults]."""
    what = FLAGS.get(option, option)

    def show(d: Mapping[str, Any]) -> str:
        return ", ".join(f"{m} {v}" for m, v in d.items()) or "none"

    return (
        f"{what}, for every metric that takes {option} (default: {show(flag_defaults(option))}; "
        f"--fast: {show(flag_defaults(option, fast=True))})"
    )


# ---------------------------------------------------------------- checks of option values
def _structure(names: Sequence[str], options: Any) -> dict[str, dict[str, Any]]:
    """``options`` as a fresh ``{metric: {option: value}}`` dict: a mapping of mappings, every key a metric being run."""
    if options is not None and not isinstance(options, Mapping):
        raise _checks.ArgumentError(
            f"options must map metric names to option mappings, e.g. {{'pga': {{'n_null': 20}}}}; "
            f"got {_checks.describe(options)}"
        )
    options = dict(options or {})
    unknown_metrics = set(options) - set(names)
    if unknown_metrics:
        raise InputError(f"options given for metrics not being run: {sorted(unknown_metrics)}; running {list(names)}")
    for metric, opts in options.items():
        if not isinstance(opts, Mapping):
            raise InputError(
                f"options for metric {metric!r} must be a mapping of option names to values, got {type(opts).__name__}"
            )
    return {m: dict(o) for m, o in options.items()}


def _check_one(metric: str, key: str, value: Any, params: Params, origin: str, spell: Callable[[str], str]) -> None:
    """One option value of one metric; the error says where it came from (``origin``: "given",
    "flag" or "default") and what is accepted."""
    if params is not None and key not in params:
        accepted = ", ".join(sorted(params)) or "none"
        if origin == "default":
            fam = registry.family_of(metric)
            raise InputError(
                f"the report options of family {getattr(fam, 'name', '?')!r} give metric {metric!r} "
                f"option {key!r}, which it does not take; it accepts: {accepted}"
            )
        close = difflib.get_close_matches(str(key), list(params), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InputError(f"metric {metric!r} has no option {key!r}{hint}; it accepts: {accepted}")
    check = OPTION_CHECKS.get(key)
    problem = check.problem(value) if check else None
    if not problem:
        return
    if origin == "flag":  # a flag is never None: it was given
        raise _checks.ArgumentError(f"{spell(key)} must be {problem.removesuffix(' or None')}, got {value!r}")
    where = "report default " if origin == "default" else ""
    raise _checks.ArgumentError(f"{where}option {key}={value!r} for metric {metric!r} is not valid: expected {problem}")


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
    out = _structure(names, options)
    for metric, opts in out.items():
        params = option_params(metric)
        for key, value in opts.items():
            _check_one(metric, key, value, params, "given", str)
    return out


# ---------------------------------------------------------------- the request
def _frozen(d: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Mapping[str, Any]]:
    return MappingProxyType({k: MappingProxyType(dict(v)) for k, v in d.items()})


@dataclass(frozen=True)
class Request:
    """What to measure and how, checked (see [`build`][tl_geometry.runs.request.build]).

    Attributes:
        metrics: the registry names, in order.
        options: ``{metric: {option: value}}``: exactly the keywords each metric is called with
            (the family's default, the flags, the caller's, ``progress``), every metric listed.
        given: the caller's own options and flags, before the defaults.
        hooks: the hooks every activation/gradient metric reads (None: each metric's own).
        capture: ``"shared"`` or ``"separate"``.
        progress: whether the metrics' own progress bars show.
        fast: whether the defaults are the ``fast_options``.
        skipped: ``{metric: why}``: metrics left out because they cannot be computed from
            cached activations (``tg.analyze(cache=...)``).
        specs, params: each metric's registry entry and options signature (looked up once).
    """

    metrics: tuple[str, ...]
    options: Mapping[str, Mapping[str, Any]]
    given: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    hooks: tuple[str, ...] | None = None
    capture: str = "shared"
    progress: bool = True
    fast: bool = False
    skipped: Mapping[str, str] = field(default_factory=dict)
    specs: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    params: Mapping[str, Params] = field(default_factory=dict, repr=False, compare=False)

    def kwargs(self) -> dict[str, dict[str, Any]]:
        """Fresh ``{metric: keywords}`` to call each metric with: its options, plus ``hooks`` for
        an activation/gradient metric when the request names hooks."""
        out = {}
        for name in self.metrics:
            kw = dict(self.options[name])
            if self.hooks is not None and self.specs[name].needs != "weights":
                kw["hooks"] = list(self.hooks)
            out[name] = kw
        return out


def _replayable(specs: Mapping[str, Any], *, explicit: bool) -> dict[str, str]:
    """``{metric: why}`` for the metrics that cannot be computed from cached activations (they
    need gradients, or run their own forward pass); refused when the caller named them."""
    skipped = {}
    for n, spec in specs.items():
        if spec.needs == "gradients":
            skipped[n] = "needs gradients (a backward pass through the model); a cache holds none"
        elif spec.needs == "activations" and spec.plan is None:
            skipped[n] = "registered without a plan= (it runs its own forward pass)"
    if skipped and explicit:
        raise InputError(
            f"metrics {sorted(skipped)} cannot be computed from cached activations ("
            + "; ".join(f"{k}: {v}" for k, v in skipped.items())
            + "); drop them from metrics=, or run them on the model without cache=/activations="
        )
    return skipped


def build(
    metrics: Any = None,
    options: Any = None,
    *,
    hooks: Any = None,
    capture: Any = "shared",
    progress: Any = True,
    fast: Any = False,
    flags: Mapping[str, Any] | None = None,
    default: Callable[[], list[str]] | None = None,
    has_tokens: bool = True,
    cached: bool = False,
    spell: Callable[[str], str] = str,
) -> Request:
    """Check a request once and return it; nothing here needs a model.

    Args:
        metrics: registry names, or one name as a string (None: ``default()``, else every
            registered metric); a name given twice, an unknown name (listing the valid ones) and
            none at all are refused.
        options: ``{metric: {option: value}}``, over the defaults ([`report_options`][tl_geometry.runs.request.report_options]).
        hooks, capture, progress, fast: as `tg.analyze` takes them.
        flags: ``{option: value}`` (``tl-geometry report``'s size flags; None values: not
            given): each goes to every metric being run that takes the keyword; a flag none of
            them takes is refused.
        default: the metric list when ``metrics`` is None.
        has_tokens: whether tokens were given (metrics that need them are refused otherwise).
        cached: the activations come from a cache: metrics that cannot use one are refused when
            named, else left out (in ``skipped``).
        spell: how the caller spells an argument in a message (``"--n-seqs"`` in the CLI).

    Raises:
        InputError / KeyError / TypeError: naming the bad input and what is accepted.
    """
    _checks.choice(capture, spell("capture"), CAPTURE_MODES)
    progress = _checks.flag(progress, spell("progress"))
    fast = _checks.flag(fast, spell("fast"))
    explicit = metrics is not None
    if metrics is None:
        names = default() if default is not None else registry.list_metrics()
    else:
        if isinstance(metrics, (list, tuple)) and not metrics:
            raise InputError(
                f"no metrics chosen: {spell('metrics')} is empty; pass metrics=None for the default set, "
                "or names from `tl-geometry metrics`"
            )
        names = _checks.names(metrics, spell("metrics"))
    if hooks is not None:
        hooks = tuple(_checks.names(hooks, spell("hooks")))
    specs = {n: registry.get_metric(n) for n in names}  # an unknown name lists the valid ones
    skipped: dict[str, str] = {}
    if cached:
        skipped = _replayable(specs, explicit=explicit)
        names = [n for n in names if n not in skipped]
        specs = {n: specs[n] for n in names}
    if not has_tokens:
        need = [n for n, s in specs.items() if s.needs != "weights"]
        if need:
            raise InputError(f"metrics {need} need tokens; pass tokens=tg.corpus.tokens(model, ...)")
    params = {n: option_params(n) for n in names}
    user = _structure(names, options)
    given = {m: dict(o) for m, o in user.items()}
    merged: dict[str, dict[str, Any]] = {n: {} for n in names}
    origin: dict[tuple[str, str], str] = {}
    for n, opts in report_options(fast=fast).items():
        if n in merged:
            merged[n].update(opts)
            origin.update(((n, k), "default") for k in opts)
    for option, value in (flags or {}).items():
        if value is None:
            continue
        reach = [n for n in names if option in (params[n] or {})]
        if not reach:
            takers = metrics_taking(option) or ["no registered metric"]
            raise InputError(
                f"{spell(option)} applies to {' / '.join(takers)}, none of which is being run "
                f"({spell('metrics')} {' '.join(names)})"
            )
        for n in reach:
            merged[n][option] = value
            origin[n, option] = "flag"
            given.setdefault(n, {})[option] = value
    for n, opts in user.items():
        merged[n].update(opts)
        origin.update(((n, k), "given") for k in opts)
    for n, opts in merged.items():  # each value checked once, the message saying where it came from
        for key, value in opts.items():
            _check_one(n, key, value, params[n], origin[n, key], spell)
        if "progress" not in opts and "progress" in (params[n] or {}):
            opts["progress"] = progress  # its own bar (batches, hooks) under the metrics bar
    return Request(
        metrics=tuple(names),
        options=_frozen(merged),
        given=_frozen(given),
        hooks=hooks,
        capture=capture,
        progress=progress,
        fast=fast,
        skipped=MappingProxyType(skipped),
        specs=MappingProxyType(specs),
        params=MappingProxyType(params),
    )


# ---------------------------------------------------------------- a report's request
@dataclass(frozen=True)
class ReportRequest:
    """A report's request: the [`Request`][tl_geometry.runs.request.Request] plus its text, device and output directory
    (see [`build_report`][tl_geometry.runs.request.build_report])."""

    model: Any
    request: Request
    corpus: Any
    docs: tuple[str, ...] = field(repr=False)
    corpus_encoding: str = "utf-8"
    n_seqs: int = 8
    seq_len: int = 128
    seed: int = 0
    device: str = "cpu"
    max_memory_gb: float | None = None
    ignore_memory_check: bool = False
    out: Path | None = None
    force: bool = False
    force_hint: str = "force=True"
    figures: bool = True

    @property
    def metrics(self) -> list[str]:
        return list(self.request.metrics)

    @property
    def corpus_label(self) -> str:
        """The corpus as provenance records it: a source name, a path, or "custom"."""
        if isinstance(self.corpus, str):
            return self.corpus
        return str(self.corpus) if isinstance(self.corpus, os.PathLike) else "custom"

    def left_out(self) -> dict[str, str]:
        """The metrics a default report leaves out and this one does not run, with why."""
        return {n: why for n, why in not_in_default_report().items() if n not in self.request.metrics}


def _check_device(device: Any) -> None:
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InputError(f"device {device!r} is not a torch device ('cpu', 'cuda', 'cuda:1', 'mps'): {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {device!r}: CUDA is not available on this machine; use device='cpu'")


def _read_corpus(corpus: Any, encoding: str) -> list[str]:
    from tl_geometry.io import corpus as corpus_mod

    if isinstance(corpus, (str, os.PathLike)) and str(corpus) not in corpus_mod.SOURCES and not Path(corpus).is_file():
        path = Path(corpus)
        what = "is a directory" if path.is_dir() else "does not exist"
        raise InputError(
            f"corpus {str(corpus)!r}: no such source, and as a file path it {what}; accepted: "
            f"{', '.join(corpus_mod.SOURCES)} or a path to a text file (UTF-8 unless corpus_encoding / --corpus-encoding says otherwise)"
        )
    # a file's encoding errors too; a large file only as far as a batch reads it (bounded memory)
    docs = corpus_mod.texts(corpus, encoding=encoding, max_chars=corpus_mod.chars_for(0))
    if not any(t.strip() for t in docs):
        raise InputError(f"corpus {corpus if isinstance(corpus, (str, os.PathLike)) else 'given'} holds no text")
    return docs


def build_report(
    model: Any = "smollm2-135m",
    *,
    corpus: Any = "pydoc",
    corpus_encoding: str = "utf-8",
    n_seqs: Any = 8,
    seq_len: Any = 128,
    seed: Any = 0,
    metrics: Any = None,
    options: Any = None,
    flags: Mapping[str, Any] | None = None,
    fast: Any = False,
    progress: Any = True,
    capture: Any = "shared",
    device: Any = "cpu",
    max_memory_gb: Any = None,
    ignore_memory_check: Any = False,
    out: str | os.PathLike | None = None,
    force: bool = False,
    force_hint: str = "force=True",
    figures: bool = True,
    spell: Callable[[str], str] = str,
) -> ReportRequest:
    """Every check of a report's inputs that needs neither the model nor the output directory, once;
    see [`tl_geometry.runs.pipeline.run_report`][tl_geometry.runs.pipeline.run_report] for the arguments (``metrics=None``: the
    [`default_metrics`][tl_geometry.runs.request.default_metrics]). The corpus is read here, once (an iterator is not consumed twice).

    Raises:
        ValueError / TypeError / KeyError: naming the input (as ``spell`` writes it) and what is accepted.
    """
    n_seqs = _checks.integer(n_seqs, spell("n_seqs"), lo=1)
    seq_len = _checks.integer(seq_len, spell("seq_len"), lo=2)
    seed = _checks.seed(seed, spell("seed"))
    req = build(
        metrics,
        options,
        flags=flags,
        fast=fast,
        progress=progress,
        capture=capture,
        default=default_metrics,
        spell=spell,
    )
    if max_memory_gb is not None:  # None: the available RAM
        max_memory_gb = _checks.real(max_memory_gb, spell("max_memory_gb"), lo=0.0, lo_open=True, why="GiB")
    _check_device(device)
    docs = _read_corpus(corpus, corpus_encoding)
    return ReportRequest(
        model=model,
        request=req,
        corpus=corpus,
        docs=tuple(docs),
        corpus_encoding=corpus_encoding,
        n_seqs=n_seqs,
        seq_len=seq_len,
        seed=seed,
        device=device,
        max_memory_gb=max_memory_gb,
        ignore_memory_check=_checks.flag(ignore_memory_check, spell("ignore_memory_check")),
        out=None if out is None else Path(out),
        force=bool(force),
        force_hint=force_hint,
        figures=bool(figures),
    )
