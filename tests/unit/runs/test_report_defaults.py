"""What the report runs by default: every registered metric but NOT_IN_DEFAULT_REPORT (nfa), said in provenance."""

import pytest

import tl_geometry as tg
from tests.helpers import make_byte_model
from tl_geometry.runs import pipeline


@pytest.fixture
def byte_model():
    return make_byte_model()


def test_default_metrics_are_all_registered_but_nfa():
    assert set(pipeline.default_metrics()) == set(tg.list_metrics()) - {"nfa"}
    assert "nfa" in tg.list_metrics()  # still registered: runs when named


def test_nfa_left_out_unless_named_and_the_report_says_so(byte_model, monkeypatch):
    from tl_geometry import registry

    monkeypatch.setattr(registry, "list_metrics", lambda **k: ["depth_width", "nfa"])
    rep = pipeline.run_report(byte_model, n_seqs=2, seq_len=16, progress=False)
    metrics = set(rep.to_pandas()["metric"])
    assert not any(m.startswith("nfa") for m in metrics) and any(m.startswith("depth_width") for m in metrics)
    assert "nfa" in rep.provenance["left_out"] and "--metrics" in rep.provenance["left_out"]["nfa"]
    named = pipeline.run_report(
        byte_model,
        n_seqs=2,
        seq_len=16,
        metrics=["depth_width", "nfa"],
        options={"nfa": {"n_probes": 2}},
        progress=False,
    )
    assert any(m.startswith("nfa.corr") for m in set(named.to_pandas()["metric"]))
    assert named.provenance["left_out"] == {}
