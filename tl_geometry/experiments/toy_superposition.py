"""Toy double descent: ReLU(x WᵀW + b) trained on sparse features, training-set size swept.

The interaction-law paper (arXiv 2605.27989, after Henighan et al. 2023, "Superposition,
Memorization, and Double Descent") trains the toy model ``f(x) = ReLU(x WᵀW + b)`` with
``W`` of shape (m, n) (n features squeezed into m hidden dimensions) on T sparse samples and
sweeps T: the test loss rises to a peak near the size where the model switches from storing
training points to storing features, then falls again. The paper pairs it with the AOFE ratio
of the closed-form AGOP of the toy model.

Closed-form AGOP (output space). With G = WᵀW (n × n, symmetric) and the ReLU mask
``m = 1[x G + b > 0]``, the Jacobian of f at x is ``J_{ji} = m_j G_ij``, so
``(J Jᵀ)_{jl} = m_j m_l (G G)_{jl}`` and ``E[J Jᵀ] = (G G) ⊙ E[m mᵀ]`` (the expectation over the
test samples).

Data (our choice where the paper is silent): each feature is present independently with
probability ``1 - sparsity`` with a value uniform in [0, 1]; every sample is scaled to unit norm
(empty samples stay zero), as in Henighan et al.; the loss is the squared error summed over
features and averaged over samples. Training: full batch, AdamW, linear warmup then cosine decay.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import torch
from jaxtyping import Float
from torch import Tensor

logger = logging.getLogger(__name__)

__all__ = ["ToyConfig", "ToyResult", "toy_data", "toy_agop", "train_toy", "toy_sweep", "plot_toy",
           "PAPER_TOY", "CPU_TOY"]


@dataclass(frozen=True)
class ToyConfig:
    """Settings of one toy run (every field is part of the results-file key).

    Attributes:
        n_features: n, the input/output dimension.
        n_hidden: m, the bottleneck (2 in the paper).
        sparsity: probability that a feature is zero (0.99 in the paper's reference figure).
        steps: full-batch optimizer steps.
        lr: peak AdamW learning rate.
        weight_decay: AdamW weight decay.
        warmup: fraction of the steps spent in linear warmup.
        n_test: test samples (fresh draws).
        seed: seeds the data and the initialization.
    """

    n_features: int = 1000
    n_hidden: int = 2
    sparsity: float = 0.99
    steps: int = 50_000
    lr: float = 1e-3
    weight_decay: float = 1e-2
    warmup: float = 0.05
    n_test: int = 10_000
    seed: int = 0

    def __post_init__(self):
        if self.n_features < 2 or self.n_hidden < 1:
            raise ValueError(f"need n_features >= 2 and n_hidden >= 1, got {self.n_features}, {self.n_hidden}")
        if not (0.0 <= self.sparsity < 1.0):
            raise ValueError(f"sparsity must lie in [0, 1), got {self.sparsity}")
        if self.steps < 1 or self.n_test < 1 or self.lr <= 0:
            raise ValueError(f"steps, n_test and lr must be positive, got {self.steps}, {self.n_test}, {self.lr}")
        if not (0.0 <= self.warmup < 1.0):
            raise ValueError(f"warmup is a fraction of the steps in [0, 1), got {self.warmup}")

    def to_dict(self) -> dict:
        return asdict(self)


#: The paper's toy settings (1000 features → 2 hidden, sparsity 0.99, 22 sizes 3 … 40,000).
PAPER_TOY = ToyConfig()
PAPER_SIZES = tuple(int(round(x)) for x in torch.logspace(math.log10(3), math.log10(40_000), 22).tolist())
#: Scaled down for a CPU minute (same n/m ratio regime, fewer steps and sizes).
CPU_TOY = ToyConfig(n_features=100, n_hidden=2, sparsity=0.95, steps=2000, lr=1e-2, n_test=2000)
CPU_SIZES = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)


@dataclass(frozen=True)
class ToyResult:
    """One trained toy model.

    Attributes:
        n_train: training-set size T.
        train_loss / test_loss: mean squared error summed over features.
        aofe_ratio: AOFE ratio of the closed-form AGOP on the test set.
        agop: the (n, n) closed-form AGOP.
        W, b: the trained parameters.
    """

    n_train: int
    train_loss: float
    test_loss: float
    aofe_ratio: float
    agop: Float[Tensor, "n n"]
    W: Float[Tensor, "m n"]
    b: Float[Tensor, " n"]

    def to_dict(self) -> dict:
        return {"n_train": self.n_train, "train_loss": self.train_loss, "test_loss": self.test_loss,
                "aofe_ratio": self.aofe_ratio}


def toy_data(n: int, n_features: int, sparsity: float, *, generator: torch.Generator) -> Float[Tensor, "n f"]:
    """``n`` sparse samples: features present w.p. ``1 - sparsity``, values U[0, 1], unit norm."""
    if n < 1:
        raise ValueError(f"need at least one sample, got {n}")
    x = torch.rand(n, n_features, generator=generator)
    x = x * (torch.rand(n, n_features, generator=generator) >= sparsity)
    norm = x.norm(dim=1, keepdim=True)
    return torch.where(norm > 0, x / norm.clamp_min(1e-12), x)


def toy_agop(W: Float[Tensor, "m n"], b: Float[Tensor, " n"], X: Float[Tensor, "s n"]) -> Float[Tensor, "n n"]:
    """Closed-form AGOP ``(G G) ⊙ E[m mᵀ]`` of ``ReLU(x WᵀW + b)`` over the rows of ``X``."""
    G = W.T @ W
    mask = ((X @ G + b) > 0).to(W.dtype)
    return (G @ G) * (mask.T @ mask) / X.shape[0]


def _loss(W: Tensor, b: Tensor, X: Tensor) -> Tensor:
    out = torch.relu(X @ W.T @ W + b)
    return ((out - X) ** 2).sum(dim=1).mean()


def train_toy(n_train: int, cfg: ToyConfig = CPU_TOY) -> ToyResult:
    """Train one toy model on ``n_train`` samples; evaluate on ``cfg.n_test`` fresh samples."""
    from tl_geometry.metrics.interaction import aofe

    if int(n_train) < 1:
        raise ValueError(f"n_train must be >= 1, got {n_train}")
    g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + int(n_train))
    X = toy_data(int(n_train), cfg.n_features, cfg.sparsity, generator=g)
    X_test = toy_data(cfg.n_test, cfg.n_features, cfg.sparsity, generator=g)
    W = (torch.randn(cfg.n_hidden, cfg.n_features, generator=g) / math.sqrt(cfg.n_features)).requires_grad_(True)
    b = torch.zeros(cfg.n_features, requires_grad=True)
    opt = torch.optim.AdamW([W, b], lr=cfg.lr, weight_decay=cfg.weight_decay)
    n_warm = int(cfg.warmup * cfg.steps)

    def lr_at(step: int) -> float:
        if step < n_warm:
            return (step + 1) / n_warm
        t = (step - n_warm) / max(1, cfg.steps - n_warm)
        return 0.5 * (1 + math.cos(math.pi * t))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    for _ in range(cfg.steps):
        opt.zero_grad(set_to_none=True)
        loss = _loss(W, b, X)
        loss.backward()
        opt.step()
        sched.step()
    with torch.no_grad():
        train_loss = float(_loss(W, b, X))
        test_loss = float(_loss(W, b, X_test))
        A = toy_agop(W, b, X_test)
        ratio = float(aofe(A).ratio) if float((A**2).sum()) > 0 else float("nan")
    return ToyResult(int(n_train), train_loss, test_loss, ratio, A, W.detach().clone(), b.detach().clone())


def toy_sweep(
    sizes: Sequence[int] = CPU_SIZES,
    cfg: ToyConfig = CPU_TOY,
    *,
    results: Any = None,
    progress: bool = True,
) -> list[dict]:
    """Train one toy model per training-set size; each finished size is appended to ``results``.

    Args:
        sizes: training-set sizes T.
        cfg: shared settings.
        results: path of a JSON-lines results file (resumes: finished sizes are skipped), or None
            to keep everything in memory.

    Returns:
        One record per size (``n_train``, ``train_loss``, ``test_loss``, ``aofe_ratio``), sorted
        by size, including sizes finished by earlier runs.
    """
    from tl_geometry.jobs import ResultsFile, job_key, run_jobs

    sizes = [int(s) for s in sizes]
    if not sizes or min(sizes) < 1:
        raise ValueError(f"sizes must be a non-empty list of positive integers, got {sizes}")
    jobs = [{"experiment": "toy", "n_train": s, **cfg.to_dict()} for s in sizes]

    def one(params: Mapping[str, Any]) -> dict:
        return train_toy(params["n_train"], cfg).to_dict()

    if results is None:
        return [train_toy(s, cfg).to_dict() for s in sizes]
    rf = results if isinstance(results, ResultsFile) else ResultsFile(results)
    for _ in run_jobs(jobs, one, rf, progress=progress, desc="toy sizes"):
        pass
    keys = {job_key(j) for j in jobs}
    recs = [r for r in rf.records() if r.get("key") in keys and r.get("status") == "ok"]
    return sorted(({k: r[k] for k in ("n_train", "train_loss", "test_loss", "aofe_ratio")} for r in recs),
                  key=lambda r: r["n_train"])


def plot_toy(records: Sequence[Mapping[str, Any]], path: Any = None):
    """Test loss and AOFE ratio against training-set size (log x); returns the figure."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    recs = sorted(records, key=lambda r: r["n_train"])
    if not recs:
        raise ValueError("no toy records to plot")
    x = [r["n_train"] for r in recs]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(x, [r["test_loss"] for r in recs], "o-", color="C0", label="test loss")
    ax.plot(x, [r["train_loss"] for r in recs], "o--", color="C0", alpha=0.4, label="train loss")
    ax.set_xscale("log")
    ax.set_xlabel("training-set size T")
    ax.set_ylabel("loss", color="C0")
    ax2 = ax.twinx()
    ax2.plot(x, [r["aofe_ratio"] for r in recs], "s-", color="C1", label="AOFE ratio")
    ax2.set_ylabel("AOFE ratio", color="C1")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
