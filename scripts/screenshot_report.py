#!/usr/bin/env python
"""Screenshot an HTML report with headless Chromium, when Chromium is installed.

Usage::

    python scripts/screenshot_report.py reports/smollm2-135m/index.html --out report.png

Looks for ``/usr/bin/chromium``, ``chromium-browser``, ``chromium`` or ``google-chrome`` (or
``$CHROMIUM``). Without one it prints "skipped: ..." and exits 0, so CI without a browser stays
green; with one, a failed or empty screenshot exits 1.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    env = os.environ.get("CHROMIUM")
    if env and Path(env).exists():
        return env
    for c in CANDIDATES:
        path = c if Path(c).is_file() else shutil.which(c)
        if path:
            return path
    return None


def screenshot(html: Path, out: Path, *, width: int = 1200, height: int = 4000, timeout: int = 120) -> Path:
    browser = find_chromium()
    if browser is None:
        raise FileNotFoundError("no Chromium found (looked for /usr/bin/chromium, chromium-browser, google-chrome)")
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
        f"--window-size={width},{height}", f"--screenshot={out.resolve()}", html.resolve().as_uri(),
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
    p.add_argument("--height", type=int, default=4000)
    args = p.parse_args(argv)
    if not args.html.is_file():
        print(f"error: no such file: {args.html}", file=sys.stderr)
        return 2
    if find_chromium() is None:
        print("skipped: no headless Chromium on this machine (install chromium to screenshot the report)")
        return 0
    out = args.out or args.html.with_name("screenshot.png")
    try:
        screenshot(args.html, out, width=args.width, height=args.height)
    except (subprocess.SubprocessError, RuntimeError, OSError) as exc:
        print(f"error: screenshot failed: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
