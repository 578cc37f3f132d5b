"""The fast PGA paths: the packed-key exact sort and the pooled null loop equal the plain ones exactly."""

import threading

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

import tl_geometry as tg
from tl_geometry.metrics import _spearman as sp
from tl_geometry.metrics import pga as pga_mod
from tl_geometry.metrics import thread_choice
from tl_geometry.metrics.thread_choice import ThreadChoice
from tl_geometry.runtime import threads


def _stable_perm(x: torch.Tensor) -> torch.Tensor:
    return torch.sort(x + 0.0, stable=True).indices


def _cases():
    g = torch.Generator().manual_seed(0)
    base = torch.randn(5000, generator=g, dtype=torch.float64)
    # values closer than float32 resolution (1-2 float32 keys), all distinct in float64
    crowded = 0.1 + torch.randperm(5000, generator=g).double() * 1e-13
    ties = torch.round(base * 4) / 4  # exact ties
    zeros = torch.zeros(3000, dtype=torch.float64)
    zeros[::3] = -0.0
    zeros[1::7] = 1e-300
    zeros[2::11] = -1e-300
    return {
        "random": base,
        "crowded": crowded,
        "ties": ties,
        "signed zeros": zeros,
        "float32": base.float(),
        "float32 ties": ties.float(),
        "two": base[:2],
        "pow2": base[:4097],
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_packed_order_is_a_stable_sort(name):
    x = _cases()[name]
    o, ties = sp._order(x)
    assert torch.equal(torch.from_numpy(o), _stable_perm(x))
    v = (x + 0.0)[_stable_perm(x)]
    assert ties == bool((v[1:] == v[:-1]).any())


@pytest.mark.parametrize("name", list(_cases()))
def test_packed_order_carries_extra_low_bits_without_changing_the_order(name):
    """A payload ``(position << s) | extra`` sorts as the position alone (the same order, the same
    sorted values at ties) and hands back each element's extra bits in that order."""
    x = _cases()[name]
    xn, m, s = x.numpy(), x.shape[0], 9
    g = np.random.default_rng(m)
    order = g.permutation(m)  # payload = position in an arbitrary order, as a reference's
    pos = np.empty(m, dtype=np.int64)
    pos[order] = np.arange(m)
    extra = g.integers(0, 1 << s, m)
    p, v = sp._packed_order(xn, pos, order)
    q, w = sp._packed_order(xn, (pos << s) | extra, order, shift=s)
    assert np.array_equal(q >> s, p) and np.array_equal(q & ((1 << s) - 1), extra[order[p]])
    assert (v is None) == (w is None) and (v is None or np.array_equal(v, w))
    assert sp._packed_fits(1 << 22, 9) and not sp._packed_fits((1 << 22) + 1, 9)


@pytest.mark.parametrize("name", ["random", "crowded", "ties", "signed zeros", "float32", "float32 ties"])
@pytest.mark.parametrize("ref_name", ["random", "crowded", "ties"])
def test_spearman_fast_path_matches_scipy_and_the_general_path(name, ref_name, monkeypatch):
    cases = _cases()
    n = 3000
    x, r = cases[name][:n], cases[ref_name][:n]
    ref = sp.RankedReference.from_values(r)
    assert (ref.pos is not None) == (ref_name != "ties")  # the payload path needs a tie-free reference
    fast = ref.spearman(x)
    assert fast == pytest.approx(spearmanr(r.numpy(), x.double().numpy())[0], abs=1e-12)
    monkeypatch.setattr(sp, "_packable", lambda t: False)  # the general (GPU) path: torch.sort, gather
    slow = sp.RankedReference.from_values(r).spearman(x)
    assert fast == pytest.approx(slow, abs=1e-15)


def test_spearman_refuses_a_length_mismatch():
    ref = sp.RankedReference.from_values(torch.randn(50, dtype=torch.float64))
    with pytest.raises(ValueError, match="49 values but the reference has 50"):
        ref.spearman(torch.randn(49, dtype=torch.float64))


# ----------------------------------------------------------------------------- the pooled null loop
def _data(n=300, d=24, k=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    V = tg.readout_basis(torch.randn(d, 60, generator=g), k)
    H = torch.randn(n, d, generator=g) * torch.linspace(0.3, 2.0, d)
    return H, V


@pytest.fixture
def two_threads():
    n = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(n)


def _spy(monkeypatch):
    seen = []
    real = pga_mod.cosine_similarities

    def spy(Y, pairs, *a, **kw):
        seen.append((threading.current_thread().name, torch.get_num_threads()))
        return real(Y, pairs, *a, **kw)

    monkeypatch.setattr(pga_mod, "cosine_similarities", spy)
    return seen


def test_pooled_null_loop_equals_the_sequential_loop_exactly(two_threads, monkeypatch):
    H, V = _data()  # 44,850 pairs: above POOL_MIN_PAIRS
    assert H.shape[0] * (H.shape[0] - 1) // 2 >= pga_mod.POOL_MIN_PAIRS
    seen = _spy(monkeypatch)
    pooled = tg.pga_profile(H, V, ccrs=(0, 1), n_null=9, threads=ThreadChoice(pool=2))
    workers = {name for name, _ in seen if name.startswith("tl_geometry")}
    assert workers and all(n == 1 for name, n in seen if name in workers)  # one torch thread per worker
    assert torch.get_num_threads() == 2  # restored
    seen.clear()
    seq = tg.pga_profile(H, V, ccrs=(0, 1), n_null=9, threads=ThreadChoice(pool=1))
    assert not any(name.startswith("tl_geometry") for name, _ in seen)
    for c in (0, 1):
        assert torch.equal(pooled[c].null_rhos, seq[c].null_rhos)
        assert (pooled[c].z, pooled[c].rho_read) == (seq[c].z, seq[c].rho_read)


def test_small_problems_and_inherit_use_the_sequential_loop(two_threads, monkeypatch):
    calls = []
    real = pga_mod.parallel_map
    monkeypatch.setattr(pga_mod, "parallel_map", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    tg.pga_score(*_data(n=60), n_null=4, ccr=0, threads=ThreadChoice(pool=2))  # 1,770 pairs: below POOL_MIN_PAIRS
    assert calls == []
    monkeypatch.setattr(threads, "POLICY", "inherit")
    assert threads.pool_threads() == 1 and threads.choose().pool == 1
    tg.pga_score(*_data(), n_null=4, ccr=0, threads=threads.choose())
    assert calls == []


def test_pool_threads_honour_the_users_cap(two_threads, monkeypatch):
    monkeypatch.setattr(threads, "_usable_cores", lambda: 8)
    assert threads.pool_threads() == 2  # torch's setting, not the cores
    with threads.using_threads(1):  # the CLI's --threads 1 / OMP_NUM_THREADS=1
        assert threads.pool_threads() == 1
    monkeypatch.setattr(threads, "_usable_cores", lambda: 1)
    assert threads.pool_threads() == 1  # never more workers than cores
    assert threads.kernel_threads("pool") == 1


def test_a_failing_null_propagates_from_the_pool_and_restores_threads(two_threads, monkeypatch):
    real = pga_mod.InfluenceContext.view  # what the pool runs per null (the default stderr="influence")
    lock, calls = threading.Lock(), {"n": 0}

    def failing(self, y, *args):
        with lock:
            calls["n"] += 1
            n = calls["n"]
        if n == 4:  # a null, inside the pool
            raise RuntimeError("sort failed in a worker")
        return real(self, y, *args)

    monkeypatch.setattr(pga_mod.InfluenceContext, "view", failing)
    with pytest.raises(RuntimeError, match="sort failed in a worker"):
        tg.pga_score(*_data(), n_null=12, ccr=0, threads=ThreadChoice(pool=2))
    assert torch.get_num_threads() == 2


def test_parallel_map_orders_results_and_cancels_after_an_error(two_threads):
    assert threads.parallel_map(lambda i: i * i, range(20), 2) == [i * i for i in range(20)]
    assert threads.parallel_map(lambda i: torch.get_num_threads(), range(4), 2) == [1] * 4
    assert threads.parallel_map(lambda i: i, [], 2) == []
    started = []

    def work(i):
        started.append(i)
        if i == 0:
            raise KeyError("first")
        threading.Event().wait(0.01)
        return i

    with pytest.raises(KeyError, match="first"):
        threads.parallel_map(work, range(200), 2)
    assert len(started) < 200  # the rest were cancelled
    assert torch.get_num_threads() == 2
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="positive integer"):
            threads.parallel_map(lambda i: i, range(3), bad)


def test_packed_order_arange_cache_is_read_only():
    a = sp._arange(10)
    with pytest.raises(ValueError):
        a[0] = 1
    np.testing.assert_array_equal(a, np.arange(10))


def _slow_name(_):
    threading.Event().wait(0.02)
    return threading.current_thread().name


def test_parallel_map_keeps_its_threads_and_runs_nested_calls_inline(two_threads):
    names = set(threads.parallel_map(_slow_name, range(8), 2))
    assert "MainThread" in names and any(n.startswith("tl_geometry") for n in names)  # this thread + one pool thread
    ex = thread_choice._pool[0]
    threads.parallel_map(_slow_name, range(4), 2)
    assert thread_choice._pool[0] is ex  # the same pool, not one per call
    inner = threads.parallel_map(lambda i: threads.parallel_map(_slow_name, range(3), 2), range(4), 2)
    assert all(len(set(names_)) == 1 for names_ in inner)  # a nested call runs in the thread of its task


@pytest.mark.parametrize("stderr", ["influence", "none"])
def test_the_readout_runs_on_the_pool_beside_the_nulls(two_threads, monkeypatch, stderr):
    """One pool per CCR level holds the readout (view 0) and the n nulls; the same numbers as the
    sequential loop, which takes the readout first on one thread."""
    H, V = _data()
    sizes = []
    real = pga_mod.parallel_map
    monkeypatch.setattr(pga_mod, "parallel_map", lambda fn, items, n: sizes.append(len(items)) or real(fn, items, n))
    pooled = tg.pga_profile(H, V, ccrs=(0, 1), n_null=9, stderr=stderr, threads=ThreadChoice(pool=2))
    assert sizes == [10, 10]
    seq = tg.pga_profile(H, V, ccrs=(0, 1), n_null=9, stderr=stderr, threads=ThreadChoice(pool=1))
    for c in (0, 1):
        assert (pooled[c].rho_read, pooled[c].z) == (seq[c].rho_read, seq[c].z)
        if stderr == "influence":
            assert pooled[c].stderr == seq[c].stderr
