"""Benchmark: AGOP readout probes (S z at unembed.hook_in) against logit probes (u over the vocabulary).

    python benchmarks/bench_agop_probes.py [--n-seqs 8] [--seq-len 128] [--n-probes 8] [--rounds 2]

On SmolLM2-135M at every ``blocks.{l}.hook_resid_pre`` (the report's AGOP): ``tg.agop`` with
``probes="logits"`` (the naive way: u ~ N(0, I) of the logits' shape, backward through W_U) and
``probes="readout"`` (ours: the same law drawn in d dimensions), alternating round by round so
that a changing load hits both alike. Prints wall and CPU seconds per probe (the forward pass
excluded: timed once per call and subtracted), the ratio, and the bias-corrected AOFE ratio of
both at a few layers with their jackknife standard errors (same law: they must agree within
them). ``--contended`` runs a CPU-bound busy loop beside it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-seqs", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--n-probes", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--contended", action="store_true", help="beside one CPU-bound busy loop")
    args = ap.parse_args(argv)

    import torch

    import tl_geometry as tg

    model = tg.models.load("smollm2-135m")
    tokens = tg.corpus.tokens(model, "pydoc", n_seqs=args.n_seqs, seq_len=args.seq_len, seed=0)
    comp = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.contended else None
    try:
        t = time.perf_counter()
        with torch.no_grad():
            model(tokens)
        fwd = time.perf_counter() - t
        times: dict[str, list[tuple[float, float]]] = {"logits": [], "readout": []}
        last = {}
        for r in range(args.rounds):
            for probes in ("logits", "readout") if r % 2 == 0 else ("readout", "logits"):
                w, c = time.perf_counter(), time.process_time()
                res = tg.agop(model, tokens, n_probes=args.n_probes, probes=probes, seed=r, progress=False)
                w, c = time.perf_counter() - w, time.process_time() - c
                times[probes].append(((w - fwd) / args.n_probes, c / args.n_probes))
                last[probes] = res
                assert res.provenance["agop_probes"] == probes
    finally:
        if comp is not None:
            comp.kill()
            comp.wait()
    print(
        f"SmolLM2-135M, {args.n_seqs} x {args.seq_len} tokens, 30 resid_pre hooks, {args.n_probes} probes x "
        f"{args.rounds} rounds, torch threads {torch.get_num_threads()}, "
        f"{'beside one busy loop' if args.contended else 'alone'}; one forward {fwd:.2f} s"
    )
    for probes, ts in times.items():
        print(
            f"  probes={probes:<8} per probe: wall "
            + ", ".join(f"{w:.2f}" for w, _ in ts)
            + " s; cpu "
            + ", ".join(f"{c:.2f}" for _, c in ts)
            + " s"
        )
    med = {p: sorted(w for w, _ in ts)[len(ts) // 2] for p, ts in times.items()}
    print(f"  logits / readout wall per probe: {med['logits'] / med['readout']:.2f}x")
    hooks = list(last["readout"].stats)
    print("  AOFE ratio (bias-corrected ± jackknife se), last round:")
    for h in hooks[:: max(1, len(hooks) // 5)]:
        a, b = last["logits"][h], last["readout"][h]
        print(
            f"    {h:<26} logits {a.ratio_debiased:.4f} ± {a.ratio_stderr:.4f}   readout {b.ratio_debiased:.4f} ± {b.ratio_stderr:.4f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
