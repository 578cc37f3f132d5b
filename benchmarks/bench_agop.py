"""Benchmark: AGOP on SmolLM2-135M at every resid_pre hook, one backward per probe for all hooks.

    python -m benchmarks.bench_agop [--n-seqs 8] [--seq-len 128] [--n-probes 64] [--naive-probes 2]
                                    [--interleaved 3] [--only-interleaved] [--small]

* ours: one ``torch.autograd.grad`` per probe for all 30 hooks at once (``tg.agop``'s way);
* reference: one backward per hook per probe on the same forward graph (what a user writes with one
  hook at a time): the best *simple* way, since it needs nothing but ``autograd.grad`` per hook and
  shares the forward pass with ours;
* floor: the 30 float32 Grams gᵀg of (tokens × d_model) per probe (``_util.gemm_floor``): the
  accumulation both ways must do, without any backward pass.

Method (``benchmarks/_util.py``): environment and load average printed; the per-probe comparison runs
both ways alternately on one forward graph, a warm-up round then ``--interleaved`` (≥ 3) rounds, best
and median. Then the whole ``tg.agop`` (wall time, peak resident memory) over n_seqs × seq_len pydoc
tokens against the naive way timed on ``--naive-probes`` probes and extrapolated to n_probes (its
cost is linear in the probes), and the AOFE ratio per layer; JSON to benchmarks/out/agop.json.
``--small``: 2 × 32 tokens, 4 probes, 1 naive probe.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from benchmarks import _util


def naive(model, tokens, hooks, n_probes, seed=0):
    """One backward per hook per probe (the way without gradient capture at all hooks at once)."""
    from tl_geometry import capture

    mask = capture.valid_mask(model, tokens)
    gen = torch.Generator().manual_seed(seed)
    acc = {h: torch.zeros(model.cfg.d_model, model.cfg.d_model) for h in hooks}
    with capture.grad_capture(model, hooks) as acts, torch.enable_grad():
        logits = model(tokens)
        for _ in range(n_probes):
            u = torch.randn(logits.shape, generator=gen)
            for h in hooks:
                (g,) = torch.autograd.grad((u * logits).sum(), acts[h], retain_graph=True)
                g = g[mask]
                acc[h] += g.T @ g
    return acc


def interleaved(model, tokens, hooks, rounds, seed=0):
    """Per-probe seconds of both ways, alternated in one process on the same forward graph, so that
    a changing machine load hits both alike. Returns (ours, naive) lists of per-probe seconds."""
    from tl_geometry import capture

    mask = capture.valid_mask(model, tokens)
    gen = torch.Generator().manual_seed(seed)
    d = model.cfg.d_model
    acc = {h: torch.zeros(d, d) for h in hooks}
    ours, nv = [], []
    with capture.grad_capture(model, hooks) as acts, torch.enable_grad():
        logits = model(tokens)
        xs = [acts[h] for h in hooks]
        for _ in range(rounds):
            u = torch.randn(logits.shape, generator=gen)
            t0 = time.perf_counter()
            for h, g in zip(hooks, torch.autograd.grad((u * logits).sum(), xs, retain_graph=True)):
                g = g[mask]
                acc[h] += g.T @ g
            ours.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            for h in hooks:
                (g,) = torch.autograd.grad((u * logits).sum(), acts[h], retain_graph=True)
                g = g[mask]
                acc[h] += g.T @ g
            nv.append(time.perf_counter() - t0)
    return ours, nv


def main() -> None:
    ap = _util.make_parser(__doc__)
    ap.add_argument("--n-seqs", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--n-probes", type=int, default=64)
    ap.add_argument("--naive-probes", type=int, default=2, help="0 skips the naive comparison")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument(
        "--interleaved",
        type=int,
        default=3,
        help="N ≥ 3 alternating per-probe rounds of both ways (after a warm-up round): best and median",
    )
    ap.add_argument("--only-interleaved", action="store_true", help="stop after the interleaved rounds")
    ap.add_argument("--out", default="benchmarks/out/agop.json")
    args = _util.parse_args(ap)
    if args.small:
        args.n_seqs, args.seq_len, args.n_probes, args.naive_probes = 2, 32, 4, 1
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.interleaved < 3:
        ap.error("--interleaved must be >= 3 (best and median of at least 3)")
    import tl_geometry as tg

    _util.print_environment("AGOP on SmolLM2-135M: one backward per probe for all hooks vs one per hook")

    t0 = time.perf_counter()
    model = _util.load_smollm2()
    t_load = time.perf_counter() - t0
    tokens = _util.pydoc_tokens(model, args.n_seqs, args.seq_len)
    hooks = tg.capture.resid_hooks(model, "pre")
    print(
        f"SmolLM2 loaded in {t_load:.1f}s; tokens {tuple(tokens.shape)}; {len(hooks)} hooks; "
        f"{args.n_probes} probes; torch threads {torch.get_num_threads()}",
        flush=True,
    )

    ours, nv = interleaved(model, tokens, hooks, args.interleaved + 1)
    ours, nv = ours[1:], nv[1:]  # the first round is the warm-up
    ours_t, nv_t = _util.Timing("ours", ours, ours), _util.Timing("naive", nv, nv)
    print(f"per probe, {args.interleaved} alternating rounds after a warm-up (wall seconds):")
    print(_util.TABLE_HEAD.replace("best CPU s", "best s (again)"))
    print(_util.fmt_row("ours: one backward for all hooks", ours_t))
    print(_util.fmt_row("naive: one backward per hook", nv_t))
    n_tok = int(tg.capture.valid_mask(model, tokens).sum())
    floor = _util.gemm_floor(n_tok, model.cfg.d_model, repeats=args.interleaved)["torch float32 UᵀU"]
    print(_util.fmt_row(f"floor: one float32 Gram gᵀg of ({n_tok} × {model.cfg.d_model})", floor))
    _util.print_ratios(
        ours_t,
        nv_t,
        floor,
        reference_name="one backward per hook",
        floor_name=f"{len(hooks)} Grams",
        scale_floor=len(hooks),
    )
    if args.only_interleaved:
        _util.print_footer()
        return
    with _util.PeakRSS() as mem:
        t0 = time.perf_counter()
        res = tg.agop(model, tokens, hooks=hooks, n_probes=args.n_probes, batch_size=args.n_seqs, seed=0)
        t_ours = time.perf_counter() - t0
    print(
        f"ours: {t_ours:.1f}s ({t_ours / args.n_probes:.2f}s/probe); RSS {mem.start / 2**30:.2f} → peak "
        f"{mem.peak / 2**30:.2f} GiB (+{(mem.peak - mem.start) / 2**30:.2f})",
        flush=True,
    )

    t_naive = naive_est = speedup = None
    mem_n = None
    if args.naive_probes > 0:
        with _util.PeakRSS() as mem_n:
            t0 = time.perf_counter()
            naive(model, tokens, hooks, args.naive_probes)
            t_naive = time.perf_counter() - t0
        t0 = time.perf_counter()
        with torch.no_grad():
            model(tokens)
        t_fwd = time.perf_counter() - t0
        per_probe_naive = (t_naive - t_fwd) / args.naive_probes
        naive_est = t_fwd + per_probe_naive * args.n_probes
        print(
            f"naive (one backward per hook per probe): {t_naive:.1f}s for {args.naive_probes} probes "
            f"→ {naive_est:.0f}s extrapolated to {args.n_probes}; peak +{(mem_n.peak - mem_n.start) / 2**30:.2f} GiB",
            flush=True,
        )
        print(f"speed-up of one backward for all hooks: {naive_est / t_ours:.1f}x", flush=True)
        speedup = naive_est / t_ours
    print(f"{'layer':>5} {'AOFE ratio':>11} {'± se':>8} {'debiased':>9} {'trace':>11} {'rel se(G)':>9}")
    for h in hooks:
        s = res[h]
        print(
            f"{h.split('.')[1]:>5} {s.ratio:>11.4f} {s.ratio_stderr:>8.4f} {s.ratio_debiased:>9.4f} {s.trace:>11.4g} "
            f"{s.rel_stderr:>9.3f}"
        )
    out = {
        "tokens": list(tokens.shape),
        "n_hooks": len(hooks),
        "n_probes": args.n_probes,
        "threads": torch.get_num_threads(),
        "load_s": t_load,
        "ours_s": t_ours,
        "ours_peak_rss_gib": mem.peak / 2**30,
        "ours_extra_rss_gib": (mem.peak - mem.start) / 2**30,
        "naive_probes": args.naive_probes,
        "naive_s": t_naive,
        "naive_extrapolated_s": naive_est,
        "speedup": speedup,
        "stats": {h: res[h].to_dict() for h in hooks},
        "depth_width_ratio": tg.depth_width_ratio(model),
        "wtw_aofe_ratio": float(tg.wtw_aofe(model.W_E).ratio),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    out["interleaved_per_probe_s"] = {"ours": ours, "naive": nv}
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")
    _util.print_footer()


if __name__ == "__main__":
    main()
