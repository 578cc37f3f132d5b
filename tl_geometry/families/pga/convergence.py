"""Beyond one model: cross-model convergence, linear probes, PGA trajectories over checkpoints.

* [`pooled`][tl_geometry.families.pga.convergence.pooled] — one vector per text at each hook (mean over tokens or the last token), so
  models with different tokenizers can be compared text by text.
* [`convergence_score`][tl_geometry.families.pga.convergence.convergence_score] — do two models order the distances between the same texts alike?
  Spearman of their pairwise cosine distances in the full space, in each model's top-k readout
  subspace, and in random k-subspaces (z of the readout against the random ones).
* [`linear_probe`][tl_geometry.families.pga.convergence.linear_probe] / [`probe_accuracy`][tl_geometry.families.pga.convergence.probe_accuracy] — held-out accuracy of a logistic regression
  (scikit-learn, optional) from pooled activations to a label per text, per layer.
* [`pga_trajectory`][tl_geometry.families.pga.convergence.pga_trajectory] — [`tl_geometry.pga`][tl_geometry.families.pga.pga] over a list of models or checkpoints → one long
  table with a ``checkpoint`` extra; [`plot_trajectory`][tl_geometry.families.pga.convergence.plot_trajectory] draws z by layer × checkpoint.

Models are touched only through [`tl_geometry.capture`][tl_geometry.capture]. Our choices (the PGA paper gives
no code): pooled representations are centered over texts before distances are taken, as the PGA
score centers hidden states; the random subspaces of the two models are drawn independently.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from tl_geometry import capture
from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError
from tl_geometry.families.pga import pga
from tl_geometry.metrics._spearman import RankedReference, cosine_similarities, make_pairs
from tl_geometry.metrics.pga import haar_bases, readout_basis
from tl_geometry.report import GeometryReport, Row, model_name
from tl_geometry.runtime.threads import choose as choose_threads

logger = logging.getLogger(__name__)

__all__ = [
    "pooled",
    "text_tokens",
    "ConvergenceScore",
    "convergence_score",
    "model_convergence",
    "ProbeResult",
    "linear_probe",
    "probe_accuracy",
    "pga_trajectory",
    "plot_trajectory",
]

POOLINGS = ("mean", "last")


# ----------------------------------------------------------------------------- pooling
def text_tokens(model: Any, texts: Sequence[str], *, max_len: int | None = None) -> tuple[Tensor, Tensor]:
    """Tokenize each text with the model's own tokenizer (BOS prepended), right-pad with 0.

    Returns ``(tokens, attention_mask)``, both (n_texts, max length).
    """
    if isinstance(texts, str) or not texts:
        raise InputError("texts must be a non-empty list of strings")
    max_len = max_len or int(model.cfg.n_ctx)
    rows = [model.to_tokens(t, prepend_bos=True, truncate=True)[0][:max_len].cpu() for t in texts]
    n = max(r.numel() for r in rows)
    tokens = torch.zeros(len(rows), n, dtype=torch.long)
    mask = torch.zeros(len(rows), n, dtype=torch.long)
    for i, r in enumerate(rows):
        tokens[i, : r.numel()], mask[i, : r.numel()] = r, 1
    return tokens, mask


def pooled(
    model: Any,
    tokens: Tensor,
    hooks: Sequence[str],
    *,
    pooling: str = "mean",
    attention_mask: Tensor | None = None,
    batch_size: int = 8,
    progress: bool = False,
) -> dict[str, Float[Tensor, "n_texts d"]]:
    """One vector per sequence at each hook: the mean over its kept tokens, or its last token.

    BOS and padding are dropped ([`tl_geometry.capture.valid_mask`][tl_geometry.capture.hooks.valid_mask]); streamed through
    [`tl_geometry.capture.run`][tl_geometry.capture.activations.run], so memory is (n_texts × d) per hook.

    Raises:
        ValueError: unknown pooling, or a sequence with no token left after dropping BOS/padding.
    """
    if pooling not in POOLINGS:
        raise InputError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    hooks = capture.validate_hooks(model, hooks)
    tokens = capture.check_tokens(model, tokens)
    keep = capture.valid_mask(model, tokens, attention_mask)
    counts = keep.sum(1)
    if bool((counts == 0).any()):
        raise InputError(
            f"sequences {(counts == 0).nonzero().flatten().tolist()} have no tokens after dropping BOS/padding"
        )
    if pooling == "last":
        last = keep.shape[1] - 1 - keep.flip(1).long().argmax(1)
        keep = torch.zeros_like(keep)
        keep[torch.arange(keep.shape[0]), last] = True
    seq = keep.nonzero()[:, 0]
    sums: dict[str, Tensor] = {}
    offset = {h: 0 for h in hooks}

    def consume(h: str, acts: Tensor) -> None:
        ids = seq[offset[h] : offset[h] + acts.shape[0]].to(acts.device)
        offset[h] += acts.shape[0]
        if h not in sums:
            sums[h] = torch.zeros(keep.shape[0], acts.shape[1], dtype=torch.float64, device=acts.device)
        sums[h].index_add_(0, ids, acts.double())

    capture.run(
        model,
        tokens,
        hooks,
        consume,
        batch_size=batch_size,
        attention_mask=attention_mask,
        positions=keep,
        progress=progress,
        desc="pool",
    )
    n = keep.sum(1).to(torch.float64)[:, None]
    return {h: (s.cpu() / n).float() for h, s in sums.items()}


# ----------------------------------------------------------------------------- convergence
@dataclass(frozen=True)
class ConvergenceScore(Tabular):
    """Agreement of two models' distance structures over the same texts.

    Attributes:
        rho_full: Spearman of the pairwise cosine distances in the full spaces.
        rho_readout: the same in each model's top-k readout subspace.
        null_mean, null_std, z: over random k-subspace pairs; z = (rho_readout − mean)/std.
        null_rhos: the random-subspace ρ's.
        n_texts, k: sizes.
    """

    rho_full: float
    rho_readout: float
    null_mean: float
    null_std: float
    z: float
    null_rhos: Float[Tensor, " n_null"]
    n_texts: int
    k: int

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "null_rhos": self.null_rhos.tolist()}


def _centered(X: Tensor, name: str) -> Tensor:
    if not isinstance(X, Tensor) or X.ndim != 2:
        raise InputError(f"{name} must be a 2-D (n_texts, d) tensor")
    if not torch.isfinite(X).all():
        raise InputError(f"{name} contains NaN or inf")
    X = X.double() - X.double().mean(0)
    if float(X.abs().max()) == 0.0:
        raise InputError(f"{name} is constant across texts")
    return X


def convergence_score(
    A: Float[Tensor, "n d_a"],
    B: Float[Tensor, "n d_b"],
    readout_a: Float[Tensor, "d_a k"],
    readout_b: Float[Tensor, "d_b k"],
    *,
    n_null: int = 100,
    seed: int = 0,
) -> ConvergenceScore:
    """Cross-model convergence of pooled representations A, B (rows = the same texts).

    Raises:
        ValueError: fewer than 3 texts, different numbers of texts, readouts not matching or of
            different k, n_null < 2, constant or non-finite inputs, a null std of zero.
    """
    A, B = _centered(A, "A"), _centered(B, "B")
    if A.shape[0] != B.shape[0]:
        raise InputError(f"A and B must have one row per text each, got {A.shape[0]} and {B.shape[0]}")
    if A.shape[0] < 3:
        raise InputError(f"need at least 3 texts, got {A.shape[0]}")
    k = readout_a.shape[1]
    if readout_a.shape[0] != A.shape[1] or readout_b.shape[0] != B.shape[1] or readout_b.shape[1] != k:
        raise InputError(
            f"readouts {tuple(readout_a.shape)}, {tuple(readout_b.shape)} do not match A {tuple(A.shape)}, B {tuple(B.shape)}"
        )
    if n_null < 2:
        raise InputError(f"n_null must be >= 2, got {n_null}")
    pairs = make_pairs(A.shape[0], None, seed)
    rho_full = RankedReference.from_values(cosine_similarities(A, pairs)).spearman(cosine_similarities(B, pairs))

    def rho(Qa: Tensor, Qb: Tensor) -> float:
        ref = RankedReference.from_values(cosine_similarities(A @ Qa.double(), pairs))
        return ref.spearman(cosine_similarities(B @ Qb.double(), pairs))

    rho_read = rho(readout_a, readout_b)
    Qa = haar_bases(A.shape[1], k, n_null, seed=seed)
    Qb = haar_bases(B.shape[1], k, n_null, seed=seed + 1)
    nulls = torch.tensor([rho(Qa[i], Qb[i]) for i in range(n_null)], dtype=torch.float64)
    mean, std = float(nulls.mean()), float(nulls.std())
    if not std > 0:
        raise InputError("the null ρ's have zero (or undefined) standard deviation; z is undefined")
    return ConvergenceScore(rho_full, rho_read, mean, std, (rho_read - mean) / std, nulls, A.shape[0], k)


def model_convergence(
    models: Mapping[str, Any],
    texts: Sequence[str],
    *,
    hooks: Mapping[str, str] | None = None,
    k: int = 100,
    pooling: str | Sequence[str] = ("mean", "last"),
    n_null: int = 100,
    seed: int = 0,
    max_len: int = 128,
) -> GeometryReport:
    """Pairwise convergence of several models on the same texts (each with its own tokenizer).

    ``hooks`` maps a model label to its hook (default: its last ``hook_resid_post``). Rows
    ``convergence.rho_full``, ``convergence.rho_readout``, ``convergence.z`` for every pair of
    models and pooling (extras model_a, model_b, hook_a, hook_b, pooling, k, n_texts). Each
    text is cut to its first ``max_len`` tokens (of each model's own tokenizer).
    """
    if len(models) < 2:
        raise InputError("model_convergence needs at least two models")
    poolings = [pooling] if isinstance(pooling, str) else list(pooling)
    reps: dict[tuple[str, str], Tensor] = {}
    where, readouts = {}, {}
    for name, m in models.items():
        capture.check_model(m)
        where[name] = (hooks or {}).get(name) or capture.resid_hooks(m, "post")[-1]
        readouts[name] = readout_basis(capture.weight(m, "W_U"), k, threads=choose_threads())
        toks, mask = text_tokens(m, texts, max_len=max_len)
        for p in poolings:
            reps[(name, p)] = pooled(m, toks, [where[name]], pooling=p, attention_mask=mask)[where[name]]
    rows = []
    names = list(models)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            for p in poolings:
                s = convergence_score(reps[(a, p)], reps[(b, p)], readouts[a], readouts[b], n_null=n_null, seed=seed)
                ex = {
                    "model_a": a,
                    "model_b": b,
                    "hook_a": where[a],
                    "hook_b": where[b],
                    "pooling": p,
                    "k": k,
                    "n_texts": s.n_texts,
                    "null_mean": s.null_mean,
                    "null_std": s.null_std,
                }
                for metric, v in (("rho_full", s.rho_full), ("rho_readout", s.rho_readout), ("z", s.z)):
                    rows.append({"model": f"{a} vs {b}", "metric": f"convergence.{metric}", "value": v, "extras": ex})
    return GeometryReport.from_rows(
        rows, model=" vs ".join(names), convergence={"k": k, "n_null": n_null, "seed": seed}
    )


# ----------------------------------------------------------------------------- probes
@dataclass(frozen=True)
class ProbeResult(Tabular):
    """Held-out accuracy of a logistic-regression probe; ``chance`` = majority-class rate on the test split."""

    accuracy: float
    chance: float
    n_train: int
    n_test: int
    n_classes: int


def linear_probe(
    X: Tensor, y: Sequence[Any], *, test_size: float = 0.25, seed: int = 0, C: float = 1.0, max_iter: int = 2000
) -> ProbeResult:
    """Fit ``sklearn.linear_model.LogisticRegression`` on a stratified split; return held-out accuracy.

    Our choice: features are standardized on the training split (``StandardScaler``).

    Raises:
        ValueError: fewer than 2 classes, X/y length mismatch, NaN/inf features.
        ImportError: scikit-learn is not installed (an optional dependency).
    """
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    Xn = np.asarray(X.detach().cpu().double() if isinstance(X, Tensor) else X, dtype=np.float64)
    yn = np.asarray(list(y))
    if Xn.ndim != 2 or Xn.shape[0] != yn.shape[0]:
        raise InputError(f"X must be (n, d) with one label per row; got X {Xn.shape}, {yn.shape[0]} labels")
    if not np.isfinite(Xn).all():
        raise InputError("X contains NaN or inf")
    classes, counts = np.unique(yn, return_counts=True)
    if len(classes) < 2:
        raise InputError("labels must contain at least 2 classes")
    strat = yn if counts.min() >= 2 else None
    Xtr, Xte, ytr, yte = train_test_split(Xn, yn, test_size=test_size, random_state=seed, stratify=strat)
    clf = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=max_iter))
    clf.fit(Xtr, ytr)
    _, c = np.unique(yte, return_counts=True)
    return ProbeResult(float(clf.score(Xte, yte)), float(c.max() / len(yte)), len(ytr), len(yte), len(classes))


def probe_accuracy(
    model: Any,
    tokens: Tensor,
    labels: Sequence[Any],
    *,
    hooks: Sequence[str] | None = None,
    pooling: str = "mean",
    attention_mask: Tensor | None = None,
    test_size: float = 0.25,
    seed: int = 0,
) -> GeometryReport:
    """Linear-probe accuracy per hook from pooled activations (one label per sequence of ``tokens``).

    Rows ``probe.accuracy`` per hook (extras chance, n_train, n_test, n_classes, pooling).
    """
    hooks = list(hooks) if hooks is not None else capture.resid_hooks(model, "post")
    if len(labels) != tokens.shape[0]:
        raise InputError(f"need one label per sequence: {len(labels)} labels for {tokens.shape[0]} sequences")
    reps = pooled(model, tokens, hooks, pooling=pooling, attention_mask=attention_mask)
    rows = []
    for h in hooks:
        r = linear_probe(reps[h], labels, test_size=test_size, seed=seed)
        rows.append(
            {"metric": "probe.accuracy", "value": r.accuracy, "hook": h, "extras": {**asdict(r), "pooling": pooling}}
        )
    return GeometryReport.from_rows(rows, model=model)


# ----------------------------------------------------------------------------- trajectories
def pga_trajectory(
    checkpoints: Mapping[str, Any] | Sequence[tuple[str, Any]],
    tokens: Tensor | Callable[[Any], Tensor],
    *,
    results: str | None = None,
    progress: bool = True,
    **pga_options: Any,
) -> GeometryReport:
    """[`tl_geometry.pga`][tl_geometry.families.pga.pga] over models or checkpoints → one table with a ``checkpoint`` extra.

    Args:
        checkpoints: label → model, or label → zero-argument callable returning one (so that only
            one model is in memory at a time), e.g. ``{f"step{s}": lambda s=s:
            HookedTransformer.from_pretrained("pythia-70m", checkpoint_index=s)}``.
        tokens: a token batch, or a callable model → tokens (different tokenizers).
        results: optional JSON-lines path; each finished checkpoint is written at once and
            skipped on a re-run ([`tl_geometry.runtime.jobs`][tl_geometry.runtime.jobs]).
        **pga_options: passed to [`tl_geometry.pga`][tl_geometry.families.pga.pga] (k, n_null, ccr, max_points, seed, hooks).
    """
    from tl_geometry.runtime.jobs import ResultsFile, job_key, run_jobs

    items = list(checkpoints.items()) if isinstance(checkpoints, Mapping) else list(checkpoints)
    if not items:
        raise InputError("no checkpoints given")
    rf = ResultsFile(results) if results else None
    jobs = [{"checkpoint": str(label), **{k: v for k, v in pga_options.items() if k != "hooks"}} for label, _ in items]
    waiting: dict[str, list] = {}  # job key → the (label, model) pairs still to run, in order
    for params, item in zip(jobs, items):
        waiting.setdefault(job_key(params), []).append(item)
    fresh: dict[str, list[GeometryReport]] = {}

    def one(params):
        key = job_key(params)
        label, m = waiting[key].pop(0)
        model = m() if callable(m) and not hasattr(m, "cfg") else m
        toks = tokens(model) if callable(tokens) else tokens
        rep = pga(model, toks, progress=False, **pga_options)
        rows = tuple(
            Row(r.model, r.hook, r.layer, r.metric, r.value, {**r.extras, "checkpoint": str(label)}) for r in rep.rows
        )
        rep = GeometryReport(rows=rows, provenance={**rep.provenance, "model": model_name(model)})
        fresh.setdefault(key, []).append(rep)
        return {"report": rep.to_dict()}

    # the package's one job runner: each finished checkpoint written at once, finished ones skipped
    for _ in run_jobs(jobs, one, rf, retry_errors=True, progress=progress, desc="checkpoints"):
        pass
    done = {r["key"]: r for r in rf.records() if r.get("status") == "ok"} if rf else {}
    reports = []
    for params in jobs:
        key = job_key(params)
        reports.append(fresh[key].pop(0) if fresh.get(key) else GeometryReport.from_dict(done[key]["report"]))
    return GeometryReport.merge(*reports, checkpoints=[str(l) for l, _ in items])


def plot_trajectory(report: GeometryReport, *, ccr: int | None = None, ax=None):
    """Heatmap of PGA z by layer (rows) × checkpoint (columns), diverging around 0.

    ``ccr`` picks one CCR level (default: the smallest present). Returns the matplotlib Figure.
    """
    import numpy as np

    rows = [r for r in report.rows if r.metric == "pga.z" and "checkpoint" in r.extras]
    if not rows:
        raise InputError("report has no pga.z rows with a 'checkpoint' extra; build it with pga_trajectory")
    levels = sorted({int(r.extras.get("ccr", 0)) for r in rows})
    ccr = levels[0] if ccr is None else ccr
    rows = [r for r in rows if int(r.extras.get("ccr", 0)) == ccr]
    if not rows:
        raise InputError(f"no rows with ccr={ccr}; present: {levels}")
    cps = list(dict.fromkeys(r.extras["checkpoint"] for r in rows))
    layers = sorted({r.layer for r in rows if r.layer is not None})
    Z = np.full((len(layers), len(cps)), np.nan)
    for r in rows:
        if r.layer is not None:
            Z[layers.index(r.layer), cps.index(r.extras["checkpoint"])] = r.value
    if ax is None:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(max(4, 0.6 * len(cps) + 2), max(3, 0.22 * len(layers) + 1.5)))
    fig = ax.figure
    lim = float(np.nanmax(np.abs(Z))) or 1.0
    im = ax.imshow(Z, aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim, origin="lower")
    ax.set_xticks(range(len(cps)), cps, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(layers)), layers, fontsize=7)
    ax.set_xlabel("checkpoint")
    ax.set_ylabel("layer")
    ax.set_title(f"Subspace PGA z (CCR-{ccr})")
    fig.colorbar(im, ax=ax, label="z")
    fig.tight_layout()
    return fig
