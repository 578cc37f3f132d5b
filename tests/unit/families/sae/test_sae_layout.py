"""The sae package's layout rules (AST, no sae_lens needed): the decoder math is pure, sae_lens is
imported only inside functions, and the hub cache / offline switch live in tl_geometry/io/hub.py only."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import tl_geometry as tg

PACKAGE = Path(tg.__file__).parent
MODEL_FACING = (
    "tl_geometry.models",
    "tl_geometry.capture",
    "tl_geometry.registry",
    "tl_geometry.registry.family_specs",
    "tl_geometry.report",
    "tl_geometry.render.plotting",
    "tl_geometry.families.sae",
    "tl_geometry.families.capacity.hosts",
    "tl_geometry.runs.analysis",
)


def _imports(tree: ast.AST, *, top_level_only: bool = False) -> list[str]:
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
    return out


def test_decoder_math_is_pure():
    tree = ast.parse((PACKAGE / "metrics" / "sae.py").read_text())
    bad = [m for m in _imports(tree) if m.startswith(MODEL_FACING) or m.startswith("sae_lens")]
    assert bad == []


def test_sae_lens_is_imported_only_inside_functions():
    for path in sorted((PACKAGE / "sae").glob("*.py")):
        tops = _imports(ast.parse(path.read_text()), top_level_only=True)
        assert not [m for m in tops if m.split(".")[0] == "sae_lens"], path.name


def test_hub_cache_and_offline_switch_live_in_hub_py():
    hits = sorted(
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        if any(s in p.read_text() for s in ("constants.HF_HUB_CACHE", "constants.HF_HUB_OFFLINE =", "models--{"))
    )
    assert hits == ["io/hub.py"]


def test_public_names_of_the_package():
    for name in tg.sae.__all__:
        assert hasattr(tg.sae, name), name
    assert "sae" in tg.list_metrics()
    assert tg.sae.HubUnavailableError is importlib.import_module("tl_geometry.io.hub").HubUnavailableError
