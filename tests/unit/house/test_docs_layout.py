"""README's Layout block is generated from the package tree (scripts/layout.py) and must match it."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import load_script

ROOT = Path(__file__).resolve().parents[3]


def test_readme_layout_is_current():
    layout = load_script("layout")
    block = layout.current((ROOT / "README.md").read_text(encoding="utf-8"))
    assert block is not None, "README.md lost its generated Layout block"
    assert block == layout.render(), "README's Layout is stale: run `python scripts/layout.py --write`"


def test_every_module_is_in_the_layout():
    layout = load_script("layout")
    text = layout.render()
    for path in (ROOT / "tl_geometry").rglob("*.py"):
        if "__pycache__" in path.parts or path.name == "__init__.py":
            continue
        assert f" {path.name} " in text or f"{path.relative_to(ROOT).as_posix()} " in text, path


def test_the_check_fails_on_a_stale_layout(tmp_path):
    layout = load_script("layout")
    stale = layout.render().replace("cli.py", "cli_old.py")
    assert layout.current(f"intro\n{stale}\nmore") != layout.render()
