"""SAE widths against the host's capacity bound: [`compare`][tl_geometry.families.sae.comparison.compare], the registered ``"sae"`` metric
and its figure ([`plot_sae_widths`][tl_geometry.families.sae.comparison.plot_sae_widths])."""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Sequence
from typing import Any, Literal

from tl_geometry.errors import InputError, InputTypeError
from tl_geometry.families.capacity.hosts import HostEpsilon, find_host, host_epsilon
from tl_geometry.families.sae._lens import SAELensNotInstalledError
from tl_geometry.families.sae.decoder import _check_sae_on_model, _decoder, _sae_hook, decoder_epsilon
from tl_geometry.families.sae.directory import widths
from tl_geometry.families.sae.loading import _load_ref
from tl_geometry.metrics.sae import shared_directions
from tl_geometry.registry import FamilySpec, FigureSpec, RowSpec, register_family, register_metric
from tl_geometry.report import GeometryReport, model_name

logger = logging.getLogger(__name__)

__all__ = ["compare", "sae_metric", "plot_sae_widths", "decoder_table"]


def _host_tied(model_or_name: Any, he: HostEpsilon) -> tuple[bool | None, str]:
    """(tied, where that came from) for a host; (None, "unknown") when nothing says."""
    hit = he.host
    if hit is None and not isinstance(model_or_name, str):
        hit = find_host(model_name(model_or_name))
    if hit is not None:
        return hit.tied, "published table (tie_word_embeddings of the model's HF config)"
    loaded = getattr(model_or_name, "_tl_geometry_tied", None)
    if isinstance(loaded, bool):  # set by tg.models.load from the HF model it built
        return loaded, "the loaded Hugging Face model (tie_word_embeddings)"
    if not isinstance(model_or_name, str):
        try:
            from tl_geometry.families.capacity.weights_reader import find_embedding
            from tl_geometry.models import ZOO, canonical_name, zoo_file

            key = canonical_name(getattr(model_or_name, "_tl_geometry_name", "") or "")
            if key in ZOO:
                return find_embedding(zoo_file(key), matrix="unembed").tied, "checkpoint (no separate output tensor)"
        except Exception as exc:  # the zoo file may be absent: unknown, not an error
            logger.info("could not tell whether the host ties its embeddings: %s", exc)
    return None, "unknown"


def compare(
    model_or_name: Any,
    *,
    releases: str | Sequence[str] | None = None,
    saes: Sequence[Any] | None = None,
    form: str = "full",
    preset: str = "paper",
    d_vocab: int | None = None,
    tied: bool | None = None,
    config: Literal["cache", "hub", "none"] = "cache",
    decoder_stats: bool = True,
) -> GeometryReport:
    """SAE widths against the host model's capacity bound, as a [`GeometryReport`][tl_geometry.report.GeometryReport].

    For a host with embedding ε (measured from a loaded model's W_E, or the paper's published
    value for a name) and width d_model, the capacity bound k = capacity(d_model, ε, form)
    (full form by default) as the paper reports it ([`tl_geometry.capacity_estimate`][tl_geometry.metrics.capacity.capacity_estimate]).
    Per SAE: d_sae, d_sae / k, and the shared ratio (2V + d_sae) / k for an untied host or
    (V + d_sae) / k for a tied one (capacity paper, Eq. 2: embedding and unembedding each take
    V directions unless they are one matrix). A host without a count (boundary or Class 1,
    ε ≥ 0.1) gets NaN ratios with ``verdict="indeterminate"`` and the reason.

    Rows: ``epsilon.W_E`` (extras mean, std, n_vectors, n_dropped, d, model_class,
    epsilon_source), ``capacity.W_E`` (form, epsilon, d), and per SAE ``sae.d_sae``,
    ``sae.capacity_ratio``, ``sae.shared_ratio`` (extras release, sae_id, hook_name,
    width_source, epsilon_source, verdict, ...); for SAE objects given in ``saes`` also
    ``sae.decoder_epsilon``, ``sae.frac_above_host_epsilon`` and ``sae.decoder_capacity`` (the
    capacity estimate at (d_in, decoder ε): how many directions the bound allows at the SAE's own
    packing, extras ``status``, ``reason``, ``d_sae_over_k``).

    Args:
        model_or_name: a TransformerLens model, or a model name in the published ε table
            (``"gemma-2-2b"``, ``"meta-llama/Llama-3.1-8B"``, ``"Gemma-3-1B"``, ...).
        releases: only SAEs of these sae_lens releases.
        saes: extra SAEs: sae_lens SAE objects, directories written by sae_lens, or
            ``"REPO:SAE_ID"`` strings (a Hugging Face repository read from the local cache with
            ``SAE.from_pretrained``); their d_in must equal d_model and their hook must exist on a
            model host.
        form: capacity form (``"full"``, ``"adjusted"``, ``"jl"``, ``"jl_random"``).
        preset: the rule for count vs indeterminate (``"paper"``), recorded in every row.
        d_vocab: override the vocabulary size (default: the model's, or [`D_VOCAB`][tl_geometry.families.sae.directory.D_VOCAB]).
        tied: whether the host ties embedding and unembedding (default: the published table,
            else the zoo checkpoint, else unknown and the shared ratio is NaN).
        config: passed to [`widths`][tl_geometry.families.sae.directory.widths].
        decoder_stats: compute decoder ε rows for SAEs given in ``saes``.

    Raises:
        ValueError: a name without published ε (close names listed), d_in ≠ d_model, SAE hook
            not in the model, unknown release.
        SAELensNotInstalledError: sae_lens missing.
    """
    from tl_geometry.metrics.capacity import FORMS, PRESETS, capacity_estimate

    if preset not in PRESETS:
        raise InputError(f"unknown preset {preset!r}; accepted: {list(PRESETS)}")
    if form not in FORMS:
        raise InputError(f"unknown form {form!r}; expected one of {sorted(FORMS)}")
    if isinstance(model_or_name, (int, float)):
        raise InputTypeError(f"expected a model or a model name, got {type(model_or_name).__name__}")
    he = host_epsilon(model_or_name)
    eps, source = he.epsilon, he.source
    if tied is not None and not isinstance(tied, bool):
        raise InputTypeError(f"tied must be None, True or False, got {tied!r}")
    is_name = isinstance(model_or_name, str)
    d_model = he.d_model
    host_name = (he.published_as or model_or_name) if is_name else model_name(model_or_name)
    if d_vocab is None:
        d_vocab = he.d_vocab
    tied_source = "given"
    if tied is None:
        tied, tied_source = _host_tied(model_or_name, he)
    st = he.stats
    est = capacity_estimate(
        d_model, eps, mean=st.mean if st else None, std=st.std if st else None, preset=preset, form=form
    )
    k = est.k if est.k is not None else float("nan")
    model_class = est.model_class
    rows: list[dict[str, Any]] = [
        {
            "metric": "epsilon.W_E",
            "value": eps,
            "extras": {
                "mean": st.mean if st else None,
                "std": st.std if st else None,
                "n_vectors": st.n_vectors if st else None,
                "n_dropped": st.n_dropped if st else None,
                "d": d_model,
                "model_class": model_class,
                "epsilon_source": source,
                "published_as": he.published_as,
                "matrix": "W_E",
            },
        },
        {
            "metric": "capacity.W_E",
            "value": k,
            "extras": {
                "form": form,
                "preset": preset,
                "epsilon": eps,
                "d": d_model,
                "status": est.status,
                "reason": est.reason,
                "model_class": model_class,
                "log10_k": est.log10_k,
                "epsilon_3sigma": est.epsilon_3sigma,
                "k_3sigma": est.k_3sigma,
            },
        },
    ]

    # SAEs of the directory
    entries: list[dict[str, Any]] = []
    n_unknown: dict[str, int] = {}
    try:
        dir_rows = widths(model_or_name, releases=releases, config=config, d_model=d_model)
    except ValueError as exc:
        if releases is not None or not str(exc).startswith("no SAE for model"):
            raise
        dir_rows = []
    for w in dir_rows:
        if w.d_sae is None:
            n_unknown[w.release] = n_unknown.get(w.release, 0) + 1
            continue
        if w.d_in is not None and w.d_in != d_model:
            logger.info("skipping %s/%s: d_in %s != d_model %s", w.release, w.sae_id, w.d_in, d_model)
            continue
        entries.append(
            {
                "d_sae": w.d_sae,
                "release": w.release,
                "sae_id": w.sae_id,
                "hook_name": w.hook_name,
                "width_source": w.width_source,
                "sae_model": w.model,
            }
        )
    # SAEs given
    for i, s in enumerate(saes or ()):
        label = None
        if isinstance(s, (str, os.PathLike)):
            label = str(s)
            s = _load_ref(label)
        W = _decoder(s)
        if W.shape[1] != d_model:
            raise InputError(f"SAE {label or i} has d_in = {W.shape[1]}, but the host's d_model = {d_model}")
        if not is_name:
            _check_sae_on_model(s, W, model_or_name)
        entry = {
            "d_sae": int(W.shape[0]),
            "release": "local",
            "sae_id": label or f"sae[{i}]",
            "hook_name": _sae_hook(s),
            "width_source": "config",
            "sae_model": None,
        }
        if decoder_stats:
            entry["decoder"] = decoder_epsilon(W, host=eps)
        entries.append(entry)

    common = {
        "epsilon_source": source,
        "epsilon": eps,
        "capacity": k,
        "d_model": d_model,
        "d_vocab": d_vocab,
        "form": form,
        "preset": preset,
        "model_class": model_class,
        "capacity_status": est.status,
        "tied": tied,
        "tied_source": tied_source,
    }
    for e in entries:
        extras = {**common, **{k_: v for k_, v in e.items() if k_ not in ("d_sae", "decoder")}}
        hook = e["hook_name"]
        if not est.is_count:
            ratio = shared = float("nan")
            verdict = shared_verdict = "indeterminate"
            extras["reason"] = est.reason
        else:
            ratio = e["d_sae"] / k
            verdict = "ok" if e["d_sae"] <= k else "exceeds bound"
            if d_vocab is None or tied is None:
                shared = float("nan")
                shared_verdict = "d_vocab unknown" if d_vocab is None else "tied unknown"
            else:
                shared = shared_directions(d_vocab, e["d_sae"], tied=tied) / k
                shared_verdict = "ok" if shared <= 1 else "exceeds bound"
        rows.append({"metric": "sae.d_sae", "value": float(e["d_sae"]), "hook": hook, "extras": dict(extras)})
        rows.append(
            {"metric": "sae.capacity_ratio", "value": ratio, "hook": hook, "extras": {**extras, "verdict": verdict}}
        )
        rows.append(
            {
                "metric": "sae.shared_ratio",
                "value": shared,
                "hook": hook,
                "extras": {
                    **extras,
                    "verdict": shared_verdict,
                    "directions": None
                    if tied is None or d_vocab is None
                    else shared_directions(d_vocab, e["d_sae"], tied=tied),
                },
            }
        )
        de = e.get("decoder")
        if de is not None:
            rows.append(
                {
                    "metric": "sae.decoder_epsilon",
                    "value": de.epsilon,
                    "hook": hook,
                    "extras": {**extras, "mean": de.mean, "std": de.std, "model_class": de.model_class},
                }
            )
            rows.append(
                {
                    "metric": "sae.frac_above_host_epsilon",
                    "value": de.frac_above,
                    "hook": hook,
                    "extras": {**extras, "n_pairs": de.n_pairs, "n_above": de.n_above},
                }
            )
            # the bound at the SAE's own packing: how many directions fit in d_in at the decoder's ε
            dec = capacity_estimate(d_model, de.epsilon, preset=preset, form=form)
            rows.append(
                {
                    "metric": "sae.decoder_capacity",
                    "value": dec.k if dec.is_count else float("nan"),
                    "hook": hook,
                    "extras": {
                        **extras,
                        "decoder_epsilon": de.epsilon,
                        "status": dec.status,
                        "reason": dec.reason,
                        "decoder_class": dec.model_class,
                        "d_sae_over_k": e["d_sae"] / dec.k if dec.is_count else None,
                    },
                }
            )
    prov: dict[str, Any] = {
        "sae_n": len(entries),
        "sae_n_unknown_width": sum(n_unknown.values()),
        "sae_unknown_by_release": n_unknown,
        "capacity_form": form,
        "capacity_preset": preset,
        "epsilon_source": source,
        "sae_lens_version": getattr(sys.modules.get("sae_lens"), "__version__", None),
    }
    if is_name:
        return GeometryReport.from_rows(rows, model=host_name, **prov)
    return GeometryReport.from_rows(rows, model=model_or_name, **prov)


def decoder_table(report: GeometryReport) -> str | None:
    """One line per measured SAE (``--sae``): its decoder ε, that ε's class and the capacity status.

    Reads the ``sae.decoder_epsilon`` / ``sae.decoder_capacity`` / ``sae.frac_above_host_epsilon`` /
    ``sae.d_sae`` rows of [`compare`][tl_geometry.families.sae.comparison.compare]; ``None`` when no SAE was measured. The capacity column is
    k(d_in, ε_decoder) when the decoder's ε is below 0.1 (Class 2) and "indeterminate" otherwise (the
    capacity paper's rule, as for the host's ε), with d_sae / k beside a count.
    """

    def key(r):
        return (r.extras.get("release"), r.extras.get("sae_id"), r.hook)

    eps_rows = report.filter("sae.decoder_epsilon").rows
    if not eps_rows:
        return None
    d_sae = {key(r): r.value for r in report.filter("sae.d_sae").rows}
    cap = {key(r): r for r in report.filter("sae.decoder_capacity").rows}
    above = {key(r): r.value for r in report.filter("sae.frac_above_host_epsilon").rows}
    head = (
        f"{'d_sae':>9} {'decoder ε':>10} {'class':<9} {'capacity at decoder ε':<22} {'d_sae/k':>8} "
        f"{'frac > host ε':>13}  SAE (release / id)"
    )
    lines = ["measured SAEs (decoder ε over all pairs of decoder rows; capacity k(d_in, ε) by the paper's rule):", head]
    for r in eps_rows:
        k = key(r)
        name = f"{k[0]} / {k[1]}" if k[1] not in (None, "", k[0]) else str(k[0])
        c = cap.get(k)
        status = c.extras.get("status") if c is not None else None
        if c is not None and status == "count":
            cap_text, ratio = f"{c.value:,.0f}", c.extras.get("d_sae_over_k")
        else:
            cap_text, ratio = str(status or "indeterminate"), None
        n = d_sae.get(k)
        frac = above.get(k)
        lines.append(
            f"{'?' if n is None else f'{n:,.0f}':>9} {r.value:>10.5f} {str(r.extras.get('model_class')):<9} "
            f"{cap_text:<22} {'—' if ratio is None else f'{ratio:.4g}':>8} "
            f"{'—' if frac is None else f'{frac:.4g}':>13}  {name}"
        )
    return "\n".join(lines)


@register_metric(
    "sae", needs="weights", description="SAE widths (sae_lens) vs the capacity bound; decoder ε of given SAEs"
)
def sae_metric(
    model, tokens=None, *, hooks=None, releases=None, saes=None, form="full", preset="paper", config="cache"
):
    """SAE widths vs the capacity bound ([`compare`][tl_geometry.families.sae.comparison.compare]); only ``sae.*`` rows (ε and capacity
    rows come from the capacity family). Empty, with a log message, when sae_lens is missing."""
    try:
        rep = compare(model, releases=releases, saes=saes, form=form, preset=preset, config=config)
    except SAELensNotInstalledError as exc:
        logger.warning("%s", exc)
        return GeometryReport.from_rows([], model=model, sae_skipped=str(exc))
    return GeometryReport(rows=rep.filter(prefix="sae.").rows, provenance=rep.provenance)


# the family's declaration: its rows, its figure and its reading (plotting, readings and html iterate it)

_SAE_EXTRAS = (
    "epsilon_source",
    "epsilon",
    "capacity",
    "d_model",
    "d_vocab",
    "form",
    "preset",
    "model_class",
    "capacity_status",
    "tied",
    "tied_source",
    "release",
    "sae_id",
    "hook_name",
    "width_source",
    "sae_model",
)
_ANY_SAE = "an SAE for the model (in sae_lens's directory, or given in saes=)"
_GIVEN = "SAE objects given in saes="
register_family(
    FamilySpec(
        "sae",
        title="SAE comparison",
        paper="capacity paper (arXiv 2606.02765) against sae_lens's SAE widths",
        metrics=("sae",),
        rows=tuple(
            RowSpec(name, per="item", extras=_SAE_EXTRAS + more, optional=("reason",), when=when, description=what)
            for name, more, when, what in (
                ("sae.d_sae", (), _ANY_SAE, "the SAE's width (features)"),
                ("sae.capacity_ratio", ("verdict",), _ANY_SAE, "d_sae / k (NaN where k is indeterminate)"),
                (
                    "sae.shared_ratio",
                    ("verdict", "directions"),
                    _ANY_SAE,
                    "(2V + d_sae) / k untied, (V + d_sae) / k tied",
                ),
                ("sae.decoder_epsilon", ("mean", "std"), _GIVEN, "ε of the decoder's rows"),
                (
                    "sae.frac_above_host_epsilon",
                    ("n_pairs", "n_above"),
                    _GIVEN,
                    "share of decoder pairs above the host's ε",
                ),
                (
                    "sae.decoder_capacity",
                    ("decoder_epsilon", "status", "reason", "decoder_class", "d_sae_over_k"),
                    _GIVEN,
                    "the capacity at (d_in, decoder ε)",
                ),
            )
        ),
        figures=(
            FigureSpec(
                "sae_widths",
                "tl_geometry.families.sae.figures:plot_sae_widths",
                "SAE widths vs the capacity bound",
                rows=("sae.d_sae", "capacity.W_E"),
            ),
        ),
        read="tl_geometry.families.sae.reading:read_sae",
        explain="tl_geometry.families.sae.reading:explain_nan",
        note="tl_geometry.families.sae.reading:no_sae_note",
        checks="tl_geometry.families.sae.checks",
        command="tl_geometry.families.sae.cli",
        order=50,
    )
)


def plot_sae_widths(report_or_rows: Any, *, ax=None, path: str | os.PathLike | None = None, title: str | None = None):
    """Figure: SAE widths by release (log scale) against the capacity bound, vocabulary marked.

    Args:
        report_or_rows: a [`compare`][tl_geometry.families.sae.comparison.compare] report, or a list of [`SAEWidth`][tl_geometry.families.sae.directory.SAEWidth] (then no bound
            is drawn).
        ax: a matplotlib Axes to draw on (default: a new figure).
        path: also save the figure there.
        title: figure title (default: the model).

    Returns:
        the matplotlib Figure.
    """
    import matplotlib.pyplot as plt

    from tl_geometry.metrics._capacity_forms import CLASS2_BELOW

    points: dict[str, list[float]] = {}
    bound = d_vocab = tied = None
    reason = ""
    model = None
    if isinstance(report_or_rows, GeometryReport):
        for r in report_or_rows.rows:
            if r.metric == "sae.d_sae":
                points.setdefault(str(r.extras.get("release")), []).append(r.value)
                bound = r.extras.get("capacity", bound)
                d_vocab = r.extras.get("d_vocab", d_vocab)
                tied = r.extras.get("tied", tied)
            elif r.metric == "capacity.W_E":
                bound = r.value
                reason = r.extras.get("reason") or reason
            elif r.metric == "epsilon.W_E" and not reason and r.value >= CLASS2_BELOW:
                reason = f"ε = {r.value:.3g} ≥ {CLASS2_BELOW}"
        model = report_or_rows.provenance.get("model")
    else:
        for w in report_or_rows:
            if w.d_sae:
                points.setdefault(w.release, []).append(float(w.d_sae))
    if not points and bound is None:
        raise InputError("nothing to plot: no SAE widths and no capacity bound")
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(points) + 3), 4.5))
    else:
        fig = ax.figure
    names = sorted(points, key=lambda r: (min(points[r]), r))
    for i, release in enumerate(names):
        ys = sorted(set(points[release]))
        ax.scatter([i] * len(ys), ys, s=18, color="C0", zorder=3)
    ax.set_yscale("log")
    ax.set_xlim(-0.6, max(len(names), 1) - 0.4)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("SAE width d_sae (features)")
    if d_vocab:
        ax.axhline(d_vocab, color="C2", ls="--", lw=1, label=f"vocabulary d_vocab = {int(d_vocab):,}")
    if bound is not None and math.isfinite(bound):
        ax.axhline(bound, color="C3", ls="-", lw=1.5, label=f"capacity k = {bound:.3g}")
        vocab_dirs = None if not d_vocab or tied is None else (1 if tied else 2) * d_vocab
        if vocab_dirs and bound > vocab_dirs:
            what = "V" if tied else "2V"
            ax.axhline(
                bound - vocab_dirs,
                color="C1",
                ls="-.",
                lw=1,
                label=f"k − {what} = {bound - vocab_dirs:.3g} (shared pool, {'tied' if tied else 'untied'})",
            )
    elif bound is not None:
        ax.text(
            0.01,
            0.97,
            "capacity indeterminate (no count: " + (reason[:80] or f"ε ≥ {CLASS2_BELOW}") + ")",
            transform=ax.transAxes,
            va="top",
            fontsize=8,
        )
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best")
    ax.set_title(title or (f"SAE widths vs capacity bound: {model}" if model else "SAE widths by release"))
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
