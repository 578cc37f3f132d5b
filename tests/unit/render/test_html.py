"""The self-contained HTML report and write_outputs, on synthetic reports."""

import base64
import json
from html.parser import HTMLParser

import pytest

pytest.importorskip("matplotlib")

from tests.helpers import builtin_families, builtin_figures, builtin_sections, make_report  # noqa: E402
from tl_geometry.render import plotting  # noqa: E402
from tl_geometry.render.html import OutputExistsError, render_markdown, write_html, write_outputs  # noqa: E402
from tl_geometry.report import GeometryReport  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs, self.refs, self.h2, self._in_h2 = [], [], [], False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a)
        for key in ("src", "href"):
            if key in a and tag != "img":
                self.refs.append(a[key])
        self._in_h2 = tag == "h2"

    def handle_endtag(self, tag):
        self._in_h2 = False

    def handle_data(self, data):
        if self._in_h2:
            self.h2.append(data)


def parse(path):
    c = _Collector()
    c.feed(path.read_text(encoding="utf-8"))
    return c


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("rep") / "smollm2"
    report = make_report(families="all")  # rows of every built-in family
    return report, out, write_outputs(report, out, dpi=40)


def test_all_images_embedded(written):
    report, out, index = written
    c = parse(index)
    assert len(c.imgs) == len(plotting.FIGURES) == len(builtin_figures())
    captions = [fig.caption or fig.name for f in builtin_families() for fig in f.figures]
    assert [img["alt"] for img in c.imgs] == captions  # each in its family's section, in order
    for img in c.imgs:
        src = img["src"]
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == PNG
        assert img.get("alt")
    assert c.refs == []  # no link to any file (self-contained)


def test_outputs_written_and_round_trip(written):
    report, out, index = written
    names = {p.name for p in out.iterdir()}
    assert {"report.json", "report.md", "index.html"} <= names
    assert {f"{n}.png" for n in plotting.FIGURES} <= names
    back = GeometryReport.from_json(out / "report.json")
    assert back.rows == report.rows
    # every figure link in report.md points to a file that exists
    md = (out / "report.md").read_text()
    for n in plotting.FIGURES:
        assert f"]({n}.png)" in md and (out / f"{n}.png").is_file()


def test_sections_and_readings(written):
    report, out, index = written
    c = parse(index)
    sections = builtin_sections()
    assert c.h2[: len(sections)] == sections and len(sections) >= 6
    text = index.read_text()
    assert "ε = 0.73" in text and "Class 1" in text and "capacity paper" in text


def test_partial_family_only_its_section(tmp_path):
    index = write_outputs(make_report(families=("sae",)), tmp_path / "o", dpi=40)
    c = parse(index)
    assert "SAE comparison" in c.h2 and "Capacity" not in c.h2
    assert len(c.imgs) == 1


def test_existing_dir_refused(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(OutputExistsError, match=r"already exists and is not empty; pass force=True"):
        write_outputs(make_report(families=("sae",)), out)
    with pytest.raises(ValueError, match="already exists"):  # the CLI maps ValueError to exit 2
        write_outputs(make_report(families=("sae",)), out)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_force_overwrites_but_keeps_other_files(tmp_path):
    out = tmp_path / "o"
    write_outputs(make_report(families=("capacity",)), out, dpi=40)
    (out / "notes.txt").write_text("mine")
    write_outputs(make_report(families=("sae",)), out, force=True, dpi=40)
    assert (out / "notes.txt").read_text() == "mine"
    # our figures of the older report are removed: none may sit next to a report it is not from
    assert not (out / "cosine_histogram.png").exists() and (out / "sae_widths.png").exists()
    assert not (out / "partial-run").exists() and not (out / ".tl-geometry.lock").exists()
    assert len(parse(out / "index.html").imgs) == 1
    assert json.loads((out / "report.json").read_text())["rows"][0]["metric"].startswith("sae.")


def test_empty_existing_dir_ok(tmp_path):
    (tmp_path / "o").mkdir()
    assert write_outputs(GeometryReport.from_rows([], model="m"), tmp_path / "o", dpi=40).is_file()


def test_out_dir_is_a_file(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        write_outputs(make_report(families=("sae",)), f, force=True)


def test_missing_figure_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="figure files not found"):
        write_html(make_report(families=("sae",)), tmp_path, {"sae_widths": tmp_path / "nope.png"})


def test_partial_banner(tmp_path):
    rep = make_report(families=("sae",), partial=True, missing_metrics=["pga", "agop"])
    text = write_outputs(rep, tmp_path / "o", dpi=40).read_text()
    assert 'class="banner"' in text and "pga, agop" in text
    assert "Partial results" in render_markdown(rep)


def test_no_banner_when_complete(written):
    assert 'class="banner"' not in written[2].read_text()


def test_html_escapes_model_name(tmp_path):
    rep = GeometryReport.from_rows([{"metric": "x", "value": 1.0}], model="<script>alert(1)</script>")
    text = write_outputs(rep, tmp_path / "o", dpi=40).read_text()
    assert "<script>" not in text and "&lt;script&gt;" in text


def test_markdown_sections_optional():
    md = render_markdown(make_report(families=("capacity",)), {"cosine_histogram": "/x/cosine_histogram.png"})
    assert "## Capacity" in md and "## Subspace PGA" not in md
    assert "![cosine_histogram](cosine_histogram.png)" in md
    assert "| epsilon.W_E |" in md.replace("|  |", "|").replace("| None |", "|") or "epsilon.W_E" in md


@pytest.mark.parametrize("status", ["interrupted", "partial", "running"])
def test_banner_from_pipeline_status(tmp_path, status):
    rep = make_report(families=("sae",), status=status, errors={"pga": "RuntimeError: boom"})
    text = write_outputs(rep, tmp_path / "o", dpi=40).read_text()
    assert 'class="banner"' in text and "pga: RuntimeError: boom" in text


def test_no_banner_when_status_complete(tmp_path):
    rep = make_report(families=("sae",), status="complete", errors={})
    assert 'class="banner"' not in write_outputs(rep, tmp_path / "o", dpi=40).read_text()


def _screenshot_module():
    from tests.helpers import load_script

    return load_script("screenshot_report")


def test_screenshot_script(written, tmp_path, capsys):
    mod = _screenshot_module()
    index = written[2]
    out = tmp_path / "shot.png"
    rc = mod.main([str(index), "--out", str(out), "--height", "1500"])
    if mod.find_chromium() is None:
        assert rc == 0 and "skipped" in capsys.readouterr().out
    else:
        assert rc == 0 and out.read_bytes()[:8] == PNG


def test_screenshot_script_missing_file(tmp_path, capsys):
    assert _screenshot_module().main([str(tmp_path / "nope.html")]) == 2
    assert "no such file" in capsys.readouterr().err


# ----------------------------------------------------------------------------- CLI: tl-geometry render
def test_cli_render(tmp_path, capsys):
    from tl_geometry.cli import main

    src = tmp_path / "r.json"
    make_report(families=("sae",)).to_json(src)
    out = tmp_path / "html"
    assert main(["render", str(src), "--out", str(out), "--dpi", "40"]) == 0
    assert "sae.d_sae" in capsys.readouterr().out
    assert len(parse(out / "index.html").imgs) == 1
    # existing output refused (exit 2, one line), then accepted with --force
    assert main(["render", str(src), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert main(["render", str(src), "--out", str(out), "--force", "--dpi", "40"]) == 0


def test_cli_render_merges(tmp_path):
    from tl_geometry.cli import main

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    make_report(families=("sae",)).to_json(a)
    make_report(families=("capacity",)).to_json(b)
    assert main(["render", str(a), str(b), "--out", str(tmp_path / "o"), "--dpi", "40"]) == 0
    assert len(GeometryReport.from_json(tmp_path / "o" / "report.json")) == len(GeometryReport.from_json(a)) + len(
        GeometryReport.from_json(b)
    )


@pytest.mark.parametrize(
    "setup,args,match",
    [
        (None, ["nope.json"], "no such report file"),
        ("bad", ["bad.json"], "not valid JSON"),
        ("norows", ["norows.json"], "missing 'rows'"),
        ("ok", ["ok.json", "--dpi", "1"], "--dpi must be from 10 to 600"),
    ],
)
def test_cli_render_bad_input(tmp_path, capsys, monkeypatch, setup, args, match):
    from tl_geometry.cli import main

    monkeypatch.chdir(tmp_path)
    if setup == "bad":
        (tmp_path / "bad.json").write_text("{not json")
    elif setup == "norows":
        (tmp_path / "norows.json").write_text('{"provenance": {}}')
    elif setup == "ok":
        make_report(families=("sae",)).to_json(tmp_path / "ok.json")
    assert main(["render", *args, "--out", str(tmp_path / "o")]) == 2
    assert match in capsys.readouterr().err
