import sys
import textwrap
import warnings

import pytest

import tl_geometry as tg
from tl_geometry import registry


def test_builtin_listed_and_described():
    assert "shape" in tg.list_metrics()
    spec = tg.get_metric("shape")
    assert spec.builtin and spec.needs == "weights"
    assert "shape" in tg.list_metrics(needs="weights")


def test_register_duplicate_and_overwrite():
    @tg.register_metric("_t_dup", needs="weights")
    def a(model, tokens, *, hooks=None):
        return tg.GeometryReport()

    try:
        with pytest.raises(ValueError, match="already registered"):
            tg.register_metric("_t_dup")(a)
        tg.register_metric("_t_dup", overwrite=True, description="second")(a)
        assert tg.get_metric("_t_dup").description == "second"
    finally:
        tg.unregister_metric("_t_dup")
    assert "_t_dup" not in tg.list_metrics()


@pytest.mark.parametrize("name, needs, match", [("", "weights", "non-empty"), ("x", "tokens", "needs must be")])
def test_register_bad_input(name, needs, match):
    with pytest.raises(ValueError, match=match):
        tg.register_metric(name, needs=needs)


def test_unknown_metric_lists_close_matches():
    with pytest.raises(KeyError, match="did you mean 'shape'"):
        tg.get_metric("shap")


def test_builtin_cannot_be_unregistered():
    with pytest.raises(ValueError, match="built-in"):
        tg.unregister_metric("shape")


def _write_dist(site, dist, module, source, entry):
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[tl_geometry.metrics]\n{entry}\n")


@pytest.fixture
def plugin_site(tmp_path, monkeypatch):
    """A temp site dir holding three installed plugin distributions (real dist-info metadata)."""
    _write_dist(
        tmp_path,
        "tlg_good_plugin",
        "tlg_good_plugin",
        """
        import tl_geometry as tg
        @tg.register_metric("plugin_norm", needs="weights")
        def plugin_norm(model, tokens, *, hooks=None):
            '''Frobenius norm of W_E.'''
            w = tg.capture.weight(model, "W_E")
            return tg.GeometryReport.from_rows([{"metric": "plugin_norm", "value": float(w.norm())}], model=model)
    """,
        "norm = tlg_good_plugin",
    )
    _write_dist(
        tmp_path, "tlg_broken_plugin", "tlg_broken_plugin", "import not_a_module_xyz\n", "broken = tlg_broken_plugin"
    )
    _write_dist(
        tmp_path,
        "tlg_evil_plugin",
        "tlg_evil_plugin",
        """
        import tl_geometry as tg
        @tg.register_metric("shape", needs="weights", overwrite=True)
        def shape(model, tokens, *, hooks=None):
            return tg.GeometryReport()
    """,
        "evil = tlg_evil_plugin",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("plugin_norm",):
        if name in registry._REGISTRY:
            tg.unregister_metric(name)
    for m in ("tlg_good_plugin", "tlg_broken_plugin", "tlg_evil_plugin"):
        sys.modules.pop(m, None)


def test_entry_point_plugins(plugin_site, tiny_model):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = tg.load_plugins(force=True)
    messages = [str(w.message) for w in caught]
    assert "norm" in loaded
    assert any("broken" in m and "not_a_module_xyz" in m for m in messages)
    assert any("evil" in m and "built-in" in m for m in messages)
    assert "plugin_norm" in tg.list_metrics()
    spec = tg.get_metric("plugin_norm")
    assert not spec.builtin and "tlg_good_plugin" in spec.source
    assert tg.get_metric("shape").builtin  # not overridden
    report = tg.analyze(tiny_model, metrics=["plugin_norm"], progress=False)
    assert report.value("plugin_norm") == pytest.approx(float(tiny_model.W_E.detach().norm()))
