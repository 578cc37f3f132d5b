#!/usr/bin/env python
"""Write the example notebooks in ``examples/`` from the cell sources below and execute them in place.

    python scripts/make_notebooks.py                  # all six: write, execute (nbclient), save with outputs
    python scripts/make_notebooks.py 03_pga 04        # only the notebooks whose name contains one of these
    python scripts/make_notebooks.py --no-execute     # write the sources only (outputs empty; for drafting)

``make notebooks`` runs the first form; a notebook whose committed cells are already what this
script generates (and were executed) is left byte for byte — outputs are regenerated only on
purpose, with ``--force`` (``make notebooks NB=--force``). The committed notebooks carry their outputs so that a
reader on the forge sees them; ``tests/unit/house/test_notebooks_current.py`` checks that their cells
are what this script generates and that every code cell was executed, and
``tests/integration/test_notebooks.py`` executes them again. Every notebook runs offline (the
kernel is this interpreter, with this checkout first on ``PYTHONPATH``, ``HF_HUB_OFFLINE=1``
and progress bars off). A notebook whose execution fails is not written: the script names the
notebook and the cell and exits 1, the committed file is left as it was.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]

SETUP = """import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")   # everything here runs offline
import warnings
warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", message=".*IProgress.*")   # progress bars fall back to text
import torch
import tl_geometry as tg"""

TINY = """from transformer_lens import HookedTransformer, HookedTransformerConfig

def tiny_model(n_layers=4, d_model=64, seed=0):
    \"\"\"A small random HookedTransformer (no download); swap in tg.models.load("smollm2-135m") for a real model.\"\"\"
    cfg = HookedTransformerConfig(n_layers=n_layers, d_model=d_model, d_head=16, n_heads=d_model // 16,
                                  d_mlp=4 * d_model, d_vocab=512, n_ctx=64, act_fn="gelu",
                                  normalization_type="LN", seed=seed)
    return HookedTransformer(cfg).eval()

model = tiny_model()
tokens = torch.randint(0, model.cfg.d_vocab, (8, 32), generator=torch.Generator().manual_seed(0))
model.cfg.n_layers, model.cfg.d_model, tokens.shape"""

NOTEBOOKS = {
    "01_quickstart.ipynb": [
        new_markdown_cell(
            "# Quickstart: how is SmolLM2-135M's latent space organized?\n\n"
            "`tl_geometry` measures a TransformerLens model's geometry with three papers' metrics "
            "(representational capacity, Subspace PGA, neural interaction). This notebook loads the "
            "offline SmolLM2-135M, runs a few metrics on a small batch of Python documentation, and "
            "renders the same report `tl-geometry report` writes."
        ),
        new_code_cell(SETUP),
        new_code_cell(
            'model = tg.models.load("smollm2-135m")            # offline; any HookedTransformer works\n'
            'tokens = tg.corpus.tokens(model, "pydoc", n_seqs=2, seq_len=32, seed=0)\n'
            "model.cfg.n_layers, model.cfg.d_model, tokens.shape"
        ),
        new_markdown_cell("Every metric is registered by name; `tg.analyze` runs any of them and merges the results."),
        new_code_cell("tg.list_metrics()"),
        new_code_cell(
            'hooks = tg.capture.resid_hooks(model, "post", layers=[0, 5, 10, 15, 20, 25, 29])\n'
            'report = tg.analyze(model, tokens, metrics=["epsilon", "capacity", "depth_width", "spectral"],\n'
            '                    options={"epsilon": {"matrices": ["W_E"]}, "capacity": {"matrices": ["W_E"]}},\n'
            "                    hooks=hooks, progress=False)\n"
            "report"
        ),
        new_markdown_cell("A report is one long table (plus provenance); pandas is one call away."),
        new_code_cell('df = report.to_pandas()\ndf[["hook", "layer", "metric", "value"]].head(12)'),
        new_markdown_cell("The plain-language reading puts each number next to the papers' numbers:"),
        new_code_cell(
            "from tl_geometry.render import readings\n"
            "for section, lines in readings.sections(report).items():\n"
            "    print(section)\n"
            "    for line in lines:\n"
            "        print('  -', line)"
        ),
        new_code_cell(
            "from tl_geometry.render import plotting\n"
            "fig = plotting.plot_spectral(report)   # a matplotlib Figure; shown inline in Jupyter"
        ),
        new_markdown_cell(
            "`write_outputs` writes what `tl-geometry report` writes: `report.json`, `report.md`, one PNG "
            "per figure and a self-contained `index.html`."
        ),
        new_code_cell(
            "import tempfile\n"
            "from tl_geometry.render.html import write_outputs\n"
            "out = tempfile.mkdtemp()\n"
            "index = write_outputs(report, out, force=True)\n"
            "sorted(p.name for p in index.parent.iterdir())"
        ),
    ],
    "02_capacity.ipynb": [
        new_markdown_cell(
            "# Representational capacity (arXiv 2606.02765)\n\n"
            "How many near-orthogonal directions fit in d dimensions? The paper measures "
            "ε = μ + 2σ of the pairwise cosines of a model's embedding rows and turns it into a "
            "capacity bound k(d, ε). Models split into **Class 2** (ε < 0.1: near-orthogonal rows, a "
            "meaningful bound) and **Class 1** (ε > 0.2: no near-orthogonal structure)."
        ),
        new_code_cell(SETUP),
        new_markdown_cell(
            "**A known answer first.** Random Gaussian vectors in d dimensions have cosines with mean 0 and "
            "standard deviation ≈ 1/√d, so ε ≈ 2/√d."
        ),
        new_code_cell(
            "d = 576\n"
            "st = tg.similarity_stats(torch.randn(4000, d, generator=torch.Generator().manual_seed(0)), progress=False)\n"
            "st.epsilon, 2 / d ** 0.5, st.model_class"
        ),
        new_markdown_cell(
            "**SmolLM2-135M's embedding, straight from its weights file** (no model load): "
            "the capacity statistics stream over the rows of the GGUF tensor."
        ),
        new_code_cell(
            "from tl_geometry import weights_reader\n"
            'row = weights_reader.embedding_capacity(tg.models.zoo_file("smollm2-135m"))\n'
            "row"
        ),
        new_markdown_cell(
            "The capacity formula k(d, ε) at a few ε for d = 576, in the paper's three forms. "
            "`tg.capacity` is the bare formula, for any ε in (0, 1):"
        ),
        new_code_cell(
            "import numpy as np\n"
            "eps = np.array([0.05, 0.1, 0.2])\n"
            '{form: tg.capacity(576, eps, form=form) for form in ("jl_random", "adjusted", "full")}'
        ),
        new_markdown_cell("And the inverse: the ε at which k directions fit in d dimensions."),
        new_code_cell('tg.capacity_epsilon(1_000_000, 576, form="full")'),
        new_markdown_cell(
            "**As the paper reports it.** The paper gives a capacity (a count) only for Class 2 embeddings "
            "(ε < 0.1); for the boundary and Class 1 it is *indeterminate*. `tg.capacity_estimate` applies "
            "that rule and also gives the authors' μ + 3σ figure; `tg.min_n` is the inverse in d (the "
            "smallest width that holds k directions at ε)."
        ),
        new_code_cell(
            "tg.capacity_estimate(4096, 0.0645), tg.capacity_estimate(576, 0.729).reason, tg.min_n(32000, 0.0645)"
        ),
        new_markdown_cell(
            "**Next to the published models.** The figure places SmolLM2's ε on the capacity curve "
            "of its width, with the 45 models of the paper's Table 1 at their own widths."
        ),
        new_code_cell(
            "from tl_geometry.render import plotting, readings\n"
            "est = tg.capacity_estimate(row.d_model, mean=row.mean, std=row.std)   # as the paper reports it\n"
            "print(est)\n"
            "report = tg.GeometryReport.from_rows(\n"
            '    [{"metric": "epsilon.W_E", "value": row.epsilon,\n'
            '      "extras": {"mean": row.mean, "std": row.std, "d": row.d_model, "n_vectors": row.vocab, "raw": True}},\n'
            '     {"metric": "capacity.W_E", "value": float("nan") if est.k is None else est.k,\n'
            '      "extras": {"form": "full", "preset": est.preset, "epsilon": row.epsilon, "d": row.d_model,\n'
            '                 "status": est.status, "reason": est.reason}}],\n'
            '    model="smollm2-135m")\n'
            'print("\\n".join(readings.read_capacity(report)))\n'
            "fig = plotting.plot_capacity_curve(report)"
        ),
        new_markdown_cell(
            'With a loaded model, `tg.embedding_epsilon(model, matrix="W_E", histogram=True)` also returns the '
            "exact histogram over all pairs, which `plotting.plot_cosine_histogram` draws with μ and ε."
        ),
        new_code_cell(
            'small = tg.similarity_stats(weights_reader.read_embedding(tg.models.zoo_file("smollm2-135m"))[:4096],\n'
            "                            histogram=True, progress=False)\n"
            "d = small.to_dict()\n"
            'r = tg.GeometryReport.from_rows([{"metric": "epsilon.W_E", "value": small.epsilon,\n'
            '                                  "extras": {k: d[k] for k in ("mean", "std", "n_vectors", "d", "histogram")}}],\n'
            '                                model="smollm2-135m (4096 rows)")\n'
            "fig = plotting.plot_cosine_histogram(r)"
        ),
    ],
    "03_pga.ipynb": [
        new_markdown_cell(
            "# Subspace PGA (arXiv 2605.17084)\n\n"
            "Is a layer's distance structure organized for the readout? Subspace PGA compares the rank "
            "correlation ρ_read between all pairwise cosine distances of the hidden states and those "
            "of their projection on the top-k readout directions (left singular vectors of W_U) with "
            "the same correlation for random k-subspaces: z = (ρ_read − mean ρ_null) / std ρ_null. "
            "CCR-c first removes the top c principal directions."
        ),
        new_code_cell(SETUP),
        new_markdown_cell(
            "**A known answer.** Hidden states whose variation lives inside the readout subspace give a "
            "large positive z; states whose variation is orthogonal to it give a negative z."
        ),
        new_code_cell(
            "g = torch.Generator().manual_seed(0)\n"
            "d, k, N = 64, 8, 120\n"
            "W_U = torch.randn(d, 500, generator=g)\n"
            "V = tg.readout_basis(W_U, k)                       # (d, k) orthonormal\n"
            "inside = torch.randn(N, k, generator=g) @ V.T + 0.05 * torch.randn(N, d, generator=g)\n"
            "P_perp = torch.eye(d) - V @ V.T\n"
            "outside = (torch.randn(N, d, generator=g) @ P_perp) + 0.05 * torch.randn(N, d, generator=g)\n"
            "z_in = tg.pga_score(inside, V, n_null=20, ccr=0).z\n"
            "z_out = tg.pga_score(outside, V, n_null=20, ccr=0).z\n"
            "float(z_in), float(z_out)"
        ),
        new_markdown_cell(
            '**On a model** (a tiny random one here). For the real thing as the paper does it, load the unprocessed model and use the paper preset: `raw = tg.models.load("smollm2-135m", processing="none")`, then `tg.pga(raw, tokens, preset="paper")` (raw hidden states and raw W_U at Hugging Face\'s `hidden_states` hooks). The default (`preset="library"`) scores the model as loaded — `tg.models.load(name)` applies TransformerLens\'s weight processing, which changes the readout subspace and can flip the sign of z. Every row records `preset` and `processing`.'
        ),
        new_code_cell(TINY),
        new_code_cell(
            "report = tg.pga(model, tokens[:4, :24], k=8, n_null=10, ccr=[0, 1, 5], max_points=96, progress=False)\n"
            'report.to_pandas().query("metric == \'pga.z\'")[["layer", "ccr", "value"]]'
        ),
        new_code_cell("from tl_geometry.render import plotting\nfig = plotting.plot_pga(report)"),
        new_markdown_cell(
            "**Spectral metrics** of the same activations: RankMe (Garrido et al.: entropy of the singular values; `rankme_eig` is the eigenvalue variant), α-ReQ (eigenvalue decay, by least squares over all ranks and as reptrix fits it: 1/i-weighted over ranks 11–100, each with R²), isotropy and condition number."
        ),
        new_code_cell("spec = tg.spectral(model, tokens, progress=False)\nfig = plotting.plot_spectral(spec)"),
        new_code_cell(
            "H = torch.randn(500, 32, generator=g) * torch.linspace(1, 0.1, 32)   # known, decaying spectrum\n"
            "tg.spectral_metrics(H)"
        ),
    ],
    "04_interaction.ipynb": [
        new_markdown_cell(
            "# Law of neural interaction (arXiv 2605.27989)\n\n"
            "The AGOP G = E[JᵀJ] of the model's Jacobian at a hook says which input directions the "
            "output is sensitive to; its **AOFE** (the off-diagonal Frobenius mass) measures how much "
            "coordinates interact. The paper also finds an efficient depth/width ratio "
            "R_D/W = n_layers / d_model in [0.023, 0.047] for byte-level TinyGPT."
        ),
        new_code_cell(SETUP),
        new_markdown_cell(
            "**Known answers.** A diagonal matrix has no off-diagonal mass; a rank-one all-ones matrix has ratio 1 − 1/d."
        ),
        new_code_cell(
            "d = 8\n"
            "diag = tg.aofe(torch.diag(torch.arange(1.0, d + 1)))\n"
            "ones = tg.aofe(torch.ones(d, d))\n"
            "(float(diag.ratio), float(ones.ratio), 1 - 1 / d)"
        ),
        new_code_cell(TINY),
        new_code_cell(
            "res = tg.agop(model, tokens[:4], n_probes=8, progress=False)\n"
            "{h: round(float(s.ratio), 3) for h, s in res.stats.items()}"
        ),
        new_markdown_cell(
            "The registered metric puts the same numbers in a report; the figure shows the ratio by layer with its probe standard error."
        ),
        new_code_cell(
            "from tl_geometry.render import plotting\n"
            'report = tg.analyze(model, tokens[:4], metrics=["agop", "depth_width"],\n'
            '                    options={"agop": {"n_probes": 8}}, progress=False)\n'
            "fig = plotting.plot_aofe(report)"
        ),
        new_markdown_cell("**Depth/width** of a few shapes, against the efficient interval:"),
        new_code_cell(
            "for L, d in [(30, 576), (12, 768), (5, 120), (6, 128)]:\n"
            '    r = tg.depth_width_ratio({"n_layers": L, "d_model": d})\n'
            '    print(f"{L:>2} layers x {d:>3}: R_D/W = {r:.4f}  in interval: {tg.in_efficient_interval(r)}")'
        ),
        new_markdown_cell(
            "**A tiny shape sweep.** The paper trains byte-level TinyGPTs of several shapes at a fixed "
            "parameter budget and finds the best test loss in the efficient interval. Here: one small "
            "budget, three depths, a few dozen steps (far too few to reproduce the paper; the "
            "`tl-geometry sweep shape` command runs the CPU-sized version, resumably)."
        ),
        new_code_cell(
            "import tempfile, os\n"
            "from tl_geometry.families.interaction import shape_sweep as ss\n"
            "cfg = ss.SweepConfig(budgets=(2e4,), depths=(1, 3), steps=4, batch_size=4, n_ctx=16,\n"
            '                     eval_seqs=4, n_agop_seqs=1, source="pydoc")\n'
            'records = ss.shape_sweep(cfg, os.path.join(tempfile.mkdtemp(), "sweep.jsonl"), progress=False)\n'
            "for r in records:\n"
            '    p = r["params"]\n'
            "    print(f\"depth {p['n_layers']} x width {p['d_model']}: R_D/W = {r['r_dw']:.3f}, \"\n"
            "          f\"test CE = {r['test_ce']:.3f} nats/byte, output-space AOFE ratio = {r['aofe_ratio_out']:.3f}\")"
        ),
    ],
    "05_sae.ipynb": [
        new_markdown_cell(
            "# SAE widths vs the capacity bound\n\n"
            "Sparse autoencoders ask a model's residual stream to hold d_sae feature directions. The "
            "capacity paper's bound k(d, ε) says how many near-orthogonal directions fit. This notebook "
            "reads SAE widths from sae_lens's offline directory and compares them with the bound "
            "(no SAE weights are downloaded)."
        ),
        new_code_cell(SETUP),
        new_code_cell('ws = tg.sae.widths("gemma-2-2b")\nlen(ws), ws[0]'),
        new_markdown_cell(
            "`compare` by model name uses the published ε of the host model (Gemma-2-2B: ε = 0.351, Class 1):"
        ),
        new_code_cell(
            'report = tg.sae.compare("gemma-2-2b", releases="gemma-scope-2b-pt-res-canonical")\n'
            "df = report.to_pandas()\n"
            'df[df.metric == "sae.d_sae"][["hook", "layer", "value"]].head()'
        ),
        new_code_cell(
            "from tl_geometry.render import plotting, readings\n"
            'print("\\n".join(readings.read_sae(report)))\n'
            "fig = plotting.plot_sae_widths(report)"
        ),
        new_markdown_cell(
            "**A local SAE on a local model.** `saes=[...]` also measures the decoder's own ε "
            "(here a random, untrained SAE on a tiny random model)."
        ),
        new_code_cell(TINY),
        new_code_cell(
            "from sae_lens import StandardSAE, StandardSAEConfig\n"
            "from sae_lens.saes.sae import SAEMetadata\n"
            "sae = StandardSAE(StandardSAEConfig(d_in=model.cfg.d_model, d_sae=512,\n"
            '                                    metadata=SAEMetadata(hook_name="blocks.1.hook_resid_post")))\n'
            "local = tg.sae.compare(model, saes=[sae])\n"
            'local.to_pandas()[["metric", "hook", "value"]]'
        ),
    ],
    "07_sae_trained.ipynb": [
        new_markdown_cell(
            "# An SAE trained here, measured end to end\n\n"
            "Published SAEs live on the Hugging Face hub, which this notebook does not need. Instead it trains a "
            "small SAE on SmolLM2-135M's early residual stream with **sae_lens's own training runner**, saves it "
            "with sae_lens, lays it out as a repository of a local Hugging Face cache, loads it back with "
            "`SAE.from_pretrained` (the code path a downloaded published SAE takes), and puts its decoder ε and "
            "width next to the capacity bound. Sizes are cut down to run in about a minute; "
            "`python scripts/sae_smollm2.py` trains the 4,608-latent version quoted in docs/sae.md."
        ),
        new_code_cell(SETUP),
        new_code_cell(
            'model = tg.models.load("smollm2-135m")\n'
            'tokens = tg.corpus.tokens(model, "shakespeare", n_seqs=128, seq_len=128, seed=0)\n'
            'hook = "blocks.3.hook_resid_post"\n'
            "tokens.shape"
        ),
        new_markdown_cell(
            "Train a TopK SAE (2× expansion, k = 16) with `LanguageModelSAETrainingRunner` "
            "(`override_model=` this model, `override_dataset=` the tokens in memory). A finished SAE in "
            "`out` is reused on a rerun."
        ),
        new_code_cell(
            "import logging\n"
            "from tl_geometry.families.sae import training as sae_training\n\n"
            "logging.getLogger(\"sae_lens\").setLevel(logging.ERROR)         # its 'override' notices\n"
            'warnings.filterwarnings("ignore", category=UserWarning, module="sae_lens.*")   # epoch notices\n'
            'path = sae_training.train_sae(model, tokens, hook=hook, out="sae", d_sae=1152, k=16,\n'
            "                              training_tokens=32_768, batch_tokens=512, lr=1e-3)\n"
            "sorted(p.name for p in path.iterdir())"
        ),
        new_markdown_cell("Publish it to a local hub cache and read it back through `SAE.from_pretrained`, offline:"),
        new_code_cell(
            "from huggingface_hub import constants\n"
            'constants.HF_HUB_CACHE = "hub"            # a cache folder next to this notebook\n'
            'repo, sae_id = sae_training.publish_to_cache(path, "local/smollm2-135m-saes")\n'
            "sae = tg.sae.load(repo, sae_id)\n"
            "type(sae).__name__, sae.cfg.d_in, sae.cfg.d_sae"
        ),
        new_markdown_cell(
            "Does it reconstruct held-out text (Python's docs) better than the mean? (fraction of variance unexplained)"
        ),
        new_code_cell(
            'held = tg.corpus.tokens(model, "pydoc", n_seqs=4, seq_len=128, seed=1)\n'
            "acts = tg.capture.collect(model, held, [hook], max_points=None, progress=False).acts[hook]\n"
            "with torch.no_grad():\n"
            "    rec = sae.decode(sae.encode(acts))\n"
            "float(((rec - acts) ** 2).sum() / ((acts - acts.mean(0)) ** 2).sum())"
        ),
        new_markdown_cell(
            "Its decoder ε next to the bound: the host's ε (W_E) decides whether the paper gives a count at all "
            "(SmolLM2 is Class 1: indeterminate); `sae.decoder_capacity` is the bound at the SAE's own packing."
        ),
        new_code_cell(
            'rep = tg.sae.compare(model, saes=[f"{repo}:{sae_id}"])\nrep.to_pandas()[["metric", "hook", "value"]]'
        ),
        new_code_cell(
            'row = rep.filter("sae.decoder_capacity").rows[0]\n'
            "print(f\"decoder ε = {row.extras['decoder_epsilon']:.4f} ({row.extras['decoder_class']}); \"\n"
            "      f\"capacity at that ε: {row.extras['status']} — {row.extras['reason'] or row.value}\")\n"
            'print(f"a random decoder of this shape: ε ≈ 2/√576 = {2 / 576 ** 0.5:.3f}")'
        ),
    ],
    "06_plugin_metric.ipynb": [
        new_markdown_cell(
            "# Write a plugin metric\n\n"
            "A metric is a function `fn(model, tokens, *, hooks=None, **options) -> GeometryReport`, "
            "registered under a name. Once registered it runs in `tg.analyze`, in "
            "`tl-geometry report --metrics <name>` and in sweeps, and its rows land in the same report as "
            "the built-ins. A package ships it through the entry-point group `tl_geometry.metrics`."
        ),
        new_code_cell(SETUP),
        new_code_cell(TINY),
        new_markdown_cell(
            "Read activations only through `tl_geometry.capture` (it validates hook names, removes its hooks "
            "even on errors, drops BOS/padding and works on `TransformerBridge` too); keep the math a pure "
            "function on tensors."
        ),
        new_code_cell(
            "from tl_geometry import capture\n\n"
            "def mean_norm(H: torch.Tensor) -> float:\n"
            '    """The math: mean L2 norm of the rows of H (n, d)."""\n'
            "    return float(H.norm(dim=-1).mean())\n\n"
            '@tg.register_metric("resid_norm", needs="activations", overwrite=True,\n'
            '                    description="mean L2 norm of the residual stream per layer")\n'
            "def resid_norm(model, tokens, *, hooks=None, max_points=512, seed=0):\n"
            '    """Mean L2 norm of the residual stream at each hook."""\n'
            '    hooks = capture.resid_hooks(model, "post") if hooks is None else capture.validate_hooks(model, hooks)\n'
            "    acts = capture.collect(model, tokens, hooks, max_points=max_points, seed=seed).acts\n"
            '    rows = [{"metric": "resid_norm", "hook": h, "value": mean_norm(acts[h])} for h in hooks]\n'
            "    return tg.GeometryReport.from_rows(rows, model=model, seed=seed)\n\n"
            '"resid_norm" in tg.list_metrics()'
        ),
        new_code_cell(
            'report = tg.analyze(model, tokens, metrics=["resid_norm", "depth_width"], progress=False)\n'
            'report.to_pandas()[["hook", "layer", "metric", "value"]]'
        ),
        new_markdown_cell("Check it against a slow, obvious reference (the habit every built-in metric follows):"),
        new_code_cell(
            "_, cache = model.run_with_cache(tokens)\n"
            'ref = cache["blocks.0.hook_resid_post"].norm(dim=-1).mean()   # no tokenizer, so no BOS position to drop\n'
            'got = report.value("resid_norm", hook="blocks.0.hook_resid_post")\n'
            "float(ref), got"
        ),
        new_markdown_cell("Bad input fails with a message that says what is valid:"),
        new_code_cell(
            'try:\n    tg.analyze(model, tokens, metrics=["resid_nrom"])\nexcept KeyError as e:\n    print(e)'
        ),
        new_code_cell('tg.unregister_metric("resid_norm")'),
    ],
}


KERNEL = "tl-geometry-notebooks"


def build(name: str):
    """The notebook ``name`` (cells only, no outputs; cell ids are stable: ``<stem>-<index>``)."""
    import copy

    cells = copy.deepcopy(NOTEBOOKS[name])
    for i, cell in enumerate(cells):
        cell["id"] = f"{name.split('_')[0]}-{i}"
    nb = new_notebook(
        cells=cells,
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
        },
    )
    nbformat.validate(nb)
    return nb


def _kernel_dir() -> Path:
    """A kernelspec for this interpreter, with this checkout first on PYTHONPATH, offline."""
    import json
    import os
    import sys
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="tlg_jupyter_"))
    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True)
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "tl_geometry examples",
                "language": "python",
                "env": {
                    "PYTHONPATH": path,
                    "HF_HUB_OFFLINE": "1",
                    "TRANSFORMERS_OFFLINE": "1",
                    "TQDM_DISABLE": "1",
                    "TOKENIZERS_PARALLELISM": "false",
                    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
                },
            }
        )
    )
    return root


def execute(nb, *, timeout: int = 600) -> float:
    """Run every cell of ``nb`` in place (a fresh kernel in a temporary working directory); seconds taken."""
    import os
    import tempfile
    import time

    from nbclient import NotebookClient

    os.environ["JUPYTER_PATH"] = str(_kernel_dir())
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tlg_nb_") as cwd:
        NotebookClient(
            nb, timeout=timeout, kernel_name=KERNEL, record_timing=False, resources={"metadata": {"path": cwd}}
        ).execute()
    # the committed file keeps the generic kernelspec, not the temporary one
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return time.perf_counter() - t0


def cells_of(nb) -> list[tuple[str, str]]:
    """(type, source) of every cell: what this script generates, outputs aside."""
    return [(c.cell_type, "".join(c.source)) for c in nb.cells]


def is_current(nb, path: Path, *, executed: bool) -> bool:
    """The committed notebook at ``path`` has exactly ``nb``'s cells (and, when ``executed``,
    every code cell carries an execution count): nothing to regenerate."""
    if not path.exists():
        return False
    try:
        old = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - an unreadable notebook is regenerated
        return False
    if cells_of(old) != cells_of(nb):
        return False
    return not executed or all(c.get("execution_count") is not None for c in old.cells if c.cell_type == "code")


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("only", nargs="*", help="notebooks whose name contains one of these (default: all)")
    ap.add_argument("--no-execute", action="store_true", help="write the sources only, outputs empty")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    ap.add_argument(
        "--force",
        action="store_true",
        help="execute and rewrite every selected notebook, even one whose cells are current "
        "(the default leaves those byte for byte: outputs are regenerated only on purpose)",
    )
    args = ap.parse_args(argv)
    names = [n for n in NOTEBOOKS if not args.only or any(o in n for o in args.only)]
    if not names:
        ap.error(f"no notebook matches {args.only}; notebooks: {', '.join(NOTEBOOKS)}")
    out = ROOT / "examples"
    out.mkdir(exist_ok=True)
    failed = []
    for name in names:
        nb = build(name)
        if not args.force and is_current(nb, out / name, executed=not args.no_execute):
            print(f"unchanged {name} (its cells are current; --force executes it again)")
            continue
        if not args.no_execute:
            try:
                took = execute(nb, timeout=args.timeout)
            except Exception as exc:  # noqa: BLE001 - a cell error, a cell timeout or a dead kernel: report, go on
                print(f"FAILED {name} (left unchanged): {type(exc).__name__}:\n{str(exc)[-3000:]}")
                failed.append(name)
                continue
            print(f"executed {name} in {took:.0f} s")
        tmp = out / (name + ".tmp")
        nbformat.write(nb, tmp)
        tmp.replace(out / name)  # atomic: an interrupted run never leaves half a notebook
        print("wrote", out / name)
    if failed:
        print(f"{len(failed)} notebook(s) failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
