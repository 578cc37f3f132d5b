"""tl-geometry study: several models side by side (tiny byte-level models; no pretrained weights).

A study's rows are the per-model reports' rows exactly; a killed study resumes to the same bytes;
another study's directory is refused with nothing overwritten; a model that fails is named and the
others go on; checkpoint directories and random-init twins expand as documented; the claims and the
convergence matrix are checked against slow references and inputs with a known answer.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.helpers import ROOT, byte_loader
from tl_geometry.errors import InputError, TLGeometryError

pytestmark = pytest.mark.needs_hooked

LOADER = "tests.helpers:byte_loader"
METRICS = ["pga", "spectral", "epsilon", "epsilon_activations", "depth_width", "shape"]
SMALL = dict(n_seqs=4, seq_len=32, n_texts=16, fast=True, loader=LOADER, metrics=METRICS, progress=False)


def _digest(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file() and not p.name.startswith(".")
    }


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    from tl_geometry.studies import study

    out = tmp_path_factory.mktemp("study") / "two"
    return out, study(["byte-L2", "word-L3-d48"], out=out, controls=["random"], **SMALL)


def test_rows_equal_the_per_model_reports(two_models):
    from tl_geometry.runs.pipeline import run_report

    _, result = two_models
    for label in ("byte-L2", "word-L3-d48"):
        model = byte_loader({"model": label})
        model._tl_geometry_name = label
        report = run_report(
            model, n_seqs=4, seq_len=32, fast=True, metrics=METRICS, out=None, figures=False, progress=False
        )
        want = [r.to_dict() for r in report.rows]
        got = [
            {k: r[k] for k in ("model", "hook", "layer", "metric", "value", "extras")}
            for r in result.rows
            if r["model"] == label
        ]
        assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
    # every row carries its stderr and relative depth in the long table
    pga = [r for r in result.rows if r["metric"] == "pga.z"]
    assert pga and all(r["stderr"] is not None and 0 < r["relative_depth"] <= 1 for r in pga)


def test_outputs_and_controls(two_models):
    out, result = two_models
    labels = [m.label for m in result.models]
    assert labels == ["byte-L2", "byte-L2 (random init)", "word-L3-d48", "word-L3-d48 (random init)"]
    assert not result.failed
    for name in ("study.json", "study.md", "index.html", "profiles.png", "capacity_table1.png", "convergence.png"):
        assert (out / name).is_file(), name
    doc = json.loads((out / "study.json").read_text())
    assert {r["model"] for r in doc["rows"]} == set(labels)
    assert {c["verdict"] for c in doc["claims"]} <= {"holds", "fails", "undecided", "not applicable"}
    # the twin is another model: its embedding ε differs from the model's
    eps = {r["model"]: r["value"] for r in doc["rows"] if r["metric"] == "epsilon.W_E"}
    assert eps["byte-L2"] != eps["byte-L2 (random init)"]
    # one convergence row per pair and depth, over the same texts whatever the tokenizer
    assert len(doc["convergence"]) == 2 * 6
    assert {c["n_texts"] for c in doc["convergence"]} == {16}
    # the two tokenizers cut the same texts into other tokens (a word per id against a byte per id)
    from tl_geometry.studies import _text_tokens, study_texts

    texts = study_texts("pydoc", n_texts=16, seed=0)
    (tb, mb), (tw, mw) = (_text_tokens(byte_loader({"model": m}), texts, max_len=64) for m in ("byte-L2", "word-L2"))
    assert tb.shape == tw.shape == (16, 64) and bool(mb.all()) and bool(mw.all())
    assert tb[0, 1:].tolist() == [b + 1 for b in texts[0].encode()[:63]]
    assert len(texts[0].split()) >= 63 and tw[0, 1:].tolist() != tb[0, 1:].tolist()
    assert bool((tb[:, 0] == 0).all()) and bool((tw[:, 0] == 0).all())  # BOS first
    html = (out / "index.html").read_text()
    assert "data:image/png;base64," in html and "Claims" in html and "<script" not in html


def test_rerun_reuses_finished_models(two_models):
    from tl_geometry.studies import study

    out, first = two_models
    before = _digest(out)
    again = study(["byte-L2", "word-L3-d48"], out=out, controls=["random"], **SMALL)
    assert again.ran == () and len(again.reused) == 4
    assert _digest(out) == before  # same bytes


def test_killed_study_resumes_to_the_same_bytes(tmp_path, two_models):
    ref_out, _ = two_models
    out = tmp_path / "killed"
    log = tmp_path / "loads.log"
    code = (
        "import tl_geometry as tg\n"
        f"tg.study(['byte-L2', 'word-L3-d48'], out={str(out)!r}, controls=['random'], n_seqs=4, seq_len=32, "
        f"n_texts=16, fast=True, loader={LOADER!r}, metrics={METRICS!r}, progress=False)\n"
    )
    env = {**os.environ, "PYTHONPATH": ROOT, "TLG_LOAD_LOG": str(log), "TLG_HANG_ON": "word-L3-d48"}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT, start_new_session=True)
    try:
        hang = Path(str(log) + ".hang")
        deadline = time.time() + 240
        while not hang.exists():
            assert proc.poll() is None, "the study ended before it reached the model planned to hang"
            assert time.time() < deadline, "the study never reached the model planned to hang"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    recs = [json.loads(x) for x in (out / "study.jsonl").read_text().splitlines()[1:]]
    assert [r["params"]["label"] for r in recs] == ["byte-L2", "byte-L2 (random init)"]
    assert not (out / "study.json").exists()
    from tl_geometry.studies import study

    result = study(["byte-L2", "word-L3-d48"], out=out, controls=["random"], **SMALL)
    assert set(result.reused) == {"byte-L2", "byte-L2 (random init)"}
    mine, ref = _digest(out), _digest(ref_out)
    for name in ("study.json", "study.md", "index.html", "profiles.png", "capacity_table1.png", "convergence.png"):
        assert mine[name] == ref[name], name


def test_other_settings_refused_nothing_overwritten(two_models):
    from tl_geometry.studies import StudySettingsError, study

    out, _ = two_models
    before = _digest(out)
    with pytest.raises(StudySettingsError, match=r"other settings.*seq_len: was 32, now 16"):
        study(["byte-L2"], out=out, **{**SMALL, "seq_len": 16})
    assert _digest(out) == before


def test_directory_of_other_files_refused(tmp_path):
    from tl_geometry.studies import StudySettingsError, study

    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(StudySettingsError, match="holds no study"):
        study(["byte-L2"], out=tmp_path, **SMALL)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    f = tmp_path / "a-file"
    f.write_text("x")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        study(["byte-L2"], out=f, **SMALL)


def test_failing_model_is_named_and_the_study_goes_on(tmp_path, capsys):
    from tl_geometry.cli import main

    out = tmp_path / "s"
    args = ["study", "byte-L2", "byte-fail", "--out", str(out), "--loader", LOADER, "--fast", "--n-seqs", "4"]
    args += ["--seq-len", "32", "--n-texts", "16", "--metrics", *METRICS, "--no-figures"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "FAILED byte-fail: RuntimeError: planned failure" in err
    doc = json.loads((out / "study.json").read_text())
    assert doc["failed"] == {"byte-fail": "RuntimeError: planned failure: byte-fail does not load"}
    assert {r["model"] for r in doc["rows"]} == {"byte-L2"}
    assert "byte-fail" in (out / "study.md").read_text()
    assert not (out / "profiles.png").exists()


@pytest.mark.parametrize(
    "args, match",
    [
        (["--controls", "bogus"], "invalid choice"),
        (["--n-texts", "3"], "--n-texts"),
        (["--corpus", "random"], "compares models on text"),
        (["--metrics", "no_such_metric"], "no_such_metric"),
    ],
)
def test_bad_arguments_exit_2(tmp_path, capsys, args, match):
    from tl_geometry.cli import main

    with pytest.raises(SystemExit) if args[0] == "--controls" else _nothing():
        rc = main(["study", "byte-L2", "--out", str(tmp_path / "s"), "--loader", LOADER, *args])
        assert rc == 2
    assert match in capsys.readouterr().err
    assert not (tmp_path / "s" / "study.jsonl").exists()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_expand_models(tmp_path):
    from tl_geometry.studies import expand_models

    runs = tmp_path / "traj"
    for step in (0, 200, 10):
        d = runs / f"step-{step:06d}"
        d.mkdir(parents=True)
        (d / "config.json").write_text("{}")
    (runs / "train_log.jsonl").write_text("")
    got = expand_models([str(runs), "byte-L2", "random:byte-L3"], controls=["random"])
    assert [(m.label, m.checkpoint, m.control) for m in got] == [
        ("traj@0", 0, None),
        ("traj@10", 10, None),
        ("traj@200", 200, None),
        ("byte-L2", None, None),
        ("byte-L2 (random init)", None, "random"),
        ("byte-L3 (random init)", None, "random"),
    ]
    (runs / "ckpt-10.safetensors").write_bytes(b"")
    with pytest.raises(InputError, match=r"step number\(s\) \[10\]"):
        expand_models([str(runs)])
    for bad, match in (
        ([], "non-empty"),
        (["a", "a"], "more than once"),
        (["random:"], "name the model"),
        ([3], "non-empty name or path"),
    ):
        with pytest.raises(TLGeometryError, match=match):
            expand_models(bad)
    with pytest.raises(InputError, match="unknown controls"):
        expand_models(["a"], controls=["shuffled"])


# ----------------------------------------------------------------------------- claims
def _z_rows(zs, *, ccr=1, se=0.5, n_null=50, n_layers=None):
    n_layers = n_layers or len(zs)
    return [
        {
            "model": "m",
            "hook": f"blocks.{i}.hook_resid_post",
            "layer": i,
            "metric": "pga.z",
            "value": z,
            "extras": {"ccr": ccr, "stderr": se, "n_null": n_null},
        }
        for i, z in enumerate(zs)
    ]


def _by_id(claims):
    return {c.claim: c for c in claims}


def test_claims_on_known_profiles():
    from tl_geometry.studies.claims import model_claims

    # 12 layers: organized mid-depth, collapsed late, recovered at the final layer (the paper's small model)
    z = [1, 2, 4, 12, 15, 14, 10, 3, -8, -20, -15, 6]
    rows = _z_rows(z) + _z_rows([5] * 12, ccr=5)
    c = _by_id(model_claims("m", rows, n_layers=12, d_model=800))
    assert c["pga.mid_organisation"].verdict == "holds" and c["pga.mid_organisation"].value == 15
    assert c["pga.late_collapse"].verdict == "holds" and c["pga.late_collapse"].value == -20
    assert c["pga.final_recovery"].verdict == "holds"
    assert c["pga.final_recovery"].value == pytest.approx(26) and c["pga.final_recovery"].stderr == pytest.approx(
        math.hypot(0.5, 0.5)
    )
    assert c["pga.ccr5_restoration"].verdict == "holds"
    assert c["pga.embed_alignment"].verdict == "not applicable"  # no depth-0 hook
    # the same numbers with stderr 20: nothing decided
    c = _by_id(model_claims("m", _z_rows(z, se=20), n_layers=12, d_model=800))
    assert {c[k].verdict for k in ("pga.mid_organisation", "pga.late_collapse", "pga.final_recovery")} == {"undecided"}
    # inside the chance band at n_null = 5 although beyond 2 stderr: undecided (|z| = 2.5 < t threshold)
    c = _by_id(model_claims("m", _z_rows([2.5] * 12, se=0.1, n_null=5), n_layers=12, d_model=800))
    assert c["pga.mid_organisation"].verdict == "undecided"
    # d regimes
    c = _by_id(model_claims("m", rows, n_layers=12, d_model=576))
    assert c["pga.ccr5_restoration"].verdict == "not applicable" and "768" in c["pga.ccr5_restoration"].test
    c = _by_id(model_claims("m", rows, n_layers=12, d_model=2048))
    assert c["pga.late_preserved"].verdict == "fails" and "pga.late_collapse" not in c
    assert c["pga.final_recovery"].verdict == "not applicable"
    c = _by_id(model_claims("m", rows, n_layers=12, d_model=1536))
    assert c["pga.late_collapse"].verdict == "not applicable"


def test_embedding_and_spectral_blindness_claims():
    from tl_geometry.studies.claims import model_claims

    z = [9.0, 3, 4, 12, 15, 14, 10, 3, -8, -20, -15, 6]
    rows = _z_rows(z)
    rows[0] = {**rows[0], "hook": "hook_embed", "layer": None}
    # RankMe that tracks z exactly (rank correlation 1): the spectral metric is not blind here
    spec = [
        {
            "model": "m",
            "hook": r["hook"],
            "layer": r["layer"],
            "metric": "spectral.rankme",
            "value": 100 + r["value"],
            "extras": {},
        }
        for r in rows
    ]
    c = _by_id(model_claims("m", rows + spec, n_layers=12, d_model=576))
    assert c["pga.embed_alignment"].verdict == "holds" and c["pga.embed_alignment"].value == 9
    sb = c["pga.spectral_blindness"]
    assert sb.verdict == "fails" and sb.value == pytest.approx(1.0) and sb.stderr == pytest.approx(1 / 3)
    # a RankMe unrelated to z (a permutation with rank correlation ≈ 0): blind
    rng = np.random.default_rng(0)
    from scipy.stats import spearmanr

    for _ in range(100):
        perm = rng.permutation(12)
        if abs(spearmanr(np.array(z)[perm], z).statistic) < 0.2:
            break
    flat = [dict(s, value=float(np.array(z)[perm][i])) for i, s in enumerate(spec)]
    c = _by_id(model_claims("m", rows + flat, n_layers=12, d_model=576))
    assert c["pga.spectral_blindness"].verdict == "holds"


def test_capacity_and_interaction_claims():
    from tl_geometry.studies.claims import cross_model_claims, model_claims

    def rows(eps, ratio, aofe):
        return [
            {
                "model": "m",
                "hook": None,
                "layer": None,
                "metric": "epsilon.W_E",
                "value": eps,
                "extras": {"stderr": 0.0},
            },
            {
                "model": "m",
                "hook": None,
                "layer": None,
                "metric": "depth_width.ratio",
                "value": ratio,
                "extras": {"interval": [0.023, 0.047]},
            },
            *[
                {
                    "model": "m",
                    "hook": f"blocks.{i}.hook_resid_pre",
                    "layer": i,
                    "metric": "agop.aofe_ratio",
                    "value": a,
                    "extras": {"stderr": 0.01},
                }
                for i, a in enumerate(aofe)
            ],
        ]

    c = _by_id(model_claims("a", rows(0.41, 0.03, [0.5, 0.7]), n_layers=2, d_model=64, published_eps=0.41554))
    assert c["capacity.class"].verdict == "holds" and "class1" in c["capacity.class"].where
    c2 = _by_id(model_claims("b", rows(0.05, 0.06, [0.2, 0.2]), n_layers=2, d_model=64, published_eps=0.41554))
    assert c2["capacity.class"].verdict == "fails"
    assert c["interaction.efficient_interval"].value == pytest.approx(0.6)
    assert c["interaction.efficient_interval"].stderr == pytest.approx(math.sqrt(2 * 0.01**2) / 2)
    (x,) = cross_model_claims(
        [c["interaction.efficient_interval"], c2["interaction.efficient_interval"]], {"a": 0.03, "b": 0.06}, ["a", "b"]
    )
    assert x.verdict == "holds" and x.value == pytest.approx(0.4)
    (x,) = cross_model_claims([c["interaction.efficient_interval"]], {"a": 0.03}, ["a"])
    assert x.verdict == "not applicable"


# ----------------------------------------------------------------------------- convergence
def test_convergence_matrix_against_references():
    from scipy.spatial.distance import pdist
    from scipy.stats import spearmanr

    from tl_geometry.studies.convergence import convergence_matrix, decode, encode

    g = torch.Generator().manual_seed(0)
    A = torch.randn(30, 12, generator=g)
    Q, _ = torch.linalg.qr(torch.randn(12, 12, generator=g))
    B = torch.cat([A @ Q, torch.zeros(30, 4)], 1)  # a rotation (and padding): the same distances
    C = torch.randn(30, 16, generator=g)
    V = lambda d: torch.linalg.qr(torch.randn(d, 6, generator=g))[0]  # noqa: E731
    assert np.array_equal(decode(encode(A.numpy())), A.numpy().astype(np.float32).astype(np.float64))
    reps = {
        name: {"depths": {"last": {"hook": "h", "pooled": encode(X.numpy())}}, "readout": encode(V(X.shape[1]).numpy())}
        for name, X in (("a", A), ("b", B), ("c", C))
    }
    rows = {(r["model_a"], r["model_b"]): r for r in convergence_matrix(reps, k=4, n_null=10, seed=0)}
    assert set(rows) == {("a", "b"), ("a", "c"), ("b", "c")}
    assert rows[("a", "b")]["rho_full"] == pytest.approx(1.0, abs=1e-6)
    assert rows[("a", "b")]["rho_full_stderr"] == pytest.approx(0.0, abs=1e-6)

    def ref_rho(X, Y):
        X, Y = X - X.mean(0), Y - Y.mean(0)
        return spearmanr(pdist(X, "cosine"), pdist(Y, "cosine")).statistic

    Aa, Cc = A.double().numpy(), C.double().numpy()
    r = rows[("a", "c")]
    assert r["rho_full"] == pytest.approx(ref_rho(Aa, Cc), abs=1e-6)
    # delete-a-group jackknife over 8 groups of texts, written out
    groups = np.array_split(np.arange(30), 8)
    vals = np.array([ref_rho(np.delete(Aa, g, 0), np.delete(Cc, g, 0)) for g in groups])
    se = math.sqrt(7 / 8 * ((vals - vals.mean()) ** 2).sum())
    assert r["rho_full_stderr"] == pytest.approx(se, rel=1e-6)
    assert r["k"] == 4 and r["n_texts"] == 30 and math.isfinite(r["z"])


def test_readout_caveat_reaches_every_pga_claim():
    from tl_geometry.studies.claims import model_claims

    rows = _z_rows([1, 2, 4, 12, 15, 14, 10, 3, -8, -20, -15, 6])
    rows[3] = {**rows[3], "extras": {**rows[3]["extras"], "readout_caveat": "fold_ln folded it"}}
    claims = model_claims("m", rows, n_layers=12, d_model=800)
    assert all(c.caveat == "fold_ln folded it" for c in claims if c.claim.startswith("pga."))
    assert all(c.caveat == "" for c in claims if not c.claim.startswith("pga."))


def test_processing_is_checked_and_recorded(tmp_path):
    from tl_geometry.studies import study

    with pytest.raises(InputError, match=r"processing must be one of \['none', 'tl'\]"):
        study(["byte-L2"], out=tmp_path / "s", processing="raw", **SMALL)
    assert not (tmp_path / "s").exists()


def test_random_twin_of_a_folded_model_has_no_readout_caveat():
    from tl_geometry.families.pga import readout_caveat
    from tl_geometry.studies import load_study_model

    params = {"spec": "byte-L2", "loader": LOADER, "seed": 0, "label": "t", "control": "random"}
    model = byte_loader({"model": "byte-L2"})
    model.cfg.normalization_type = "RMSPre"
    model.cfg.original_architecture = "Gemma3ForCausalLM"  # flagged when nothing is recorded
    assert readout_caveat(model) is not None
    twin = load_study_model(params)
    twin.cfg.normalization_type = "RMSPre"
    twin.cfg.original_architecture = "Gemma3ForCausalLM"
    assert readout_caveat(twin) is None


def test_convergence_claims():
    from tl_geometry.studies.claims import convergence_claims

    def row(a, b, depth, z, n_null=50):
        return dict(model_a=a, model_b=b, depth=depth, z=z, n_null=n_null, rho_full=0.5, rho_readout=0.6)

    rows = [row("a", "b", "mid", 7.3), row("a", "b", "last", 6.9), row("a", "c", "mid", -5.3)]
    rows += [row("a", "c", "last", 1.0), row("b", "c", "mid", 2.3), row("b", "c", "last", 2.3)]
    rows += [row("a", "r", "mid", 9.0), row("a", "r", "last", 9.0)]  # r: a control, left out
    got = {c.model: c for c in convergence_claims(rows, ["a", "b", "c"])}
    assert set(got) == {"a vs b", "a vs c", "b vs c"}
    assert got["a vs b"].verdict == "holds" and got["a vs b"].value == 6.9
    assert got["a vs c"].verdict == "fails"
    # 2.3 clears one chance band (p ≈ 0.026) but not Holm over two depths (needs p < 0.025 for the smaller)
    assert got["b vs c"].verdict == "undecided"
