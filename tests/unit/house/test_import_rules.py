"""The rules of the house, checked on the source (AST), so that a change breaking them fails here.

* the rooms (stated once, in ``scripts/rooms.py``: base < metrics < io < runtime < models <
  capture < registry < report < render < runs < families < studies < commands) are the folders of
  ``tl_geometry/``; the package root keeps only its faces (``__init__.py``, ``errors.py``,
  ``cli.py``, data);
* **no import circle** anywhere, inside a room too — module-level and function-level imports,
  not ``if TYPE_CHECKING`` ones;
* the rank holds **transitively**: the closure of every module's imports, the parents every
  import runs (``import a.b.c`` runs ``a.b``) and the ``"module:function"`` / module-name strings
  of declarations reaches no module of a higher room. An upward reference is only ever a
  declared name, and only those of ``rooms.ALLOWED_UP`` (the registry's discovery of the built-in
  families, the report's display by the render room). Planted violations and cycles fail;
* ``tl_geometry/metrics/`` is pure math on tensors (imports only the base room) and the load-aware
  thread policy is not read there: a metric is passed its thread counts
  (``metrics.thread_choice.ThreadChoice``); ``tl_geometry/capture/`` knows no metric;
* nothing outside ``families/`` registers a built-in metric, and the old modules stay gone;
  moved module paths are an alias the package itself never uses;
* ``import tl_geometry`` loads nothing else (the root is lazy, PEP 562), and importing the math
  (``tl_geometry.metrics.*``) loads no model, capture, registry, report, render, family or
  thread-control code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.helpers import load_script

PKG = Path(__file__).resolve().parents[3] / "tl_geometry"

#: What the pure package may not import (top-level names under tl_geometry): every room but base.
PURE_FORBIDDEN = (
    "io",
    "runtime",
    "models",
    "capture",
    "registry",
    "report",
    "render",
    "runs",
    "families",
    "studies",
    "commands",
    "cli",
)
#: What the capture package may not import.
CAPTURE_FORBIDDEN = ("metrics", "registry", "report", "render", "runs", "families", "studies", "commands", "cli")


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
        if rel.startswith("families/") or rel.startswith("sae") or rel.startswith("registry/"):
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
        ("metrics", "def f():\n    from tl_geometry.runtime.threads import kernel\n", PURE_FORBIDDEN),
        ("metrics", "from tl_geometry.io import corpus\n", PURE_FORBIDDEN),
        ("metrics", "from tl_geometry.runtime import threads\n", PURE_FORBIDDEN),
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


# ----------------------------------------------------------------------------- ranked rooms
# The rooms are stated once, in scripts/rooms.py (which also prints them with their edges).
rooms = load_script("rooms")
ROOMS = rooms.ROOMS


def test_every_module_is_in_a_room_and_the_root_holds_only_faces():
    for module in rooms.modules():
        rooms.room_of(module)  # raises for a module in no room
    assert rooms.strays() == [], "the package root keeps only its faces; move these into a room folder"


def test_no_import_circle_anywhere():
    """No cycle of imports, inside a room too, function-level imports included."""
    assert rooms.cycles(rooms.import_graph()) == []


def test_rooms_hold_transitively():
    assert rooms.rank_violations(rooms.import_graph()) == []


def test_upward_references_are_declared_names_only():
    """Every edge to a higher room is a declared name (a string resolved at run time), and is one
    of the few listed in ``ALLOWED_UP``."""
    up = rooms.upward_declared(rooms.import_graph())
    assert [u for u in up if u[3] != "declared"] == []
    assert {(m, t) for m, t, _, _ in up} <= rooms.ALLOWED_UP


def _copy(tmp_path):
    import shutil

    copy = tmp_path / "tl_geometry"
    shutil.copytree(PKG, copy, ignore=shutil.ignore_patterns("__pycache__", "data"))
    return copy


@pytest.mark.parametrize(
    "file, source, reached",
    [
        # a function-level import in the math
        ("metrics/jackknife.py", "def _f():\n    from tl_geometry.families.pga import pga\n", "tl_geometry.families"),
        # a declaration string pointing upward
        ("metrics/jackknife.py", "_X = 'tl_geometry.render.plotting:figures'\n", "tl_geometry.render"),
        # the math reading the machine's load (thread policy is the runtime's: the choice is passed in)
        (
            "metrics/thread_choice.py",
            "def _f():\n    from tl_geometry.runtime.threads import choose\n",
            "tl_geometry.runtime",
        ),
        # a private metric module importing the policy (metrics.capacity, which imports it, reaches it too)
        ("metrics/_gram.py", "import tl_geometry.runtime.threads\n", "tl_geometry.runtime"),
        # two hops: an io module importing the render room, reached from the capture layer
        ("io/corpus.py", "def _f():\n    import tl_geometry.render.html\n", "tl_geometry.render.html"),
        # a shared module reaching into a family's folder
        (
            "render/readings.py",
            "def _f():\n    from tl_geometry.families.capacity import reading\n",
            "tl_geometry.families",
        ),
        # the report importing its renderer (it may only name it)
        ("report/__init__.py", "def _f():\n    from tl_geometry.render import html\n", "tl_geometry.render"),
    ],
)
def test_the_transitive_rule_fails_on_a_planted_import(tmp_path, file, source, reached):
    copy = _copy(tmp_path)
    with open(copy / file, "a", encoding="utf-8") as f:
        f.write("\n" + source)
    bad = rooms.rank_violations(rooms.import_graph(copy))
    assert bad, "the planted import was not caught"
    assert any(f"reaches {reached}" in b for b in bad), bad


@pytest.mark.parametrize(
    "file, source, circle",
    [
        # a function-level import back into the module that imports this one
        (
            "runtime/ray_executor.py",
            "def _f():\n    from tl_geometry.runtime.jobs import run_jobs\n",
            {"tl_geometry.runtime.jobs", "tl_geometry.runtime.ray_executor"},
        ),
        # a submodule importing its package's __init__, which imports it
        (
            "registry/family_specs.py",
            "def _f():\n    from tl_geometry.registry import get_metric\n",
            {"tl_geometry.registry", "tl_geometry.registry.family_specs"},
        ),
        # three modules in a ring
        (
            "runs/reproduction_rows.py",
            "def _f():\n    from tl_geometry.runs import reproduction\n",
            {"tl_geometry.runs.reproduction", "tl_geometry.runs.reproduction_rows"},
        ),
    ],
)
def test_the_circle_rule_fails_on_a_planted_cycle(tmp_path, file, source, circle):
    copy = _copy(tmp_path)
    with open(copy / file, "a", encoding="utf-8") as f:
        f.write("\n" + source)
    found = rooms.cycles(rooms.import_graph(copy))
    assert any(circle <= set(c) for c in found), found


def test_a_type_checking_import_is_no_circle(tmp_path):
    copy = _copy(tmp_path)
    with open(copy / "runtime/ray_executor.py", "a", encoding="utf-8") as f:
        f.write(
            "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tl_geometry.runtime.jobs import run_jobs\n"
        )
    assert not any("tl_geometry.runtime.ray_executor" in c for c in rooms.cycles(rooms.import_graph(copy)))


def test_a_stray_root_module_is_caught(tmp_path):
    copy = _copy(tmp_path)
    (copy / "helpers.py").write_text('"""A module dropped at the root."""\n')
    assert rooms.strays(copy) == ["helpers.py"]
    with pytest.raises(LookupError, match="in no room"):
        rooms.room_of("tl_geometry.helpers")


def test_registry_reaches_families_only_by_its_one_declared_name():
    graph = rooms.import_graph()
    up = [(m, kind) for m, _, kind in graph["tl_geometry.registry.phase"] if rooms.room_of(m)[1] == "families"]
    assert up == [("tl_geometry.families", "declared")], up


def test_the_package_never_uses_a_moved_path():
    """Old module paths (before the rooms) resolve through an alias for old notebooks and
    plugins, never from the package itself."""
    import tl_geometry

    old = sorted(tl_geometry._MOVED, key=len, reverse=True)
    pattern = re.compile(r"\b(" + "|".join(re.escape(o) for o in old) + r")\b(?![./\w])")
    hits = []
    for path in sorted(PKG.rglob("*.py")):
        if path.name == "__init__.py" and path.parent == PKG:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in pattern.finditer(line):
                hits.append(f"{path.relative_to(PKG)}:{n}: {m.group(0)}")
    assert hits == []


def test_a_moved_path_still_imports_with_a_warning():
    out = _run(
        "import warnings\nwarnings.simplefilter('error')\n"
        "try:\n    import tl_geometry.pipeline\nexcept DeprecationWarning as e:\n    print('warned:', e)\n"
        "warnings.simplefilter('ignore')\n"
        "import tl_geometry.pipeline as old, tl_geometry.runs.pipeline as new, tl_geometry as tg\n"
        "from tl_geometry.hub import HubUnavailableError\n"
        "print(old is new, old.__spec__.name, tg.readings.__name__, HubUnavailableError.__module__)"
    )
    assert "warned: tl_geometry.pipeline moved to tl_geometry.runs.pipeline" in out
    assert "True tl_geometry.runs.pipeline tl_geometry.render.readings tl_geometry.io.hub" in out


def _run(code: str) -> str:
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PKG.parent
    ).stdout


def _loaded_after(code: str) -> set[str]:
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-c",
            code + "\nimport sys\nprint('\\n'.join(m for m in sys.modules if m.startswith('tl_geometry')))",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=PKG.parent,
    ).stdout
    return set(out.split())


def test_the_package_root_is_lazy():
    assert _loaded_after("import tl_geometry") == {"tl_geometry"}
    # a public name loads where it lives, not the rest
    loaded = _loaded_after("import tl_geometry as tg\ntg.similarity_stats")
    assert "tl_geometry.metrics.capacity" in loaded
    assert not any(m.startswith(("tl_geometry.families", "tl_geometry.capture", "tl_geometry.models")) for m in loaded)


def test_importing_the_math_loads_no_model_code():
    loaded = _loaded_after(
        "import tl_geometry.metrics.pga, tl_geometry.metrics.capacity, tl_geometry.metrics.interaction, "
        "tl_geometry.metrics.intrinsic_dimension, tl_geometry.metrics.id_jackknife, tl_geometry.metrics.spectral"
    )
    for other in ("capture", "models", "families", "registry", "report", "render", "runs", "runtime", "io"):
        assert not any(m == f"tl_geometry.{other}" or m.startswith(f"tl_geometry.{other}.") for m in loaded), other
