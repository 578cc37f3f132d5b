"""Synthetic GeometryReports with the agreed row names, for testing the rendering on its own.

The numbers are made up (seeded); they only have the shapes the metric families produce.
"""

from __future__ import annotations

import numpy as np

from tl_geometry.report import GeometryReport

N_LAYERS = 6
D_MODEL = 64


def hooks(n_layers: int = N_LAYERS) -> list[str]:
    return ["hook_embed", *[f"blocks.{l}.hook_resid_post" for l in range(n_layers)], "ln_final.hook_normalized"]


def epsilon_rows(mean=0.35, std=0.19, d=D_MODEL, n=500, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i, mat in enumerate(("W_E", "W_U")):
        m = mean - 0.1 * i
        cos = np.clip(rng.normal(m, std, 20_000), -1, 1)
        counts, edges = np.histogram(cos, bins=300, range=(-1, 1))
        eps = m + 2 * std
        out.append({"metric": f"epsilon.{mat}", "value": eps, "extras": {
            "mean": m, "std": std, "n_vectors": n, "n_dropped": 0, "d": d, "model_class": "class1",
            "histogram": {"counts": counts.tolist(), "edges": edges.tolist()}}})
        out.append({"metric": f"capacity.{mat}", "value": 1.5e6 / (i + 1), "extras": {"form": "full", "epsilon": eps, "d": d}})
    return out


def activation_rows(n_layers=N_LAYERS, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for j, h in enumerate(hooks(n_layers)):
        out.append({"metric": "epsilon_activations", "hook": h, "value": 0.5 + 0.05 * rng.standard_normal(),
                    "extras": {"mean": 0.3, "std": 0.1, "n_vectors": 256, "n_dropped": 0, "d": D_MODEL, "model_class": "class1"}})
        for ccr in (0, 1, 5):
            out.append({"metric": "pga.z", "hook": h, "value": float(10 * np.sin(j / 2) + ccr + rng.standard_normal()),
                        "extras": {"ccr": ccr, "k": 16, "rho_read": 0.8, "null_mean": 0.7, "null_std": 0.01,
                                   "n_points": 256, "n_pairs": 32640, "n_null": 20}})
        out.append({"metric": "pga.rho_read", "hook": h, "value": 0.8, "extras": {"ccr": 0}})
        out.append({"metric": "pga.pc1_overlap", "hook": h, "value": float(min(1, 0.1 + 0.1 * j)), "extras": {"expected": 16 / D_MODEL}})
        out.append({"metric": "spectral.rankme", "hook": h, "value": 20.0 + j})
        out.append({"metric": "spectral.alpha_req", "hook": h, "value": 0.8 + 0.05 * j})
        out.append({"metric": "spectral.isotropy", "hook": h, "value": 0.2 - 0.01 * j})
        out.append({"metric": "spectral.condition_number", "hook": h, "value": 10.0 ** (2 + j / 3)})
        out.append({"metric": "agop.aofe_ratio", "hook": h, "value": 0.6 + 0.03 * j,
                    "extras": {"n_probes": 8, "stderr": 0.02, "space": "input"}})
        out.append({"metric": "agop.aofe", "hook": h, "value": 3.0, "extras": {"n_probes": 8, "stderr": 0.1, "space": "input"}})
        out.append({"metric": "agop.trace", "hook": h, "value": 5.0, "extras": {"n_probes": 8, "stderr": 0.1, "space": "input"}})
    out.append({"metric": "depth_width.ratio", "value": n_layers / D_MODEL, "extras": {"in_interval": False, "interval": [0.023, 0.047]}})
    return out


def sae_rows():
    out = []
    for rel, widths in (("toy-res-a", (1024, 4096, 16384)), ("toy-res-b", (2048, 65536))):
        for l, w in enumerate(widths):
            hook = f"blocks.{l}.hook_resid_post"
            meta = {"release": rel, "sae_id": f"layer_{l}/width_{w}", "hook_name": hook,
                    "width_source": "id", "epsilon_source": "W_E"}
            out.append({"metric": "sae.d_sae", "value": float(w), "extras": meta})
            out.append({"metric": "sae.capacity_ratio", "value": w / 1.5e6, "extras": meta})
    return out


def make_report(*, families=("capacity", "activations", "sae"), n_layers=N_LAYERS, **provenance) -> GeometryReport:
    rows = []
    if "capacity" in families:
        rows += epsilon_rows()
    if "activations" in families:
        rows += activation_rows(n_layers)
    if "sae" in families:
        rows += sae_rows()
    prov = {"model": f"synthetic-{n_layers}L", "n_layers": n_layers, "d_model": D_MODEL}
    prov.update(provenance)
    return GeometryReport.from_rows(rows, model=prov["model"], provenance=prov)
