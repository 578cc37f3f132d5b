"""Benchmark: the report's time and peak memory against parameters × tokens, on scaled random models.

    python -m benchmarks.bench_report_scaling [--family smollm2] [--sizes 3e7 1e8] [--tokens 2x64 4x64]
                                              [--full] [--repeats 3] [--small]

Each grid point (size × text batch) is ``run_report`` on ``tg.models.scaled(family, size)`` (a
random-init model of that family, built from a config: no download) over ``n_seqs × seq_len``
tokens of real text (``pydoc``; the scaled models carry no tokenizer, so the text goes in through
``WordTokenizer``, words hashed to ids — our choice: on random weights the ids do not change the
work, only how often tokens repeat), ``figures=False``, the report's ``--fast`` options unless ``--full``.

* ours: the report's wall time (the model passed built; its build is timed apart), one fresh
  process per run (``_util.run_isolated_args``: its peak RSS, ``ru_maxrss``, is the run's own);
  each metric's time from the report's provenance (``timings_s``);
* reference: none simpler exists for a whole report; the scaling itself is the check — the
  log-log slope of the best wall time against parameters × tokens (1: time grows as the work);
* floors (in the last run of each grid point, after its report, which warmed the same passes on
  the same model: ``--repeats`` rounds, best and median; the passes under the library's own
  thread choice for dense work, ``runtime.threads.kernel``): for AGOP the passes it cannot
  avoid — one forward pass over the text with the gradient kept, then one backward pass per
  probe from a random vector at the unembedding's input (``unembed.hook_in``, as its readout
  probes) to every ``hook_resid_pre``, per batch of ``AGOP_BATCH`` (8) sequences; for PGA one
  ``torch.sort`` of the N(N−1)/2 distances per null subspace and for the readout
  (``_util.sort_floor``, × (n_null + 1) per hook and CCR, read from the report's rows); for the
  capture one forward pass without the gradient; their sum is the report's floor.
* memory: the report's own estimate (``runs.memory.estimate``, ``provenance["memory"]``) against
  the measured peak of the run's process. A grid point whose estimate exceeds the available memory
  is not run, and its estimate is printed.

Rounds: one warm-up run (a fresh process warms nothing but the page cache of the libraries: a
``WARMUP_PARAMS`` model and the ``shape`` metric; ``--small``: the first grid point), then
``--repeats`` (≥ 3) rounds over the grid in rotating order, best and median. ``--small``: a
1-layer SmolLM2-family model with a 300-byte vocabulary at 0.6 M and 2 M parameters, 4 × 32
tokens, the metrics with a floor (agop, pga) unless ``--metrics``, every run in this process
(seconds; peak RSS is this process's, the estimate is still printed).

The default (30 M and 100 M parameters at 2 × 64 and 4 × 64 tokens, ``--fast``) takes a few
minutes on 2 cores; ``--sizes 1e8 5e8 1e9`` are SmolLM2's 0.1 / 0.5 / 1 B scaled models.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from typing import Any

from benchmarks import _util

AGOP_BATCH = 8
"""Sequences per forward pass of AGOP (``agop(batch_size=8)``, the report's default), in its floor."""

WARMUP_PARAMS = {"smollm2": 3e7, "gemma-3": 7e7}
"""The warm-up run's model per family (about its smallest; the ``shape`` metric only): a fresh
process warms nothing but the page cache of the libraries, which any model warms."""
SMALL_KW = {"vocab_size": 300, "n_layers": 1}
SMALL_SIZES = (6e5, 2e6)
SMALL_TOKENS = ((4, 32),)  # 124 positions: PGA needs k + 1 = 101
SMALL_METRICS = ["agop", "pga"]

WORKER = "from benchmarks.bench_report_scaling import _worker_main; _worker_main()"


def _parse_tokens(spec: str) -> tuple[int, int]:
    try:
        a, b = spec.lower().split("x")
        n, s = int(a), int(b)
    except ValueError:
        raise SystemExit(f"--tokens: each batch is N_SEQSxSEQ_LEN like 4x64, got {spec!r}") from None
    if n < 1 or s < 2:
        raise SystemExit(f"--tokens: need N_SEQS >= 1 and SEQ_LEN >= 2, got {spec!r}")
    return n, s


class WordTokenizer:
    """Words, runs of spaces and single symbols, each hashed (CRC-32) to an id in 1 … d_vocab − 1 (0
    is BOS): text for a random-init model without its tokenizer. Our choice over bytes: a word-level
    split repeats tokens about as often as the family's BPE does, whereas ~60 distinct bytes make
    most embeddings exact duplicates (``blocks.0.hook_resid_pre`` has no position), and the
    intrinsic dimension refuses such a point cloud (more than half the neighbour ratios tied)."""

    bos_token_id = 0
    padding_side = "right"

    def __init__(self, d_vocab: int):
        self.d_vocab = int(d_vocab)

    def encode(self, text, add_special_tokens=False):
        import re
        import zlib

        pieces = re.findall(r"\w+|\s+|[^\w\s]", text)
        return [1 + zlib.crc32(p.encode("utf-8")) % (self.d_vocab - 1) for p in pieces]


def _model(a: dict):
    import tl_geometry as tg

    model = tg.models.scaled(a["family"], a["n_params"], **a["kw"])
    model.tokenizer = WordTokenizer(model.cfg.d_vocab)  # TL accepts only transformers tokenizers at build
    return model


def _report(a: dict) -> dict:
    """One report on a freshly built scaled model (in this process)."""
    import torch

    from tl_geometry.runs.memory import peak_rss_bytes
    from tl_geometry.runs.pipeline import run_report

    t0 = time.perf_counter()
    model = _model(a)
    build = time.perf_counter() - t0
    w0, c0 = time.perf_counter(), time.process_time()
    with torch.inference_mode(False):
        rep = run_report(
            model,
            n_seqs=a["n_seqs"],
            seq_len=a["seq_len"],
            fast=a["fast"],
            metrics=a.get("metrics"),
            figures=False,
            progress=False,
        )
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    pga = [
        [int(r.extras["n_pairs"]), int(r.extras["n_null"])]
        for r in rep.rows
        if r.metric == "pga.z" and "n_pairs" in (r.extras or {})
    ]
    probes = [int(r.extras["n_probes"]) for r in rep.rows if r.metric == "agop.aofe" and "n_probes" in (r.extras or {})]
    prov = rep.provenance
    peak = peak_rss_bytes()  # the report's (the floors below run after it)
    floors = _floors(model, a, probes[0] if probes else 4, a["floors"]) if a.get("floors") else None
    return {
        "floors": floors,
        "wall": wall,
        "cpu": cpu,
        "build": build,
        "n_params": sum(p.numel() for p in model.parameters()),
        "timings_s": prov.get("timings_s", {}),
        "memory": prov.get("memory", {}),
        "peak": peak,
        "status": prov.get("status"),
        "errors": prov.get("errors", {}),
        "pga": pga,
        "n_probes": probes[0] if probes else None,
    }


def _floors(model, a: dict, n_probes: int, repeats: int) -> dict:
    """AGOP's passes and one forward pass on the model the report just ran on (which warmed them:
    no further warm-up), timed by ``_util.bench``."""
    import torch

    for p in model.parameters():
        p.requires_grad_(False)
    tokens = _util.pydoc_tokens(model, a["n_seqs"], a["seq_len"])
    L = model.cfg.n_layers

    from tl_geometry.runtime import threads

    def forward():
        with torch.no_grad(), threads.kernel("dense"):  # the threads the library's passes use
            model(tokens)

    acts: dict[str, Any] = {}

    def keep(x, hook):
        if hook.name == "blocks.0.hook_resid_pre":  # the graph starts here; later hooks are in it
            x = x.detach().requires_grad_(True)
        acts[hook.name] = x
        return x

    def agop_passes():
        g = torch.Generator().manual_seed(0)
        for b in range(0, tokens.shape[0], AGOP_BATCH):
            acts.clear()
            names = [f"blocks.{l}.hook_resid_pre" for l in range(L)] + ["unembed.hook_in"]
            with torch.enable_grad(), threads.kernel("dense"):
                model.run_with_hooks(tokens[b : b + AGOP_BATCH], fwd_hooks=[(n, keep) for n in names])
                out, ins = acts["unembed.hook_in"], [acts[n] for n in names[:-1]]
                for i in range(n_probes):
                    u = torch.randn(out.shape, generator=g)
                    torch.autograd.grad(out, ins, grad_outputs=u, retain_graph=i < n_probes - 1)

    res = _util.bench({"forward": forward, "agop passes": agop_passes}, repeats=repeats, warmup=0)
    return {k: {"times": t.times, "cpu": t.cpu} for k, t in res.items()}


def _worker_main() -> None:
    a = json.loads(sys.argv[1])
    print(json.dumps(_report(a)))


def _run(a: dict, in_process: bool) -> dict:
    if in_process:
        return _report(a)
    return _util.run_isolated_args(_util_code(), [json.dumps(a)], timeout=1800)


def _util_code() -> str:
    return "import warnings; warnings.filterwarnings('ignore'); " + WORKER


def _estimate(a: dict):
    """The report's memory estimate for this grid point, from the scaled config (nothing built)."""
    import tl_geometry as tg
    from tl_geometry.models import ModelShape
    from tl_geometry.runs.memory import estimate

    sc = tg.models.scaled_config(a["family"], a["n_params"], **a["kw"])
    shape = ModelShape(sc.n_layers, sc.d_model, sc.n_params, 2048, "model", 0, sc.d_vocab, sc.d_mlp)
    return sc, estimate(shape, n_seqs=a["n_seqs"], seq_len=a["seq_len"], metrics=a.get("metrics"))


def _timing(name: str, xs: list[float], cpu: list[float] | None = None) -> _util.Timing:
    return _util.Timing(name, list(xs), list(cpu if cpu is not None else xs))


def _slope(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares slope (and intercept) of log(time) against log(work)."""
    xs = [math.log(w) for w, _ in points]
    ys = [math.log(t) for _, t in points]
    if len(set(xs)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return b, my - b * mx


def main(argv=None) -> int:
    ap = _util.make_parser(__doc__, small="a 1-layer model of 0.6 M and 2 M parameters, 4 × 32 tokens, in this process")
    ap.add_argument("--family", default="smollm2", choices=["smollm2", "gemma-3"])
    ap.add_argument("--sizes", nargs="+", type=float, default=[3e7, 1e8], help="target parameter counts")
    ap.add_argument("--tokens", nargs="+", default=["2x64", "4x64"], help="text batches, N_SEQSxSEQ_LEN")
    ap.add_argument("--full", action="store_true", help="the report's full options (default: its --fast ones)")
    ap.add_argument("--metrics", nargs="+", default=None, help="registry names (default: the whole report)")
    ap.add_argument("--json", default=None, help="also write every run's figures to this file")
    args = _util.parse_args(ap, argv)
    import psutil

    kw = SMALL_KW if args.small else {}
    sizes = SMALL_SIZES if args.small else tuple(args.sizes)
    batches = SMALL_TOKENS if args.small else tuple(_parse_tokens(t) for t in args.tokens)
    what = "tiny" if args.small else args.family
    where = "in this process" if args.small else "one fresh process each"
    _util.print_environment(f"report time and peak RSS against parameters × tokens ({what} scaled random models)")
    print(
        f"options: {'full' if args.full else '--fast'}; "
        f"metrics: {args.metrics or (SMALL_METRICS if args.small else 'the whole report')}; "
        f"runs: {where}\n"
    )

    grid: list[dict] = []
    for size in sizes:
        for n_seqs, seq_len in batches:
            a = {
                "family": args.family,
                "n_params": size,
                "kw": kw,
                "n_seqs": n_seqs,
                "seq_len": seq_len,
                "fast": not args.full,
                "metrics": args.metrics or (SMALL_METRICS if args.small else None),
            }
            sc, est = _estimate(a)
            avail = psutil.virtual_memory().available
            label = f"{sc.n_params / 1e6:,.1f} M params (L {sc.n_layers}, d {sc.d_model}), {n_seqs}×{seq_len} tokens"
            print(f"{label}: estimated peak {est.peak_gib:.2f} GiB, {avail / 2**30:.1f} GiB available", flush=True)
            if est.peak_bytes > avail:
                print(f"  not run: the estimate does not fit ({est.provenance()})")
                continue
            grid.append({"a": a, "label": label, "sc": sc, "est": est, "runs": []})
    if not grid:
        print("nothing fits: no run")
        _util.print_footer()
        return 0

    warm = (
        grid[0]["a"] if args.small else {**grid[0]["a"], "n_params": WARMUP_PARAMS[args.family], "metrics": ["shape"]}
    )
    t0 = time.perf_counter()
    _run(warm, args.small)  # the warm-up, untimed: the page cache of the libraries, the worker's start
    print(
        f"warm-up run ({warm['n_params']:.3g} parameters, metrics {warm['metrics']}): {time.perf_counter() - t0:.1f} s"
    )
    for r in range(args.repeats):
        for g in grid[r % len(grid) :] + grid[: r % len(grid)]:
            last = len(g["runs"]) == args.repeats - 1  # this point's last run also times the floors
            res = _run({**g["a"], "floors": args.repeats if last else 0}, args.small)
            g["runs"].append(res)
            bad = f" status {res['status']} errors {res['errors']}" if res["status"] != "complete" else ""
            print(
                f"  round {r + 1} {g['label']}: wall {res['wall']:.2f} s, cpu {res['cpu']:.2f} s, "
                f"build {res['build']:.1f} s, peak RSS {res['peak'] / 2**30:.2f} GiB "
                f"(load {_util.load_average().split(' (')[0]}){bad}; metrics (s): "
                + ", ".join(f"{k} {v:.1f}" for k, v in sorted(res["timings_s"].items(), key=lambda kv: -kv[1])[:5]),
                flush=True,
            )

    for g in grid:
        fl = next(x["floors"] for x in g["runs"] if x["floors"])
        g["floor"] = {k: _timing(k, v["times"], v["cpu"]) for k, v in fl.items()}
        pairs: dict[int, int] = {}
        for n_pairs, n_null in g["runs"][0]["pga"]:
            pairs[n_pairs] = pairs.get(n_pairs, 0) + n_null + 1
        st = [(_util.sort_floor(n, repeats=args.repeats), k) for n, k in pairs.items()]
        best, median = sum(t.best * k for t, k in st), sum(t.median * k for t, k in st)
        cpu = sum(t.cpu_best * k for t, k in st)
        g["pga_floor"] = _timing("pga sorts", [best, median], [cpu, cpu]) if st else None
        g["pga_sorts"] = sum(pairs.values())

    print(f"\n### report wall time per grid point ({where}; best CPU s: the report's process CPU)")
    rows = []
    for g in grid:
        t = _timing(g["label"], [x["wall"] for x in g["runs"]], [x["cpu"] for x in g["runs"]])
        g["t"] = t
        peak = min(x["peak"] for x in g["runs"]) / 2**30
        build = min(x["build"] for x in g["runs"])
        rows.append((g["label"], t, f"build {build:.1f} s; peak RSS {peak:.2f} GiB"))
    _util.print_table(rows)

    pts = [(g["sc"].n_params * g["a"]["n_seqs"] * g["a"]["seq_len"], g["t"].best) for g in grid]
    sl = _slope(pts)
    print(
        "\nlog-log slope of the best report wall time against parameters × tokens: "
        + (f"{sl[0]:.3f} over {len(pts)} points (1: time grows as the work)" if sl else "n/a (one work size)")
    )
    by_size: dict[int, list[tuple[float, float]]] = {}
    by_tokens: dict[int, list[tuple[float, float]]] = {}
    for g in grid:
        toks = g["a"]["n_seqs"] * g["a"]["seq_len"]
        by_size.setdefault(g["sc"].n_params, []).append((toks, g["t"].best))
        by_tokens.setdefault(toks, []).append((g["sc"].n_params, g["t"].best))
    for n, p in by_size.items():
        if (s := _slope(p)) is not None:
            print(f"  at {n / 1e6:,.1f} M params, slope against tokens: {s[0]:.3f}")
    for n, p in by_tokens.items():
        if (s := _slope(p)) is not None:
            print(f"  at {n} tokens, slope against parameters: {s[0]:.3f}")

    for g in grid:
        print(f"\n### {g['label']}: each metric against its floor")
        metric = {k: [x["timings_s"].get(k) for x in g["runs"]] for k in g["runs"][0]["timings_s"]}
        mt = {
            k: _timing(k, [v for v in vs if v is not None])
            for k, vs in metric.items()
            if all(v is not None for v in vs)
        }
        fl = g["floor"]
        floors = {
            "agop": (f"forward + {g['runs'][0]['n_probes']} backward passes", fl["agop passes"]),
            "pga": (f"{g['pga_sorts']} sorts (one per null and readout)", g["pga_floor"]),
            "capture": ("one forward pass", fl["forward"]),
        }
        floors = {k: v for k, v in floors.items() if k in mt and v[1] is not None}
        rows = [(f"metric {k}", t, "provenance timings_s (wall; CPU column: wall)") for k, t in sorted(mt.items())]
        _util.print_table(rows + [(f"floor {k}: {name}", t) for k, (name, t) in floors.items()])
        print("(a metric's time in provenance is wall time only: its ratios' CPU figure compares walls too)")
        for k, (name, t) in floors.items():
            print(f"{k}:", end=" ")
            _util.print_ratios(mt[k], None, _timing(t.name, t.times), floor_name=name)
        if floors:
            total = _timing(
                "floor",
                [sum(t.best for _, t in floors.values()), sum(t.median for _, t in floors.values())],
                [sum(t.cpu_best for _, t in floors.values())] * 2,
            )
            print("report:", end=" ")
            _util.print_ratios(g["t"], None, total, floor_name=f"the sum of the floors ({' + '.join(floors)})")
        m = g["runs"][0]["memory"]
        meas = [x["peak"] / 2**30 for x in g["runs"]]
        print(
            f"memory: estimate {g['est'].peak_gib:.2f} GiB (report's own: {m.get('peak_gib')} GiB; "
            f"weights {m.get('weights_gib')} GiB, working set {m.get('working_gib')} GiB), measured peak "
            f"{min(meas):.2f}–{max(meas):.2f} GiB → measured / estimate {min(meas) / g['est'].peak_gib:.2f}"
            + (" (this process's peak: --small runs in one process)" if args.small else "")
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(
                [
                    {"label": g["label"], "args": g["a"], "runs": g["runs"], "estimate": g["est"].provenance()}
                    for g in grid
                ],
                fh,
                indent=1,
            )
    _util.print_footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
