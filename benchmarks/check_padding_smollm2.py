"""Padding on a real model: SmolLM2-135M on pydoc text, 8 sequences of 88 real tokens, then the same
batch right-padded by 40 pad tokens per row — measured without a mask (what tl_geometry did
before issue 33: pads measured), with ``attention_mask=`` (the pads dropped), and refused when
the mask is missing. Prints ε of the activations and RankMe at three hooks for each.

    python benchmarks/check_padding_smollm2.py
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import tl_geometry as tg  # noqa: E402
from benchmarks import _util  # noqa: E402
from tl_geometry.errors import InputError  # noqa: E402


def main(argv=None) -> None:
    args = _util.parse_args(_util.make_parser(__doc__, repeats=False), argv)
    model = _util.load_smollm2()
    n_seqs, n_real = (2, 24) if args.small else (8, 88)
    real = tg.corpus.tokens(model, "pydoc", n_seqs=n_seqs, seq_len=n_real, seed=0)
    pad = model.tokenizer.pad_token_id
    if pad is None:
        pad = model.tokenizer.eos_token_id
        model.tokenizer.pad_token_id = pad
    n_pad = 8 if args.small else 40
    padded = torch.cat([real, torch.full((real.shape[0], n_pad), pad)], dim=1)
    mask = torch.cat([torch.ones_like(real), torch.zeros(real.shape[0], n_pad, dtype=real.dtype)], dim=1)
    n = model.cfg.n_layers
    hooks = ["blocks.0.hook_resid_post", f"blocks.{n // 2}.hook_resid_post", f"blocks.{n - 1}.hook_resid_post"]
    kw = dict(metrics=["epsilon_activations", "spectral"], hooks=hooks, progress=False)

    def table(rep):
        return {(r.metric, r.hook): r.value for r in rep.rows if r.metric in ("epsilon_activations", "spectral.rankme")}

    runs = {
        "unpadded": table(tg.analyze(model, real, **kw)),
        "padded, mask": table(tg.analyze(model, padded, attention_mask=mask, **kw)),
        "padded, pads measured (mask of ones)": table(
            tg.analyze(model, padded, attention_mask=torch.ones_like(mask), **kw)
        ),
    }
    try:
        tg.analyze(model, padded, **kw)
        refused = "NOT refused"
    except InputError as exc:
        refused = f"refused: {exc}"
    keys = sorted(runs["unpadded"])
    print(f"pad_token_id={pad}; {real.shape[0]} x {real.shape[1]} real tokens + {n_pad} pads per row")
    print(f"{'metric':<22}{'hook':<28}" + "".join(f"{k:>40}" for k in runs))
    for k in keys:
        print(f"{k[0]:<22}{k[1]:<28}" + "".join(f"{runs[r][k]:>40.4f}" for r in runs))
    print("padded, no mask:", refused[:200])


if __name__ == "__main__":
    main()
