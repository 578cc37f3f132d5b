"""Shared fixtures. Unit tests use tiny random models only; never the network."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

from tests.helpers import make_tiny_bridge, make_tiny_model  # noqa: E402

# Under pytest-xdist (`make test` runs `-n 2`), each worker gets its share of the cores: two workers
# each running torch's default one-thread-per-core OpenMP teams would oversubscribe the machine
# (a team thread descheduled by the other worker stalls every op's barrier). Tests about threads set
# their own count.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // _WORKERS))

#: Fixtures that build a ``HookedTransformer`` (TransformerLens < 4), here or in a test module. A
#: test using one, directly or through another fixture, or ``any_tiny_model[hooked]``, is marked
#: ``needs_hooked`` below; the TL-4 lane (ci/tl4/run.sh) deselects that marker. A test that builds
#: one itself (``make_tiny_model``, ``tiny_config``, ``make_byte_model``) carries
#: ``@pytest.mark.needs_hooked``; without it, it fails on TL 4 with an ImportError saying so.
HOOKED_FIXTURES = frozenset({"tiny_model", "byte_model", "wide_model", "class2_model"})


def pytest_collection_modifyitems(config, items):
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if HOOKED_FIXTURES.intersection(getattr(item, "fixturenames", ())) or params.get("any_tiny_model") == "hooked":
            item.add_marker(pytest.mark.needs_hooked)


@pytest.fixture(scope="session")
def tiny_model():
    """A 3-layer, d_model=32, d_vocab=101 random HookedTransformer (no tokenizer)."""
    return make_tiny_model()


@pytest.fixture(scope="session")
def tiny_bridge():
    """The same shape as ``tiny_model`` as a TransformerBridge (boot_native, random weights)."""
    return make_tiny_bridge()


@pytest.fixture(params=["hooked", "bridge"])
def any_tiny_model(request):
    return request.getfixturevalue("tiny_model" if request.param == "hooked" else "tiny_bridge")


@pytest.fixture(scope="session")
def tiny_tokens():
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 101, (6, 16), generator=g)


@pytest.fixture(scope="module")
def one_thread():
    """Many small forward/backward passes: one thread avoids oversubscription on a 2-core box."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
