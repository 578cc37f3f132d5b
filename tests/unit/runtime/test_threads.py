"""Per-kernel thread use (tl_geometry.runtime.threads): scoped, restored on error, capped by the user's setting.

The metrics run with the ThreadChoice they are passed; the load-aware choice is ``threads.choose()``,
what the model-facing callers (tg.pga, tg.spectral, tg.nfa, tg.intrinsic_dimension) pass."""

import os

import pytest
import torch

import tl_geometry as tg
from tl_geometry.cli import main
from tl_geometry.metrics import pga as pga_mod
from tl_geometry.runtime import threads


@pytest.fixture
def two_threads():
    """torch set to 2 intra-op threads for the test (the default on a 2-core box), then restored."""
    n = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(n)


def test_limit_threads_lowers_and_restores(two_threads):
    with threads.limit_threads(1) as n:
        assert n == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2


def test_limit_threads_restores_on_error(two_threads):
    with pytest.raises(RuntimeError, match="boom"):
        with threads.limit_threads(1):
            assert torch.get_num_threads() == 1
            raise RuntimeError("boom")
    assert torch.get_num_threads() == 2


def test_limit_threads_never_raises_the_users_cap(two_threads):
    torch.set_num_threads(1)  # the user's choice (OMP_NUM_THREADS=1 or torch.set_num_threads(1))
    with threads.limit_threads(4) as n:
        assert n == 1 and torch.get_num_threads() == 1
    with threads.limit_threads(None) as n:
        assert n == 1
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_thread_counts_are_refused(bad):
    with pytest.raises(ValueError, match="positive integer"):
        with threads.limit_threads(bad):
            pass
    with pytest.raises(ValueError, match="positive integer"):
        threads.set_threads(bad)


def test_using_threads_may_raise_and_restores(two_threads):
    torch.set_num_threads(1)
    with pytest.raises(KeyError):
        with threads.using_threads(2) as n:
            assert n == 2 and torch.get_num_threads() == 2
            raise KeyError("x")
    assert torch.get_num_threads() == 1


@pytest.fixture
def free(monkeypatch):
    """Pretend the machine has this many free cores (None: unknown)."""
    state = {"free": 2}
    monkeypatch.setattr(threads, "free_cores", lambda: state["free"])
    return state


def test_kernel_threads_policy(two_threads, free, monkeypatch):
    assert threads.kernel_threads("sort") == 2  # a free machine: the user's setting
    assert threads.kernel_threads("dense") == 2
    free["free"] = 1  # one other process wants a core
    assert threads.kernel_threads("dense") == 1 and threads.kernel_threads("sort") == 1
    free["free"] = 0  # busier still: never fewer than one
    assert threads.kernel_threads("dense") == 1 and threads.kernel_threads("sort") == 1
    free["free"] = None  # no /proc/loadavg: the user's setting for dense work, one thread for sorts
    assert threads.kernel_threads("dense") == 2 and threads.kernel_threads("sort") == 1
    free["free"] = 8  # more free cores than the user allows: the user's cap
    assert threads.kernel_threads("dense") == 2 and threads.kernel_threads("sort") == 2
    for n in (None, 0, 1, 2, 8):  # factorizations: one thread whatever the load (reproducible bits)
        free["free"] = n
        assert threads.kernel_threads("lapack") == 1
    monkeypatch.setattr(threads, "POLICY", "inherit")
    free["free"] = 0
    assert threads.kernel_threads("sort") == 2 and threads.kernel_threads("dense") == 2
    assert threads.kernel_threads("lapack") == 2
    monkeypatch.setattr(threads, "POLICY", "fast")
    with pytest.raises(ValueError, match="'auto' or 'inherit'"):
        threads.kernel_threads("sort")
    monkeypatch.setattr(threads, "POLICY", "auto")
    with pytest.raises(ValueError, match="unknown kernel kind 'gpu'"):
        threads.kernel_threads("gpu")


def test_results_do_not_depend_on_the_machines_load(two_threads, free):
    """The same inputs give the same bits whether the load reader finds 2 free cores or 1: LAPACK's
    SVD / eigh differ in the last bits between 1 and 2 threads, so they run on one thread always."""
    g = torch.Generator().manual_seed(0)
    H = torch.randn(400, 96, generator=g) @ torch.randn(96, 96, generator=g)
    W_U = torch.randn(96, 500, generator=g)
    out = {}
    for n in (2, 1):
        free["free"] = n
        V = tg.readout_basis(W_U, 20, threads=threads.choose())
        prof, pc = tg.pga_layer(H, V, ccrs=(0, 1), n_null=4, threads=threads.choose())
        spec = tg.spectral_metrics(H, threads=threads.choose())
        out[n] = (V, {c: s.to_dict() for c, s in prof.items()}, pc, spec, tg.capture.readout_factor(W_U))
    a, b = out[2], out[1]
    assert torch.equal(a[0], b[0]) and a[1] == b[1] and a[2] == b[2] and torch.equal(a[4], b[4])
    assert repr(a[3]) == repr(b[3])


def _data(n=60, d=12, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    V = tg.readout_basis(torch.randn(d, 40, generator=g), k)
    H = torch.randn(n, d, generator=g) * torch.linspace(0.3, 2.0, d)
    return H, V


def _spy_null_threads(monkeypatch):
    """Record torch's thread setting at every similarity computation of the PGA kernel."""
    seen = []
    real = pga_mod.cosine_similarities

    def spy(Y, pairs, *a, **kw):
        seen.append(torch.get_num_threads())
        return real(Y, pairs, *a, **kw)

    monkeypatch.setattr(pga_mod, "cosine_similarities", spy)
    return seen


def test_pga_null_loop_runs_single_threaded_and_restores(two_threads, free, monkeypatch):
    free["free"] = 1  # another process wants a core
    seen = _spy_null_threads(monkeypatch)
    H, V = _data()
    s = tg.pga_score(H, V, n_null=6, ccr=0, threads=threads.choose())
    assert seen == [1] * 8  # reference, readout and 6 nulls: sorts, on one thread
    assert torch.get_num_threads() == 2
    assert s.n_null == 6
    free["free"] = 2  # a free machine: the user's setting
    seen.clear()
    tg.pga_score(H, V, n_null=6, ccr=0, threads=threads.choose())
    assert seen == [2] * 8


def test_pga_inherit_policy_uses_torchs_setting(two_threads, free, monkeypatch):
    free["free"] = 0
    monkeypatch.setattr(threads, "POLICY", "inherit")
    seen = _spy_null_threads(monkeypatch)
    H, V = _data()
    tg.pga_score(H, V, n_null=4, ccr=0, threads=threads.choose())
    assert seen == [2] * 6


def test_pga_restores_threads_when_a_null_fails(two_threads, free, monkeypatch):
    free["free"] = 1
    calls = {"n": 0}
    real = pga_mod.InfluenceContext.view  # per null, with the default stderr="influence"

    def failing(self, y, *args):
        calls["n"] += 1
        if calls["n"] == 4:  # inside the null loop
            raise RuntimeError("sort failed")
        return real(self, y, *args)

    monkeypatch.setattr(pga_mod.InfluenceContext, "view", failing)
    H, V = _data()
    with pytest.raises(RuntimeError, match="sort failed"):
        tg.pga_score(H, V, n_null=5, ccr=0, threads=threads.choose())
    assert torch.get_num_threads() == 2


def test_pga_results_do_not_depend_on_the_thread_policy(two_threads, free, monkeypatch):
    free["free"] = 1
    H, V = _data(n=80, d=16, k=4, seed=3)
    auto = tg.pga_profile(H, V, ccrs=(0, 1), n_null=8, threads=threads.choose())
    monkeypatch.setattr(threads, "POLICY", "inherit")
    inherit = tg.pga_profile(H, V, ccrs=(0, 1), n_null=8, threads=threads.choose())
    for c in (0, 1):
        assert auto[c].z == pytest.approx(inherit[c].z, abs=1e-9)
        assert torch.allclose(auto[c].null_rhos, inherit[c].null_rhos, atol=1e-12)


@pytest.mark.parametrize("command", ["report", "pga", "agop"])
def test_cli_threads_option(command, two_threads, capsys):
    assert main([command, "--threads", "0"]) == 2
    assert "--threads must be a positive integer, got 0" in capsys.readouterr().err
    assert torch.get_num_threads() == 2


def test_cli_threads_applies_during_the_command_and_is_restored(two_threads, monkeypatch):
    from tl_geometry.commands import report as report_cmd

    seen = []

    def fake_run(args):
        seen.append(torch.get_num_threads())
        return 0

    monkeypatch.setattr(report_cmd, "run", fake_run)
    assert main(["report", "--threads", "1"]) == 0
    assert seen == [1] and torch.get_num_threads() == 2


@pytest.mark.parametrize(
    "runnable,own,cores,expected",
    [
        ([1, 1, 1], [1, 1, 1], 2, 2),  # only us: both cores free
        ([2, 2, 2], [1, 1, 1], 2, 1),  # one other runnable thread
        ([2, 2, 2], [2, 2, 2], 2, 2),  # our own OpenMP worker still spinning: not another process
        ([1, 2, 1], [1, 1, 1], 2, 1),  # the largest look counts: a busy machine must not be missed
        ([3, 2, 2], [2, 1, 1], 2, 1),
        ([5, 5, 5], [1, 1, 1], 2, 0),
        ([1, 1, 1], [1, 1, 1], 16, 16),
    ],
)
def test_free_cores_from_the_runnable_count(monkeypatch, runnable, own, cores, expected):
    looks, mine = iter(runnable), iter(own)
    monkeypatch.setattr(threads, "_runnable_now", lambda: next(looks))
    monkeypatch.setattr(threads, "_own_running", lambda: next(mine))
    monkeypatch.setattr(threads, "_usable_cores", lambda: cores)
    monkeypatch.setattr(threads, "_load_cache", [-1.0, 0.0])
    assert threads.free_cores() == expected
    # reused for LOAD_TTL_S (no further look: the iterator is exhausted)
    assert threads.free_cores() == expected


def test_free_cores_unknown_without_proc_loadavg(monkeypatch):
    monkeypatch.setattr(threads, "_runnable_now", lambda: None)
    monkeypatch.setattr(threads, "_load_cache", [-1.0, 0.0])
    assert threads.free_cores() is None


def test_runnable_now_reads_this_machine():
    r = threads._runnable_now()
    assert r is None or r >= 1  # we are running


def test_own_running_counts_this_process_only():
    """At least the caller; at most this process's threads; a busy thread of ours is seen."""
    import threading

    n_threads = len(os.listdir("/proc/self/task"))
    assert 1 <= threads._own_running() <= n_threads
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            pass

    t = threading.Thread(target=spin)
    t.start()
    try:
        # the GIL lets one of the two run at a time, but both are runnable (state R); stop at the
        # first sighting (each read waits for the GIL: 200 of them took 16 s)
        assert any(threads._own_running() >= 2 for _ in range(200))
    finally:
        stop.set()
        t.join()


def test_per_step_limits_each_step_and_restores_on_break_and_error(two_threads, free):
    free["free"] = 1
    seen = []
    for i in threads.per_step(range(5)):
        seen.append(torch.get_num_threads())
        if i == 2:
            break
    assert seen == [1, 1, 1] and torch.get_num_threads() == 2

    def loop():
        for i in threads.per_step(range(5)):
            if i == 1:
                raise RuntimeError("batch failed")

    with pytest.raises(RuntimeError, match="batch failed"):
        loop()
    assert torch.get_num_threads() == 2


def test_model_passes_follow_the_machines_load(two_threads, free, tiny_model, tiny_tokens):
    """capture.run and the AGOP probe loop run each batch with the dense kernel's threads."""
    from tl_geometry import capture

    free["free"] = 1
    seen = []
    capture.run(
        tiny_model,
        tiny_tokens,
        ["blocks.0.hook_resid_post"],
        lambda h, a: seen.append(torch.get_num_threads()),
        batch_size=3,
        progress=False,
    )
    assert seen == [1, 1]
    free["free"] = 2
    capture.run(
        tiny_model,
        tiny_tokens,
        ["blocks.0.hook_resid_post"],
        lambda h, a: seen.append(torch.get_num_threads()),
        batch_size=3,
        progress=False,
    )
    assert seen == [1, 1, 2, 2] and torch.get_num_threads() == 2


def test_agop_probe_loop_follows_the_machines_load(two_threads, free, tiny_model, tiny_tokens, monkeypatch):
    from tl_geometry.metrics import interaction as capture_agop  # the accumulator the probe loop feeds

    free["free"] = 1
    seen = []
    real = capture_agop.AGOPAccumulator.update

    def spy(self, *a, **kw):
        seen.append(torch.get_num_threads())
        return real(self, *a, **kw)

    monkeypatch.setattr(capture_agop.AGOPAccumulator, "update", spy)
    tg.agop(tiny_model, tiny_tokens, hooks=["blocks.1.hook_resid_pre"], n_probes=2, batch_size=3, progress=False)
    assert seen and set(seen) == {1}
    assert torch.get_num_threads() == 2


# ----------------------------------------------------------------------------- the choice passed to the metrics
def test_choose_is_the_load_aware_choice(two_threads, free, monkeypatch):
    monkeypatch.setattr(threads, "_usable_cores", lambda: 8)
    free["free"] = 1  # another process wants a core
    assert threads.choose() == threads.ThreadChoice(dense=1, sort=1, pool=2, lapack=1)
    free["free"] = 2
    assert threads.choose() == threads.ThreadChoice(dense=2, sort=2, pool=2, lapack=1)
    free["free"] = None  # the machine does not say
    assert threads.choose() == threads.ThreadChoice(dense=2, sort=1, pool=2, lapack=1)
    monkeypatch.setattr(threads, "POLICY", "inherit")  # torch's setting everywhere, the sequential loop
    assert threads.choose() == threads.ThreadChoice(dense=None, sort=None, pool=1, lapack=None)
    monkeypatch.setattr(threads, "POLICY", "fast")
    with pytest.raises(ValueError, match="'auto' or 'inherit'"):
        threads.choose()


def _record_kernels(monkeypatch) -> list[tuple[str, int | None]]:
    """(kind, count) of every kernel a metric runs with the choice it was passed."""
    from tl_geometry.metrics.thread_choice import ThreadChoice

    seen = []
    real = ThreadChoice.kernel

    def spy(self, kind, device="cpu"):
        seen.append((kind, self.count(kind)))
        return real(self, kind, device)

    monkeypatch.setattr(ThreadChoice, "kernel", spy)
    return seen


_FAMILY_CALLS = {
    "pga": lambda m, t: tg.pga(m, t, k=4, n_null=4, ccr=(0, 1), progress=False),
    "spectral": lambda m, t: tg.spectral(m, t),
    "nfa": lambda m, t: tg.nfa(m, t, layers=[0], n_probes=2, batch_size=3, progress=False),
    "intrinsic_dimension": lambda m, t: tg.intrinsic_dimension(m, t, progress=False),
}


@pytest.mark.parametrize("family", list(_FAMILY_CALLS))
def test_model_facing_calls_pass_the_load_aware_choice(family, two_threads, free, monkeypatch, tiny_model, tiny_tokens):
    """tg.pga / tg.spectral / tg.nfa / tg.intrinsic_dimension (hence tg.analyze and the report) run
    their metrics with ``threads.choose()``: under load, one thread for dense and sort work; with
    TL_GEOMETRY_THREADS=inherit, torch's setting for factorizations too (the metrics' own default
    would keep those on one thread)."""
    seen = _record_kernels(monkeypatch)
    free["free"] = 1
    _FAMILY_CALLS[family](tiny_model, tiny_tokens)
    assert seen, "no kernel ran"
    assert all(n == 1 for _, n in seen), seen
    assert torch.get_num_threads() == 2
    seen.clear()
    monkeypatch.setattr(threads, "POLICY", "inherit")
    _FAMILY_CALLS[family](tiny_model, tiny_tokens)
    assert seen and all(n is None for _, n in seen), seen


def test_spectral_hooks_on_the_pool_give_the_plain_loops_bits(two_threads, free, monkeypatch, tiny_model, tiny_tokens):
    """tg.spectral computes its hooks on a pool of threads (each eigvalsh on one thread, as always):
    the same rows, bit for bit, as the plain loop on torch's two threads; with
    TL_GEOMETRY_THREADS=inherit (a pool of 1) no pool is started."""
    calls = []

    def spy(fn, items, workers):
        calls.append(workers)
        return real(fn, items, workers)

    real = threads.parallel_map
    monkeypatch.setattr("tl_geometry.families.pga.parallel_map", spy)
    pooled = tg.spectral(tiny_model, tiny_tokens)
    assert calls == [2]
    real = lambda fn, items, workers: [fn(x) for x in items]  # noqa: E731 (the plain loop, two threads)
    plain = tg.spectral(tiny_model, tiny_tokens)
    a, b = pooled.to_pandas(), plain.to_pandas()
    assert len(a) == len(tiny_model.blocks) * 6
    assert a["value"].tolist() == b["value"].tolist()
    assert a["stderr"].tolist() == b["stderr"].tolist()
    calls.clear()
    monkeypatch.setattr(threads, "POLICY", "inherit")
    tg.spectral(tiny_model, tiny_tokens)
    assert calls == []
