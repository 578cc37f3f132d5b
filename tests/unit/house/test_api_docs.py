"""docs/api.md documents every public module of tl_geometry (a ``:::`` block for the module or a
name in it); a new module without an entry there fails here."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PKG = ROOT / "tl_geometry"


def public_modules() -> list[str]:
    """Dotted names of every module and package under tl_geometry whose path has no part starting with ``_``."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(p.startswith("_") for p in parts):
            continue
        out.append(".".join(parts))
    return out


def documented(api_text: str, modules: list[str] | None = None) -> set[str]:
    """Every dotted name in a ``::: name`` line and each of its prefixes (a class covers its module);
    a block with ``show_submodules: true`` also covers every module under it (of ``modules``)."""
    names = set()
    for m in re.finditer(r"^:::\s*([\w.]+)\s*\n((?:[ \t]+.*\n)*)", api_text + "\n", flags=re.M):
        target, options = m.group(1), m.group(2)
        parts = target.split(".")
        names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        if re.search(r"show_submodules:\s*true", options):
            names.update(x for x in modules or [] if x.startswith(target + "."))
    return names


def test_public_modules_found():
    mods = public_modules()
    assert {"tl_geometry", "tl_geometry.report", "tl_geometry.metrics.pga", "tl_geometry.commands.report"} <= set(mods)
    assert not [m for m in mods if "._" in m]


def test_show_submodules_covers_the_package():
    text = "::: tl_geometry.families\n    options:\n      show_submodules: true\n\n::: tl_geometry.io.hub\n"
    mods = ["tl_geometry.families.pga", "tl_geometry.families.pga.cli", "tl_geometry.metrics.pga"]
    got = documented(text, mods)
    assert {"tl_geometry.families.pga", "tl_geometry.families.pga.cli", "tl_geometry.io.hub"} <= got
    assert "tl_geometry.metrics.pga" not in got


def test_documented_reads_targets_and_prefixes():
    text = "::: tl_geometry.report.Row\n\n:::tl_geometry.families.sae\nnot ::: tl_geometry.io.hub\n"
    assert documented(text) == {
        "tl_geometry",
        "tl_geometry.report",
        "tl_geometry.report.Row",
        "tl_geometry.families",
        "tl_geometry.families.sae",
    }


def test_every_public_module_is_in_api_md():
    api = documented((ROOT / "docs" / "api.md").read_text(encoding="utf-8"), public_modules())
    missing = [m for m in public_modules() if m not in api]
    assert not missing, f"public modules missing from docs/api.md (add a '::: module' block): {missing}"


SPHINX_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|mod|data|exc|obj|const):`")


def test_sphinx_roles_are_found():
    assert SPHINX_ROLE.search("see :func:`pga_score`") and SPHINX_ROLE.search(":py:class:`X`")
    assert not SPHINX_ROLE.search("see [`pga_score`][tl_geometry.metrics.pga.pga_score]")


def test_no_sphinx_roles_in_the_package():
    """mkdocstrings renders Sphinx roles as literal text: docstrings use autorefs' ``[`x`][path]``."""
    hits = []
    for path in sorted(PKG.rglob("*.py")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if SPHINX_ROLE.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()[:90]}")
    assert not hits, "Sphinx roles (use [`name`][tl_geometry.module.name] instead):\n" + "\n".join(hits)


#: What a docstring of a public metric must carry: the paper, or a formula.
DEFINITION = re.compile(r"arXiv|paper|Facco|[=<>Σ∑√‖≤≥]|[Dd]efinition")


def test_public_metric_functions_state_their_definition():
    """Every public function and result class of ``tl_geometry.metrics`` states its formula or paper."""
    import importlib
    import inspect
    import pkgutil

    import tl_geometry.metrics as metrics

    missing = []
    for info in pkgutil.iter_modules(metrics.__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"tl_geometry.metrics.{info.name}")
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if not callable(obj) or (inspect.isclass(obj) and issubclass(obj, Warning)):
                continue
            if not DEFINITION.search(inspect.getdoc(obj) or ""):
                missing.append(f"{info.name}.{name}")
    assert not missing, f"docstrings without a formula or the paper: {missing}"


#: An autorefs cross-reference in a docstring: ``[`text`][tl_geometry.module.name]``.
CROSS_REF = re.compile(r"\]\[(tl_geometry(?:\.\w+)+)\]")


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` names a module, or an attribute reached from the longest importable prefix;
    a name under a moved module's old path (``tl_geometry._MOVED``, kept only for old callers) does not."""
    import importlib

    import tl_geometry

    if any(dotted == old or dotted.startswith(old + ".") for old in tl_geometry._MOVED):
        return False
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            if not hasattr(obj, p):
                return False
            obj = getattr(obj, p)
        return True
    return False


def test_resolves_reads_modules_attributes_and_old_paths():
    assert resolves("tl_geometry.report.GeometryReport.to_markdown") and resolves("tl_geometry.metrics.pga")
    assert not resolves("tl_geometry.report.no_such_name") and not resolves("tl_geometry.no_such_module.x")
    assert not resolves("tl_geometry.pipeline.run_report")  # an old path: a DeprecationWarning, not a reference


def test_every_cross_reference_in_the_package_resolves():
    """A docstring's ``[`x`][tl_geometry.a.b]`` names a module or object that exists at that path
    (``mkdocs build --strict`` checks the same, but only where the docs' extra is installed)."""
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for m in CROSS_REF.finditer(text):
            if not resolves(m.group(1)):
                bad.append(f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(1)}")
    assert not bad, "cross-references to names that do not exist:\n" + "\n".join(bad)
