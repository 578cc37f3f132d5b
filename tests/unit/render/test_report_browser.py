"""index.html in a real browser (headless Chromium through Selenium): figures decode, sections
present, no console errors; and the check catches a broken page.

Without Chromium / ChromeDriver / Selenium the tests skip with what is missing — except in CI
(``CI`` = 1/true, or ``TL_GEOMETRY_REQUIRE_BROWSER=1`` as ``.ci/run`` sets), where they fail.
The screenshot of the page is kept in ``tests/artifacts/browser/`` (git-ignored; the path is
printed) for a person to look at.
"""

import base64
import re
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from tests.helpers import (
    builtin_sections,  # noqa: E402
    load_script,  # noqa: E402
    make_report,  # noqa: E402
)
from tl_geometry.render.html import write_outputs  # noqa: E402
from tl_geometry.render.readings import sections  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
ARTIFACTS = ROOT / "tests" / "artifacts" / "browser"


shot = load_script("screenshot_report")


def _need_browser():
    missing = shot.missing_tools()
    if not missing:
        return
    msg = f"headless browser check needs {', '.join(missing)}"
    if shot.browser_required():
        pytest.fail(f"{msg}; required in CI (CI / TL_GEOMETRY_REQUIRE_BROWSER set): .ci/run installs them")
    pytest.skip(msg)


@pytest.fixture(scope="module")
def browser():
    _need_browser()
    b = shot.Browser()
    yield b
    b.close()


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """A synthetic report written as the CLI writes it; (index.html, report, expected sections)."""
    report = make_report(families="all")  # rows of every built-in family
    index = write_outputs(report, tmp_path_factory.mktemp("browser") / "report", dpi=50)
    expected = list(sections(report)) + ["Provenance"]
    assert set(builtin_sections()) <= set(expected) and len(builtin_sections()) >= 6  # not vacuous
    return index, report, expected


def _show(capsys, path):
    with capsys.disabled():
        print(f"\n[browser screenshot] {path}")


def test_report_renders_in_chromium(browser, page, capsys):
    index, _, expected = page
    n_png = len(list(index.parent.glob("*.png")))
    assert n_png >= 5
    res = browser.check(index, expected_sections=expected, screenshot=ARTIFACTS / "index.png")
    _show(capsys, res.screenshot)
    assert res.problems() == []
    assert res.ok
    assert len(res.images) == n_png and all(i["naturalWidth"] > 0 for i in res.images)
    assert res.sections[: len(expected)] == expected or set(expected) <= set(res.sections)
    assert res.screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _broken_copy(index: Path, dest: Path, edit) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    text = edit(index.read_text())
    out = dest / "index.html"
    out.write_text(text)
    return out


def _break_second_png(text: str) -> str:
    uris = re.findall(r'src="(data:image/png;base64,[^"]+)"', text)
    assert len(uris) >= 2
    raw = base64.b64decode(uris[1].split(",", 1)[1])
    bad = raw[:8] + b"\x00" * 64 + raw[72:200]  # a PNG signature over a mangled, truncated body
    return text.replace(uris[1], "data:image/png;base64," + base64.b64encode(bad).decode("ascii"), 1)


def test_check_reports_a_broken_png(browser, page, tmp_path):
    index, _, expected = page
    alts = re.findall(r'<img src="[^"]+" alt="([^"]*)"', index.read_text())
    broken = _broken_copy(index, tmp_path / "png", _break_second_png)
    res = browser.check(broken, expected_sections=expected)
    assert not res.ok
    assert res.broken_images == [alts[1]]
    assert res.problems() == [f"figure did not decode (naturalWidth 0): {alts[1]}"]


def test_check_reports_a_missing_section_and_a_console_error(browser, page, tmp_path):
    index, _, expected = page

    def edit(text):
        text = text.replace("<h2>Spectral</h2>", "<h3>Spectral</h3>", 1)
        return text.replace("</body>", "<script>console.error('tlg-test: deliberate error')</script></body>", 1)

    res = browser.check(_broken_copy(index, tmp_path / "sec", edit), expected_sections=expected)
    assert res.missing_sections == ["Spectral"]
    assert len(res.console_errors) == 1 and "tlg-test: deliberate error" in res.console_errors[0]
    assert not res.ok


def test_check_reports_an_uncaught_exception(browser, page, tmp_path):
    index, _, expected = page
    edit = lambda t: t.replace("</body>", "<script>undefinedFunctionTlg()</script></body>", 1)  # noqa: E731
    res = browser.check(_broken_copy(index, tmp_path / "js", edit), expected_sections=expected)
    assert any("undefinedFunctionTlg" in e for e in res.console_errors), res.console_errors


def test_script_exit_status(page, tmp_path, capsys):
    """The command line: 0 on the good page, 1 on a broken one (with the reason)."""
    _need_browser()
    index, _, _ = page
    assert shot.main([str(index), "--out", str(tmp_path / "good.png")]) == 0
    assert "ok:" in capsys.readouterr().out
    broken = _broken_copy(index, tmp_path / "png", _break_second_png)
    (broken.parent / "report.json").write_text((index.parent / "report.json").read_text())
    assert shot.main([str(broken), "--out", str(tmp_path / "bad.png")]) == 1
    assert "figure did not decode" in capsys.readouterr().err


def test_missing_browser_skips_locally_but_fails_in_ci(monkeypatch, tmp_path, capsys):
    index = tmp_path / "index.html"
    index.write_text("<html><body><h2>Provenance</h2></body></html>")
    monkeypatch.setattr(shot, "find_chromium", lambda: None)
    for var in ("CI", "TL_GEOMETRY_REQUIRE_BROWSER"):
        monkeypatch.delenv(var, raising=False)
    assert not shot.browser_required()
    assert shot.main([str(index)]) == 0 and "skipped" in capsys.readouterr().out
    monkeypatch.setenv("CI", "true")
    assert shot.browser_required()
    assert shot.main([str(index)]) == 1
    assert "required in CI" in capsys.readouterr().err
    monkeypatch.setenv("CI", "0")
    monkeypatch.setenv("TL_GEOMETRY_REQUIRE_BROWSER", "1")
    assert shot.browser_required()


def test_the_browser_tests_fail_in_ci_instead_of_skipping(monkeypatch):
    monkeypatch.setattr(shot, "missing_tools", lambda: ["Chromium (apt-get install chromium)"])
    for var in ("CI", "TL_GEOMETRY_REQUIRE_BROWSER"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(pytest.skip.Exception, match="needs Chromium"):
        _need_browser()
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="required in CI"):
        _need_browser()
