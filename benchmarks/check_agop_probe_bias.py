"""Check: how far the AGOP rows at the report's probe count lie from many probes, in their own error bars.

    python -m benchmarks.check_agop_probe_bias [--ref-probes 64] [--probes 16] [--seeds 1 2 3]
                                               [--layers 1 5 10 15 20 25 29] [--json out.json] [--small]

On SmolLM2-135M's 8 × 128 pydoc tokens (seed 0: one text for every run, so only the probes
differ) runs ``tg.agop`` once with ``--ref-probes`` probes (the reference, seed 0) and once per
``--seeds`` with ``--probes`` probes, and prints per layer, for the AOFE and the AOFE ratio, the
plug-in value and the bias-corrected one (``aofe_debiased`` / ``ratio_debiased``: the
delete-a-group jackknife over probe groups) of each run as (value − reference's same
estimator) / the run's total standard error. Probe noise adds off-diagonal energy, so a plug-in
AOFE read at few probes lies above the many-probe value on every seed (one-sided); a corrected
one scatters around it. Found with it (2026-12-07): at 16 probes the plug-in AOFE of layers 5–15
lay 0.4–1.1 × its total error above 64 probes on every seed, the corrected one −1.0 … +0.55:
the ``agop.aofe`` row carries the corrected value since (docs/interaction.md).

A check, not a timing benchmark: about 2 min for 64 probes and 40 s per 16-probe seed on 2 cores.
``--small``: the tiny byte-level model, 2 × 16 tokens, 16 reference probes, 4 probes, two seeds.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import _util

STATS = ("aofe", "aofe_debiased", "ratio", "ratio_debiased")


def deviations(ref: dict, runs: dict[int, dict]) -> dict[str, dict[int, list[float]]]:
    """stat → seed → per-hook (run − reference) / the run's total stderr, for each of ``STATS``
    (the reference's same estimator; the AOFE estimators divide by the AOFE's error, the ratio's
    by the ratio's). ``ref`` and each run: hook → [`HookAGOP`][tl_geometry.metrics.interaction.HookAGOP]."""
    out: dict[str, dict[int, list[float]]] = {}
    for stat in STATS:
        se = "aofe_stderr" if stat.startswith("aofe") else "ratio_stderr"
        out[stat] = {
            seed: [(getattr(run[h], stat) - getattr(ref[h], stat)) / getattr(run[h], se) for h in ref]
            for seed, run in runs.items()
        }
    return out


def main(argv=None) -> int:
    ap = _util.make_parser(__doc__, repeats=False, small="the tiny byte-level model (checks the script)")
    ap.add_argument("--ref-probes", type=int, default=64)
    ap.add_argument("--probes", type=int, default=16, help="the report's probe count (the agop family's report option)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--layers", type=int, nargs="+", default=[1, 5, 10, 15, 20, 25, 29])
    ap.add_argument("--json", type=Path, default=None)
    args = _util.parse_args(ap, argv)
    if args.json is not None and not args.json.parent.is_dir():  # before minutes of passes, not after
        ap.error(f"--json {args.json}: its folder {args.json.parent} does not exist")
    import tl_geometry as tg

    _util.print_environment("AGOP rows at few probes against many (one text)")
    if args.small:
        model = _util.byte_model()
        tokens = tg.corpus.tokens(model, "pydoc", n_seqs=2, seq_len=16, seed=0)
        args.ref_probes, args.probes, args.seeds = 16, 4, [1, 2]
        args.layers = list(range(model.cfg.n_layers))
    else:
        model = _util.load_smollm2(quiet=True)
        tokens = _util.pydoc_tokens(model, 8, 128, seed=0)
    hooks = [f"blocks.{layer}.hook_resid_pre" for layer in args.layers]

    def run(n_probes: int, seed: int) -> dict:
        r = tg.agop(model, tokens, hooks=hooks, n_probes=n_probes, seed=seed, keep_matrices=False, progress=False)
        return dict(r.stats)

    ref = run(args.ref_probes, 0)
    runs = {seed: run(args.probes, seed) for seed in args.seeds}
    dev = deviations(ref, runs)
    print(f"\n(value at {args.probes} probes − value at {args.ref_probes}) / total stderr, per layer {args.layers}")
    for stat in STATS:
        for seed, row in dev[stat].items():
            print(f"{stat:15s} seed {seed}: " + " ".join(f"{x:+5.2f}" for x in row))
    print(f"\nplug-in AOFE at {args.probes} probes / at {args.ref_probes} (seed {args.seeds[0]}):")
    print(" ".join(f"{runs[args.seeds[0]][h].aofe / ref[h].aofe:.3f}" for h in hooks))
    if args.json:
        args.json.write_text(json.dumps({"settings": vars(args) | {"json": str(args.json)}, "deviations": dev}))
    _util.print_footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
