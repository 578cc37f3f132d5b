"""pytest plugin for the TL-4 lane: a test that needs HookedTransformer skips instead of erroring.

TransformerLens 4 removed ``HookedTransformer`` / ``HookedTransformerConfig`` / ``utils``; importing
them raises ``ImportError("... was removed in TransformerLens 4.0 ...")``. When such an error comes
from the *tests* (a fixture such as ``tiny_model`` or a test body) the test is reported as skipped
("needs HookedTransformer (TransformerLens < 4)"). When any frame of the traceback lies in the
``tl_geometry`` package, the error is a real bug of the library on TL 4 and stays an error.

Loaded by ci/tl4/run.sh with ``-p tl4_skip``. A test can also guard itself:
``pytest.importorskip``-style, e.g. ``if not _sweep_helpers.has_hooked_transformer(): pytest.skip(...)``.
"""

from __future__ import annotations

import pytest

MARK = "was removed in TransformerLens 4.0"
SKIPPED: list[str] = []


def _from_tests_only(excinfo) -> bool:
    for entry in excinfo.traceback:
        path = str(entry.path).replace("\\", "/")
        if "/tl_geometry/" in path and "/tests/" not in path:
            return False
    return True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    exc = call.excinfo
    if rep.failed and exc is not None and exc.errisinstance(ImportError) and MARK in str(exc.value):
        if _from_tests_only(exc):
            rep.outcome = "skipped"
            rep.longrepr = (str(item.path), item.location[1] or 0, "Skipped: needs HookedTransformer (TransformerLens < 4)")
            SKIPPED.append(item.nodeid)


def pytest_terminal_summary(terminalreporter):
    if SKIPPED:
        files = sorted({n.split("::")[0] for n in SKIPPED})
        terminalreporter.write_line(
            f"TL-4 lane: {len(SKIPPED)} tests skipped for needing HookedTransformer, in: {', '.join(files)}"
        )
