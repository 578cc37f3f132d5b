"""The intrinsic-dimension family, model-facing: ``tg.intrinsic_dimension`` and the registered "intrinsic_dimension".

The intrinsic dimension (ID) of each layer's point cloud is how the representation-geometry
literature profiles the hidden layers of a transformer (Valeriani, Doimo, Cuturello, Laio, Ansuini
& Cazzaniga, "The geometry of hidden representations of large transformer models", NeurIPS 2023:
the ID rises over the first layers, peaks, then falls, and the peak marks where semantic content
is richest). Two estimators, from [`tl_geometry.metrics.intrinsic_dimension`][tl_geometry.metrics.intrinsic_dimension]:

* **TwoNN** (Facco et al. 2017), the paper's estimator: the ratio of each point's second to first
  nearest-neighbour distance is Pareto with exponent d; row ``id.twonn``;
* **GRIDE** (Denti et al. 2022) at neighbour orders (n1, 2·n1), n1 = 1, 2, 4, …: the same
  question asked at a growing length scale (Valeriani et al. choose the scale where the ID is
  stable); rows ``id.gride``, one per hook and scale (extras ``n1``, ``n2``, ``scale``).

What a point is, two ways (``points=``, recorded in every row's extras):

* ``"tokens"`` (default, ours; the token point clouds of Viswanathan et al. 2025, "The geometry of
  tokens in internal representations of large language models"): one seeded sample of at most
  ``max_points`` token positions shared by every hook (BOS and padding dropped), as for PGA, so a
  difference between layers is never a difference of sample. Works on the few hundred sequences
  a report reads.
* ``"sequences"`` (the ``paper`` convention of Valeriani et al. 2023 and Cheng et al. 2024): one
  point per sequence, the mean over its positions (BOS and padding dropped) of the hook's
  activation. Needs many sequences (the papers use thousands): N = the number of sequences.

Token clouds hold repeated tokens: the same token at the same position gives the same embedding
(dropped as a duplicate, counted in ``n_duplicates``), and after the first layers the same token
in different contexts gives near-duplicates, which pull TwoNN's nearest-neighbour ratios towards
1 and its estimate down; GRIDE at larger n1 looks past that scale (the ``id.gride`` rows).
Everything this family owns is in this folder: the figure (``figures.py``), the reading
(``reading.py``), the reproduce check (``checks.py``) and ``tl-geometry id`` (``cli.py``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import torch

from tl_geometry import capture
from tl_geometry.errors import InputError
from tl_geometry.metrics.gride import (
    GRIDE_STDERR_CALIBRATED_N1,
    GRIDE_STDERR_CALIBRATION,
    GRIDE_STDERR_MODES,
    gride_stderr_inflation,
)
from tl_geometry.metrics.id_jackknife import id_jackknife
from tl_geometry.metrics.intrinsic_dimension import (
    DEFAULT_DISCARD_FRACTION,
    DEFAULT_RANGE_MAX,
    DUPLICATES,
    DuplicatePointsWarning,
    gride_scaling,
    one_copy_per_vector,
    twonn,
)
from tl_geometry.metrics.jackknife import group_labels
from tl_geometry.models import processing_name
from tl_geometry.registry import FamilySpec, FigureSpec, MetricPlan, RowSpec, planned_metric, register_family
from tl_geometry.report import GeometryReport
from tl_geometry.runtime.threads import choose as choose_threads

__all__ = ["intrinsic_dimension", "default_hooks", "MIN_POINTS", "POINTS", "SequenceMeans"]

POINTS = ("tokens", "sequences")
"""What a point is: a token position (ours, default) or a sequence's mean over its positions (Valeriani et al. 2023)."""

MIN_POINTS = 32
"""Fewest sampled positions the metric accepts: below this a neighbour ratio is a handful of points
(our choice; the estimators themselves need 3)."""


class SequenceMeans:
    """A capture [`Pass`][tl_geometry.capture.activations.Pass] summing each sequence's valid rows
    per hook (rows stream in (batch, pos) order; ``owners[i]`` is the sequence of the i-th valid row)."""

    def __init__(self, hooks: Sequence[str], owners: Any, n_seqs: int):
        import torch

        self.hooks = list(hooks)
        self.positions = None
        self.owners = owners
        self.n_seqs = n_seqs
        self.sums: dict[str, Any] = {}
        self.seen = dict.fromkeys(self.hooks, 0)
        self.counts = torch.bincount(owners, minlength=n_seqs).to(torch.float64)

    def update(self, hook: str, acts: Any) -> None:
        import torch

        n = acts.shape[0]
        idx = self.owners[self.seen[hook] : self.seen[hook] + n]
        self.seen[hook] += n
        if hook not in self.sums:
            self.sums[hook] = torch.zeros(self.n_seqs, acts.shape[1], dtype=torch.float64)
        self.sums[hook].index_add_(0, idx, acts.to(torch.float64))

    def means(self, hook: str) -> Any:
        """(n_sequences with a valid position, d) float64: each sequence's mean row."""
        keep = self.counts > 0
        return (self.sums[hook][keep] / self.counts[keep, None]).float()


def default_hooks(model: Any) -> list[str]:
    """The embeddings (``blocks.0.hook_resid_pre``) and every block's output (``blocks.{l}.hook_resid_post``):
    n_layers + 1 point clouds, the profile Valeriani et al. draw (input to output)."""
    return ["blocks.0.hook_resid_pre", *capture.resid_hooks(model, "post")]


@planned_metric(
    "intrinsic_dimension",
    needs="activations",
    description="intrinsic dimension per layer: TwoNN and GRIDE at growing scale (Facco 2017; Denti 2022)",
)
def intrinsic_dimension(
    model: Any,
    tokens: Any,
    *,
    hooks: Sequence[str] | None = None,
    points: str = "tokens",
    max_points: int = 2048,
    seed: int = 0,
    discard_fraction: float = DEFAULT_DISCARD_FRACTION,
    range_max: int = DEFAULT_RANGE_MAX,
    n_groups: int = 10,
    batch_size: int = 8,
    progress: bool = True,
    duplicates: str = "drop_all",
    gride_stderr: str = "calibrated",
) -> MetricPlan:
    """Intrinsic dimension of the activations at every hook: TwoNN and GRIDE at n1 = 1, 2, 4, ….

    Called as ``tg.intrinsic_dimension(model, tokens)`` it runs and returns a
    [`GeometryReport`][tl_geometry.report.GeometryReport]; in a report it shares the forward pass
    with the other activation metrics (its plan is ``intrinsic_dimension.plan``).

    Args:
        model: a TransformerLens model (HookedTransformer or TransformerBridge).
        tokens: (batch, pos) token ids.
        hooks: hook names (default [`default_hooks`][tl_geometry.families.intrinsic_dimension.default_hooks]:
            the embeddings and every block's output).
        points: ``"tokens"`` (default, ours: sampled token positions) or ``"sequences"`` (one
            point per sequence, its mean over positions: Valeriani et al.'s convention; needs at
            least [`MIN_POINTS`][tl_geometry.families.intrinsic_dimension.MIN_POINTS] sequences, and
            ``max_points`` does not apply).
        max_points: positions sampled (seeded, shared by every hook); the estimators see these
            points. Our default, 2048, as PGA's; the estimates grow noisier below ~500.
        seed: of the position sample and of TwoNN's bootstrap.
        discard_fraction: TwoNN's largest ratios left out of the fit (the paper's 10 %).
        range_max: GRIDE's largest neighbour order (n2 ≤ range_max).
        n_groups: groups of whole sequences for the standard errors' delete-a-group jackknife
            ([`tl_geometry.metrics.id_jackknife.id_jackknife`][tl_geometry.metrics.id_jackknife.id_jackknife]);
            fewer when there are fewer sequences.
        batch_size: sequences per forward pass.
        progress: progress bars.
        duplicates: what repeated points become
            ([`DUPLICATES`][tl_geometry.metrics.intrinsic_dimension.DUPLICATES]): ``"drop_all"``
            (default: every copy dropped, the estimators' rule) or ``"one_copy"`` (one copy of each
            distinct vector kept). Recorded in every row and in the provenance.
        gride_stderr: ``"calibrated"`` (default, ours): GRIDE's jackknife error times the measured
            inflation [`GRIDE_STDERR_INFLATION`][tl_geometry.metrics.gride.GRIDE_STDERR_INFLATION] at the
            scales of [`GRIDE_STDERR_CALIBRATED_N1`][tl_geometry.metrics.gride.GRIDE_STDERR_CALIBRATED_N1] (n1 = 4);
            ``"jackknife"``: the jackknife alone.

    Rows, per hook: ``id.twonn`` (the paper's fit; extras ``stderr``, ``stderr_method``,
    ``stderr_points``, ``n_groups``,
    ``dimension_mle`` and ``stderr_mle``, ``n_points``, ``n_duplicates``, ``discard_fraction``,
    ``scale``, ``design_effect``, ``seed``) and ``id.gride`` per scale (extras ``n1``, ``n2``,
    ``stderr``, ``stderr_method``, ``stderr_jackknife``, ``stderr_inflation``, ``stderr_calibration``,
    ``scale``, ``n_points``, ``n_used``, ``n_outliers``, ``n_duplicates``, ``seed``). Every row also
    carries ``points``, ``duplicates`` and the model's weight ``processing``.

    Standard errors (``stderr``; our choice): a delete-a-group jackknife over ``n_groups`` groups
    of whole sequences, each replicate the exact estimate without that group, so the error covers
    a fresh sample of text, as PGA's and the spectral metrics' do. The estimators' own errors,
    which treat the points as draws from one cloud (neighbourhood design effect included), are
    ``stderr_points``: on SmolLM2 they are 1.8× (TwoNN) to 2–5× (GRIDE) smaller than the spread
    over samples of text (docs/intrinsic_dimension.md). GRIDE at n1 = 4 (``gride_stderr=
    "calibrated"``): ``stderr`` = ``stderr_jackknife`` × ``stderr_inflation``, the factor measured
    over disjoint text samples and named by ``stderr_calibration``
    ([`GRIDE_STDERR_CALIBRATION`][tl_geometry.metrics.gride.GRIDE_STDERR_CALIBRATION]); at the other
    scales, and with ``gride_stderr="jackknife"``, the factor is 1 and ``stderr_calibration`` is empty.

    Duplicate points (the same token in the same context gives the same embedding) have no
    neighbour ratio: with ``duplicates="drop_all"`` every copy is dropped, with ``"one_copy"`` the
    extra copies only; either way ``n_duplicates`` counts the points dropped (no warning per hook).

    Raises:
        ValueError: bad hooks/tokens, ``max_points`` < [`MIN_POINTS`][tl_geometry.families.intrinsic_dimension.MIN_POINTS],
            fewer valid positions than that, or an error of the estimators.
    """
    capture.check_model(model)
    if points not in POINTS:
        raise InputError(f"points must be one of {POINTS}, got {points!r}")
    if duplicates not in DUPLICATES:
        raise InputError(f"duplicates must be one of {DUPLICATES}, got {duplicates!r}")
    if gride_stderr not in GRIDE_STDERR_MODES:
        raise InputError(f"gride_stderr must be one of {GRIDE_STDERR_MODES}, got {gride_stderr!r}")
    if isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < MIN_POINTS:
        raise InputError(f"max_points must be an integer >= {MIN_POINTS}, got {max_points!r}")
    hooks = capture.validate_hooks(model, list(hooks) if hooks is not None else default_hooks(model))
    processing = processing_name(model)
    if points == "tokens":
        sample: Any = capture.Sample(model, tokens, hooks, max_points=max_points, seed=seed)
        n = int(sample.positions.sum())
        if n < MIN_POINTS:
            raise InputError(
                f"the tokens hold {n} valid positions; the intrinsic dimension needs at least {MIN_POINTS}"
            )
    else:
        tokens = capture.check_tokens(model, tokens)
        owners = capture.valid_mask(model, tokens).nonzero()[:, 0]
        n = int(owners.unique().numel())
        if n < MIN_POINTS:
            raise InputError(
                f"points='sequences' makes one point per sequence: {n} sequences with a valid position, "
                f"the intrinsic dimension needs at least {MIN_POINTS} (pass more sequences, or points='tokens')"
            )
        sample = SequenceMeans(hooks, owners, int(tokens.shape[0]))

    def finish() -> GeometryReport:
        from tqdm.auto import tqdm

        if points == "tokens":
            cap = sample.result()
            acts = cap.acts
            owners = cap.positions[:, 0]
        else:
            acts = {h: sample.means(h) for h in hooks}
            owners = torch.arange(n)
        labels = group_labels(owners, n_groups) if n_groups >= 2 else None
        rows = []
        inflations: dict[str, float] = {}  # n1 → factor at the calibrated scales (provenance)
        for h in tqdm(hooks, desc="intrinsic dimension", disable=not progress, leave=False):
            x, lab, n_copies = acts[h], labels, 0
            if duplicates == "one_copy":  # one copy of each distinct vector (and its group label)
                keep = one_copy_per_vector(x)
                n_copies = int(x.shape[0]) - int(keep.numel())
                x, lab = x[keep], (labels[keep] if labels is not None else None)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DuplicatePointsWarning)  # counted in n_duplicates
                threads = choose_threads()  # chosen per hook: a long report follows the machine's load
                t = twonn(x, discard_fraction=discard_fraction, seed=seed, threads=threads)
                scales = gride_scaling(x, range_max=range_max, seed=seed, threads=threads)
                jk = (
                    id_jackknife(x, lab, discard_fraction=discard_fraction, range_max=range_max, threads=threads)
                    if lab is not None and int(lab.unique().numel()) >= 2
                    else None
                )
            se_twonn = jk.twonn_stderr if jk is not None else math.nan
            se_gride = dict(zip(jk.n1s, jk.gride_stderr)) if jk is not None else {}
            method = jk.method + f" over {jk.n_groups} groups of whole sequences" if jk else "none: fewer than 2 groups"
            rows.append(
                {
                    "metric": "id.twonn",
                    "value": t.dimension,
                    "hook": h,
                    "extras": {
                        "stderr": se_twonn,
                        "stderr_method": method,
                        "stderr_points": t.stderr,
                        "n_groups": jk.n_groups if jk else 0,
                        "dimension_mle": t.dimension_mle,
                        "stderr_mle": t.stderr_mle,
                        "n_points": t.n_points,
                        "n_duplicates": t.n_duplicates + n_copies,
                        "discard_fraction": t.discard_fraction,
                        "scale": t.scale,
                        "design_effect": t.design_effect,
                        "seed": seed,
                        "points": points,
                        "duplicates": duplicates,
                        "processing": processing,
                    },
                }
            )
            for g in scales:
                inflation = gride_stderr_inflation(g.n1, gride_stderr)
                se_jk = se_gride.get(g.n1, math.nan)
                calibrated = gride_stderr == "calibrated" and g.n1 in GRIDE_STDERR_CALIBRATED_N1
                inflated = ""
                if calibrated:
                    inflations[str(g.n1)] = inflation
                    inflated = f"; × {inflation:g} (calibrated: {GRIDE_STDERR_CALIBRATION})"
                rows.append(
                    {
                        "metric": "id.gride",
                        "value": g.dimension,
                        "hook": h,
                        "extras": {
                            "n1": g.n1,
                            "n2": g.n2,
                            "stderr": se_jk * inflation,
                            "stderr_method": method + inflated,
                            "stderr_jackknife": se_jk,
                            "stderr_inflation": inflation,
                            "stderr_calibration": GRIDE_STDERR_CALIBRATION if calibrated else "",
                            "stderr_points": g.stderr,
                            "n_groups": jk.n_groups if jk else 0,
                            "scale": g.scale,
                            "n_points": g.n_points,
                            "n_used": g.n_used,
                            "n_outliers": g.n_outliers,
                            "n_duplicates": g.n_duplicates + n_copies,
                            "seed": seed,
                            "points": points,
                            "duplicates": duplicates,
                            "processing": processing,
                        },
                    }
                )
        return GeometryReport.from_rows(
            rows,
            model=model,
            intrinsic_dimension={
                "points": points,
                "duplicates": duplicates,
                "max_points": max_points if points == "tokens" else None,
                "n_points": n,
                "seed": seed,
                "discard_fraction": discard_fraction,
                "range_max": range_max,
                "estimators": "TwoNN (Facco et al. 2017), GRIDE (Denti et al. 2022)",
                "gride_stderr": gride_stderr,
                "gride_stderr_inflation": inflations,
                "gride_stderr_calibration": GRIDE_STDERR_CALIBRATION if gride_stderr == "calibrated" else "",
            },
        )

    return MetricPlan("intrinsic_dimension", model, tokens, [sample], finish, batch_size=batch_size, progress=progress)


_COMMON = (
    "stderr",
    "stderr_method",
    "stderr_points",
    "n_groups",
    "n_points",
    "n_duplicates",
    "scale",
    "seed",
    "points",
    "duplicates",
    "processing",
)

register_family(
    FamilySpec(
        "intrinsic_dimension",
        title="Intrinsic dimension",
        paper="Facco et al. 2017 (TwoNN); Denti et al. 2022 (GRIDE); Valeriani et al. 2023 (ID profiles)",
        metrics=("intrinsic_dimension",),
        rows=(
            RowSpec(
                "id.twonn",
                per="hook",
                extras=(*_COMMON, "dimension_mle", "stderr_mle", "discard_fraction", "design_effect"),
                description="TwoNN intrinsic dimension of the layer's point cloud (Facco et al. 2017)",
            ),
            RowSpec(
                "id.gride",
                per="hook",
                extras=(
                    *_COMMON,
                    "n1",
                    "n2",
                    "n_used",
                    "n_outliers",
                    "stderr_jackknife",
                    "stderr_inflation",
                    "stderr_calibration",
                ),
                description="GRIDE intrinsic dimension at neighbour orders (n1, 2·n1) (Denti et al. 2022)",
            ),
        ),
        figures=(
            FigureSpec(
                "id_profile",
                "tl_geometry.families.intrinsic_dimension.figures:plot_id_profile",
                caption="Intrinsic dimension by layer: TwoNN (±2 standard errors) and GRIDE at each scale n1; right: GRIDE against its length scale (±2 standard errors).",
                rows=("id.twonn", "id.gride"),
            ),
        ),
        read="tl_geometry.families.intrinsic_dimension.reading:read_id",
        checks="tl_geometry.families.intrinsic_dimension.checks",
        command="tl_geometry.families.intrinsic_dimension.cli",
        report_options={"intrinsic_dimension": {"max_points": 1024}},
        fast_options={"intrinsic_dimension": {"max_points": 512, "range_max": 16}},
        order=35,
    )
)
