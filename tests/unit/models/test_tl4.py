"""What the TL-4 lane (ci/tl4/run.sh: transformer-lens 4.x, no sae_lens) checks beyond the shared
suites. Also runs in the main lane, where it checks the same contracts on a TransformerBridge."""

import importlib.util
import sys

import pytest
import torch

import tl_geometry as tg
from tl_geometry import capture

TL_MAJOR = int(__import__("importlib.metadata").metadata.version("transformer-lens").split(".")[0])


def _bridge():
    from tests.helpers import make_tiny_bridge

    return make_tiny_bridge(n_layers=2, d_model=16, n_ctx=32, d_head=4, d_mlp=32, d_vocab=53)


@pytest.fixture(scope="module")
def bridge():
    return _bridge()


def test_core_imports_without_sae_lens(monkeypatch):
    """``import tl_geometry`` must not need sae_lens (it is imported lazily by tl_geometry.families.sae)."""
    import subprocess

    code = "import sys; sys.modules['sae_lens'] = None; import tl_geometry; assert 'sae_lens' not in sys.modules or sys.modules['sae_lens'] is None"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-1500:]


@pytest.mark.skipif(TL_MAJOR < 4, reason="the no-HookedTransformer contract only exists on TransformerLens 4.x")
def test_tl4_has_no_hooked_transformer_and_no_sae_lens():
    with pytest.raises(ImportError):
        from transformer_lens import HookedTransformer  # noqa: F401
    assert importlib.util.find_spec("sae_lens") is None


def test_sae_adapter_says_what_it_needs(monkeypatch):
    monkeypatch.setitem(sys.modules, "sae_lens", None)
    with pytest.raises(ImportError, match="sae_lens") as info:
        tg.sae.widths()
    assert "tl-geometry[sae]" in str(info.value)


def test_sae_adapter_names_the_transformer_lens_bound(monkeypatch):
    """On TL 4 sae_lens cannot be installed: the adapter's error must say so."""
    monkeypatch.setitem(sys.modules, "sae_lens", None)
    with pytest.raises(ImportError, match=r"transformer.lens\s*<\s*4"):
        tg.sae.widths()


def test_capture_metrics_report_on_a_bridge(bridge, tmp_path):
    """The core on TransformerBridge: capture, every non-SAE metric, report round trip."""
    tokens = torch.randint(0, 53, (2, 10), generator=torch.Generator().manual_seed(0))
    hooks = capture.resid_hooks(bridge, "post")
    c = capture.collect(bridge, tokens, hooks, max_points=12, progress=False)
    assert c.n_points == 12 and c.acts[hooks[0]].shape == (12, 16)
    metrics = [
        m
        for m in [
            "shape",
            "epsilon",
            "capacity",
            "depth_width",
            "wtw_aofe",
            "epsilon_activations",
            "spectral",
            "pga",
            "agop",
        ]
        if m in tg.list_metrics()
    ]
    opts = {
        "pga": {"k": 3, "n_null": 4, "max_points": 16, "progress": False},
        "agop": {"n_probes": 3, "progress": False},
        "spectral": {"progress": False},
        "epsilon_activations": {"max_points": 16},
    }
    rep = tg.analyze(
        bridge, tokens, metrics=metrics, options={k: v for k, v in opts.items() if k in metrics}, progress=False
    )
    prefixes = {r.metric.split(".")[0] for r in rep.rows}
    assert {"shape", "epsilon"} <= prefixes
    for m in ("pga", "agop", "spectral"):
        if m in metrics:
            assert m in prefixes
    assert all(
        r.value == r.value for r in rep.rows if r.metric.startswith(("epsilon", "spectral.rankme", "agop.trace"))
    )
    rep.to_json(tmp_path / "report.json")
    back = tg.GeometryReport.from_json(tmp_path / "report.json")
    assert back.to_json() == rep.to_json()
    assert rep.provenance["model_class"] == "TransformerBridge"
