"""Notebook-first display: GeometryReport._repr_html_, report.plot(family), tg.analyze's progress bars."""

import base64
import re
from html.parser import HTMLParser

import pytest

pytest.importorskip("matplotlib")

import tl_geometry as tg  # noqa: E402
from tests.helpers import make_report  # noqa: E402
from tl_geometry.render import plotting  # noqa: E402
from tl_geometry.render.html import write_outputs  # noqa: E402
from tl_geometry.report import GeometryReport  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs, self.h2, self.tags, self._h2 = [], [], [], False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.imgs.append(dict(attrs))
        self._h2 = tag == "h2"

    def handle_endtag(self, tag):
        self._h2 = False

    def handle_data(self, data):
        if self._h2:
            self.h2.append(data)


def _parse(text):
    p = _Page()
    p.feed(text)
    return p


def _png_bytes(src):
    assert src.startswith("data:image/png;base64,"), src[:40]
    return base64.b64decode(src.split(",", 1)[1])


@pytest.fixture(scope="module")
def report():
    return make_report()


@pytest.fixture(scope="module")
def frag(report):
    return report._repr_html_()


def test_repr_html_has_the_content_of_index_html(report, frag, tmp_path):
    page = (write_outputs(report, tmp_path / "r")).read_text()
    a, b = _parse(frag), _parse(page)
    # a fragment for a notebook cell, not a page
    assert "html" not in a.tags and "body" not in a.tags and "head" not in a.tags
    assert frag.startswith('<div class="tl-geometry-report">') and frag.rstrip().endswith("</div>")
    # the same sections, in the same order, and the same figures (as inline PNGs)
    assert a.h2 == b.h2
    assert {"Capacity", "Subspace PGA", "Spectral", "Interaction", "SAE comparison", "Provenance"} <= set(a.h2)
    assert [i["alt"] for i in a.imgs] == [i["alt"] for i in b.imgs]
    assert len(a.imgs) == len(plotting.figures(report))
    for img in a.imgs:
        assert _png_bytes(img["src"]).startswith(PNG)
    # every row in the table
    assert f"All {len(report.rows)} rows" in frag


def test_repr_html_style_is_scoped_to_the_report(frag):
    css = re.search(r"<style>(.*?)</style>", frag, re.S).group(1)
    rules = [r for r in css.split("}") if r.strip()]
    assert len(rules) > 5
    for rule in rules:
        selectors = rule.split("{", 1)[0].split(",")
        assert all(s.strip().startswith(".tl-geometry-report") for s in selectors), rule


def test_repr_html_of_an_empty_report():
    frag = GeometryReport()._repr_html_()
    assert "No rows of the built-in families" in frag and "<img" not in frag


def test_repr_html_is_what_jupyter_calls(report, frag, monkeypatch):
    HTMLFormatter = pytest.importorskip("IPython.core.formatters").HTMLFormatter

    monkeypatch.setattr(GeometryReport, "_repr_html_", lambda self: frag)  # drawn once, above
    assert HTMLFormatter()(report) == frag


@pytest.mark.parametrize(
    "family,figure", sorted(plotting.FAMILY_FIGURES.items()) + [("cosine_histogram", "cosine_histogram")]
)
def test_plot_returns_the_familys_figure(report, family, figure):
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    fig = report.plot(family)
    try:
        assert isinstance(fig, Figure)
        expected = plotting.FIGURES[figure][0](report)
        # the same drawing as the figure the HTML report embeds: same axes and titles
        assert [ax.get_title() for ax in fig.axes] == [ax.get_title() for ax in expected.axes]
        plt.close(expected)
    finally:
        plt.close(fig)


def test_plot_unknown_family_lists_the_accepted_ones(report):
    with pytest.raises(ValueError, match=r"unknown figure family 'capcity'.*'capacity'.*'pga'"):
        report.plot("capcity")
    with pytest.raises(ValueError, match="unknown figure family"):
        report.plot(None)


def test_plot_without_rows_says_so():
    only_capacity = make_report(families=("capacity",))
    with pytest.raises(ValueError, match=r"no rows for the 'pga' figure \(pga_z\)"):
        only_capacity.plot("pga")


# ----------------------------------------------------------------------------- progress
class _Bar:
    """Stands in for tqdm.auto.tqdm: records bars, descriptions and the items iterated."""

    bars: list = []

    def __init__(self, iterable=None, desc=None, disable=False, **kw):
        self.iterable, self.desc, self.disable, self.kw, self.descs = iterable, desc, disable, kw, []
        _Bar.bars.append(self)

    def __iter__(self):
        return iter(self.iterable)

    def set_description(self, d):
        self.descs.append(d)


@pytest.fixture
def fake_tqdm(monkeypatch):
    import tqdm.auto

    _Bar.bars = []
    monkeypatch.setattr(tqdm.auto, "tqdm", _Bar)
    return _Bar


@pytest.fixture
def probe_metrics():
    seen = {}

    @tg.register_metric("_probe_progress", needs="weights")
    def with_progress(model, tokens=None, *, hooks=None, progress: bool = False):
        seen["with"] = progress
        return GeometryReport.from_rows([{"metric": "probe.a", "value": 1.0}], model="m")

    @tg.register_metric("_probe_kwargs", needs="weights")
    def strict(model, tokens=None, *, hooks=None, **options):
        if options:
            raise TypeError(f"unexpected options {options}")
        seen["kwargs"] = True
        return GeometryReport.from_rows([{"metric": "probe.b", "value": 2.0}], model="m")

    yield seen
    tg.unregister_metric("_probe_progress")
    tg.unregister_metric("_probe_kwargs")


@pytest.mark.parametrize("progress", [True, False])
def test_analyze_shows_a_bar_naming_each_metric(tiny_model, fake_tqdm, probe_metrics, progress):
    names = ["_probe_progress", "_probe_kwargs", "depth_width"]
    rep = tg.analyze(tiny_model, metrics=names, progress=progress)
    outer = [b for b in fake_tqdm.bars if b.desc == "metrics"]
    assert len(outer) == 1 and outer[0].disable is (not progress)
    assert outer[0].descs == [f"metrics: {n}" for n in names]
    # a metric that takes `progress` gets analyze's; one that does not is not handed it
    assert probe_metrics == {"with": progress, "kwargs": True}
    assert {"probe.a", "probe.b"} <= rep.metrics


def test_analyze_progress_option_given_explicitly_wins(tiny_model, fake_tqdm, probe_metrics):
    tg.analyze(tiny_model, metrics=["_probe_progress"], options={"_probe_progress": {"progress": False}}, progress=True)
    assert probe_metrics["with"] is False


def test_analyze_uses_tqdm_auto():
    """In Jupyter tqdm.auto is the widget bar; analyze must take its bar from there."""
    import inspect

    from tl_geometry.runs import analysis

    assert "from tqdm.auto import tqdm" in inspect.getsource(analysis.iter_metrics)  # analyze's loop
