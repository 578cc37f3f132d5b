"""Two threads measuring one model take turns (issue 33): every pass that adds hooks holds the
model's lock, so a thread never fires another's hooks. Before, two threads calling tg.analyze on
one model returned rows that differed from the serial run (or failed: "hooks never fired")."""

from __future__ import annotations

import threading

import torch

import tl_geometry as tg
from tests.helpers import make_tiny_model
from tl_geometry.capture.hooks import model_lock

METRICS = ["epsilon_activations", "spectral", "intrinsic_dimension"]


def _rows(report):
    return sorted((r.metric, r.hook, round(float(r.value), 9)) for r in report.rows if r.value == r.value)


def test_two_threads_analyzing_one_model_get_the_serial_numbers():
    model = make_tiny_model()
    gen = torch.Generator().manual_seed(0)
    toks = [torch.randint(1, model.cfg.d_vocab, (16, 12), generator=gen) for _ in range(2)]
    opts = {m: {"batch_size": 1} for m in METRICS if m != "intrinsic_dimension"}
    serial = [_rows(tg.analyze(model, t, metrics=METRICS, options=opts)) for t in toks]
    got: list = [None, None]
    errors: list = []
    start = threading.Barrier(2)

    def work(i):
        try:
            start.wait()
            for _ in range(3):
                got[i] = _rows(tg.analyze(model, toks[i], metrics=METRICS, options=opts))
                assert got[i] == serial[i]
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    assert got == serial
    assert not any(hp.fwd_hooks for hp in model.hook_dict.values())  # every hook removed


def test_the_lock_is_per_model_and_reentrant():
    a, b = make_tiny_model(), make_tiny_model()
    assert model_lock(a) is model_lock(a) and model_lock(a) is not model_lock(b)
    with model_lock(a), model_lock(a):  # a pass inside a pass of the same thread
        pass
