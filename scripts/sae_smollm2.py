#!/usr/bin/env python
"""Train an SAE on SmolLM2-135M with sae_lens, publish it to a local hub cache, load it back and
measure it against the capacity bound — the SAE cross-check done end to end, offline.

    python scripts/sae_smollm2.py --out out/sae_smollm2 [--hook blocks.3.hook_resid_post]
                                  [--training-tokens 300000] [--expansion 8] [--k 32]

Writes OUT/sae (sae_lens's files), OUT/hub (a Hugging Face cache holding it as local/smollm2-135m-saes),
OUT/compare.json (the GeometryReport) and prints the numbers. Rerunning reuses a finished SAE.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="out/sae_smollm2")
    p.add_argument("--hook", default="blocks.3.hook_resid_post")
    p.add_argument("--training-tokens", type=int, default=300_000)
    p.add_argument("--expansion", type=int, default=8)
    p.add_argument("--k", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--n-seqs", type=int, default=2048)
    args = p.parse_args(argv)

    import torch
    from huggingface_hub import constants

    import tl_geometry as tg
    from tl_geometry.families import sae as tsae
    from tl_geometry.families.sae import training as sae_training

    out = Path(args.out)
    t0 = time.perf_counter()
    model = tg.models.load("smollm2-135m")
    tokens = tg.corpus.tokens(model, "shakespeare", n_seqs=args.n_seqs, seq_len=args.seq_len, seed=0)
    t_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    sae_dir = sae_training.train_sae(
        model,
        tokens,
        hook=args.hook,
        out=out / "sae",
        expansion=args.expansion,
        k=args.k,
        training_tokens=args.training_tokens,
    )
    t_train = time.perf_counter() - t0
    constants.HF_HUB_CACHE = str(out / "hub")
    repo, sae_id = sae_training.publish_to_cache(sae_dir, "local/smollm2-135m-saes")
    sae = tsae.load(repo, sae_id)  # SAE.from_pretrained, offline, from the cache
    # reconstruction quality on held-out text (pydoc), so the numbers describe a working SAE
    held = tg.corpus.tokens(model, "pydoc", n_seqs=16, seq_len=args.seq_len, seed=1)
    acts = tg.capture.collect(model, held, [args.hook], max_points=None, progress=False).acts[args.hook]
    with torch.no_grad():
        rec = sae.decode(sae.encode(acts))
        fvu = float(((rec - acts) ** 2).sum() / ((acts - acts.mean(0)) ** 2).sum())
        l0 = float((sae.encode(acts) > 0).float().sum(-1).mean())
    rep = tsae.compare(model, saes=[sae])
    rep.to_json(out / "compare.json")
    summary = {
        "hook": args.hook,
        "d_in": int(sae.cfg.d_in),
        "d_sae": int(sae.cfg.d_sae),
        "k": args.k,
        "training_tokens": args.training_tokens,
        "fvu_heldout": fvu,
        "l0_heldout": l0,
        "load_s": t_load,
        "train_s": t_train,
        "rows": {r.metric: r.value for r in rep.rows},
        "extras": {
            r.metric: {k: v for k, v in r.extras.items() if isinstance(v, (int, float, str, type(None)))}
            for r in rep.rows
        },
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps({k: v for k, v in summary.items() if k != "extras"}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
