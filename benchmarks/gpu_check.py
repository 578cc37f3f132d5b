"""ε, PGA and AGOP of SmolLM2-135M on CUDA and on the CPU: times and the largest differences.

    python -m benchmarks.gpu_check [--n-seqs 4] [--seq-len 128] [--n-null 20] [--max-points 512]
                                   [--n-probes 8] [--repeats 3] [--cpu-only] [--small]

Run by ``benchmarks/gpu_check.sh``. Same tokens, seeds and settings on both devices; each metric is
run once to warm up (CUDA context, kernels, caches) and then timed ``--repeats`` times, alternating
the devices (best and median). Prints per metric: CPU and CUDA best/median seconds and the largest
absolute difference of the numbers (ε, μ, σ; z and ρ per hook; AOFE ratio and trace per hook).
Without CUDA it says so and runs the CPU half (exit status 0). Not an ours-vs-reference benchmark:
the CPU run is the reference for the CUDA one (numbers and time). ``--small``: 4 × 40 tokens (PGA
needs k + 1 = 101 points), 5 nulls, 128 points, 2 probes, three hooks (resid_pre of layers 0, 15, 29).
"""

from __future__ import annotations

from benchmarks import _util


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
    args = _util.parse_args(ap)
    hooks = None  # every hook the metric scores by default
    if args.small:
        args.n_seqs, args.seq_len, args.n_null, args.max_points, args.n_probes = 4, 40, 5, 128, 2
        hooks = [f"blocks.{l}.hook_resid_pre" for l in (0, 15, 29)]
    import torch

    import tl_geometry as tg

    _util.print_environment("SmolLM2-135M: ε, PGA, AGOP on CUDA vs CPU")
    cuda = torch.cuda.is_available() and not args.cpu_only
    if cuda:
        print(f"CUDA: {torch.cuda.get_device_name(0)}, torch {torch.version.cuda}")
    else:
        print("no CUDA, skipped: running the CPU half only")
    devices = ["cpu"] + (["cuda"] if cuda else [])
    models = {dev: _util.load_smollm2(device=dev) for dev in devices}
    tokens = _util.pydoc_tokens(models["cpu"], args.n_seqs, args.seq_len)

    def run(kind: str, dev: str):
        m = models[dev]
        toks = tokens.to(dev)
        if kind == "epsilon":
            return tg.embedding_epsilon(m)
        if kind == "pga":
            return tg.pga(m, toks, hooks=hooks, n_null=args.n_null, max_points=args.max_points, seed=0, progress=False)
        return tg.agop(m, toks, hooks=hooks, n_probes=args.n_probes, seed=0, progress=False)

    def timed(kind: str, dev: str):
        def f():
            out = run(kind, dev)
            if dev == "cuda":
                torch.cuda.synchronize()
            return out

        return f

    print("| metric | device | best s | median s | best CPU s | note |\n|---|---|---|---|---|---|")
    for kind in ("epsilon", "pga", "agop"):
        t = _util.bench({dev: timed(kind, dev) for dev in devices}, repeats=args.repeats)
        diff = ""
        if cuda:
            a, b = numbers(kind, t["cpu"].value), numbers(kind, t["cuda"].value)
            worst = max(a, key=lambda k: abs(a[k] - b.get(k, float("nan"))))
            diff = f"max |cuda − cpu| = {abs(a[worst] - b[worst]):.3g} ({worst})"
        for dev in devices:
            r = t[dev]
            note = diff if dev == "cuda" else ""
            print(f"| {kind} | {dev} | {r.best:.3f} | {r.median:.3f} | {r.cpu_best:.2f} | {note} |", flush=True)
    _util.print_footer()


if __name__ == "__main__":
    main()
