"""TinyGPT shape sweep: test cross-entropy against R_D/W = depth / width at fixed parameter budgets.

The interaction-law paper (arXiv 2605.27989) trains byte-level TinyGPT models (vocab 256, pre-LN,
d_ff = 4·d, head_dim 4, AdamW lr 3e-4, wd 0.01, warmup 300, cosine) at fixed parameter budgets,
one shape per depth, and finds the best test cross-entropy for R_D/W in [0.023, 0.047]. This
module reproduces the protocol at CPU size with TransformerLens ``HookedTransformer`` models.

Our choices where the paper is silent: the budget counts every parameter (embeddings, position
embeddings, LayerNorms, biases, unembedding); for each depth the width is the largest multiple of
``d_head`` under the budget; warmup is a fraction of the steps; the output-space AGOP is computed
exactly (64 vector-Jacobian products, no probe noise) on ``n_agop_seqs`` test sequences.

Each finished run is one record in a JSON-lines results file (:mod:`tl_geometry.jobs`); a sweep
that is killed resumes where it stopped, repeating no run.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import torch
from torch import Tensor

logger = logging.getLogger(__name__)

__all__ = ["SweepConfig", "tinygpt_config", "n_params", "width_for_budget", "shapes_for_budget", "byte_data",
           "train_run", "shape_sweep", "frontier", "plot_sweep", "PAPER_BUDGETS", "CPU_BUDGETS"]

PAPER_BUDGETS = (1.0e6, 1.3e6, 1.6e6, 2.0e6, 2.3e6, 2.7e6, 3.0e6, 5.0e6, 10.0e6)
CPU_BUDGETS = (1.0e5, 2.0e5, 3.0e5)


@dataclass(frozen=True)
class SweepConfig:
    """Settings of a shape sweep (everything but budget/depth/width goes into each run's key).

    Attributes:
        budgets: parameter budgets (CPU default 0.1M–0.3M; :data:`PAPER_BUDGETS` for the paper's).
        depths: depths to try (default 1 … ``max_depth``, skipping depths with no width).
        max_depth: upper depth when ``depths`` is None.
        d_head: head dimension (4 in the paper); n_heads = d_model / d_head.
        n_ctx: context length in bytes (256 in the paper).
        steps, batch_size, lr, weight_decay, warmup: AdamW with linear warmup (fraction of steps)
            then cosine decay to 0.
        source: training text: "pydoc+shakespeare" (offline default), "pydoc", "shakespeare", a
            text file, or a Hugging Face dataset name (needs ``datasets`` and the network).
        test_fraction: the last fraction of the bytes is the test split.
        eval_seqs: test windows for the cross-entropy. n_agop_seqs: test windows for the AGOP.
        seed: data order and initialization.
        bytes_per_param: when set, each run trains for
            ``ceil(bytes_per_param × n_params / (batch_size × n_ctx))`` steps instead of ``steps``
            (the paper trained on ≈ 60 bytes per parameter).
    """

    budgets: tuple[float, ...] = CPU_BUDGETS
    depths: tuple[int, ...] | None = None
    max_depth: int = 6
    d_head: int = 4
    n_ctx: int = 64
    steps: int = 300
    batch_size: int = 16
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup: float = 0.1
    source: str = "pydoc+shakespeare"
    test_fraction: float = 0.1
    eval_seqs: int = 64
    n_agop_seqs: int = 8
    seed: int = 0
    bytes_per_param: float | None = None

    def __post_init__(self):
        if not self.budgets or min(self.budgets) <= 0:
            raise ValueError(f"budgets must be positive numbers, got {self.budgets}")
        if self.depths is not None and (not self.depths or min(self.depths) < 1):
            raise ValueError(f"depths must be positive integers, got {self.depths}")
        for k in ("max_depth", "d_head", "n_ctx", "steps", "batch_size", "eval_seqs", "n_agop_seqs"):
            if int(getattr(self, k)) < 1:
                raise ValueError(f"{k} must be >= 1, got {getattr(self, k)}")
        if self.bytes_per_param is not None and self.bytes_per_param <= 0:
            raise ValueError(f"bytes_per_param must be positive, got {self.bytes_per_param}")
        if not (0 < self.test_fraction < 1) or not (0 <= self.warmup < 1) or self.lr <= 0:
            raise ValueError("need 0 < test_fraction < 1, 0 <= warmup < 1 and lr > 0")

    def to_dict(self) -> dict:
        return asdict(self)


def tinygpt_config(n_layers: int, d_model: int, *, d_head: int = 4, n_ctx: int = 256, d_vocab: int = 256, seed: int = 0):
    """HookedTransformerConfig of a byte-level pre-LN TinyGPT (d_mlp = 4·d_model, GELU, learned positions)."""
    from transformer_lens import HookedTransformerConfig

    if d_model % d_head:
        raise ValueError(f"d_model={d_model} is not a multiple of d_head={d_head}")
    return HookedTransformerConfig(
        n_layers=int(n_layers), d_model=int(d_model), d_head=int(d_head), n_heads=int(d_model) // int(d_head),
        d_mlp=4 * int(d_model), d_vocab=int(d_vocab), n_ctx=int(n_ctx), act_fn="gelu",
        normalization_type="LN", positional_embedding_type="standard", seed=int(seed),
    )


def n_params(n_layers: int, d_model: int, *, n_ctx: int = 256, d_vocab: int = 256) -> int:
    """Parameters of :func:`tinygpt_config` (all of them): V·d + n_ctx·d + L(12d² + 13d) + 2d + d·V + V."""
    d, L, V = int(d_model), int(n_layers), int(d_vocab)
    return V * d + int(n_ctx) * d + L * (12 * d * d + 13 * d) + 2 * d + d * V + V


def width_for_budget(budget: float, n_layers: int, *, d_head: int = 4, n_ctx: int = 256, d_vocab: int = 256) -> int | None:
    """Largest d_model (a multiple of d_head) with n_params ≤ budget at this depth, or None."""
    d = None
    w = int(d_head)
    while n_params(n_layers, w, n_ctx=n_ctx, d_vocab=d_vocab) <= budget:
        d, w = w, w + int(d_head)
    return d


def shapes_for_budget(budget: float, depths: Sequence[int] | None = None, *, max_depth: int = 6, d_head: int = 4,
                      n_ctx: int = 256, d_vocab: int = 256) -> list[tuple[int, int]]:
    """(depth, d_model) per depth, the widest shape under ``budget``; depths without a width are skipped.

    Raises:
        ValueError: the budget is too small for even depth 1 at d_model = d_head.
    """
    if width_for_budget(budget, 1, d_head=d_head, n_ctx=n_ctx, d_vocab=d_vocab) is None:
        need = n_params(1, d_head, n_ctx=n_ctx, d_vocab=d_vocab)
        raise ValueError(f"budget {budget:g} is too small for even depth 1 (needs >= {need} parameters at d_model={d_head})")
    out = []
    for L in (range(1, max_depth + 1) if depths is None else depths):
        d = width_for_budget(budget, L, d_head=d_head, n_ctx=n_ctx, d_vocab=d_vocab)
        if d is not None:
            out.append((int(L), d))
    return out


def byte_data(source: str = "pydoc+shakespeare", *, test_fraction: float = 0.1) -> tuple[Tensor, Tensor]:
    """(train, test) uint8→long byte tensors of real text; the test split is the last fraction."""
    from tl_geometry import corpus

    from pathlib import Path

    names = [s for s in source.split("+") if s]
    parts = []
    for s in names:
        if s in corpus.SOURCES:
            try:
                parts += corpus.texts(s)
            except ValueError as exc:
                if len(names) == 1:
                    raise
                logger.warning("skipping text source %r: %s", s, exc)  # e.g. a shakespeare build without texts
        elif Path(s).is_file():
            parts += corpus.texts(s)
        else:
            parts += _hf_texts(s)
    if not parts:
        raise ValueError(f"source {source!r} gave no text")
    data = torch.frombuffer(bytearray("\n\n".join(parts).encode("utf-8")), dtype=torch.uint8).long()
    n_test = int(len(data) * test_fraction)
    if n_test < 2 or len(data) - n_test < 2:
        raise ValueError(f"source {source!r} has only {len(data)} bytes")
    return data[:-n_test], data[-n_test:]


def _hf_texts(name: str) -> list[str]:
    try:
        import datasets
    except ImportError:
        raise ValueError(f"unknown text source {name!r}: not pydoc/shakespeare/a file, and `datasets` is not installed") from None
    try:
        ds = datasets.load_dataset(name, split="train")
    except Exception as exc:  # offline, unknown name, ...
        raise ValueError(f"could not load text source {name!r} as a Hugging Face dataset: {type(exc).__name__}: {exc}") from None
    col = "text" if "text" in ds.column_names else ds.column_names[0]
    return [t for t in ds[col] if t]


def _windows(data: Tensor, n: int, length: int, gen: torch.Generator) -> Tensor:
    if len(data) <= length:
        raise ValueError(f"text of {len(data)} bytes is shorter than a window of {length + 1}")
    starts = torch.randint(0, len(data) - length, (n,), generator=gen)
    return torch.stack([data[s : s + length] for s in starts.tolist()])


def _eval_windows(data: Tensor, n: int, length: int) -> Tensor:
    k = min(n, len(data) // length)
    if k < 1:
        raise ValueError(f"test split of {len(data)} bytes is shorter than one window of {length}")
    return data[: k * length].view(k, length)


def train_run(params: Mapping[str, Any], train: Tensor, test: Tensor) -> dict:
    """Train one TinyGPT shape and measure it; ``params`` is one job of :func:`shape_sweep`."""
    from transformer_lens import HookedTransformer

    from tl_geometry.metrics.interaction import agop, depth_width_ratio, wtw_aofe

    t0 = time.perf_counter()
    p = dict(params)
    cfg = tinygpt_config(p["n_layers"], p["d_model"], d_head=p["d_head"], n_ctx=p["n_ctx"], seed=p["seed"])
    torch.manual_seed(p["seed"])
    model = HookedTransformer(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=p["lr"], weight_decay=p["weight_decay"])
    n_warm = int(p["warmup"] * p["steps"])

    def lr_at(step: int) -> float:
        if step < n_warm:
            return (step + 1) / n_warm
        return 0.5 * (1 + math.cos(math.pi * (step - n_warm) / max(1, p["steps"] - n_warm)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    gen = torch.Generator().manual_seed(p["seed"])
    model.train()
    loss = torch.tensor(float("nan"))
    for _ in range(p["steps"]):
        batch = _windows(train, p["batch_size"], p["n_ctx"], gen)
        loss = model(batch, return_type="loss")
        if not torch.isfinite(loss):
            raise ValueError(f"training diverged (loss {float(loss)}) for depth {p['n_layers']}, d_model {p['d_model']}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    model.eval()
    ev = _eval_windows(test, p["eval_seqs"], p["n_ctx"])
    with torch.no_grad():
        test_ce = float(torch.cat([model(b, return_type="loss", loss_per_token=True).flatten() for b in ev.split(16)]).mean())
    out = agop(model, ev[: p["n_agop_seqs"]], space="output", exact=True, progress=False)
    r = depth_width_ratio(cfg)
    return {
        "test_ce": test_ce, "train_loss": float(loss.detach()), "aofe_ratio_out": out.stats["blocks.0.hook_resid_pre"].ratio,
        "wtw_aofe_ratio": float(wtw_aofe(model.W_E.detach()).ratio), "r_dw": r,
        "n_params": sum(x.numel() for x in model.parameters()), "seconds": round(time.perf_counter() - t0, 2),
    }


def shape_sweep(cfg: SweepConfig = SweepConfig(), results: Any = "shape_sweep.jsonl", *, progress: bool = True) -> list[dict]:
    """Run (or resume) the sweep; every finished run is appended to ``results`` at once.

    Returns:
        All ok records of this sweep's jobs in the results file (earlier runs included), each with
        params (budget, n_layers, d_model, ...) and test_ce, aofe_ratio_out, wtw_aofe_ratio, r_dw.

    Raises:
        ValueError: a budget too small for depth 1; whatever a run raises (the finished runs stay
            recorded, and the next call resumes after them).
    """
    from tl_geometry.jobs import ResultsFile, job_key, run_jobs

    common = {k: v for k, v in cfg.to_dict().items() if k not in ("budgets", "depths", "max_depth", "bytes_per_param")}
    jobs = []
    for budget in cfg.budgets:
        for L, d in shapes_for_budget(budget, cfg.depths, max_depth=cfg.max_depth, d_head=cfg.d_head, n_ctx=cfg.n_ctx):
            job = {"experiment": "shape_sweep", "budget": float(budget), "n_layers": L, "d_model": d, **common}
            if cfg.bytes_per_param:
                n = n_params(L, d, n_ctx=cfg.n_ctx)
                job["steps"] = max(1, math.ceil(cfg.bytes_per_param * n / (cfg.batch_size * cfg.n_ctx)))
            jobs.append(job)
    rf = results if isinstance(results, ResultsFile) else ResultsFile(results)
    data: list = []

    def one(params: Mapping[str, Any]) -> dict:
        if not data:
            data.extend(byte_data(cfg.source, test_fraction=cfg.test_fraction))
        return train_run(params, *data)

    for _ in run_jobs(jobs, one, rf, progress=progress, desc="shapes"):
        pass
    keys = {job_key(j) for j in jobs}
    return [r for r in rf.records() if r.get("key") in keys and r.get("status") == "ok"]


def frontier(records: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Best run per budget: budget, n_layers, d_model, alpha (= R_D/W of the best), test_ce."""
    best: dict[float, Mapping] = {}
    for r in records:
        b = r["params"]["budget"]
        if b not in best or r["test_ce"] < best[b]["test_ce"]:
            best[b] = r
    return [{"budget": b, "n_layers": r["params"]["n_layers"], "d_model": r["params"]["d_model"],
             "alpha": r["r_dw"], "test_ce": r["test_ce"]} for b, r in sorted(best.items())]


def plot_sweep(records: Sequence[Mapping[str, Any]], path: Any = None):
    """Left: test CE vs R_D/W per budget, efficient interval shaded. Right: frontier α* per budget."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from tl_geometry.metrics.interaction import EFFICIENT_INTERVAL

    if not records:
        raise ValueError("no sweep records to plot")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    a1.axvspan(*EFFICIENT_INTERVAL, color="0.85", label="efficient interval")
    for b in sorted({r["params"]["budget"] for r in records}):
        rs = sorted((r for r in records if r["params"]["budget"] == b), key=lambda r: r["r_dw"])
        a1.plot([r["r_dw"] for r in rs], [r["test_ce"] for r in rs], "o-", label=f"{b / 1e6:g}M")
    a1.set_xscale("log")
    a1.set_xlabel("R_D/W = depth / d_model")
    a1.set_ylabel("test cross-entropy (nats/byte)")
    a1.legend(fontsize=8)
    fr = frontier(records)
    a2.axhspan(*EFFICIENT_INTERVAL, color="0.85")
    a2.plot([f["budget"] for f in fr], [f["alpha"] for f in fr], "o-")
    a2.set_xscale("log")
    a2.set_xlabel("parameter budget")
    a2.set_ylabel("α* (best R_D/W)")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
