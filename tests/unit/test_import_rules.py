"""The rules of the house, checked on the source (AST), so that a change breaking them fails here.

* ``tl_geometry/metrics/`` is pure math on tensors: it never imports the capture layer, the
  model-facing families, the registry, the report, models, plotting, readings, html, analysis,
  pipeline, sae or the CLI — not even inside a function.
* ``tl_geometry/capture/`` runs models and knows no metric: it never imports ``metrics``,
  ``families``, the registry, the report, plotting, readings or html.
* nothing outside ``families/`` registers a built-in metric of the three papers, and the old
  modules (``capture_agop``, ``metrics/_*_registered``) stay gone.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "tl_geometry"

#: What the pure package may not import (module prefixes under tl_geometry).
PURE_FORBIDDEN = (
    "capture",
    "families",
    "registry",
    "report",
    "models",
    "plotting",
    "readings",
    "html",
    "analysis",
    "pipeline",
    "sae",
    "cli",
    "commands",
    "corpus",
    "hub",
    "weights_reader",
    "convergence",
    "reproduce",
    "sweep",
    "experiments",
    "outdir",
)
#: What the capture package may not import.
CAPTURE_FORBIDDEN = (
    "metrics",
    "families",
    "registry",
    "report",
    "plotting",
    "readings",
    "html",
    "analysis",
    "pipeline",
    "sae",
    "cli",
    "commands",
    "reproduce",
    "sweep",
    "experiments",
)


def imported_modules(path: Path, root: Path = PKG) -> list[tuple[int, str]]:
    """Every absolute module a file imports (anywhere in it), with line numbers; relative
    imports resolved against the file's package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(root.parent).with_suffix("")
    package = list(rel.parts[:-1])
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))
            # "from tl_geometry import capture" imports the submodule capture
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names if mod == "tl_geometry"]
    return out


def violations(folder: str, forbidden: tuple[str, ...], root: Path = PKG) -> list[str]:
    bad = []
    for path in sorted((root / folder).rglob("*.py")):
        for line, mod in imported_modules(path, root):
            parts = mod.split(".")
            if parts[0] != "tl_geometry" or len(parts) < 2:
                continue
            if parts[1] in forbidden:
                bad.append(f"{path.relative_to(root.parent)}:{line} imports {mod}")
    return bad


def test_metrics_package_is_pure():
    assert violations("metrics", PURE_FORBIDDEN) == []


def test_capture_knows_no_metric():
    assert violations("capture", CAPTURE_FORBIDDEN) == []


def test_old_modules_are_gone():
    for old in (
        "capture_agop.py",
        "capture.py",
        "metrics/basic.py",
        "metrics/_pga_metric.py",
        "metrics/_capacity_registered.py",
        "metrics/_interaction_registered.py",
    ):
        assert not (PKG / old).exists(), old


def test_only_families_register_the_papers_metrics():
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if rel.startswith("families/") or rel.startswith("sae") or rel == "registry.py":
            continue
        if "register_metric(" in path.read_text(encoding="utf-8"):
            bad.append(rel)
    assert bad == []


@pytest.mark.parametrize(
    "folder, source, forbidden",
    [
        ("metrics", "from tl_geometry import capture\n", PURE_FORBIDDEN),
        ("metrics", "def f():\n    from tl_geometry.report import GeometryReport\n", PURE_FORBIDDEN),
        ("metrics", "from ..families import pga\n", PURE_FORBIDDEN),
        ("capture", "import tl_geometry.metrics.interaction\n", CAPTURE_FORBIDDEN),
        ("capture", "from tl_geometry.metrics.interaction import AGOPAccumulator\n", CAPTURE_FORBIDDEN),
    ],
)
def test_the_rule_fails_on_a_violation(tmp_path, folder, source, forbidden):
    """The checker itself: a planted import in a copy of the layout is reported."""
    root = tmp_path / "tl_geometry"
    (root / folder).mkdir(parents=True)
    (root / folder / "planted.py").write_text(source)
    found = violations(folder, forbidden, root=root)
    assert len(found) == 1 and "planted.py" in found[0]
