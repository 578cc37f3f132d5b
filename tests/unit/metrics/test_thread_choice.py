"""The metrics' thread counts (tl_geometry.metrics.thread_choice): passed in, applied, restored; never read from the load."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tl_geometry as tg
from tests.unit.runtime.test_threads import _data, two_threads  # noqa: F401  (the fixture, used below)
from tests.unit.runtime.test_threads import _spy_null_threads as _spy_sorts
from tl_geometry.metrics.intrinsic_dimension import gride_scaling, neighbor_distances, twonn
from tl_geometry.metrics.thread_choice import INHERIT, ThreadChoice, limit_threads, resolve

pytestmark = pytest.mark.usefixtures("two_threads")  # torch on 2 threads in every test, then restored

ROOT = Path(__file__).resolve().parents[3]


# ----------------------------------------------------------------------------- the type
def test_default_choice_is_static_inherit():
    assert INHERIT == ThreadChoice() == resolve(None)
    assert (INHERIT.dense, INHERIT.sort, INHERIT.pool, INHERIT.lapack) == (None, None, None, 1)
    c = ThreadChoice(sort=1)
    assert resolve(c) is c and c.count("sort") == 1 and c.count("dense") is None
    with pytest.raises(AttributeError):
        c.sort = 2  # frozen


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_counts_are_refused(bad):
    with pytest.raises(ValueError, match="ThreadChoice.dense must be a positive integer or None"):
        ThreadChoice(dense=bad)
    with pytest.raises(ValueError, match="thread count must be a positive integer"):
        with limit_threads(bad):
            pass


def test_bad_choices_and_kinds_are_refused():
    with pytest.raises(ValueError, match="threads must be a ThreadChoice or None, got int"):
        resolve(2)
    with pytest.raises(ValueError, match="threads must be a ThreadChoice or None"):
        tg.pga_score(*_data(), n_null=4, ccr=0, threads=1)
    with pytest.raises(ValueError, match="unknown kernel kind 'gpu'"):
        ThreadChoice().count("gpu")


def test_pool_workers_honour_the_users_cap():
    assert ThreadChoice().workers() == 2  # torch's setting
    assert ThreadChoice(pool=8).workers() == 2  # never more than the user's setting
    assert ThreadChoice(pool=1).workers() == 1
    torch.set_num_threads(1)
    assert ThreadChoice().workers() == 1


def test_kernel_applies_the_count_and_restores_also_on_error():
    with ThreadChoice(dense=1).kernel("dense") as n:
        assert n == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with pytest.raises(RuntimeError, match="boom"):
        with ThreadChoice(sort=1).kernel("sort"):
            assert torch.get_num_threads() == 1
            raise RuntimeError("boom")
    assert torch.get_num_threads() == 2
    with ThreadChoice(sort=8).kernel("sort") as n:  # never raises the user's setting
        assert n == 2
    with ThreadChoice(dense=1).kernel("dense", torch.device("cuda")) as n:  # not the CPU: unchanged
        assert n == 2 and torch.get_num_threads() == 2
    with INHERIT.kernel("lapack") as n:
        assert n == 1
    assert torch.get_num_threads() == 2


# ----------------------------------------------------------------------------- the metrics honour it
def test_default_never_reads_the_machines_load(monkeypatch):
    """Without a choice the metrics read no load: the load reader and the policy raise if called."""
    from tl_geometry.runtime import threads

    def boom(*a, **kw):
        raise AssertionError("a metric read the machine's load")

    for name in ("free_cores", "_runnable_now", "_own_running", "kernel_threads", "choose", "pool_threads"):
        monkeypatch.setattr(threads, name, boom)
    H, V = _data(n=300, d=24, k=4)  # the pooled null loop too
    tg.pga_layer(H, V, ccrs=(0, 1), n_null=4)
    tg.pc1_overlap(H, V)
    tg.spectral_metrics(H, groups=torch.arange(300) % 4)
    twonn(H)
    gride_scaling(H, range_max=8)
    from tl_geometry.metrics.id_jackknife import id_jackknife
    from tl_geometry.metrics.interaction import nfa_correlation

    id_jackknife(H, torch.arange(300) % 4, range_max=8)
    nfa_correlation(torch.randn(24, 40), H.T @ H)


def test_the_metrics_do_not_even_import_the_thread_policy():
    code = (
        "import sys, torch\n"
        "import tl_geometry.metrics.pga as p, tl_geometry.metrics.intrinsic_dimension as i\n"
        "g = torch.Generator().manual_seed(0)\n"
        "H = torch.randn(80, 8, generator=g, dtype=torch.float64)\n"
        "p.pga_score(H, p.readout_basis(torch.randn(8, 30, generator=g), 2), n_null=4)\n"
        "p.spectral_metrics(H); i.twonn(H)\n"
        "print('tl_geometry.runtime.threads' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def test_a_passed_choice_is_honoured_and_restored(monkeypatch):
    seen = _spy_sorts(monkeypatch)
    H, V = _data()
    tg.pga_score(H, V, n_null=6, ccr=0, threads=ThreadChoice(dense=1, sort=1))
    assert seen == [1] * 8 and torch.get_num_threads() == 2  # reference, readout, 6 nulls
    seen.clear()
    tg.pga_score(H, V, n_null=6, ccr=0)  # the default: torch's setting
    assert seen == [2] * 8
    seen.clear()
    tg.pga_score(H, V, n_null=6, ccr=0, threads=ThreadChoice(sort=1, dense=2))
    assert seen == [1] * 8 and torch.get_num_threads() == 2


def test_dense_choice_reaches_the_neighbour_search(monkeypatch):
    seen = []
    real = torch.addmm

    def spy(*a, **kw):
        seen.append(torch.get_num_threads())
        return real(*a, **kw)

    monkeypatch.setattr(torch, "addmm", spy)
    x = torch.randn(50, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    neighbor_distances(x, 3, threads=ThreadChoice(dense=1))
    assert seen and set(seen) == {1} and torch.get_num_threads() == 2
    seen.clear()
    twonn(x)
    assert seen and set(seen) == {2}


CHOICES = [
    None,
    ThreadChoice(dense=1, sort=1, pool=1),
    ThreadChoice(dense=2, sort=2, pool=1),
    ThreadChoice(pool=2),
    ThreadChoice(dense=1, sort=2, pool=2, lapack=1),
]


def test_results_equal_between_choices():
    """The counts change the speed, not the numbers (factorizations stay on one thread)."""
    H, V = _data(n=300, d=24, k=4, seed=3)  # 44,850 pairs: the pooled null loop when pool > 1
    g = torch.Generator().manual_seed(1)
    W_U, W_in = torch.randn(24, 80, generator=g), torch.randn(24, 40, generator=g)
    out = []
    for c in CHOICES:
        prof, pc = tg.pga_layer(H, V, ccrs=(0, 1), n_null=6, threads=c)
        out.append(
            (
                {k: s.to_dict() for k, s in prof.items()},
                pc,
                tg.readout_basis(W_U, 5, threads=c),
                repr(tg.spectral_metrics(H, groups=torch.arange(300) % 4, threads=c)),
                tg.nfa_correlation(W_in, H.T @ H, threads=c),
                repr(twonn(H, threads=c)),
                neighbor_distances(H, 4, threads=c),
            )
        )
    first = out[0]
    for other in out[1:]:
        for ccr in (0, 1):
            a, b = first[0][ccr], other[0][ccr]
            assert b["null_rhos"] == pytest.approx(a["null_rhos"], abs=1e-12)
            assert b["z"] == pytest.approx(a["z"], abs=1e-9) and b["stderr"] == pytest.approx(a["stderr"], abs=1e-9)
        assert other[1] == first[1] and torch.equal(other[2], first[2]) and other[3] == first[3]
        assert other[4] == first[4] and other[5] == first[5] and torch.equal(other[6], first[6])
