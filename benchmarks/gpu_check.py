"""ε, PGA and AGOP of SmolLM2-135M (or a scaled model) on CUDA and on the CPU: times, peaks, differences.

    python -m benchmarks.gpu_check [--n-seqs 4] [--seq-len 128] [--n-null 20] [--max-points 512]
                                   [--n-probes 8] [--repeats 3] [--cpu-only] [--cuda-only] [--small]
                                   [--model smollm2 | scaled-smollm2-0.5b | scaled-smollm2-1b
                                            | scaled-gemma3-0.5b | scaled-gemma3-1b]

Run by ``benchmarks/gpu_check.sh``. Same tokens, seeds and settings on both devices; each metric is
run once to warm up (CUDA context, kernels, caches) and then timed ``--repeats`` times, alternating
the devices (best and median). Prints per metric: CPU and CUDA best/median seconds and the largest
absolute difference of the numbers (ε, μ, σ; z and ρ per hook; AOFE ratio and trace per hook).
Without CUDA it says so and runs the CPU half (exit status 0). Not an ours-vs-reference benchmark:
the CPU run is the reference for the CUDA one (numbers and time). ``--small``: 4 × 40 tokens (PGA
needs k + 1 = 101 points), 5 nulls, 128 points, 2 probes, three hooks (resid_pre of the first,
middle and last layers).

``--model scaled-<family>-<size>``: a random-init model of the SmolLM2 (Llama) or Gemma-3 family at
0.5 B or 1 B parameters (``tg.models.scaled``, seed 0, built on the CPU and copied to CUDA, so both
devices hold the same weights) on random token ids (seed 0; no tokenizer). ``--cuda-only`` skips
the CPU half (a 1 B model's AGOP takes many minutes on a CPU). On CUDA each metric's peak
allocated memory (``torch.cuda.max_memory_allocated``, GiB) is printed beside its time.
"""

from __future__ import annotations

import copy

from benchmarks import _util

SCALED = {
    "scaled-smollm2-0.5b": ("smollm2", 5e8),
    "scaled-smollm2-1b": ("smollm2", 1e9),
    "scaled-gemma3-0.5b": ("gemma3", 5e8),
    "scaled-gemma3-1b": ("gemma3", 1e9),
}
"""``--model`` names of the scaled random-init models: (family, parameters) for ``tg.models.scaled``."""


def numbers(kind: str, out) -> dict[str, float]:
    if kind == "epsilon":
        return {"epsilon": out.epsilon, "mean": out.mean, "std": out.std}
    if kind == "pga":
        return {f"{r.metric}@{r.hook}": float(r.value) for r in out.rows}
    return {f"{k}:{f}": float(getattr(out[k], f)) for k in out for f in ("ratio", "trace")}


def main() -> None:
    ap = _util.make_parser(__doc__)
    ap.add_argument("--n-seqs", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--n-null", type=int, default=20)
    ap.add_argument("--max-points", type=int, default=512)
    ap.add_argument("--n-probes", type=int, default=8)
    ap.add_argument("--cpu-only", action="store_true")
    ap.add_argument("--cuda-only", action="store_true", help="skip the CPU half (scaled models)")
    ap.add_argument("--model", default="smollm2", choices=["smollm2", *SCALED])
    args = _util.parse_args(ap)
    if args.cpu_only and args.cuda_only:
        ap.error("--cpu-only and --cuda-only exclude each other")
    import torch

    import tl_geometry as tg

    _util.print_environment(f"{args.model}: ε, PGA, AGOP on CUDA vs CPU")
    cuda = torch.cuda.is_available() and not args.cpu_only
    if cuda:
        print(f"CUDA: {torch.cuda.get_device_name(0)}, torch {torch.version.cuda}")
    else:
        print("no CUDA, skipped: running the CPU half only")
    devices = (["cpu"] if not (cuda and args.cuda_only) else []) + (["cuda"] if cuda else [])
    if args.model == "smollm2":
        models = {dev: _util.load_smollm2(device=dev) for dev in devices}
        tokens = _util.pydoc_tokens(next(iter(models.values())), args.n_seqs, args.seq_len)
    else:
        family, n_params = SCALED[args.model]
        base = tg.models.scaled(family, n_params, seed=0)
        n = sum(p.numel() for p in base.parameters())
        print(f"{base.cfg.model_name}: {n:,} parameters, {base.cfg.n_layers} layers, d_model {base.cfg.d_model}")
        gen = torch.Generator().manual_seed(0)
        tokens = torch.randint(0, base.cfg.d_vocab, (args.n_seqs, args.seq_len), generator=gen)
        models = {}
        if "cuda" in devices:  # a copy on CUDA of the same weights (or the model itself, --cuda-only)
            models["cuda"] = (copy.deepcopy(base) if "cpu" in devices else base).to("cuda")
        if "cpu" in devices:
            models["cpu"] = base
    L = next(iter(models.values())).cfg.n_layers
    hooks = None  # every hook the metric scores by default
    if args.small:
        args.n_seqs, args.seq_len, args.n_null, args.max_points, args.n_probes = 4, 40, 5, 128, 2
        hooks = [f"blocks.{l}.hook_resid_pre" for l in (0, L // 2, L - 1)]
        tokens = tokens[: args.n_seqs, : args.seq_len]

    def run(kind: str, dev: str):
        m = models[dev]
        toks = tokens.to(dev)
        if kind == "epsilon":
            return tg.embedding_epsilon(m)
        if kind == "pga":
            return tg.pga(m, toks, hooks=hooks, n_null=args.n_null, max_points=args.max_points, seed=0, progress=False)
        return tg.agop(m, toks, hooks=hooks, n_probes=args.n_probes, seed=0, progress=False)

    peaks: dict[tuple[str, str], float] = {}

    def timed(kind: str, dev: str):
        def f():
            if dev == "cuda":
                torch.cuda.reset_peak_memory_stats()
            out = run(kind, dev)
            if dev == "cuda":
                torch.cuda.synchronize()
                peaks[kind, dev] = max(peaks.get((kind, dev), 0.0), torch.cuda.max_memory_allocated() / 2**30)
            return out

        return f

    print("| metric | device | best s | median s | best CPU s | CUDA peak GiB | note |\n|---|---|---|---|---|---|---|")
    for kind in ("epsilon", "pga", "agop"):
        t = _util.bench({dev: timed(kind, dev) for dev in devices}, repeats=args.repeats)
        diff = ""
        if len(devices) == 2:
            a, b = numbers(kind, t["cpu"].value), numbers(kind, t["cuda"].value)
            worst = max(a, key=lambda k: abs(a[k] - b.get(k, float("nan"))))
            diff = f"max |cuda − cpu| = {abs(a[worst] - b[worst]):.3g} ({worst})"
        for dev in devices:
            r = t[dev]
            note = diff if dev == "cuda" else ""
            peak = f"{peaks[kind, dev]:.2f}" if (kind, dev) in peaks else "—"
            print(
                f"| {kind} | {dev} | {r.best:.3f} | {r.median:.3f} | {r.cpu_best:.2f} | {peak} | {note} |", flush=True
            )
    _util.print_footer()


if __name__ == "__main__":
    main()
