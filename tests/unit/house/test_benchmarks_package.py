"""benchmarks/ is a package with one utilities module (issues 22 and 24); fast, no timing.

Every script parses, none imports ``tests``, every timing script uses ``_util``'s harness (the
environment header and the ratio lines), and ``python -m benchmarks.<name> --help`` works for each.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "benchmarks"
SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py") if not p.stem.startswith("_"))

#: The timing benchmarks: ours against the best simple reference and a floor, through ``_util``.
TIMING = [
    "bench_agop",
    "bench_agop_layout",
    "bench_agop_probes",
    "bench_capacity_stream",
    "bench_contention",
    "bench_epsilon",
    "bench_load",
    "bench_memory",
    "bench_packing",
    "bench_pga",
    "bench_pga_history",
    "bench_pga_smollm2",
    "bench_ray",
    "bench_report",
    "bench_report_overlap",
    "bench_report_render",
    "bench_report_scaling",
    "bench_sae",
    "bench_spectral_pool",
    "bench_sweep",
]


def _tree(name: str) -> ast.Module:
    return ast.parse((BENCH / f"{name}.py").read_text(encoding="utf-8"))


def _imports(tree: ast.Module) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def test_is_a_package_listing_every_script():
    init = BENCH / "__init__.py"
    assert init.is_file()
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    assert "python -m benchmarks." in doc
    missing = [s for s in SCRIPTS if s not in doc]
    assert not missing, f"benchmarks/__init__.py's docstring does not list {missing}"


def test_timing_list_is_every_bench_script():
    assert sorted(TIMING) == [s for s in SCRIPTS if s.startswith("bench_")]


@pytest.mark.parametrize("name", ["__init__", "_util", *SCRIPTS])
def test_parses_and_does_not_import_tests(name):
    tree = _tree(name)
    bad = sorted(m for m in _imports(tree) if m == "tests" or m.startswith("tests."))
    assert not bad, f"benchmarks/{name}.py imports {bad}: benchmarks must not import tests"
    src = (BENCH / f"{name}.py").read_text(encoding="utf-8")
    assert "sys.path.insert(0, str(Path(__file__)" not in src, "no sys.path shims: run as python -m benchmarks.x"


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_uses_util(name):
    assert "benchmarks._util" in _imports(_tree(name)), f"{name} does not import benchmarks._util"


@pytest.mark.parametrize("name", TIMING)
def test_timing_script_uses_the_harness(name):
    src = (BENCH / f"{name}.py").read_text(encoding="utf-8")
    for call in ("_util.print_environment(", "_util.print_ratios(", "_util.parse_args("):
        assert call in src, f"{name} does not call {call[:-1]}"
    timers = ("_util.bench(", "_util.gemm_floor(", "_util.sort_floor(", "_util.read_floor(")
    assert any(t in src for t in timers), f"{name} times nothing through _util"
    assert "--small" in (ast.get_docstring(_tree(name)) or ""), f"{name}'s docstring does not describe --small"


def test_help_of_every_script():
    """``python -m benchmarks.<name> --help`` for each, in one subprocess (runpy.run_module is what -m runs)."""
    code = (
        "import contextlib, io, runpy, sys\n"
        "bad = []\n"
        f"for name in {SCRIPTS!r}:\n"
        "    sys.argv = [name, '--help']\n"
        "    out = io.StringIO()\n"
        "    try:\n"
        "        with contextlib.redirect_stdout(out):\n"
        "            runpy.run_module('benchmarks.' + name, run_name='__main__', alter_sys=True)\n"
        "        code = None\n"
        "    except SystemExit as e:\n"
        "        code = e.code\n"
        "    if code not in (0, None) or 'usage:' not in out.getvalue():\n"
        "        bad.append((name, code, out.getvalue()[:200]))\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).strip(os.pathsep)
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def test_report_scaling_small_follows_the_conventions(capsys):
    """``bench_report_scaling --small`` (in this process, seconds): the environment header, a warm-up,
    ``--repeats`` rounds over the grid, the slope against parameters × tokens, each metric against its
    floor, the memory estimate against the measured peak, the load average at the end."""
    import math
    import re

    from benchmarks import bench_report_scaling as brs

    assert brs.main(["--small", "--repeats", "3"]) == 0
    out = capsys.readouterr().out
    for needle in ("date (UTC)", "torch        : BLAS", "BLAS env", "load average at start", "warm-up run"):
        assert needle in out, f"missing {needle!r}"
    rounds = re.findall(r"^  round (\d) ", out, flags=re.M)
    assert sorted(rounds) == ["1", "1", "2", "2", "3", "3"], rounds  # 2 grid points x 3 rounds
    assert "status partial" not in out, "a metric failed in --small"
    slope = re.search(r"log-log slope of the best report wall time against parameters × tokens: (\S+) over 2", out)
    assert slope and math.isfinite(float(slope.group(1)))
    for metric in ("agop", "pga"):
        assert len(re.findall(rf"^{metric}: ours / .*: best [0-9.]+, median [0-9.]+", out, flags=re.M)) == 2
    assert len(re.findall(r"^report: ours / the sum of the floors", out, flags=re.M)) == 2
    ratios = [float(x) for x in re.findall(r"measured / estimate ([0-9.]+)", out)]
    # --small runs in this process, so its "peak" is the test process's high-water mark (1–2 GiB after
    # the rest of the suite) against a tiny model's estimate: only its presence and sign are checked here
    assert len(ratios) == 2 and all(r > 0 for r in ratios), ratios
    assert "load average at end" in out
