"""Cache vs capture on SmolLM2-135M: the max |difference| per activation metric, and the BOS pitfall.

    python -m benchmarks.check_cache_smollm2 [--small]

Runs ``tg.analyze`` on 8 × 128 pydoc tokens three ways: the capture path (forward hooks), a
``run_with_cache`` cache (``cache=``) and a dict of (batch·pos, d) tensors (``activations=``, a
naive reshape, read back as (batch, pos, d)). Then PGA z at one hook from the pure function on
the naive reshape (BOS kept) and on :func:`tl_geometry.capture.flatten_valid` (BOS dropped).
A check, not a timing benchmark. ``--small``: 2 × 32 tokens, two hooks, 5 nulls, 64 points, k 16.
"""

from __future__ import annotations

import math

import tl_geometry as tg
from benchmarks import _util
from tl_geometry import capture

HOOKS = ["blocks.3.hook_resid_post", "blocks.15.hook_resid_post", "blocks.29.hook_resid_post"]
OPTIONS = {"pga": {"n_null": 20, "max_points": 512}, "epsilon_activations": {"max_points": 512}}


def values(rep):
    return {(r.metric, r.hook, r.extras.get("ccr")): (r.value, r.extras.get("stderr")) for r in rep.rows}


def main(argv=None) -> None:
    args = _util.parse_args(_util.make_parser(__doc__, repeats=False), argv)
    hooks, options, n_null, k_read = HOOKS, OPTIONS, 20, 100
    if args.small:
        hooks, n_null, k_read = HOOKS[1:], 5, 16
        options = {"pga": {"n_null": n_null, "max_points": 64, "k": k_read}, "epsilon_activations": {"max_points": 64}}
    model = _util.load_smollm2()
    tokens = _util.pydoc_tokens(model, *((2, 32) if args.small else (8, 128)))
    kw = dict(metrics=["pga", "spectral", "epsilon_activations"], hooks=hooks, options=options, progress=False)
    ref = values(tg.analyze(model, tokens, **kw))
    _, cache = model.run_with_cache(tokens, names_filter=hooks)
    flat = {h: cache[h].reshape(-1, cache[h].shape[-1]) for h in hooks}
    for label, extra in (("cache=", {"cache": cache}), ("activations= (flat)", {"activations": flat})):
        got = values(tg.analyze(model, tokens, **kw, **extra))
        worst: dict[str, list[float]] = {}
        for k, (v, se) in ref.items():
            w = worst.setdefault(k[0], [0.0, 0.0])
            v2, se2 = got[k]
            if not math.isnan(v):
                w[0] = max(w[0], abs(v - v2))
            if se is not None and se2 is not None and not math.isnan(se):
                w[1] = max(w[1], abs(se - se2))
        print(f"\n{label}: max |diff| vs capture over {len(hooks)} hooks")
        print("| metric | value | stderr |\n|---|---|---|")
        for m, (dv, ds) in sorted(worst.items()):
            print(f"| {m} | {dv:.3g} | {ds:.3g} |")

    h = "blocks.15.hook_resid_post"
    readout = tg.readout_basis(capture.weight(model, "W_U"), k_read)
    naive = cache[h].reshape(-1, cache[h].shape[-1])
    rows = capture.flatten_valid(model, tokens, cache[h])
    z_naive = tg.pga_score(naive, readout, n_null=n_null, seed=0).z
    z_valid = tg.pga_score(rows, readout, n_null=n_null, seed=0).z
    print(
        f"\nPGA z at {h}, all positions: naive reshape (BOS kept, N={naive.shape[0]}) {z_naive:.3f}; "
        f"flatten_valid (BOS dropped, N={rows.shape[0]}) {z_valid:.3f}"
    )


if __name__ == "__main__":
    main()
