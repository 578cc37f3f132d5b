"""The rules of the house, checked on the source (AST), so that a change breaking them fails here.

* ``tl_geometry/metrics/`` is pure math on tensors: it never imports the capture layer, the
  model-facing families, the registry, the report, models, plotting, readings, html, analysis,
  pipeline, sae, the CLI or the load-aware thread policy (``tl_geometry.runtime.threads``: a metric is
  passed its thread counts, ``metrics.thread_choice.ThreadChoice``, and never reads the
  machine's load) — not even inside a function.
* ``tl_geometry/capture/`` runs models and knows no metric: it never imports ``metrics``,
  ``families``, the registry, the report, plotting, readings or html.
* nothing outside ``families/`` registers a built-in metric of the three papers, and the old
  modules (``capture_agop``, ``metrics/_*_registered``) stay gone.
* the rooms are ranked (``ROOMS``: base < metrics < machinery < rendering < families < commands)
  and the rank holds **transitively**: the closure of every module's imports — module level,
  inside functions, and the ``"module:function"`` / module-name strings of declarations (a
  family's ``read=``, ``draw=``, ``checks=``, ``command=``) — reaches no module of a higher room.
  Importing ``a.b.c`` runs ``a`` and ``a.b`` too, so a parent package's imports count. The one
  allowed upward reference is the registry's discovery of the built-in families
  (``registry.BUILTIN_FAMILIES``, like a plugin's entry point). Cycles inside one room are allowed.
* ``import tl_geometry`` loads nothing else (the root is lazy, PEP 562), and importing the math
  (``tl_geometry.metrics.*``) loads no model, capture, registry, report, rendering, family or
  thread-control code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "tl_geometry"

#: What the pure package may not import (module prefixes under tl_geometry).
PURE_FORBIDDEN = (
    "io",
    "runtime",
    "capture",
    "families",
    "registry",
    "family_registry",
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
    "reproduction",
    "sweeps",
    "experiments",
    "outdir",
    "outfile",
    "threads",
)
#: What the capture package may not import.
CAPTURE_FORBIDDEN = (
    "metrics",
    "families",
    "registry",
    "family_registry",
    "report",
    "plotting",
    "readings",
    "html",
    "analysis",
    "pipeline",
    "sae",
    "cli",
    "commands",
    "reproduction",
    "sweeps",
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
ROOMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("errors", "base")),
    ("metrics", ("metrics",)),
    ("io", ("io",)),
    ("runtime", ("runtime",)),
    ("models", ("models",)),
    ("capture", ("capture",)),
    ("registry", ("registry",)),
    ("report", ("report",)),
    ("render", ("render",)),
    ("runs", ("runs",)),
    (
        "machinery",
        (
            "capture",
            "corpus",
            "hub",
            "jobs",
            "outdir",
            "outfile",
            "registry",
            "family_registry",
            "models",
            "ray_executor",
            "weight_files",
            "threads",
        ),
    ),
    (
        "rendering",
        (
            "report",
            "plotting",
            "readings",
            "html",
            "analysis",
            "pipeline",
            "reproduction",
            "reproduction_markdown",
            "reproduction_rows",
            "sweeps",
            "cli_args",
        ),
    ),
    ("families", ("families",)),
    ("studies", ("studies",)),
    ("commands", ("commands", "cli")),
)
#: (module, module it may reach although higher): the registry finds the built-in families by name.
ALLOWED_UP = {
    ("tl_geometry.registry.phase", "tl_geometry.families"),
    ("tl_geometry.report", "tl_geometry.render"),
    ("tl_geometry.report", "tl_geometry.render.html"),
    ("tl_geometry.report", "tl_geometry.render.plotting"),
}
_LAZY_REF = re.compile(r"^(tl_geometry(?:\.\w+)+):[\w.]+$")
_MODULE_REF = re.compile(r"^tl_geometry(?:\.\w+)+$")


def module_name(path: Path, root: Path = PKG) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def room_of(module: str) -> tuple[int, str]:
    parts = module.split(".")
    if len(parts) == 1:
        return len(ROOMS), "root"
    for rank, (name, tops) in enumerate(ROOMS):
        if parts[1] in tops:
            return rank, name
    raise AssertionError(f"{module}: no room; add its top-level name to ROOMS")


def _type_checking_only(node: ast.AST, parents: dict) -> bool:
    p = parents.get(node)
    while p is not None:
        if isinstance(p, ast.If) and "TYPE_CHECKING" in ast.unparse(p.test):
            return True
        p = parents.get(p)
    return False


def import_graph(root: Path = PKG) -> dict[str, list[tuple[str, int]]]:
    """``{module: [(module it runs, line), ...]}``: imports anywhere in the file (not under
    ``if TYPE_CHECKING``), the parents of every imported module, and declaration strings."""
    mods = {module_name(p, root): p for p in root.rglob("*.py")}
    graph = {}
    for me, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        package = me if path.name == "__init__.py" else me.rpartition(".")[0]
        out: list[tuple[str, int]] = []

        def add(target: str, line: int, me: str = me) -> None:
            parts = target.split(".")
            for i in range(2, len(parts) + 1):
                m = ".".join(parts[:i])
                if m in mods and m != me:
                    out.append((m, line))  # noqa: B023  (out is this module's list)

        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and _type_checking_only(node, parents):
                continue
            if isinstance(node, ast.Import):
                for a in node.names:
                    add(a.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                add(mod, node.lineno)
                for a in node.names:
                    add(f"{mod}.{a.name}", node.lineno)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                lazy = _LAZY_REF.match(node.value)
                if lazy:
                    add(lazy.group(1), node.lineno)
                elif _MODULE_REF.match(node.value):
                    add(node.value, node.lineno)
        graph[me] = out
    return graph


def rank_violations(root: Path = PKG) -> list[str]:
    """Every module whose import closure reaches a higher room, with the chain that does."""
    graph = import_graph(root)
    bad = []
    for start in sorted(graph):
        rank, name = room_of(start)
        if name == "root":
            continue
        seen = {start: [start]}
        todo = [start]
        while todo:
            m = todo.pop()
            for nxt, line in graph[m]:
                if nxt in seen or (m, nxt) in ALLOWED_UP:
                    continue
                seen[nxt] = seen[m] + [f"{nxt} (line {line} of {m})"]
                r, n = room_of(nxt)
                if r > rank:
                    bad.append(f"{start} [{name}] reaches {nxt} [{n}]: " + " -> ".join(seen[nxt]))
                    continue
                todo.append(nxt)
    return bad


def test_rooms_hold_transitively():
    assert rank_violations() == []


@pytest.mark.parametrize(
    "file, source, reached",
    [
        # a function-level import in the math
        ("metrics/jackknife.py", "def _f():\n    from tl_geometry.families.pga import pga\n", "tl_geometry.families"),
        # a declaration string pointing upward
        ("metrics/jackknife.py", "_X = 'tl_geometry.render.plotting:figures'\n", "tl_geometry.render.plotting"),
        # the math reading the machine's load (thread policy is machinery: the choice is passed in)
        (
            "metrics/thread_choice.py",
            "def _f():\n    from tl_geometry.runtime.threads import choose\n",
            "tl_geometry.runtime.threads",
        ),
        # a private metric module importing the policy (metrics.capacity, which imports it, reaches it too)
        ("metrics/_gram.py", "import tl_geometry.runtime.threads\n", "tl_geometry.runtime.threads"),
        # two hops: a machinery module importing rendering, reached from the capture layer
        ("io/corpus.py", "def _f():\n    import tl_geometry.render.html\n", "tl_geometry.render.html"),
        # a shared module reaching into a family's folder
        (
            "render/readings.py",
            "def _f():\n    from tl_geometry.families.capacity import reading\n",
            "tl_geometry.families",
        ),
    ],
)
def test_the_transitive_rule_fails_on_a_planted_import(tmp_path, file, source, reached):
    import shutil

    copy = tmp_path / "tl_geometry"
    shutil.copytree(PKG, copy, ignore=shutil.ignore_patterns("__pycache__", "data"))
    with open(copy / file, "a", encoding="utf-8") as f:
        f.write("\n" + source)
    bad = rank_violations(copy)
    assert bad, "the planted import was not caught"
    assert any(f"reaches {reached}" in b for b in bad), bad


def test_registry_reaches_families_only_by_its_one_declared_name():
    graph = import_graph()
    up = [(m, line) for m, line in graph["tl_geometry.registry.phase"] if room_of(m)[1] == "families"]
    assert {m for m, _ in up} == {"tl_geometry.families"} and len(up) == 1, up


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
    rendering = ("report", "plotting", "readings", "html", "analysis")
    for other in ("capture", "models", "families", "registry", "family_registry", *rendering, "threads"):
        assert not any(m == f"tl_geometry.{other}" or m.startswith(f"tl_geometry.{other}.") for m in loaded), other
