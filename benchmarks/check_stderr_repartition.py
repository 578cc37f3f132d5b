"""Re-partition check: is a sequence-jackknife error calibrated for the text a calibration drew?

``benchmarks.calibrate_stderr`` splits K·8 pydoc chunks into K disjoint samples of 8 sequences:
one partition. Its ratio (sd over the samples / rms stderr) carries that partition's luck, and
every run with the same ``--seed`` reuses the same partition (the samples 0 … K−1 of the same
permutation), so two runs at other hooks or with other metrics do not give independent evidence.
This script pools the same K·8 sequences and draws many random 8-sequence subsets of the pool
(each without replacement; different subsets may share sequences), and compares the spread of the
estimate over the subsets with its 8-group jackknife error: the expectation a calibration of that
text would have over all its partitions, with little noise of its own.

Two quantities:

* ``--what epsilon``: ε of activations (``similarity_stats`` with the ``epsilon_activations``
  groups: ``group_labels(sequence, 20)``, 8 groups here) at blocks 1, 15, 29 (``hook_resid_post``),
  every kept position of each subset (the report's 2,048-point cap exceeds 8 × 127);
* ``--what agop``: the AGOP trace at blocks 1, 5, 10, 15, 20, 25, 29 (``hook_resid_pre``). The
  trace is a mean over positions, and with sequences of equal length a subset's trace is the mean
  of its sequences' traces and its text jackknife is sd / √8 of them; so each sequence's trace is
  computed once (2 probes each: the probe noise of one sequence's trace, a few %, is small against
  the spread between sequences, 15–25 %) and every subset is a mean of 8 of them. Also printed:
  the skewness and kurtosis of the per-sequence traces.
* ``--what spectral``: the six spectral rows (RankMe, RankMe of the eigenvalues, both α-ReQ fits,
  isotropy, the condition number) at blocks 1, 5, 10, 15, 20, 25, 29 (``hook_resid_post``), with the
  "spectral" metric's groups (``group_labels(sequence, 10)``: one group per sequence here), every
  kept position of each subset: whether the condition number's too-large error (calibration ratio
  0.62) belongs to the jackknife or to one partition's luck.

Printed per hook: the ratio sd(estimates over subsets) / rms(stderr), and the pairwise 95 %
coverage over pairs of subsets (as ``calibrate_stderr``'s); overlapping subsets make both slightly
optimistic (two subsets of 8 of 96 share 0.67 sequences on average). The lines are also written
to ``--out``/repartition_<what>.txt.

Usage:
    python -m benchmarks.check_stderr_repartition --what epsilon|agop|spectral --out DIR [--samples 12]
        [--subsets 60] [--small]

SmolLM2-135M on 2 cores (2026-12-04, load average 3.5): ``epsilon`` 60 subsets at 3 hooks 2 min;
``agop`` 96 sequences × 2 probes a few minutes. ``--small``: the tiny byte-level model, 4 samples
of 8 × 48 tokens (checks the script, not the model).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from benchmarks import _util


def subset_calibration(values, stderrs) -> tuple[float, float]:
    """(sd(values, ddof 1) / rms(stderrs), fraction of pairs i < j with |v_i − v_j| ≤ 1.96·√(se_i² + se_j²))."""
    import numpy as np

    from benchmarks.calibrate_stderr import Z95

    v, s = np.asarray(values, dtype=float), np.asarray(stderrs, dtype=float)
    i, j = np.triu_indices(len(v), 1)
    cover = float(np.mean(np.abs(v[i] - v[j]) <= Z95 * np.sqrt(s[i] ** 2 + s[j] ** 2)))
    return float(v.std(ddof=1) / np.sqrt(np.mean(s**2))), cover


def mean_subsets(x, n_subsets: int, size: int, rng) -> tuple[list[float], list[float]]:
    """Random ``size``-subsets (without replacement) of the per-sequence values ``x``: each subset's
    mean and its delete-one jackknife error (sd / √size)."""
    import numpy as np

    vals, ses = [], []
    for _ in range(n_subsets):
        idx = rng.choice(len(x), size, replace=False)
        vals.append(float(x[idx].mean()))
        ses.append(float(x[idx].std(ddof=1) / np.sqrt(size)))
    return vals, ses


def main(argv=None) -> int:
    ap = _util.make_parser(__doc__, repeats=False, small="the tiny byte-level model (checks the script)")
    ap.add_argument("--what", choices=["epsilon", "agop", "spectral"], required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--samples", type=int, default=12, help="pool the sequences of calibration samples 0 … K-1")
    ap.add_argument(
        "--subsets", type=int, default=60, help="random 8-sequence subsets (epsilon, spectral); agop draws 400"
    )
    args = _util.parse_args(ap, argv)
    import numpy as np
    import torch

    from benchmarks.calibrate_stderr import disjoint_samples
    from tl_geometry import capture
    from tl_geometry.families.interaction import agop
    from tl_geometry.metrics.capacity import similarity_stats
    from tl_geometry.metrics.jackknife import group_labels
    from tl_geometry.metrics.spectral import SPECTRAL_FIELDS, spectral_metrics

    if args.small:
        model, k, seq_len, layers = _util.byte_model(), 4, 48, (0, 1)
    else:
        model, k, seq_len, layers = _util.load_smollm2(quiet=True), args.samples, 128, None
    pool = torch.cat(disjoint_samples(model, k, 8, seq_len, 0))
    rng = np.random.default_rng(0)
    lines = [
        f"{pool.shape[0]} pooled sequences of {seq_len} tokens (calibration samples 0 … {k - 1}); {_util.load_average()}"
    ]
    t0 = time.perf_counter()
    if args.what == "agop":
        ls = layers or (1, 5, 10, 15, 20, 25, 29)
        hooks = [f"blocks.{l}.hook_resid_pre" for l in ls]
        per = []
        for b in range(pool.shape[0]):
            r = agop(model, pool[b : b + 1], hooks=hooks, n_probes=2, seed=b, progress=False, keep_matrices=False)
            per.append([r[h].trace for h in hooks])
        arr = np.array(per)
        for c, h in enumerate(hooks):
            x = arr[:, c]
            ratio, cover = subset_calibration(*mean_subsets(x, 400, 8, rng))
            z = (x - x.mean()) / x.std()
            lines.append(
                f"agop.trace {h}: per-sequence sd/mean {x.std() / x.mean():.2f}, skewness {float((z**3).mean()):.2f}, "
                f"kurtosis {float((z**4).mean()):.2f}; 400 subsets: ratio {ratio:.2f}, pairwise coverage {100 * cover:.1f} %"
            )
    elif args.what == "spectral":
        ls = layers or (1, 5, 10, 15, 20, 25, 29)
        hooks = [f"blocks.{l}.hook_resid_post" for l in ls]
        cap = capture.collect(model, pool, hooks, max_points=None, progress=False)
        seq = cap.positions[:, 0]
        draws = [torch.as_tensor(rng.choice(pool.shape[0], 8, replace=False)) for _ in range(args.subsets)]
        hook_ratios: dict[str, list[float]] = {f: [] for f in SPECTRAL_FIELDS}
        for h in hooks:
            got = {f: ([], []) for f in SPECTRAL_FIELDS}
            for idx in draws:
                m = torch.isin(seq, idx)
                st = spectral_metrics(cap.acts[h][m], groups=group_labels(seq[m], 10))
                for f in SPECTRAL_FIELDS:
                    got[f][0].append(getattr(st, f))
                    got[f][1].append(st.stderr[f])
            for f in SPECTRAL_FIELDS:
                ratio, cover = subset_calibration(*got[f])
                hook_ratios[f].append(ratio)
                lines.append(
                    f"spectral.{f} {h}: {args.subsets} subsets: ratio {ratio:.2f}, pairwise coverage {100 * cover:.1f} %"
                )
        for f in SPECTRAL_FIELDS:
            lines.append(
                f"spectral.{f}: median ratio over the {len(hooks)} hooks {float(np.median(hook_ratios[f])):.2f}"
            )
    else:
        ls = layers or (1, 15, 29)
        hooks = [f"blocks.{l}.hook_resid_post" for l in ls]
        cap = capture.collect(model, pool, hooks, max_points=None, progress=False)
        seq = cap.positions[:, 0]
        for h in hooks:
            vals, ses = [], []
            for _ in range(args.subsets):
                m = torch.isin(seq, torch.as_tensor(rng.choice(pool.shape[0], 8, replace=False)))
                st = similarity_stats(cap.acts[h][m], groups=group_labels(seq[m], 20), progress=False)
                vals.append(st.epsilon)
                ses.append(st.epsilon_stderr)
            ratio, cover = subset_calibration(vals, ses)
            lines.append(
                f"epsilon_activations {h}: {args.subsets} subsets: ratio {ratio:.2f}, pairwise coverage {100 * cover:.1f} %"
            )
    lines.append(f"{time.perf_counter() - t0:.0f} s; {_util.load_average()}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"repartition_{args.what}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
