"""The committed example notebooks are current and executed (a reader on the forge sees outputs).

Cheap: no kernel. ``make notebooks`` (scripts/make_notebooks.py) regenerates and executes them;
tests/integration/test_notebooks.py executes them again.
"""

from pathlib import Path

import pytest

from tests.helpers import load_script  # noqa: E402

nbformat = pytest.importorskip("nbformat")

ROOT = Path(__file__).resolve().parents[3]


SCRIPT = load_script("make_notebooks")
NAMES = list(SCRIPT.NOTEBOOKS)


def test_every_generated_notebook_is_committed_and_nothing_else():
    committed = sorted(p.name for p in (ROOT / "examples").glob("*.ipynb"))
    assert committed == sorted(NAMES), "run `make notebooks` (scripts/make_notebooks.py)"


@pytest.mark.parametrize("name", NAMES)
def test_committed_cells_are_what_the_script_generates(name):
    committed = nbformat.read(ROOT / "examples" / name, as_version=4)
    generated = SCRIPT.build(name)
    got = [(c.cell_type, c.source) for c in committed.cells]
    want = [(c.cell_type, c.source) for c in generated.cells]
    assert got == want, f"examples/{name} differs from scripts/make_notebooks.py: run `make notebooks NB={name[:2]}`"


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebooks_are_executed_without_errors(name):
    nb = nbformat.read(ROOT / "examples" / name, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.get("execution_count") for c in code]
    assert all(counts) and counts == sorted(counts), f"examples/{name} is not executed in order: run `make notebooks`"
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"examples/{name} holds an error output: {errors[0].get('ename')}: {errors[0].get('evalue')}"
    # the last cell of every notebook shows something (a value, a print or a figure)
    assert code[-1].get("outputs") or name.startswith("06"), f"examples/{name}: the last code cell has no output"
    # every plotting call left its figure
    for cell in code:
        if "plotting.plot_" in cell.source:
            assert any("image/png" in o.get("data", {}) for o in cell.outputs), cell.source


def test_build_is_stable_and_does_not_share_cells():
    a, b = SCRIPT.build(NAMES[0]), SCRIPT.build(NAMES[0])
    assert [c.id for c in a.cells] == [c.id for c in b.cells]
    a.cells[1].outputs.append({"output_type": "stream", "name": "stdout", "text": "x"})
    assert SCRIPT.build(NAMES[0]).cells[1].outputs == []


def test_a_failing_notebook_is_not_written_and_the_script_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(SCRIPT, "ROOT", tmp_path)
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / NAMES[0]).write_text("previous")

    def boom(nb, *, timeout):
        raise RuntimeError("kernel died")

    monkeypatch.setattr(SCRIPT, "execute", boom)
    assert SCRIPT.main([NAMES[0][:2]]) == 1
    assert "FAILED" in capsys.readouterr().out
    assert (tmp_path / "examples" / NAMES[0]).read_text() == "previous"
    assert SCRIPT.main(["--no-execute", NAMES[0][:2]]) == 0  # sources only: written, no outputs
    written = nbformat.read(tmp_path / "examples" / NAMES[0], as_version=4)
    assert [c.source for c in written.cells] == [c.source for c in SCRIPT.build(NAMES[0]).cells]


def test_make_notebooks_leaves_current_notebooks_byte_for_byte(tmp_path, monkeypatch, capsys):
    """`make notebooks` regenerates outputs only on purpose: a notebook whose cells are current is
    not executed nor rewritten; one whose cells changed is (here: written, not executed)."""
    import shutil

    name = NAMES[0]
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / name, tmp_path / "examples" / name)
    before = (tmp_path / "examples" / name).read_bytes()
    monkeypatch.setattr(SCRIPT, "ROOT", tmp_path)
    monkeypatch.setattr(SCRIPT, "execute", lambda nb, **k: pytest.fail("a current notebook was executed"))
    assert SCRIPT.main([name]) == 0
    assert (tmp_path / "examples" / name).read_bytes() == before
    assert f"unchanged {name}" in capsys.readouterr().out
    # a stale notebook (one cell edited) is regenerated
    nb = nbformat.read(tmp_path / "examples" / name, as_version=4)
    nb.cells[0].source += "\nedited"
    nbformat.write(nb, tmp_path / "examples" / name)
    assert SCRIPT.main([name, "--no-execute"]) == 0
    assert SCRIPT.cells_of(nbformat.read(tmp_path / "examples" / name, as_version=4)) == SCRIPT.cells_of(
        SCRIPT.build(name)
    )
