"""Check: do reproduce's PGA verdicts survive another sample of text? SmolLM2-135M, K disjoint pydoc samples.

For each sample (8 × 128 pydoc tokens; the K samples are disjoint chunks of one draw) it computes
the PGA profile of reproduce's ``pga.profile`` check (the paper preset: the unprocessed model, the
31 hidden states from the embeddings to the last block, CCR-1; 100 nulls, 512 points: the
``cpu`` size of ``PGA_SIZES``) and reads reproduce's claims twice: with the one verdict rule
(``tl_geometry.metrics.significance``: chance band at n_null, Holm over the window, 2 stderr) and
with the rule reproduce used before (the extreme of the window, decided when |v| > 2·stderr alone).
It prints, per claim and rule, the verdict of each sample and how many samples disagree with the
most common verdict (the flips). Each finished sample is written to ``--json`` at once.

Usage:
    python -m benchmarks.check_verdict_flips_smollm2 [--samples 6] [--n-null 100] [--max-points 512]
        [--json benchmarks/out/verdict_flips_smollm2.json] [--small]

About 30–60 s per sample on 2 cores, plus the load. A check, not a timing benchmark. ``--small``:
2 samples of 4 × 64 tokens, 5 nulls, 128 points.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from pathlib import Path

from benchmarks import _util


def _old_call(value: float, se: float) -> str:
    """The rule reproduce used before issue 35: |v| > 2·stderr alone, on the extreme of the window."""
    if math.isfinite(se) and abs(value) <= 2 * se:
        return "inconclusive"
    return "positive" if value > 0 else "negative"


def main(argv=None) -> int:
    ap = _util.make_parser(__doc__, repeats=False)
    ap.add_argument("--samples", type=int, default=6)
    ap.add_argument("--n-null", type=int, default=100)
    ap.add_argument("--max-points", type=int, default=512)
    ap.add_argument("--json", type=Path, default=Path("benchmarks/out/verdict_flips_smollm2.json"))
    args = _util.parse_args(ap, argv)
    n_seqs, seq_len = 8, 128
    if args.small:
        args.samples, args.n_null, args.max_points = 2, 5, 128
        n_seqs, seq_len = 4, 64

    import torch

    import tl_geometry as tg
    from tl_geometry.families.pga.checks import _pga_claims

    model = _util.load_smollm2(processing="none")
    d = int(model.cfg.d_model)
    allt = _util.pydoc_tokens(model, n_seqs * args.samples, seq_len, seed=0)
    order = torch.randperm(allt.shape[0], generator=torch.Generator().manual_seed(0))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    done: list[dict] = []
    for s in range(args.samples):
        tokens = allt[order[s * n_seqs : (s + 1) * n_seqs]]
        t0 = time.perf_counter()
        rep = tg.pga(
            model,
            tokens,
            preset="paper",
            n_null=args.n_null,
            max_points=args.max_points,
            ccr=[1],
            seed=s,
            progress=False,
        )
        z = {1: {r.hook: (float(r.value), float(r.extras["stderr"])) for r in rep.rows if r.metric == "pga.z"}}
        claims = _pga_claims(z, d, n_null=args.n_null)
        rec = {
            "sample": s,
            "seconds": round(time.perf_counter() - t0, 1),
            "n_hooks": len(z[1]),
            "claims": {
                c["id"]: {
                    "value": c["value"],
                    "se": c["se"],
                    "new": c["verdict"],
                    "old": _old_call(c["value"], c["se"]),
                }
                for c in claims
            },
        }
        done.append(rec)
        args.json.write_text(
            json.dumps({"n_null": args.n_null, "max_points": args.max_points, "samples": done}, indent=1)
        )
        print(f"sample {s}: {rec['n_hooks']} hooks in {rec['seconds']} s", flush=True)
    ids = list(done[0]["claims"])
    print(
        f"\n{len(done)} disjoint samples of {n_seqs} × {seq_len} pydoc tokens, n_null {args.n_null}, {args.max_points} points"
    )
    print(f"{'claim':<20} {'rule':<4} {'verdicts per sample':<70} flips")
    for cid in ids:
        vals = ", ".join(f"{r['claims'][cid]['value']:+.2f}±{r['claims'][cid]['se']:.2f}" for r in done)
        print(f"{cid:<20} z    {vals}")
        for rule in ("old", "new"):
            calls = [r["claims"][cid][rule] for r in done]
            top = Counter(calls).most_common(1)[0][1]
            print(f"{'':<20} {rule:<4} {' '.join(c[:3] for c in calls):<70} {len(calls) - top}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
