"""One run of the shape sweep: train a TinyGPT shape on bytes, then measure its test CE and AGOPs."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from tl_geometry.errors import InputError
from tl_geometry.families.interaction.byte_text import _eval_windows, _windows
from tl_geometry.families.interaction.tinygpt import _check_preset, build_model, trainable_params

__all__ = ["PAPER_PROJECTION_SEED", "train_run"]

PAPER_PROJECTION_SEED = 42
"""Seed of the fixed output-space projection P in the authors' code."""


def _loss(model: Any, win: Tensor, *, shifted: bool, reduction: str = "mean") -> Tensor:
    """Next-byte cross-entropy (nats) of windows: TL's loss (library), or the authors' input/target
    split of (n_ctx+1)-byte windows (paper: every input position predicts a byte)."""
    if not shifted:
        if reduction == "sum":
            return model(win, return_type="loss", loss_per_token=True).sum()
        return model(win, return_type="loss")
    logits = model(win[:, :-1])
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), win[:, 1:].reshape(-1), reduction=reduction
    )


@torch.no_grad()
def _ce(model: Any, windows: Tensor, *, shifted: bool, batch_size: int, device: Any) -> float:
    tot, n = 0.0, 0
    for b in windows.split(batch_size):
        b = b.to(device)
        tot += float(_loss(model, b, shifted=shifted, reduction="sum"))
        n += b.shape[0] * (b.shape[1] - 1)
    return tot / n


def train_run(
    params: Mapping[str, Any], train: Tensor, test: Tensor, val: Tensor | None = None, *, device: Any = "cpu"
) -> dict:
    """Train one TinyGPT shape and measure it; ``params`` is one job of [`shape_sweep`][tl_geometry.families.interaction.shape_sweep.shape_sweep].

    Returns test_ce (and val_ce with early stopping), train_loss, aofe_ratio_out (output-space
    AGOP, exact; projection seed 42 in the paper preset), aofe_ratio_loss (loss-gradient AGOP at
    the token embeddings), wtw_aofe_ratio, r_dw, n_params (trainable), pad, pad_ratio, preset,
    steps_run, stopped_early, seconds.
    """
    from tl_geometry.families.interaction import agop
    from tl_geometry.metrics.interaction import depth_width_ratio, wtw_aofe

    t0 = time.perf_counter()
    p = dict(params)
    preset = _check_preset(p.get("preset", "library"))
    paper = preset == "paper"
    device = torch.device(device)
    L, d, n_ctx = int(p["n_layers"]), int(p["d_model"]), int(p["n_ctx"])
    model = build_model(L, d, preset=preset, d_head=p["d_head"], n_ctx=n_ctx, seed=p["seed"]).to(device)
    trainable = [x for x in model.parameters() if x.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=p["lr"], weight_decay=p["weight_decay"])
    base = int(p["steps"])
    total = max(base, math.ceil(float(p.get("max_train_factor", 1.0)) * base))
    w = float(p["warmup"])
    n_warm = int(w) if w >= 1 else int(w * total)

    def lr_at(step: int) -> float:
        if step < n_warm:
            return (step + 1) / n_warm
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - n_warm) / max(1, total - n_warm))))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    gen = torch.Generator().manual_seed(int(p["seed"]) + (1000 * L if paper else 0))
    span = n_ctx + 1 if paper else n_ctx
    patience, clip = p.get("patience"), p.get("grad_clip")
    eval_every = int(p.get("eval_every", 200))
    val_win = _eval_windows(val, p["eval_seqs"], n_ctx, shifted=paper) if (patience and val is not None) else None
    best_val, best_state, stale, stopped, steps_run = float("inf"), None, 0, False, 0
    model.train()
    loss = torch.tensor(float("nan"))
    for step in range(total):
        batch = _windows(train, p["batch_size"], span, gen).to(device)
        loss = _loss(model, batch, shifted=paper)
        if not torch.isfinite(loss):
            raise InputError(f"training diverged (loss {float(loss)}) for depth {L}, d_model {d}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(trainable, float(clip))
        opt.step()
        sched.step()
        steps_run = step + 1
        if val_win is not None and (steps_run % eval_every == 0 or steps_run == total):
            model.eval()
            v = _ce(model, val_win, shifted=paper, batch_size=p["batch_size"], device=device)
            model.train()
            if v + 1e-6 < best_val:
                best_val, stale = v, 0
                best_state = {k: t.detach().clone() for k, t in model.state_dict().items()}
            else:
                stale += 1
            if patience is not None and steps_run >= base and stale >= int(patience):  # val_win implies patience
                stopped = True
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    test_win = _eval_windows(test, p["eval_seqs"], n_ctx, shifted=paper)
    test_ce = _ce(model, test_win, shifted=paper, batch_size=p["batch_size"], device=device)
    if p.get("agop_split", "test") == "train":
        agop_win = _windows(train, p["n_agop_seqs"], n_ctx, torch.Generator().manual_seed(int(p["seed"]) + 42))
    else:
        agop_win = _eval_windows(test, p["n_agop_seqs"], n_ctx)
    bs = min(len(agop_win), 32 if device.type == "cuda" else 8)
    out = agop(
        model,
        agop_win,
        space="output",
        exact=True,
        progress=False,
        batch_size=bs,
        projection_seed=PAPER_PROJECTION_SEED if paper else None,
    )
    lossg = agop(model, agop_win, space="loss", progress=False, batch_size=bs)
    active = trainable_params(model)
    budget = float(p.get("budget", active))
    rec = {
        "test_ce": test_ce,
        "train_loss": float(loss.detach()),
        "aofe_ratio_out": out.stats["blocks.0.hook_resid_pre"].ratio,
        "aofe_ratio_loss": lossg.stats["hook_embed"].ratio,
        "wtw_aofe_ratio": float(wtw_aofe(model.W_E.detach()).ratio),
        "r_dw": depth_width_ratio(model.cfg),
        "n_params": active,
        "pad": int(budget - active),
        "pad_ratio": (budget - active) / budget,
        "preset": preset,
        "steps_run": steps_run,
        "stopped_early": stopped,
        "seconds": round(time.perf_counter() - t0, 2),
    }
    if val_win is not None:
        rec["val_ce"] = best_val
    return rec
