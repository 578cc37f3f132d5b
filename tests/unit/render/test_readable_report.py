"""The report reads as it should (issue 20, part 4): figure axes match the readings and the row
tables, every matrix and rank is named for what it is, an SAE section without SAEs says why,
nan is explained in the terminal summaries, and provenance shows values, not Python reprs."""

import math
import re

import pytest
import torch

pytest.importorskip("matplotlib")

from tests.helpers import D_MODEL, make_report  # noqa: E402
from tl_geometry import registry  # noqa: E402
from tl_geometry.families.capacity import figures as capacity_figures  # noqa: E402
from tl_geometry.families.interaction import figures as interaction_figures  # noqa: E402
from tl_geometry.families.interaction import reading as interaction_reading  # noqa: E402
from tl_geometry.families.pga import figures as pga_figures  # noqa: E402
from tl_geometry.families.pga import reading as pga_reading  # noqa: E402
from tl_geometry.families.sae import reading as sae_reading  # noqa: E402
from tl_geometry.render import plotting, readings  # noqa: E402
from tl_geometry.render.html import render_html, render_markdown  # noqa: E402
from tl_geometry.report import GeometryReport, Row, format_value, provenance_markdown  # noqa: E402

N = 4  # layers of the synthetic AGOP report


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def agop_report(hooks=None, **prov) -> GeometryReport:
    """AOFE rows where the "agop" metric takes them by default: blocks.L.hook_resid_pre, L = 0 … N − 1."""
    hooks = hooks or [f"blocks.{l}.hook_resid_pre" for l in range(N)]
    rows = [
        {
            "metric": "agop.aofe_ratio",
            "hook": h,
            "value": 0.7 - 0.1 * i,
            "extras": {"stderr": 0.01, "space": "input", "estimator": "jackknife"},
        }
        for i, h in enumerate(hooks)
    ]
    return GeometryReport.from_rows(rows, model="m", provenance={"model": "m", "n_layers": N, **prov})


def _ticks(ax) -> list[str]:
    return [t.get_text() for t in ax.get_xticklabels()]


# ----------------------------------------------------------------------------- AOFE axis
def test_aofe_figure_has_no_final_point_and_does_not_promise_one():
    fig = interaction_figures.plot_aofe(agop_report())
    ax = fig.axes[0]
    ticks = _ticks(ax)
    assert "embed" in ticks and "final" not in ticks
    xs = sorted(float(x) for line in ax.lines for x in line.get_xdata())
    assert xs == [-1.0, 0.0, 1.0, 2.0]  # blocks.L.hook_resid_pre at L - 1
    label = ax.get_xlabel()
    assert "final =" not in label and "embed = embeddings" in label and "no final point" in label


def test_aofe_reading_names_only_points_the_figure_has():
    rep = agop_report()
    ticks = set(_ticks(interaction_figures.plot_aofe(rep).axes[0]))
    lines = interaction_reading.read_interaction(rep)
    text = " ".join(lines)
    # every place the reading names is a tick of the figure: "embed" or "layer L"
    places = re.findall(r"\((embed|final|layer \d+), blocks\.\d+\.hook_resid_pre\)", text)
    assert places, text
    for p in places:
        assert p.removeprefix("layer ") in ticks
    assert "(embed, blocks.0.hook_resid_pre)" in text  # the highest value, at the embeddings
    assert "(layer 2, blocks.3.hook_resid_pre)" in text  # the lowest, at the last block's input
    assert "layer 0, blocks.0" not in text and "layer 3" not in text  # the block index is not the place
    assert any("no final point" in s for s in lines)


def test_row_tables_use_the_figure_axis():
    rep = agop_report()
    md = render_markdown(rep)
    assert "| m | blocks.0.hook_resid_pre | embed | agop.aofe_ratio |" in md
    assert "| m | blocks.3.hook_resid_pre | 2 | agop.aofe_ratio |" in md
    html = render_html(rep, {})
    assert "<td>blocks.0.hook_resid_pre</td><td>embed</td>" in html
    assert "<td>blocks.3.hook_resid_pre</td><td>2</td>" in html
    assert "blocks.L+1.hook_resid_pre" in md  # the column is explained


@pytest.mark.parametrize(
    "hook, layer, label",
    [
        ("hook_embed", None, "embed"),
        ("blocks.0.hook_resid_pre", 0, "embed, blocks.0.hook_resid_pre"),
        ("blocks.3.hook_resid_pre", 3, "layer 2, blocks.3.hook_resid_pre"),
        ("blocks.3.hook_resid_post", 3, "layer 3"),
        ("ln_final.hook_normalized", None, "final"),
        ("unembed.hook_in", None, "final"),
        (None, None, "model"),
    ],
)
def test_hook_label_is_the_figure_tick(hook, layer, label):
    row = Row(model="m", hook=hook, layer=layer, metric="x", value=0.0)
    assert readings.hook_label(row, 5) == label
    tick = readings.axis_label(row, 5)
    assert label.split(",")[0].removeprefix("layer ") == (tick or "model")


def test_axis_label_explains_only_the_ticks_present():
    full = make_report()  # hook_embed … ln_final.hook_normalized
    for name in ("pga_z", "spectral", "epsilon_by_layer"):
        fig = plotting.FIGURES[name][0](full)
        for ax in fig.axes:
            ticks = _ticks(ax)
            if not ticks or not ax.lines:
                continue
            assert ("final" in ticks) == ("final =" in ax.get_xlabel()), (name, ticks, ax.get_xlabel())
            assert ("embed" in ticks) == ("embed =" in ax.get_xlabel()), (name, ticks, ax.get_xlabel())
    embed_only = GeometryReport.from_rows(
        [
            {"metric": "epsilon_activations", "hook": h, "value": 0.5}
            for h in ("hook_embed", "blocks.0.hook_resid_post", "blocks.1.hook_resid_post")
        ],
        model="m",
        provenance={"n_layers": 3},
    )
    ax = capacity_figures.plot_epsilon_by_layer(embed_only).axes[0]
    assert "final" not in _ticks(ax) and ax.get_xlabel() == "layer (embed = embeddings)"
    no_ends = GeometryReport.from_rows(
        [{"metric": "epsilon_activations", "hook": f"blocks.{l}.hook_resid_post", "value": 0.5} for l in range(3)],
        model="m",
        provenance={"n_layers": 3},
    )
    assert capacity_figures.plot_epsilon_by_layer(no_ends).axes[0].get_xlabel() == "layer"


# ----------------------------------------------------------------------------- W_EᵀW_E
def _aofe_ratio_reference(G: torch.Tensor) -> float:
    total = sum(float(G[i, j]) ** 2 for i in range(G.shape[0]) for j in range(G.shape[1]))
    diag = sum(float(G[i, i]) ** 2 for i in range(G.shape[0]))
    return (total - diag) / total


@pytest.mark.needs_hooked
def test_wtw_row_is_the_matrix_the_reading_names(tiny_model):
    from tl_geometry.families.interaction import wtw_aofe_metric

    rep = wtw_aofe_metric(tiny_model)
    (row,) = rep.rows
    W_E = tiny_model.W_E.detach().double()  # d_vocab × d_model
    assert row.value == pytest.approx(_aofe_ratio_reference(W_E.T @ W_E), rel=1e-9)
    W_U = tiny_model.W_U.detach().double()  # d_model × d_vocab
    (u,) = wtw_aofe_metric(tiny_model, matrix="W_U").rows
    assert u.value == pytest.approx(_aofe_ratio_reference(W_U @ W_U.T), rel=1e-9)
    d = tiny_model.cfg.d_model
    (line,) = [s for s in interaction_reading.read_interaction(rep) if "AOFE ratio of" in s]
    assert f"AOFE ratio of W_EᵀW_E, {d} × {d}" in line and f"{row.value:.3g}" in line
    (uline,) = [
        s for s in interaction_reading.read_interaction(GeometryReport(rows=(u,), provenance={})) if "AOFE" in s
    ]
    assert "W_U W_Uᵀ, d_model × d_model" in uline


def test_no_bare_wtw_label_anywhere():
    rep = GeometryReport.from_rows(
        [{"metric": "wtw.aofe_ratio", "value": 0.9, "extras": {"aofe": 1.0, "matrix": "W_E"}}],
        model="m",
        provenance={"d_model": D_MODEL},
    )
    text = " ".join(interaction_reading.read_interaction(rep)) + readings.summary_table(rep)
    assert "WᵀW" not in text and "W_EᵀW_E" in text
    assert "W_EᵀW_E" in registry.declared_rows()["wtw.aofe_ratio"][1].description
    assert "W_EᵀW_E" in registry.get_metric("wtw_aofe").description


# ----------------------------------------------------------------------------- RankMe
def spectral_report():
    rows = []
    for l in range(3):
        h = f"blocks.{l}.hook_resid_post"
        rows += [
            {"metric": "spectral.rankme", "hook": h, "value": 10.0 + l},
            {"metric": "spectral.rankme_eig", "hook": h, "value": 4.0 + l},
        ]
    return GeometryReport.from_rows(rows, model="m", provenance={"n_layers": 3})


def test_rankme_variants_named_for_what_they_are():
    rep = spectral_report()
    lines = pga_reading.read_spectral(rep)
    rankme = next(s for s in lines if "10" in s)
    eig = next(s for s in lines if "4" in s and s is not rankme)
    assert rankme.startswith("RankMe (Garrido et al.") and "p = s/Σs" in rankme and "√λ" in rankme
    assert eig.startswith("von Neumann effective rank") and "p = λ/Σλ" in eig and "not RankMe" in eig
    descriptions = {n: s.description for n, (_, s) in registry.declared_rows().items()}
    assert descriptions["spectral.rankme"].startswith("RankMe (Garrido et al.)")
    assert descriptions["spectral.rankme_eig"].startswith("von Neumann effective rank")
    table = readings.summary_table(rep)
    assert "von Neumann effective rank" in next(l for l in table.splitlines() if l.startswith("spectral.rankme_eig"))
    ax = pga_figures.plot_spectral(rep).axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[0].startswith("RankMe (Garrido et al.)") and "p = s/Σs" in legend[0]
    assert legend[1].startswith("von Neumann effective rank") and "p = λ/Σλ" in legend[1]
    assert not any(t.startswith("RankMe") for t in legend[1:])


# ----------------------------------------------------------------------------- SAE without SAEs
def test_sae_section_says_none_exists():
    rep = GeometryReport.from_rows(
        [], model="SmolLM2", provenance={"model": "SmolLM2", "sae_n": 0, "sae_lens_version": "6.1"}
    )
    sections = readings.sections(rep)
    (line,) = sections["SAE comparison"]
    assert "No published SAE exists for SmolLM2 in sae_lens 6.1's directory of pretrained SAEs" in line
    assert "nan" not in line
    assert "No published SAE exists" in render_markdown(rep) and "No published SAE exists" in render_html(rep, {})
    assert "sae: No published SAE exists" in readings.summary_table(rep)
    unknown = GeometryReport(rows=(), provenance={"model": "x", "sae_n": 0, "sae_n_unknown_width": 3})
    assert "lists 3 SAE(s) for x, none with a known width" in sae_reading.read_sae(unknown)[0]
    skipped = GeometryReport(rows=(), provenance={"sae_skipped": "sae_lens is not installed"})
    assert sae_reading.read_sae(skipped) == ["No SAE comparison: sae_lens is not installed"]
    assert sae_reading.read_sae(GeometryReport(rows=(), provenance={"model": "x"})) == []  # the metric did not run


@pytest.mark.needs_hooked
def test_sae_metric_on_a_model_without_saes_reads_none_exists(tiny_model):
    pytest.importorskip("sae_lens")
    from tl_geometry.families.sae.comparison import sae_metric

    rep = sae_metric(tiny_model, config="none")
    assert not rep.rows and rep.provenance["sae_n"] == 0 and rep.provenance["sae_lens_version"]
    (line,) = sae_reading.read_sae(rep)
    assert line.startswith("No published SAE exists for ")
    assert f"sae_lens {rep.provenance['sae_lens_version']}'s directory" in line


def test_sae_compare_cli_without_saes_and_with_nan(capsys):
    pytest.importorskip("sae_lens")
    from tl_geometry.cli import main

    assert main(["sae", "compare", "--model", "Llama-2-7B", "--config", "none"]) == 0
    out = capsys.readouterr().out
    assert "No published SAE exists for Llama-2-7B in sae_lens" in out and "pass --sae PATH|REPO:ID" in out
    assert "release " not in out  # no empty table header
    assert main(["sae", "compare", "--model", "Gemma-3-1B", "--config", "none"]) == 0
    out = capsys.readouterr().out
    assert "nan in d_sae/k and shared/k: indeterminate: the host's capacity k is not a count" in out
    assert "ε = 0.20164 > 0.2 (Class 1)" in out.split("nan in", 1)[1]


# ----------------------------------------------------------------------------- nan in the summary
@pytest.mark.parametrize(
    "eps, words",
    [
        (0.15, "indeterminate, not a count (0.1 ≤ ε = 0.15 ≤ 0.2 (between the classes)"),
        (0.35, "indeterminate, not a count (ε = 0.35 > 0.2 (Class 1)"),
    ],
)
def test_summary_explains_nan_capacity(eps, words):
    rep = GeometryReport.from_rows(
        [{"metric": "capacity.W_E", "value": math.nan, "extras": {"epsilon": eps, "d": 576}}], model="m"
    )
    table = readings.summary_table(rep)
    assert "nan, why:" in table and f"capacity.W_E is nan: {words}" in table
    from tl_geometry.commands.report import summary_table

    assert words in summary_table(rep)


def test_summary_explains_each_nan_reason_once_with_counts():
    meta = {"release": "r", "capacity_status": "indeterminate"}
    rows = [
        {
            "metric": "sae.capacity_ratio",
            "value": math.nan,
            "extras": {**meta, "verdict": "indeterminate", "reason": "ε ≥ 0.1"},
        }
        for _ in range(3)
    ]
    rows += [
        {"metric": "sae.shared_ratio", "value": math.nan, "extras": {**meta, "verdict": "tied unknown"}},
        {"metric": "sae.shared_ratio", "value": 0.5, "extras": {**meta, "verdict": "ok"}},
        {"metric": "spectral.alpha_req_reptrix", "hook": "blocks.0.hook_resid_post", "value": math.nan},
    ]
    table = readings.summary_table(GeometryReport.from_rows(rows, model="m"))
    why = table.split("nan, why:", 1)[1].splitlines()
    assert sum("sae.capacity_ratio" in l for l in why) == 1
    assert "sae.capacity_ratio 3 of 3 rows are nan: indeterminate: the host's capacity k is not a count" in table
    assert "sae.shared_ratio 1 of 2 rows are nan: not computed: whether the host ties" in table
    assert "spectral.alpha_req_reptrix is nan: not a number; the row records no reason" in table


def test_summary_without_nan_has_no_why():
    table = readings.summary_table(make_report(families=("capacity",)))
    assert "nan" not in table


# ----------------------------------------------------------------------------- provenance
NESTED = {
    "model": "m",
    "capture": {"mode": "shared", "metrics": ["pga", "spectral"], "forward_passes": 1},
    "pga": {"k": 100, "ccr": [0, 1, 5], "readout": {"basis": "W_U", "raw": True}},
    "errors": {},
    "tokens_shape": [8, 128],
    "sources": [{"file": "a.json", "seed": 0}, {"file": "b.json", "seed": 1}],
    "fast": False,
    "total_s": 12.345678,
    "note": None,
}


def test_provenance_shows_values_not_dict_reprs():
    rep = GeometryReport.from_rows(
        [{"metric": "pga.z", "hook": "blocks.0.hook_resid_post", "value": 1.0, "extras": {"ccr": 1, "k": 8}}],
        model="m",
        provenance=NESTED,
    )
    md = render_markdown(rep)
    html = render_html(rep, {})
    for text in (md, html, rep.to_markdown()):
        assert "{'" not in text and "['" not in text and "{}" not in text
        assert "True" not in text and "False" not in text and "None" not in text
    for line in ("- **capture**:", "  - mode: shared", "  - metrics: pga, spectral", "  - readout:", "    - raw: true"):
        assert line in md.splitlines()
    assert "- **tokens_shape**: 8, 128" in md and "- **errors**: none" in md and "- **total_s**: 12.3457" in md
    assert "  - 2:" in md and "    - file: b.json" in md
    assert '<td>capture</td><td><table class="kv"><tr><td>mode</td><td>shared</td></tr>' in html
    assert "<td>ccr = 1; k = 8</td>" in html  # row extras read key = value


def test_format_value_and_provenance_markdown():
    assert format_value({"a": 1, "b": [1, 2]}) == "a: 1; b: 1, 2"
    assert format_value([]) == "none" and format_value(True) == "true" and format_value(1e-7) == "1e-07"
    assert provenance_markdown({"b": 1, "a": {"y": 2, "x": 3}}) == ["- **a**:", "  - y: 2", "  - x: 3", "- **b**: 1"]


def test_summary_prints_whole_numbers_in_full():
    rep = GeometryReport.from_rows(
        [{"metric": "shape.d_mlp", "value": 1536.0}, {"metric": "agop.trace", "hook": "h", "value": 1234.5}], model="m"
    )
    lines = readings.summary_table(rep).splitlines()
    assert next(l for l in lines if l.startswith("shape.d_mlp")).split()[2:4] == ["1536", "1536"]
    assert next(l for l in lines if l.startswith("agop.trace")).split()[2] == "1.23e+03"
