"""Which step turns Gemma-3-270M's Subspace PGA z negative under the library preset?

Gemma-3-270M (offline Q4_K_M GGUF) is loaded once with transformers; from that one Hugging Face
model the script builds the unprocessed HookedTransformer (``processing="none"``, the paper
preset) and then the TransformerLens-processed one (``processing="tl"``, the library default),
one at a time.

* Stage "collect": one seeded sample of ``--n-points`` positions of pydoc text (8 × 128 tokens)
  at every hook, from Hugging Face's own ``hidden_states`` and from both HookedTransformers; the
  readout bases of W_U for every combination of the two processing steps that touch it (none,
  fold_ln, center_unembed, both; TransformerLens skips center_writing_weights for RMSNorm models
  and Gemma has no biases for fold_value_biases), from the d × d Gram matrix of the raw W_U; the
  final norm's weight; and ``tg.pga`` end to end with both presets (their default hooks).
* Stage "smollm2": the same weight-side picture for SmolLM2-135M (where the presets agree in
  sign): the final norm's weight, the raw-vs-folded readout overlap, the outlier dimension.
* Stage "score": ``tg.pga_layer`` at CCR 0/1/5 for each (variant, hook) on shared Haar nulls
  (seed 0: the bases ``tg.pga`` draws), resumable (one JSON record per unit).
* Stage "outliers": per hook, the PC1 variance share of the centered hidden states, the largest
  coordinates, and PC1 ∈ readout (‖V_kᵀ p₁‖²) for each readout basis.

Variants (hidden states × readout basis):

* ``paper``: the unprocessed model's hidden states, raw W_U (``preset="paper"``);
* ``library``: the processed model's hidden states, processed W_U (``preset="library"``);
* ``H_tl×V_raw`` / ``H_raw×V_tl``: one of the two swapped;
* ``fold_ln`` / ``center_unembed``: raw hidden states, W_U with that one step applied;
* ``lens``: the final norm's weight applied to the hidden states too (h ⊙ (1 + w)) against the
  processed readout: the pair the unembedding itself multiplies (as the logit lens reads a layer).

Every hook is scored for every variant; ``paper`` marks Hugging Face's ``hidden_states`` (embeddings,
blocks 0 … n−2, the final normalized state), ``library`` every block output (0 … n−1).

Usage:
    python -m benchmarks.gemma_pga_processing [--n-points 512] [--n-null 20] [--k 100]
        [--work /tmp/gemma_pga] [--figures docs/img] [--no-smollm2]

Intermediate results live in ``--work``/<settings>/ (acts.pt, scores.json, outliers.json,
smollm2.json, summary.json): a re-run resumes, and with everything there it only prints.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import time
from pathlib import Path

import torch

from benchmarks import _util  # sets HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE

CCRS = (0, 1, 5)
EMBED = "blocks.0.hook_resid_pre"
FINAL = "unembed.hook_in"
BASES = ("raw", "fold_ln", "center_unembed", "tl")
"""Readout bases: W_U raw, diag(1 + w)·W_U (fold_ln), W_U − its mean over the vocabulary
(center_unembed), both (TransformerLens's processed W_U)."""
VARIANTS = {  # name: (hidden states, readout basis)
    "paper": ("none", "raw"),
    "library": ("tl", "tl"),
    "H_tl×V_raw": ("tl", "raw"),
    "H_raw×V_tl": ("none", "tl"),
    "fold_ln": ("none", "fold_ln"),
    "center_unembed": ("none", "center_unembed"),
    "lens": ("lens", "tl"),
}


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def hooks_of(n_layers: int) -> list[str]:
    """The embeddings, every block output, the final normalized state."""
    return [EMBED, *[f"blocks.{l}.hook_resid_post" for l in range(n_layers)], FINAL]


def label(hook: str) -> str:
    if hook == EMBED:
        return "embed"
    if hook == FINAL:
        return "final norm"
    return f"block {hook.split('.')[1]}"


def depth(hook: str, n_layers: int) -> float:
    """Relative depth: embeddings 0, block l's output (l + 1)/n, the final normalized state 1."""
    if hook == EMBED:
        return 0.0
    if hook == FINAL:
        return 1.0
    return (int(hook.split(".")[1]) + 1) / n_layers


def in_preset(variant: str, hook: str, n_layers: int) -> bool:
    """Is the hook one of the preset's default hooks (only for the two preset variants)?"""
    if variant == "paper":
        return hook != f"blocks.{n_layers - 1}.hook_resid_post"
    if variant == "library":
        return hook not in (EMBED, FINAL)
    return True


def gram_bases(W_U: torch.Tensor, w: torch.Tensor, k: int) -> tuple[dict, dict]:
    """Readout bases of every combination of fold_ln and center_unembed, from the raw W_U's Gram matrix.

    With G = W Wᵀ (d × d) and m the mean column: fold_ln is diag(w)·G·diag(w), center_unembed
    G − V·m mᵀ (the two commute); V_k are the top-k eigenvectors, as ``tg.readout_basis``.
    """
    W = W_U.double()
    G = W @ W.T
    m = W.mean(1)
    n_vocab = W.shape[1]
    del W
    w = w.double()
    Gc = G - n_vocab * torch.outer(m, m)
    grams = {"raw": G, "fold_ln": w[:, None] * G * w[None, :], "center_unembed": Gc, "tl": w[:, None] * Gc * w[None, :]}
    V, info = {}, {}
    for name, M in grams.items():
        evals, evecs = torch.linalg.eigh(M)
        order = torch.argsort(evals, descending=True)
        evals = evals[order].clamp_min(0)
        V[name] = evecs[:, order[:k]]
        info[name] = {
            "top_singular": evals[:8].sqrt().tolist(),
            "energy_top_k": float(evals[:k].sum() / evals.sum()),
            "row_norms": M.diagonal().sqrt().tolist(),  # W_U's norm along each residual dimension
        }
    return V, info


def overlap(A: torch.Tensor, B: torch.Tensor) -> float:
    """Mean squared cosine of the principal angles between span(A) and span(B): ‖AᵀB‖²_F / k."""
    return float((A.double().T @ B.double()).pow(2).sum() / A.shape[1])


def _pga_z(report) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    for r in report.rows:
        if r.metric == "pga.z":
            out.setdefault(r.hook, {})[int(r.extras["ccr"])] = float(r.value)
    return out


def _wait_for_memory(gb: float = 10.0) -> None:
    """Gemma's load peaks at several GB on a shared machine: wait until ``gb`` are available."""
    import psutil

    while psutil.virtual_memory().available < gb * 2**30:
        print(f"waiting for {gb:.0f} GB of free memory …", flush=True)
        time.sleep(30)


def collect(work: Path, args) -> dict:
    """Stage 1: one Hugging Face load, both HookedTransformers in turn; saves acts.pt."""
    path = work / "acts.pt"
    if path.exists():
        return torch.load(path, weights_only=False)
    import tl_geometry as tg

    _wait_for_memory()
    t0 = time.time()
    hf, tok = tg.models.load_hf_gguf(tg.models.weights_file("gemma-3-270m"))
    t_load = time.time() - t0
    print(f"gemma: loaded the GGUF with transformers in {t_load:.0f} s (peak RSS {_peak_gb():.1f} GB)", flush=True)
    with torch.no_grad():
        checksum = float(sum(p.double().abs().sum() for p in hf.parameters()))
    data: dict = {"timing": {"hf_load_s": t_load}, "settings": vars(args).copy()}
    data["settings"] = {k: str(v) for k, v in data["settings"].items()}
    data["w_final_param"] = hf.model.norm.weight.detach().float().clone()  # Gemma's RMSNorm: x̂·(1 + w)
    data["embed_scale"] = float(getattr(hf.model.embed_tokens, "embed_scale", float("nan")))

    for processing in ("none", "tl"):
        t1 = time.time()
        model = tg.models.from_hf(hf, tok, name="gemma-3-270m", processing=processing)
        data["n_layers"] = n_layers = int(model.cfg.n_layers)
        hooks = hooks_of(n_layers)
        if processing == "none":
            tokens = tg.corpus.tokens(model, "pydoc", n_seqs=args.n_seqs, seq_len=args.seq_len, seed=0)
            mask = tg.capture.sample_positions(model, tokens, args.n_points, seed=0)
            data["tokens_shape"] = list(tokens.shape)
            with torch.no_grad():  # Hugging Face's own hidden_states (the base model: no 262k-wide logits)
                out = hf.model(input_ids=tokens, output_hidden_states=True)
            data["hf_hidden_states"] = [h[mask].float().clone() for h in out.hidden_states]
            del out
        cap = tg.capture.collect(
            model,
            tokens,
            [*hooks, "hook_embed"],
            max_points=args.n_points,
            seed=0,
            progress=False,
        )
        W_U = tg.capture.weight(model, "W_U").detach()
        entry = {"acts": {h: a.float().clone() for h, a in cap.acts.items()}, "hooks": hooks}
        ln_w = tg.capture.weight(model, "ln_final.w", optional=True)
        entry["ln_final_w"] = None if ln_w is None else ln_w.detach().float().clone()
        if processing == "none":
            data["V"], data["W_info"] = gram_bases(W_U, entry["ln_final_w"], args.k)
            data["V_readout_basis_raw"] = tg.readout_basis(W_U, args.k).double()  # the library's own function
            data["W_U_mean_norm"] = float(W_U.double().mean(1).norm())
            data["W_U_col_norm_median"] = float(W_U.norm(dim=0).median())
            w = entry["ln_final_w"].double()
        else:
            # TL's processed W_U against fold_ln + center_unembed applied by hand to the raw W_U
            V_model = tg.readout_basis(W_U, args.k).double()
            data["V_tl_model_vs_rebuilt"] = overlap(V_model, data["V"]["tl"])
            # center_unembed commutes with the row scaling of fold_ln: diag(1/w)·W_U_tl = center(W_U_raw)
            V_unfolded = tg.readout_basis(W_U.double() / w[:, None], args.k).double()
            data["V_unfolded_vs_center_unembed"] = overlap(V_unfolded, data["V"]["center_unembed"])
        preset = "paper" if processing == "none" else "library"
        t2 = time.time()
        rep = tg.pga(
            model,
            tokens,
            preset=preset,
            ccr=list(CCRS),
            n_null=args.n_null,
            max_points=args.n_points,
            seed=0,
            progress=False,
        )
        entry["tg_pga"] = {"preset": preset, "z": _pga_z(rep), "seconds": time.time() - t2}
        entry["processing_name"] = tg.models.processing_name(model)
        data[processing] = entry
        data["timing"][f"{processing}_s"] = time.time() - t1
        print(
            f"gemma {processing}: built, gathered, tg.pga(preset={preset!r}) in {time.time() - t1:.0f} s "
            f"(peak RSS {_peak_gb():.1f} GB)",
            flush=True,
        )
        del model, cap, W_U, rep
        gc.collect()
    with torch.no_grad():
        data["hf_unchanged"] = abs(float(sum(p.double().abs().sum() for p in hf.parameters())) - checksum) < 1e-6
    del hf, tok
    gc.collect()
    data["timing"]["collect_s"] = time.time() - t0
    data["peak_rss_gb_collect"] = _peak_gb()
    torch.save(data, path)
    return data


def _outlier_row(H: torch.Tensor, V: dict, w: torch.Tensor) -> dict:
    """PC1 share, the largest coordinates, PC1 ∈ each readout basis, for one hook's hidden states."""
    H = H.double()
    Hc = H - H.mean(0)
    _, S, Vh = torch.linalg.svd(Hc, full_matrices=False)
    var = S**2 / (S**2).sum()
    p1 = Vh[0]
    mean_abs = H.abs().mean(0)
    coord_var = Hc.pow(2).sum(0) / Hc.pow(2).sum()
    top = torch.argsort(mean_abs, descending=True)[:3].tolist()
    top_var = int(torch.argmax(coord_var))
    return {
        "pc1_share": float(var[0]),
        "pc2_share": float(var[1]),
        "top_dims": top,
        "top_mean_abs": [float(mean_abs[i]) for i in top],
        "median_abs": float(mean_abs.median()),
        "top_var_dim": top_var,
        "top_var_share": float(coord_var[top_var]),
        "pc1_on_top_var_dim": float(p1[top_var] ** 2),
        "w_at_top_var_dim": float(w[top_var]),
        "pc1_overlap": {b: float((V[b].T @ p1).pow(2).sum()) for b in V},
    }


def hidden(data: dict, source: str, hook: str) -> torch.Tensor:
    """Hidden states of one source: "none", "tl", or "lens" (the processed model's, times 1 + w)."""
    if source == "lens":
        return data["tl"]["acts"][hook] * data["none"]["ln_final_w"]
    return data[source]["acts"][hook]


def outliers(work: Path, data: dict) -> dict:
    path = work / "outliers.json"
    if path.exists():
        return json.loads(path.read_text())
    w = data["none"]["ln_final_w"].double()
    out = {
        src: {h: _outlier_row(hidden(data, src, h), data["V"], w) for h in data["none"]["hooks"]}
        for src in ("none", "tl", "lens")
    }
    path.write_text(json.dumps(out, indent=1))
    return out


def score(work: Path, data: dict, args) -> dict:
    """Stage "score": z at CCR 0/1/5 for every (variant, hook); one record per unit in scores.json."""
    import tl_geometry as tg

    path = work / "scores.json"
    done = json.loads(path.read_text()) if path.exists() else {}
    bases = tg.haar_bases(data["V"]["raw"].shape[0], args.k, args.n_null, seed=0)
    for variant, (src, basis) in VARIANTS.items():
        for h in data["none"]["hooks"]:
            key = f"{variant}|{h}"
            if key in done:
                continue
            t0 = time.process_time()
            prof, pc = tg.pga_layer(hidden(data, src, h), data["V"][basis], ccrs=CCRS, null_bases=bases, seed=0)
            done[key] = {
                "z": {str(c): s.z for c, s in prof.items()},
                "rho_read": {str(c): s.rho_read for c, s in prof.items()},
                "null_mean": {str(c): s.null_mean for c, s in prof.items()},
                "pc1_overlap": pc.overlap,
                "pc1_share": pc.explained_variance,
                "cpu_s": time.process_time() - t0,
            }
            path.write_text(json.dumps(done, indent=1))
            z = " ".join(f"{prof[c].z:+8.2f}" for c in CCRS)
            print(f"  {variant:<15} {label(h):<11} z {z}", flush=True)
    return done


def smollm2(work: Path, args) -> dict | None:
    """The weight-side contrast on SmolLM2-135M (the presets agree in sign there)."""
    path = work / "smollm2.json"
    if path.exists():
        return json.loads(path.read_text())
    import tl_geometry as tg

    try:
        gguf = tg.models.zoo_file("smollm2-135m")
    except Exception as exc:  # noqa: BLE001 (optional package)
        print(f"smollm2: skipped ({exc})")
        return None
    t0 = time.time()
    hf, tok = tg.models.load_hf_gguf(gguf)
    model = tg.models.from_hf(hf, tok, name="smollm2-135m", processing="none")
    del hf
    gc.collect()
    model.cfg.default_prepend_bos = True
    n = int(model.cfg.n_layers)
    tokens = tg.corpus.tokens(model, "pydoc", n_seqs=args.n_seqs, seq_len=args.seq_len, seed=0)
    hooks = hooks_of(n)
    cap = tg.capture.collect(model, tokens, hooks, max_points=args.n_points, seed=0, progress=False)
    w = tg.capture.weight(model, "ln_final.w").detach().double()
    V, info = gram_bases(tg.capture.weight(model, "W_U").detach(), w, args.k)
    k = args.k
    big = torch.argsort(w, descending=True)[:k]
    outl_rows = {h: _outlier_row(cap.acts[h], V, w) for h in hooks}
    out = {
        "w_quantiles": {str(q): float(torch.quantile(w, q)) for q in (0.0, 0.1, 0.5, 0.9, 1.0)},
        "w": weight_stats(w, {h: o for h, o in outl_rows.items()}),
        "overlaps": {b: overlap(V["raw"], V[b]) for b in BASES},
        "share_on_top_w_axes": {b: float((V[b][big] ** 2).sum() / k) for b in BASES},
        "outliers": outl_rows,
        "seconds": time.time() - t0,
    }
    del model, cap
    gc.collect()
    path.write_text(json.dumps(out, indent=1))
    print(f"smollm2: weight-side contrast in {out['seconds']:.0f} s", flush=True)
    return out


def weight_stats(w: torch.Tensor, outl: dict) -> dict:
    """The final norm's weight: its spread, and its value at the massive-activation dimensions.

    A massive dimension: the single coordinate carrying most of a block output's variance
    (share > 0.3 at some block output).
    """
    a = w.abs().double()
    shares: dict[int, float] = {}
    for h, o in outl.items():
        if h.endswith("hook_resid_post") and o["top_var_share"] > 0.3:
            shares[o["top_var_dim"]] = max(shares.get(o["top_var_dim"], 0.0), o["top_var_share"])
    dims = sorted(shares, key=shares.get, reverse=True)
    return {
        "abs_max_over_min": float(a.max() / a.min()),
        "argmin_abs": int(torch.argmin(a)),
        "median_abs": float(a.median()),
        "massive_dims": dims,
        "massive_dims_max_var_share": [shares[d] for d in dims],
        "w_at_massive_dims": [float(w[d]) for d in dims],
        "abs_w_at_massive_over_median": [float(a[d] / a.median()) for d in dims],
        "rank_of_massive_dims_by_abs_w": [int((a < a[d]).sum()) for d in dims],  # 0: the smallest
    }


def checks(data: dict) -> dict:
    """What is the same in both models, and the library's own numbers against this script's."""
    hooks = data["none"]["hooks"]
    hf_hooks = [EMBED, *hooks[1:-2], FINAL]  # Hugging Face's hidden_states, in order
    rel = lambda a, b: float((a - b).norm() / b.norm())  # noqa: E731
    out = {
        "hf_vs_tl_none_max_rel": max(
            rel(data["hf_hidden_states"][i], data["none"]["acts"][h]) for i, h in enumerate(hf_hooks)
        ),
        "tl_vs_none_block_outputs_max_rel": max(
            rel(data["tl"]["acts"][h], data["none"]["acts"][h]) for h in hooks if h != FINAL
        ),
        "tl_final_times_w_vs_none_final_rel": rel(
            data["tl"]["acts"][FINAL] * data["none"]["ln_final_w"], data["none"]["acts"][FINAL]
        ),
        "hook_embed_is_resid_pre": bool(torch.equal(data["none"]["acts"]["hook_embed"], data["none"]["acts"][EMBED])),
        "embed_scale": data["embed_scale"],
        "V_readout_basis_vs_gram_raw": overlap(data["V_readout_basis_raw"], data["V"]["raw"]),
        "V_tl_model_vs_rebuilt": data["V_tl_model_vs_rebuilt"],
        "V_unfolded_vs_center_unembed": data["V_unfolded_vs_center_unembed"],
        "hf_weights_unchanged": data["hf_unchanged"],
    }
    return out


def summarize(data: dict, scores: dict, outl: dict, smol: dict | None, args) -> dict:
    w = data["none"]["ln_final_w"].double()
    k = args.k
    big = torch.argsort(w, descending=True)[:k]
    V = data["V"]
    massive = weight_stats(w, outl["none"])["massive_dims"]
    tgz = {}  # |Δz| between tg.pga and this script on the presets' own hooks
    for proc, variant in (("none", "paper"), ("tl", "library")):
        for h, zs in data[proc]["tg_pga"]["z"].items():
            for c, z in zs.items():
                tgz[f"{variant}|{h}|{c}"] = abs(z - scores[f"{variant}|{h}"]["z"][str(c)])
    return {
        "checks": checks(data),
        "max_abs_dz_vs_tg_pga": max(tgz.values()),
        "w": {
            "quantiles": {str(q): float(torch.quantile(w, q)) for q in (0.0, 0.1, 0.5, 0.9, 1.0)},
            **weight_stats(w, outl["none"]),
        },
        "overlaps": {b: overlap(V["raw"], V[b]) for b in BASES},
        "share_on_top_w_axes": {b: float((V[b][big] ** 2).sum() / k) for b in BASES},
        "massive_dims_in_readout": {b: [float((V[b][m] ** 2).sum()) for m in massive] for b in BASES},
        "energy_top_k": {b: data["W_info"][b]["energy_top_k"] for b in BASES},
        "W_U_mean_norm_over_median_column": data["W_U_mean_norm"] / data["W_U_col_norm_median"],
        "smollm2": None
        if smol is None
        else {key: smol[key] for key in ("w_quantiles", "w", "overlaps", "share_on_top_w_axes")},
        "timing": data["timing"],
        "peak_rss_gb_collect": data["peak_rss_gb_collect"],
        "score_cpu_s": sum(r["cpu_s"] for r in scores.values()),
    }


def table(data: dict, scores: dict, outl: dict, summ: dict, smol: dict | None) -> None:
    n = data["n_layers"]
    hooks = data["none"]["hooks"]
    print("\n# z at CCR 0/1/5 by hook and variant; PC1 share and PC1 ∈ readout for the variant's hidden states / basis")
    print(f"{'hook':<11} {'variant':<15} {'z CCR-0':>8} {'CCR-1':>8} {'CCR-5':>8} {'PC1 share':>9} {'PC1∈V':>7}")
    for h in hooks:
        for variant in VARIANTS:
            r = scores[f"{variant}|{h}"]
            star = "" if in_preset(variant, h, n) else "  (not a default hook of the preset)"
            z = " ".join(f"{r['z'][str(c)]:+8.2f}" for c in CCRS)
            print(f"{label(h):<11} {variant:<15} {z} {r['pc1_share']:>9.3f} {r['pc1_overlap']:>7.3f}{star}")
    print("\n# outlier dimensions (unprocessed hidden states; the processed model's block outputs are the same)")
    print(
        f"{'hook':<11} {'PC1':>6} {'top |h| dims (mean |h|)':<42} {'median':>7} {'var dim':>7} {'share':>6} "
        f"{'1+w':>6} {'PC1∈V raw':>9} {'fold':>6} {'center':>6} {'tl':>6}"
    )
    for h in hooks:
        o = outl["none"][h]
        tops = ", ".join(f"{d} ({v:,.0f})" for d, v in zip(o["top_dims"], o["top_mean_abs"], strict=True))
        ov = o["pc1_overlap"]
        print(
            f"{label(h):<11} {o['pc1_share']:>6.3f} {tops:<42} {o['median_abs']:>7.1f} {o['top_var_dim']:>7d} "
            f"{o['top_var_share']:>6.3f} {o['w_at_top_var_dim']:>6.2f} {ov['raw']:>9.3f} {ov['fold_ln']:>6.3f} "
            f"{ov['center_unembed']:>6.3f} {ov['tl']:>6.3f}"
        )
    print("\n# summary")
    print(json.dumps({k: v for k, v in summ.items()}, indent=1))
    if smol is not None:
        print("\n# SmolLM2-135M outlier picture (unprocessed)")
        for h, o in smol["outliers"].items():
            print(
                f"{label(h):<11} PC1 {o['pc1_share']:.3f} var dim {o['top_var_dim']} ({o['top_var_share']:.3f}, "
                f"w {o['w_at_top_var_dim']:.2f}) PC1∈V raw {o['pc1_overlap']['raw']:.3f} fold "
                f"{o['pc1_overlap']['fold_ln']:.3f} tl {o['pc1_overlap']['tl']:.3f}"
            )


def figures(data: dict, scores: dict, outl: dict, summ: dict, fig_dir: Path, args) -> None:
    plt = _util.headless_pyplot()
    n = data["n_layers"]
    hooks = data["none"]["hooks"]
    fig_dir.mkdir(parents=True, exist_ok=True)

    styles = {
        "paper": dict(color="C0", lw=2, marker="o", ms=3, label="paper preset (raw W_U)"),
        "library": dict(color="C3", lw=2, marker="s", ms=3, label="library preset (TL-processed W_U)"),
        "center_unembed": dict(color="C2", lw=1, ls="--", label="raw H, center_unembed only"),
        "fold_ln": dict(color="C1", lw=1, ls="--", label="raw H, fold_ln only"),
        "lens": dict(color="C4", lw=1, ls=":", label="H⊙(1+w), TL-processed W_U"),
    }
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), sharey=True)
    for ax, c in zip(axes, CCRS, strict=True):
        for variant, st in styles.items():
            hs = [h for h in hooks if in_preset(variant, h, n)]
            ax.plot([depth(h, n) for h in hs], [scores[f"{variant}|{h}"]["z"][str(c)] for h in hs], **st)
        ax.axhline(0, color="k", lw=0.6)
        ax.axhspan(-2, 2, color="0.85", zorder=0)
        ax.set_yscale("symlog", linthresh=10)
        ax.set_title(f"CCR-{c}")
        ax.set_xlabel("relative depth (embeddings 0, block l: (l+1)/n, final norm 1)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Subspace PGA z (symlog)")
    axes[0].legend(fontsize=7, loc="lower left")
    fig.suptitle(
        f"Gemma-3-270M: PGA z by depth, paper vs library preset ({args.n_points} points, {args.n_null} nulls, "
        f"k={args.k}; grey: |z| < 2)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(fig_dir / "gemma_pga_presets.png", dpi=110)
    plt.close(fig)
    print(f"wrote {fig_dir / 'gemma_pga_presets.png'}")

    w = data["none"]["ln_final_w"].double()
    massive = summ["w"]["massive_dims"]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    xs = [depth(h, n) for h in hooks]
    for src, mk, name in (("none", "o", "unprocessed"), ("tl", "x", "TL-processed")):
        axes[0].plot(xs, [outl[src][h]["pc1_share"] for h in hooks], marker=mk, ms=4, label=f"PC1 share, {name}")
    axes[0].plot(
        xs,
        [outl["none"][h]["top_var_share"] for h in hooks],
        ls="--",
        color="C2",
        label="largest single coordinate's share (dims " + ", ".join(map(str, massive)) + ")",
    )
    axes[0].set_title("variance of the centered hidden states")
    axes[0].set_ylim(0, 1)
    axes[0].legend(fontsize=7)
    for src, basis, st, name in (
        ("none", "raw", dict(color="C0", marker="o"), "unprocessed H, raw W_U (paper)"),
        ("tl", "tl", dict(color="C3", marker="x"), "processed H, processed W_U (library)"),
        ("none", "center_unembed", dict(color="C2", ls="--"), "raw H, center_unembed only"),
        ("none", "fold_ln", dict(color="C1", ls="--"), "raw H, fold_ln only"),
    ):
        axes[1].plot(xs, [outl[src][h]["pc1_overlap"][basis] for h in hooks], ms=4, label=name, **st)
    axes[1].axhline(args.k / w.numel(), color="k", lw=0.8, ls=":", label=f"chance k/d = {args.k / w.numel():.3f}")
    axes[1].set_title("PC1 ∈ readout subspace, ‖V_kᵀ p₁‖²")
    axes[1].set_ylim(0, 1.02)
    axes[1].legend(fontsize=7)
    for ax in axes[:2]:
        ax.set_xlabel("relative depth (embeddings 0, block l: (l+1)/n, final norm 1)")
        ax.grid(alpha=0.3)
    order = torch.argsort(w, descending=True)
    axes[2].semilogy(range(w.numel()), w[order].numpy(), color="C1")
    for m, mk in zip(massive, ("rv", "m^", "ks", "bD"), strict=False):
        rank = int((order == m).nonzero())
        axes[2].plot([rank], [float(w[m])], mk, label=f"massive dim {m}: 1 + w = {float(w[m]):.2f}")
    axes[2].axhline(float(w.median()), color="0.5", lw=0.8, ls=":", label=f"median {float(w.median()):.2f}")
    axes[2].set_title("final norm's weight 1 + w (fold_ln's row scale of W_U)")
    axes[2].set_xlabel("residual dimension, sorted")
    axes[2].legend(fontsize=7)
    axes[2].grid(alpha=0.3)
    fig.suptitle(
        "Gemma-3-270M: the massive-activation dimensions, PC1 in the readout subspace, the final norm's weight",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(fig_dir / "gemma_outliers.png", dpi=110)
    plt.close(fig)
    print(f"wrote {fig_dir / 'gemma_outliers.png'}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-points", type=int, default=512, help="token positions sampled (shared by every hook)")
    p.add_argument("--n-null", type=int, default=20, help="Haar-random null subspaces")
    p.add_argument("--k", type=int, default=100, help="readout subspace dimension")
    p.add_argument("--n-seqs", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--work", type=Path, default=Path("/tmp/gemma_pga"), help="intermediate results (resumable)")
    p.add_argument("--figures", type=Path, default=None, help="write gemma_pga_presets.png and gemma_outliers.png")
    p.add_argument("--no-smollm2", action="store_true", help="skip the SmolLM2-135M contrast")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.time()
    work = args.work / f"n{args.n_points}-null{args.n_null}-k{args.k}-{args.n_seqs}x{args.seq_len}"
    work.mkdir(parents=True, exist_ok=True)
    data = collect(work, args)
    smol = None if args.no_smollm2 else smollm2(work, args)
    t1 = time.time()
    scores = score(work, data, args)
    outl = outliers(work, data)
    t_score = time.time() - t1
    summ = summarize(data, scores, outl, smol, args)
    table(data, scores, outl, summ, smol)
    (work / "summary.json").write_text(json.dumps(summ, indent=1))
    if args.figures:
        figures(data, scores, outl, summ, args.figures, args)
    print(
        f"\nwall {time.time() - t0:.0f} s this run (scoring + outliers {t_score:.0f} s); "
        f"peak RSS {_peak_gb():.1f} GB this run; collect {data['timing']['collect_s']:.0f} s at peak "
        f"{data['peak_rss_gb_collect']:.1f} GB; results in {work}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
