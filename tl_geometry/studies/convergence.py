"""Cross-model convergence of a study: every pair of models, the same texts, each its own tokenizer.

Each model's job stores, at a few relative depths, one mean-pooled vector per text and its top-k
readout basis (float32, base64 in the job's record: written with the job's rows, whole or not at
all); [`convergence_matrix`][tl_geometry.studies.convergence.convergence_matrix] compares every pair
afterwards with [`tl_geometry.convergence.convergence_score`][tl_geometry.families.pga.convergence.convergence_score]
(Spearman of the pairwise cosine distances between the same texts in the full spaces, in the two
readout subspaces, and in ``n_null`` pairs of Haar-random subspaces; z of the readout against them).

Uncertainty (ours): ρ_full and ρ_readout get a delete-a-group jackknife over ``n_groups`` groups of
texts (the texts are the sample); z has its chance band from the nulls (|z| ≳ 2 is beyond chance).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["encode", "decode", "convergence_matrix", "DEPTHS"]

DEPTHS = {"mid": 0.5, "last": 1.0}
"""The depths compared: the middle block's output and the last block's output."""


def encode(x: Any) -> dict[str, Any]:
    """A float32 array as ``{"shape": [...], "b64": ...}`` (little-endian), JSON-able and exact."""
    a = np.ascontiguousarray(np.asarray(x, dtype="<f4"))
    return {"shape": list(a.shape), "b64": base64.b64encode(a.tobytes()).decode("ascii")}


def decode(d: Mapping[str, Any]) -> np.ndarray:
    """The inverse of [`encode`][tl_geometry.studies.convergence.encode]."""
    return np.frombuffer(base64.b64decode(d["b64"]), dtype="<f4").reshape(d["shape"]).astype(np.float64)


def _rho(A: np.ndarray, B: np.ndarray) -> float:
    from scipy.spatial.distance import pdist
    from scipy.stats import spearmanr

    A = A - A.mean(0)
    B = B - B.mean(0)
    return float(spearmanr(pdist(A, "cosine"), pdist(B, "cosine")).statistic)


def _jackknife(A: np.ndarray, B: np.ndarray, n_groups: int) -> float:
    n = A.shape[0]
    groups = np.array_split(np.arange(n), min(n_groups, n))
    vals = []
    for g in groups:
        keep = np.setdiff1d(np.arange(n), g)
        vals.append(_rho(A[keep], B[keep]))
    v = np.array(vals)
    G = len(v)
    return float(math.sqrt((G - 1) / G * ((v - v.mean()) ** 2).sum()))


def convergence_matrix(
    reps: Mapping[str, Mapping[str, Any]],
    *,
    k: int = 100,
    n_null: int = 100,
    seed: int = 0,
    n_groups: int = 8,
) -> list[dict[str, Any]]:
    """Every pair of models at every stored depth.

    Args:
        reps: model label → its stored representations (``{"depths": {tag: {"hook", "pooled"}}, "readout": ...}``).
        k: readout dimension compared (capped by both models' stored bases).
        n_null, seed: random-subspace pairs of the null.
        n_groups: jackknife groups of texts.

    Returns:
        One dict per (depth, model_a, model_b): rho_full ± stderr, rho_readout ± stderr, null mean
        and std, z, k, n_texts, hooks.
    """
    import torch

    from tl_geometry.families.pga.convergence import convergence_score

    labels = list(reps)
    out: list[dict[str, Any]] = []
    for tag in DEPTHS:
        for i, a in enumerate(labels):
            for b in labels[i + 1 :]:
                ra, rb = reps[a]["depths"].get(tag), reps[b]["depths"].get(tag)
                if ra is None or rb is None:
                    continue
                A, B = decode(ra["pooled"]), decode(rb["pooled"])
                Va, Vb = decode(reps[a]["readout"]), decode(reps[b]["readout"])
                kk = int(min(k, Va.shape[1], Vb.shape[1]))
                s = convergence_score(
                    torch.from_numpy(A),
                    torch.from_numpy(B),
                    torch.from_numpy(Va[:, :kk]),
                    torch.from_numpy(Vb[:, :kk]),
                    n_null=n_null,
                    seed=seed,
                )
                out.append(
                    {
                        "depth": tag,
                        "model_a": a,
                        "model_b": b,
                        "hook_a": ra["hook"],
                        "hook_b": rb["hook"],
                        "rho_full": s.rho_full,
                        "rho_full_stderr": _jackknife(A, B, n_groups),
                        "rho_readout": s.rho_readout,
                        "rho_readout_stderr": _jackknife(A @ Va[:, :kk], B @ Vb[:, :kk], n_groups),
                        "null_mean": s.null_mean,
                        "null_std": s.null_std,
                        "z": s.z,
                        "k": kk,
                        "n_texts": s.n_texts,
                        "n_null": n_null,
                    }
                )
    return out


def pair_table(rows: Sequence[Mapping[str, Any]], depth: str, field: str, labels: Sequence[str]) -> np.ndarray:
    """A symmetric (model × model) matrix of one field at one depth (NaN on the diagonal and gaps)."""
    idx = {m: i for i, m in enumerate(labels)}
    M = np.full((len(labels), len(labels)), np.nan)
    for r in rows:
        if r["depth"] != depth or r["model_a"] not in idx or r["model_b"] not in idx:
            continue
        i, j = idx[r["model_a"]], idx[r["model_b"]]
        M[i, j] = M[j, i] = r[field]
    return M
