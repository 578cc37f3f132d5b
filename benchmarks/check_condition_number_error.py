"""Check: the condition number's error, the delete-a-group jackknife against its first-order version.

    python -m benchmarks.check_condition_number_error [--samples 12] [--layers 1 5 10 15 20 25 29] [--small]

Over ``--samples`` disjoint samples of 8 × 128 pydoc tokens on SmolLM2-135M (the samples of
``calibrate_stderr``), at each ``blocks.L.hook_resid_post``: the condition number λ_max / λ_min of
the activations' covariance (``StreamingCovariance``, the "spectral" metric's groups of whole
sequences), its row's error (the delete-a-group jackknife: one ``eigvalsh`` per left-out group) and
the first-order (infinitesimal) jackknife, in which each left-out covariance C₋g moves the two
eigenvalues by vᵀ(C₋g − C)v only (v their eigenvectors of C). Prints per hook the spread over the
samples (sd) divided by the rms of each error: ≈ 1 when calibrated, < 1 an error too large.

Found with it (2026-12-07, 12 samples, 7 hooks): the jackknife 0.46–0.72 (too large, over-covers);
the first-order version 0.95–2.63 (too small at layers 5, 10 and 29): the sampling error of λ_min at
the Marchenko–Pastur edge lies between, so the conservative jackknife stays (docs/reliability.md).

``--small``: the tiny byte-level model, 2 samples of 4 × 32 tokens, every layer (checks the script).
"""

from __future__ import annotations

from benchmarks import _util


def first_order_cond(C, leave_outs) -> tuple[float, list[float]]:
    """(λ_max / λ_min of the kept spectrum of C, the first-order replicate of it for each left-out
    covariance): λ ↦ λ + vᵀ(C₋g − C)v for the largest and the smallest kept eigenvalue."""
    import torch

    from tl_geometry.metrics.spectral import _REL_CUTOFF

    lam, V = torch.linalg.eigh((C + C.T) / 2)
    lam, V = lam.flip(0), V.flip(1)
    i_min = int((lam > lam[0] * _REL_CUTOFF).nonzero().max())
    v_max, v_min = V[:, 0], V[:, i_min]
    reps = []
    for Cg in leave_outs:
        D = Cg - C
        reps.append(float((lam[0] + v_max @ D @ v_max) / (lam[i_min] + v_min @ D @ v_min)))
    return float(lam[0] / lam[i_min]), reps


def jackknife_se(reps) -> float:
    """√((G − 1)/G · Σ (θ_g − θ̄)²) of the replicates: the library's
    [`jackknife_se`][tl_geometry.metrics.jackknife.jackknife_se] (the one the spectral rows use)."""
    import torch

    from tl_geometry.metrics.jackknife import jackknife_se as library_se

    return float(library_se(torch.tensor(reps, dtype=torch.float64)[:, None])[0])


def main(argv=None) -> int:
    ap = _util.make_parser(__doc__, repeats=False, small="the tiny byte-level model (checks the script)")
    ap.add_argument("--samples", type=int, default=12)
    ap.add_argument("--layers", type=int, nargs="+", default=[1, 5, 10, 15, 20, 25, 29])
    args = _util.parse_args(ap, argv)
    import numpy as np

    from benchmarks.calibrate_stderr import disjoint_samples
    from tl_geometry import capture
    from tl_geometry.metrics.jackknife import group_labels
    from tl_geometry.metrics.spectral import StreamingCovariance

    _util.print_environment("condition number: jackknife vs first-order jackknife over disjoint samples")
    n_seqs, seq_len = 8, 128
    if args.small:
        model, args.samples, n_seqs, seq_len = _util.byte_model(), 2, 4, 32
        args.layers = list(range(model.cfg.n_layers))
    else:
        model = _util.load_smollm2(quiet=True)
    hooks = [f"blocks.{layer}.hook_resid_post" for layer in args.layers]
    got: dict[str, list[tuple[float, float, float]]] = {h: [] for h in hooks}
    for k, tokens in enumerate(disjoint_samples(model, args.samples, n_seqs, seq_len)):
        mask = capture.valid_mask(model, tokens)
        sizes = group_labels(mask.nonzero()[:, 0], 10).bincount().tolist()  # the "spectral" metric's groups
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in hooks)
        for h in hooks:
            acc = StreamingCovariance(sizes)
            acc.update(cache[h][mask].double())
            m = acc.spectral()
            cond, reps = first_order_cond(acc.compute(), [acc.leave_out(g)[0] for g in range(len(sizes))])
            got[h].append((m.condition_number, m.stderr["condition_number"], jackknife_se(reps)))
        print(f"sample {k} done", flush=True)
    print(f"\nhook | mean cond | sd over {args.samples} samples | sd / rms error: jackknife, first-order")
    for h in hooks:
        a = np.array(got[h])
        sd = a[:, 0].std(ddof=1)
        rms = np.sqrt((a[:, 1:] ** 2).mean(0))
        print(f"{h:28s} {a[:, 0].mean():12.1f} {sd:12.1f}  {sd / rms[0]:5.2f}  {sd / rms[1]:5.2f}")
    _util.print_footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
