"""Every streaming accumulator of tl_geometry.metrics keeps the Accumulator contract (issue 22).

One helper (`check_contract`, after torchmetrics' tester) runs each accumulator through: the
one-shot pure function == one ``update`` == random splits of ``update`` == k shards (unequal, one
empty) merged left to right, right to left and as a tree == merged shards followed by more
``update`` calls == ``reset()`` and fed again, on every field of the result (standard errors,
groups and counters included), to the tolerance of the accumulator's precision
(`tl_geometry.metrics.accumulator.TOLERANCES`). A class of ``tl_geometry.metrics`` with ``update``
and ``compute`` that is not in ``CASES`` fails `test_every_accumulator_is_tested`.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import torch

import tl_geometry.metrics as metrics_pkg
from tl_geometry.errors import InputError, InputTypeError
from tl_geometry.metrics import _gram
from tl_geometry.metrics.accumulator import TOLERANCES, Accumulator
from tl_geometry.metrics.capacity import SimilarityAccumulator, similarity_stats
from tl_geometry.metrics.interaction import (
    AGOPAccumulator,
    agop_state_bytes,
    aofe,
    leave_group_out,
    pack_symmetric,
    unpack_symmetric,
)
from tl_geometry.metrics.spectral import SPECTRAL_FIELDS, StreamingCovariance, spectral_metrics

SEEDS = [0, 1, 2]


# ----------------------------------------------------------------------------- the cases
@dataclass
class Case:
    """How to drive one accumulator through the contract.

    make(first_row): a fresh accumulator for the rows from ``first_row`` of the stream on.
    data(seed): the data set; ``n_rows(data)`` its rows (the axis that is split).
    feed(acc, data, a, b): ``update`` with rows [a, b) (one or more calls).
    result(acc): the computed result as a flat dict (floats, ints, strings, tensors).
    one_shot(data): the same dict from the pure function, or None when there is none.
    rtol: the contract's tolerance; floor: the scale below which a float is compared absolutely.
    scale_of(field): the field whose size is ``field``'s scale, or None for its own. A standard
        error (or a jackknife bias correction) is a difference of replicate estimates, each as
        exact as the estimate: it is compared on the estimate's scale, as the contract states.
    min_chunk: fewest rows per ``update`` (the mixed path of "auto" needs ≥ 1024 rows a block).
    """

    name: str
    cls: type
    make: Callable[[int], Any]
    data: Callable[[int], Any]
    n_rows: Callable[[Any], int]
    feed: Callable[[Any, Any, int, int], None]
    result: Callable[[Any], dict[str, Any]]
    one_shot: Callable[[Any], dict[str, Any]] | None
    rtol: float
    floor: float = 0.0
    scale_of: Callable[[str], str | None] = lambda field: None
    min_chunk: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


# -- SimilarityAccumulator ----------------------------------------------------------------------


def _sim_data(n: int, d: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    x += 0.6 * torch.randn(d, generator=g, dtype=torch.float64)  # a shared direction: μ ≈ 0.2, not 0
    x[torch.randperm(n, generator=g)[: n // 50]] = 0.0  # zero rows: dropped and counted
    return x.to(dtype)


def _sim_result(acc: SimilarityAccumulator) -> dict[str, Any]:
    s = acc.compute()
    out = {f.name: getattr(s, f.name) for f in dataclasses.fields(s) if f.name not in ("histogram", "top_pairs")}
    out.update(needs_float64=acc.needs_float64, n_total=acc.n_total, n=acc.n)
    return out


def _sim_one_shot(precision: str) -> Callable[[torch.Tensor], dict[str, Any]]:
    def f(x: torch.Tensor) -> dict[str, Any]:
        s = similarity_stats(x, precision=precision, progress=False)
        out = {f.name: getattr(s, f.name) for f in dataclasses.fields(s) if f.name not in ("histogram", "top_pairs")}
        out.update(n_total=x.shape[0], n=s.n_vectors)  # needs_float64 is the accumulator's own flag
        return out

    return f


def _sim_feed(acc: SimilarityAccumulator, x: torch.Tensor, a: int, b: int) -> None:
    acc.update(x[a:b])


def _sim_case(name: str, precision: str, n: int, d: int, dtype: torch.dtype, rtol: float, min_chunk: int) -> Case:
    return Case(
        name=name,
        cls=SimilarityAccumulator,
        make=lambda first_row: SimilarityAccumulator(precision=precision),
        data=lambda seed: _sim_data(n, d, dtype, seed),
        n_rows=lambda x: x.shape[0],
        feed=_sim_feed,
        result=_sim_result,
        one_shot=_sim_one_shot(precision),
        rtol=rtol,
        floor=1.0,  # cosines: their scale is 1
        min_chunk=min_chunk,
    )


# -- StreamingCovariance ------------------------------------------------------------------------

COV_GROUPS = [37, 80, 53, 100, 130]  # 400 rows, unequal groups (raw rows below d rows, moments above)


def _cov_data(seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    d = 12
    scales = torch.logspace(0, -2, d, dtype=torch.float64)  # a decaying spectrum (α-ReQ, condition number)
    return torch.randn(sum(COV_GROUPS), d, generator=g, dtype=torch.float64) * scales + 3.0


def _cov_result(acc: StreamingCovariance) -> dict[str, Any]:
    m = acc.spectral()
    out: dict[str, Any] = {"cov": acc.compute(), "n": acc.n}
    out.update({f: getattr(m, f) for f in (*SPECTRAL_FIELDS, "alpha_req_r2", "alpha_req_reptrix_r2")})
    out.update(n_kept=m.n_kept, d=m.d, n_points=m.n_points, eigenvalues=m.eigenvalues)
    out.update(n_groups=m.n_groups, stderr_method=m.stderr_method)
    out.update({f"se_{k}": v for k, v in m.stderr.items()})
    return out


def _cov_one_shot(grouped: bool) -> Callable[[torch.Tensor], dict[str, Any]]:
    def f(x: torch.Tensor) -> dict[str, Any]:
        labels = torch.repeat_interleave(torch.arange(len(COV_GROUPS)), torch.tensor(COV_GROUPS)) if grouped else None
        m = spectral_metrics(x, groups=labels)
        out: dict[str, Any] = {"cov": torch.cov(x.T), "n": x.shape[0]}
        out.update({f: getattr(m, f) for f in (*SPECTRAL_FIELDS, "alpha_req_r2", "alpha_req_reptrix_r2")})
        out.update(n_kept=m.n_kept, d=m.d, n_points=m.n_points, eigenvalues=m.eigenvalues)
        out.update(n_groups=m.n_groups, stderr_method=m.stderr_method)
        out.update({f"se_{k}": v for k, v in m.stderr.items()})
        return out

    return f


def _cov_feed(acc: StreamingCovariance, x: torch.Tensor, a: int, b: int) -> None:
    acc.update(x[a:b])


def _cov_case(grouped: bool) -> Case:
    return Case(
        name="covariance-grouped" if grouped else "covariance",
        cls=StreamingCovariance,
        # ungrouped shards need no first_row (row positions matter only to the groups)
        make=(lambda r: StreamingCovariance(COV_GROUPS, first_row=r)) if grouped else (lambda r: StreamingCovariance()),
        data=_cov_data,
        n_rows=lambda x: x.shape[0],
        feed=_cov_feed,
        result=_cov_result,
        one_shot=_cov_one_shot(grouped),
        rtol=TOLERANCES["float64"],
        scale_of=lambda f: f.removeprefix("se_") if f.startswith("se_") else None,
    )


# -- AGOPAccumulator ----------------------------------------------------------------------------

AGOP_P, AGOP_K = 6, 4  # 6 probes in 4 groups of 2, 2, 1, 1 probes
AGOP_DIMS = {"blocks.0.hook_resid_pre": 10, "blocks.1.hook_mlp_out": 6}


def _agop_data(seed: int) -> dict[str, torch.Tensor]:
    """Gradients (P, N, d) per key; each probe mixes the directions its own way, as random probes
    do (so the probe groups disagree, in scale and in shape, and the standard errors, AOFE ratio's
    included, are well above the float32 rounding of the sums)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for key, d in AGOP_DIMS.items():
        mix = torch.randn(d, d, generator=g) + torch.randn(AGOP_P, d, d, generator=g)
        scale = torch.rand(AGOP_P, 1, 1, generator=g) * 1.5 + 0.5
        out[key] = (torch.randn(AGOP_P, 240, d, generator=g) @ mix) * scale
    return out


AGOP_J, AGOP_ROWS_PER_TEXT = 4, 60  # the text-group case: rows 60·j … 60·j + 59 are text group j


def _agop_feed(acc: AGOPAccumulator, data: dict[str, torch.Tensor], a: int, b: int) -> None:
    for key, g in data.items():
        for p in range(AGOP_P):
            if acc.text_groups is None:
                acc.update(g[p, a:b], probe=p, key=key)
                continue
            for j in range(a // AGOP_ROWS_PER_TEXT, (b - 1) // AGOP_ROWS_PER_TEXT + 1) if b > a else []:
                lo, hi = max(a, j * AGOP_ROWS_PER_TEXT), min(b, (j + 1) * AGOP_ROWS_PER_TEXT)
                acc.update(g[p, lo:hi], probe=p, key=key, text_group=j)


def _agop_result(acc: AGOPAccumulator) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in AGOP_DIMS:
        G, s = acc.compute(key)
        out[f"{key}/G"] = G
        out.update({f"{key}/{k}": v for k, v in s.to_dict().items()})
    return out


def _agop_one_shot_text(data: dict[str, torch.Tensor]) -> dict[str, Any]:
    """The probe-only one-shot plus the jackknife over the text groups (rows 60·j … 60·j + 59),
    from the definition: G_(−j) from the rows outside group j, every probe; combined errors
    √(se_text² + se_probes²)."""
    out = _agop_one_shot(data)
    for key, g in data.items():
        g64 = g.double()
        P, N = g64.shape[0], g64.shape[1]
        reps = []
        for j in range(AGOP_J):
            keep = torch.ones(N, dtype=torch.bool)
            keep[j * AGOP_ROWS_PER_TEXT : (j + 1) * AGOP_ROWS_PER_TEXT] = False
            gk = g64[:, keep]
            R = torch.einsum("pni,pnj->ij", gk, gk) / (P * int(keep.sum()))
            reps.append([float(aofe(R).aofe), float(aofe(R).ratio), float(torch.trace(R))])
        jt = torch.tensor(reps, dtype=torch.float64)
        tse = ((AGOP_J - 1) / AGOP_J * ((jt - jt.mean(0)) ** 2).sum(0)).sqrt().tolist()
        for i, name in enumerate(("aofe", "ratio", "trace")):
            pse = out[f"{key}/{name}_stderr_probes"]
            out[f"{key}/{name}_stderr_text"] = tse[i]
            out[f"{key}/{name}_stderr"] = math.sqrt(pse**2 + tse[i] ** 2)
        out[f"{key}/n_text_groups"] = AGOP_J
    return out


def _agop_one_shot(data: dict[str, torch.Tensor]) -> dict[str, Any]:
    """The AGOP and its group statistics straight from the definitions, in float64:
    G = Σ_p Σ_i g_pi g_piᵀ / (P·N); group k's probes p ≡ k (mod K); stderr² = Σ_k n_k ‖G_k − G‖_F² / ((K − 1)·P);
    jackknife over the leave-group-out AGOPs (`leave_group_out`) of AOFE, ratio and trace."""
    out: dict[str, Any] = {}
    P, K = AGOP_P, AGOP_K
    for key, g in data.items():
        g64 = g.double()
        N = g64.shape[1]
        per_probe = torch.einsum("pni,pnj->pij", g64, g64)
        n_k = [len(range(k, P, K)) for k in range(K)]
        S = torch.stack([per_probe[k::K].sum(0) for k in range(K)])
        G = S.sum(0) / (P * N)
        G_k = [S[k] / (n_k[k] * N) for k in range(K)]
        stderr = (sum(n_k[k] * float(((G_k[k] - G) ** 2).sum()) for k in range(K)) / (K - 1) / P) ** 0.5
        reps = leave_group_out(S, n_k, N)
        jack = torch.tensor(
            [[float(aofe(R).aofe), float(aofe(R).ratio), float(torch.trace(R))] for R in reps], dtype=torch.float64
        )
        jse = ((K - 1) / K * ((jack - jack.mean(0)) ** 2).sum(0)).sqrt().tolist()
        a = aofe(G)
        full = torch.tensor([float(a.aofe), float(a.ratio)], dtype=torch.float64)
        debiased = (K * full - (K - 1) * jack.mean(0)[:2]).tolist()
        fro = float(G.norm())
        out[f"{key}/G"] = G
        out.update(
            {
                f"{key}/aofe": float(a.aofe),
                f"{key}/ratio": float(a.ratio),
                f"{key}/trace": float(torch.trace(G)),
                f"{key}/frobenius": fro,
                f"{key}/stderr": stderr,
                f"{key}/rel_stderr": stderr / fro,
                f"{key}/aofe_stderr": jse[0],
                f"{key}/ratio_stderr": jse[1],
                f"{key}/trace_stderr": jse[2],
                f"{key}/n_probes": P,
                f"{key}/n_positions": N,
                f"{key}/aofe_debiased": debiased[0],
                f"{key}/ratio_debiased": debiased[1],
                f"{key}/n_groups": K,
                f"{key}/aofe_stderr_probes": jse[0],
                f"{key}/ratio_stderr_probes": jse[1],
                f"{key}/trace_stderr_probes": jse[2],
                f"{key}/aofe_stderr_text": float("nan"),
                f"{key}/ratio_stderr_text": float("nan"),
                f"{key}/trace_stderr_text": float("nan"),
                f"{key}/n_text_groups": 0,
                f"{key}/stderr_note": "",
            }
        )
    return out


def _agop_scale_of(field: str) -> str | None:
    key, _, name = field.rpartition("/")
    if name == "stderr":
        return f"{key}/frobenius"  # the Frobenius error of G
    if name.endswith(("_stderr_probes", "_stderr_text")):
        return f"{key}/{name.split('_', 1)[0]}"  # ratio_stderr_text → ratio, …
    if name.endswith(("_stderr", "_debiased")) and name != "rel_stderr":
        return f"{key}/{name.rsplit('_', 1)[0]}"  # aofe_stderr → aofe, ratio_debiased → ratio, …
    return None


AGOP_CASE = Case(
    name="agop",
    cls=AGOPAccumulator,
    make=lambda first_row: AGOPAccumulator(AGOP_P, AGOP_K),
    data=_agop_data,
    n_rows=lambda data: next(iter(data.values())).shape[1],
    feed=_agop_feed,
    result=_agop_result,
    one_shot=_agop_one_shot,
    rtol=TOLERANCES["float32"],
    scale_of=_agop_scale_of,
)

AGOP_TEXT_CASE = Case(
    name="agop-text-groups",
    cls=AGOPAccumulator,
    make=lambda first_row: AGOPAccumulator(AGOP_P, AGOP_K, text_groups=AGOP_J),
    data=_agop_data,
    n_rows=lambda data: next(iter(data.values())).shape[1],
    feed=_agop_feed,
    result=_agop_result,
    one_shot=_agop_one_shot_text,
    rtol=TOLERANCES["float32"],
    scale_of=_agop_scale_of,
)

CASES = [
    _sim_case("similarity-float64", "float64", 600, 16, torch.float64, TOLERANCES["float64"], 1),
    # "auto" on float32 blocks of >= 1024 rows: the mixed path (float32 block Grams)
    _sim_case("similarity-auto-mixed", "auto", 6000, 24, torch.float32, TOLERANCES["mixed"], _gram.MIXED_MIN_ROWS),
    # "mixed" forced: every block on the float32 path whatever its size
    _sim_case("similarity-mixed", "mixed", 2500, 24, torch.float32, TOLERANCES["mixed"], 1),
    _cov_case(grouped=False),
    _cov_case(grouped=True),
    AGOP_CASE,
    AGOP_TEXT_CASE,
]
TESTED_CLASSES = {c.cls for c in CASES}


# ----------------------------------------------------------------------------- the helper
def _close(a: Any, b: Any, rtol: float, floor: float, what: str) -> None:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        ta, tb = torch.as_tensor(a).double(), torch.as_tensor(b).double()
        assert ta.shape == tb.shape, f"{what}: shape {tuple(ta.shape)} != {tuple(tb.shape)}"
        # a float32 result (eigenvalues, AGOP's G) is compared at float32's own rounding at best
        tol = max(rtol, 2.0**-23 if torch.float32 in (getattr(a, "dtype", None), getattr(b, "dtype", None)) else 0.0)
        scale = max(float(ta.abs().max()), float(tb.abs().max()), floor) if ta.numel() else 0.0
        err = float((ta - tb).abs().max()) if ta.numel() else 0.0
        assert err <= tol * scale, f"{what}: max |Δ| {err:.3g} > {tol:.1g} × {scale:.3g}"
    elif isinstance(a, (bool, int, str, type(None))):  # counters, flags, labels: exactly equal
        assert type(a) is type(b) and a == b, f"{what}: {a!r} != {b!r}"
    else:
        fa, fb = float(a), float(b)
        if np.isnan(fa) or np.isnan(fb):
            assert np.isnan(fa) and np.isnan(fb), f"{what}: {fa} vs {fb}"
            return
        scale = max(abs(fa), abs(fb), floor)
        assert abs(fa - fb) <= rtol * scale, (
            f"{what}: {fa!r} vs {fb!r} (|Δ|/scale {abs(fa - fb) / scale:.3g} > {rtol:.1g})"
        )


def _same(case: Case, got: dict[str, Any], want: dict[str, Any], how: str) -> None:
    assert set(want) <= set(got), f"{case.name} {how}: fields {sorted(set(want) - set(got))} missing"
    for k, v in want.items():
        of = case.scale_of(k)
        floor = max(case.floor, abs(float(want[of]))) if of is not None else case.floor
        _close(got[k], v, case.rtol, floor, f"{case.name} {how}: {k}")


def _cuts(rng: np.random.Generator, a: int, b: int, pieces: int, min_chunk: int) -> list[int]:
    """Sorted cut points a = c_0 < … < c_m = b, at most ``pieces`` pieces of ≥ min_chunk rows each."""
    pieces = max(1, min(pieces, (b - a) // min_chunk))
    inner = sorted(rng.choice(np.arange(1, (b - a) // min_chunk), size=pieces - 1, replace=False)) if pieces > 1 else []
    cuts = [a, *(a + int(c) * min_chunk for c in inner), b]
    return cuts


def _fed(case: Case, data: Any, a: int, b: int, rng: np.random.Generator, pieces: int = 4) -> Any:
    """A fresh accumulator for stream rows [a, b), fed in a random split."""
    acc = case.make(a)
    cuts = _cuts(rng, a, b, pieces, case.min_chunk) if b > a else [a, a]
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        case.feed(acc, data, lo, hi)
    return acc


def _tree_merge(accs: list[Any]) -> Any:
    while len(accs) > 1:
        nxt = [accs[i].merge(accs[i + 1]) for i in range(0, len(accs) - 1, 2)]
        accs = nxt + ([accs[-1]] if len(accs) % 2 else [])
    return accs[0]


def check_contract(case: Case, seed: int) -> None:
    """one-shot == one update == random splits == merged shards (3 orders) == merge then update == reset and re-fed."""
    rng = np.random.default_rng(seed)
    data = case.data(seed)
    n = case.n_rows(data)
    m = case.min_chunk

    whole = case.make(0)
    assert isinstance(whole, Accumulator)
    case.feed(whole, data, 0, n)
    ref = case.result(whole)
    if case.one_shot is not None:
        _same(case, ref, case.one_shot(data), "one update vs the one-shot function")

    _same(case, case.result(_fed(case, data, 0, n, rng, pieces=7)), ref, "random split")

    # shards: unequal sizes and one empty shard (two equal cut points)
    starts = _cuts(rng, 0, n, 4, m)
    empty_at = int(rng.integers(0, len(starts)))
    starts = sorted([*starts[:-1], starts[empty_at] if empty_at < len(starts) - 1 else n, n])
    spans = list(zip(starts[:-1], starts[1:], strict=True))
    assert any(a == b for a, b in spans) and len({b - a for a, b in spans}) > 1, spans

    def shards() -> list[Any]:
        return [_fed(case, data, a, b, np.random.default_rng(seed + i)) for i, (a, b) in enumerate(spans)]

    forward = shards()
    probe_shard = max(range(1, len(spans)), key=lambda i: spans[i][1] - spans[i][0])  # not [0]: it is merged into
    before = case.result(forward[probe_shard])
    merged = forward[0]
    for other in forward[1:]:
        assert merged.merge(other) is merged
    _same(case, case.result(merged), ref, "shards merged left to right")
    _same(case, case.result(forward[probe_shard]), before, "a merged shard afterwards (must be unchanged)")

    backward = shards()[::-1]
    merged = backward[0]
    for other in backward[1:]:
        merged.merge(other)
    _same(case, case.result(merged), ref, "shards merged right to left")

    tree = shards()
    order = rng.permutation(len(tree))
    _same(case, case.result(_tree_merge([tree[i] for i in order])), ref, "shards merged as a tree, shuffled")

    # identity: an empty accumulator on either side
    empty_first = case.make(0).merge(_fed(case, data, 0, n, rng))
    _same(case, case.result(empty_first), ref, "empty.merge(full)")
    _same(case, case.result(_fed(case, data, 0, n, rng).merge(case.make(0))), ref, "full.merge(empty)")

    # merge, then keep streaming: the rows after the shards continue the stream
    cut = max(a for a, b in spans if b > a)  # the last non-empty shard is streamed after the merge instead
    head = [_fed(case, data, a, min(b, cut), rng) for a, b in spans if a < cut]
    acc = head[0]
    for other in head[1:]:
        acc.merge(other)
    tail = _cuts(rng, cut, n, 3, m) if n - cut >= m else [cut, n]
    for lo, hi in zip(tail[:-1], tail[1:], strict=True):
        case.feed(acc, data, lo, hi)
    _same(case, case.result(acc), ref, "merged shards, then update")

    acc.reset()
    again = _cuts(rng, 0, n, 5, m)
    for lo, hi in zip(again[:-1], again[1:], strict=True):
        case.feed(acc, data, lo, hi)
    _same(case, case.result(acc), ref, "reset() and fed again")


# ----------------------------------------------------------------------------- the tests
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_contract(case: Case, seed: int) -> None:
    check_contract(case, seed)


def _metric_classes() -> set[type]:
    """Classes defined in the modules of tl_geometry.metrics (private ones too) that have update and compute."""
    found = set()
    for info in pkgutil.iter_modules(metrics_pkg.__path__):
        mod = importlib.import_module(f"tl_geometry.metrics.{info.name}")
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ != mod.__name__ or getattr(cls, "_is_protocol", False):
                continue
            if callable(getattr(cls, "update", None)) and callable(getattr(cls, "compute", None)):
                found.add(cls)
    return found


def test_every_accumulator_is_tested() -> None:
    found = _metric_classes()
    assert {SimilarityAccumulator, StreamingCovariance, AGOPAccumulator} <= found  # the scan sees them
    missing = sorted(c.__qualname__ for c in found - TESTED_CLASSES)
    assert not missing, f"accumulators of tl_geometry.metrics not in test_accumulators.CASES: {missing}"


@pytest.mark.parametrize("cls", sorted(TESTED_CLASSES, key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_every_accumulator_has_the_protocol(cls: type) -> None:
    for name in ("update", "compute", "merge", "reset"):
        assert callable(getattr(cls, name, None)), f"{cls.__name__}.{name}"
    params = list(inspect.signature(cls.update).parameters.values())[1:]
    # the data is the first positional argument (AGOP: update(g, probe=, key=) with *args for the old form)
    assert params and params[0].kind in (
        params[0].POSITIONAL_ONLY,
        params[0].POSITIONAL_OR_KEYWORD,
        params[0].VAR_POSITIONAL,
    )


def test_the_mixed_cases_take_the_mixed_path() -> None:
    x = _sim_data(3000, 24, torch.float32, 0)
    acc = SimilarityAccumulator()
    acc.update(x[:1500])
    acc.update(x[1500:])
    assert acc.state is not None and acc.state.mixed_blocks == 2
    acc64 = SimilarityAccumulator(precision="float64")
    acc64.update(x)
    assert acc64.state is not None and acc64.state.mixed_blocks == 0
    merged = SimilarityAccumulator().merge(acc)
    assert merged.state is not None and merged.state.mixed_blocks == 2


def test_needs_float64_survives_a_merge() -> None:
    """Nearly parallel rows: the mixed result asks for float64; a merge of two such shards does too."""
    g = torch.Generator().manual_seed(3)
    x = (torch.ones(4000, 8) + 1e-4 * torch.randn(4000, 8, generator=g)).float()
    one = SimilarityAccumulator(precision="mixed")
    one.update(x)
    one.compute()
    a, b = SimilarityAccumulator(precision="mixed"), SimilarityAccumulator(precision="mixed")
    a.update(x[:2500])
    b.update(x[2500:])
    a.merge(b).compute()
    assert one.needs_float64 and a.needs_float64


def test_agop_shards_of_probes_merge() -> None:
    """Shards may split the probes instead of the positions (probe 0's shard counts the positions)."""
    data = _agop_data(5)
    ref = _agop_result(_fed(AGOP_CASE, data, 0, 240, np.random.default_rng(0)))
    shards = [AGOPAccumulator(AGOP_P, AGOP_K) for _ in range(3)]
    for key, g in data.items():
        for p in range(AGOP_P):
            shards[(p + 1) % 3].update(g[p], probe=p, key=key)
    merged = shards[2].merge(shards[0]).merge(shards[1])
    _same(AGOP_CASE, _agop_result(merged), ref, "probe shards merged")


def test_agop_old_positional_update_is_the_same() -> None:
    data = _agop_data(6)
    new, old = AGOPAccumulator(AGOP_P, AGOP_K), AGOPAccumulator(AGOP_P, AGOP_K)
    for key, g in data.items():
        for p in range(AGOP_P):
            new.update(g[p], probe=p, key=key)
            old.update(key, p, g[p])
    for key in AGOP_DIMS:
        assert torch.equal(new.sums[key], old.sums[key]) and new.n_positions[key] == old.n_positions[key]


def test_agop_compute_without_key() -> None:
    acc = AGOPAccumulator(2)
    g = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    acc.update(g, probe=0)
    acc.update(2 * g, probe=1)
    G, _ = acc.compute()
    assert torch.allclose(G, acc.compute(AGOPAccumulator.DEFAULT_KEY)[0])
    acc.update(g, probe=0, key="other")
    with pytest.raises(InputError, match="needs a key"):
        acc.compute()
    with pytest.raises(InputError, match="nothing accumulated at 'nope'"):
        acc.compute("nope")
    with pytest.raises(InputError, match="update\\(g, probe=p"):
        acc.update(g)


def test_agop_sums_are_packed_triangles_of_the_full_sums() -> None:
    """The sums are stored as packed upper triangles: ``group_sums`` gives back the full per-group
    sums of g gᵀ (against a slow loop), their bytes are ``agop_state_bytes``, and ``compute``'s
    statistics on the packed form equal ``aofe`` and plain float64 algebra on the full matrices."""
    gen = torch.Generator().manual_seed(3)
    P, K, J, d = 6, 3, 2, 7
    acc = AGOPAccumulator(P, K, text_groups=J)
    full = torch.zeros(K, d, d, dtype=torch.float64)
    rows = {j: torch.randn(4 + j, d, generator=gen) for j in range(J)}
    for p in range(P):
        for j, x in rows.items():
            g = x * (1 + p) + torch.randn(x.shape, generator=gen)
            acc.update(g, probe=p, text_group=j)
            for r in g.double():
                full[p % K] += torch.outer(r, r)
    assert acc.sums[AGOPAccumulator.DEFAULT_KEY].shape == (K, d * (d + 1) // 2)
    held = sum(t.numel() * t.element_size() for t in (*acc.sums.values(), *acc.text_sums.values()))
    assert held == agop_state_bytes(d, 1, n_groups=K, text_groups=J)
    got = acc.group_sums(AGOPAccumulator.DEFAULT_KEY)
    assert got.shape == (K, d, d) and torch.equal(got, got.transpose(1, 2))
    assert torch.allclose(got.double(), full, rtol=1e-5, atol=1e-4)
    G, st = acc.compute()
    N = sum(x.shape[0] for x in rows.values())
    want = full.sum(0) / (P * N)
    assert torch.allclose(G.double(), want, rtol=1e-5)
    ref = aofe(want)
    assert st.aofe == pytest.approx(float(ref.aofe), rel=1e-5)
    assert st.ratio == pytest.approx(float(ref.ratio), rel=1e-5)
    assert st.trace == pytest.approx(float(want.trace()), rel=1e-6)
    jack = [aofe((full.sum(0) - full[k]) / ((P - n) * N)) for k, n in enumerate(acc.group_counts())]
    jr = torch.tensor([float(a.ratio) for a in jack], dtype=torch.float64)
    assert st.ratio_stderr_probes == pytest.approx(
        float(((K - 1) / K * ((jr - jr.mean()) ** 2).sum()).sqrt()), rel=1e-4
    )
    per_probe_var = sum(
        n * float(((full[k] / (n * N) - want) ** 2).sum()) for k, n in enumerate(acc.group_counts())
    ) / (K - 1)
    assert st.stderr == pytest.approx(math.sqrt(per_probe_var / P), rel=1e-4)


def test_pack_and_unpack_symmetric() -> None:
    M = torch.randn(2, 5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    S = M + M.transpose(1, 2)
    p = pack_symmetric(S)
    assert p.shape == (2, 15)
    assert torch.equal(p[0], torch.cat([S[0, i, i:] for i in range(5)]))  # row by row, i <= j
    assert torch.equal(unpack_symmetric(p, 5), S)
    with pytest.raises(InputError, match="a packed 4 x 4 matrix has 10 entries, got 15"):
        unpack_symmetric(p, 4)
    with pytest.raises(InputError, match=r"square matrices \(\.\.\., d, d\), got torch.Size\(\[2, 5, 4\]\)"):
        pack_symmetric(M[..., :4])


def test_agop_width_change_and_drop() -> None:
    acc = AGOPAccumulator(2, text_groups=2)
    acc.update(torch.ones(3, 4), probe=0, key="h", text_group=0)
    with pytest.raises(InputError, match="gradients at 'h' have width 5, earlier ones 4"):
        acc.update(torch.ones(3, 5), probe=1, key="h", text_group=0)
    with pytest.raises(InputError, match="nothing accumulated at 'x'"):
        acc.group_sums("x")
    acc.drop("h")
    assert not (acc.sums or acc.text_sums or acc.n_positions or acc.text_positions)
    acc.update(torch.ones(3, 5), probe=0, key="h", text_group=1)  # a fresh start at another width
    assert acc.group_sums("h").shape == (2, 5, 5)


# ----------------------------------------------------------------------------- bad merges
def _sim(precision: str = "auto", d: int = 4, **kw: Any) -> SimilarityAccumulator:
    acc = SimilarityAccumulator(precision=precision, **kw)
    acc.update(torch.randn(10, d, generator=torch.Generator().manual_seed(d)))
    return acc


def test_similarity_merge_refuses() -> None:
    with pytest.raises(InputError, match="different d: 4 and 5"):
        _sim(d=4).merge(_sim(d=5))
    with pytest.raises(InputError, match="different precision: 'auto' and 'float64'"):
        _sim().merge(_sim("float64"))
    with pytest.raises(InputError, match="different precision: 'mixed' and 'auto'"):
        SimilarityAccumulator(precision="mixed").merge(SimilarityAccumulator())  # options count even when empty
    with pytest.raises(InputError, match="different device: cpu and None"):
        _sim(device="cpu").merge(_sim())
    acc = _sim()
    with pytest.raises(InputError, match="into itself"):
        acc.merge(acc)
    with pytest.raises(InputTypeError, match="another SimilarityAccumulator, got StreamingCovariance"):
        acc.merge(StreamingCovariance())  # type: ignore[arg-type]


def test_gram_state_merge_refuses() -> None:
    a, b = _gram.GramState(3, torch.device("cpu")), _gram.GramState(4, torch.device("cpu"))
    with pytest.raises(InputError, match="different d: 3 and 4"):
        a.merge(b)
    with pytest.raises(InputError, match="into itself"):
        a.merge(a)


def test_covariance_merge_refuses() -> None:
    x = torch.randn(20, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    a, b = StreamingCovariance(), StreamingCovariance()
    a.update(x)
    b.update(x[:, :3])
    with pytest.raises(InputError, match="different d: 4 and 3"):
        a.merge(b)
    with pytest.raises(InputError, match="different group_sizes"):
        StreamingCovariance([10, 10]).merge(StreamingCovariance([10, 5, 5]))
    with pytest.raises(InputError, match="different group_sizes"):
        StreamingCovariance([10, 10]).merge(StreamingCovariance())
    g1, g2 = StreamingCovariance([10, 10]), StreamingCovariance([10, 10])  # both start at row 0
    g1.update(x[:10])
    g2.update(x[10:])
    with pytest.raises(InputError, match="same stream rows .* give each shard its first_row"):
        g1.merge(g2)
    with pytest.raises(InputError, match="into itself"):
        g1.merge(g1)
    with pytest.raises(InputTypeError, match="another StreamingCovariance"):
        g1.merge(AGOPAccumulator(2))  # type: ignore[arg-type]
    with pytest.raises(InputError, match="first_row"):
        StreamingCovariance([10, 10], first_row=-1)


def test_agop_merge_refuses() -> None:
    g = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    a, b = AGOPAccumulator(4, 2), AGOPAccumulator(4, 2)
    a.update(g, probe=0, key="h0")
    b.update(g, probe=0, key="h1")
    with pytest.raises(InputError, match=r"different keys: only in this one \['h0'\], only in the other \['h1'\]"):
        a.merge(b)
    with pytest.raises(InputError, match="different n_probes/n_groups/text_groups: 4/2/None and 4/4/None"):
        a.merge(AGOPAccumulator(4, 4))
    with pytest.raises(InputError, match="different n_probes/n_groups/text_groups: 4/2/None and 6/2/None"):
        a.merge(AGOPAccumulator(6, 2))
    with pytest.raises(InputError, match="different n_probes/n_groups/text_groups: 4/2/None and 4/2/3"):
        a.merge(AGOPAccumulator(4, 2, text_groups=3))
    c = AGOPAccumulator(4, 2)
    c.update(torch.randn(5, 4), probe=0, key="h0")
    with pytest.raises(InputError, match="different d at 'h0': 3 and 4"):
        a.merge(c)
    with pytest.raises(InputError, match="into itself"):
        a.merge(a)
    with pytest.raises(InputTypeError, match="another AGOPAccumulator"):
        a.merge(SimilarityAccumulator())  # type: ignore[arg-type]
