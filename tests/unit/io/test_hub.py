import pytest

from tl_geometry.io import hub


@pytest.mark.parametrize("value, expected", [("1", True), ("on", True), ("0", False), ("", False)])
def test_offline_reads_environment(monkeypatch, value, expected):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", value)
    assert hub.offline() is expected


def test_reachable_refused_endpoint_is_false_and_cached(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # discard port: refused
    monkeypatch.setattr(hub, "_REACH", {})
    assert hub.reachable(0.5) is False
    assert hub._REACH["127.0.0.1"][1] is False
    # the cached answer is returned without probing again
    monkeypatch.setattr(hub.socket, "create_connection", lambda *a, **k: pytest.fail("probed twice"))
    assert hub.reachable(0.5) is False
