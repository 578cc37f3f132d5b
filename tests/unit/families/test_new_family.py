"""A new family edits nothing shared.

A family is written here as its own folder, in a temporary package on ``sys.path``, exactly as
``tl_geometry/families/<name>/`` is (CONTRIBUTING.md's recipe is this test): ``__init__.py``
registers a metric (``registry.planned_metric``) and declares the family (``register_family``:
rows, a figure ``draw="pkg.figures:plot"``, a reading, ``checks=`` a module with one
``@reproduction.check``, ``command=`` a module with ``add_parser`` and a ``SWEEPS`` experiment).
Nothing of tl_geometry names it, yet the report (``tg.analyze``, the pipeline's defaults), the
rendering (figures, readings, ``index.html``, ``report.md``), the reproduce list, the sweeps and the
command line all pick it up. Registered from outside tl_geometry, it is a plugin: it is removed
afterwards (``unregister_family`` / ``unregister_metric``), and everything forgets it.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

import tl_geometry as tg
from tl_geometry import registry

PKG = "tlg_dummy_family"
FAMILY = "tlg_dummy"
METRIC = "tlg_dummy_norm"
ROW = "tlg_dummy.norm"
FIGURE = "tlg_dummy_norms"
TITLE = "Dummy family"
COMMAND = "tlg-dummy"
EXPERIMENT = "tlg-dummy-sweep"
CHECK = "tlg_dummy.identity"
PNG = b"\x89PNG\r\n\x1a\n"

#: The family's folder: every file a new family writes (and, with one import line in
#: tl_geometry/families/__init__.py for a built-in, the only ones).
FILES = {
    "__init__.py": f'''
        """A dummy family: the mean norm of the residual stream at every block's output."""

        from tl_geometry import capture
        from tl_geometry.registry import FamilySpec, FigureSpec, MetricPlan, RowSpec, planned_metric, register_family
        from tl_geometry.report import GeometryReport


        class _Norms:
            """A capture pass: the summed row norms per hook."""

            def __init__(self, hooks):
                self.hooks, self.positions = list(hooks), None
                self.total = dict.fromkeys(self.hooks, 0.0)
                self.count = dict.fromkeys(self.hooks, 0)

            def update(self, hook, acts):
                self.total[hook] += float(acts.double().norm(dim=-1).sum())
                self.count[hook] += int(acts.shape[0])


        @planned_metric("{METRIC}", description="mean residual norm per block (a dummy family)")
        def dummy_norm(model, tokens, *, hooks=None, batch_size=8, progress=True):
            """Mean L2 norm of the activations at every block's output."""
            hooks = capture.validate_hooks(model, list(hooks) if hooks is not None else capture.resid_hooks(model, "post"))
            norms = _Norms(hooks)

            def finish():
                rows = [
                    {{"metric": "{ROW}", "hook": h, "value": norms.total[h] / max(1, norms.count[h]),
                      "extras": {{"n_points": norms.count[h]}}}}
                    for h in hooks
                ]
                return GeometryReport.from_rows(rows, model=model)

            return MetricPlan("{METRIC}", model, tokens, [norms], finish, batch_size=batch_size, progress=progress)


        register_family(
            FamilySpec(
                "{FAMILY}",
                title="{TITLE}",
                paper="none (a test of the recipe)",
                metrics=("{METRIC}",),
                rows=(RowSpec("{ROW}", per="hook", extras=("n_points",), description="mean residual norm"),),
                figures=(FigureSpec("{FIGURE}", "{PKG}.figures:plot", caption="Dummy norms by layer", rows=("{ROW}",)),),
                read="{PKG}.reading:read",
                checks="{PKG}.checks",
                command="{PKG}.cli",
                report_options={{"{METRIC}": {{"batch_size": 4}}}},
                order=45,
            )
        )
    ''',
    "figures.py": f'''
        def plot(report):
            rows = [r for r in report.rows if r.metric == "{ROW}"]
            if not rows:
                return None
            import matplotlib.pyplot as plt

            fig, ax = plt.subplots(figsize=(3, 2))
            ax.plot(range(len(rows)), [r.value for r in rows], marker="o")
            ax.set_title("dummy norms")
            return fig
    ''',
    "reading.py": f'''
        def read(report):
            rows = [r for r in report.rows if r.metric == "{ROW}"]
            if not rows:
                return []
            top = max(rows, key=lambda r: r.value)
            return [f"The residual norm is largest at {{top.hook}} ({{top.value:.3g}})."]
    ''',
    "checks.py": f'''
        from tl_geometry.runs.reproduction import check, make_row


        @check("{CHECK}", "a dummy check: one plus one", evidence="consistency")
        def _identity(ctx):
            return [make_row("{CHECK}", "none", 2.0, 1.0 + 1.0, 1e-12, evidence="consistency")]
    ''',
    "cli.py": f'''
        def add_parser(subparsers):
            p = subparsers.add_parser("{COMMAND}", help="the dummy family's command")
            p.add_argument("--n", type=int, default=1)
            p.set_defaults(func=run)


        def run(args):
            print(f"dummy {{args.n}}")
            return 0


        def build_sweep(sub):
            p = sub.add_parser("{EXPERIMENT}", help="the dummy family's experiment")
            p.add_argument("--out", default="dummy.jsonl")
            p.set_defaults(func=lambda args: print(f"dummy sweep into {{args.out}}") or 0)


        SWEEPS = {{"{EXPERIMENT}": build_sweep}}
    ''',
}


def _forget_modules() -> None:
    for name in [m for m in sys.modules if m == PKG or m.startswith(PKG + ".")]:
        del sys.modules[name]


def _remove() -> None:
    """Undo the registration (a plugin's, so it can be undone)."""
    from tl_geometry.runs import reproduction

    if FAMILY in registry._FAMILIES:
        tg.unregister_family(FAMILY)
    if METRIC in registry._REGISTRY:
        tg.unregister_metric(METRIC)
    # the reproduce checks: a list with no removal (a check registers once, at import)
    reproduction._CHECKS[:] = [c for c in reproduction._CHECKS if c.family != FAMILY]
    _forget_modules()


@pytest.fixture
def dummy_family(tmp_path, monkeypatch):
    """The family's folder written to tmp_path, put on sys.path and imported (which registers it)."""
    folder = tmp_path / "src" / PKG
    folder.mkdir(parents=True)
    for name, text in FILES.items():
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    monkeypatch.syspath_prepend(str(folder.parent))
    _forget_modules()
    importlib.import_module(PKG)
    try:
        yield tg.get_family(FAMILY)
    finally:
        _remove()


@pytest.fixture
def tokens():
    return torch.randint(1, 101, (4, 12), generator=torch.Generator().manual_seed(0))


def test_nothing_in_tl_geometry_names_the_new_family():
    """The proof's premise: no file of the package knows the family (every place it shows up below
    found it through the declarations)."""
    root = Path(tg.__file__).parent
    hits = [p for p in root.rglob("*.py") if "tlg_dummy" in p.read_text(encoding="utf-8")]
    assert hits == []


def test_it_registers_as_a_plugin(dummy_family):
    assert not dummy_family.builtin and dummy_family.source == PKG
    assert FAMILY in tg.list_families() and registry.family_of(METRIC) is dummy_family
    spec = tg.get_metric(METRIC)
    assert not spec.builtin and spec.needs == "activations" and spec.plan is not None
    assert dummy_family.planned == (METRIC,)  # it shares the report's forward pass


def test_the_report_runs_it(dummy_family, tiny_model, tokens):
    from tl_geometry.runs import pipeline

    assert METRIC in pipeline.default_metrics()
    assert pipeline.report_options()[METRIC] == {"batch_size": 4}
    # tg.analyze takes the report's defaults (the family declares batch_size 4); at spectral's batch
    # size the two share one forward pass
    report = tg.analyze(
        tiny_model, tokens, metrics=[METRIC, "spectral"], progress=False, options={METRIC: {"batch_size": 8}}
    )
    ours = report.filter(prefix="tlg_dummy.")
    assert registry.check_rows(dummy_family, ours, metric=METRIC, strict_extras=True) == []
    assert [r.hook for r in ours.rows] == tg.capture.resid_hooks(tiny_model, "post")
    assert all(r.value > 0 and r.extras["n_points"] > 0 for r in ours.rows)
    assert report.provenance["capture"]["forward_passes"] == 1  # one pass fed it and spectral
    # the same rows as the metric alone (its own pass)
    alone = tg.get_metric(METRIC)(tiny_model, tokens, progress=False)
    assert [r.value for r in alone.rows] == pytest.approx([r.value for r in ours.rows], rel=1e-6)


def test_the_rendering_draws_and_reads_it(dummy_family, tiny_model, tokens, tmp_path):
    pytest.importorskip("matplotlib")
    from tl_geometry.render import html, plotting, readings

    report = tg.analyze(tiny_model, tokens, metrics=[METRIC], progress=False)
    assert FIGURE in plotting.FIGURES and FIGURE in plotting.figures(report)
    assert f"{FIGURE}.png" in html.figure_files()
    sentence = readings.sections(report)[TITLE][0]
    assert sentence.startswith("The residual norm is largest at blocks.")
    assert report.plot(FAMILY).axes[0].get_title() == "dummy norms"

    out = tmp_path / "o"
    index = html.write_outputs(report, out, dpi=40)
    assert (out / f"{FIGURE}.png").read_bytes()[:8] == PNG
    section = index.read_text(encoding="utf-8").split(f"<h2>{TITLE}</h2>", 1)[1].split("<h2>", 1)[0]
    assert sentence in section and "Dummy norms by layer" in section and "data:image/png;base64," in section
    md = (out / "report.md").read_text(encoding="utf-8")
    assert f"## {TITLE}" in md and f"]({FIGURE}.png)" in md and sentence in md


def test_the_reproduce_list_has_its_check(dummy_family, tmp_path):
    from tl_geometry.runs import reproduction

    assert FAMILY in reproduction.families_with_checks()
    assert [c.id for c in reproduction.list_checks(FAMILY)] == [CHECK]
    assert CHECK in [c.id for c in reproduction.list_checks("all")]
    result = reproduction.reproduce(FAMILY, out=tmp_path / "r", size="tiny", progress=False)
    (row,) = result.rows
    assert row.id == CHECK and row.status == "reproduced"
    assert CHECK in (tmp_path / "r" / "reproduce.md").read_text(encoding="utf-8")


def test_a_sweep_runs_its_metric(dummy_family, tmp_path):
    from tests.helpers import tiny_loader
    from tl_geometry.runs.sweeps import SweepJob, sweep

    job = SweepJob("tiny-L2", corpus="random", n_seqs=2, seq_len=8)
    summary = sweep([job], metrics=[METRIC], out=tmp_path / "s.jsonl", loader=tiny_loader, progress=False)
    assert len(summary.ran) == 1 and not summary.failed
    rows = summary.report().rows
    assert {r.metric for r in rows} == {ROW} and len(rows) == 2  # one per block of the 2-layer model


def test_the_command_line_has_its_command_and_experiment(dummy_family, capsys):
    from tl_geometry.cli import build_parser, main
    from tl_geometry.commands import sweep

    subs = next(a for a in build_parser()._actions if a.dest == "command")
    assert COMMAND in subs.choices
    assert main([COMMAND, "--n", "3"]) == 0 and "dummy 3" in capsys.readouterr().out
    assert EXPERIMENT in sweep.experiments() and {"models", "shape", "toy"} <= set(sweep.experiments())
    assert main(["sweep", EXPERIMENT, "--out", "x.jsonl"]) == 0
    assert "dummy sweep into x.jsonl" in capsys.readouterr().out
    assert main(["metrics"]) == 0 and METRIC in capsys.readouterr().out


def test_after_removal_everything_forgets_it(dummy_family):
    from tl_geometry.cli import build_parser
    from tl_geometry.commands import sweep
    from tl_geometry.render import html, plotting, readings
    from tl_geometry.runs import pipeline, reproduction

    _remove()
    assert FAMILY not in tg.list_families() and METRIC not in tg.list_metrics()
    assert FIGURE not in plotting.FIGURES and f"{FIGURE}.png" not in html.figure_files()
    assert TITLE not in readings.SECTION_READERS and METRIC not in pipeline.default_metrics()
    assert CHECK not in [c.id for c in reproduction.list_checks("all")]
    assert COMMAND not in next(a for a in build_parser()._actions if a.dest == "command").choices
    assert EXPERIMENT not in sweep.experiments()


# ----------------------------------------------------------------------------- a family's bad SWEEPS
@pytest.fixture
def family_with_sweeps(tmp_path, monkeypatch):
    """A plugin family whose command module's SWEEPS the test sets."""
    name = "tlg_dummy_sweeps_cli"
    (tmp_path / f"{name}.py").write_text("def add_parser(subparsers):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)
    module = importlib.import_module(name)
    tg.register_family(tg.FamilySpec("tlg_dummy_sweeps", metrics=("none",), command=name))
    try:
        yield module
    finally:
        tg.unregister_family("tlg_dummy_sweeps")
        sys.modules.pop(name, None)


@pytest.mark.parametrize("value", [["shape"], {"": print}, {"x": "not callable"}, {3: print}])
def test_malformed_sweeps_are_refused_by_name(family_with_sweeps, value):
    from tl_geometry.commands import sweep
    from tl_geometry.errors import InputError

    family_with_sweeps.SWEEPS = value
    with pytest.raises(InputError, match=r"family 'tlg_dummy_sweeps': tlg_dummy_sweeps_cli\.SWEEPS must map"):
        sweep.experiments()


@pytest.mark.parametrize("taken", ["shape", "models"])
def test_a_plugin_cannot_take_an_experiments_name(family_with_sweeps, taken):
    from tl_geometry.commands import sweep

    family_with_sweeps.SWEEPS = {taken: lambda sub: sub.add_parser(taken)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = sweep.experiments()
    assert any(f"sweep experiment {taken!r} is already" in str(w.message) for w in caught)
    assert found[taken] is not family_with_sweeps.SWEEPS[taken]  # the built-in one stays
