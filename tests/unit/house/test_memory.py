"""Memory: streaming capture holds one batch at a time; ``collect`` holds ``max_points`` rows.

Peak RSS is sampled inside the consumer (psutil) while a long token stream goes through a small
model; the peak over the full stream must not exceed the peak over its first quarter by more
than a few MB, whereas keeping the activations would grow by tens of MB.
"""

import gc

import pytest
import torch

from tests import helpers as H
from tl_geometry import capture

psutil = pytest.importorskip("psutil")

D, LAYERS, SEQ, BATCH = 128, 3, 32, 32


@pytest.fixture(scope="module")
def model():
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # small matmuls: one thread is faster and steadier on a shared 2-core box
    yield H.portable_tiny_model(LAYERS, D)
    torch.set_num_threads(n)


def _peak_rss_mb(model, tokens, hooks) -> tuple[float, int]:
    proc = psutil.Process()
    peak = {"rss": 0}
    sums = {h: torch.zeros(D, dtype=torch.float64) for h in hooks}

    def consumer(h, acts):  # a streaming statistic: running sum
        sums[h] += acts.double().sum(0)
        peak["rss"] = max(peak["rss"], proc.memory_info().rss)

    gc.collect()
    n = capture.run(model, tokens, hooks, consumer, batch_size=BATCH, progress=False)
    assert all(torch.isfinite(s).all() for s in sums.values())
    return peak["rss"] / 2**20, n


def test_streaming_capture_memory_is_flat(model):
    hooks = capture.resid_hooks(model, "post")
    g = torch.Generator().manual_seed(0)
    long = torch.randint(0, model.cfg.d_vocab, (BATCH * 24, SEQ), generator=g)
    short = long[: BATCH * 6]
    _peak_rss_mb(model, short, hooks)  # warm-up: allocator pools, lazy init
    peak_short, n_short = _peak_rss_mb(model, short, hooks)
    peak_long, n_long = _peak_rss_mb(model, long, hooks)
    stored_mb = n_long * D * 4 * len(hooks) / 2**20  # what keeping every activation would cost
    assert n_long == 4 * n_short and stored_mb > 30
    growth = peak_long - peak_short
    assert growth < 8, f"peak RSS grew {growth:.1f} MB over a 4x longer stream (storing would take {stored_mb:.0f} MB)"


def test_collect_holds_max_points_rows(model):
    hooks = capture.resid_hooks(model, "post")
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, model.cfg.d_vocab, (BATCH * 8, SEQ), generator=g)
    c = capture.collect(model, tokens, hooks, max_points=300, seed=0, batch_size=BATCH, progress=False)
    assert c.n_points == 300
    for h in hooks:
        assert c.acts[h].shape == (300, D)


def test_batch_size_is_respected(model):
    seen = []
    tokens = torch.zeros(10, 8, dtype=torch.long)
    capture.run(
        model,
        tokens,
        capture.resid_hooks(model, "post")[:1],
        lambda h, a: seen.append(a.shape[0]),
        batch_size=3,
        progress=False,
    )
    assert seen == [24, 24, 24, 8]  # 3 sequences x 8 positions per forward, the rest last
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        capture.run(
            model, tokens, capture.resid_hooks(model, "post")[:1], lambda h, a: None, batch_size=0, progress=False
        )
