"""Family declarations (tl_geometry.registry.register_family): the registry's rules, and a plugin
family getting its figure and its section in the rendered report by declaring them."""

from __future__ import annotations

import logging

import pytest

import tl_geometry as tg
from tests.helpers import builtin_families
from tl_geometry import registry

PNG = b"\x89PNG\r\n\x1a\n"


# ----------------------------------------------------------------------------- registry rules
@pytest.mark.parametrize("name", [f.name for f in builtin_families()])
def test_builtins_are_builtin_and_protected(name):
    spec = tg.get_family(name)
    assert spec.builtin and spec.source.startswith("tl_geometry.families.")
    assert name in tg.list_families()
    with pytest.raises(ValueError, match="built-in; a plugin cannot override it"):
        tg.register_family(tg.FamilySpec(name, metrics=("x",)), overwrite=True)
    with pytest.raises(ValueError, match="built-in and cannot be unregistered"):
        tg.unregister_family(name)
    if len(name) > 3:
        with pytest.raises(KeyError, match=f"did you mean '{name}'"):
            tg.get_family(name[:-1])
    assert tg.get_family(name) is spec  # still there, unchanged


@pytest.mark.parametrize("name", [f.name for f in builtin_families()])
def test_every_builtin_declaration_resolves(name):
    """Every name a built-in family declares leads somewhere: its metrics are registered built-ins,
    its figures read rows some family declares, and its "module:function" references (figures,
    reading, explain, note), its checks module and its command module (with add_parser) import."""
    import importlib

    spec = tg.get_family(name)
    for m in spec.metrics:
        assert tg.get_metric(m).builtin, m
    declared = set(registry.declared_rows())
    for fig in spec.figures:
        assert fig.rows and set(fig.rows) <= declared, (fig.name, set(fig.rows) - declared)
    lazies = [fig.draw for fig in spec.figures] + [spec.read, spec.explain, spec.note]
    for ref in lazies:
        if isinstance(ref, registry.Lazy):
            assert callable(ref.resolve()), ref
    if spec.checks:
        importlib.import_module(spec.checks)
    if spec.command:
        assert callable(importlib.import_module(spec.command).add_parser), spec.command


def test_duplicate_and_overwrite():
    spec = tg.FamilySpec("_t_dup", metrics=("m",), rows=(tg.RowSpec("_t_dup.a", per="model"),))
    got = tg.register_family(spec)
    try:
        assert not got.builtin and got.source == __name__
        with pytest.raises(ValueError, match="already registered"):
            tg.register_family(spec)
        tg.register_family(tg.FamilySpec("_t_dup", title="Second", metrics=("m",)), overwrite=True)
        assert tg.get_family("_t_dup").title == "Second"
    finally:
        tg.unregister_family("_t_dup")
    assert "_t_dup" not in tg.list_families()


@pytest.mark.parametrize(
    "spec, match",
    [
        (
            lambda: tg.FamilySpec("_t_c", metrics=("m",), rows=(tg.RowSpec("pga.z"),)),
            "already declared by family 'pga'",
        ),
        (
            lambda: tg.FamilySpec("_t_c", metrics=("m",), figures=(tg.FigureSpec("pga_z", print),)),
            "already declared by family 'pga'",
        ),
        (lambda: tg.FamilySpec("_t_c", title="Capacity", metrics=("m",)), "section title 'Capacity'"),
    ],
)
def test_a_plugin_cannot_take_a_builtins_rows_figures_or_title(spec, match):
    with pytest.raises(ValueError, match=match):
        tg.register_family(spec())
    assert "_t_c" not in tg.list_families()


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: tg.RowSpec("x", per="layer"), "per must be one of"),
        (lambda: tg.RowSpec(""), "non-empty"),
        (lambda: tg.FigureSpec("a/b", print), "figure name"),
        (lambda: tg.FigureSpec("a", 3), "callable or a 'module:attribute'"),
        (lambda: tg.FigureSpec("a", "no_colon"), "module:attribute"),
        (lambda: tg.FamilySpec("f", metrics=("a", "b"), rows=(tg.RowSpec("r"),)), "say which metric emits it"),
        (lambda: tg.FamilySpec("f", metrics=("a",), rows=(tg.RowSpec("r", by="b"),)), "is not one of its metrics"),
        (lambda: tg.FamilySpec("f", metrics=("a",), rows=(tg.RowSpec("r"), tg.RowSpec("r"))), "declared twice"),
        (lambda: tg.FamilySpec("f", metrics=("a",), plot="nope"), "is not one of its figures"),
        (lambda: tg.FamilySpec("", metrics=("a",)), "non-empty"),
    ],
)
def test_bad_declarations(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_lazy_references_resolve_on_call(monkeypatch):
    fig = tg.FigureSpec("x", "tl_geometry.families.pga.figures:plot_pga")
    assert isinstance(fig.draw, registry.Lazy) and fig.file == "x.png"
    from tl_geometry.families.pga import figures

    monkeypatch.setattr(figures, "plot_pga", lambda report: "patched")
    assert fig.draw(None) == "patched"
    assert tg.get_family("pga").figures[0].draw(None) == "patched"


def test_a_family_with_one_metric_defaults_by():
    spec = tg.FamilySpec("f", metrics=("a",), rows=(tg.RowSpec("r"),))
    assert spec.row("r").by == "a" and spec.rows_of("a") == spec.rows and spec.section == "f"


def test_planned_lists_metrics_with_plans():
    assert tg.get_family("capacity").planned == ("epsilon_activations",)
    assert tg.get_family("pga").planned == ("pga",)
    assert tg.get_family("interaction").planned == ()


# ----------------------------------------------------------------------------- a plugin family
def _draw_toy(report):
    rows = [r for r in report.rows if r.metric == "toy.norm"]
    if not rows:
        return None
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.bar(range(len(rows)), [r.value for r in rows])
    ax.set_title("toy norms")
    return fig


def _read_toy(report):
    rows = [r for r in report.rows if r.metric == "toy.norm"]
    return [f"The toy norm of W_E is {rows[0].value:.3f}."] if rows else []


@pytest.fixture
def toy_family():
    @tg.register_metric("_toy_norm", needs="weights")
    def toy_norm(model, tokens=None, *, hooks=None):
        """Frobenius norm of W_E."""
        w = tg.capture.weight(model, "W_E")
        row = {"metric": "toy.norm", "value": float(w.norm()), "extras": {"matrix": "W_E"}}
        return tg.GeometryReport.from_rows([row], model=model)

    spec = tg.register_family(
        tg.FamilySpec(
            "_toy",
            title="Toy family",
            paper="none",
            metrics=("_toy_norm",),
            rows=(tg.RowSpec("toy.norm", per="model", extras=("matrix",)),),
            figures=(tg.FigureSpec("_toy_norms", _draw_toy, "Toy norms of the embedding", rows=("toy.norm",)),),
            read=_read_toy,
            order=55,
        )
    )
    yield spec
    tg.unregister_family("_toy")
    tg.unregister_metric("_toy_norm")


def test_plugin_family_gets_its_figure_and_section(toy_family, tiny_model, tmp_path):
    pytest.importorskip("matplotlib")
    from tl_geometry.render import html, plotting, readings

    report = tg.analyze(tiny_model, metrics=["_toy_norm", "depth_width"], progress=False)
    assert registry.check_rows(toy_family, report.filter(prefix="toy."), metric="_toy_norm") == []
    assert "_toy_norms" in plotting.FIGURES and "Toy family" in readings.SECTION_READERS
    assert "_toy_norms.png" in html.figure_files()
    sentence = _read_toy(report)[0]
    assert readings.sections(report)["Toy family"] == [sentence]

    index = html.write_outputs(report, tmp_path / "o", dpi=40)
    out = tmp_path / "o"
    assert (out / "_toy_norms.png").read_bytes()[:8] == PNG
    text = index.read_text()
    # its section, between the built-in sections (order 55: after Interaction, before any SAE section)
    assert text.index("<h2>Interaction</h2>") < text.index("<h2>Toy family</h2>")
    section = text.split("<h2>Toy family</h2>", 1)[1].split("<h2>", 1)[0]
    assert sentence in section and "Toy norms of the embedding" in section and "data:image/png;base64," in section
    md = (out / "report.md").read_text()
    assert "## Toy family" in md and "](_toy_norms.png)" in md and sentence in md
    fig = report.plot("_toy")
    assert fig.axes[0].get_title() == "toy norms"
    assert report.plot("_toy_norm").axes[0].get_title() == "toy norms"


def test_after_unregistering_the_figure_is_gone(toy_family):
    from tl_geometry.render import html

    tg.unregister_family("_toy")
    try:
        assert "_toy_norms.png" not in html.figure_files()
    finally:
        tg.register_family(toy_family)


def test_a_broken_reading_costs_only_its_section(caplog, tiny_model):
    def boom(report):
        raise RuntimeError("bad rows")

    tg.register_family(tg.FamilySpec("_t_broken", title="Broken", metrics=("_none",), read=boom))
    try:
        from tl_geometry.render import readings

        report = tg.analyze(tiny_model, metrics=["depth_width"], progress=False)
        with caplog.at_level(logging.ERROR, logger="tl_geometry.render.readings"):
            secs = readings.sections(report)
        assert "Interaction" in secs and "Broken" not in secs
        assert "reading 'Broken' failed" in caplog.text
    finally:
        tg.unregister_family("_t_broken")


def test_entry_point_plugin_declares_a_family_but_cannot_replace_a_builtin(tmp_path, monkeypatch):
    import sys
    import textwrap
    import warnings

    def write(dist, source):
        (tmp_path / f"{dist}.py").write_text(textwrap.dedent(source))
        info = tmp_path / f"{dist}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[tl_geometry.metrics]\n{dist} = {dist}\n")

    write(
        "tlg_fam_good",
        """
        import tl_geometry as tg
        tg.register_family(tg.FamilySpec("_ep_family", title="EP family", metrics=("_ep_metric",),
                                         rows=(tg.RowSpec("ep.value", per="model"),)))
    """,
    )
    write(
        "tlg_fam_evil",
        """
        import tl_geometry as tg
        tg.register_family(tg.FamilySpec("pga", title="Hijacked", metrics=("pga",)), overwrite=True)
    """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loaded = tg.load_plugins(force=True)
        assert "tlg_fam_good" in loaded
        assert any("tlg_fam_evil" in str(w.message) and "built-in" in str(w.message) for w in caught)
        spec = tg.get_family("_ep_family")
        assert not spec.builtin and "tlg_fam_good" in spec.source
        assert tg.get_family("pga").builtin and tg.get_family("pga").title == "Subspace PGA"
    finally:
        if "_ep_family" in registry._FAMILIES:
            tg.unregister_family("_ep_family")
        for m in ("tlg_fam_good", "tlg_fam_evil"):
            sys.modules.pop(m, None)
