"""The main job: ``tl-geometry report`` as a Python function.

model → corpus tokens → every metric (one at a time, the report saved after each so an
interrupted run keeps its partial results, marked) → ``report.json`` + ``report.md`` (+ figures
and ``index.html`` when :mod:`tl_geometry.html` is available) in ``out``.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from tl_geometry.report import GeometryReport, atomic_write_text

logger = logging.getLogger(__name__)

#: Defaults per metric for the report; ``fast=True`` uses the second set. Our choices, sized so
#: that the SmolLM2-135M report stays within minutes on a 2-core CPU (benchmarks/bench_report.py).
#: The functions' own defaults stay the papers' (e.g. ``tg.pga``: 2048 points, 100 nulls): PGA
#: cost grows with points² × nulls × CCR levels × layers, so the report halves points and nulls.
REPORT_OPTIONS: dict[str, dict[str, Any]] = {
    "pga": {"ccr": [0, 1, 5], "n_null": 50, "max_points": 1024},
    "epsilon_activations": {"max_points": 2048},
    "agop": {"n_probes": 16},
    "nfa": {"n_probes": 8},
}
FAST_OPTIONS: dict[str, dict[str, Any]] = {
    "pga": {"ccr": [0, 1, 5], "n_null": 20, "max_points": 512},
    "epsilon_activations": {"max_points": 512},
    "agop": {"n_probes": 4},
    "nfa": {"n_probes": 2},
}

#: Registered metrics the report runs only when named in ``metrics=`` / ``--metrics`` (our choice).
#: NFA: no reading, figure or published language-model value to set it against (the authors
#: check it on their toy model only), its correlations at report-sized probe counts are attenuated
#: by probe noise, and it costs a second AGOP pass at every layer. ``tl-geometry agop --nfa`` runs it.
NOT_IN_DEFAULT_REPORT: dict[str, str] = {
    "nfa": "no reading or figure, no published value to compare with, probe-noise-attenuated at report "
    "probe counts, and a second AGOP pass per layer; run it with --metrics ... nfa or `tl-geometry agop --nfa`",
}


def default_metrics() -> list[str]:
    """The metrics a report runs by default: every registered one except :data:`NOT_IN_DEFAULT_REPORT`."""
    from tl_geometry.registry import list_metrics

    return [n for n in list_metrics() if n not in NOT_IN_DEFAULT_REPORT]


def available_memory_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:  # pragma: no cover
        return None


def check_memory(cfg: Any, *, limit_bytes: int | None = None) -> int:
    """Refuse a model whose estimated peak memory exceeds ``limit_bytes`` (default: available RAM)."""
    from tl_geometry.models import estimate_memory_bytes

    need = estimate_memory_bytes(cfg)
    limit = limit_bytes if limit_bytes is not None else available_memory_bytes()
    if limit is not None and need > limit:
        raise ValueError(
            f"model {getattr(cfg, 'model_name', '?')} needs about {need / 2**30:.1f} GiB "
            f"(estimated from its config) but only {limit / 2**30:.1f} GiB is available; "
            "use a smaller model or a machine with more memory"
        )
    return need


def config_for(name: str) -> Any:
    """The TransformerLens config of a hub model name without loading weights (None if unknown
    here, e.g. offline and not cached; the load itself then reports the problem)."""
    from tl_geometry import hub
    from tl_geometry.models import ZOO, canonical_name, is_path

    if canonical_name(name) in ZOO or is_path(name):
        return None  # the offline zoo is small by construction; a local file is checked by load()
    if not hub.offline() and not hub.reachable(3.0):
        return None  # the hub client would retry for ~25 s: let load() fail fast and say why
    try:
        from transformer_lens.loading_from_pretrained import get_pretrained_model_config

        with hub.quiet():
            return get_pretrained_model_config(name)
    except Exception:  # noqa: BLE001 - any failure means "cannot estimate": let load() explain
        return None


def write_outputs(report: GeometryReport, out: Path, *, figures: bool = True) -> Path:
    """report.json + report.md, and with ``figures`` the PNGs and index.html (:mod:`tl_geometry.html`)."""
    if figures:
        from tl_geometry.html import write_outputs as write_all

        return write_all(report, out, force=True)
    report.to_json(out / "report.json")
    atomic_write_text(out / "report.md", report.to_markdown())
    return out / "report.json"


def run_report(
    model: Any = "smollm2-135m",
    *,
    corpus: Any = "pydoc",
    corpus_encoding: str = "utf-8",
    n_seqs: int = 8,
    seq_len: int = 128,
    seed: int = 0,
    metrics: Sequence[str] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    fast: bool = False,
    out: str | os.PathLike | None = None,
    force: bool = False,
    figures: bool = True,
    device: str = "cpu",
    max_memory_gb: float | None = None,
    progress: bool = True,
) -> GeometryReport:
    """Compute every (or the chosen) registered metric on a model and real text.

    Args:
        model: a name (``"smollm2-135m"`` offline, or any TL name with the hub) or a model.
        corpus, n_seqs, seq_len, seed: the text batch (see :func:`tl_geometry.corpus.tokens`).
        corpus_encoding: the encoding of a text-file corpus (default UTF-8, decoded strictly).
        metrics: registry names (default: :func:`default_metrics`, every registered metric but
            those in :data:`NOT_IN_DEFAULT_REPORT`, recorded in ``provenance["left_out"]``).
        options: per-metric options overriding the report defaults.
        fast: cheaper defaults (fewer null subspaces / probes / points).
        out: directory for report.json / report.md / figures / index.html (None: don't write).
        force: overwrite report files in an existing ``out``.
        max_memory_gb: refuse a named model whose estimated peak memory (from its config, before
            loading) exceeds this (default: the available RAM).

    Returns:
        The merged report. ``provenance["status"]`` is "complete", or "partial" when a metric
        failed (its error is in ``provenance["errors"]``); an interrupted run leaves a report
        marked "interrupted" in ``out`` and re-raises ``KeyboardInterrupt``.
    """
    from tqdm.auto import tqdm

    from tl_geometry import corpus as corpus_mod
    from tl_geometry.analysis import analyze
    from tl_geometry.models import load
    from tl_geometry.registry import get_metric

    names = list(metrics) if metrics is not None else default_metrics()
    for n in names:
        get_metric(n)  # unknown names fail before any work, listing valid ones
    out_dir = None
    if out is not None:
        from tl_geometry.html import check_out_dir

        out_dir = check_out_dir(out, force=force)  # refuse before any long work
        out_dir.mkdir(parents=True, exist_ok=True)
    if isinstance(model, str):
        cfg = config_for(model)
        if cfg is not None:
            check_memory(cfg, limit_bytes=None if max_memory_gb is None else int(max_memory_gb * 2**30))
    t0 = time.perf_counter()
    model = load(model, device=device)
    load_s = time.perf_counter() - t0
    tokens = corpus_mod.tokens(model, corpus, n_seqs=n_seqs, seq_len=seq_len, seed=seed, encoding=corpus_encoding)
    base = FAST_OPTIONS if fast else REPORT_OPTIONS
    prov = {
        "corpus": corpus if isinstance(corpus, str) else "custom",
        "corpus_encoding": corpus_encoding,
        "n_seqs": n_seqs,
        "seq_len": seq_len,
        "seed": seed,
        "fast": fast,
        "load_s": round(load_s, 2),
        "left_out": {n: why for n, why in NOT_IN_DEFAULT_REPORT.items() if n not in names},
    }
    parts: list[GeometryReport] = []
    errors: dict[str, str] = {}

    def current(status: str) -> GeometryReport:
        return GeometryReport.merge(*parts, **prov, status=status, errors=errors, metrics=names)

    try:
        for name in tqdm(names, desc="report", disable=not progress):
            opts = dict(base.get(name, {}))
            opts.update((options or {}).get(name, {}))
            try:
                parts.append(analyze(model, tokens, metrics=[name], options={name: opts} if opts else None, progress=False))
            except Exception as exc:  # keep going: one failing metric must not lose the others
                logger.exception("metric %s failed", name)
                errors[name] = f"{type(exc).__name__}: {exc}"
            if out_dir is not None:
                current("running").to_json(out_dir / "report.json")
    except KeyboardInterrupt:
        if out_dir is not None:
            write_outputs(current("interrupted"), out_dir, figures=False)
        raise
    timings = {}
    for p in parts:
        timings.update(p.provenance.get("timings_s", {}))
    prov["timings_s"] = timings
    prov["total_s"] = round(time.perf_counter() - t0, 2)
    report = current("partial" if errors else "complete")
    if out_dir is not None:
        write_outputs(report, out_dir, figures=figures)
    return report
