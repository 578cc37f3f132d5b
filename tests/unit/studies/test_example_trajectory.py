"""examples/study_trajectory.py: a tiny run's checkpoints (log-spaced, atomic, loadable), resuming, the PGA table.

The example trains a 2-layer, d_model 32 GPT-2 for 16 steps on pydoc here (the script's default is
4 layers, d_model 128, 400 steps); about 10 s in all.
"""

import dataclasses
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
import torch

import tl_geometry as tg

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "study_trajectory.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("study_trajectory", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("study_trajectory", mod)  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return sys.modules["study_trajectory"]


st = _load_example()

TINY = st.TrainConfig(
    steps=16,
    checkpoints=8,
    n_layer=2,
    d_model=32,
    n_head=2,
    n_ctx=64,
    vocab_size=320,
    batch_size=4,
    lr=1e-2,
    warmup=2,
    corpus=("pydoc",),
)


def _weights(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(path / "model.safetensors")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One uninterrupted tiny run: (out dir, checkpoint dir, what it said)."""
    out = tmp_path_factory.mktemp("trajectory")
    said: list[str] = []
    root = st.train(out, TINY, threads=1, say=said.append)
    return out, root, said


def test_checkpoint_steps_are_log_spaced_from_zero():
    assert st.checkpoint_steps(400, 8) == [0, 6, 12, 25, 50, 100, 200, 400]
    assert st.checkpoint_steps(16, 8) == [0, 1, 2, 3, 4, 5, 8, 16]
    for total, n in [(7, 8), (16, 8), (100, 5), (1000, 12)]:
        s = st.checkpoint_steps(total, n)
        assert len(s) == n and s[0] == 0 and s[-1] == total and all(a < b for a, b in zip(s, s[1:]))
    with pytest.raises(ValueError):
        st.checkpoint_steps(5, 8)


def test_checkpoints_ordered_and_loadable(run):
    out, root, _ = run
    dirs = st.checkpoint_dirs(root)
    assert [st.step_of(d) for d in dirs] == st.checkpoint_steps(TINY.steps, TINY.checkpoints)
    assert len(dirs) >= 8
    assert [d.name for d in dirs] == sorted(d.name for d in dirs)  # zero-padded: name order is step order
    assert sorted(p.name for p in root.iterdir()) == [d.name for d in dirs]  # nothing else in the model directory
    assert not list(out.glob(".tmp-*")) and not (out / st.STATE).exists()
    for d in dirs:
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in d.iterdir()}
    for d in (dirs[0], dirs[-1]):  # loading all eight adds seconds and tests nothing more
        model = tg.models.load(d)
        assert model.cfg.n_layers == TINY.n_layer and model.cfg.d_model == TINY.d_model
        assert model.tokenizer is not None
        toks = tg.corpus.tokens(model, "pydoc", n_seqs=8, seq_len=64)
        assert toks.shape == (8, 64) and int(toks[0, 0]) == model.tokenizer.bos_token_id
    assert not torch.equal(
        _weights(dirs[0])["transformer.h.0.mlp.c_fc.weight"], _weights(dirs[-1])["transformer.h.0.mlp.c_fc.weight"]
    )


def test_loss_decreases_on_the_log(run):
    out, _, _ = run
    log = st.read_log(out)
    losses = [r["loss"] for r in log if "loss" in r]
    assert [r["step"] for r in log if "loss" in r] == list(range(TINY.steps))
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4 - 0.3
    val = {r["step"]: r["val_loss"] for r in log if "val_loss" in r}
    assert sorted(val) == st.checkpoint_steps(TINY.steps, TINY.checkpoints)
    assert val[TINY.steps] < val[0]
    assert json.loads((out / st.CONFIG).read_text()) == TINY.to_json()


def test_rerun_skips(run):
    out, root, _ = run
    before = {d.name: d.stat().st_mtime_ns for d in st.checkpoint_dirs(root)}
    log = (out / st.LOG).read_text()
    said: list[str] = []
    assert st.train(out, TINY, threads=1, say=said.append) == root
    assert any("skipped" in s for s in said) and not any("step" in s and "held-out" in s for s in said)
    assert {d.name: d.stat().st_mtime_ns for d in st.checkpoint_dirs(root)} == before
    assert (out / st.LOG).read_text() == log
    with pytest.raises(SystemExit, match="other settings"):  # another config in the same directory is refused
        st.train(out, st.TrainConfig(**{**TINY.to_json(), "corpus": ("pydoc",), "lr": 1e-3}), threads=1)


def test_interrupted_run_resumes_bit_identically(run, tmp_path, monkeypatch):
    """A crash between a checkpoint's rename and the trainer state's save: the rerun resumes from the
    previous checkpoint, keeps the one on disk, and ends with the uninterrupted run's weights."""
    _, full_root, _ = run
    real = st.save_checkpoint
    crash_at = st.checkpoint_steps(TINY.steps, TINY.checkpoints)[5]

    def crashing(model, tokenizer, root, step):
        path = real(model, tokenizer, root, step)
        if step == crash_at:
            raise KeyboardInterrupt
        return path

    monkeypatch.setattr(st, "save_checkpoint", crashing)
    with pytest.raises(KeyboardInterrupt):
        st.train(tmp_path, TINY, threads=1, say=lambda s: None)
    monkeypatch.setattr(st, "save_checkpoint", real)
    assert st.step_of(st.checkpoint_dirs(tmp_path / st.CHECKPOINTS)[-1]) == crash_at
    said: list[str] = []
    root = st.train(tmp_path, TINY, threads=1, say=said.append)
    prev = st.checkpoint_steps(TINY.steps, TINY.checkpoints)[4]
    assert any(f"resuming at step {prev}" in s for s in said)
    for a, b in zip(st.checkpoint_dirs(full_root), st.checkpoint_dirs(root), strict=True):
        assert a.name == b.name
        wa, wb = _weights(a), _weights(b)
        assert all(torch.equal(wa[k], wb[k]) for k in wa), a.name
    assert [r["step"] for r in st.read_log(tmp_path) if "loss" in r] == list(range(TINY.steps))


def test_pga_profile_and_answer():
    """The table the study's rows become, on made-up rows (the study itself is tested with it)."""
    pd = pytest.importorskip("pandas")
    rows = []
    for step, zs in [(0, [0.5, 1.0, 0.2]), (2, [1.0, 6.0, 2.0]), (16, [3.0, 9.0, 8.0])]:
        for layer, z in enumerate(zs):
            for ccr in (0, 1):
                rows.append(
                    {
                        "model": f"tiny@{step}",
                        "hook": f"blocks.{layer}.hook_resid_post",
                        "layer": layer,
                        "metric": "pga.z",
                        "value": z + ccr,
                        "stderr": 0.5,
                        "ccr": ccr,
                        "n_null": 20,
                    }
                )
    rows.append({"model": "tiny@0", "hook": None, "layer": None, "metric": "spectral.rankme", "value": 3.0})
    df = pd.DataFrame(rows)
    df["layer"] = df["layer"].astype("Int64")
    p = st.pga_profile(df, n_layers=3)
    assert (
        p.ccr == 0
        and list(p.z.index) == [0, 2, 16]
        and list(p.z.columns) == pytest.approx([1 / 3, 2 / 3, 1.0], abs=1e-3)
    )
    assert p.z.loc[2].tolist() == [1.0, 6.0, 2.0]
    assert p.organised.loc[2].tolist() == [False, True, False]  # 6 − 2·0.5 > t95 ≈ 2.14; 2 − 1 is not
    assert p.any_organised.tolist() == [False, True, True]
    assert "yes: first at step 2 of 16" in st.early_answer(p.any_organised, 16)
    assert st.early_answer(p.any_organised, 8).startswith("PGA organisation early in training? no: first at step 2")
    assert "*" in st.format_profile(p)
    assert st.pga_profile(df, n_layers=3, ccr=1).z.loc[0].tolist() == [1.5, 2.0, 1.2]


def test_run_study_prints_the_profile(run, monkeypatch, capsys):
    """run_study on the tiny checkpoints, with a stand-in for tg.study that returns what the example
    reads from it (``.report()``: rows labelled ``<dir>@<step>``); and the note where there is none."""
    out, root, _ = run
    calls = []

    class Result:
        def __init__(self, report):
            self._report = report

        def report(self):
            return self._report

    def fake_study(models, *, out, fast, n_seqs, seq_len, metrics, force):
        calls.append((models, out, fast, n_seqs, seq_len, metrics))
        rows = []
        for d in st.checkpoint_dirs(models[0])[::3]:
            model = tg.models.load(d)
            toks = tg.corpus.tokens(model, "pydoc", n_seqs=n_seqs, seq_len=seq_len)
            rep = tg.analyze(
                model, toks, metrics=["pga"], options={"pga": {"n_null": 20, "ccr": [0], "k": 8}}, progress=False
            )
            rows += [dataclasses.replace(r, model=f"{Path(models[0]).name}@{st.step_of(d)}") for r in rep.rows]
        return Result(tg.GeometryReport(rows=tuple(rows)))

    monkeypatch.setattr(st, "find_study", lambda: fake_study)
    assert st.run_study(root, out, TINY) == 0
    said = capsys.readouterr().out
    assert calls == [([str(root)], str(out / "study"), True, 8, 64, ["pga", "spectral", "epsilon_activations"])]
    assert "PGA z (CCR-0) by checkpoint" in said and "PGA organisation early in training? " in said
    steps = st.checkpoint_steps(TINY.steps, TINY.checkpoints)[::3]
    assert [int(m) for m in re.findall(r"^(\d+) +-?\d", said, flags=re.M)] == steps  # the table's rows

    monkeypatch.setattr(st, "find_study", lambda: None)
    assert st.run_study(root, out, TINY) == 0
    assert "has no tg.study" in capsys.readouterr().out
