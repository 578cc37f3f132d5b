"""Benchmark: ``tg.spectral`` on SmolLM2-135M with its hooks on the pool of threads against the plain loop.

    python -m benchmarks.bench_spectral_pool [--repeats 3] [--contended] [--small]

ours: ``tg.spectral(model, tokens)`` as shipped (each hook's eigendecompositions on one thread of
``parallel_map``'s pool); reference: the same call with the pool replaced by the plain loop (what it
did before); floor: one forward pass over the tokens (the capture every spectral call makes).
Warm, rotating order, best and median of ``--repeats`` (≥ 3), torch's default threads;
``--contended``: the same beside one CPU-bound process. Checks that both give the same rows, bit
for bit. 8 × 128 pydoc tokens, every ``hook_resid_post`` (``--small``: 2 × 64 tokens).
"""

from __future__ import annotations

import torch

from benchmarks import _util


def main(argv=None) -> None:
    ap = _util.make_parser(__doc__)
    ap.add_argument("--contended", action="store_true", help="beside one CPU-bound process")
    args = _util.parse_args(ap, argv)
    import tl_geometry as tg
    import tl_geometry.families.pga as fam

    _util.print_environment("tg.spectral: hooks on the pool vs the plain loop, SmolLM2-135M")
    model = _util.load_smollm2(quiet=True)
    tokens = _util.pydoc_tokens(model, *((2, 64) if args.small else (8, 128)))
    pooled = fam.parallel_map

    def plain(fn, items, workers):
        return [fn(x) for x in items]

    def run(pool):
        fam.parallel_map = pool
        try:
            return tg.spectral(model, tokens, progress=False).to_pandas()["value"].tolist()
        finally:
            fam.parallel_map = pooled

    def forward():
        with torch.no_grad():
            model(tokens)

    with _util.competitor(args.contended):
        res = _util.bench(
            {"ours": lambda: run(pooled), "plain loop": lambda: run(plain), "forward": forward},
            repeats=args.repeats,
        )
    assert res["ours"].value == res["plain loop"].value, "the pool changed the numbers"
    print(f"{'beside one CPU-bound process' if args.contended else 'alone'}; the same rows bit for bit")
    _util.print_table([(k, v) for k, v in res.items()])
    _util.print_ratios(
        res["ours"], res["plain loop"], res["forward"], reference_name="plain loop", floor_name="forward"
    )
    _util.print_footer()


if __name__ == "__main__":
    main()
