"""TinyGPT shape sweep: parameter count, shapes per budget, resume after a crash, plots, CLI."""

import json

import pytest
import torch

from tl_geometry.families.interaction import shape_sweep as ss

pytestmark = pytest.mark.usefixtures("one_thread")  # many small passes: see conftest


@pytest.fixture
def text_file(tmp_path):
    from pydoc_data.topics import topics

    p = tmp_path / "text.txt"
    p.write_text("\n".join(topics[k] for k in sorted(topics)[:40]))
    return str(p)


def tiny_cfg(source, **kw):
    base = dict(
        budgets=(9000.0,), depths=(1, 2), steps=3, n_ctx=16, batch_size=4, eval_seqs=4, n_agop_seqs=2, source=source
    )
    base.update(kw)
    return ss.SweepConfig(**base)


@pytest.mark.needs_hooked
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


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(budgets=()), "budgets"),
        (dict(depths=(0,)), "depths"),
        (dict(steps=0), "steps"),
        (dict(test_fraction=1.5), "test_fraction"),
    ],
)
def test_config_bad(kw, match):
    with pytest.raises(ValueError, match=match):
        ss.SweepConfig(**kw)


def test_byte_data(text_file, tmp_path):
    train, test = ss.byte_data(text_file, test_fraction=0.25)
    raw = open(text_file, "rb").read()
    assert len(train) + len(test) == len(raw) and int(train.max()) < 256
    assert bytes(test.tolist()) == raw[-len(test) :]
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

    def crashing(params, train, test, val=None, **kw):
        calls.append((params["budget"], params["n_layers"]))
        if len(calls) == 3:
            raise RuntimeError("simulated kill")
        return real(params, train, test, val, **kw)

    monkeypatch.setattr(ss, "train_run", crashing)
    with pytest.raises(RuntimeError, match="simulated kill"):
        ss.shape_sweep(cfg, out, progress=False)
    done_before = [
        (r["params"]["budget"], r["params"]["n_layers"]) for r in map(json.loads, out.read_text().splitlines()[1:])
    ]
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
    monkeypatch.setattr(ss, "train_run", lambda p, tr, te, *a, **kw: seen.append(p) or {"test_ce": 1.0, "r_dw": 0.1})
    cfg = tiny_cfg(text_file, bytes_per_param=2.0, depths=(1,))
    ss.shape_sweep(cfg, tmp_path / "b.jsonl", progress=False)
    (p,) = seen
    n = ss.n_params(1, p["d_model"], n_ctx=16)
    assert p["steps"] == -(-2 * n // (4 * 16))
    with pytest.raises(ValueError, match="bytes_per_param"):
        ss.SweepConfig(bytes_per_param=0)


def test_frontier_and_plot(tmp_path):
    recs = [
        {"params": {"budget": b, "n_layers": L, "d_model": d}, "test_ce": ce, "r_dw": L / d}
        for b, L, d, ce in [
            (1e5, 1, 68, 2.0),
            (1e5, 2, 52, 1.8),
            (1e5, 3, 44, 1.9),
            (2e5, 1, 96, 1.7),
            (2e5, 4, 52, 1.75),
        ]
    ]
    fr = ss.frontier(recs)
    assert [(f["budget"], f["n_layers"]) for f in fr] == [(1e5, 2), (2e5, 1)]
    assert fr[0]["alpha"] == 2 / 52
    ss.plot_sweep(recs, tmp_path / "s.png")
    assert (tmp_path / "s.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="no sweep records"):
        ss.plot_sweep([])


def shape_argv(text_file, out, budgets=("9000",)):
    """``tl-geometry sweep shape`` over one-layer shapes trained 2 steps at context 16 (seconds each)."""
    return [
        "sweep",
        "shape",
        "--budgets",
        *budgets,
        "--depths",
        "1",
        "--steps",
        "2",
        "--n-ctx",
        "16",
        "--source",
        text_file,
        "--out",
        str(out),
    ]


def test_cli_sweep_shape(text_file, tmp_path, capsys):
    from tl_geometry.cli import main
    from tl_geometry.commands import sweep

    assert {"shape", "toy", "models"} <= set(sweep.experiments())
    out = tmp_path / "cli.jsonl"
    rc = main(shape_argv(text_file, out) + ["--figure", str(tmp_path / "f.png")])
    assert rc == 0 and len(out.read_text().splitlines()) == 2  # the header line and the one shape
    assert "best at" in capsys.readouterr().out
    assert main(["sweep", "shape", "--budgets", "10", "--out", str(out)]) == 2
    assert "too small" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the paper preset
# Authors' values: tests/data/interaction (numbers from github.com/wenjie1835/Interaction_Law, see its README).
import csv  # noqa: E402
import math  # noqa: E402
from pathlib import Path  # noqa: E402

DATA = Path(__file__).parents[3] / "data" / "interaction"


def _rows(name):
    with open(DATA / name, newline="") as f:
        return list(csv.DictReader(f))


def paper_reference_forward(model, tok):
    """The authors' TinyGPT_NTP forward written out with plain torch from the model's weights:
    no biases anywhere but the LayerNorms, qkv/proj/fc1/fc2/lm_head as single matrices."""
    F = torch.nn.functional
    H, dh, d = model.cfg.n_heads, model.cfg.d_head, model.cfg.d_model
    B, T = tok.shape
    ln = lambda x, w, b: F.layer_norm(x, (d,), w, b, eps=1e-5)  # noqa: E731
    x = model.W_E[tok] + model.W_pos[:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for blk in model.blocks:
        h = ln(x, blk.ln1.w, blk.ln1.b)
        Wq, Wk, Wv = (W.permute(1, 0, 2).reshape(d, d) for W in (blk.attn.W_Q, blk.attn.W_K, blk.attn.W_V))
        q, k, v = ((h @ W).view(B, T, H, dh).transpose(1, 2) for W in (Wq, Wk, Wv))
        att = (q @ k.transpose(-2, -1) / math.sqrt(dh)).masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + (att @ v).transpose(1, 2).reshape(B, T, d) @ blk.attn.W_O.reshape(d, d)
        h = ln(x, blk.ln2.w, blk.ln2.b)
        x = x + F.gelu(h @ blk.mlp.W_in) @ blk.mlp.W_out
    return ln(x, model.ln_final.w, model.ln_final.b) @ model.W_U


def test_paper_param_count_is_the_authors():
    assert ss.param_count(5, 120) == 958_800  # the authors' active_n at 1M, depth 5 / d_model 120
    assert ss.param_count(5, 120, preset="library") == ss.n_params(5, 120) == 964_456
    for r in _rows("ntp_shapes.csv"):
        assert ss.param_count(int(r["depth"]), int(r["d_model"])) == int(r["active_n"])


@pytest.mark.parametrize("L, d, n_ctx", [(1, 16, 16), (3, 12, 32)])
def test_paper_model_matches_the_authors_architecture(L, d, n_ctx):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ss.build_model(L, d, preset="paper", n_ctx=n_ctx, seed=0)
    assert ss.trainable_params(model) == ss.param_count(L, d, n_ctx=n_ctx)
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert frozen and all(n.rsplit(".", 1)[-1].startswith("b_") for n in frozen)
    assert all(float(model.get_parameter(n).abs().max()) == 0 for n in frozen)
    # give the LayerNorms non-trivial values so the reference checks them too
    with torch.no_grad():
        for n, p in model.named_parameters():
            if ".ln" in n or n.startswith("ln_final"):
                p.add_(0.1 * torch.randn_like(p))
    tok = torch.randint(0, 256, (2, n_ctx), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(model(tok), paper_reference_forward(model, tok), rtol=1e-4, atol=1e-5)


def test_paper_init_scales():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = ss.build_model(4, 64, preset="paper", n_ctx=64, seed=1)
    assert float(m.W_E.detach().std()) == pytest.approx(0.02, rel=0.05)
    assert float(m.blocks[0].mlp.W_in.detach().std()) == pytest.approx(0.02, rel=0.05)
    assert float(m.blocks[0].mlp.W_out.detach().std()) == pytest.approx(0.02 / math.sqrt(8), rel=0.05)
    assert float(m.blocks[0].attn.W_O.detach().std()) == pytest.approx(0.02 / math.sqrt(8), rel=0.05)


def test_paper_grid_holds_every_committed_shape():
    cells = {(s.budget, s.depth): s for s in ss.paper_grid()}
    rows = _rows("ntp_shapes.csv")
    assert len(rows) == 122
    for r in rows:
        s = cells[(float(r["target_n"]), int(r["depth"]))]
        assert (s.d_model, s.n_heads, s.d_mlp, s.active) == (
            int(r["d_model"]),
            int(r["n_heads"]),
            int(r["d_ff"]),
            int(r["active_n"]),
        )
        assert round(s.pad_ratio, 4) == float(r["pad_ratio"])
    # the whole grid: 11 budgets × 12 depths, none over 20 % padding
    assert len(cells) == len(ss.paper_grid(include_skipped=True)) == 11 * 12
    assert sorted({s.budget for s in cells.values()}) == [float(b) for b in ss.PAPER_BUDGETS]
    assert ss.PAPER_DEPTHS == (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24)


def test_library_preset_is_narrower_where_it_differs():
    """Our biased TinyGPT picks a width 4 narrower than the authors' in 14 of their 108 0.3M–3M shapes."""
    rows = [r for r in _rows("ntp_shapes.csv") if float(r["target_n"]) <= 3e6]
    assert len(rows) == 108
    diffs = [
        int(r["d_model"]) - ss.width_for_budget(float(r["target_n"]), int(r["depth"]), preset="library") for r in rows
    ]
    assert sum(x != 0 for x in diffs) == 14 and set(diffs) == {0, 4}


def test_paper_best_shapes_are_in_the_grid_and_the_interval():
    from tl_geometry.metrics.interaction import in_efficient_interval

    cells = {(s.budget, s.depth): s.d_model for s in ss.paper_grid()}
    for r in _rows("ntp_best_shapes.csv"):
        assert cells[(float(r["target_n"]), int(r["depth_star"]))] == int(r["d_model_star"])
    assert cells[(1e6, 5)] == 120 and cells[(1e7, 10)] == 284
    at_10m = [L / d for (b, L), d in cells.items() if b == 1e7]
    assert any(in_efficient_interval(r) for r in at_10m)  # the old grid (depth <= 6) had none


def test_paper_base_steps_match_the_authors_runs():
    for r in _rows("ntp_steps.csv"):
        base = ss.paper_base_steps(float(r["target_n"]))
        assert math.ceil(1.5 * base) == int(r["steps_run"])
    assert ss.paper_base_steps(1000) == 200  # floor of 200 steps


def test_paper_width_search_against_brute_force():
    for budget in (2e4, 3e5, 1e6, 5e6, 2e9):
        for L in (1, 3, 24):
            ok = [w for w in range(16, 1025, 4) if ss.param_count(L, w) <= budget]
            assert ss.width_for_budget(budget, L, preset="paper") == (max(ok) if ok else None)
    assert ss.width_for_budget(2e9, 1, preset="paper") == 1024  # capped at d_model_max
    assert ss.width_for_budget(1e4, 1, preset="paper") is None  # d_model 16 already over


def test_padding_rule_skips_over_20_percent():
    budgets = [float(b) for b in range(60_000, 200_000, 7_000)]
    cells = ss.grid(budgets, (1, 2, 6, 12), preset="paper", include_skipped=True)
    kept = {(s.budget, s.depth) for s in ss.grid(budgets, (1, 2, 6, 12), preset="paper")}
    n_skipped = 0
    for s in cells:
        if s.d_model is None:
            assert s.skip == "no width" and (s.budget, s.depth) not in kept
            continue
        over = (s.budget - ss.param_count(s.depth, s.d_model)) / s.budget > 0.20
        assert ((s.budget, s.depth) not in kept) == over == s.skip.startswith("padding")
        n_skipped += over
    assert n_skipped > 0
    assert all(
        not s.skip
        for s in ss.grid(budgets, (1, 2, 6, 12), preset="library", include_skipped=True)
        if s.d_model is not None
    )  # no padding rule in ours


def test_presets_bad():
    with pytest.raises(ValueError, match="preset must be one of"):
        ss.param_count(1, 16, preset="authors")
    with pytest.raises(ValueError, match="preset must be one of"):
        ss.SweepConfig(preset="gpt2")
    for kw, match in [
        (dict(warmup=2.5), "warmup"),
        (dict(grad_clip=0), "grad_clip"),
        (dict(patience=0), "patience"),
        (dict(max_train_factor=0.5), "max_train_factor"),
        (dict(agop_split="val"), "agop_split"),
        (dict(eval_seqs=0), "eval_seqs"),
    ]:
        with pytest.raises(ValueError, match=match):
            ss.SweepConfig(**kw)


def test_paper_sweep_config():
    c = ss.PAPER_SWEEP
    assert (c.preset, c.n_ctx, c.batch_size, c.lr, c.weight_decay, c.warmup, c.bytes_per_param) == (
        "paper",
        256,
        64,
        3e-4,
        0.01,
        300,
        60.0,
    )
    assert (c.grad_clip, c.patience, c.eval_every, c.max_train_factor, c.d_head) == (1.0, 10, 200, 1.5, 4)
    assert c.budgets == ss.PAPER_BUDGETS and c.depths == ss.PAPER_DEPTHS


def paper_tiny_cfg(source, **kw):
    base = dict(
        preset="paper",
        budgets=(13000.0,),
        depths=(1,),
        steps=2,
        n_ctx=16,
        batch_size=4,
        eval_seqs=4,
        n_agop_seqs=2,
        source=source,
        warmup=1,
        grad_clip=1.0,
        patience=1,
        eval_every=1,
        max_train_factor=5.0,
        lr=1e-12,
        agop_split="train",
    )
    base.update(kw)
    return ss.SweepConfig(**base)


def test_paper_preset_run_records_preset_and_stops_early(text_file, tmp_path, monkeypatch):
    clips = []
    real_clip = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda ps, m, *a, **k: clips.append(m) or real_clip(ps, m))
    # lr ≈ 0: the validation CE never improves after the first evaluation, so with patience 1 the
    # run stops at the base steps (2) instead of running ceil(5 × 2) = 10
    (r,) = ss.shape_sweep(paper_tiny_cfg(text_file), tmp_path / "p.jsonl", progress=False)
    assert r["preset"] == r["params"]["preset"] == "paper"
    assert r["stopped_early"] and r["steps_run"] == 2 and clips == [1.0, 1.0]
    assert r["n_params"] == ss.param_count(1, r["params"]["d_model"], n_ctx=16) <= 13000
    assert r["pad"] == 13000 - r["n_params"] and r["pad_ratio"] == pytest.approx(r["pad"] / 13000)
    assert 0 <= r["aofe_ratio_out"] < 1 and 0 <= r["aofe_ratio_loss"] < 1 and r["val_ce"] > 0
    (r2,) = ss.shape_sweep(paper_tiny_cfg(text_file, patience=None), tmp_path / "q.jsonl", progress=False)
    assert not r2["stopped_early"] and r2["steps_run"] == 10 and "val_ce" not in r2


def test_cli_dry_run_lists_the_paper_grid(tmp_path, capsys):
    from tl_geometry.cli import main

    assert main(["sweep", "shape", "--paper", "--dry-run", "--out", str(tmp_path / "none.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "preset paper" in out and "132 cells: 132 shapes (0 done, 132 to run), 0 skipped" in out
    line = next(ln for ln in out.splitlines() if ln.split()[:3] == ["1e+06", "5", "120"])
    assert "958,800" in line and "41,200" in line and "3662" in line
    assert not (tmp_path / "none.jsonl").exists()


def test_cli_dry_run_marks_done_runs(text_file, tmp_path, capsys):
    from tl_geometry.cli import main

    out = tmp_path / "d.jsonl"
    args = shape_argv(text_file, out, budgets=("9000", "12000"))
    assert main(shape_argv(text_file, out)) == 0
    capsys.readouterr()
    assert main(args + ["--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "2 cells: 2 shapes (1 done, 1 to run), 0 skipped" in text
