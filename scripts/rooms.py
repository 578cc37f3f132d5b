"""The rooms of the house: which folder of ``tl_geometry/`` is which room, the import edges between
them, the import circles (there must be none) and every upward reach (there must be none but the
declared names).

``ROOMS`` below is the one statement of the layering: ``tests/unit/house/test_import_rules.py`` loads
this script and checks the package against it, and docs/architecture.md describes it. Run

    python scripts/rooms.py            # rooms, modules, lines, edges between rooms, circles, violations
    python scripts/rooms.py --edges    # also every module-to-module edge

Three kinds of edges are read from the source (AST; nothing is imported):

* **import** — an ``import`` / ``from ... import`` anywhere in a file, at module level or inside
  a function (not under ``if TYPE_CHECKING:``, which never runs);
* **parent** — importing ``a.b.c`` runs ``a`` and ``a.b`` first (the package root,
  ``tl_geometry/__init__.py``, is left out: it imports nothing when it runs — its public names
  resolve on first use, PEP 562 — which ``test_the_package_root_is_lazy`` checks);
* **declared** — a ``"tl_geometry.x.y:function"`` or ``"tl_geometry.x.y"`` string: a name
  resolved at run time (a family's ``draw=`` / ``read=`` / ``checks=`` / ``command=``, the
  registry's discovery of the built-in families, the report's display).

The rules:

1. every module lives in a room (its first folder under ``tl_geometry/``); the package root holds
   only the faces (``FACES``);
2. **no import circle**: the graph of *import* edges has no cycle, inside a room too (a package's
   ``__init__`` and its submodules included);
3. **ranked rooms**: the closure of every module's edges of all three kinds reaches no module of a
   higher room, except through the declared names of ``ALLOWED_UP`` (an upward reference is
   only ever a declared name, never an import).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "tl_geometry"

#: (room, the folders / root modules it holds, what it holds), lowest rank first. A room may use
#: the rooms before it, never one after it.
ROOMS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("base", ("errors", "base"), "errors, the validation layer, DataFrames, declared names"),
    ("metrics", ("metrics",), "pure math on tensors -> frozen dataclasses; accumulators"),
    ("io", ("io",), "texts, the hub, weight files, output files and directories"),
    ("runtime", ("runtime",), "threads, the resumable job runner and its results files, Ray"),
    ("models", ("models",), "the offline zoo, loading and processing models"),
    ("capture", ("capture",), "the only code that runs a model and adds hooks"),
    ("registry", ("registry",), "name -> metric, name -> family declaration, plugins"),
    ("report", ("report",), "GeometryReport: rows + provenance"),
    ("render", ("render",), "figures, readings, HTML and markdown of a report"),
    ("runs", ("runs",), "tg.analyze, the report pipeline, sweeps, reproduce, shared CLI arguments"),
    ("families", ("families",), "one folder per paper: everything that paper owns"),
    ("studies", ("studies",), "a study across models"),
    ("commands", ("commands", "cli"), "the command line"),
)
#: What the package root may hold besides the room folders (the faces; cli.py is the commands'
#: face, errors.py the base's).
FACES = ("__init__.py", "errors.py", "cli.py", "py.typed", "data")
#: (module, module it may reach although in a higher room): declared names only.
ALLOWED_UP: frozenset[tuple[str, str]] = frozenset(
    {
        # the registry discovers the built-in families by name, as it discovers plugins
        ("tl_geometry.registry.phase", "tl_geometry.families"),
        # a report is drawn by the render room (notebook display and .plot), by declared name
        ("tl_geometry.report", "tl_geometry.render"),
        ("tl_geometry.report", "tl_geometry.render.html"),
        ("tl_geometry.report", "tl_geometry.render.plotting"),
    }
)
_LAZY_REF = re.compile(r"^(tl_geometry(?:\.\w+)+):[\w.]+$")
_MODULE_REF = re.compile(r"^tl_geometry(?:\.\w+)+$")


def module_name(path: Path, root: Path = PKG) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def room_of(module: str) -> tuple[int, str]:
    """``(rank, room)`` of a module; the package root itself is ``(len(ROOMS), "root")``."""
    parts = module.split(".")
    if len(parts) == 1:
        return len(ROOMS), "root"
    for rank, (name, tops, _) in enumerate(ROOMS):
        if parts[1] in tops:
            return rank, name
    raise LookupError(f"{module}: in no room; add its folder to ROOMS in scripts/rooms.py")


def _type_checking_only(node: ast.AST, parents: dict) -> bool:
    p = parents.get(node)
    while p is not None:
        if isinstance(p, ast.If) and "TYPE_CHECKING" in ast.unparse(p.test):
            return True
        p = parents.get(p)
    return False


def modules(root: Path = PKG) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}


def import_graph(root: Path = PKG) -> dict[str, list[tuple[str, int, str]]]:
    """``{module: [(target module, line, kind), ...]}`` with kind ``"import"``, ``"parent"`` or
    ``"declared"`` (see the module docstring)."""
    mods = modules(root)
    graph: dict[str, list[tuple[str, int, str]]] = {}
    for me, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        package = me if path.name == "__init__.py" else me.rpartition(".")[0]
        out: list[tuple[str, int, str]] = []

        def add(target: str, line: int, kind: str, me: str = me, out: list = out) -> None:
            """The deepest module ``target`` names gets the edge; its parents get parent edges."""
            parts = target.split(".")
            deepest = next((".".join(parts[:i]) for i in range(len(parts), 1, -1) if ".".join(parts[:i]) in mods), None)
            if deepest is None:
                return
            if deepest != me:
                out.append((deepest, line, kind))
            dp = deepest.split(".")
            for i in range(2, len(dp)):
                m = ".".join(dp[:i])
                if m in mods and m != me:  # a declared name's parents run when it resolves
                    out.append((m, line, "declared" if kind == "declared" else "parent"))

        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and _type_checking_only(node, parents):
                continue
            if isinstance(node, ast.Import):
                for a in node.names:
                    add(a.name, node.lineno, "import")
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                subs = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in mods]
                for s in subs:
                    add(s, node.lineno, "import")
                if len(subs) < len(node.names):  # names defined in the module itself
                    add(mod, node.lineno, "import")
                elif mod in mods and mod != me and "." in mod:  # `from a.b import c` runs a.b too
                    out.append((mod, node.lineno, "parent"))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                lazy = _LAZY_REF.match(node.value)
                if lazy:
                    add(lazy.group(1), node.lineno, "declared")
                elif _MODULE_REF.match(node.value):
                    add(node.value, node.lineno, "declared")
        graph[me] = out
    return graph


def cycles(graph: dict[str, list[tuple[str, int, str]]]) -> list[list[str]]:
    """The import circles: strongly connected components (more than one module) of the *import*
    edges (Tarjan, iterative)."""
    succ = {m: sorted({t for t, _, k in es if k == "import"}) for m, es in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(succ):
        if start in index:
            continue
        work = [(start, iter(succ[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(succ.get(w, []))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def rank_violations(graph: dict[str, list[tuple[str, int, str]]]) -> list[str]:
    """Every module whose closure (all edge kinds) reaches a higher room, with the chain."""
    bad = []
    for start in sorted(graph):
        rank, name = room_of(start)
        if name == "root":
            continue
        seen = {start: [start]}
        todo = [start]
        while todo:
            m = todo.pop()
            for nxt, line, kind in graph[m]:
                if nxt in seen or (kind == "declared" and (m, nxt) in ALLOWED_UP):
                    continue
                seen[nxt] = seen[m] + [f"{nxt} ({kind}, line {line} of {m})"]
                r, n = room_of(nxt)
                if r > rank:
                    bad.append(f"{start} [{name}] reaches {nxt} [{n}]: " + " -> ".join(seen[nxt]))
                    continue
                todo.append(nxt)
    return bad


def upward_declared(graph: dict[str, list[tuple[str, int, str]]]) -> list[tuple[str, str, int]]:
    """Every edge to a higher room (each must be a declared name in ``ALLOWED_UP``)."""
    out = []
    for m, es in graph.items():
        r = room_of(m)[0]
        for t, line, kind in es:
            if room_of(t)[0] > r and room_of(m)[1] != "root":
                out.append((m, t, line, kind))
    return sorted(out)


def strays(root: Path = PKG) -> list[str]:
    """Entries of the package root that are neither a face nor a room folder."""
    folders = {t for _, tops, _ in ROOMS for t in tops}
    return sorted(
        p.name
        for p in root.iterdir()
        if p.name not in FACES and p.name != "__pycache__" and not (p.is_dir() and p.name in folders)
    )


def report(root: Path = PKG, *, edges: bool = False) -> str:
    graph = import_graph(root)
    mods = modules(root)
    lines = ["rank  room        modules  lines  what it holds"]
    per_room: dict[str, list[str]] = defaultdict(list)
    for m in mods:
        per_room[room_of(m)[1]].append(m)
    for rank, (name, _tops, what) in enumerate(ROOMS):
        ms = per_room.get(name, [])
        n_lines = sum(len(mods[m].read_text(encoding="utf-8").splitlines()) for m in ms)
        lines.append(f"{rank:>4}  {name:<10} {len(ms):>8} {n_lines:>6}  {what}")
    between: Counter = Counter()
    for m, es in graph.items():
        for t, _, kind in es:
            a, b = room_of(m)[1], room_of(t)[1]
            if a != b and kind != "parent":
                between[(a, b, kind)] += 1
    lines.append("")
    lines.append("edges between rooms (from -> to: imports [+ declared names])")
    pairs: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for (a, b, kind), n in between.items():
        pairs[(a, b)][kind] = n
    order = {name: i for i, (name, _, _) in enumerate(ROOMS)} | {"root": len(ROOMS)}
    for (a, b), kinds in sorted(pairs.items(), key=lambda kv: (order[kv[0][0]], order[kv[0][1]])):
        up = "  (upward, declared)" if order[b] > order[a] else ""
        extra = f" + {kinds['declared']} declared" if "declared" in kinds else ""
        lines.append(f"  {a:>9} -> {b:<9} {kinds.get('import', 0):>4}{extra}{up}")
    circ = cycles(graph)
    bad = rank_violations(graph)
    lines.append("")
    lines.append(f"import circles: {len(circ)}")
    lines += [f"  {' <-> '.join(c)}" for c in circ]
    lines.append(f"rank violations: {len(bad)}")
    lines += [f"  {b}" for b in bad]
    stray = strays(root)
    lines.append(f"package root: {', '.join(sorted(p.name for p in root.iterdir() if p.name != '__pycache__'))}")
    if stray:
        lines.append(f"  not a face nor a room: {stray}")
    if edges:
        lines.append("")
        lines.append("module edges (kind)")
        for m in sorted(graph):
            for t, line, kind in sorted(set(graph[m])):
                if kind != "parent":
                    lines.append(f"  {m} -> {t} ({kind}, line {line})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--edges", action="store_true", help="also print every module-to-module edge")
    p.add_argument("--root", type=Path, default=PKG, help="the package folder (default: tl_geometry/)")
    args = p.parse_args(argv)
    print(report(args.root, edges=args.edges))
    graph = import_graph(args.root)
    return 1 if cycles(graph) or rank_violations(graph) or strays(args.root) else 0


if __name__ == "__main__":
    sys.exit(main())
