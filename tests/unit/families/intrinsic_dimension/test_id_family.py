"""The intrinsic-dimension family (families/intrinsic_dimension/): rows equal the pure estimators on
the captured sample, the declaration's contract, the reading's shape rule, the figure, the CLI's
checks, and the reproduce check at a given model."""

from __future__ import annotations

import math

import pytest
import torch

import tl_geometry as tg
from tl_geometry import capture, registry
from tl_geometry.errors import InputError
from tl_geometry.metrics.id_jackknife import id_jackknife
from tl_geometry.metrics.intrinsic_dimension import gride_scaling, twonn
from tl_geometry.metrics.jackknife import group_labels
from tl_geometry.report import GeometryReport, Row

pytestmark = [
    pytest.mark.needs_hooked,
    # the same token at the same position gives the same embedding: counted in n_duplicates
    pytest.mark.filterwarnings("ignore::tl_geometry.metrics.intrinsic_dimension.DuplicatePointsWarning"),
]


@pytest.fixture(scope="module")
def model():
    from tests.helpers import make_tiny_model

    return make_tiny_model()


@pytest.fixture(scope="module")
def tokens(model):
    g = torch.Generator().manual_seed(3)
    return torch.randint(1, model.cfg.d_vocab, (8, 24), generator=g)


@pytest.fixture(scope="module")
def report(model, tokens):
    return tg.intrinsic_dimension(model, tokens, max_points=120, range_max=8, progress=False)


def test_rows_equal_the_pure_estimators_on_the_same_sample(model, tokens, report):
    from tl_geometry.families.intrinsic_dimension import default_hooks

    hooks = default_hooks(model)
    cap = capture.collect(model, tokens, hooks, max_points=120, seed=0, progress=False)
    tw = {r.hook: r for r in report.rows if r.metric == "id.twonn"}
    assert list(tw) == hooks
    for h in hooks:
        ref = twonn(cap.acts[h], seed=0)
        assert tw[h].value == ref.dimension
        assert tw[h].extras["stderr_points"] == ref.stderr and tw[h].extras["n_points"] == ref.n_points
        jk = id_jackknife(cap.acts[h], group_labels(cap.positions[:, 0], 10), range_max=8)
        assert tw[h].extras["stderr"] == jk.twonn_stderr and tw[h].extras["n_groups"] == jk.n_groups
        scales = gride_scaling(cap.acts[h], range_max=8, seed=0)
        got = sorted((r for r in report.rows if r.metric == "id.gride" and r.hook == h), key=lambda r: r.extras["n1"])
        assert [r.value for r in got] == scales.dimensions
        assert [r.extras["n1"] for r in got] == scales.n1s == [1, 2, 4]


def test_the_declaration_holds(report):
    assert registry.check_rows("intrinsic_dimension", report, strict_extras=True) == []
    assert tg.get_family("intrinsic_dimension").planned == ("intrinsic_dimension",)


def test_eager_and_plan_are_one_definition(model, tokens, report):
    fn = tg.intrinsic_dimension
    assert fn.plan is registry.get_metric("intrinsic_dimension").plan
    again = fn.plan(model, tokens, max_points=120, range_max=8, progress=False).run()
    assert [(r.metric, r.hook, r.value) for r in again.rows] == [(r.metric, r.hook, r.value) for r in report.rows]
    import inspect

    assert "range_max" in inspect.signature(fn).parameters  # the options check reads the plan's signature
    from tl_geometry.runs.analysis import accepts_option

    assert accepts_option("intrinsic_dimension", "range_max") and not accepts_option("intrinsic_dimension", "k")


def test_shared_pass_gives_the_same_rows(model, tokens, report):
    both = tg.analyze(
        model,
        tokens,
        metrics=["intrinsic_dimension", "spectral"],
        options={"intrinsic_dimension": {"max_points": 120, "range_max": 8}},
        progress=False,
    )
    mine = [(r.metric, r.hook, r.value) for r in both.rows if r.metric.startswith("id.")]
    assert mine == [(r.metric, r.hook, r.value) for r in report.rows]
    assert both.provenance["capture"]["forward_passes"] == 1


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"max_points": 10}, "max_points must be an integer >= 32"),
        ({"max_points": True}, "max_points must be an integer"),
        ({"hooks": ["blocks.99.hook_resid_post"]}, "blocks.99.hook_resid_post"),
        ({"duplicates": "keep"}, r"duplicates must be one of \('drop_all', 'one_copy'\)"),
    ],
)
def test_bad_inputs_name_the_problem(model, tokens, kwargs, match):
    with pytest.raises(InputError, match=match):
        tg.intrinsic_dimension(model, tokens, progress=False, **kwargs)


@pytest.mark.filterwarnings("ignore:.*equal neighbour distances")
def test_duplicates_convention_is_an_option_and_is_recorded(model):
    # a vocabulary of 6 tokens: the embeddings (hook_resid_pre at layer 0) repeat vectors
    g = torch.Generator().manual_seed(5)
    toks = torch.randint(1, 7, (8, 24), generator=g)
    hook = "blocks.0.hook_resid_pre"
    kw = dict(hooks=[hook, "blocks.0.hook_resid_post"], max_points=150, range_max=4, progress=False)
    drop = tg.intrinsic_dimension(model, toks, **kw)
    one = tg.intrinsic_dimension(model, toks, duplicates="one_copy", **kw)
    for rep, conv in ((drop, "drop_all"), (one, "one_copy")):
        assert {r.extras["duplicates"] for r in rep.rows} == {conv}
        assert rep.provenance["intrinsic_dimension"]["duplicates"] == conv
    cap = capture.collect(model, toks, [hook], max_points=150, seed=0, progress=False)
    x = cap.acts[hook]
    # slow reference: one copy of each distinct vector, first occurrence, in order
    seen, keep = set(), []
    for i, v in enumerate(x.tolist()):
        if tuple(v) not in seen:
            seen.add(tuple(v))
            keep.append(i)
    from tl_geometry.metrics.intrinsic_dimension import one_copy_per_vector

    assert one_copy_per_vector(x).tolist() == keep
    tw1 = next(r for r in one.rows if r.metric == "id.twonn" and r.hook == hook)
    tw0 = next(r for r in drop.rows if r.metric == "id.twonn" and r.hook == hook)
    assert tw1.value == twonn(x[keep], seed=0).dimension and tw1.extras["n_points"] == len(keep)
    assert tw1.extras["n_duplicates"] == x.shape[0] - len(keep)
    # drop_all keeps only the vectors seen once: fewer points than one_copy
    counts = {}
    for v in x.tolist():
        counts[tuple(v)] = counts.get(tuple(v), 0) + 1
    assert tw0.extras["n_points"] == sum(c == 1 for c in counts.values()) < len(keep)
    with pytest.raises(InputError, match="2-D"):
        one_copy_per_vector(torch.zeros(3))


def test_too_few_positions(model):
    with pytest.raises(InputError, match="valid positions"):
        tg.intrinsic_dimension(model, torch.ones(1, 8, dtype=torch.long), progress=False)


# ----------------------------------------------------------------------------- reading
def _rows(values, ses):
    return [
        Row(model="m", hook=f"blocks.{i}.hook_resid_post", layer=i, metric="id.twonn", value=v, extras={"stderr": s})
        for i, (v, s) in enumerate(zip(values, ses))
    ]


@pytest.mark.parametrize(
    "values, ses, shape",
    [
        ([10, 20, 30, 20, 10], [1] * 5, "peaked"),
        ([10, 20, 30, 20, 10], [10] * 5, "flat within noise"),  # 20 < 2·√(10² + 10²)
        ([10, 15, 20, 25, 30], [1] * 5, "monotone"),
        ([30, 20, 10, 10, 10], [1] * 5, "monotone"),
        ([10, 30], [1, 1], "too few hooks"),
    ],
)
def test_profile_shape_speaks_only_beyond_two_stderr(values, ses, shape):
    from tl_geometry.families.intrinsic_dimension.reading import profile_shape

    assert profile_shape(_rows(values, ses), n_layers=5) == shape


def test_a_peak_chosen_among_many_hooks_is_corrected_for():
    from tl_geometry.families.intrinsic_dimension.reading import profile_shape

    # the peak is 2.5 combined stderrs above both ends: the old 2-stderr rule called it "peaked";
    # it is the maximum of 9 hooks, and Holm over the 14 interior-minus-end differences does not
    values = [10.0, 10.0, 10.0, 10.0, 13.6, 10.0, 10.0, 10.0, 10.0]
    assert 13.6 - 10.0 > 2 * math.hypot(1.0, 1.0)
    assert profile_shape(_rows(values, [1.0] * 9), n_layers=9) == "flat within noise"
    values[4] = 16.0  # 4.2 combined stderrs: decided
    assert profile_shape(_rows(values, [1.0] * 9), n_layers=9) == "peaked"


def test_reading_names_the_range_and_shape():
    from tl_geometry.families.intrinsic_dimension.reading import read_id

    rep = GeometryReport(rows=_rows([10.0, 20.0, 30.0, 20.0, 10.0], [1.0] * 5), provenance={"d_model": 64})
    text = " ".join(read_id(rep))
    assert "from 10 ± 1" in text and "to 30 ± 1" in text and "width 64" in text
    assert "peak inside the network" in text
    assert read_id(GeometryReport()) == []
    # the shared readings find it through the declaration
    from tl_geometry.render import readings

    assert readings.sections(rep)["Intrinsic dimension"] == read_id(rep)


def test_figure(report):
    pytest.importorskip("matplotlib")
    from tl_geometry.families.intrinsic_dimension.figures import plot_id_profile
    from tl_geometry.render import plotting

    fig = plot_id_profile(report)
    assert fig is not None and len(fig.axes) == 2
    assert plot_id_profile(GeometryReport()) is None
    assert "id_profile" in plotting.figures(report)
    plotting.pyplot().close("all")


# ----------------------------------------------------------------------------- CLI and reproduce
@pytest.mark.parametrize(
    "argv, match",
    [
        (["--max-points", "10"], "--max-points"),
        (["--discard-fraction", "1.5"], "--discard-fraction"),
        (["--range-max", "1"], "--range-max"),
        (["--hooks", "x", "--layers", "0"], "either --hooks or --layers"),
    ],
)
def test_cli_refuses_bad_flags_before_loading(capsys, argv, match):
    from tl_geometry.cli import main

    assert main(["id", "--model", "no-such-model-anywhere", *argv]) == 2
    assert match in capsys.readouterr().err


def test_cli_is_discovered_from_the_declaration(capsys):
    from tl_geometry.cli import main

    with pytest.raises(SystemExit) as e:
        main(["id", "--help"])
    assert e.value.code == 0 and "TwoNN" in capsys.readouterr().out


def test_reproduce_check_with_a_given_model(model, tmp_path):
    res = tg.reproduce("intrinsic_dimension", size="tiny", out=tmp_path, model=model, progress=False)
    rows = {r.id: r for r in res.rows}
    assert {"intrinsic_dimension.peak", "intrinsic_dimension.embed", "intrinsic_dimension.last"} <= set(rows)
    assert all(r.status == "measured" and r.paper is None and r.evidence == "measured" for r in rows.values())
    assert math.isfinite(rows["intrinsic_dimension.peak"].stderr)
    assert (tmp_path / "figures" / "id_profile.png").exists()


# ----------------------------------------------------------------------------- points="sequences"
def test_sequence_points_are_each_sequences_mean(model):
    """A slow reference: run_with_cache, drop BOS by hand, mean over each sequence's positions."""
    g = torch.Generator().manual_seed(5)
    toks = torch.randint(1, model.cfg.d_vocab, (40, 6), generator=g)
    toks[:, 0] = model.tokenizer.bos_token_id if getattr(model, "tokenizer", None) else toks[:, 0]
    hook = "blocks.1.hook_resid_post"
    rep = tg.intrinsic_dimension(model, toks, hooks=[hook], points="sequences", range_max=8, progress=False)
    _, cache = model.run_with_cache(toks, names_filter=[hook])
    mask = capture.valid_mask(model, toks)
    ref = torch.stack([cache[hook][b][mask[b]].double().mean(0) for b in range(toks.shape[0])]).float()
    want = twonn(ref, seed=0)
    row = next(r for r in rep.rows if r.metric == "id.twonn")
    assert row.value == pytest.approx(want.dimension, rel=1e-6)
    assert row.extras["points"] == "sequences" and row.extras["n_points"] == 40


def test_sequence_points_need_enough_sequences(model, tokens):
    with pytest.raises(InputError, match="one point per sequence: 8 sequences"):
        tg.intrinsic_dimension(model, tokens, points="sequences", progress=False)
    with pytest.raises(InputError, match="points must be one of"):
        tg.intrinsic_dimension(model, tokens, points="words", progress=False)


# ----------------------------------------------------------------------------- grouped jackknife
def _slow_jackknife(x, groups, range_max):
    """Each replicate recomputed from scratch on the points outside the group (the definition)."""
    import numpy as np

    reps = []
    for g in sorted(set(groups.tolist())):
        keep = groups != g
        t = twonn(x[keep], seed=0).dimension
        s = gride_scaling(x[keep], range_max=range_max, seed=0).dimensions
        reps.append([t, *s])
    a = np.asarray(reps)
    G = len(a)
    return np.sqrt((G - 1) / G * ((a - a.mean(0)) ** 2).sum(0))


@pytest.mark.parametrize("seed", [0, 1])
def test_jackknife_replicates_are_the_exact_estimates_without_each_group(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(300, 4, generator=g, dtype=torch.float64) @ torch.randn(4, 12, generator=g, dtype=torch.float64)
    groups = torch.arange(300) // 30  # 10 groups of 30 "sequences' points"
    got = id_jackknife(x, groups, range_max=16)
    want = _slow_jackknife(x, groups, 16)
    assert got.n1s == (1, 2, 4, 8) and got.n_groups == 10
    assert got.twonn_stderr == pytest.approx(want[0], rel=1e-9)
    assert list(got.gride_stderr) == pytest.approx(list(want[1:]), rel=1e-7)


def test_jackknife_with_clustered_groups_falls_back_to_an_exact_search(monkeypatch):
    """Leaving out most of a far cluster empties its last points' candidate lists: they are searched again."""
    g = torch.Generator().manual_seed(2)
    centers = torch.randn(6, 10, generator=g, dtype=torch.float64) * 20
    x = torch.cat([c + torch.randn(60, 10, generator=g, dtype=torch.float64) for c in centers])
    groups = torch.tensor([2 * c + (i >= 55) for c in range(6) for i in range(60)])
    calls = []
    real = torch.cdist
    monkeypatch.setattr(torch, "cdist", lambda *a, **k: calls.append(1) or real(*a, **k))
    got = id_jackknife(x, groups, range_max=8)
    assert calls, "the fallback search did not run"
    want = _slow_jackknife(x, groups, 8)
    assert got.twonn_stderr == pytest.approx(want[0], rel=1e-9)
    assert list(got.gride_stderr) == pytest.approx(list(want[1:]), rel=1e-7)


def test_jackknife_bad_groups():
    x = torch.randn(50, 3)
    with pytest.raises(InputError, match="one label per point"):
        id_jackknife(x, torch.zeros(10))
    with pytest.raises(InputError, match="at least 2"):
        id_jackknife(x, torch.zeros(50))


# ----------------------------------------------------------------------------- GRIDE's calibrated inflation
def _gride(report, n1):
    return [r for r in report.rows if r.metric == "id.gride" and r.extras["n1"] == n1]


@pytest.mark.parametrize("factor", [None, 2.5])  # None: the shipped constant; 2.5: a factor that shows
def test_gride_inflation_at_n1_4_is_named_recorded_and_shown(model, tokens, monkeypatch, factor):
    from tl_geometry.families.intrinsic_dimension.figures import inflation_note
    from tl_geometry.metrics import gride as gride_mod

    if factor is not None:
        monkeypatch.setattr(gride_mod, "GRIDE_STDERR_INFLATION", factor)
    f = gride_mod.GRIDE_STDERR_INFLATION
    cal = tg.intrinsic_dimension(model, tokens, max_points=120, range_max=8, progress=False)
    jk = tg.intrinsic_dimension(model, tokens, max_points=120, range_max=8, progress=False, gride_stderr="jackknife")
    hooks = {r.hook for r in cal.rows}
    for n1 in (1, 2, 4):
        for a, b in zip(_gride(cal, n1), _gride(jk, n1)):
            assert a.value == b.value  # the estimate never changes, only its error
            assert a.extras["stderr_jackknife"] == b.extras["stderr_jackknife"] == b.extras["stderr"]
            assert b.extras["stderr_inflation"] == 1.0 and b.extras["stderr_calibration"] == ""
            want = f if n1 == 4 else 1.0
            assert a.extras["stderr_inflation"] == want
            assert a.extras["stderr"] == pytest.approx(b.extras["stderr"] * want, rel=1e-15)
            # the calibrated scale names its calibration, whatever the factor came out as
            named = a.extras["stderr_calibration"] == gride_mod.GRIDE_STDERR_CALIBRATION != ""
            assert named == (n1 == 4)
            assert (gride_mod.GRIDE_STDERR_CALIBRATION in a.extras["stderr_method"]) == (n1 == 4)
            assert gride_mod.GRIDE_STDERR_CALIBRATION not in b.extras["stderr_method"]
    assert len(_gride(cal, 4)) == len(hooks)
    meta = cal.provenance["intrinsic_dimension"]
    assert meta["gride_stderr"] == "calibrated"
    assert meta["gride_stderr_inflation"] == {"4": f}
    assert meta["gride_stderr_calibration"] == gride_mod.GRIDE_STDERR_CALIBRATION
    meta_jk = jk.provenance["intrinsic_dimension"]
    assert meta_jk["gride_stderr"] == "jackknife" and meta_jk["gride_stderr_inflation"] == {}
    assert registry.check_rows("intrinsic_dimension", cal, strict_extras=True) == []
    note = inflation_note([r for r in cal.rows if r.metric == "id.gride"])
    assert f"n1 = 4: stderr × {f:g}" in note and gride_mod.GRIDE_STDERR_CALIBRATION in note
    assert inflation_note([r for r in jk.rows if r.metric == "id.gride"]) == ""
    pytest.importorskip("matplotlib")
    from tl_geometry.families.intrinsic_dimension.figures import plot_id_profile
    from tl_geometry.render import plotting

    fig = plot_id_profile(cal)
    title = fig.axes[1].get_title()
    assert f"n1 = 4: stderr × {f:g}" in title and gride_mod.GRIDE_STDERR_CALIBRATION in title
    assert "×" not in plot_id_profile(jk).axes[1].get_title()
    plotting.pyplot().close("all")


def test_gride_stderr_inflation_function():
    from tl_geometry.metrics.gride import GRIDE_STDERR_INFLATION, gride_stderr_inflation

    assert gride_stderr_inflation(4) == GRIDE_STDERR_INFLATION
    assert [gride_stderr_inflation(n1) for n1 in (1, 2, 8, 16, 32)] == [1.0] * 5
    assert gride_stderr_inflation(4, "jackknife") == 1.0
    with pytest.raises(InputError, match=r"gride_stderr must be one of \('calibrated', 'jackknife'\), got 'fisher'"):
        gride_stderr_inflation(4, "fisher")
    with pytest.raises(InputError, match="n1"):
        gride_stderr_inflation(0)


def test_bad_gride_stderr_is_refused_before_any_work(model, tokens):
    with pytest.raises(InputError, match=r"gride_stderr must be one of \('calibrated', 'jackknife'\), got 'inflated'"):
        tg.intrinsic_dimension(model, tokens, progress=False, gride_stderr="inflated")


def test_cli_takes_gride_stderr(capsys):
    from tl_geometry.cli import main

    with pytest.raises(SystemExit) as e:
        main(["id", "--model", "no-such-model-anywhere", "--gride-stderr", "fisher"])
    assert e.value.code == 2
    assert "argument --gride-stderr: invalid choice: 'fisher'" in capsys.readouterr().err
