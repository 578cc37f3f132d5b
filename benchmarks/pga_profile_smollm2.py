"""Full Subspace PGA profile of SmolLM2-135M (30 layers) and of a randomly initialised copy.

Stage 1 loads SmolLM2-135M once, gathers one seeded sample of ``--max-points`` positions of
pydoc text at every ``blocks.{l}.hook_resid_post`` and saves it, then does the same for a model
of the same config with random weights (TL's initialisation, same processing flags), and frees
both. Stage 2 scores each (model, layer) at every CCR level with ``tg.pga_profile`` and appends
one record per (model, layer) to a JSON-lines results file (``tl_geometry.jobs``), so a killed run
resumes where it stopped. Stage 3 prints the table, the wall time and the peak memory.

Usage:
    python benchmarks/pga_profile_smollm2.py --out /tmp/pga_profile [--n-null 100] [--ccr 0 1 5]
        [--random-n-null 30] [--max-points 2048]
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

import torch


def collect(out: Path, args) -> None:
    import tl_geometry as tg

    for kind in ("trained", "random"):
        path = out / f"acts_{kind}.pt"
        if path.exists():
            continue
        t0 = time.time()
        model = tg.models.load("smollm2-135m")
        tokens = tg.corpus.tokens(model, "pydoc", n_seqs=args.n_seqs, seq_len=args.seq_len, seed=0)
        if kind == "random":
            model = tg.models.random_like(model, seed=0)
        hooks = tg.capture.resid_hooks(model, "post")
        cap = tg.capture.collect(model, tokens, hooks, max_points=args.max_points, seed=0, progress=False)
        W_U = tg.capture.weight(model, "W_U").clone()
        torch.save({"acts": dict(cap.acts), "W_U": W_U, "tokens_shape": list(tokens.shape)}, path)
        print(f"{kind}: collected {cap.n_points} points x {len(hooks)} hooks in {time.time() - t0:.1f} s", flush=True)
        del model, cap


def score(out: Path, args) -> None:
    import tl_geometry as tg
    from tl_geometry.jobs import run_jobs

    data = {kind: torch.load(out / f"acts_{kind}.pt") for kind in ("trained", "random")}
    readouts = {kind: tg.readout_basis(d["W_U"], args.k) for kind, d in data.items()}
    n_null = {"trained": args.n_null, "random": args.random_n_null}
    d_model = readouts["trained"].shape[0]
    bases = {kind: tg.haar_bases(d_model, args.k, n, seed=0) for kind, n in n_null.items()}
    jobs = [{"model": kind, "layer": l, "k": args.k, "n_null": n_null[kind], "ccr": list(args.ccr),
             "max_points": args.subsample or args.max_points}
            for kind in ("trained", "random") for l in range(len(data[kind]["acts"]))]

    def fn(p):
        t0 = time.process_time()
        H = data[p["model"]]["acts"][f"blocks.{p['layer']}.hook_resid_post"]
        if args.subsample and args.subsample < H.shape[0]:  # a seeded subset of the saved sample
            H = H[torch.randperm(H.shape[0], generator=torch.Generator().manual_seed(1))[: args.subsample]]
        prof = tg.pga_profile(H, readouts[p["model"]], ccrs=p["ccr"], null_bases=bases[p["model"]], seed=0)
        pc = tg.pc1_overlap(H, readouts[p["model"]])
        sp = tg.spectral_metrics(H)
        res = {f"z_ccr{c}": s.z for c, s in prof.items()}
        res.update({f"rho_ccr{c}": s.rho_read for c, s in prof.items()})
        res.update({f"nullmean_ccr{c}": s.null_mean for c, s in prof.items()})
        res.update({"pc1_overlap": pc.overlap, "pc1_expected": pc.expected, "pc1_var": pc.explained_variance,
                    "rankme": sp.rankme, "isotropy": sp.isotropy, "n_points": H.shape[0],
                    "cpu_s": time.process_time() - t0})
        return res

    if args.only:
        jobs = [j for j in jobs if j["model"] == args.only]
    if args.layers:
        jobs = [j for j in jobs if j["layer"] in args.layers]
    for rec in run_jobs(jobs, fn, results=out / "profile.jsonl", progress=False):
        zs = " ".join(f"z{c}={rec[f'z_ccr{c}']:+7.2f}" for c in args.ccr)
        print(f"{rec['params']['model']:>7} L{rec['params']['layer']:02d} {zs} pc1={rec['pc1_overlap']:.3f} "
              f"({rec['cpu_s']:.0f} s cpu)", flush=True)


def table(out: Path, args) -> None:
    from tl_geometry.jobs import read_records

    recs = [r for r in read_records(out / "profile.jsonl") if r.get("status") == "ok"]
    by = {(r["params"]["model"], r["params"]["layer"]): r for r in recs}
    cols = [f"z_ccr{c}" for c in args.ccr]
    print("layer | " + " | ".join(f"trained {c}" for c in cols) + " | " + " | ".join(f"random {c}" for c in cols)
          + " | trained pc1 overlap (k/d) | trained PC1 var")
    for l in range(30):
        t, r = by.get(("trained", l)), by.get(("random", l))
        row = [f"{t[c]:+.2f}" if t else "" for c in cols] + [f"{r[c]:+.2f}" if r else "" for c in cols]
        extra = [f"{t['pc1_overlap']:.3f} ({t['pc1_expected']:.3f})", f"{t['pc1_var']:.3f}"] if t else ["", ""]
        print(f"{l:>5} | " + " | ".join(row + extra))
    cpu = sum(r.get("cpu_s", 0) for r in recs)
    print(f"scored {len(recs)} (model, layer) units; CPU {cpu:.0f} s; peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/pga_profile")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--n-null", type=int, default=100)
    ap.add_argument("--random-n-null", type=int, default=30)
    ap.add_argument("--ccr", type=int, nargs="+", default=[0, 1, 5])
    ap.add_argument("--max-points", type=int, default=2048)
    ap.add_argument("--n-seqs", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--subsample", type=int, default=None, help="score a seeded subset of this many saved points")
    ap.add_argument("--layers", type=int, nargs="+", default=None, help="score only these layers")
    ap.add_argument("--only", choices=("trained", "random"), default=None, help="score only this model's layers")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    collect(out, args)
    score(out, args)
    table(out, args)
    print(f"wall {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
