"""A study across models: the report's metrics on every model, the same texts, side by side.

``tg.study(["smollm2-135m", "gemma-3-270m"], out="studies/two", controls=["random"])`` runs
[`tl_geometry.runs.pipeline.run_report`][tl_geometry.runs.pipeline.run_report] (no files) on each model —
the same rows a ``tl-geometry report`` of that model gives for the same settings — through the
package's resumable job runner ([`tl_geometry.runtime.jobs.run_jobs`][tl_geometry.runtime.jobs.run_jobs]: one JSON
line per finished model in ``out/study.jsonl``, one model in memory at a time, local or on Ray), then
writes

* ``study.json`` — one long table (a ``model`` column, every row's ``stderr``, its relative
  depth), the claims table, the convergence matrix, the settings and the models;
* ``study.md`` and a self-contained ``index.html`` (figures inlined);
* figures: ``profiles.png`` (per-layer profiles on relative depth, ± stderr bands),
  ``capacity_table1.png`` (each model's embedding ε among the capacity paper's Table 1),
  ``convergence.png`` (the cross-model convergence matrix).

What a model can be (``models``): a zoo name, a local file or model directory, any TransformerLens
name (hub), ``random:<model>`` (its random-init twin: same config, seeded weights), or a
**directory of checkpoints** — a directory whose entries are each a model directory or weights
file, ordered by the last integer in their names (the training step); each becomes one model,
labelled ``<dir>@<step>``. ``controls=["random"]`` adds every named model's random-init twin.

Rerunning with the same ``out`` reuses every finished model and runs the missing ones (a model
that failed is retried); a directory made with other settings is refused, nothing overwritten.
A model that fails to load or run is recorded with its error; the study goes on and says which.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError, InputTypeError

logger = logging.getLogger(__name__)

__all__ = [
    "StudyModel",
    "StudyResult",
    "StudySettingsError",
    "expand_models",
    "load_study_model",
    "run_study_job",
    "study",
    "study_texts",
    "CONTROLS",
    "SETTINGS_FILE",
    "RESULTS_FILE",
    "OUTPUT_FILES",
]

SCHEMA_VERSION = 1
SETTINGS_FILE = "study-settings.json"
RESULTS_FILE = "study.jsonl"
OUTPUT_FILES = ("study.json", "study.md", "index.html", "profiles.png", "capacity_table1.png", "convergence.png")
"""The files a study writes besides its settings and results (replaced on every run)."""
CONTROLS = ("random",)
RANDOM_PREFIX = "random:"
_STEP = re.compile(r"(\d+)(?!.*\d)")


class StudySettingsError(InputError, FileExistsError):
    """The study directory holds a study made with other settings (or other files)."""


@dataclass(frozen=True)
class StudyModel:
    """One model of a study.

    Attributes:
        label: its name in every table and figure (unique in the study).
        spec: what is loaded (a name or path for [`tl_geometry.models.load`][tl_geometry.models.load], or for the loader).
        control: ``"random"`` for a random-init twin of ``spec``, else None.
        checkpoint: the training step of a checkpoint of a trajectory, else None.
        group: the trajectory (checkpoint directory) it belongs to, else None.
    """

    label: str
    spec: str
    control: str | None = None
    checkpoint: int | None = None
    group: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _label(spec: str) -> str:
    from tl_geometry.models import display_name

    return display_name(spec)


def _checkpoints(path: Path) -> list[tuple[int, Path]] | None:
    """``[(step, entry)]`` when ``path`` is a directory of checkpoints (not itself a model), else None."""
    if not path.is_dir() or (path / "config.json").is_file():
        return None
    found = []
    for p in sorted(path.iterdir()):
        if p.name.startswith("."):
            continue
        is_model = (p.is_dir() and (p / "config.json").is_file()) or (
            p.is_file() and p.suffix.lower() in (".gguf", ".safetensors")
        )
        m = _STEP.search(p.name)
        if is_model and m:
            found.append((int(m.group(1)), p))
    if not found:
        return None
    steps = [s for s, _ in found]
    if len(set(steps)) != len(steps):
        dup = sorted({s for s in steps if steps.count(s) > 1})
        raise InputError(f"checkpoint directory {path}: several entries have the step number(s) {dup}")
    return sorted(found)


def expand_models(models: Sequence[str | os.PathLike], controls: Sequence[str] = ()) -> list[StudyModel]:
    """The study's models: checkpoint directories expanded, ``controls`` added after each model.

    Raises:
        InputError: no models, a bad entry, an unknown control, two models with one label.
    """
    if isinstance(models, (str, os.PathLike)):
        models = [models]
    if not isinstance(models, Sequence) or not models:
        raise InputError("models must be a non-empty list of model names or paths")
    controls = list(controls or ())
    bad = [c for c in controls if c not in CONTROLS]
    if bad:
        raise InputError(f"unknown controls {bad}; accepted: {list(CONTROLS)}")
    out: list[StudyModel] = []
    for m in models:
        if not isinstance(m, (str, os.PathLike)) or not str(m).strip():
            raise InputTypeError(f"each model must be a non-empty name or path, got {m!r}")
        spec = os.fspath(m).strip()
        if spec.startswith(RANDOM_PREFIX):
            base = spec[len(RANDOM_PREFIX) :].strip()
            if not base:
                raise InputError(f"{spec!r}: name the model after 'random:', e.g. random:smollm2-135m")
            out.append(StudyModel(f"{_label(base)} (random init)", base, control="random"))
            continue
        ckpts = _checkpoints(Path(spec).expanduser()) if os.path.isdir(os.path.expanduser(spec)) else None
        if ckpts is not None:
            group = Path(spec).expanduser().resolve().name
            out.extend(StudyModel(f"{group}@{step}", str(p), checkpoint=step, group=group) for step, p in ckpts)
            continue
        out.append(StudyModel(_label(spec), spec))
        if "random" in controls:
            out.append(StudyModel(f"{_label(spec)} (random init)", spec, control="random"))
    labels = [m.label for m in out]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise InputError(f"models named more than once in the study: {dup}")
    return out


def _split_passages(doc: str, size: int = 600) -> list[str]:
    words, out, cur = doc.split(), [], []
    n = 0
    for w in words:
        cur.append(w)
        n += len(w) + 1
        if n >= size:
            out.append(" ".join(cur))
            cur, n = [], 0
    return out


def study_texts(corpus: Any = "pydoc", *, n_texts: int = 64, seed: int = 0, encoding: str = "utf-8") -> list[str]:
    """The texts every model of a study reads for the convergence matrix: passages of about 600
    characters cut at word boundaries from the corpus, ``n_texts`` of them drawn with ``seed``.
    Each model tokenizes them with its own tokenizer (our choice: the first 64 tokens are kept)."""
    from tl_geometry.io import corpus as corpus_mod

    passages = [p for d in corpus_mod.texts(corpus, encoding=encoding) for p in _split_passages(d)]
    if len(passages) < n_texts:
        raise InputError(f"corpus has {len(passages)} passages of ~600 characters; the study needs n_texts={n_texts}")
    rng = random.Random(seed)
    return [passages[i] for i in sorted(rng.sample(range(len(passages)), n_texts))]


def _resolve(spec: str | None):
    if not spec:
        return None
    from tl_geometry.runs.sweeps import _resolve_loader

    return _resolve_loader(spec)


def load_study_model(params: Mapping[str, Any]):
    """Load one study model (a job's ``spec``, ``control``, ``device``, ``loader``), named by its label.

    A random-init twin loads the model and replaces it by
    [`tl_geometry.models.random_like`][tl_geometry.models.random_like] (seeded by the study's seed);
    the trained weights are freed before the twin is measured.
    """
    import torch

    from tl_geometry import models

    spec, device = params["spec"], params.get("device", "cpu")
    loader = _resolve(params.get("loader"))
    processing = params.get("processing", "tl")
    if loader is not None:
        job = {"model": spec, "checkpoint": params.get("checkpoint"), "device": device, "seed": params["seed"]}
        model = loader({**job, "processing": processing})
    else:
        from tl_geometry.runs.pipeline import check_model_memory

        check_model_memory(spec, None)
        model = models.load(spec, device=device, processing=processing)
    if params.get("control") == "random":
        twin = _random_twin(model, int(params["seed"]))
        del model
        gc.collect()
        model = twin
        # freshly initialised weights: nothing was folded or centred (recorded in the rows' provenance),
        # and the final norm's weight that would scale W_U is all ones (no readout caveat)
        model._tl_geometry_final_norm_w = torch.ones(int(model.cfg.d_model))
        models._record_processing(model, "none", dict(models.PROCESSING["none"]))
    model._tl_geometry_name = params["label"]
    return model


def _random_twin(model: Any, seed: int):
    """[`tl_geometry.models.random_like`][tl_geometry.models.random_like], also for a model whose
    tokenizer TransformerLens would not accept at construction (it is attached afterwards)."""
    from tl_geometry import models

    tok = getattr(model, "tokenizer", None)
    try:
        return models.random_like(model, seed=seed)
    except AssertionError:  # TL asserts on tokenizers that are not transformers' classes
        model.tokenizer = None
        try:
            twin = models.random_like(model, seed=seed)
        finally:
            model.tokenizer = tok
        twin.tokenizer = tok
        return twin


def _pooled_reps(model: Any, texts: Sequence[str], k: int) -> dict[str, Any]:
    """Mean-pooled vectors per text at the ``DEPTHS`` hooks and the top-k readout basis."""
    from tl_geometry import capture
    from tl_geometry.families.pga.convergence import pooled
    from tl_geometry.metrics.pga import readout_basis
    from tl_geometry.studies.convergence import DEPTHS, encode

    n = int(model.cfg.n_layers)
    hooks = {tag: f"blocks.{max(0, round(d * n) - 1)}.hook_resid_post" for tag, d in DEPTHS.items()}
    toks, mask = _text_tokens(model, texts, max_len=64)
    reps = pooled(model, toks, sorted(set(hooks.values())), pooling="mean", attention_mask=mask)
    W_U = capture.weight(model, "W_U")
    kk = int(min(k, W_U.shape[0] - 1))
    V = readout_basis(W_U.detach().float().cpu(), kk)
    return {
        "depths": {tag: {"hook": h, "pooled": encode(reps[h].cpu().numpy())} for tag, h in hooks.items()},
        "readout": encode(V.cpu().numpy()),
    }


def _text_tokens(model: Any, texts: Sequence[str], *, max_len: int):
    """Each text with the model's own tokenizer, as ``tl_geometry.io.corpus.tokens`` tokenizes (BOS
    prepended when the model's config asks for it), cut to ``max_len`` tokens, right-padded with
    the BOS id (masked out); returns ``(tokens, attention_mask)``."""
    import torch

    from tl_geometry.io.corpus import _encode

    tok = getattr(model, "tokenizer", None)
    if tok is None:
        raise InputError("the model has no tokenizer: a study compares models on text")
    bos = getattr(tok, "bos_token_id", None)
    prepend = bool(getattr(model.cfg, "default_prepend_bos", True)) and bos is not None
    max_len = min(max_len, int(model.cfg.n_ctx))
    rows = []
    for t in texts:
        ids = list(_encode(tok, t))
        rows.append(([bos] if prepend else []) + ids[: max_len - (1 if prepend else 0)])
    width = max(len(r) for r in rows)
    tokens = torch.full((len(rows), width), int(bos or 0), dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, r in enumerate(rows):
        tokens[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, : len(r)] = 1
    return tokens, mask


_TIMING_KEYS = ("load_s", "total_s", "timings_s", "elapsed_s")


def _trim_heap() -> None:
    """Give freed heap pages back to the OS (glibc's ``malloc_trim``), so that the next model of the
    study does not stack on the previous one's freed but still mapped memory. No-op elsewhere."""
    import ctypes
    import sys

    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # pragma: no cover - musl or another libc
            pass


def run_study_job(params: Mapping[str, Any]) -> dict[str, Any]:
    """One model of a study (the body of both executors): load, the report's metrics, pooled reps.

    Returns ``{"rows", "provenance", "reps", "seconds"}`` (JSON-able; ``seconds`` is kept out of the
    study's tables so that a rerun writes the same bytes).
    """
    from tl_geometry.runs.pipeline import run_report

    t0 = time.perf_counter()
    model = load_study_model(params)
    load_s = time.perf_counter() - t0
    try:
        report = run_report(
            model,
            corpus=params["corpus"],
            corpus_encoding=params["corpus_encoding"],
            n_seqs=params["n_seqs"],
            seq_len=params["seq_len"],
            seed=params["seed"],
            metrics=params["metrics"],
            options=params["options"],
            fast=params["fast"],
            out=None,
            figures=False,
            device=params.get("device", "cpu"),
            progress=False,
        )
        texts = study_texts(
            params["corpus"], n_texts=params["n_texts"], seed=params["seed"], encoding=params["corpus_encoding"]
        )
        reps = _pooled_reps(model, texts, params["convergence_k"])
    finally:
        del model
        gc.collect()
        _trim_heap()
    prov = {k: v for k, v in report.provenance.items() if k not in _TIMING_KEYS}
    return {
        "rows": [r.to_dict() for r in report.rows],
        "provenance": json.loads(json.dumps(prov, default=str)),
        "reps": reps,
        "seconds": {"load": round(load_s, 2), "total": round(time.perf_counter() - t0, 2)},
    }


@dataclass(frozen=True)
class StudyResult(Tabular):
    """What [`study`][tl_geometry.studies.study] wrote and found.

    Attributes:
        out: the study directory.
        models: the models, in the study's order.
        rows: the long table (one dict per row: model, hook, layer, relative_depth, metric, value,
            stderr, control, checkpoint, extras).
        claims: the claims table ([`Claim`][tl_geometry.studies.claims.Claim] dicts).
        convergence: the convergence matrix (one dict per depth and pair of models).
        failed: model label → error, for the models that failed.
        ran, reused: labels of the models run now / taken from an earlier run.
        seconds: model label → load and total seconds of the runs of this call.
    """

    out: str
    models: tuple[StudyModel, ...]
    rows: tuple[dict, ...]
    claims: tuple[dict, ...]
    convergence: tuple[dict, ...]
    failed: Mapping[str, str] = field(default_factory=dict)
    ran: tuple[str, ...] = ()
    reused: tuple[str, ...] = ()
    seconds: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": self.out,
            "models": [m.to_dict() for m in self.models],
            "rows": list(self.rows),
            "claims": list(self.claims),
            "convergence": list(self.convergence),
            "failed": dict(self.failed),
        }

    def to_pandas(self):
        """The long table as a DataFrame (extras kept as dicts in an ``extras`` column)."""
        from tl_geometry.base.tables import require_pandas

        pd = require_pandas()
        return pd.DataFrame(list(self.rows))

    def claims_table(self):
        """The claims table as a DataFrame."""
        from tl_geometry.base.tables import require_pandas

        pd = require_pandas()
        return pd.DataFrame(list(self.claims))

    def report(self):
        """Every model's rows as one [`GeometryReport`][tl_geometry.report.GeometryReport]."""
        from tl_geometry.report import GeometryReport, Row

        rows = [
            Row(
                r["model"],
                r["hook"],
                r["layer"],
                r["metric"],
                float("nan") if r["value"] is None else r["value"],
                r["extras"],
            )
            for r in self.rows
        ]
        return GeometryReport(rows=tuple(rows), provenance={"study": self.out})


def _settings(**kw: Any) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, **kw}


def _check_dir(out: Path, settings: Mapping[str, Any], force: bool) -> None:
    """Refuse a directory of another study or of other files (nothing written); ``force`` starts over."""
    path = out / SETTINGS_FILE
    from tl_geometry.io.outdir import LOCK_FILE

    ours = {SETTINGS_FILE, RESULTS_FILE, *OUTPUT_FILES, LOCK_FILE}
    if path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StudySettingsError(f"{path} is not a study settings file ({exc}); use another --out") from None
        if old == settings:
            return
        diff = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
        if not force:
            raise StudySettingsError(
                f"study directory {out} was made with other settings (they differ in {diff}: "
                + "; ".join(f"{k}: was {old.get(k)!r}, now {settings.get(k)!r}" for k in diff[:4])
                + "); nothing was overwritten. Use another --out, or --force / force=True to start it over "
                "(removes only the study's own files)"
            )
        for name in (SETTINGS_FILE, RESULTS_FILE, *OUTPUT_FILES):
            (out / name).unlink(missing_ok=True)
        return
    others = sorted(p.name for p in out.iterdir() if p.name not in ours)
    if others:
        raise StudySettingsError(
            f"{out} is not empty and holds no study ({SETTINGS_FILE} is missing; found {others[:5]}); "
            "use a new or empty directory"
        )
    leftovers = [n for n in (RESULTS_FILE,) if (out / n).exists()]
    if leftovers and not force:
        raise StudySettingsError(
            f"{out} holds {leftovers} without {SETTINGS_FILE}: the settings of those results are unknown; "
            "use another --out, or --force to start over"
        )
    for n in leftovers:
        (out / n).unlink()


def _records(path: Path) -> dict[str, dict]:
    from tl_geometry.runtime.jobs import read_records

    last: dict[str, dict] = {}
    for rec in read_records(path):
        if rec.get("status") == "ok" or rec["key"] not in last or last[rec["key"]].get("status") != "ok":
            last[rec["key"]] = rec
    return last


def study(
    models: Sequence[str | os.PathLike],
    *,
    out: str | os.PathLike,
    controls: Sequence[str] = (),
    corpus: str | os.PathLike = "pydoc",
    corpus_encoding: str = "utf-8",
    n_seqs: int = 8,
    seq_len: int = 128,
    seed: int = 0,
    fast: bool = False,
    metrics: Sequence[str] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    n_texts: int = 64,
    convergence_k: int = 100,
    convergence_null: int = 50,
    loader: str | None = None,
    device: str = "cpu",
    processing: str = "tl",
    executor: str = "local",
    num_cpus: float = 1,
    force: bool = False,
    figures: bool = True,
    progress: bool = True,
) -> StudyResult:
    """Run the report's metrics on several models over the same texts and compare them.

    Args:
        models: zoo names, paths, hub names, ``random:<model>``, or directories of checkpoints
            (see the module docstring).
        out: the study directory (created; resumed when it holds a study of the same settings).
        controls: ``["random"]`` adds each model's random-init twin.
        corpus, corpus_encoding, n_seqs, seq_len, seed: the report's text batch, the same for every
            model (each with its own tokenizer).
        fast, metrics, options: as ``tl-geometry report`` (``fast``: its cheaper settings).
        n_texts: texts of the convergence matrix (passages of the corpus, drawn with ``seed``).
        convergence_k, convergence_null: readout dimension and random-subspace pairs of the matrix.
        loader: ``"package.module:function"`` called as ``function({"model": spec, "checkpoint",
            "device", "seed"})`` to load a model (default [`tl_geometry.models.load`][tl_geometry.models.load]).
        device: where models are loaded.
        processing: the weight processing every model is loaded with (``tl_geometry.models.load``):
            ``"tl"`` (default, as ``tl-geometry report``) or ``"none"`` (the unprocessed model: with
            ``options={"pga": {"preset": "paper"}}`` the PGA paper's protocol). Recorded in the settings.
        executor, num_cpus: ``"local"`` or ``"ray"`` (one Ray task per model, ``num_cpus`` each).
        force: start over in a directory of a study with other settings (only its own files are removed).
        figures: draw the PNG figures (needs matplotlib; the tables are written either way).
        progress: a progress bar over the models.

    Returns:
        A [`StudyResult`][tl_geometry.studies.StudyResult].

    Raises:
        InputError: bad models, controls, settings or corpus (before any model is loaded);
        StudySettingsError: ``out`` holds another study or other files.
    """
    from tl_geometry.base import _checks
    from tl_geometry.io.outdir import OutputLock, check_writable
    from tl_geometry.runs.pipeline import check_inputs, default_metrics, report_options
    from tl_geometry.runs.sweeps import _error_result
    from tl_geometry.runtime.jobs import EXECUTORS, ResultsFile, job_key, run_jobs

    entries = expand_models(models, controls)
    if executor not in EXECUTORS:
        raise InputError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    if str(corpus) == "random":
        raise InputError("a study compares models on text: corpus must be pydoc, shakespeare or a text file")
    _checks.integer(n_texts, "n_texts", lo=8)
    _checks.integer(convergence_k, "convergence_k", lo=1)
    _checks.integer(convergence_null, "convergence_null", lo=2)
    from tl_geometry.models import PROCESSING

    if processing not in PROCESSING:
        raise InputError(f"processing must be one of {sorted(PROCESSING)}, got {processing!r}")
    if loader is not None and not isinstance(loader, str):
        raise InputTypeError("loader must be a 'package.module:function' string (it is imported by name)")
    names = list(metrics) if metrics is not None else default_metrics()
    merged = report_options(fast=fast)
    run_opts = {n: {**merged.get(n, {}), **dict((options or {}).get(n, {}))} for n in names}
    check_inputs(
        corpus=corpus,
        n_seqs=n_seqs,
        seq_len=seq_len,
        seed=seed,
        names=names,
        options={k: v for k, v in run_opts.items() if v},
        device=device,
        max_memory_gb=None,
        corpus_encoding=corpus_encoding,
    )
    study_texts(corpus, n_texts=n_texts, seed=seed, encoding=corpus_encoding)  # enough passages, before any load
    corpus_s = os.fspath(corpus)
    settings = _settings(
        corpus=corpus_s,
        corpus_sha256=_file_digest(corpus_s),
        corpus_encoding=corpus_encoding,
        n_seqs=n_seqs,
        seq_len=seq_len,
        seed=seed,
        fast=bool(fast),
        metrics=list(metrics) if metrics is not None else None,
        options={k: dict(v) for k, v in (options or {}).items()},
        n_texts=n_texts,
        convergence_k=convergence_k,
        convergence_null=convergence_null,
        loader=loader,
        device=device,
        processing=processing,
    )
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise NotADirectoryError(f"study path {out_dir} exists and is not a directory")
    check_writable(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with OutputLock(out_dir):
        _check_dir(out_dir, settings, force)
        from tl_geometry.io.outfile import atomic_write_text

        atomic_write_text(out_dir / SETTINGS_FILE, json.dumps(settings, indent=1, sort_keys=True) + "\n")
        job_settings = {k: v for k, v in settings.items() if k not in ("schema_version", "corpus_sha256")}
        params = [
            {
                "label": e.label,
                "spec": e.spec,
                "control": e.control,
                "checkpoint": e.checkpoint,
                **job_settings,
                "metrics": names,
                "options": settings["options"],
            }
            for e in entries
        ]
        keys = [job_key(p) for p in params]
        rf = ResultsFile(out_dir / RESULTS_FILE)
        before = {k for k, r in _records(rf.path).items() if r.get("status") == "ok"}
        seconds: dict[str, Any] = {}
        for rec in run_jobs(
            params,
            run_study_job,
            rf,
            retry_errors=True,
            catch=True,
            on_error=_error_result,
            executor=executor,
            num_cpus=num_cpus,
            progress=progress,
            desc="study",
        ):
            if rec.get("status") == "ok":
                seconds[rec["params"]["label"]] = rec.get("seconds")
        records = _records(rf.path)
        from tl_geometry.studies.page import assemble, write_outputs

        result = assemble(entries, [records.get(k) for k in keys], settings, out=str(out_dir))
        ran = tuple(e.label for e, k in zip(entries, keys) if k not in before and e.label not in result.failed)
        reused = tuple(e.label for e, k in zip(entries, keys) if k in before)
        result = replace(result, ran=ran, reused=reused, seconds=seconds)
        write_outputs(result, settings, out_dir, figures=figures)
    return result


def _file_digest(corpus: str) -> str | None:
    """sha256 of a corpus file (a changed file is another study), None for a named source."""
    from tl_geometry.io.corpus import SOURCES

    if corpus in SOURCES:
        return None
    h = hashlib.sha256()
    with open(corpus, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
