#!/usr/bin/env python
"""Open an HTML report in headless Chromium: check that it renders, and screenshot it.

Usage::

    python scripts/screenshot_report.py reports/smollm2-135m/index.html [--out report.png]

With Selenium and ChromeDriver installed (the ``dev`` extra; Debian's ``chromium`` and
``chromium-driver``), the page is checked: every ``<img>`` must decode (``naturalWidth > 0``),
every section the report has readings for (and Provenance) must be present as an ``<h2>``, and
the browser console must hold no error. Problems are printed and the exit status is 1. A
full-page screenshot is written either way (default: ``screenshot.png`` next to the HTML).

Looks for ``$CHROMIUM``, ``/usr/bin/chromium``, ``chromium-browser``, ``chromium`` or
``google-chrome``, and ``$CHROMEDRIVER`` or ``chromedriver``. Without a browser it prints
"skipped: ..." and exits 0 — except in CI (``CI`` set to 1/true, or
``TL_GEOMETRY_REQUIRE_BROWSER=1``, which ``.ci/run`` sets), where a missing browser is an error
(exit 1): the check must not pass by not running.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
DRIVERS = ("/usr/bin/chromedriver", "chromedriver")
#: Flags for a root, offline, display-less machine (without the networking ones Chromium keeps
#: trying to reach Google's hosts, which this machine refuses).
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--disable-extensions",
)


def browser_required() -> bool:
    """True in CI (``CI`` = 1/true/yes) or with ``TL_GEOMETRY_REQUIRE_BROWSER=1``: no skipping."""
    truthy = ("1", "true", "yes")
    return (
        os.environ.get("CI", "").strip().lower() in truthy
        or os.environ.get("TL_GEOMETRY_REQUIRE_BROWSER", "").strip().lower() in truthy
    )


def _find(env: str, candidates) -> str | None:
    path = os.environ.get(env)
    if path and Path(path).exists():
        return path
    for c in candidates:
        found = c if Path(c).is_file() else shutil.which(c)
        if found:
            return found
    return None


def find_chromium() -> str | None:
    return _find("CHROMIUM", CANDIDATES)


def find_chromedriver() -> str | None:
    return _find("CHROMEDRIVER", DRIVERS)


def missing_tools() -> list[str]:
    """What the page check needs and this machine lacks (empty when it can run)."""
    missing = []
    if find_chromium() is None:
        missing.append("Chromium (apt-get install chromium)")
    if find_chromedriver() is None:
        missing.append("ChromeDriver (apt-get install chromium-driver)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip install -e '.[dev]')")
    return missing


@dataclass
class PageCheck:
    """What the browser saw: figures that did not decode, sections missing, console errors."""

    url: str
    images: list[dict] = field(default_factory=list)  # {"alt", "naturalWidth", "complete"}
    sections: list[str] = field(default_factory=list)  # the <h2> texts, in order
    missing_sections: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    screenshot: Path | None = None

    @property
    def broken_images(self) -> list[str]:
        return [
            i["alt"] or f"image {n}"
            for n, i in enumerate(self.images)
            if not i["complete"] or not i["naturalWidth"] > 0
        ]

    @property
    def ok(self) -> bool:
        return not (self.broken_images or self.missing_sections or self.console_errors)

    def problems(self) -> list[str]:
        out = [f"figure did not decode (naturalWidth 0): {alt}" for alt in self.broken_images]
        out += [f"section missing: {s}" for s in self.missing_sections]
        out += [f"console error: {e}" for e in self.console_errors]
        return out


class Browser:
    """One headless Chromium driven by Selenium; reuse it for several pages, then ``close()``."""

    def __init__(self, *, width: int = 1200, height: int = 900):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        missing = missing_tools()
        if missing:
            raise FileNotFoundError("the browser check needs " + ", ".join(missing))
        self._profile = tempfile.TemporaryDirectory(prefix="tlg-chromium-")
        opts = webdriver.ChromeOptions()
        opts.binary_location = find_chromium()
        for f in FLAGS:
            opts.add_argument(f)
        opts.add_argument(f"--window-size={width},{height}")
        opts.add_argument(f"--user-data-dir={self._profile.name}")
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.width = width
        self.driver = webdriver.Chrome(service=Service(executable_path=find_chromedriver()), options=opts)

    def check(
        self,
        html: str | os.PathLike,
        *,
        expected_sections=(),
        screenshot: str | os.PathLike | None = None,
        max_height: int = 12000,
    ) -> PageCheck:
        """Load ``html`` and check it (see the module docstring); screenshot the whole page."""
        url = Path(html).resolve().as_uri()
        d = self.driver
        d.get_log("browser")  # drop what earlier pages logged
        d.get(url)  # returns after the load event: every <img> has loaded or failed
        res = PageCheck(url)
        res.images = d.execute_script(
            "return Array.from(document.images).map(i => ({alt: i.alt, naturalWidth: i.naturalWidth,"
            " complete: i.complete}));"
        )
        res.sections = [
            s.strip()
            for s in d.execute_script("return Array.from(document.querySelectorAll('h2')).map(h => h.textContent);")
        ]
        res.missing_sections = [s for s in expected_sections if s not in res.sections]
        res.console_errors = [e.get("message", str(e)) for e in d.get_log("browser") if e.get("level") == "SEVERE"]
        if screenshot is not None:
            h = int(d.execute_script("return document.documentElement.scrollHeight;"))
            d.set_window_size(self.width, min(max(h, 600), max_height))
            out = Path(screenshot)
            out.parent.mkdir(parents=True, exist_ok=True)
            if not d.save_screenshot(str(out)) or not out.is_file() or out.stat().st_size == 0:
                raise RuntimeError(f"Chromium wrote no screenshot to {out}")
            res.screenshot = out
        return res

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            self._profile.cleanup()

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def expected_sections(html: Path) -> list[str]:
    """Sections the page must show: those of its report.json's readings (next to it), and Provenance."""
    report_json = html.with_name("report.json")
    titles = []
    if report_json.is_file():
        from tl_geometry.render.readings import sections
        from tl_geometry.report import GeometryReport

        titles = list(sections(GeometryReport.from_json(report_json)))
    return titles + ["Provenance"]


def screenshot(html: Path, out: Path, *, width: int = 1200, height: int = 4000, timeout: int = 120) -> Path:
    """A screenshot with the Chromium command line only (no Selenium, no checks)."""
    browser = find_chromium()
    if browser is None:
        raise FileNotFoundError("no Chromium found (looked for /usr/bin/chromium, chromium-browser, google-chrome)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tlg-chromium-") as profile:
        cmd = [
            browser,
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            f"--screenshot={out.resolve()}",
            html.resolve().as_uri(),
        ]
        subprocess.run(cmd, check=True, capture_output=True, timeout=timeout)
    if not out.is_file() or out.stat().st_size == 0:
        raise RuntimeError(f"Chromium wrote no screenshot to {out}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("html", type=Path, help="index.html written by tl-geometry report")
    p.add_argument("--out", type=Path, default=None, help="PNG path (default: next to the HTML, screenshot.png)")
    p.add_argument("--width", type=int, default=1200)
    p.add_argument(
        "--height", type=int, default=900, help="initial window height (the screenshot takes the whole page)"
    )
    args = p.parse_args(argv)
    if not args.html.is_file():
        print(f"error: no such file: {args.html}", file=sys.stderr)
        return 2
    out = args.out or args.html.with_name("screenshot.png")
    missing = missing_tools()
    if missing:
        msg = f"no headless browser check: this machine lacks {', '.join(missing)}"
        if browser_required():
            print(f"error: {msg} (required in CI)", file=sys.stderr)
            return 1
        if find_chromium() is None:
            print(f"skipped: {msg}")
            return 0
        try:  # Chromium without Selenium/ChromeDriver: a screenshot, no checks
            screenshot(args.html, out, width=args.width, height=max(args.height, 600))
        except (subprocess.SubprocessError, RuntimeError, OSError) as exc:
            print(f"error: screenshot failed: {exc}", file=sys.stderr)
            return 1
        print(f"wrote {out} ({msg})")
        return 0
    try:
        with Browser(width=args.width, height=args.height) as b:
            res = b.check(args.html, expected_sections=expected_sections(args.html), screenshot=out)
    except Exception as exc:  # noqa: BLE001 - any browser failure fails the check
        print(f"error: browser check failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {out}")
    for line in res.problems():
        print(f"error: {line}", file=sys.stderr)
    if res.ok:
        print(f"ok: {len(res.images)} figures decoded, sections {res.sections}, no console errors")
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main())
