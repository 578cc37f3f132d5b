"""bf16 / f16 / float64 / numpy input vs float32 input: the pure metric functions on SmolLM2 activations.

Issue 21 part 3: the pure functions accept numpy arrays and any float dtype, upcasting float16 and
bfloat16 to float32 before the math. This script feeds each pure function the same SmolLM2-135M
activations (resid_post of layer 10, BOS dropped) in each dtype and prints, per function and
output, the max |result(dtype) − result(float32)|. A low-precision input differs from the float32
one by its rounding (bf16: 2⁻⁸ relative, f16: 2⁻¹¹), so its result differs by what that rounding
does to the metric; the script also prints the result on ``x.to(dtype).float()`` (the rounded
data handed over as float32): the library's answer on bf16 input equals it exactly, i.e. nothing
beyond the input's own rounding is lost.

    python -m benchmarks.dtype_agreement [--random] [--out dtype_agreement.json] [--small]

``--random``: realistic random data (a low-rank plus noise cloud, d = 576) instead of the model.
A check, not a timing benchmark. ``--small``: the model's activations of 2 × 40 tokens.
"""

from __future__ import annotations

import json
import sys

import torch

import tl_geometry as tg
from benchmarks import _util


def activations(random: bool, small: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(H, W_E, W_in): activations (N, d), an embedding block and an MLP input matrix."""
    if random:
        g = torch.Generator().manual_seed(0)
        d, N = 576, 600
        basis = torch.randn(d, 40, generator=g)
        H = torch.randn(N, 40, generator=g) @ basis.T * 3 + torch.randn(N, d, generator=g) + 5
        return H, torch.randn(2000, d, generator=g), torch.randn(d, 256, generator=g) / d**0.5
    model = _util.load_smollm2()
    tokens = _util.pydoc_tokens(model, 2 if small else 8, 40 if small else 80)
    hook = "blocks.10.hook_resid_post"
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=hook)
    H = cache[hook][:, 1:].reshape(-1, model.cfg.d_model).float()  # drop BOS, as the capture layer
    return H, model.W_E.detach()[:2000].float(), model.W_in[10].detach().float()


def results(H, W_E, W_in, G, G2, V) -> dict[str, float]:
    """Every pure function's scalar outputs on these inputs (any dtype / numpy)."""
    out: dict[str, float] = {}
    s = tg.pga_score(H, V, n_null=20, ccr=0, seed=0)
    out["pga_score.z (ccr 0)"] = s.z
    out["pga_score.rho_read (ccr 0)"] = s.rho_read
    s1 = tg.pga_score(H, V, n_null=20, ccr=1, seed=0)
    out["pga_score.z (ccr 1)"] = s1.z
    p = tg.pc1_overlap(H, V)
    out["pc1_overlap.overlap"] = p.overlap
    out["pc1_overlap.explained_variance"] = p.explained_variance
    m = tg.spectral_metrics(H)
    out["spectral.rankme"] = m.rankme
    out["spectral.alpha_req"] = m.alpha_req
    out["spectral.isotropy"] = m.isotropy
    st = tg.similarity_stats(W_E)
    out["similarity_stats.mean"] = st.mean
    out["similarity_stats.std"] = st.std
    out["similarity_stats.epsilon"] = st.epsilon
    out["aofe.ratio"] = float(tg.aofe(G).ratio)
    out["weighted_mean_cos2"] = float(tg.weighted_mean_cos2(G))
    out["wtw_aofe.ratio"] = float(tg.wtw_aofe(W_E).ratio)
    out["nfa_correlation.pearson"] = tg.nfa_correlation(W_in, G).pearson
    out["offdiag_pearson"] = tg.offdiag_pearson(G, G2)
    return out


def main(argv=None) -> int:
    ap = _util.make_parser(__doc__, repeats=False)
    ap.add_argument("--random", action="store_true")
    ap.add_argument("--out", default=None)
    args = _util.parse_args(ap, argv)
    H, W_E, W_in = activations(args.random, args.small)
    V = tg.readout_basis(torch.randn(H.shape[1], 2000, generator=torch.Generator().manual_seed(1)), 64)
    G = H.T @ H / H.shape[0]  # an AGOP-like d × d second moment
    G2 = G @ G / G.diagonal().sum()  # scaled to stay inside float16
    base = results(H, W_E, W_in, G, G2, V)
    table: dict[str, dict[str, float]] = {}
    variants = {
        "float64": lambda x: x.double(),
        "numpy float32": lambda x: x.numpy(),
        "numpy float64": lambda x: x.double().numpy(),
        "bfloat16": lambda x: x.bfloat16(),
        "float16": lambda x: x.half(),
        "bf16→f32 (rounded data)": lambda x: x.bfloat16().float(),
        "f16→f32 (rounded data)": lambda x: x.half().float(),
    }
    for label, fn in variants.items():
        res = results(fn(H), fn(W_E), fn(W_in), fn(G), fn(G2), V)
        table[label] = {k: abs(res[k] - base[k]) for k in base}
        table[label + " (value)"] = res
    print(
        f"source: {'random (low rank + noise)' if args.random else 'SmolLM2-135M blocks.10.hook_resid_post'}, N={H.shape[0]}"
    )
    cols = list(variants)
    print(f"{'output':<32}{'float32 value':>15}" + "".join(f"{c[:14]:>16}" for c in cols))
    for k, v in base.items():
        print(f"{k:<32}{v:>15.6g}" + "".join(f"{table[c][k]:>16.3g}" for c in cols))
    for low, rounded in (("bfloat16", "bf16→f32 (rounded data)"), ("float16", "f16→f32 (rounded data)")):
        diff = {k: abs(table[low + " (value)"][k] - table[rounded + " (value)"][k]) for k in base}
        worst = max(diff, key=lambda k: diff[k])
        print(f"{low} input vs the {low}-rounded data as float32: max |diff| {diff[worst]:.3g} ({worst})")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump({"float32": base, "max_abs_diff": table}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
