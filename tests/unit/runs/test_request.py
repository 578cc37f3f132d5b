"""One request, one protocol (issue 32, item 3): a run's options are checked once into a frozen
request that the later stages read; report flags reach every metric that takes the keyword; the
defaults have one source (tg.analyze and tl-geometry report agree); one output-directory protocol."""

import dataclasses
import json
import warnings

import pytest

import tl_geometry as tg
from tests.helpers import make_byte_model
from tl_geometry.cli import build_parser, main
from tl_geometry.runs import pipeline
from tl_geometry.runs import request as request_mod

TEXT = dict(n_seqs=4, seq_len=32)  # 128 tokens: enough positions for the intrinsic dimension


@pytest.fixture
def byte_model():
    return make_byte_model()


def _no_load(*args, **kwargs):
    raise AssertionError("the model was loaded before the inputs were checked")


def _report_args(*argv):
    return build_parser().parse_args(["report", *argv])


# ------------------------------------------------------------------ item 2: flags reach every metric taking them
def test_max_points_reaches_intrinsic_dimension_through_the_cli(byte_model, tmp_path, monkeypatch, capsys):
    """`tl-geometry report --max-points N` used to stop at pga / epsilon_activations (a hand table):
    with only intrinsic_dimension running it was refused, and in a default report the ID ran with
    its own 1024 points."""
    from tl_geometry import models

    monkeypatch.setattr(models, "load", lambda name, device="cpu": byte_model)
    monkeypatch.setattr(pipeline, "check_model_memory", lambda *a, **k: None)
    out = tmp_path / "o"
    argv = ["report", "--metrics", "intrinsic_dimension", "--max-points", "40", "--no-figures", "--out", str(out)]
    assert main([*argv, "--n-seqs", "4", "--seq-len", "32"]) == 0, capsys.readouterr().err
    prov = json.loads((out / "report.json").read_text())["provenance"]
    assert prov["intrinsic_dimension"]["max_points"] == 40 and prov["intrinsic_dimension"]["n_points"] == 40


def test_a_flag_goes_to_every_metric_of_the_run_that_takes_it():
    req = request_mod.build_report(
        **TEXT, flags={"max_points": 64, "n_probes": 3}, metrics=["pga", "intrinsic_dimension", "nfa", "shape"]
    ).request
    assert {m for m in req.metrics if req.options[m].get("max_points") == 64} == {"pga", "intrinsic_dimension"}
    assert req.options["nfa"]["n_probes"] == 3 and "n_probes" not in req.options["pga"]
    # the default report: every metric taking max_points, none listed by hand
    default = request_mod.build_report(**TEXT, flags={"max_points": 64}).request
    takers = set(request_mod.metrics_taking("max_points", request_mod.default_metrics()))
    assert {"pga", "epsilon_activations", "intrinsic_dimension"} <= takers
    assert {m for m in default.metrics if default.options[m].get("max_points") == 64} == takers


def test_a_plugin_taking_a_flag_keyword_gets_the_flag():
    @tg.register_metric("_t_points", needs="weights")
    def points(model, tokens=None, *, hooks=None, max_points=7):
        return tg.GeometryReport.from_rows([])

    try:
        req = request_mod.build(["_t_points", "shape"], flags={"max_points": 11})
        assert req.options["_t_points"] == {"max_points": 11} and req.options["shape"] == {}
        assert request_mod.flag_defaults("max_points")["_t_points"] == 7
    finally:
        tg.unregister_metric("_t_points")


# ------------------------------------------------------------------ item 3: one source of defaults
def test_help_defaults_are_the_ones_the_run_uses():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["report"]
    helps = {a.dest: a.help for a in sub._actions}
    for option in request_mod.FLAGS:
        for fast in (False, True):
            defaults = request_mod.flag_defaults(option, fast=fast)
            assert defaults, option
            for metric, value in defaults.items():
                assert f"{metric} {value}" in helps[option]
                ran = request_mod.build([metric], fast=fast).options[metric]  # what a run without the flag uses
                assert ran.get(option, value) == value
    assert "pga 30" in helps["n_null"] and "50" not in helps["n_null"]  # the help used to say 50


@pytest.mark.parametrize("fast", [False, True])
def test_analyze_and_the_cli_build_the_same_options(fast):
    metrics = ["pga", "agop", "intrinsic_dimension", "epsilon_activations", "spectral", "shape"]
    from tl_geometry.commands.report import request_from_args

    cli = request_from_args(_report_args("--metrics", *metrics, "--no-figures", *(["--fast"] if fast else [])))
    py = request_mod.build(metrics, fast=fast)
    assert dict(cli.request.options) == dict(py.options)
    assert py.options["pga"]["ccr"] == [0, 1, 5]  # tg.analyze used to run CCR 1 only


def test_analyze_and_run_report_give_the_same_table(byte_model):
    warnings.simplefilter("ignore")
    rep = pipeline.run_report(byte_model, **TEXT, metrics=["pga", "intrinsic_dimension"], progress=False)
    tokens = tg.corpus.tokens(byte_model, "pydoc", **TEXT, seed=0)
    ana = tg.analyze(byte_model, tokens, metrics=["pga", "intrinsic_dimension"], progress=False)

    def table(r):
        return [(x.metric, x.hook, x.value, x.extras.get("ccr")) for x in r.rows]

    assert table(ana) == table(rep)
    assert sorted({x.extras["ccr"] for x in ana.rows if x.metric == "pga.z"}) == [0, 1, 5]


# ------------------------------------------------------------------ item 1: checked once, before any load
def test_a_bad_option_is_refused_before_the_load_naming_it(monkeypatch, tmp_path, capsys):
    from tl_geometry import models

    monkeypatch.setattr(models, "load", _no_load)
    with pytest.raises(ValueError, match=r"option n_null=1 for metric 'pga' is not valid: expected an integer >= 2"):
        pipeline.run_report(metrics=["pga"], options={"pga": {"n_null": 1}}, out=tmp_path / "o", progress=False)
    with pytest.raises(ValueError, match=r"metric 'pga' has no option 'n_nul' \(did you mean 'n_null'\?\); it accepts"):
        tg.analyze(object(), object(), metrics=["pga"], options={"pga": {"n_nul": 3}})
    assert main(["report", "--max-points", "1", "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip().endswith("--max-points must be an integer >= 2, got 1")
    assert not (tmp_path / "o").exists()


def test_each_option_is_checked_once_and_each_signature_read_once(byte_model, monkeypatch):
    """The run reads the request: no stage checks an option or reads a metric's signature again."""
    checked, looked_up = [], []
    real = request_mod.OPTION_CHECKS["n_null"]

    class Counting(type(real)):
        def problem(self, value):
            checked.append(value)
            return real.problem(value)

    monkeypatch.setitem(request_mod.OPTION_CHECKS, "n_null", Counting(real.accepts, real.test, real.convert))
    inner = request_mod.option_params
    monkeypatch.setattr(request_mod, "option_params", lambda name: looked_up.append(name) or inner(name))
    opts = {"pga": {"n_null": 4, "k": 4, "max_points": 64, "ccr": [1]}}
    rep = pipeline.run_report(byte_model, **TEXT, metrics=["pga", "shape"], options=opts, progress=False)
    assert rep.provenance["status"] == "complete"
    assert checked == [4]
    assert sorted(looked_up) == ["pga", "shape"]


def test_the_request_is_frozen():
    req = request_mod.build(["pga"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.metrics = ("shape",)
    with pytest.raises(TypeError):
        req.options["pga"]["n_null"] = 3


def test_a_bad_family_default_is_named(monkeypatch):
    from tl_geometry import registry

    real = registry.families
    bad = dataclasses.replace(registry.get_family("pga"), report_options={"pga": {"n_nul": 3}})
    monkeypatch.setattr(registry, "families", lambda: [bad if f.name == "pga" else f for f in real()])
    with pytest.raises(ValueError, match="report options of family 'pga' give metric 'pga' option 'n_nul'"):
        request_mod.build(["pga"])


# ------------------------------------------------------------------ item 4: one output-directory protocol
def test_report_run_and_write_outputs_share_the_protocol(byte_model, tmp_path, monkeypatch):
    from tl_geometry.io import outdir
    from tl_geometry.render.html import write_outputs

    used = []

    class Recording(outdir.Staging):
        def finish(self):
            used.append(self.out.name)
            return super().finish()

    monkeypatch.setattr(outdir, "Staging", Recording)
    pipeline.run_report(byte_model, **TEXT, metrics=["shape"], out=tmp_path / "run", figures=False, progress=False)
    write_outputs(tg.GeometryReport.from_rows([], model="m"), tmp_path / "render", figures=False)
    assert used == ["run", "render"]
    assert {p.name for p in (tmp_path / "run").iterdir()} >= {"report.json", "report.md", "index.html"}
