"""TinyGPT shape sweep: parameter count, shapes per budget, resume after a crash, plots, CLI."""

import json

import pytest
import torch


pytestmark = pytest.mark.usefixtures("one_thread")  # many small passes: see conftest

from tl_geometry.experiments import shape_sweep as ss


@pytest.fixture
def text_file(tmp_path):
    from pydoc_data.topics import topics

    p = tmp_path / "text.txt"
    p.write_text("\n".join(topics[k] for k in sorted(topics)[:40]))
    return str(p)


def tiny_cfg(source, **kw):
    base = dict(budgets=(9000.0,), depths=(1, 2), steps=3, n_ctx=16, batch_size=4, eval_seqs=4, n_agop_seqs=2,
                source=source)
    base.update(kw)
    return ss.SweepConfig(**base)


@pytest.mark.parametrize("L, d, n_ctx", [(1, 8, 16), (3, 12, 64), (2, 20, 256)])
def test_n_params_matches_model(L, d, n_ctx):
    import warnings

    from transformer_lens import HookedTransformer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = ss.tinygpt_config(L, d, n_ctx=n_ctx)
        model = HookedTransformer(cfg)
    assert sum(p.numel() for p in model.parameters()) == ss.n_params(L, d, n_ctx=n_ctx)
    assert cfg.d_mlp == 4 * d and cfg.n_heads == d // 4 and cfg.d_vocab == 256 and cfg.normalization_type == "LN"


def test_width_is_the_largest_under_budget():
    for budget in (3e4, 1e5, 3e5):
        for L in (1, 2, 5):
            d = ss.width_for_budget(budget, L, n_ctx=64)
            brute = max(w for w in range(4, 400, 4) if ss.n_params(L, w, n_ctx=64) <= budget)
            assert d == brute


def test_shapes_for_budget_and_too_small():
    shapes = ss.shapes_for_budget(1e5, n_ctx=64)
    assert [L for L, _ in shapes] == [1, 2, 3, 4, 5, 6]
    assert all(ss.n_params(L, d, n_ctx=64) <= 1e5 for L, d in shapes)
    assert [d for _, d in shapes] == sorted((d for _, d in shapes), reverse=True)
    with pytest.raises(ValueError, match="too small for even depth 1"):
        ss.shapes_for_budget(1000, n_ctx=64)
    with pytest.raises(ValueError, match="not a multiple of d_head"):
        ss.tinygpt_config(2, 10)


@pytest.mark.parametrize("kw, match", [(dict(budgets=()), "budgets"), (dict(depths=(0,)), "depths"),
                                       (dict(steps=0), "steps"), (dict(test_fraction=1.5), "test_fraction")])
def test_config_bad(kw, match):
    with pytest.raises(ValueError, match=match):
        ss.SweepConfig(**kw)


def test_byte_data(text_file, tmp_path):
    train, test = ss.byte_data(text_file, test_fraction=0.25)
    raw = open(text_file, "rb").read()
    assert len(train) + len(test) == len(raw) and int(train.max()) < 256
    assert bytes(test.tolist()) == raw[-len(test):]
    with pytest.raises(ValueError, match="could not load|not installed"):
        ss.byte_data("no-such-source-" + "x" * 8)
    small = tmp_path / "small.txt"
    small.write_text("a")
    with pytest.raises(ValueError, match="only 1 bytes"):
        ss.byte_data(str(small))


def test_sweep_runs_and_resumes_after_a_crash(text_file, tmp_path, monkeypatch):
    cfg = tiny_cfg(text_file, budgets=(9000.0, 12000.0))
    out = tmp_path / "sweep.jsonl"
    real = ss.train_run
    calls = []

    def crashing(params, train, test):
        calls.append((params["budget"], params["n_layers"]))
        if len(calls) == 3:
            raise RuntimeError("simulated kill")
        return real(params, train, test)

    monkeypatch.setattr(ss, "train_run", crashing)
    with pytest.raises(RuntimeError, match="simulated kill"):
        ss.shape_sweep(cfg, out, progress=False)
    done_before = [(r["params"]["budget"], r["params"]["n_layers"]) for r in map(json.loads, out.read_text().splitlines())]
    assert done_before == calls[:2]

    calls.clear()
    recs = ss.shape_sweep(cfg, out, progress=False)
    n_jobs = sum(len(ss.shapes_for_budget(b, cfg.depths, n_ctx=cfg.n_ctx)) for b in cfg.budgets)
    assert len(recs) == n_jobs == 4
    assert len({r["key"] for r in recs}) == n_jobs  # none repeated, none lost
    assert not set(calls) & set(done_before)  # finished runs were not run again
    for r in recs:
        assert r["test_ce"] > 0 and 0 <= r["aofe_ratio_out"] < 1 and 0 <= r["wtw_aofe_ratio"] < 1
        assert r["r_dw"] == r["params"]["n_layers"] / r["params"]["d_model"]
        assert r["n_params"] <= r["params"]["budget"]
    calls.clear()
    assert len(ss.shape_sweep(cfg, out, progress=False)) == 4 and calls == []


def test_bytes_per_param_sets_steps(text_file, tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(ss, "train_run", lambda p, tr, te: seen.append(p) or {"test_ce": 1.0, "r_dw": 0.1})
    cfg = tiny_cfg(text_file, bytes_per_param=2.0, depths=(1,))
    ss.shape_sweep(cfg, tmp_path / "b.jsonl", progress=False)
    (p,) = seen
    n = ss.n_params(1, p["d_model"], n_ctx=16)
    assert p["steps"] == -(-2 * n // (4 * 16))
    with pytest.raises(ValueError, match="bytes_per_param"):
        ss.SweepConfig(bytes_per_param=0)


def test_frontier_and_plot(tmp_path):
    recs = [{"params": {"budget": b, "n_layers": L, "d_model": d}, "test_ce": ce, "r_dw": L / d}
            for b, L, d, ce in [(1e5, 1, 68, 2.0), (1e5, 2, 52, 1.8), (1e5, 3, 44, 1.9), (2e5, 1, 96, 1.7), (2e5, 4, 52, 1.75)]]
    fr = ss.frontier(recs)
    assert [(f["budget"], f["n_layers"]) for f in fr] == [(1e5, 2), (2e5, 1)]
    assert fr[0]["alpha"] == 2 / 52
    ss.plot_sweep(recs, tmp_path / "s.png")
    assert (tmp_path / "s.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="no sweep records"):
        ss.plot_sweep([])


def test_cli_sweep_shape(text_file, tmp_path, capsys):
    from tl_geometry.cli import main
    from tl_geometry.commands import sweep

    assert {"shape", "toy"} <= set(sweep.BUILDERS)
    out = tmp_path / "cli.jsonl"
    rc = main(["sweep", "shape", "--budgets", "9000", "--depths", "1", "--steps", "2", "--n-ctx", "16",
               "--source", text_file, "--out", str(out), "--figure", str(tmp_path / "f.png")])
    assert rc == 0 and len(out.read_text().splitlines()) == 1
    assert "best at" in capsys.readouterr().out
    assert main(["sweep", "shape", "--budgets", "10", "--out", str(out)]) == 2
    assert "too small" in capsys.readouterr().err
