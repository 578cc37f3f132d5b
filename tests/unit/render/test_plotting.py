"""Figures and plain-language readings of a GeometryReport, on synthetic reports."""

import logging
import math

import numpy as np
import pytest

import tl_geometry as tg

pytest.importorskip("matplotlib")

from tests.helpers import D_MODEL, N_LAYERS, builtin_sections, epsilon_rows, make_report  # noqa: E402
from tl_geometry.families.capacity import figures as capacity_figures  # noqa: E402
from tl_geometry.families.capacity import reading as capacity_reading  # noqa: E402
from tl_geometry.families.interaction import figures as interaction_figures  # noqa: E402
from tl_geometry.families.interaction import reading as interaction_reading  # noqa: E402
from tl_geometry.families.pga import figures as pga_figures  # noqa: E402
from tl_geometry.families.pga import reading as pga_reading  # noqa: E402
from tl_geometry.families.sae import figures as sae_figures  # noqa: E402
from tl_geometry.render import plotting, readings  # noqa: E402
from tl_geometry.report import GeometryReport  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def full_report():
    return make_report(families="all")  # rows of every built-in family


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


# ----------------------------------------------------------------------------- figures
@pytest.mark.parametrize("name", list(plotting.FIGURES))
def test_every_figure_is_optional(name):
    fn = plotting.FIGURES[name][0]
    assert fn(GeometryReport.from_rows([], model="empty")) is None


def test_figures_present_match_families():
    assert set(plotting.figures(make_report(families=("capacity",)))) == {"cosine_histogram", "capacity_curve"}
    assert set(plotting.figures(make_report(families=("sae",)))) == {"sae_widths"}


def test_save_figures_writes_pngs(tmp_path, full_report):
    paths = plotting.save_figures(full_report, tmp_path, dpi=40)
    assert set(paths) == set(plotting.FIGURES)
    for p in paths.values():
        assert p.parent == tmp_path and p.read_bytes()[:8] == PNG


def test_cosine_histogram_marks_mu_and_epsilon(full_report):
    fig = capacity_figures.plot_cosine_histogram(full_report)
    assert len(fig.axes) == 2
    for ax, mat in zip(fig.axes, ("W_E", "W_U")):
        row = next(r for r in full_report.rows if r.metric == f"epsilon.{mat}")
        xs = {round(float(line.get_xdata()[0]), 9) for line in ax.lines}
        assert round(row.extras["mean"], 9) in xs and round(row.value, 9) in xs
        assert mat in ax.get_title()


def test_pga_one_line_per_ccr_in_layer_order(full_report):
    fig = pga_figures.plot_pga(full_report)
    ax = fig.axes[0]
    labelled = {line.get_label().split()[0]: line for line in ax.lines if line.get_label().startswith("CCR")}
    assert set(labelled) == {"CCR-0", "CCR-1", "CCR-5"}
    # slow reference: sort the rows of CCR 1 by position (embed=-1, final=n_layers) by hand
    pos = {"hook_embed": -1, "ln_final.hook_normalized": N_LAYERS}
    rows = [r for r in full_report.rows if r.metric == "pga.z" and r.extras["ccr"] == 1]
    ref = sorted((pos.get(r.hook, r.layer), r.value) for r in rows)
    line = labelled["CCR-1"]
    np.testing.assert_allclose(line.get_xdata(), [x for x, _ in ref])
    np.testing.assert_allclose(line.get_ydata(), [y for _, y in ref])
    assert [t.get_text() for t in ax.get_xticklabels()][0] == "embed"
    assert [t.get_text() for t in ax.get_xticklabels()][-1] == "final"
    # second panel: PC1 overlap with the k/d reference line
    assert any(abs(float(l.get_ydata()[0]) - 16 / D_MODEL) < 1e-12 for l in fig.axes[1].lines)


def test_spectral_panels_only_for_present_metrics():
    rows = [{"metric": "spectral.rankme", "hook": f"blocks.{l}.hook_resid_post", "value": 1.0 + l} for l in range(3)]
    fig = pga_figures.plot_spectral(GeometryReport.from_rows(rows, model="m"))
    visible = [ax for ax in fig.axes if ax.axison]
    assert len(visible) == 1 and "RankMe" in visible[0].get_title()
    assert len(visible[0].lines) == 1 and visible[0].get_legend() is None


def test_spectral_draws_both_definitions_when_present():
    rows = [
        {"metric": m, "hook": f"blocks.{l}.hook_resid_post", "value": v + l}
        for l in range(3)
        for m, v in (
            ("spectral.rankme", 10.0),
            ("spectral.rankme_eig", 4.0),
            ("spectral.alpha_req", 1.5),
            ("spectral.alpha_req_reptrix", 0.9),
        )
    ]
    fig = pga_figures.plot_spectral(GeometryReport.from_rows(rows, model="m"))
    rank_ax, alpha_ax = [ax for ax in fig.axes if ax.axison]
    assert [list(line.get_ydata()) for line in rank_ax.lines] == [[10.0, 11.0, 12.0], [4.0, 5.0, 6.0]]
    assert [list(line.get_ydata()) for line in alpha_ax.lines] == [[1.5, 2.5, 3.5], [0.9, 1.9, 2.9]]
    assert "reptrix" in " ".join(t.get_text() for t in alpha_ax.get_legend().get_texts())


def test_aofe_title_names_depth_width(full_report):
    fig = interaction_figures.plot_aofe(full_report)
    assert "R_D/W" in fig.axes[0].get_title()
    assert fig.axes[0].get_ylim() == (0, 1.05)


def test_sae_widths_bound_off_chart():
    rows = [
        {"metric": "sae.d_sae", "value": 2048.0, "extras": {"release": "r", "hook_name": "blocks.1.hook_resid_post"}},
        {"metric": "capacity.W_E", "value": 1e40, "extras": {"d": 64, "form": "full", "epsilon": 0.05}},
    ]
    fig = sae_figures.plot_sae_widths(GeometryReport.from_rows(rows, model="m"))
    ax = fig.axes[0]
    assert any("off the chart" in t.get_text() for t in ax.texts)
    assert np.allclose(ax.collections[0].get_offsets()[:, 0], 1.0, atol=0.5)


@pytest.mark.parametrize("eps", [0.5, 0.15])
def test_sae_widths_no_count_outside_class2(eps):
    """A number in a Class-1 or boundary capacity row (an old report) is never drawn as a count."""
    rows = [
        {"metric": "sae.d_sae", "value": 2048.0, "extras": {"release": "r", "hook_name": "blocks.1.hook_resid_post"}},
        {"metric": "capacity.W_E", "value": 3000.0, "extras": {"d": 64, "form": "full", "epsilon": eps}},
    ]
    ax = sae_figures.plot_sae_widths(GeometryReport.from_rows(rows, model="m")).axes[0]
    assert any("indeterminate" in t.get_text() for t in ax.texts)
    assert not any("capacity from" in line.get_label() for line in ax.lines)


def test_broken_figure_is_skipped(monkeypatch, caplog, full_report):
    def boom(report):
        raise RuntimeError("bad rows")

    monkeypatch.setattr(pga_figures, "plot_pga", boom)  # the pga family's figure names it (resolved on each call)
    with caplog.at_level(logging.ERROR, logger="tl_geometry.render.plotting"):
        figs = plotting.figures(full_report)
    assert "pga_z" not in figs and "capacity_curve" in figs
    assert "pga_z failed" in caplog.text


def _slow_log10_capacity(d, eps, C=0.45809143, a=1.0668005, b=1.44738666, c=0.97197234):
    """The full form computed literally with the authors' constants (code/representational_capacity.py;
    small d, ε only: no overflow), without the ceil."""
    k = (d * math.exp((d**c * eps**2 / C) ** (1 / b))) ** (1 / a)
    return math.log10(k)


@pytest.mark.parametrize("d,eps", [(16, 0.1), (64, 0.3), (128, 0.5), (576, 0.2)])
def test_log10_capacity_matches_formula(d, eps):
    assert capacity_figures._log10_capacity(d, np.array([eps]))[0] == pytest.approx(
        _slow_log10_capacity(d, eps), rel=1e-12
    )


def test_log10_capacity_matches_package_capacity():
    from tl_geometry.metrics import capacity as cap

    for d, eps in [(64, 0.3), (576, 0.15)]:
        k = cap.capacity(d, eps, form="full")
        # the package rounds up (ceil); compare in log space
        assert capacity_figures._log10_capacity(d, np.array([eps]))[0] == pytest.approx(
            math.log10(k), abs=1e-6 + math.log10(1 + 1 / k)
        )


def test_capacity_curve_too_wide_for_float_stays_finite():
    big = GeometryReport.from_rows(epsilon_rows(mean=0.85, std=0.05, d=16384), model="huge")
    fig = capacity_figures.plot_capacity_curve(big)
    ys = np.concatenate([line.get_ydata() for line in fig.axes[0].lines])
    assert np.isfinite(ys).all()


def test_capacity_curve_epsilon_at_least_one():
    """ε = μ + 2σ can reach 1; the bound is undefined there: a vertical line, no crash."""
    rep = GeometryReport.from_rows(epsilon_rows(mean=0.9, std=0.06, d=64), model="m")
    fig = capacity_figures.plot_capacity_curve(rep)
    labels = [l.get_label() for l in fig.axes[0].lines]
    assert any("indeterminate" in l for l in labels)
    assert np.isnan(capacity_figures._log10_capacity(64, np.array([1.0, 1.2, 0.0]))).all()


def test_histogram_of_reads_what_the_epsilon_metric_writes():
    counts, edges = capacity_figures.histogram_of({"histogram": {"counts": [1, 2], "edges": [0, 0.5, 1]}})
    np.testing.assert_array_equal(counts, [1, 2])
    np.testing.assert_array_equal(edges, [0, 0.5, 1])


@pytest.mark.parametrize(
    "extras",
    [  # shapes no metric writes
        {"histogram": [[1, 2], [0, 0.5, 1]]},
        {"counts": [1, 2], "edges": [0, 0.5, 1]},
        {"hist_counts": [1, 2], "hist_edges": [0, 0.5, 1]},
    ],
)
def test_histogram_of_ignores_other_shapes(extras):
    assert capacity_figures.histogram_of(extras) is None


def test_histogram_of_rejects_inconsistent(caplog):
    with caplog.at_level(logging.WARNING, logger="tl_geometry.render.plotting"):
        assert capacity_figures.histogram_of({"histogram": {"counts": [1, 2], "edges": [0, 1]}}) is None
    assert "ignoring a histogram" in caplog.text
    assert capacity_figures.histogram_of({"mean": 0.1}) is None


# ----------------------------------------------------------------------------- readings
@pytest.mark.parametrize("eps,cls", [(0.25, "Class 1"), (0.2, "boundary"), (0.1, "boundary"), (0.05, "Class 2")])
def test_epsilon_class(eps, cls):
    assert capacity_reading.epsilon_class(eps) == cls


def test_published_table():
    models = capacity_reading.published_models()
    assert len(models) == 45
    by_name = {m.name: m for m in models}
    assert (by_name["Gemma-3-270M"].d_model, by_name["Gemma-3-270M"].epsilon) == (640, 0.41554)
    assert (by_name["Llama-2-7B"].d_model, by_name["Llama-2-7B"].epsilon) == (4096, 0.0645)


def test_readings_use_the_one_table():
    """The readings' published models are the package's one table (tl_geometry.families.capacity.hosts), in order."""
    from tl_geometry.families.capacity.hosts import published_hosts

    assert capacity_reading.published_models() == list(published_hosts().values())


def test_closest_published_brute_force():
    models = capacity_reading.published_models()
    for eps in np.linspace(0.01, 0.99, 23):
        got = capacity_reading.closest_published(float(eps), models)
        same = [
            m for m in models if capacity_reading.epsilon_class(m.epsilon) == capacity_reading.epsilon_class(float(eps))
        ] or models
        best = min(abs(m.epsilon - eps) for m in same)
        assert abs(got.epsilon - eps) == best


def test_capacity_reading_names_class_and_published_model():
    rows = epsilon_rows(mean=0.45 - 2 * 0.0, std=0.0)  # ε = 0.45 for W_E
    text = " ".join(capacity_reading.read_capacity(GeometryReport.from_rows(rows, model="m")))
    assert "ε = 0.45" in text and "Class 1" in text and "Gemma-3-270M (0.416" in text


def test_sections_are_optional():
    assert readings.sections(GeometryReport.from_rows([], model="m")) == {}
    assert list(readings.sections(make_report(families=("sae",)))) == ["SAE comparison"]
    assert list(readings.sections(make_report(families="all"))) == builtin_sections()
    assert len(builtin_sections()) >= 6


def _zrows(values, ses, n_null=50, ccr=0):
    return [
        {
            "metric": "pga.z",
            "value": z,
            "hook": f"blocks.{i}.hook_resid_post",
            "extras": {"ccr": ccr, "n_null": n_null, "stderr": se},
        }
        for i, (z, se) in enumerate(zip(values, ses, strict=True))
    ]


def test_pga_reading_calls_only_significant_hooks():
    # 12 ± 1: positive; 1.73 ± 0.3: inside the chance band (never a peak); −8 ± 1: negative;
    # −4 ± 2.5: significant against random subspaces but within 2 stderr of 0, so inside.
    rep = GeometryReport.from_rows(_zrows([12.0, 1.73, -8.0, -4.0], [1.0, 0.3, 1.0, 2.5]), model="m")
    line = next(s for s in pga_reading.read_pga(rep) if s.startswith("PGA CCR-0"))
    assert "significantly positive at 1 of 4 hooks, peak z = 12 ± 1" in line
    assert "significantly negative at 1 of 4 hooks (lowest z = -8 ± 1" in line
    assert "1.73" not in line
    calls = [c for _, c, _ in pga_reading.pga_calls(rep.rows)[0]]
    assert calls == ["positive", "inconclusive", "negative", "inconclusive"]


def test_pga_reading_never_calls_chance_a_peak():
    rep = GeometryReport.from_rows(_zrows([1.73, 0.4, -1.1], [0.2, 0.2, 0.2]), model="m")
    text = " ".join(pga_reading.read_pga(rep))
    assert (
        "no hook is significantly positive (the largest, z = 1.73 ± 0.2 at layer 0, lies inside the chance band)"
        in text
    )
    assert "no hook is significantly negative" in text and "peak z" not in text.split("Paper:")[0]
    assert "Holm" in text and "n_null = 50" in text


def test_pga_reading_with_undefined_z_says_so():
    nan = float("nan")
    # a hook whose z is undefined (NaN) is never the "largest"; no finite z at all is said, not raised
    some = GeometryReport.from_rows(_zrows([nan, 1.2, 0.4], [nan, 0.2, 0.2]), model="m")
    line = next(s for s in pga_reading.read_pga(some) if s.startswith("PGA CCR-0"))
    assert "the largest, z = 1.2 ± 0.2 at layer 1" in line
    none = GeometryReport.from_rows(_zrows([nan, nan], [nan, nan]), model="m")
    line = next(s for s in pga_reading.read_pga(none) if s.startswith("PGA CCR-0"))
    assert line.startswith("PGA CCR-0: no finite z at any of 2 hooks")


def test_pga_reading_of_reports_without_stderr_uses_the_chance_band_alone():
    bare = GeometryReport.from_rows(_zrows([30.0, 0.5], [float("nan"), float("nan")]), model="m")
    assert [c for _, c, _ in pga_reading.pga_calls(bare.rows)[0]] == ["positive", "inconclusive"]


def test_plot_pga_draws_error_bars_and_the_chance_band():
    fig = pga_figures.plot_pga(GeometryReport.from_rows(_zrows([12.0, 1.73, -8.0], [1.0, 0.3, 1.0]), model="m"))
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(lab.startswith("chance band: random subspace, 95 %") for lab in labels)
    assert any("±2 stderr" in lab for lab in labels)
    assert ax.containers  # the error bars


def test_depth_width_reading():
    rows = [
        {"metric": "depth_width.ratio", "value": 30 / 576, "extras": {"in_interval": False, "interval": [0.023, 0.047]}}
    ]
    (line,) = interaction_reading.read_interaction(GeometryReport.from_rows(rows, model="m"))
    assert "0.0521" in line and "above" in line


def test_summary_table(full_report):
    table = readings.summary_table(full_report)
    lines = table.splitlines()
    assert len(lines) == 2 + len(full_report.metrics)
    z = [r.value for r in full_report.rows if r.metric == "pga.z"]
    assert next(l for l in lines if l.startswith("pga.z ")).split()[1] == str(len(z))
    assert readings.summary_table(GeometryReport()) == "(empty report)"


def test_closest_width_brute_force():
    models = capacity_reading.published_models()
    for eps, d in [(0.73, 576), (0.05, 4096), (0.3, 2048), (0.15, 900)]:
        got = capacity_reading.closest_width(eps, d, models)
        same = [
            m for m in models if capacity_reading.epsilon_class(m.epsilon) == capacity_reading.epsilon_class(eps)
        ] or models
        assert abs(math.log(got.d_model / d)) == min(abs(math.log(m.d_model / d)) for m in same)


def test_reading_smollm2_like_example():
    """The issue's example: ε = 0.73 at d = 576 reads "Class 1, like Gemma-3-270M (0.416)"."""
    rows = [
        {"metric": "epsilon.W_E", "value": 0.729, "extras": {"mean": 0.442, "std": 0.1435, "d": 576}},
        {"metric": "capacity.W_E", "value": 6.5e34, "extras": {"form": "full", "epsilon": 0.729, "d": 576}},
    ]
    text = " ".join(capacity_reading.read_capacity(GeometryReport.from_rows(rows, model="m")))
    assert "ε = 0.729" in text and "Class 1, like Gemma-3-270M (0.416, d = 640)" in text
    assert "capacity indeterminate, not a count" in text and "6.5" not in text  # the number is not read out
    assert 'preset "paper"' in text


def test_reading_compares_only_raw_w_e_with_the_table():
    """SmolLM2 is tied: W_E ε 0.729 (raw) is the paper's number; the processed W_U's 0.23 is not compared."""
    rows = [
        {"metric": "epsilon.W_E", "value": 0.729, "extras": {"mean": 0.442, "std": 0.1435, "d": 576, "raw": True}},
        {
            "metric": "epsilon.W_U",
            "value": 0.23,
            "extras": {
                "mean": 0.03,
                "std": 0.1,
                "d": 576,
                "raw": False,
                "raw_why": "fold_ln and center_unembed changed W_U",
            },
        },
    ]
    lines = capacity_reading.read_capacity(GeometryReport.from_rows(rows, model="m"))
    we = next(t for t in lines if t.startswith("W_E"))
    wu = next(t for t in lines if t.startswith("W_U"))
    assert "raw W_E, the paper's matrix" in we and "capacity paper" in we
    assert "GPT-OSS" not in wu and "like" not in wu and "not compared" in wu and "fold_ln" in wu


def test_reading_count_says_preset_and_three_sigma():
    k = tg.capacity(4096, 0.0645)
    rows = [
        {"metric": "epsilon.W_E", "value": 0.0645, "extras": {"d": 4096, "raw": True}},
        {
            "metric": "capacity.W_E",
            "value": k,
            "extras": {
                "form": "full",
                "preset": "paper",
                "epsilon": 0.0645,
                "d": 4096,
                "status": "count",
                "reason": "",
                "k_3sigma": 1.0e9,
            },
        },
    ]
    text = " ".join(capacity_reading.read_capacity(GeometryReport.from_rows(rows, model="m")))
    assert "capacity k ≈ 3.99e+07" in text and 'preset "paper"' in text and "μ + 3σ" in text


@pytest.mark.parametrize(
    "row,layer",
    [
        ({"metric": "sae.d_sae", "value": 1.0, "hook": "blocks.3.hook_resid_post"}, 3),
        ({"metric": "sae.d_sae", "value": 1.0, "extras": {"hook_name": "blocks.7.hook_resid_post"}}, 7),
        ({"metric": "sae.d_sae", "value": 1.0, "extras": {"sae_id": "layer_12/width_16k/canonical"}}, 12),
        ({"metric": "sae.d_sae", "value": 1.0, "extras": {"sae_id": "blocks.4.hook_resid_pre"}}, 4),
    ],
)
def test_sae_layer_sources(row, layer):
    (r,) = GeometryReport.from_rows([row], model="m").rows
    assert sae_figures._sae_layer(r) == layer


def test_sae_layer_unknown_is_nan():
    (r,) = GeometryReport.from_rows(
        [{"metric": "sae.d_sae", "value": 1.0, "extras": {"sae_id": "final"}}], model="m"
    ).rows
    assert math.isnan(sae_figures._sae_layer(r))


def test_model_line():
    rep = GeometryReport.from_rows(
        [{"metric": "shape.d_vocab", "value": 49152.0}],
        model="m",
        provenance={
            "n_layers": 30,
            "d_model": 576,
            "tokens_shape": [4, 64],
            "corpus": "pydoc",
            "total_s": 61.2,
            "weight_processing": {"fold_ln": True, "center_unembed": False},
        },
    )
    assert readings.model_line(rep) == (
        "30 layers, d_model 576, vocabulary 49,152; 4 × 64 tokens of pydoc; computed in 61 s; weights processed with fold_ln."
    )
    assert readings.model_line(GeometryReport()) == ""


def test_summary_table_has_a_stderr_column():
    rows = _zrows([3.0, 1.0, -2.0], [0.5, 0.4, 0.7]) + [
        {"metric": "epsilon.W_E", "value": 0.3, "extras": {"stderr": 0.0, "stderr_method": "exact"}},
        {"metric": "depth_width.ratio", "value": 0.05, "extras": {}},
    ]
    table = readings.summary_table(GeometryReport.from_rows(rows, model="m"), width=0)
    line = {ln.split()[0]: ln.split() for ln in table.splitlines()[2:] if ln.strip()}
    assert table.splitlines()[0].split()[-1] == "stderr"
    assert line["pga.z"][-1] == "~0.5" and line["epsilon.W_E"][-1] == "exact" and line["depth_width.ratio"][-1] == "—"


def test_every_figure_whose_rows_carry_a_stderr_draws_it():
    """Spectral rows carry a stderr (jackknife): the figure draws ±2 of it at every point, and
    says so; exact rows get no bars. The ID figure's caption states the ±2 its legend draws."""
    from matplotlib.container import ErrorbarContainer

    from tl_geometry.report import GeometryReport

    def rows(se):
        return [
            {
                "metric": "spectral.rankme",
                "value": 10.0 + i,
                "hook": f"blocks.{i}.hook_resid_post",
                "extras": {"stderr": se, "stderr_method": "jackknife"},
            }
            for i in range(4)
        ]

    fig = pga_figures.plot_spectral(GeometryReport.from_rows(rows(0.5), model="m", n_layers=4))
    bars = [c for ax in fig.axes for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 1
    segs = bars[0].lines[2][0].get_segments()
    assert len(segs) == 4 and all(abs((s[1][1] - s[0][1]) - 2 * 2 * 0.5) < 1e-9 for s in segs)  # ±2 se
    assert "±2 stderr" in fig._suptitle.get_text()
    fig = pga_figures.plot_spectral(GeometryReport.from_rows(rows(0.0), model="m", n_layers=4))
    assert not [c for ax in fig.axes for c in ax.containers if isinstance(c, ErrorbarContainer)]
    spec = next(f for f in tg.get_family("intrinsic_dimension").figures if f.name == "id_profile")
    assert "±2 standard errors" in spec.caption and "±1" not in spec.caption
