"""``tl-geometry sae compare --sae PATH`` prints each measured SAE's decoder ε, its class and the capacity status."""

from __future__ import annotations

import itertools
import math
import warnings

import pytest
import torch

pytest.importorskip("sae_lens")

import tl_geometry as tg  # noqa: E402
from tl_geometry.cli import main  # noqa: E402

HOST, D_IN = "gemma-2-2b", 2304  # a host of the published ε table: no model to load


def _saved_sae(path, W_dec):
    from sae_lens import StandardSAE, StandardSAEConfig
    from sae_lens.saes.sae import SAEMetadata

    d_sae, d_in = W_dec.shape
    sae = StandardSAE(
        StandardSAEConfig(d_in=d_in, d_sae=d_sae, metadata=SAEMetadata(hook_name="blocks.3.hook_resid_post"))
    )
    with torch.no_grad():
        sae.W_dec.copy_(W_dec)
    sae.save_model(path)
    return path


def _reference_epsilon(W) -> float:
    """μ + 2σ over all ordered pairs of distinct rows, pair by pair (slow and obvious)."""
    U = torch.nn.functional.normalize(W.double(), dim=1)
    cos = [float(U[i] @ U[j]) for i, j in itertools.permutations(range(len(U)), 2)]
    mean = sum(cos) / len(cos)
    return mean + 2 * math.sqrt(sum((c - mean) ** 2 for c in cos) / len(cos))


@pytest.mark.parametrize("shared", [0.0, 0.3])  # 0: near-orthogonal rows (Class 2); 0.3: a shared direction
def test_compare_prints_decoder_epsilon_class_and_capacity(tmp_path, capsys, shared):
    g = torch.Generator().manual_seed(0)
    W = torch.randn(120, D_IN, generator=g) / math.sqrt(D_IN)
    W += shared * torch.nn.functional.normalize(torch.randn(1, D_IN, generator=g), dim=1)
    path = _saved_sae(tmp_path / "sae", W)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["sae", "compare", "--model", HOST, "--sae", str(path), "--config", "none"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.endswith(f" / {path}"))
    eps = _reference_epsilon(W)
    cls = "class2" if eps < 0.1 else "class1" if eps > 0.2 else "boundary"
    est = tg.capacity_estimate(D_IN, eps, preset="paper", form="full")
    cells = line.split()
    assert f"{eps:.5f}" in cells and cls in cells and "120" in cells
    if cls == "class2":
        assert est.is_count and f"{est.k:,.0f}" in cells and f"{120 / est.k:.4g}" in cells
    else:
        assert not est.is_count and "indeterminate" in cells
    assert (shared == 0.0) == (cls == "class2")  # both branches are exercised
