"""Benchmark: AGOP readout probes (S z at unembed.hook_in) against logit probes (u over the vocabulary).

    python -m benchmarks.bench_agop_probes [--n-seqs 8] [--seq-len 128] [--n-probes 8] [--repeats 3]
                                           [--contended] [--small]

On SmolLM2-135M at every ``blocks.{l}.hook_resid_pre`` (the report's AGOP):

* ours: ``tg.agop(..., probes="readout")`` (the same Gaussian law drawn in d dimensions);
* reference: ``tg.agop(..., probes="logits")``: u ~ N(0, I) of the logits' shape, backward through
  W_U, the definition written down directly. It is the best *simple* reference: the same library
  code path with only the probe law changed, so the ratio isolates the probe;
* floor: one forward pass over the tokens (both calls run it once) plus, per probe, the 30 float32
  Grams gᵀg of (tokens × d_model) (``_util.gemm_floor``).

Method (``benchmarks/_util.py``): a warm-up call of each, then ``--repeats`` (≥ 3) rounds in
alternating order, best and median; per probe = (call − one forward) / n_probes (the forward timed
with the library's thread choice for dense work, ``tl_geometry.runtime.threads.kernel("dense")``, as in the
call; on a busy machine the difference is noisy and can come out negative at ``--small`` sizes). Also the
bias-corrected AOFE ratio of both at a few layers with their jackknife standard errors (same law:
they must agree within them). ``--contended`` runs one CPU-bound busy loop beside it. ``--small``:
2 × 32 tokens, 2 probes, three hooks (layers 0, 15, 29).
"""

from __future__ import annotations

from benchmarks import _util


def main(argv=None) -> int:
    ap = _util.make_parser(__doc__)
    ap.add_argument("--n-seqs", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--n-probes", type=int, default=8)
    ap.add_argument("--contended", action="store_true", help="beside one CPU-bound busy loop")
    args = _util.parse_args(ap, argv)
    hooks = None  # tg.agop's default: every resid_pre hook
    if args.small:
        args.n_seqs, args.seq_len, args.n_probes = 2, 32, 2
        hooks = [f"blocks.{l}.hook_resid_pre" for l in (0, 15, 29)]

    import torch

    import tl_geometry as tg

    _util.print_environment("AGOP: readout probes against logit probes (SmolLM2-135M, resid_pre hooks)")
    model = _util.load_smollm2()
    tokens = _util.pydoc_tokens(model, args.n_seqs, args.seq_len)

    from tl_geometry.runtime.threads import kernel

    def forward():  # with the threads tg.agop's forward gets (on a busy machine, fewer than torch's default)
        with kernel("dense"), torch.no_grad():
            model(tokens)

    def agop(probes):
        return lambda: tg.agop(
            model, tokens, hooks=hooks, n_probes=args.n_probes, probes=probes, seed=0, progress=False
        )

    with _util.competitor(args.contended):
        t = _util.bench(
            {"readout": agop("readout"), "logits": agop("logits"), "forward": forward}, repeats=args.repeats
        )
        n_tok = int(tg.capture.valid_mask(model, tokens).sum())
        gram = _util.gemm_floor(n_tok, model.cfg.d_model, repeats=args.repeats)["torch float32 UᵀU"]
    for probes in ("readout", "logits"):
        assert t[probes].value.provenance["agop_probes"] == probes
    hooks = list(t["readout"].value.stats)
    fwd = t["forward"]
    # per probe: the call minus one forward, over the probes
    per = {
        k: _util.Timing(
            k,
            [(x - fwd.best) / args.n_probes for x in t[k].times],
            [(c - fwd.cpu_best) / args.n_probes for c in t[k].cpu],
        )
        for k in ("readout", "logits")
    }
    print(
        f"SmolLM2-135M, {args.n_seqs} x {args.seq_len} tokens, {len(hooks)} resid_pre hooks, {args.n_probes} probes, "
        f"torch threads {torch.get_num_threads()}, {'beside one busy loop' if args.contended else 'alone'}"
    )
    _util.print_table(
        [
            ("ours: probes='readout' (whole call)", t["readout"]),
            ("reference: probes='logits' (whole call)", t["logits"]),
            ("one forward pass", fwd),
            ("ours per probe (minus the forward)", per["readout"]),
            ("reference per probe (minus the forward)", per["logits"]),
            (f"floor: one float32 Gram ({n_tok} × {model.cfg.d_model})", gram, f"× {len(hooks)} hooks per probe"),
        ]
    )
    _util.print_ratios(
        per["readout"],
        per["logits"],
        gram,
        reference_name="logit probes (per probe)",
        floor_name=f"{len(hooks)} Grams (per probe)",
        scale_floor=len(hooks),
    )
    print("AOFE ratio (bias-corrected ± jackknife se):")
    for h in hooks[:: max(1, len(hooks) // 5)]:
        a, b = t["logits"].value[h], t["readout"].value[h]
        print(
            f"    {h:<26} logits {a.ratio_debiased:.4f} ± {a.ratio_stderr:.4f}   "
            f"readout {b.ratio_debiased:.4f} ± {b.ratio_stderr:.4f}"
        )
    _util.print_footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
