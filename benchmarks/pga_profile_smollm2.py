"""Subspace PGA profile of SmolLM2-135M: unprocessed (the paper preset) and TransformerLens-processed
(the library default) weights, and a randomly initialised copy.

Stage 1 loads SmolLM2-135M with ``processing="none"`` (raw hidden states, raw W_U: what the paper
works on), gathers one seeded sample of ``--max-points`` positions of pydoc text at the scored
hooks and saves it with W_U and the final norm's weight; then the same with ``processing="tl"``
(fold_ln, center_unembed; TransformerLens skips center_writing_weights for RMSNorm models) and
with a randomly initialised model of the same config (TL's initialisation). One model is in
memory at a time. Stage 2 scores each (model, hook) at every CCR level with ``tg.pga_profile`` and
appends one record per unit to a JSON-lines results file (``tl_geometry.runtime.jobs``), so a killed run
resumes where it stopped. Stage 3 prints the tables, the readout-subspace overlaps, the CPU time
and the peak memory, and (``--figures DIR``) draws the doc figures.

Scored hooks: ``blocks.0.hook_resid_pre`` (the embeddings), ``blocks.{l}.hook_resid_post`` for
the layers of ``--layer-step`` (always including the last), and ``unembed.hook_in`` (the final
normalized state: with raw weights the last entry of Hugging Face's ``hidden_states``; with
fold_ln the final norm's weight lives in W_U instead).

Usage:
    python -m benchmarks.pga_profile_smollm2 --out out/pga_profile [--max-points 1024] [--n-null 50]
        [--random-n-null 30] [--ccr 0 1 5] [--layer-step 2] [--figures docs/img] [--small]

A profile, not a timing benchmark. ``--small``: 2 × 64 tokens, 128 points, 5 nulls, k 16, CCR 1,
layers 0/15/29, results in a temporary directory unless ``--out`` is given.
"""

from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path

import torch

from benchmarks import _util

KINDS = ("raw", "processed", "random")


def scored_hooks(n_layers: int, step: int) -> list[str]:
    layers = sorted(set(range(0, n_layers, step)) | {n_layers - 1})
    return ["blocks.0.hook_resid_pre", *[f"blocks.{l}.hook_resid_post" for l in layers], "unembed.hook_in"]


def collect(out: Path, args) -> None:
    import tl_geometry as tg

    for kind in KINDS:
        path = out / f"acts_{kind}.pt"
        if path.exists():
            continue
        t0 = time.time()
        model = _util.load_smollm2(processing="tl" if kind == "processed" else "none")
        tokens = _util.pydoc_tokens(model, args.n_seqs, args.seq_len)
        if kind == "random":
            model = tg.models.random_like(model, seed=0)
        hooks = scored_hooks(model.cfg.n_layers, args.layer_step)
        cap = tg.capture.collect(model, tokens, hooks, max_points=args.max_points, seed=0, progress=False)
        ln_w = tg.capture.weight(model, "ln_final.w", optional=True)
        torch.save(
            {
                "acts": dict(cap.acts),
                "W_U": tg.capture.weight(model, "W_U").clone(),
                "ln_final_w": None if ln_w is None else ln_w.clone(),
                "hooks": hooks,
                "processing": tg.models.processing_name(model),
                "tokens_shape": list(tokens.shape),
            },
            path,
        )
        print(f"{kind}: collected {cap.n_points} points x {len(hooks)} hooks in {time.time() - t0:.1f} s", flush=True)
        del model, cap


def _overlap(A: torch.Tensor, B: torch.Tensor) -> float:
    """Mean squared cosine of the principal angles between span(A) and span(B): ‖AᵀB‖²_F / k."""
    return float((A.double().T @ B.double()).pow(2).sum() / A.shape[1])


def overlaps(data, k: int) -> dict[str, float]:
    """Top-k readout-subspace overlaps: raw vs processed, and vs each processing step alone."""
    import tl_geometry as tg

    W = data["raw"]["W_U"].double()
    w = data["raw"]["ln_final_w"].double()
    center = lambda M: M - M.mean(1, keepdim=True)  # noqa: E731  (center_unembed: mean over the vocabulary)
    V = {
        name: tg.readout_basis(M, k)
        for name, M in {
            "raw": W,
            "processed": data["processed"]["W_U"],
            "fold_ln": w[:, None] * W,
            "center_unembed": center(W),
            "fold_ln+center_unembed": center(w[:, None] * W),
        }.items()
    }
    rebuilt = float((center(w[:, None] * W) - data["processed"]["W_U"].double()).abs().max())
    return {
        "raw_vs_processed": _overlap(V["raw"], V["processed"]),
        "raw_vs_fold_ln": _overlap(V["raw"], V["fold_ln"]),
        "raw_vs_center_unembed": _overlap(V["raw"], V["center_unembed"]),
        "processed_vs_rebuilt": _overlap(V["processed"], V["fold_ln+center_unembed"]),
        "rebuilt_max_abs_diff": rebuilt,
    }


def score(out: Path, args, data) -> None:
    import tl_geometry as tg
    from tl_geometry.runtime.jobs import run_jobs

    readouts = {kind: tg.readout_basis(d["W_U"], args.k) for kind, d in data.items()}
    n_null = {"raw": args.n_null, "processed": args.n_null, "random": args.random_n_null}
    d_model = readouts["raw"].shape[0]
    bases = {n: tg.haar_bases(d_model, args.k, n, seed=0) for n in set(n_null.values())}
    jobs = [
        {
            "model": kind,
            "hook": h,
            "k": args.k,
            "n_null": n_null[kind],
            "ccr": list(args.ccr),
            "max_points": args.max_points,
        }
        for kind in KINDS
        for h in data[kind]["hooks"]
    ]

    def fn(p):
        t0 = time.process_time()
        H = data[p["model"]]["acts"][p["hook"]]
        V = readouts[p["model"]]
        prof = tg.pga_profile(H, V, ccrs=p["ccr"], null_bases=bases[p["n_null"]], seed=0)
        pc = tg.pc1_overlap(H, V)
        sp = tg.spectral_metrics(H)
        res = {f"z_ccr{c}": s.z for c, s in prof.items()}
        res.update({f"rho_ccr{c}": s.rho_read for c, s in prof.items()})
        res.update({f"nullmean_ccr{c}": s.null_mean for c, s in prof.items()})
        res.update(
            {
                "pc1_overlap": pc.overlap,
                "pc1_expected": pc.expected,
                "pc1_var": pc.explained_variance,
                "rankme": sp.rankme,
                "rankme_eig": sp.rankme_eig,
                "alpha_req": sp.alpha_req,
                "alpha_req_r2": sp.alpha_req_r2,
                "alpha_req_reptrix": sp.alpha_req_reptrix,
                "alpha_req_reptrix_r2": sp.alpha_req_reptrix_r2,
                "isotropy": sp.isotropy,
                "n_points": H.shape[0],
                "processing": data[p["model"]]["processing"],
                "cpu_s": time.process_time() - t0,
            }
        )
        return res

    for rec in run_jobs(jobs, fn, results=out / "profile.jsonl", progress=False):
        zs = " ".join(f"z{c}={rec[f'z_ccr{c}']:+7.2f}" for c in args.ccr)
        print(
            f"{rec['params']['model']:>9} {rec['params']['hook']:<26} {zs} pc1={rec['pc1_overlap']:.3f} "
            f"({rec['cpu_s']:.0f} s cpu)",
            flush=True,
        )


def records(out: Path) -> list[dict]:
    from tl_geometry.runtime.jobs import read_records

    return [r for r in read_records(out / "profile.jsonl") if r.get("status") == "ok"]


def _label(hook: str) -> str:
    if hook == "blocks.0.hook_resid_pre":
        return "embed"
    if hook == "unembed.hook_in":
        return "final norm"
    return hook.split(".")[1]


def table(out: Path, args, data) -> None:
    recs = records(out)
    by = {(r["params"]["model"], r["params"]["hook"]): r for r in recs}
    cols = [f"z_ccr{c}" for c in args.ccr]
    print(
        "| hook | "
        + " | ".join(f"raw z CCR-{c}" for c in args.ccr)
        + " | "
        + " | ".join(f"processed z CCR-{c}" for c in args.ccr)
        + " | random z CCR-"
        + "/".join(map(str, args.ccr))
        + " | PC1 overlap raw / processed | PC1 var | RankMe | α-ReQ (LS / reptrix) |"
    )
    for h in data["raw"]["hooks"]:
        t, p, r = by.get(("raw", h)), by.get(("processed", h)), by.get(("random", h))
        row = [f"{t[c]:+.2f}" if t else "" for c in cols] + [f"{p[c]:+.2f}" if p else "" for c in cols]
        row.append(" / ".join(f"{r[c]:+.2f}" for c in cols) if r else "")
        row.append(f"{t['pc1_overlap']:.3f} / {p['pc1_overlap']:.3f}" if t and p else "")
        row.append(f"{t['pc1_var']:.2f}" if t else "")
        row.append(f"{t['rankme']:.0f}" if t else "")
        row.append(f"{t['alpha_req']:.2f} / {t['alpha_req_reptrix']:.2f}" if t else "")
        print(f"| {_label(h)} | " + " | ".join(row) + " |")
    ov = overlaps(data, args.k)
    print(f"readout overlaps (top-{args.k}):", {k: round(v, 4) for k, v in ov.items()})
    cpu = sum(r.get("cpu_s", 0) for r in recs)
    print(
        f"scored {len(recs)} (model, hook) units; CPU {cpu:.0f} s; peak RSS "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB"
    )


def figures(out: Path, args, data, fig_dir: Path) -> None:
    """The doc figures: z and PC1 overlap by layer for each profile; a layer × model heatmap."""
    _util.headless_pyplot()
    import tl_geometry as tg
    from tl_geometry.families.pga.convergence import plot_trajectory
    from tl_geometry.families.pga.figures import plot_pga

    recs = records(out)
    name = {
        "raw": "trained, unprocessed (paper)",
        "processed": "trained, TL-processed (library)",
        "random": "random init",
    }
    preset = {"raw": "paper", "processed": "library", "random": "paper"}

    def rows_of(kind, checkpoint=False):
        rows = []
        for r in recs:
            if r["params"]["model"] != kind:
                continue
            h = r["params"]["hook"]
            tag = {"preset": preset[kind], "processing": r["processing"], "k": args.k}
            if checkpoint:
                tag["checkpoint"] = name[kind]
            for c in args.ccr:
                rows.append({"metric": "pga.z", "value": r[f"z_ccr{c}"], "hook": h, "extras": {**tag, "ccr": c}})
            rows.append(
                {
                    "metric": "pga.pc1_overlap",
                    "value": r["pc1_overlap"],
                    "hook": h,
                    "extras": {**tag, "expected": r["pc1_expected"]},
                }
            )
        return rows

    fig_dir.mkdir(parents=True, exist_ok=True)
    for kind, fname in (("raw", "pga_smollm2_paper.png"), ("processed", "pga_smollm2.png")):
        rep = tg.GeometryReport.from_rows(rows_of(kind), model=f"SmolLM2-135M ({name[kind]})", n_layers=30)
        fig = plot_pga(rep)
        fig.savefig(fig_dir / fname, dpi=110)
        print(f"wrote {fig_dir / fname}")
    # heatmap over the block outputs (the embed / final-norm hooks have no layer index)
    rows = [
        r
        for kind in ("random", "raw", "processed")
        for r in rows_of(kind, checkpoint=True)
        if r["hook"].endswith("hook_resid_post")
    ]
    fig = plot_trajectory(tg.GeometryReport.from_rows(rows, model="SmolLM2-135M"), ccr=1)
    fig.axes[0].set_xlabel("")
    fig.savefig(fig_dir / "pga_smollm2_random_vs_trained.png", dpi=110)
    print(f"wrote {fig_dir / 'pga_smollm2_random_vs_trained.png'}")


def main() -> None:
    ap = _util.make_parser(__doc__, repeats=False)
    ap.add_argument("--out", default=None, help="results directory (default out/pga_profile; --small: a temporary one)")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--n-null", type=int, default=50)
    ap.add_argument("--random-n-null", type=int, default=30)
    ap.add_argument("--ccr", type=int, nargs="+", default=[0, 1, 5])
    ap.add_argument("--max-points", type=int, default=1024)
    ap.add_argument("--n-seqs", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--layer-step", type=int, default=2, help="score every n-th block output (and the last)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--figures", default=None, help="write the doc figures into this directory")
    args = _util.parse_args(ap)
    if args.small:
        args.n_seqs, args.seq_len, args.max_points, args.n_null, args.random_n_null = 2, 64, 128, 5, 5
        args.k, args.ccr, args.layer_step = 16, [1], 15
    if args.out is None:
        args.out = tempfile.mkdtemp(prefix="pga_profile_") if args.small else "out/pga_profile"
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    collect(out, args)
    data = {kind: torch.load(out / f"acts_{kind}.pt", weights_only=True) for kind in KINDS}
    score(out, args, data)
    table(out, args, data)
    if args.figures:
        figures(out, args, data, Path(args.figures))
    print(f"wall {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
