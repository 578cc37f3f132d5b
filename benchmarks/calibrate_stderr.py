"""Calibration: does every sampled report metric's standard error cover a fresh draw of text?

Runs the report's sampled metrics on SmolLM2-135M over K disjoint samples of pydoc text and
compares, per metric and hook, the spread of the estimates across the samples with the standard
errors the rows report:

* ε of activations (``epsilon_activations``), the spectral rows (RankMe, von Neumann rank, both
  α-ReQ fits, isotropy, condition number), TwoNN and GRIDE at every n1 (``intrinsic_dimension``),
  PGA ρ_read and z at CCR 0 / 1 / 5 (``pga``), AGOP AOFE / AOFE ratio / trace (``agop``): every
  row with a numeric ``stderr`` in its extras, whatever the metric (so a metric that gains or
  changes an error is calibrated without editing this file); the other numeric ``stderr_*``
  extras (``stderr_points``, ``stderr_null``, ``stderr_text``, ``stderr_probes``, ...) with
  ``--components``;
* per metric (PGA per CCR, GRIDE per n1), over hooks: the **median ratio** and the **p90 ratio**
  of ``sd across samples / rms stderr`` (sample sd with ddof 1; rms = √mean(se²) over the
  samples), ≈ 1 when calibrated (with K = 6 a calibrated error gives a median near 0.93: the
  median of √(χ²₅/5)); and the **pairwise 95 % coverage**: the fraction of sample pairs i < j,
  pooled over hooks, with |v_i − v_j| ≤ 1.96·√(se_i² + se_j²) (0.95 when calibrated); and the
  **pooled ratio** √(mean_h var_h / ms_h) over the hooks (var_h the variance over samples, ms_h
  the mean se²: the rms of the hooks' ratios, a smooth summary that no single hook's scale
  dominates) **± its standard error**, a delete-one-sample jackknife over the
  samples (each sample is deleted from every hook at once: the hooks of one sample share its
  text, so the hooks are not independent evidence and the samples are the unit). That ± is how
  far a factor read off this table can be trusted (K = 6: about ±30 %).

Not errors: ``stderr_inflation`` (a calibrated factor, e.g. GRIDE's) is stored but never
calibrated (``NOT_ERRORS``).

Disjoint samples: ``tg.corpus.tokens`` cuts the text into non-overlapping chunks and picks
``n_seqs`` of them with ``randperm(n_chunks, seed)[:n_seqs]``. Sample k here takes entries
``[k·n_seqs, (k+1)·n_seqs)`` of that same permutation (``--seed``, default 0), so the samples
share no chunk, sample 0 is exactly ``tg.corpus.tokens(seed=--seed)`` (checked at run time), and
adding samples never changes the earlier ones. Each sample also draws the metrics' own randomness
afresh (``seed=k`` for every metric taking ``seed``: positions, null subspaces, probes), as a
user's rerun would.

Sizes: the report's (``report_options``: 8 × 128 tokens, PGA 30 nulls and 1,024 points at CCR
0/1/5, ID 1,024 points, ε 2,048 points, AGOP 16 probes). Hooks: ``--hooks 7`` (default) runs
layers 1, 5, 10, 15, 20, 25, 29 (``blocks.L.hook_resid_post``; AGOP at ``blocks.L.hook_resid_pre``,
the hooks its report rows use); ``--hooks all`` each metric's own default hooks (31 for ID, 30
for the others); ``--layers`` any list. A sample took 40–116 s at 7 hooks with every metric and
5–22 s for ID alone at 31 hooks on 2 cores (2026-12-04, load average 2.7–4.6).

Writing and resuming: each finished sample is appended to ``--out``/samples.jsonl at once (one
JSON line, flushed and fsynced: rows with value and every ``stderr*`` extra, the time, the load
average). A rerun with the same ``--out`` skips the samples already there and computes the rest;
a line of other settings (model, sizes, hooks, metrics, options) is refused with the difference
named: use another ``--out``. ``--lock FILE`` takes an exclusive ``flock`` on FILE around each
sample (the first: with the model's load), so other heavy runs interleave between samples; or
run it under ``flock FILE`` with ``--max-new N`` (N samples per hold) in a loop.
The table is printed and written to ``--out``/table.md.

Usage:
    python -m benchmarks.calibrate_stderr --out DIR [--samples 6] [--metrics pga agop ...]
        [--hooks 7|all | --layers 1 5 10] [--components] [--lock FILE] [--max-new N] [--small]

A calibration, not a timing benchmark. ``--small``: a tiny random byte-level model instead of
SmolLM2 (the report's fast sizes, 8 × 48 tokens, every layer): checks the script, not the model.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import _util

#: The report's sampled metrics (registry names), in the order they run.
METRICS = ("epsilon_activations", "spectral", "intrinsic_dimension", "pga", "agop")
#: The 7-hook subset (layers) of the default ``--hooks 7``.
SUBSET_LAYERS = (1, 5, 10, 15, 20, 25, 29)
#: The hook kind each metric's report rows use at a layer (others: resid_post).
HOOK_KIND = {"agop": "pre"}
#: Extras that split one metric's rows into several calibrated quantities.
SPLIT_BY = ("ccr", "n1")
#: z of the pairwise coverage (two-sided 95 %).
Z95 = 1.959963984540054
#: ``stderr*`` extras that are not standard errors (factors): stored, never calibrated.
NOT_ERRORS = ("stderr_inflation",)
SAMPLES_FILE = "samples.jsonl"


# ----------------------------------------------------------------------------- statistics (pure)
@dataclass(frozen=True)
class Calibration:
    """How one metric's standard errors compare with its spread over independent samples.

    Attributes:
        n_hooks: hooks with at least two samples of finite value and stderr.
        n_samples: the most samples any hook had.
        median_ratio: median over hooks of sd(values, ddof=1) / √mean(se²) (≈ 1 calibrated;
            below 1: the errors are too large, above: too small).
        p90_ratio: the 90th percentile (linear interpolation) of the same ratios.
        coverage: of all sample pairs i < j, pooled over hooks, the fraction with
            |v_i − v_j| ≤ z·√(se_i² + se_j²) (z = 1.96: 0.95 when calibrated).
        n_pairs: the pairs counted.
        pooled_ratio: √(mean_h var_h / ms_h) over the hooks with two or more samples (var_h: the
            variance over the samples, ddof 1; ms_h: the mean se²); NaN when every se is 0.
        pooled_ratio_se: the delete-one-sample jackknife standard error of ``pooled_ratio`` (the
            i-th observation of every hook deleted at once); NaN with fewer than three samples.
    """

    n_hooks: int
    n_samples: int
    median_ratio: float
    p90_ratio: float
    coverage: float
    n_pairs: int
    pooled_ratio: float = math.nan
    pooled_ratio_se: float = math.nan


def _finite(pairs: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    return [(float(v), float(s)) for v, s in pairs if math.isfinite(float(v)) and math.isfinite(float(s))]


def spread_ratio(values: Sequence[float], stderrs: Sequence[float]) -> float:
    """sd(values, ddof=1) / √mean(stderrs²) over the samples with finite value and stderr (NaN
    with fewer than two, or when every stderr is 0)."""
    import numpy as np

    ok = _finite(zip(values, stderrs))
    if len(ok) < 2:
        return math.nan
    v, s = np.array(ok).T
    rms = math.sqrt(float(np.mean(s**2)))
    return float(np.std(v, ddof=1)) / rms if rms > 0 else math.nan


def pair_coverage(values: Sequence[float], stderrs: Sequence[float], z: float = Z95) -> tuple[int, int]:
    """(covered, pairs): of the pairs i < j of samples with finite value and stderr, how many
    have |v_i − v_j| ≤ z·√(se_i² + se_j²)."""
    import numpy as np

    ok = _finite(zip(values, stderrs))
    if len(ok) < 2:
        return 0, 0
    v, s = np.array(ok).T
    i, j = np.triu_indices(len(v), k=1)
    covered = np.abs(v[i] - v[j]) <= z * np.sqrt(s[i] ** 2 + s[j] ** 2)
    return int(covered.sum()), int(covered.size)


def pooled_ratio(by_hook: Mapping[str, Sequence[tuple[float, float]]]) -> float:
    """√(mean_h var_h / ms_h), the rms of the hooks' ratios, over the hooks with two or more finite
    (value, stderr) samples and some se > 0 (var_h with ddof 1, ms_h = mean se²); NaN without such a hook."""
    import numpy as np

    sq = []
    for obs in by_hook.values():
        ok = _finite(obs)
        if len(ok) < 2:
            continue
        v, s = np.array(ok).T
        ms = float(np.mean(s**2))
        if ms > 0:
            sq.append(float(np.var(v, ddof=1)) / ms)
    return math.sqrt(float(np.mean(sq))) if sq else math.nan


def pooled_ratio_jackknife(by_hook: Mapping[str, Sequence[tuple[float, float]]]) -> float:
    """Delete-one-sample jackknife standard error of [`pooled_ratio`][benchmarks.calibrate_stderr.pooled_ratio]:
    replicate i deletes the i-th observation of every hook (the hooks of one sample share its text);
    ``√((K−1)/K Σ_i (r_i − r̄)²)`` over the K replicates that are finite; NaN with K < 3."""
    import numpy as np

    K = max((len(obs) for obs in by_hook.values()), default=0)
    if K < 3:
        return math.nan
    reps = [pooled_ratio({h: [o for j, o in enumerate(obs) if j != i] for h, obs in by_hook.items()}) for i in range(K)]
    r = np.array([x for x in reps if math.isfinite(x)])
    if r.size < 3:
        return math.nan
    return float(math.sqrt((r.size - 1) / r.size * float(((r - r.mean()) ** 2).sum())))


def calibration(by_hook: Mapping[str, Sequence[tuple[float, float]]], z: float = Z95) -> Calibration:
    """The [`Calibration`][benchmarks.calibrate_stderr.Calibration] of one metric from
    ``{hook: [(value, stderr) per sample]}``."""
    import numpy as np

    ratios, covered, pairs, most = [], 0, 0, 0
    for obs in by_hook.values():
        ok = _finite(obs)
        r = spread_ratio([v for v, _ in ok], [s for _, s in ok])
        if math.isnan(r):
            continue
        ratios.append(r)
        c, p = pair_coverage([v for v, _ in ok], [s for _, s in ok], z)
        covered, pairs, most = covered + c, pairs + p, max(most, len(ok))
    if not ratios:
        return Calibration(0, most, math.nan, math.nan, math.nan, 0)
    return Calibration(
        n_hooks=len(ratios),
        n_samples=most,
        median_ratio=float(np.median(ratios)),
        p90_ratio=float(np.percentile(ratios, 90)),
        coverage=covered / pairs,
        n_pairs=pairs,
        pooled_ratio=pooled_ratio(by_hook),
        pooled_ratio_se=pooled_ratio_jackknife(by_hook),
    )


def metric_label(row: Mapping[str, Any]) -> str:
    """``metric`` plus the extras that split it (``pga.z ccr=1``, ``id.gride n1=4``)."""
    extras = row.get("extras") or {}
    parts = [f"{k}={extras[k]}" for k in SPLIT_BY if k in extras]
    return " ".join([row["metric"], *parts])


def collect(samples: Iterable[Mapping[str, Any]], field: str = "stderr") -> dict[str, dict[str, list]]:
    """``{label: {hook: [(value, se) per sample]}}`` from stored samples, for the extra ``field``."""
    out: dict[str, dict[str, list]] = {}
    for s in samples:
        for row in s["rows"]:
            se = row["extras"].get(field)
            if se is None:
                continue
            out.setdefault(metric_label(row), {}).setdefault(str(row.get("hook")), []).append((row["value"], se))
    return out


def stderr_fields(samples: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every ``stderr*`` extra present in the stored rows: ``stderr`` first, then sorted."""
    names = {
        k
        for s in samples
        for row in s["rows"]
        for k, v in row["extras"].items()
        if k.startswith("stderr") and k not in NOT_ERRORS and isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    return sorted(names, key=lambda k: (k != "stderr", k))


def table(samples: Sequence[Mapping[str, Any]], *, components: bool = False) -> str:
    """The markdown calibration table of stored samples (one line per metric; with
    ``components`` also one per other ``stderr*`` extra, named in brackets)."""
    fields = stderr_fields(samples) if components else ["stderr"]
    lines = [
        "| metric | error | hooks | samples | median ratio | p90 ratio | pooled ratio ± se | pairs | coverage (pairwise 95 %) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for field in fields:
        for label, by_hook in sorted(collect(samples, field).items(), key=lambda kv: _order(kv[0])):
            c = calibration(by_hook)
            if c.n_hooks == 0:
                continue
            lines.append(
                f"| {label} | `{field}` | {c.n_hooks} | {c.n_samples} | {c.median_ratio:.2f} | {c.p90_ratio:.2f} | "
                f"{c.pooled_ratio:.2f} ± {c.pooled_ratio_se:.2f} | {c.n_pairs} | {100 * c.coverage:.0f} % |"
            )
    return "\n".join(lines)


def _order(label: str) -> tuple:
    name, *rest = label.split(" ")
    family = name.split(".")[0]
    rank = {"epsilon_activations": 0, "spectral": 1, "id": 2, "pga": 3, "agop": 4}.get(family, 9)
    return (rank, name, [int(p.split("=")[1]) if p.split("=")[1].lstrip("-").isdigit() else p for p in rest])


# ----------------------------------------------------------------------------- samples of text
def n_chunks(model: Any, seq_len: int, source: str = "pydoc") -> int:
    """How many non-overlapping chunks ``tg.corpus.tokens`` cuts ``source`` into at ``seq_len``."""
    import tl_geometry as tg

    tok = model.tokenizer
    docs = [t for t in tg.corpus.texts(source) if t.strip()]
    text = "\n\n".join(docs)
    try:
        ids = tok.encode(text, add_special_tokens=False)
    except TypeError:
        ids = tok.encode(text)
    bos = getattr(tok, "bos_token_id", None)
    prepend = bool(getattr(model.cfg, "default_prepend_bos", True)) and bos is not None
    return len(ids) // (seq_len - 1 if prepend else seq_len)


def disjoint_samples(model: Any, n_samples: int, n_seqs: int, seq_len: int, seed: int = 0) -> list[Any]:
    """``n_samples`` (n_seqs, seq_len) batches of pydoc text sharing no chunk (module docstring)."""
    import torch

    import tl_geometry as tg

    n = n_chunks(model, seq_len)
    if n_samples * n_seqs > n:
        raise ValueError(f"{n_samples} samples of {n_seqs} sequences need {n_samples * n_seqs} chunks; pydoc has {n}")
    every = tg.corpus.tokens(model, "pydoc", n_seqs=n, seq_len=seq_len, seed=seed)  # all chunks, in order
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    out = [every[perm[k * n_seqs : (k + 1) * n_seqs].sort().values] for k in range(n_samples)]
    if not torch.equal(out[0], tg.corpus.tokens(model, "pydoc", n_seqs=n_seqs, seq_len=seq_len, seed=seed)):
        raise RuntimeError("sample 0 differs from tg.corpus.tokens(seed=...): the chunking here is out of date")
    return out


# ----------------------------------------------------------------------------- running and storing
def hooks_for(model: Any, metric: str, layers: Sequence[int] | None) -> list[str] | None:
    """The hooks ``metric`` runs at ``layers`` (None: the metric's own default hooks)."""
    if layers is None:
        return None
    kind = HOOK_KIND.get(metric, "post")
    return [f"blocks.{l}.hook_resid_{kind}" for l in layers if 0 <= l < model.cfg.n_layers]


def sample_options(metrics: Sequence[str], base: Mapping[str, Mapping[str, Any]], k: int) -> dict[str, dict]:
    """The report's options of ``metrics`` with ``seed=k`` for every metric that takes a seed."""
    from tl_geometry.runs.request import takes_option

    out = {}
    for m in metrics:
        opts = dict(base.get(m, {}))
        if takes_option(m, "seed"):
            opts["seed"] = k
        out[m] = opts
    return out


def stored_row(row: Any) -> dict:
    """The part of a report row the calibration keeps: metric, hook, value, the splitting extras,
    every numeric ``stderr*`` extra and ``stderr_method``."""
    ex = row.extras
    keep: dict[str, Any] = {k: ex[k] for k in SPLIT_BY if k in ex}
    for k, v in ex.items():
        if k.startswith("stderr") and isinstance(v, (int, float)) and not isinstance(v, bool):
            keep[k] = float(v)
    if "stderr_method" in ex:
        keep["stderr_method"] = str(ex["stderr_method"])
    return {"metric": row.metric, "hook": row.hook, "value": float(row.value), "extras": keep}


def run_sample(model: Any, tokens: Any, k: int, metrics: Sequence[str], layers, base_options) -> tuple[list, dict]:
    """Rows and seconds per call of one sample: the activation metrics in one shared pass, AGOP
    (its own hooks) apart."""
    import tl_geometry as tg

    groups: dict[tuple, list[str]] = {}
    for m in metrics:
        hooks = hooks_for(model, m, layers)
        groups.setdefault((m == "agop", tuple(hooks) if hooks is not None else None), []).append(m)
    rows, seconds = [], {}
    for (_, hooks), names in groups.items():
        t0 = time.perf_counter()
        rep = tg.analyze(
            model,
            tokens,
            metrics=names,
            hooks=list(hooks) if hooks is not None else None,
            options=sample_options(names, base_options, k),
            progress=False,
        )
        seconds["+".join(names)] = round(time.perf_counter() - t0, 2)
        if rep.provenance.get("status", "complete") != "complete" or rep.provenance.get("errors"):
            raise RuntimeError(f"sample {k}: {names} failed: {rep.provenance.get('errors')}")
        rows.extend(stored_row(r) for r in rep.rows if "stderr" in r.extras)
    return rows, seconds


def read_samples(path: Path) -> list[dict]:
    """The stored samples (a torn last line, from a killed run, is ignored: that sample reruns)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def append_sample(path: Path, record: Mapping[str, Any]) -> None:
    """Append one sample as one JSON line, flushed and fsynced (a torn line stays alone at the end)."""
    data = path.read_bytes() if path.exists() else b""
    with open(path, "ab") as fh:
        if data and not data.endswith(b"\n"):
            fh.write(b"\n")
        fh.write((json.dumps(record, allow_nan=True) + "\n").encode())
        fh.flush()
        os.fsync(fh.fileno())


def check_settings(samples: Sequence[Mapping[str, Any]], settings: Mapping[str, Any], out: Path) -> None:
    for s in samples:
        if s["settings"] != settings:
            diff = sorted(k for k in set(s["settings"]) | set(settings) if s["settings"].get(k) != settings.get(k))
            raise SystemExit(
                f"{out / SAMPLES_FILE} holds sample {s['sample']} of other settings ({', '.join(diff)}: "
                f"stored {[s['settings'].get(k) for k in diff]}, asked {[settings.get(k) for k in diff]}); "
                "pass another --out"
            )


@contextlib.contextmanager
def locked(path: str | None) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` while the block runs (nothing when None)."""
    if path is None:
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def code_version() -> str:
    try:
        head = subprocess.run(["git", "-C", str(_util.ROOT), "describe", "--always", "--dirty"], capture_output=True)
        return head.stdout.decode().strip() or "unknown"
    except OSError:
        return "unknown"


def main(argv=None) -> int:
    ap = _util.make_parser(__doc__, repeats=False, small="a tiny random byte-level model (checks the script)")
    ap.add_argument("--out", type=Path, required=True, help="directory of samples.jsonl and table.md")
    ap.add_argument("--samples", type=int, default=6, help="samples K (≥ 2): samples 0 … K-1")
    ap.add_argument("--metrics", nargs="+", choices=METRICS, default=list(METRICS))
    ap.add_argument("--hooks", choices=["7", "all"], default="7", help="layers 1,5,…,29 or every default hook")
    ap.add_argument("--layers", type=int, nargs="+", default=None, help="these layers instead of --hooks")
    ap.add_argument("--n-seqs", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0, help="the permutation of text chunks")
    ap.add_argument("--components", action="store_true", help="also calibrate every other stderr* extra")
    ap.add_argument("--lock", default=None, help="flock this file around each sample")
    ap.add_argument("--max-new", type=int, default=None, help="compute at most this many new samples, then stop")
    ap.add_argument("--label", default="", help="free text stored with the settings (e.g. the code's name)")
    args = _util.parse_args(ap, argv)
    if args.samples < 2:
        ap.error("--samples must be >= 2 (a spread needs two samples)")
    from tl_geometry.runs.request import report_options

    layers = args.layers if args.layers is not None else (None if args.hooks == "all" else list(SUBSET_LAYERS))
    n_seqs, seq_len = args.n_seqs, args.seq_len
    if args.small:
        layers, seq_len = None, 48
    base = report_options(fast=args.small)
    settings = {
        "model": "tiny-byte" if args.small else "smollm2-135m",
        "corpus": "pydoc",
        "n_seqs": n_seqs,
        "seq_len": seq_len,
        "seed": args.seed,
        "layers": layers,
        "metrics": list(args.metrics),
        "options": {m: base.get(m, {}) for m in args.metrics},
        "label": args.label,
    }
    settings = json.loads(json.dumps(settings))  # as stored: tuples become lists
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / SAMPLES_FILE
    samples = read_samples(path)
    check_settings(samples, settings, args.out)
    done = {s["sample"] for s in samples}
    todo = [k for k in range(args.samples) if k not in done][: args.max_new]
    print(f"calibrate_stderr: {len(done)} samples stored in {path}; computing {todo or 'none'}", flush=True)
    model, batches = None, None
    for k in todo:
        with locked(args.lock):
            if model is None:
                model = _util.byte_model() if args.small else _util.load_smollm2(quiet=True)
                batches = disjoint_samples(model, args.samples, n_seqs, seq_len, args.seed)
            assert batches is not None
            load0, t0 = _util.load_average(), time.perf_counter()
            rows, seconds = run_sample(model, batches[k], k, args.metrics, layers, base)
            record = {
                "sample": k,
                "settings": settings,
                "rows": rows,
                "seconds": seconds,
                "wall_s": round(time.perf_counter() - t0, 2),
                "load_average": [load0, _util.load_average()],
                "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                "code": code_version(),
            }
            append_sample(path, record)
        print(f"sample {k}: {record['wall_s']} s {seconds}; load average {record['load_average'][1]}", flush=True)
    samples = sorted((s for s in read_samples(path) if s["sample"] < args.samples), key=lambda s: s["sample"])
    codes = sorted({s.get("code", "unknown") for s in samples})
    head = (
        f"{len(samples)} disjoint samples of {n_seqs} × {seq_len} pydoc tokens; "
        f"layers {layers if layers is not None else 'every default hook'}; code {', '.join(codes)}"
        + (f" ({args.label})" if args.label else "")
        + "; "
        f"load average {samples[0]['load_average'][0] if samples else '-'} … {samples[-1]['load_average'][1] if samples else '-'}"
    )
    text = head + "\n\n" + table(samples, components=args.components)
    print("\n" + text)
    (args.out / "table.md").write_text(text + "\n", encoding="utf-8")
    if len(codes) > 1:
        print(f"\nnote: the samples come from {len(codes)} versions of the code ({', '.join(codes)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
