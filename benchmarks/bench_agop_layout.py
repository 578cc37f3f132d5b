"""Benchmark: ``tg.agop`` on SmolLM2-135M with TransformerLens's copied weights laid out as views.

    python -m benchmarks.bench_agop_layout [--repeats 3] [--n-probes 16] [--contended] [--small]

ours: ``tg.agop(model, tokens)`` as shipped (``capture.backward.COPIES_AS_VIEWS``: the gated MLP's,
attention's and unembedding's weights stored in the layout TransformerLens copies them into, so its
``.T.contiguous()`` / ``einops.rearrange`` are views and nothing is rebuilt at backward);
reference: the same call with the model's own layout (``COPIES_AS_VIEWS = False``: TL copies the
weights every forward, the saved copies are rebuilt at every backward pass); floor: one forward pass
with the graph and ``n_probes`` backward passes from a random readout direction to every
``hook_resid_pre`` (the passes AGOP cannot avoid, without its accumulation). Warm, rotating order,
best and median of ``--repeats`` (≥ 3), torch's default threads; ``--contended``: the same beside
one CPU-bound process. Prints the largest relative difference of the AOFE ratios and of the
matrices (float32 rounding: the products read the weights in another order). 8 × 128 pydoc
tokens (``--small``: 2 × 64 tokens, 4 probes).
"""

from __future__ import annotations

import numpy as np
import torch

from benchmarks import _util


def main(argv=None) -> None:
    ap = _util.make_parser(__doc__)
    ap.add_argument("--n-probes", type=int, default=16, help="probes per batch (tg.agop's default: 16)")
    ap.add_argument("--contended", action="store_true", help="beside one CPU-bound process")
    args = _util.parse_args(ap, argv)
    import tl_geometry as tg
    from tl_geometry.capture import backward

    _util.print_environment("tg.agop: TL's weight copies as views vs the model's own layout, SmolLM2-135M")
    model = _util.load_smollm2(quiet=True)
    n_seqs, seq_len, n_probes = (2, 64, 4) if args.small else (8, 128, args.n_probes)
    tokens = _util.pydoc_tokens(model, n_seqs, seq_len)
    hooks = [f"blocks.{i}.hook_resid_pre" for i in range(model.cfg.n_layers)]

    def run(views: bool):
        backward.COPIES_AS_VIEWS = views
        try:
            return tg.agop(model, tokens, n_probes=n_probes, progress=False)
        finally:
            backward.COPIES_AS_VIEWS = True

    def floor():
        acts = {}

        def keep(x, hook):
            if hook.name == hooks[0]:  # the graph starts here (parameters frozen)
                x = x.detach().requires_grad_(True)
            acts[hook.name] = x
            return x

        for p in model.parameters():
            p.requires_grad_(False)
        gen = torch.Generator().manual_seed(0)
        with torch.enable_grad():
            model.add_hook(lambda name: name in hooks or name == "ln_final.hook_normalized", keep)
            try:
                model(tokens)
            finally:
                model.reset_hooks()
            x_out, xs = acts["ln_final.hook_normalized"], [acts[h] for h in hooks]
            for i in range(n_probes):
                z = torch.randn(x_out.shape[-1], generator=gen)
                torch.autograd.grad((x_out @ z).sum(), xs, retain_graph=i < n_probes - 1)

    with _util.competitor(args.contended):
        res = _util.bench(
            {"ours (views)": lambda: run(True), "own layout": lambda: run(False), "floor": floor},
            repeats=args.repeats,
        )
    a, b = res["ours (views)"].value, res["own layout"].value
    ra, rb = (np.array([r.ratio for r in x.stats.values()]) for x in (a, b))
    rel = max(float((a.matrices[h] - b.matrices[h]).norm() / b.matrices[h].norm()) for h in a.matrices)
    print(
        f"{'beside one CPU-bound process' if args.contended else 'alone'}; {n_seqs} x {seq_len} tokens, {n_probes} probes"
    )
    print(
        f"largest |Δ AOFE ratio| / ratio: {float(abs(ra - rb).max() / abs(rb).max()):.2e}; largest ‖ΔAGOP‖/‖AGOP‖: {rel:.2e}"
    )
    _util.print_table([(k, v) for k, v in res.items()])
    _util.print_ratios(
        res["ours (views)"], res["own layout"], res["floor"], reference_name="own layout", floor_name="floor"
    )
    _util.print_footer()


if __name__ == "__main__":
    main()
