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


def _plugin_dist(tmp_path, body: str) -> str:
    """An installed-looking plugin (a package and its dist-info with one entry point) on a path."""
    pkg = tmp_path / "clash_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(body)
    info = tmp_path / "clash_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: clash-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[tl_geometry.metrics]\nclash = clash_plugin\n")
    return str(tmp_path)


def test_a_plugin_taking_a_builtin_name_is_skipped_whole_with_one_warning(tmp_path):
    """A fresh process (plugins discovered while the built-ins load): the plugin registering a
    built-in name never breaks a command; it is skipped with one warning naming it, and what it
    registered before the clash is removed too (never half a plugin)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    body = (
        "import tl_geometry as tg\n"
        "from tl_geometry.report import GeometryReport\n"
        "@tg.register_metric('clash_first', needs='weights')\n"
        "def first(model, tokens=None, **kw):\n    return GeometryReport.from_rows([])\n"
        "@tg.register_metric('pga', needs='weights')\n"
        "def pga(model, tokens=None, **kw):\n    return GeometryReport.from_rows([])\n"
    )
    root = str(Path(__file__).resolve().parents[3])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([_plugin_dist(tmp_path, body), root]), "HF_HUB_OFFLINE": "1"}
    for argv in (["metrics"], ["capacity", "--published"]):
        out = subprocess.run(
            [sys.executable, "-c", f"from tl_geometry.cli import main; raise SystemExit(main({argv!r}))"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert "Traceback" not in out.stderr
        warned = [line for line in out.stderr.splitlines() if "skipping metric plugin 'clash'" in line]
        assert len(warned) == 1 and "'pga' is a tl_geometry built-in" in warned[0], out.stderr
        assert "clash_first" in warned[0]  # named as removed
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import tl_geometry as tg; print(tg.list_metrics()); print(tg.get_metric('pga').builtin)",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert "clash_first" not in out.stdout and "'pga'" in out.stdout and out.stdout.strip().endswith("True")
