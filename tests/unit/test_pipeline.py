"""The report pipeline on a tiny model: partial and interrupted runs keep their results, marked."""

import pytest

import tl_geometry as tg
from tiny_models import make_tiny_model
from tl_geometry.pipeline import run_report


class ByteTokenizer:
    bos_token_id = 0
    padding_side = "right"

    def encode(self, text, add_special_tokens=False):
        return [b + 1 for b in text.encode("utf-8")]


@pytest.fixture
def byte_model():
    m = make_tiny_model(d_vocab=300)
    m.tokenizer = ByteTokenizer()
    return m


@pytest.fixture
def broken_metrics():
    @tg.register_metric("_t_fail", needs="activations")
    def fail(model, tokens, *, hooks=None):
        raise RuntimeError("metric exploded")

    @tg.register_metric("_t_interrupt", needs="weights")
    def interrupt(model, tokens, *, hooks=None):
        raise KeyboardInterrupt

    yield
    tg.unregister_metric("_t_fail")
    tg.unregister_metric("_t_interrupt")


def test_failed_metric_gives_partial_report(byte_model, broken_metrics, tmp_path):
    rep = run_report(byte_model, n_seqs=2, seq_len=16, metrics=["shape", "_t_fail", "depth_width"],
                     out=tmp_path / "r", figures=False, progress=False)
    assert rep.provenance["status"] == "partial"
    assert "metric exploded" in rep.provenance["errors"]["_t_fail"]
    assert rep.value("shape.d_model") == 32 and "depth_width.ratio" in rep.metrics
    saved = tg.GeometryReport.from_json(tmp_path / "r" / "report.json")
    assert saved.provenance["status"] == "partial" and len(saved) == len(rep)


def test_interrupted_run_keeps_results_marked(byte_model, broken_metrics, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        run_report(byte_model, n_seqs=2, seq_len=16, metrics=["shape", "_t_interrupt", "depth_width"],
                   out=tmp_path / "r", figures=False, progress=False)
    saved = tg.GeometryReport.from_json(tmp_path / "r" / "report.json")
    assert saved.provenance["status"] == "interrupted"
    assert "shape.n_layers" in saved.metrics and "depth_width.ratio" not in saved.metrics


def test_complete_run_with_figures(byte_model, tmp_path):
    rep = run_report(byte_model, n_seqs=2, seq_len=16, metrics=["shape", "epsilon", "spectral"],
                     out=tmp_path / "r", progress=False)
    assert rep.provenance["status"] == "complete" and rep.provenance["n_tokens"] == 32
    files = {p.name for p in (tmp_path / "r").iterdir()}
    assert {"report.json", "report.md", "index.html", "spectral.png"} <= files
