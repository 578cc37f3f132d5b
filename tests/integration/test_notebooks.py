"""Execute every notebook in examples/ (nbclient) so that they cannot rot.

The kernel is this interpreter (a kernelspec written to a temporary JUPYTER_PATH), so the
notebooks see the same installed tl_geometry as the tests. Each runs offline on small settings.
"""

import json
import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "examples").glob("*.ipynb"))
KERNEL = "tl-geometry-test"


@pytest.fixture(scope="module")
def kernel_path(tmp_path_factory):
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    root = tmp_path_factory.mktemp("jupyter")
    spec_dir = root / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "tl_geometry tests",
                "language": "python",
                "env": {
                    "HF_HUB_OFFLINE": "1",
                    "TRANSFORMERS_OFFLINE": "1",
                    "TOKENIZERS_PARALLELISM": "false",
                    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
                },
            }
        )
    )
    return root


def test_examples_exist():
    names = {p.name for p in NOTEBOOKS}
    for stem in ("quickstart", "capacity", "pga", "interaction", "sae", "plugin"):
        assert any(stem in n for n in names), f"no example notebook for {stem}: {sorted(names)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, kernel_path, tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    if "_sae" in path.name:
        pytest.importorskip("sae_lens")
    monkeypatch.setenv("JUPYTER_PATH", str(kernel_path))
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=180, kernel_name=KERNEL, resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    assert not errors
    # every code cell ran
    assert all(c.get("execution_count") for c in nb.cells if c.cell_type == "code")
    # figures render inline (PNG), once per plotting call
    for cell in nb.cells:
        if cell.cell_type == "code" and "plotting.plot_" in cell.source:
            pngs = [o for o in cell.outputs if "image/png" in o.get("data", {})]
            assert len(pngs) == 1, cell.source
