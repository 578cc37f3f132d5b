"""``to_pandas()`` on every result type a public ``tg.*`` function returns (one row per unit)."""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
import sys

import numpy as np
import pytest
import torch

import tl_geometry as tg
from tl_geometry.base.tables import PandasNotInstalledError

#: Returned by public functions but not results: activation data, file metadata, registry specs.
NOT_RESULTS = {"Captured", "EmbeddingSource", "FamilySpec", "MetricSpec"}


def _public_result_types() -> dict[str, type]:
    """Every tl_geometry dataclass / NamedTuple named in the return annotation of a public function."""
    import tl_geometry.families.capacity.hosts as hosts

    mods = [tg, hosts] + [getattr(tg, m) for m in ("sae", "packing", "convergence", "weights_reader", "capture")]
    found: dict[str, type] = {}
    for m in mods:
        for n in getattr(m, "__all__", None) or [n for n in dir(m) if not n.startswith("_")]:
            f = getattr(m, n, None)
            if not inspect.isfunction(f) or not f.__module__.startswith("tl_geometry"):
                continue
            ann = inspect.signature(f).return_annotation
            if ann is inspect.Signature.empty:
                continue
            text = ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann))
            g = sys.modules[f.__module__].__dict__
            for tok in re.findall(r"[A-Za-z_]\w*", text):
                obj = g.get(tok)
                if (
                    inspect.isclass(obj)
                    and obj.__module__.startswith("tl_geometry")
                    and (dataclasses.is_dataclass(obj) or hasattr(obj, "_fields"))
                ):
                    found[obj.__name__] = obj
    return found


def test_every_public_result_type_has_to_pandas():
    types = _public_result_types()
    assert {"AGOPResult", "SimilarityStats", "PGAScore", "SpectralMetrics", "GeometryReport"} <= set(types)
    missing = sorted(n for n, t in types.items() if n not in NOT_RESULTS and not hasattr(t, "to_pandas"))
    assert missing == []


def _one_row(df, obj, fields):
    assert len(df) == 1
    for f in fields:
        want = getattr(obj, f)
        want = float(want) if isinstance(want, torch.Tensor) else want
        got = df[f].iloc[0]
        if isinstance(want, float) and math.isnan(want):
            assert math.isnan(got)
        else:
            assert got == want, f


def test_single_results_give_one_row_of_their_fields():
    gen = torch.Generator().manual_seed(0)
    H = torch.randn(60, 8, generator=gen)
    readout = tg.readout_basis(torch.randn(8, 30, generator=gen), 3)
    G = H.T @ H
    cases = [
        (tg.similarity_stats(H), ["mean", "std", "epsilon", "n_vectors", "d", "model_class"]),
        (tg.capacity_estimate(64, 0.05), ["d", "epsilon", "status"]),
        (tg.pga_score(H, readout, n_null=5), ["z", "rho_read", "null_mean", "null_std", "n_points"]),
        (tg.pc1_overlap(H, readout), ["overlap", "expected", "ratio"]),
        (tg.spectral_metrics(H), ["rankme", "alpha_req", "isotropy", "condition_number"]),
        (tg.aofe(G), ["aofe", "ratio", "frobenius2"]),
        (tg.nfa_correlation(torch.randn(8, 16, generator=gen), G), ["pearson", "pearson_sqrt", "n_pairs"]),
        (tg.published_epsilon("Llama-2-7B"), ["d_model", "epsilon"]),
    ]
    for obj, fields in cases:
        _one_row(obj.to_pandas(), obj, fields)
    # tensors and histograms are left out, not stringified
    df = tg.similarity_stats(H, histogram_bins=10).to_pandas()
    assert "histogram" not in df.columns and "top_pairs" not in df.columns


@pytest.mark.needs_hooked
def test_agop_result_has_one_row_per_hook(tiny_model):
    tokens = torch.randint(0, tiny_model.cfg.d_vocab, (2, 6), generator=torch.Generator().manual_seed(0))
    hooks = ["blocks.0.hook_resid_post", "blocks.2.hook_resid_post"]
    res = tg.agop(tiny_model, tokens, hooks=hooks, n_probes=4, progress=False)
    df = res.to_pandas()
    assert list(df["hook"]) == hooks
    for h in hooks:
        row = df[df["hook"] == h].iloc[0]
        for f in ("aofe", "ratio", "trace", "stderr", "n_probes"):
            assert row[f] == getattr(res.stats[h], f)
        assert row["space"] == res.space and row["seed"] == res.seed
    eps = tg.embedding_epsilon(tiny_model)
    _one_row(eps.to_pandas(), eps, ["epsilon", "n_vectors"])


def test_dicts_and_lists_of_results():
    gen = torch.Generator().manual_seed(1)
    H = torch.randn(50, 8, generator=gen)
    readout = tg.readout_basis(torch.randn(8, 30, generator=gen), 3)
    prof = tg.pga_profile(H, readout, ccrs=[0, 1], n_null=5)
    df = tg.to_pandas(prof, key="ccr")
    assert list(df["ccr"]) == [0, 1]
    assert list(df["z"]) == [prof[0].z, prof[1].z]
    loss = np.array([3.0, 2.5, 2.0, 1.0])
    cors = tg.loss_correlations(loss, {"a": np.array([1.0, 2.0, 3.0, 5.0]), "b": np.array([4.0, 3.0, 2.0, 1.0])})
    df = tg.to_pandas(cors)
    assert list(df["metric"]) == [c.metric for c in cors]
    assert list(df["pearson"]) == pytest.approx([c.pearson for c in cors], nan_ok=True)


def test_missing_pandas_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    stats = tg.similarity_stats(torch.randn(10, 4, generator=torch.Generator().manual_seed(0)))
    with pytest.raises(PandasNotInstalledError, match=r"pip install 'tl-geometry\[pandas\]'"):
        stats.to_pandas()
    with pytest.raises(ImportError, match="pandas"):
        tg.to_pandas([stats])
    rep = tg.GeometryReport.from_rows([{"metric": "m", "value": 1.0}], model="x")
    with pytest.raises(PandasNotInstalledError):
        rep.to_pandas()
