"""Shared test helpers (not a test module): import them as ``from tests.helpers import ...``.

Three groups:

- **Tiny models** (no pretrained weights, no network): :func:`make_tiny_model` /
  :func:`tiny_config` (a ``HookedTransformer``, TransformerLens < 4; a test that calls them
  carries ``@pytest.mark.needs_hooked``), :func:`make_tiny_bridge` (a ``TransformerBridge``),
  :func:`make_byte_model` with :class:`ByteTokenizer` (real text without a download),
  :func:`run_with_leaf` (an activation made an autograd leaf, for slow gradient references), and
  :func:`load_script` for tests of ``scripts/``.
- **Sweeps** (sweep, crash/resume, determinism, memory): :func:`portable_tiny_model` (a
  HookedTransformer on TransformerLens 3.x, else a TransformerBridge) and :func:`tiny_loader`,
  importable by name as ``"tests.helpers:tiny_loader"`` from a subprocess or a Ray worker that
  has :data:`ROOT` on ``PYTHONPATH``. It reads the shape from the job's model name
  (``"tiny-L2"`` → 2 layers). Side channels for the crash test (environment variables):
  ``TLG_LOAD_LOG`` (append each loaded job's model name to this file, fsynced), ``TLG_HANG_ON``
  (a model name; loading it writes ``<TLG_LOAD_LOG>.hang`` and sleeps 300 s), ``TLG_FAIL_ON`` (a
  model name whose load raises ``RuntimeError("planned failure")``).
- **Declared families**: what the tests iterate instead of lists of names, so that a new family
  edits no test file: :func:`builtin_families`, :func:`builtin_metrics`, :func:`builtin_sections`,
  :func:`builtin_figures` (all read from ``tl_geometry.registry``).
- **Synthetic reports** for testing the rendering on its own: :func:`make_report` and the row
  builders, with the agreed row names and made-up (seeded) numbers in the shapes the metric
  families produce; ``make_report(families="all")`` adds :func:`declared_rows_of` (made-up rows in
  the declared shape) for every built-in family that no hand-written builder covers.
"""

from __future__ import annotations

import os
import re
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from tl_geometry.report import GeometryReport

#: The repository root: put it on ``PYTHONPATH`` for a subprocess that imports ``tests.helpers``.
ROOT = str(Path(__file__).resolve().parents[1])


# ----------------------------------------------------------------------------- tiny models
PAPER_SCALE_ENV = "TL_GEOMETRY_PAPER_SCALE"


def paper_scale(what: str, seconds: int):
    """Mark a test that reruns a paper-sized computation which ``tl-geometry reproduce --size cpu``
    also runs: skipped unless ``TL_GEOMETRY_PAPER_SCALE=1``. CI's 20-minute budget keeps the suite
    to tiny sizes; ``TL_GEOMETRY_PAPER_SCALE=1 pytest -m slow`` runs these too."""
    import pytest

    return pytest.mark.skipif(
        os.environ.get(PAPER_SCALE_ENV) != "1",
        reason=f"{what} at the paper's size (~{seconds} s; reproduce --size cpu runs it): set {PAPER_SCALE_ENV}=1",
    )


def _hooked_transformer_classes():
    try:
        from transformer_lens import HookedTransformer, HookedTransformerConfig
    except ImportError as exc:  # TransformerLens 4 removed them; bridge tests still run (ci/tl4)
        raise ImportError(
            "this test builds a HookedTransformer, which TransformerLens 4 removed: mark it "
            "@pytest.mark.needs_hooked (users of the tiny_model fixture are marked by tests/conftest.py), "
            "and the TL-4 lane deselects it"
        ) from exc
    return HookedTransformer, HookedTransformerConfig


#: The shape of the ``tiny_model`` fixture (:func:`make_tiny_model`, :func:`make_tiny_bridge`).
TINY_SHAPE = dict(
    n_layers=3,
    d_model=32,
    n_ctx=64,
    d_head=8,
    n_heads=4,
    d_mlp=64,
    d_vocab=101,
    act_fn="gelu",
    normalization_type="LN",
)


def tiny_config(**overrides):
    _, HookedTransformerConfig = _hooked_transformer_classes()

    return HookedTransformerConfig(**{**TINY_SHAPE, "seed": 0, **overrides})


def make_tiny_model(**overrides):
    HookedTransformer, _ = _hooked_transformer_classes()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        model = HookedTransformer(tiny_config(**overrides))
    return model.eval()


def make_tiny_bridge(**overrides):
    from transformer_lens.model_bridge import TransformerBridge

    kw = {**TINY_SHAPE, **overrides}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        bridge = TransformerBridge.boot_native(kw)
    return bridge.eval()


class ByteTokenizer:
    """A tokenizer for tiny models: UTF-8 bytes shifted by one (id 0 is BOS); no download."""

    bos_token_id = 0
    padding_side = "right"

    def encode(self, text, add_special_tokens=False):
        return [b + 1 for b in text.encode("utf-8")]


class WordTokenizer:
    """Another tokenizer for tiny models: one id per whitespace-separated word (crc32 mod 298, + 1;
    id 0 is BOS), so the same text has other tokens, and another count of them, than with
    :class:`ByteTokenizer` (a study's models each read the texts with their own tokenizer)."""

    bos_token_id = 0
    padding_side = "right"

    def encode(self, text, add_special_tokens=False):
        import zlib

        return [zlib.crc32(w.encode("utf-8")) % 298 + 1 for w in text.split()]


def make_byte_model(**overrides):
    """A tiny random model (d_vocab 300) with :class:`ByteTokenizer`, so real text can be tokenized."""
    m = make_tiny_model(d_vocab=300, **overrides)
    m.tokenizer = ByteTokenizer()
    return m


def run_with_leaf(model, tokens, hook: str):
    """Run ``model`` on ``tokens`` with the activation at ``hook`` replaced by a detached copy that
    requires grad: returns ``(output, leaf)``, so ``torch.autograd.grad(f(output), leaf)`` is the
    gradient at that activation (the slow reference the AGOP tests compare with)."""
    store = {}

    def keep(act, hook):
        store["leaf"] = act.detach().clone().requires_grad_(True)
        return store["leaf"]

    out = model.run_with_hooks(tokens, fwd_hooks=[(hook, keep)])
    return out, store["leaf"]


def load_script(name: str):
    """Import ``scripts/<name>.py`` (not a package) as a module, for tests of the scripts."""
    import importlib.util

    path = Path(ROOT) / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ----------------------------------------------------------------------------- sweeps
def has_hooked_transformer() -> bool:
    try:
        from transformer_lens import HookedTransformer  # noqa: F401
    except ImportError:
        return False
    return True


def portable_tiny_model(n_layers: int = 2, d_model: int = 16, seed: int = 0, *, bridge: bool = False):
    """A tiny random model: a HookedTransformer on TransformerLens 3.x, a TransformerBridge on 4.x
    (or with ``bridge=True``)."""
    kw = {**TINY_SHAPE, "n_layers": n_layers, "d_model": d_model, "n_ctx": 32, "d_head": 4, "d_mlp": 32, "d_vocab": 53}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(seed)
        if not bridge and has_hooked_transformer():
            from transformer_lens import HookedTransformer, HookedTransformerConfig

            model = HookedTransformer(HookedTransformerConfig(**kw, seed=seed))
        else:
            from transformer_lens.model_bridge import TransformerBridge

            model = TransformerBridge.boot_native(kw)
    return model.eval()


def _append_line(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (text + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def tiny_loader(job: dict):
    """Sweep loader: ``job["model"]`` like ``"tiny-L2"`` or ``"tiny-L3-d32"``."""
    name = job["model"]
    log = os.environ.get("TLG_LOAD_LOG")
    if log:
        _append_line(log, name)
    if name == os.environ.get("TLG_FAIL_ON"):
        raise RuntimeError("planned failure")
    if name == os.environ.get("TLG_HANG_ON"):
        _append_line(log + ".hang", name)
        time.sleep(300)
    m = re.fullmatch(r"tiny-L(\d+)(?:-d(\d+))?(?:-.*)?", name)
    if not m:
        raise ValueError(f"tiny_loader: unknown model name {name!r}")
    return portable_tiny_model(int(m.group(1)), int(m.group(2) or 16))


def byte_loader(job: dict):
    """Study loader: ``job["model"]`` like ``"byte-L2"`` or ``"byte-L3-d48"`` → :func:`make_byte_model`
    (a tiny random model that reads real text through :class:`ByteTokenizer`; ``"word-L3-d48"``: the
    same through :class:`WordTokenizer`); ``"byte-fail"`` raises."""
    name = job["model"]
    if name == "byte-fail":
        raise RuntimeError("planned failure: byte-fail does not load")
    hang = os.environ.get("TLG_HANG_ON")
    if name == hang:  # the crash test: say so, then wait to be killed
        _append_line(os.environ["TLG_LOAD_LOG"] + ".hang", name)
        time.sleep(300)
    m = re.fullmatch(r"(byte|word)-L(\d+)(?:-d(\d+))?", name)
    if not m:
        raise ValueError(f"byte_loader: unknown model name {name!r}")
    d = int(m.group(3) or 32)
    model = make_byte_model(n_layers=int(m.group(2)), d_model=d, d_head=8, n_heads=d // 8, seed=7).eval()
    if m.group(1) == "word":
        model.tokenizer = WordTokenizer()
    return model


# ----------------------------------------------------------------------------- declared families
def builtin_families() -> list:
    """Every built-in family (registered by ``tl_geometry.families``), in section order."""
    from tl_geometry import registry

    return [f for f in registry.families() if f.builtin]


def builtin_metrics(*, needs: str | None = None) -> list[str]:
    """Sorted names of the metrics the built-in families declare (only those with ``needs``, when given)."""
    from tl_geometry import registry

    names = {m for f in builtin_families() for m in f.metrics}
    return sorted(m for m in names if needs is None or registry.get_metric(m).needs == needs)


def builtin_sections() -> list[str]:
    """The section titles of the built-in families that have a section (a reading or a figure), in order."""
    return [f.section for f in builtin_families() if f.read is not None or f.figures]


def builtin_figures() -> list[str]:
    """The figure names of the built-in families, in section order."""
    return [fig.name for f in builtin_families() for fig in f.figures]


# ----------------------------------------------------------------------------- synthetic reports
N_LAYERS = 6
D_MODEL = 64


def synthetic_hooks(n_layers: int = N_LAYERS) -> list[str]:
    return ["hook_embed", *[f"blocks.{l}.hook_resid_post" for l in range(n_layers)], "ln_final.hook_normalized"]


def epsilon_rows(mean=0.35, std=0.19, d=D_MODEL, n=500, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i, mat in enumerate(("W_E", "W_U")):
        m = mean - 0.1 * i
        cos = np.clip(rng.normal(m, std, 20_000), -1, 1)
        counts, edges = np.histogram(cos, bins=300, range=(-1, 1))
        eps = m + 2 * std
        out.append(
            {
                "metric": f"epsilon.{mat}",
                "value": eps,
                "extras": {
                    "mean": m,
                    "std": std,
                    "n_vectors": n,
                    "n_dropped": 0,
                    "d": d,
                    "model_class": "class1",
                    "histogram": {"counts": counts.tolist(), "edges": edges.tolist()},
                },
            }
        )
        out.append(
            {"metric": f"capacity.{mat}", "value": 1.5e6 / (i + 1), "extras": {"form": "full", "epsilon": eps, "d": d}}
        )
    return out


def activation_rows(n_layers=N_LAYERS, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for j, h in enumerate(synthetic_hooks(n_layers)):
        out.append(
            {
                "metric": "epsilon_activations",
                "hook": h,
                "value": 0.5 + 0.05 * rng.standard_normal(),
                "extras": {
                    "mean": 0.3,
                    "std": 0.1,
                    "n_vectors": 256,
                    "n_dropped": 0,
                    "d": D_MODEL,
                    "model_class": "class1",
                },
            }
        )
        for ccr in (0, 1, 5):
            out.append(
                {
                    "metric": "pga.z",
                    "hook": h,
                    "value": float(10 * np.sin(j / 2) + ccr + rng.standard_normal()),
                    "extras": {
                        "ccr": ccr,
                        "k": 16,
                        "rho_read": 0.8,
                        "null_mean": 0.7,
                        "null_std": 0.01,
                        "n_points": 256,
                        "n_pairs": 32640,
                        "n_null": 20,
                    },
                }
            )
        out.append({"metric": "pga.rho_read", "hook": h, "value": 0.8, "extras": {"ccr": 0}})
        out.append(
            {
                "metric": "pga.pc1_overlap",
                "hook": h,
                "value": float(min(1, 0.1 + 0.1 * j)),
                "extras": {"expected": 16 / D_MODEL},
            }
        )
        out.append(
            {
                "metric": "id.twonn",
                "hook": h,
                "value": float(8 + 6 * np.sin(np.pi * j / max(1, n_layers)) + 0.2 * rng.standard_normal()),
                "extras": {"stderr": 0.4, "n_points": 256, "scale": 1.0 + j},
            }
        )
        for n1 in (1, 2, 4):
            out.append(
                {
                    "metric": "id.gride",
                    "hook": h,
                    "value": float(8 + 6 * np.sin(np.pi * j / max(1, n_layers)) - 0.5 * n1),
                    "extras": {"n1": n1, "n2": 2 * n1, "stderr": 0.3, "scale": (1.0 + j) * n1},
                }
            )
        out.append({"metric": "spectral.rankme", "hook": h, "value": 20.0 + j})
        out.append({"metric": "spectral.alpha_req", "hook": h, "value": 0.8 + 0.05 * j})
        out.append({"metric": "spectral.isotropy", "hook": h, "value": 0.2 - 0.01 * j})
        out.append({"metric": "spectral.condition_number", "hook": h, "value": 10.0 ** (2 + j / 3)})
        out.append(
            {
                "metric": "agop.aofe_ratio",
                "hook": h,
                "value": 0.6 + 0.03 * j,
                "extras": {"n_probes": 8, "stderr": 0.02, "space": "input"},
            }
        )
        out.append(
            {"metric": "agop.aofe", "hook": h, "value": 3.0, "extras": {"n_probes": 8, "stderr": 0.1, "space": "input"}}
        )
        out.append(
            {
                "metric": "agop.trace",
                "hook": h,
                "value": 5.0,
                "extras": {"n_probes": 8, "stderr": 0.1, "space": "input"},
            }
        )
    out.append(
        {
            "metric": "depth_width.ratio",
            "value": n_layers / D_MODEL,
            "extras": {"in_interval": False, "interval": [0.023, 0.047]},
        }
    )
    return out


def sae_rows():
    out = []
    for rel, widths in (("toy-res-a", (1024, 4096, 16384)), ("toy-res-b", (2048, 65536))):
        for l, w in enumerate(widths):
            hook = f"blocks.{l}.hook_resid_post"
            meta = {
                "release": rel,
                "sae_id": f"layer_{l}/width_{w}",
                "hook_name": hook,
                "width_source": "id",
                "epsilon_source": "W_E",
            }
            out.append({"metric": "sae.d_sae", "value": float(w), "extras": meta})
            out.append({"metric": "sae.capacity_ratio", "value": w / 1.5e6, "extras": meta})
    return out


def declared_rows_of(family, n_layers: int = N_LAYERS) -> list[dict]:
    """Made-up rows of every row ``family`` declares, in the declared shape: a per-hook row at every
    :func:`synthetic_hooks` hook, a per-model row once, a per-item row twice (at two hooks); every
    declared extras key set to 1.0, the value seeded by the row's position. The stand-in for a
    family without a hand-written builder: its figures and reading must draw from these."""
    hooks = synthetic_hooks(n_layers)
    out = []
    for i, spec in enumerate(family.rows):
        where = {"hook": hooks, "model": [None], "item": hooks[1:3]}[spec.per]
        for j, hook in enumerate(where):
            row = {"metric": spec.metric, "value": 1.0 + 0.1 * i + 0.05 * j, "extras": dict.fromkeys(spec.extras, 1.0)}
            if hook is not None:
                row["hook"] = hook
            out.append(row)
    return out


#: The groups of hand-written rows :func:`make_report` knows.
SYNTHETIC_GROUPS = ("capacity", "activations", "sae")


def make_report(*, families=SYNTHETIC_GROUPS, n_layers=N_LAYERS, **provenance) -> GeometryReport:
    """A synthetic report of the groups ``families`` (of :data:`SYNTHETIC_GROUPS`); ``"all"``: every
    group, plus :func:`declared_rows_of` each built-in family none of them covers (so that every
    built-in family, a new one too, has rows, a section and its figures)."""
    every = families == "all"
    if every:
        families = SYNTHETIC_GROUPS
    rows = []
    if "capacity" in families:
        rows += epsilon_rows()
    if "activations" in families:
        rows += activation_rows(n_layers)
    if "sae" in families:
        rows += sae_rows()
    if every:
        have = {r["metric"] for r in rows}
        for fam in builtin_families():
            if not any(r.metric in have for r in fam.rows):
                rows += declared_rows_of(fam, n_layers)
    prov = {"model": f"synthetic-{n_layers}L", "n_layers": n_layers, "d_model": D_MODEL}
    prov.update(provenance)
    return GeometryReport.from_rows(rows, model=prov["model"], provenance=prov)
