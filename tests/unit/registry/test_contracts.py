"""The contract between the metrics and the rendering: every built-in metric, run on a tiny random
model, emits exactly the rows its family declares (tl_geometry.registry.FamilySpec): each row
name declared, a hook on per-hook rows and none on per-model rows, every declared extras key
present (and no undeclared one), every declared row emitted. A planted undeclared row fails it.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import tl_geometry as tg
from tests.helpers import builtin_families, builtin_metrics
from tl_geometry import registry

#: Smaller options than the family's ``fast_options`` for some built-in metrics (a tiny model, a
#: 2-core box). A metric not named here runs with its family's ``fast_options`` (else its defaults):
#: a new family edits nothing here.
OPTIONS = {
    "epsilon": {"histogram_rows": 32, "histogram_bins": 10},
    "epsilon_activations": {"max_points": 64},
    "pga": {"k": 8, "n_null": 4, "max_points": 64, "progress": False},
    "spectral": {"progress": False},
    "agop": {"n_probes": 2, "progress": False},
    "nfa": {"n_probes": 2, "progress": False},
    "intrinsic_dimension": {"max_points": 64, "range_max": 8, "progress": False},
}
#: Built-in metrics whose rows are all conditional (``RowSpec.when``): each has a test of its own below.
DEDICATED = {"sae": "test_sae_rows_match_their_declaration"}


def options_for(metric: str) -> dict:
    """The options the contract test runs ``metric`` with: OPTIONS, else its family's fast_options."""
    if metric in OPTIONS:
        return dict(OPTIONS[metric])
    fam = registry.family_of(metric)
    return dict(fam.fast_options.get(metric, {})) if fam is not None else {}


def assert_contract(family: registry.FamilySpec, metric: str, report, *, every_row: bool = True) -> None:
    """The rows of ``metric`` in ``report`` against ``family``'s declaration; with ``every_row``,
    also the rows declared under a condition (``when``) must be there (the options above meet them)."""
    problems = registry.check_rows(family, report, metric=metric, strict_extras=True)
    assert problems == [], "\n".join(problems)
    assert report.rows, f"{metric} emitted no row"
    if every_row:
        emitted = {r.metric for r in report.rows}
        missing = [r.metric for r in family.rows_of(metric) if r.metric not in emitted]
        assert missing == [], f"{metric}: declared rows not emitted: {missing}"


# ----------------------------------------------------------------------------- the declarations
def test_every_builtin_metric_has_one_family():
    owners: dict[str, list[str]] = {}
    for fam in builtin_families():
        for m in fam.metrics:
            owners.setdefault(m, []).append(fam.name)
    builtin = sorted(s.name for s in registry.metric_specs() if s.builtin)
    assert sorted(owners) == builtin == builtin_metrics()
    assert all(len(v) == 1 for v in owners.values()), owners
    # the contract test below runs every one: parametrized, or in a test of its own
    assert set(OPTIONS) <= set(builtin) and set(DEDICATED) <= set(builtin)
    assert sorted([*ROWS_TESTED, *DEDICATED]) == builtin
    for metric, test in DEDICATED.items():
        assert callable(globals().get(test)), test
        assert all(r.when for r in registry.family_of(metric).rows_of(metric)), f"{metric}: give it OPTIONS instead"


def test_every_family_folder_registers_its_families():
    """Each module or folder of tl_geometry/families registers at least one built-in family, and
    every built-in family is registered from one of them (so the list lives in the folders)."""
    import pkgutil

    import tl_geometry.families as pkg

    folders = {f"{pkg.__name__}.{m.name}" for m in pkgutil.iter_modules(pkg.__path__)}
    fams = builtin_families()
    assert fams, "no built-in family registered"

    def folder(source: str) -> str:
        return ".".join(source.split(".")[:3])

    assert {folder(f.source) for f in fams} == folders
    names = [f.name for f in fams]
    assert len(set(names)) == len(names)
    sections = [f.section for f in fams if f.read is not None or f.figures]
    assert len(set(sections)) == len(sections), sections
    for f in fams:
        assert f.rows, f"family {f.name!r} declares no row"
        if f.read is not None or f.figures:
            assert f.title, f"family {f.name!r} has a section but no title"
    figs = [fig.name for f in fams for fig in f.figures]
    assert len(set(figs)) == len(figs), figs


def test_figures_read_declared_rows():
    declared = {r.metric for fam in registry.families() for r in fam.rows}
    for fam in builtin_families():
        for fig in fam.figures:
            assert fig.rows and set(fig.rows) <= declared, (fig.name, set(fig.rows) - declared)


def test_activation_metrics_share_the_forward_pass():
    """The accumulator part of the contract: every built-in activation metric has a plan."""
    for fam in builtin_families():
        for m in fam.metrics:
            if tg.get_metric(m).needs == "activations":
                assert m in fam.planned, m


# ----------------------------------------------------------------------------- the rows
ROWS_TESTED = [m for m in builtin_metrics() if m not in DEDICATED]


@pytest.mark.parametrize("metric", ROWS_TESTED)
def test_builtin_rows_match_their_declaration(metric, tiny_model, tiny_tokens, one_thread):
    family = registry.family_of(metric)
    assert family is not None and family.builtin
    report = tg.get_metric(metric)(tiny_model, tiny_tokens, **options_for(metric))
    assert_contract(family, metric, report)


def test_sae_rows_match_their_declaration(tiny_model):
    """The "sae" metric on a stub SAE given in saes= (sae_lens's directory has none for the tiny
    model; nothing is downloaded)."""
    pytest.importorskip("sae_lens")
    g = torch.Generator().manual_seed(0)
    stub = SimpleNamespace(
        W_dec=torch.randn(48, tiny_model.cfg.d_model, generator=g),
        cfg=SimpleNamespace(hook_name="blocks.1.hook_resid_post"),
    )
    report = tg.get_metric("sae")(tiny_model, saes=[stub])
    assert_contract(registry.get_family("sae"), "sae", report)


def test_analyze_rows_are_all_declared(tiny_model, tiny_tokens, one_thread):
    """The rows of a shared-pass report (tg.analyze) carry the same contract."""
    metrics = builtin_metrics(needs="activations")
    report = tg.analyze(
        tiny_model,
        tiny_tokens,
        metrics=metrics,
        progress=False,
        options={m: {k: v for k, v in options_for(m).items() if k != "progress"} for m in metrics},
    )
    assert {r.metric for r in report.rows} <= set(registry.declared_rows())
    for m in metrics:
        fam = registry.family_of(m)
        names = {r.metric for r in fam.rows_of(m)}
        assert_contract(fam, m, tg.GeometryReport(rows=[r for r in report.rows if r.metric in names]))


# ----------------------------------------------------------------------------- the check fails
@pytest.fixture
def fake_family():
    @tg.register_metric("_t_contract", needs="weights")
    def fake(model, tokens=None, *, hooks=None, plant=()):
        rows = [{"metric": "_t.value", "value": 1.0, "extras": {"n": 1}}]
        if "undeclared" in plant:
            rows.append({"metric": "_t.planted", "value": 2.0})
        if "hook" in plant:
            rows.append({"metric": "_t.value", "value": 1.0, "hook": "blocks.0.hook_resid_post", "extras": {"n": 1}})
        if "extras" in plant:
            rows.append({"metric": "_t.value", "value": 1.0, "extras": {"n": 1, "surprise": 0}})
        if "missing" in plant:
            rows = [{"metric": "_t.value", "value": 1.0}]
        return tg.GeometryReport.from_rows(rows, model=model)

    fam = tg.register_family(
        tg.FamilySpec(
            "_t_contract", metrics=("_t_contract",), rows=(tg.RowSpec("_t.value", per="model", extras=("n",)),)
        )
    )
    yield fam
    tg.unregister_family("_t_contract")
    tg.unregister_metric("_t_contract")


def test_contract_holds_on_the_fake(fake_family, tiny_model):
    assert_contract(fake_family, "_t_contract", tg.get_metric("_t_contract")(tiny_model))


@pytest.mark.parametrize(
    "plant, message",
    [
        ("undeclared", "row '_t.planted' is not declared"),
        ("hook", "is per model but has hook"),
        ("extras", "undeclared extras ['surprise']"),
        ("missing", "lacks declared extras ['n']"),
    ],
)
def test_contract_fails_on_a_planted_row(fake_family, tiny_model, plant, message):
    report = tg.get_metric("_t_contract")(tiny_model, plant=(plant,))
    with pytest.raises(AssertionError, match=message.replace("[", r"\[").replace("]", r"\]")):
        assert_contract(fake_family, "_t_contract", report)


def test_contract_fails_on_a_declared_row_never_emitted(tiny_model):
    fam = registry.FamilySpec(
        "_t_absent",
        metrics=("shape",),
        rows=(registry.RowSpec("shape.n_layers", per="model"), registry.RowSpec("shape.ghost", per="model")),
    )
    with pytest.raises(AssertionError, match=r"declared rows not emitted: \['shape.ghost'\]"):
        assert_contract(fam, "shape", tg.get_metric("shape")(tiny_model), every_row=False)


def test_the_rendering_tests_synthetic_rows_are_declared():
    """tests/helpers.py's synthetic reports stand in for real reports in the figure/HTML tests: their row
    names and per-hook/per-model shape must be declared ones (their extras are a subset)."""
    from tests.helpers import make_report

    report = make_report(families="all")
    declared = registry.declared_rows()
    assert {r.metric for r in report.rows} <= set(declared)
    for row in report.rows:
        spec = declared[row.metric][1]
        assert (row.hook is not None) == (spec.per == "hook") or spec.per == "item", row
