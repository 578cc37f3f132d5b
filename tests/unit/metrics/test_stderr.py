"""Standard errors of the sampled non-PGA metrics: ε of activations, spectral metrics, AGOP, NFA.

Each jackknife is checked against a slow reference (explicit leave-group-out recomputation) and
for calibration: over independent seeds, the standardized differences (x₁ − x₂)/√(se₁² + se₂²)
of pairs of estimates must have a standard deviation near 1.

The calibration band [0.7, 1.4]: with P independent pairs the sample std of standard normals has a
standard error ≈ 1/√(2P) (0.07 at P = 100, 0.1 at P = 50); a jackknife with G groups estimates se²
with about G − 1 degrees of freedom, so a perfectly calibrated se gives a t-like ratio whose std is
≈ √(ν/(ν − 2)) with ν ≈ 2(G − 1) (1.04 at G = 16, 1.08 at G = 8). Below 0.7 the stderr would be
more than 40 % too large; above 1.4, 30 % too small: what a reading that compares layers must not
hide. A point-level jackknife that ignores the sequences fails the band (tested), which is why the
groups are whole sequences.
"""

from __future__ import annotations

import math

import pytest
import torch

from tests.helpers import make_tiny_model
from tl_geometry import capture
from tl_geometry.errors import InputError
from tl_geometry.families.capacity import figures as capacity_figures  # noqa: E402
from tl_geometry.families.capacity import reading as capacity_reading  # noqa: E402
from tl_geometry.families.interaction import figures as interaction_figures  # noqa: E402
from tl_geometry.families.interaction import reading as interaction_reading  # noqa: E402
from tl_geometry.families.pga import reading as pga_reading  # noqa: E402
from tl_geometry.metrics.capacity import similarity_jackknife, similarity_stats
from tl_geometry.metrics.interaction import (
    AGOPAccumulator,
    leave_group_out,
    nfa_correlation,
    nfa_jackknife,
)
from tl_geometry.metrics.jackknife import group_labels, jackknife_se
from tl_geometry.metrics.spectral import SPECTRAL_FIELDS, StreamingCovariance, spectral_metrics

BAND = (0.7, 1.4)


def _band(metric: str) -> tuple[float, float]:
    """The condition number λ_max/λ_min rests on the extreme, heavy-tailed smallest eigenvalue, where
    the jackknife is known to overstate the error (measured 0.6–0.85 on the tiny transformer): it
    must never understate it (≤ 1.4) but may be conservative down to 0.5."""
    return (0.5, BAND[1]) if metric == "condition_number" else BAND


def _std_of_standardized(values: list[float], stderrs: list[float]) -> float:
    """Std of (x₁ − x₂)/√(se₁² + se₂²) over consecutive independent pairs."""
    v = torch.tensor(values, dtype=torch.float64)
    s = torch.tensor(stderrs, dtype=torch.float64)
    d = (v[0::2] - v[1::2]) / (s[0::2] ** 2 + s[1::2] ** 2).sqrt()
    return float(d.std())


def _clustered(seed: int, n_seq: int = 16, per: int = 32, d: int = 24, rho: float = 0.5, shift: float = 1.5):
    """Gaussian points in sequences: each sequence shares a random offset (correlation rho), a
    power-law covariance and a mean along axis 0 (a non-degenerate mean cosine)."""
    g = torch.Generator().manual_seed(seed)
    scale = torch.arange(1, d + 1, dtype=torch.float64) ** -0.7
    mu = torch.zeros(d, dtype=torch.float64)
    mu[0] = shift
    off = torch.randn(n_seq, 1, d, generator=g, dtype=torch.float64)
    eps = torch.randn(n_seq, per, d, generator=g, dtype=torch.float64)
    x = mu + (math.sqrt(rho) * off + math.sqrt(1 - rho) * eps) * scale
    return x.reshape(-1, d), torch.arange(n_seq).repeat_interleave(per)


# ----------------------------------------------------------------------------- group labels
def test_group_labels_keep_sequences_whole_and_balance_rows():
    owners = torch.tensor([0, 0, 0, 1, 2, 2, 3, 3, 3, 3, 4, 5])
    lab = group_labels(owners, 3)
    assert lab.tolist() == [0, 0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 2]  # owner midpoints 1.5, 3.5, 5, 8, … of 12 rows
    for o in owners.unique():  # one group per owner
        assert lab[owners == o].unique().numel() == 1
    assert group_labels(torch.arange(4).repeat_interleave(5), 20).unique().numel() == 4  # at most one per owner
    # a single owner: contiguous blocks of rows
    assert group_labels(torch.zeros(6, dtype=torch.long), 3).tolist() == [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize(
    "owners, n_groups, match",
    [
        (torch.zeros(2, 2), 3, "1-D id per row"),
        (torch.tensor([1]), 3, "1-D id per row"),
        (torch.arange(5), 1, "n_groups must be an integer >= 2"),
        (torch.arange(5), True, "n_groups must be an integer >= 2"),
    ],
)
def test_group_labels_refuses_bad_input(owners, n_groups, match):
    with pytest.raises(InputError, match=match):
        group_labels(owners, n_groups)


def test_jackknife_se_of_a_mean_is_the_textbook_standard_error():
    x = torch.randn(40, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    reps = torch.stack([(x.sum() - x[i]) / 39 for i in range(40)])[:, None]
    assert float(jackknife_se(reps)[0]) == pytest.approx(float(x.std() / math.sqrt(40)), rel=1e-10)


# ----------------------------------------------------------------------------- ε of activations
def _slow_similarity_jackknife(x: torch.Tensor, labels: torch.Tensor) -> list[float]:
    """Leave each group out, build the full cosine matrix, take μ, σ (population), ε."""
    u = x.double() / x.double().norm(dim=1, keepdim=True)
    reps = []
    for k in labels.unique():
        v = u[labels != k]
        c = v @ v.T
        off = c[~torch.eye(v.shape[0], dtype=torch.bool)]
        mu, sd = float(off.mean()), float(off.std(unbiased=False))
        reps.append([mu, sd, mu + 2 * sd])
    r = torch.tensor(reps, dtype=torch.float64)
    G = r.shape[0]
    return ((G - 1) / G * ((r - r.mean(0)) ** 2).sum(0)).sqrt().tolist()


def test_similarity_jackknife_equals_explicit_leave_group_out():
    x, seq = _clustered(3, n_seq=12, per=10, d=8)
    lab = group_labels(seq, 5)
    st = similarity_stats(x, groups=lab)
    ref = _slow_similarity_jackknife(x, lab)
    assert [st.mean_stderr, st.std_stderr, st.epsilon_stderr] == pytest.approx(ref, rel=1e-9)
    assert st.stderr_method == "jackknife over 5 point groups"
    plain = similarity_stats(x)
    assert (plain.epsilon, plain.mean, plain.std) == pytest.approx((st.epsilon, st.mean, st.std), rel=1e-12)
    assert plain.epsilon_stderr == 0.0 and plain.stderr_method == "exact"


def test_similarity_jackknife_drops_zero_rows_with_their_labels():
    x, seq = _clustered(4, n_seq=6, per=5, d=6)
    lab = group_labels(seq, 3)
    x0 = x.clone()
    x0[[1, 17]] = 0.0
    keep = (x0.norm(dim=1) > 0).nonzero().squeeze(1)
    st = similarity_stats(x0, groups=lab)
    ref = _slow_similarity_jackknife(x0[keep], lab[keep])
    assert st.epsilon_stderr == pytest.approx(ref[2], rel=1e-9) and st.n_dropped == 2


@pytest.mark.parametrize(
    "groups, match",
    [(torch.zeros(5), "one label per row"), (torch.zeros(10), "at least 2 groups")],
)
def test_similarity_groups_refused(groups, match):
    x = torch.randn(10, 4, generator=torch.Generator().manual_seed(0))
    with pytest.raises(InputError, match=match):
        similarity_stats(x, groups=groups)


def test_similarity_jackknife_refuses_a_group_holding_nearly_all_rows():
    u = torch.nn.functional.normalize(torch.randn(5, 3, generator=torch.Generator().manual_seed(0)), dim=1)
    with pytest.raises(InputError, match="fewer than 2 rows left"):
        similarity_jackknife(u, torch.tensor([0, 0, 0, 0, 1]))


def test_epsilon_jackknife_is_calibrated_on_clustered_gaussians(one_thread):
    eps, se = [], []
    for seed in range(120):
        x, seq = _clustered(seed)
        st = similarity_stats(x, groups=group_labels(seq, 20))
        eps.append(st.epsilon)
        se.append(st.epsilon_stderr)
    s = _std_of_standardized(eps, se)
    assert BAND[0] <= s <= BAND[1], s


def test_a_point_level_jackknife_would_understate_the_error(one_thread):
    """Why the groups are whole sequences: interleaved point groups ignore the shared offset."""
    eps, se = [], []
    for seed in range(120):
        x, _ = _clustered(seed, rho=0.8)
        st = similarity_stats(x, groups=torch.arange(x.shape[0]) % 20)
        eps.append(st.epsilon)
        se.append(st.epsilon_stderr)
    assert _std_of_standardized(eps, se) > BAND[1]


# ----------------------------------------------------------------------------- spectral
def test_leave_out_is_the_covariance_of_the_other_rows():
    x, _ = _clustered(5, n_seq=7, per=9, d=6)
    acc = StreamingCovariance([10, 20, 33])
    for start in range(0, x.shape[0], 8):  # batches straddle the group boundaries
        acc.update(x[start : start + 8])
    assert torch.allclose(acc.compute(), torch.cov(x.T), atol=1e-12)
    bounds = [(0, 10), (10, 30), (30, 63)]
    for k, (a, b) in enumerate(bounds):
        rest = torch.cat([x[:a], x[b:]])
        cov, n = acc.leave_out(k)
        assert n == rest.shape[0] and torch.allclose(cov, torch.cov(rest.T), atol=1e-12)


def test_groups_held_as_rows_or_as_moments_agree():
    """A group switches from raw rows to a d × d scatter once that is smaller; same numbers."""
    x, _ = _clustered(6, n_seq=4, per=40, d=4)  # 160 rows of d = 4: groups of 80 rows switch
    acc = StreamingCovariance([80, 80])
    for start in range(0, 160, 7):
        acc.update(x[start : start + 7].float())
    assert acc.groups[0].moments is not None and acc.groups[0].rows == []
    cov, _ = acc.leave_out(0)
    assert torch.allclose(cov, torch.cov(x[80:].float().double().T), atol=1e-9)


def test_spectral_jackknife_equals_explicit_leave_group_out():
    x, seq = _clustered(7, n_seq=10, per=30, d=16)
    lab = group_labels(seq, 5)
    m = spectral_metrics(x, groups=lab)
    reps = []
    for k in lab.unique():
        r = spectral_metrics(x[lab != k])
        reps.append([getattr(r, f) for f in SPECTRAL_FIELDS])
    t = torch.tensor(reps, dtype=torch.float64)
    ref = (4 / 5 * ((t - t.mean(0)) ** 2).sum(0)).sqrt()
    for f, want in zip(SPECTRAL_FIELDS, ref.tolist()):
        assert m.stderr[f] == pytest.approx(want, rel=1e-6), f
    assert m.stderr_method == "jackknife over 5 point groups" and m.n_groups == 5
    plain = spectral_metrics(x)
    assert plain.rankme == pytest.approx(m.rankme, rel=1e-12) and plain.stderr == {}
    # labels need not be sorted: rows are grouped by label
    perm = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(0))
    mp = spectral_metrics(x[perm], groups=lab[perm])
    assert mp.stderr["isotropy"] == pytest.approx(m.stderr["isotropy"], rel=1e-8)


@pytest.mark.parametrize("sizes, match", [([5], ">= 2 positive"), ([3, 0], ">= 2 positive")])
def test_streaming_covariance_refuses_bad_group_sizes(sizes, match):
    with pytest.raises(InputError, match=match):
        StreamingCovariance(sizes)


def test_spectral_metrics_refuses_groups_of_the_wrong_length():
    with pytest.raises(InputError, match="one label per row"):
        spectral_metrics(torch.randn(10, 3), groups=torch.zeros(4))


def test_spectral_jackknife_is_calibrated_on_clustered_gaussians(one_thread):
    vals: dict[str, tuple[list[float], list[float]]] = {f: ([], []) for f in SPECTRAL_FIELDS}
    for seed in range(120):
        x, seq = _clustered(seed)
        m = spectral_metrics(x, groups=group_labels(seq, 10))
        for f in SPECTRAL_FIELDS:
            vals[f][0].append(getattr(m, f))
            vals[f][1].append(m.stderr[f])
    stds = {f: _std_of_standardized(*vals[f]) for f in SPECTRAL_FIELDS}
    assert all(_band(f)[0] <= s <= _band(f)[1] for f, s in stds.items()), stds


# ----------------------------------------------------------------------------- tiny transformer
@pytest.mark.needs_hooked
def test_activation_stderrs_are_calibrated_on_a_tiny_transformer(one_thread):
    """Fresh random token sequences per seed through a tiny random HookedTransformer: ε of the
    activations and the spectral metrics at every resid_post, as the registered metrics group them."""
    model = make_tiny_model()
    hooks = capture.resid_hooks(model, "post")
    vals: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for seed in range(120):
        toks = torch.randint(0, model.cfg.d_vocab, (16, 24), generator=torch.Generator().manual_seed(5000 + seed))
        cap = capture.collect(model, toks, hooks, max_points=256, seed=seed, progress=False)
        owners = cap.positions[:, 0]
        for h in hooks:
            st = similarity_stats(cap.acts[h], groups=group_labels(owners, 20))
            m = spectral_metrics(cap.acts[h], groups=group_labels(owners, 10))
            for name, v, s in [("epsilon", st.epsilon, st.epsilon_stderr)] + [
                (f, getattr(m, f), m.stderr[f]) for f in SPECTRAL_FIELDS
            ]:
                box = vals.setdefault((name, h), ([], []))
                box[0].append(v)
                box[1].append(s)
    stds = {k: round(_std_of_standardized(*v), 3) for k, v in vals.items()}
    assert all(_band(k[0])[0] <= s <= _band(k[0])[1] for k, s in stds.items()), stds


@pytest.mark.needs_hooked
def test_registered_metrics_carry_the_jackknife_of_whole_sequences(tiny_model, one_thread):
    from tl_geometry.families.capacity import epsilon_activations_metric
    from tl_geometry.families.pga import spectral

    toks = torch.randint(0, tiny_model.cfg.d_vocab, (6, 12), generator=torch.Generator().manual_seed(0))
    hook = "blocks.1.hook_resid_post"
    rep = epsilon_activations_metric(tiny_model, toks, hooks=[hook], max_points=40, seed=3, n_groups=4)
    cap = capture.collect(tiny_model, toks, [hook], max_points=40, seed=3, progress=False)
    want = similarity_stats(cap.acts[hook], groups=group_labels(cap.positions[:, 0], 4))
    (row,) = rep.rows
    assert row.extras["stderr"] == pytest.approx(want.epsilon_stderr, rel=1e-9) and want.epsilon_stderr > 0
    assert row.extras["stderr_method"] == "jackknife over 4 point groups"
    assert row.extras["mean_stderr"] == pytest.approx(want.mean_stderr, rel=1e-9)

    srep = spectral(tiny_model, toks, hooks=[hook], n_groups=3, progress=False)
    full = capture.collect(tiny_model, toks, [hook], max_points=None, progress=False)
    sm = spectral_metrics(full.acts[hook], groups=group_labels(full.positions[:, 0], 3))
    for r in srep.rows:
        name = r.metric.split(".", 1)[1]
        assert r.extras["stderr"] == pytest.approx(sm.stderr[name], rel=1e-6), name
        assert r.extras["stderr_method"] == "jackknife over 3 point groups"
    with pytest.raises(InputError, match="n_groups must be an integer >= 2"):
        spectral(tiny_model, toks, hooks=[hook], n_groups=1, progress=False)
    with pytest.raises(InputError, match="n_groups must be an integer >= 2"):
        epsilon_activations_metric(tiny_model, toks, hooks=[hook], n_groups=0)


@pytest.mark.needs_hooked
def test_exact_rows_say_they_are_exact(tiny_model):
    from tl_geometry.families.capacity import capacity_metric, epsilon_metric
    from tl_geometry.families.interaction import depth_width_metric, wtw_aofe_metric

    rows = [
        *epsilon_metric(tiny_model, histogram_rows=0).rows,
        *capacity_metric(tiny_model).rows,
        *wtw_aofe_metric(tiny_model).rows,
        *depth_width_metric(tiny_model).rows,
    ]
    assert rows and all(r.extras["stderr"] == 0.0 and r.extras["stderr_method"] == "exact" for r in rows)


# ----------------------------------------------------------------------------- AGOP / NFA
def test_leave_group_out_matches_an_accumulator_without_that_group():
    g = torch.Generator().manual_seed(0)
    grads = [torch.randn(5, 4, generator=g) for _ in range(7)]
    acc = AGOPAccumulator(7, 3)
    for p, gr in enumerate(grads):
        acc.update("h", p, gr)
    reps = leave_group_out(acc.group_sums("h"), acc.group_counts(), acc.n_positions["h"])
    for k in range(3):
        kept = [gr for p, gr in enumerate(grads) if p % 3 != k]
        want = sum(gr.double().T @ gr.double() for gr in kept) / (len(kept) * 5)
        assert torch.allclose(reps[k], want, atol=1e-5)
    with pytest.raises(InputError, match="sums must be"):
        leave_group_out(acc.group_sums("h")[:1], [7], 5)


def test_nfa_jackknife_equals_explicit_replicates():
    g = torch.Generator().manual_seed(1)
    W = torch.randn(6, 10, generator=g)
    mats = [(lambda a: a @ a.T)(torch.randn(6, 6, generator=g)) for _ in range(4)]
    G = sum(mats) / 4
    c = nfa_jackknife(W, G, mats)
    reps = torch.tensor([[nfa_correlation(W, m).pearson, nfa_correlation(W, m).pearson_sqrt] for m in mats])
    ref = (3 / 4 * ((reps - reps.mean(0)) ** 2).sum(0)).sqrt()
    assert (c.pearson_stderr, c.pearson_sqrt_stderr) == pytest.approx(ref.tolist(), rel=1e-6)
    assert c.pearson == nfa_correlation(W, G).pearson and c.stderr_method == "jackknife over 4 probe groups"
    with pytest.raises(InputError, match="at least 2 leave-group-out"):
        nfa_jackknife(W, G, mats[:1])


@pytest.mark.needs_hooked
def test_nfa_rows_carry_probe_jackknife_and_exact_says_exact(tiny_model, one_thread):
    from tl_geometry.families.interaction import agop, nfa_metric

    toks = torch.randint(0, tiny_model.cfg.d_vocab, (3, 8), generator=torch.Generator().manual_seed(2))
    rep = nfa_metric(tiny_model, toks, layers=[1], n_probes=6, seed=1, progress=False)
    res = agop(
        tiny_model, toks, hooks=["blocks.1.ln2.hook_normalized"], n_probes=6, seed=1, progress=False, keep_groups=True
    )
    assert res.group_replicates is not None and len(res.group_replicates["blocks.1.ln2.hook_normalized"]) == 6
    for r in rep.rows:
        assert r.extras["stderr"] > 0 and r.extras["stderr_method"] == "jackknife over 6 probe groups"
    exact = nfa_metric(tiny_model, toks, layers=[1], exact=True, progress=False)
    assert all(r.extras["stderr"] == 0.0 and r.extras["stderr_method"] == "exact" for r in exact.rows)


@pytest.mark.needs_hooked
def test_agop_stderrs_are_calibrated_over_probe_seeds(tiny_model, one_thread):
    """Probe noise only (the tokens are fixed): AOFE, the reported (bias-corrected) ratio and the
    trace, over 50 independent pairs of probe seeds: the probe part of the error (``stderr_probes``)
    is calibrated; the rows' ``stderr`` adds the text part in quadrature, so it is larger."""
    from tl_geometry.families.interaction import agop, agop_report

    toks = torch.randint(0, tiny_model.cfg.d_vocab, (4, 12), generator=torch.Generator().manual_seed(0))
    vals: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for seed in range(100):
        rep = agop_report(agop(tiny_model, toks, n_probes=16, seed=seed, progress=False))
        for r in rep.rows:
            assert (
                r.extras["stderr_method"]
                == "jackknife over 4 text groups (whole sequences) and 8 probe groups, in quadrature"
            )
            assert r.extras["stderr"] >= r.extras["stderr_probes"] > 0 and r.extras["stderr_text"] > 0
            box = vals.setdefault((r.metric, r.hook), ([], []))
            box[0].append(r.value)
            box[1].append(r.extras["stderr_probes"])
    stds = {k: _std_of_standardized(*v) for k, v in vals.items()}
    assert all(BAND[0] <= s <= BAND[1] for s in stds.values()), stds


# ----------------------------------------------------------------------------- readings and figures
def _layer_rows(metric: str, values: list[float], se: float, method: str = "jackknife over 8 point groups"):
    return [
        {
            "metric": metric,
            "value": v,
            "hook": f"blocks.{i}.hook_resid_post",
            "extras": {"stderr": se, "stderr_method": method, "space": "input"},
        }
        for i, v in enumerate(values)
    ]


def test_readings_claim_a_difference_between_hooks_only_beyond_the_noise():
    from statistics import NormalDist

    from tl_geometry.report import GeometryReport

    vals = [0.30, 0.32, 0.35, 0.31]
    z = NormalDist().inv_cdf(1 - 0.025 / 6)  # Bonferroni over the 6 pairs of 4 hooks
    gap = 0.05
    # just inside / just outside z · √2 · se
    inside, outside = gap / (z * math.sqrt(2)) * 1.01, gap / (z * math.sqrt(2)) * 0.99
    for metric, read in (
        ("epsilon_activations", capacity_reading.read_capacity),
        ("spectral.isotropy", pga_reading.read_spectral),
        ("agop.aofe_ratio", interaction_reading.read_interaction),
    ):
        quiet = " ".join(read(GeometryReport.from_rows(_layer_rows(metric, vals, inside), model="m")))
        assert "no difference between hooks is claimed" in quiet and "6 pairs of hooks" in quiet, quiet
        loud = " ".join(read(GeometryReport.from_rows(_layer_rows(metric, vals, outside), model="m")))
        assert "differ by" in loud and "combined standard errors" in loud and "no difference" not in loud
        assert "jackknife over 8 point groups" in loud
    # the pair tested is any pair, not only the extremes of the values (whose errors may be the
    # largest): blocks.0 = 1.77 ± 0.19 and blocks.2 = 7.06 ± 0.72 differ by 7.1 SE, while the
    # extremes 0.5 ± 5 and 9 ± 5 do not
    rows = _layer_rows("epsilon_activations", [0.5, 1.77, 7.06, 9.0], 0.0)
    for r, se in zip(rows, [5.0, 0.19, 0.72, 5.0], strict=True):
        r["extras"]["stderr"] = se
    text = " ".join(capacity_reading.read_capacity(GeometryReport.from_rows(rows, model="m")))
    assert "no difference" not in text and "differ by 7.1 combined standard errors" in text, text
    assert "layer 2" in text.split("differ by")[0] and "layer 1" in text.split("differ by")[0]
    # exact rows (or rows without a stderr) get no clause
    exact = pga_reading.read_spectral(
        GeometryReport.from_rows(_layer_rows("spectral.isotropy", vals, 0.0, "exact"), model="m")
    )
    assert "standard error" not in " ".join(exact)


def test_class1_count_says_how_many_are_clear_of_the_boundary():
    from tl_geometry.report import GeometryReport

    rows = _layer_rows("epsilon_activations", [0.21, 0.40, 0.05], 0.02)
    text = " ".join(capacity_reading.read_capacity(GeometryReport.from_rows(rows, model="m")))
    assert (
        "2 of 3 hooks are Class 1 (ε > 0.2) (1 of them above 0.2 beyond the noise: normal p, Holm over 3 hooks" in text
    )


def test_epsilon_and_aofe_figures_draw_one_standard_error():
    pytest.importorskip("matplotlib")
    from tl_geometry.report import GeometryReport

    rep = GeometryReport.from_rows(
        _layer_rows("epsilon_activations", [0.3, 0.35, 0.32], 0.01)
        + _layer_rows("agop.aofe_ratio", [0.5, 0.55, 0.6], 0.02, "jackknife over 8 probe groups"),
        model="m",
    )
    fig = capacity_figures.plot_epsilon_by_layer(rep)
    (ax,) = fig.axes
    assert "ε ± 1 standard error" in [t.get_text() for t in ax.get_legend().get_texts()]
    segs = [c for c in ax.collections if hasattr(c, "get_segments") and c.get_segments()]
    lengths = sorted(round(float(s[1][1] - s[0][1]), 6) for c in segs for s in c.get_segments())
    assert lengths == [0.02, 0.02, 0.02]  # ±1 se
    fig2 = interaction_figures.plot_aofe(rep)
    labels = [t.get_text() for t in fig2.axes[0].get_legend().get_texts()]
    assert "± 1 standard error over the probes only (these tokens; none over the text)" in labels
    text_rows = _layer_rows("agop.aofe_ratio", [0.5, 0.55, 0.6], 0.02, "jackknife over 8 text groups …")
    for r in text_rows:
        r["extras"].update(n_text_groups=8, stderr_probes=0.01, stderr_text=0.017)
    fig3 = interaction_figures.plot_aofe(GeometryReport.from_rows(text_rows, model="m"))
    labels = [t.get_text() for t in fig3.axes[0].get_legend().get_texts()]
    assert "± 1 standard error over the text (8 groups of sequences) and the probes" in labels
    import matplotlib.pyplot as plt

    plt.close(fig)
    plt.close(fig2)
    plt.close(fig3)


def test_epsilon_above_one_is_explained_where_it_is_shown():
    pytest.importorskip("matplotlib")
    import torch

    import tl_geometry as tg
    from tl_geometry.report import GeometryReport

    # the explanation's claim on a known case: two tight clusters along orthogonal directions give
    # cosines ≈ 1 within and ≈ 0 across (μ ≈ 0.5, σ ≈ 0.5): ε = μ + 2σ ≈ 1.5 > 1, no cosine above 1
    g = torch.Generator().manual_seed(0)
    u = torch.zeros(2, 16)
    u[0, 0] = u[1, 1] = 1.0
    x = torch.cat([u[0] + 0.01 * torch.randn(50, 16, generator=g), u[1] + 0.01 * torch.randn(50, 16, generator=g)])
    st = tg.similarity_stats(x)
    assert st.epsilon > 1.0 and 0.4 < st.mean < 0.6
    rows = _layer_rows("epsilon_activations", [1.1, 0.4, 0.05], 0.02)
    rep = GeometryReport.from_rows(rows, model="m")
    text = " ".join(capacity_reading.read_capacity(rep))
    assert "ε > 1 at 1 of 3 hooks" in text and "not bounded by 1" in text
    fig = capacity_figures.plot_epsilon_by_layer(rep)
    assert any("ε > 1 at 1 of 3 hooks" in t.get_text() for t in fig.texts)
    below = capacity_figures.plot_epsilon_by_layer(GeometryReport.from_rows(rows[1:], model="m"))
    assert not below.texts  # no caption when no hook is above 1
    import matplotlib.pyplot as plt

    plt.close(fig)
    plt.close(below)


@pytest.mark.parametrize("per, band", [(15, (0.0, 0.5)), (250, (0.65, 1.35))])
def test_condition_number_jackknife_overstates_at_the_marchenko_pastur_edge(per, band):
    """Why the condition number's error is too large (docs/definitions.md, issue 35): with N ≈ 1.9·d
    points λ_min sits at the lower Marchenko–Pastur edge, a non-smooth statistic, and the
    delete-a-group jackknife overstates its spread over fresh draws about threefold; with N ≫ d
    (31·d) the same jackknife is about right. RankMe, a smooth function of the whole spectrum, is
    calibrated at both sizes. Gaussian points, λ_i ∝ 1/i, d = 64, 8 groups; 60 draws per size."""
    g = torch.Generator().manual_seed(1)
    d, G = 64, 8
    scale = (torch.arange(1, d + 1, dtype=torch.float64) ** -1.0).sqrt()
    labels = torch.arange(G).repeat_interleave(per)
    vals: dict[str, list[float]] = {"condition_number": [], "rankme": []}
    ses: dict[str, list[float]] = {"condition_number": [], "rankme": []}
    for _ in range(60):
        m = spectral_metrics(torch.randn(G * per, d, generator=g, dtype=torch.float64) * scale, groups=labels)
        for k in vals:
            vals[k].append(getattr(m, k))
            ses[k].append(m.stderr[k])

    def ratio(k: str) -> float:  # sd over the draws / rms jackknife stderr
        v, s = torch.tensor(vals[k]), torch.tensor(ses[k])
        return float(v.std() / (s**2).mean().sqrt())

    assert band[0] <= ratio("condition_number") <= band[1]
    assert BAND[0] <= ratio("rankme") <= BAND[1]
