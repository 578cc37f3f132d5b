"""Property-based fuzzing of the public functions and CLI options with values of the wrong kind.

Each case calls one public function (``tl_geometry.__all__``, plain values) or one CLI command
(``tl_geometry.cli.main(argv)`` in-process, the model load patched out) with ONE argument replaced
by a random value: None, bools, NaN / ±inf, huge and negative integers, fractional floats,
strings, lists, dicts. An oracle written here says whether that value is acceptable for the
argument. Each outcome is classified:

- ``error before work``: a TLGeometryError (CLI: exit status 2 with a one-line message, or
  argparse's exit 2) raised by an argument check (before any model load on the CLI);
- ``error after work``: a TLGeometryError raised later, from inside the computation;
- ``accepted``: the oracle says the value is valid and the call returned / reached the model load;
- ``traceback``: any other exception (a bug);
- ``silent``: the oracle says the value is invalid but a result came back (a bug).

The test asserts no ``traceback`` and no ``silent``; the counts are written to
``$TLG_FUZZ_COUNTS`` (JSON) when that variable is set, and printed with ``pytest -s``.
"""

from __future__ import annotations

import json
import math
import os
import traceback
import types
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import tl_geometry as tg  # noqa: E402
from tl_geometry.base import _checks  # noqa: E402
from tl_geometry.cli import main  # noqa: E402
from tl_geometry.errors import TLGeometryError  # noqa: E402

COUNTS: Counter = Counter()
BAD: list[str] = []
LATE: Counter = Counter()  # function(argument) → errors raised from inside the computation

#: Values of every wrong kind (and some right ones, which the oracle recognises).
WRONG = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.5, 2.7, -1.0, 1e308, 5e-324]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70),
    st.integers(-3, 40),
    st.text(max_size=4),
    st.lists(st.integers(-2, 5), max_size=3),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.just(np.float64("nan")),
    st.just(np.int64(3)),
    st.just(torch.tensor(2.0)),
)

# ------------------------------------------------------------------ oracles
is_int = _checks.is_int


def int_ge(lo: int, *, none_ok: bool = False, hi: float = math.inf) -> Callable[[Any], bool]:
    return lambda v: (none_ok and v is None) or (is_int(v) and lo <= v <= hi)


def real_in(lo: float, hi: float = math.inf, *, lo_open=False, hi_open=False, none_ok=False):
    def ok(v):
        if none_ok and v is None:
            return True
        if not _checks.is_real(v) or not math.isfinite(float(v)):
            return False
        x = float(v)
        return (x > lo if lo_open else x >= lo) and (x < hi if hi_open else x <= hi)

    return ok


SEED_OK = int_ge(0, hi=_checks.SEED_MAX)
SKIP = "skip"


def _sized(v: Any, per: int) -> Any:
    """A count whose array holds v × per numbers: valid up to 2**24, refused above 2**36 (the
    library's bound), and too big to try in a test in between (skipped)."""
    if not is_int(v) or v < 0:
        return False
    return True if v * per <= 2**24 else SKIP if v * per <= 2**36 else False


def _is_tl_error(exc: BaseException) -> bool:
    return isinstance(exc, TLGeometryError)


def _early(exc: BaseException) -> bool:
    """Raised by an argument check: in the public function's own body, in _checks.py, or in a
    function named *check* / ``__post_init__``; else from deeper inside the computation."""
    lib = [f for f in traceback.extract_tb(exc.__traceback__) if "tl_geometry" in f.filename.replace("\\", "/")]
    if len(lib) <= 1:
        return True
    return any(f.filename.endswith("_checks.py") or "check" in f.name or f.name == "__post_init__" for f in lib)


def classify(label: str, fn: Callable[[], Any], valid: bool) -> str:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - classified
        if _is_tl_error(exc):
            kind = "error before work" if _early(exc) else "error after work"
            if kind == "error after work":
                LATE[label.split("(")[0] + "(" + label.split("(")[1].split("=")[0] + ")"] += 1
        else:
            kind = "traceback"
            BAD.append(f"{label}: {type(exc).__name__}: {str(exc)[:120]}")
    else:
        kind = "accepted" if valid else "silent"
        if not valid:
            BAD.append(f"{label}: returned a result")
    COUNTS[kind] += 1
    COUNTS["total"] += 1
    return kind


# ------------------------------------------------------------------ the Python API
G0 = torch.Generator().manual_seed(0)
H0 = torch.randn(40, 8, generator=G0)
V0 = tg.readout_basis(torch.randn(8, 30, generator=G0), 2)
C0 = H0.T @ H0 / 40
W0 = torch.randn(8, 12, generator=G0)

#: function → (call with kwargs, {argument: (valid default, oracle)}).
API: dict[str, tuple[Callable[..., Any], dict[str, tuple[Any, Callable[[Any], bool]]]]] = {
    "pga_score": (
        lambda **kw: tg.pga_score(H0, V0, **kw),
        {
            "n_null": (3, int_ge(2)),
            "ccr": (1, lambda v: is_int(v) and 0 <= v < 8),
            "seed": (0, SEED_OK),
            "max_pairs": (None, int_ge(1, none_ok=True)),
            "memory_mb": (64, real_in(0, lo_open=True)),
            "n_groups": (4, int_ge(2)),
            "refit_nulls": (0, int_ge(0)),
        },
    ),
    "pga_profile": (
        lambda **kw: tg.pga_profile(H0, V0, n_null=3, refit_nulls=0, **kw),
        {
            "ccrs": (
                (0, 1),
                lambda v: isinstance(v, (list, tuple)) and bool(v) and all(is_int(c) and 0 <= c < 8 for c in v),
            )
        },
    ),
    "haar_bases": (
        lambda **kw: tg.haar_bases(**kw),
        {
            "d": (6, lambda v: is_int(v) and 2 <= v <= 40),
            "k": (2, lambda v: is_int(v) and 1 <= v <= 6),
            "n": (2, lambda v: _sized(v, 12)),
            "seed": (0, SEED_OK),
        },
    ),
    "readout_basis": (lambda **kw: tg.readout_basis(W0, **kw), {"k": (2, lambda v: is_int(v) and 1 <= v < 8)}),
    "min_points": (lambda **kw: tg.min_points(**kw), {"k": (3, int_ge(1))}),
    "check_n_points": (
        lambda **kw: tg.check_n_points(**kw),
        {"n": (50, lambda v: is_int(v) and v >= 10), "k": (3, lambda v: is_int(v) and 1 <= v <= 49)},
    ),
    "spectral_metrics": (
        lambda **kw: tg.spectral_metrics(H0, **kw),
        {
            "fit_range": (
                None,
                lambda v: (
                    v is None
                    or (
                        isinstance(v, (list, tuple))
                        and len(v) == 2
                        and all(is_int(x) for x in v)
                        and 1 <= v[0]
                        and v[0] + 2 <= v[1] <= 9
                    )
                ),
            )
        },
    ),
    "spectral_from_covariance": (
        lambda **kw: tg.spectral_from_covariance(C0, **kw),
        {"n_points": (0, int_ge(0))},
    ),
    "power_law_fit": (
        lambda **kw: tg.power_law_fit(torch.arange(1, 9, dtype=torch.float64) ** -1.0, **kw),
        {
            "fit_range": (
                (1, 5),
                lambda v: (
                    isinstance(v, (list, tuple))
                    and len(v) == 2
                    and all(is_int(x) for x in v)
                    and 1 <= v[0]
                    and v[0] + 2 <= v[1] <= 9
                ),
            )
        },
    ),
    "projection_matrix": (
        lambda **kw: tg.projection_matrix(**{"d_out": 4, "d_in": 3, **kw}),
        {
            "d_out": (4, lambda v: is_int(v) and v >= 2 and _sized(v, 3)),
            "d_in": (3, lambda v: is_int(v) and v >= 1 and _sized(v, 4)),
            "seed": (0, lambda v: SEED_OK(v) and v + 7919 < 2**64),
            "convention": ("library", lambda v: v in ("library", "paper") and isinstance(v, str)),
        },
    ),
    "depth_width_ratio": (
        lambda **kw: tg.depth_width_ratio({"n_layers": 3, "d_model": 64, **kw}),
        {"n_layers": (3, int_ge(1)), "d_model": (64, int_ge(1))},
    ),
    "in_efficient_interval": (lambda **kw: tg.in_efficient_interval(**kw), {"ratio": (0.03, real_in(-math.inf))}),
    "loss_correlations": (
        lambda **kw: tg.loss_correlations([1.0, 2.0, 3.0], {"m": [1.0, 3.0, 2.0]}, sizes=[1, 2, 3], **kw),
        {"large_from": (2, lambda v: v is None or is_int(v))},
    ),
    "similarity_stats": (
        lambda **kw: tg.similarity_stats(H0, **kw),
        {
            "block_size": (16, int_ge(1, none_ok=True)),  # None: automatic sizing
            "histogram_bins": (10, lambda v: is_int(v) and 1 <= v <= 10**7),
            "top_n": (0, int_ge(0)),
        },
    ),
    "corpus.tokens": (
        lambda **kw: tg.corpus.tokens(
            types.SimpleNamespace(
                tokenizer=_byte_tokenizer(), cfg=types.SimpleNamespace(n_ctx=64, default_prepend_bos=True)
            ),
            "pydoc",
            **{"n_seqs": 2, "seq_len": 16, **kw},
        ),
        {
            "n_seqs": (2, lambda v: is_int(v) and 1 <= v <= 40),  # the corpus holds fewer chunks above
            "seq_len": (16, lambda v: is_int(v) and 2 <= v <= 64),
            "seed": (0, SEED_OK),
            "prepend_bos": (None, lambda v: v is None or isinstance(v, bool)),
        },
    ),
    "analyze": (
        # a weights-only metric on a stub: every argument is checked before the model is read
        lambda **kw: tg.analyze(object(), **{"metrics": ["_fuzz_weights"], "progress": False, **kw}),
        {
            "metrics": (["_fuzz_weights"], lambda v: v == "_fuzz_weights" or v == ["_fuzz_weights"]),
            "progress": (False, lambda v: isinstance(v, bool)),
            "capture": ("shared", lambda v: v in ("shared", "separate") and isinstance(v, str)),
            "options": (None, lambda v: v is None or v == {}),
        },
    ),
}


def _byte_tokenizer():
    from tests.helpers import ByteTokenizer

    return ByteTokenizer()


@pytest.fixture(scope="module", autouse=True)
def _fuzz_metric():
    @tg.register_metric("_fuzz_weights", needs="weights", overwrite=True)
    def _m(model, tokens, *, hooks=None):
        return tg.GeometryReport.from_rows([], model=None)

    yield
    tg.unregister_metric("_fuzz_weights")
    summary = dict(COUNTS)
    path = os.environ.get("TLG_FUZZ_COUNTS")
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"counts": summary, "bad": BAD, "late": dict(LATE)}, fh, indent=1)
    print("\nfuzz counts:", summary)


API_CASES = [(f, a) for f, (_, args) in API.items() for a in args]


@pytest.mark.parametrize("fname, arg", API_CASES, ids=[f"{f}.{a}" for f, a in API_CASES])
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(value=WRONG)
def test_api_wrong_values(fname, arg, value):
    call, args = API[fname]
    _, oracle = args[arg]
    try:
        verdict = oracle(value)
    except Exception:  # noqa: BLE001 - an oracle that cannot compare: not valid
        verdict = False
    hypothesis.assume(verdict is not SKIP)
    valid = bool(verdict)
    kwargs = {name: default for name, (default, _) in args.items()}
    kwargs[arg] = value
    kind = classify(f"{fname}({arg}={value!r})", lambda: call(**kwargs), valid)
    assert kind not in ("traceback", "silent"), BAD[-1]


# ------------------------------------------------------------------ the command line
class _Loaded(Exception):
    """The model load was reached: every argument check had passed."""


#: command → {flag: oracle on the parsed text}; each case runs ``argv + [flag, text]``.
def _i(lo, hi=math.inf):
    def ok(t):
        try:
            v = int(t, 10)
        except ValueError:
            return False
        return lo <= v <= hi

    return ok


def _f(lo, hi=math.inf, lo_open=True):
    def ok(t):
        try:
            v = float(t)
        except ValueError:
            return False
        return math.isfinite(v) and (v > lo if lo_open else v >= lo) and v <= hi

    return ok


CLI: dict[str, tuple[list[str], dict[str, Callable[[str], bool]]]] = {
    "pga": (
        ["pga"],
        {
            "--n-seqs": _i(1),  # too many for the corpus: refused after tokenizing (data-dependent)
            "--seq-len": _i(2, 2048),
            "--layers": _i(0, 29),
            "--ccr": _i(0),
            "--k": _i(1, 575),
            "--n-null": _i(2),
            "--max-points": _i(3),
            "--max-pairs": _i(1),
            "--batch-size": _i(1),
            "--seed": _i(0, _checks.SEED_MAX),
            "--threads": _i(1, 65536),
        },
    ),
    "agop": (
        ["agop"],
        {
            "--n-seqs": _i(1),  # too many for the corpus: refused after tokenizing (data-dependent)
            "--seq-len": _i(2, 2048),
            "--layers": _i(0, 29),
            "--n-probes": _i(2),
            "--batch-size": _i(1),
            "--seed": _i(0, _checks.SEED_MAX),
            "--projection-seed": _i(0, _checks.SEED_MAX),
        },
    ),
    "sweep-shape": (
        ["sweep", "shape", "--dry-run"],
        {
            "--budgets": _f(0),
            "--depths": _i(1),
            "--max-depth": _i(1),
            "--d-head": _i(1, 64),
            "--n-ctx": _i(1, 10**6),
            "--steps": _i(1),
            "--batch-size": _i(1),
            "--lr": _f(0),
            "--seed": _i(0, _checks.SEED_MAX),
        },
    ),
    "sweep-toy": (
        ["sweep", "toy"],
        {"--steps": _i(1), "--sizes": _i(1), "--seeds": _i(0, _checks.SEED_MAX)},
    ),
    "report": (
        ["report", "--metrics", "shape"],
        {
            "--n-seqs": _i(1),
            "--seq-len": _i(2),
            "--seed": _i(0, _checks.SEED_MAX),
            "--max-memory-gb": _f(5.6, 1e300),  # a report of SmolLM2 needs ~5.5 GiB by the estimate
        },
    ),
}

TEXT = st.one_of(
    st.sampled_from(["0", "-1", "1", "2", "3", "99", "nan", "inf", "-inf", "1e400", "2.5", "", "abc", "0x10", "1_000"]),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(alphabet="0123456789.-e+naif", max_size=6),
)


@pytest.fixture
def no_work(monkeypatch):
    from tl_geometry import models
    from tl_geometry.families.interaction import shape_sweep, toy_superposition

    def loaded(*a, **k):
        raise _Loaded()

    monkeypatch.setattr(models, "load", loaded)
    monkeypatch.setattr(toy_superposition, "train_toy", loaded)
    monkeypatch.setattr(shape_sweep, "plan", loaded)  # the dry run's listing: the config was accepted


CLI_CASES = [(c, f) for c, (_, flags) in CLI.items() for f in flags]


@pytest.mark.parametrize("cmd, flag", CLI_CASES, ids=[f"{c}{f}" for c, f in CLI_CASES])
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(text=TEXT)
def test_cli_wrong_values(cmd, flag, text, no_work, tmp_path_factory, capsys):
    base, flags = CLI[cmd]
    valid = flags[flag](text)
    out = tmp_path_factory.mktemp("o")
    argv = [*base, flag, text]
    if cmd.startswith("sweep"):
        argv += ["--out", str(out / "r.jsonl")]
    elif cmd == "report":
        argv += ["--out", str(out / "rep")]
    label = f"tl-geometry {' '.join(argv[:-2] if cmd.startswith('sweep') or cmd == 'report' else argv)}"
    capsys.readouterr()  # this example's output only
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse: "invalid int value" and the like
        rc = e.code
        kind = "error before work" if rc == 2 else "traceback"
    except _Loaded:
        kind = "accepted" if valid else "silent"
        rc = None
    except Exception as exc:  # noqa: BLE001 - classified
        kind = "traceback"
        BAD.append(f"{label}: {type(exc).__name__}: {str(exc)[:120]}")
        rc = None
    else:
        if rc == 2:
            err = capsys.readouterr().err.strip()
            kind = "error before work" if err and "\n" not in err else "traceback"
        else:
            kind = "accepted" if valid else "silent"
    if kind == "silent":
        BAD.append(f"{label}: exit {rc} for an invalid value")
    COUNTS[kind] += 1
    COUNTS["total"] += 1
    COUNTS["cli"] += 1
    assert kind not in ("traceback", "silent"), BAD[-1] if BAD else kind
