"""The papers' published numbers next to ours: ``tl-geometry reproduce`` / [`reproduce`][tl_geometry.runs.reproduction.reproduce].

Every published figure this machine can reach is one **check**: a small function that computes
our value and returns one or more [`ReproRow`][tl_geometry.runs.reproduction_rows.ReproRow] (paper value, ours, relative Δ, the row's
tolerance, a status and a note saying why when it differs). Checks are grouped by family
(``capacity``, ``pga``, ``interaction``, ``sae``) and sized by ``size``:

* ``"tiny"``: seconds, for tests; rows that need the offline model or sae_lens are
  ``"skipped (tiny)"`` (unless a ``model`` is passed).
* ``"cpu"`` (default): minutes on a laptop CPU; the paper's protocol where it is affordable,
  reduced sizes otherwise (recorded per row in ``sizes``).
* ``"full"``: the papers' sizes (for a GPU).

Evidence classes ([`EVIDENCE`][tl_geometry.runs.reproduction_rows.EVIDENCE]; every row has one, and the headline counts them apart):

* ``independent`` — our simulation, training or measurement from weights gives the paper's
  number (packing cells from our optimizer over several seeds, the toy double descent), and the
  comparison value was never an input nor a target chosen after seeing it; only these rows count
  as "reproduced" in the headline;
* ``exploratory`` — a probe tuned after a published setting missed (the packing cells at p = 20):
  what could produce the paper's number, not a reproduction of it;
* ``recomputed`` — a closed formula re-evaluated on the paper's printed inputs (Table 1 counts
  from the printed ε, fits of the authors' own packing JSON, bounds from printed (d, ε), a
  parameter count);
* ``consistency`` — cannot fail unless our code is wrong or the rows it follows differ: a rule or
  arithmetic applied to printed numbers (the "indeterminate" Table 1 rows, α* = depth/width of
  printed shapes), or a fit to the same cells other rows compare (the packing subset fits: their
  verdict follows the cell rows'; the headline calls such a miss "follow a difference");
* ``measured`` — ours, with no paper value for this model (``paper`` is None; a value the papers
  give for other models may be shown as ``reference``).

A row's ``paper`` is a value printed in a paper or in the authors' published data, and the row
names where (section, figure, table or file).

Statuses:

* ``reproduced`` — |Δ| within the row's tolerance (by default one unit of the last digit the
  paper printed: the published numbers are rounded);
* ``differs`` — outside it; the note says why (a different protocol, a CPU-sized run, ...);
* ``measured`` — our number where the paper has none for this model (e.g. SmolLM2); only
  rows of the ``measured`` class, and always with ``paper`` None;
* ``needs a GPU`` / ``needs the hub`` / ``needs a package`` — cannot run here (the note says what
  it would take: the pip command for a missing PyPI package);
* ``skipped (tiny)`` / ``not run (--full)`` — not run at this size;
* ``error`` — the check raised (the note has the exception); the CLI exits with status 1.

Resumable: each finished check is appended at once to ``OUT/reproduce.jsonl``
([`tl_geometry.runtime.jobs.run_jobs`][tl_geometry.runtime.jobs.run_jobs]), and the long checks keep their own units (packing cells,
toy sizes) in JSON-lines files under ``OUT/``; a killed run continues where it stopped.
``OUT/reproduce.json`` and ``OUT/reproduce.md`` are rewritten at the end of every run from all
finished rows, with the tl_geometry version, git commit, size, and wall time per check.

Examples:
    >>> import tl_geometry as tg
    >>> res = tg.reproduce("capacity", size="tiny", out="repro", progress=False)  # doctest: +SKIP
    >>> res.counts()["recomputed"]["reproduced"]                                  # doctest: +SKIP
    26
"""

from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError

# The rows (their vocabulary, the dataclass, the builders, the headline) live in reproduction_rows,
# which does not import this module; every name stays importable from here.
from tl_geometry.runs.reproduction_rows import (
    EVIDENCE,
    STATUSES,
    ReproRow,
    evidence_counts,
    families_with_checks,
    headline,
    is_num,
    make_row,
    published_row,
    published_tolerance,
    reclassified,
    supported_tolerance,
)
from tl_geometry.runs.reproduction_rows import _compare as _compare

logger = logging.getLogger(__name__)

__all__ = [
    "FAMILIES",  # noqa: F822  (module __getattr__)
    "SIZES",
    "STATUSES",
    "EVIDENCE",
    "ReproRow",
    "Check",
    "CHECKS",  # noqa: F822  (module __getattr__)
    "ReproduceResult",
    "reproduce",
    "published_tolerance",
    "supported_tolerance",
    "reclassified",
    "list_checks",
    "check",
    "make_row",
    "published_row",
    "is_num",
    "Context",
]


def _load_checks(families: Iterable[str]) -> None:
    """Import each family's checks module (its checks register themselves with [`check`][tl_geometry.runs.reproduction.check])."""
    import importlib

    from tl_geometry import registry

    for name in families:
        module = registry.get_family(name).checks
        if module:
            importlib.import_module(module)


_MARKDOWN_NAMES = ("fmt", "fmt_paper", "_fmt_delta", "EVIDENCE_MEANING")
"""Names of [`tl_geometry.runs.reproduction_markdown`][tl_geometry.runs.reproduction_markdown] still importable from here (scripts use them)."""


def __getattr__(name: str) -> Any:
    # Views: FAMILIES (the families with checks) and CHECKS (every registered check, all loaded).
    if name == "FAMILIES":
        return families_with_checks()
    if name == "CHECKS":
        _load_checks(families_with_checks())
        return _in_family_order(_CHECKS)
    if name in _MARKDOWN_NAMES:  # the markdown moved to its own module (it imports this one)
        from tl_geometry.runs import reproduction_markdown

        return getattr(reproduction_markdown, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


SIZES = ("tiny", "cpu", "full")
RESULTS_NAME = "reproduce.jsonl"
ROWS_VERSION = 2
"""Version of the row schema in the resume file: records of an older schema are run again."""


# ----------------------------------------------------------------------------- context
@dataclass
class Context:
    """What a check gets: the size, the output folder, the device, a shared model cache."""

    size: str
    out: Path
    device: str = "cpu"
    progress: bool = True
    model: Any = None  # a user-given model replaces the offline zoo model in model rows
    _cache: dict = field(default_factory=dict)

    @property
    def figures(self) -> Path:
        p = self.out / "figures"
        p.mkdir(parents=True, exist_ok=True)
        return p

    def pick(self, tiny: Any, cpu: Any, full: Any) -> Any:
        return {"tiny": tiny, "cpu": cpu, "full": full}[self.size]

    def zoo_model(self, *, processed: bool):
        """The offline model (cached; unprocessed = the paper's raw weights), or the given model."""
        if self.model is not None:
            return self.model
        key = ("zoo", processed)
        if key not in self._cache:
            import tl_geometry as tg

            self._cache.clear()  # one model in memory at a time
            self._cache[key] = _load_zoo(tg, processed=processed, device=self.device)
        return self._cache[key]


def _load_zoo(tg, *, processed: bool, device: str):
    """SmolLM2 with TransformerLens's processing (library) or without it (the paper's raw weights)."""
    return tg.models.load("smollm2-135m", device=device, processing="tl" if processed else "none")


@dataclass(frozen=True)
class Check:
    """A published figure (or group of them) and the function that computes ours.

    Attributes:
        id: identifier (``family.name``).
        family: a family that declares checks (``FamilySpec.checks``).
        title: one line for ``--list``.
        fn: ``fn(ctx) -> list[ReproRow]`` (``seconds`` is filled in by the runner).
        uses_model: reads the offline model (skipped at ``tiny`` unless a model is given, which
            then replaces it).
        heavy: loads something slow beyond the model (sae_lens): skipped at ``tiny``.
        evidence: the class of the row written when the check is skipped or raises (its
            own rows carry their own).
    """

    id: str
    family: str
    title: str
    fn: Callable[[Context], list[ReproRow]]
    uses_model: bool = False
    heavy: bool = False
    evidence: str = "independent"

    def skipped_at_tiny(self, model: Any) -> bool:
        return self.heavy or (self.uses_model and model is None)


_CHECKS: list[Check] = []


def check(id: str, title: str, *, evidence: str, uses_model: bool = False, heavy: bool = False):
    """Decorator registering ``fn(ctx) -> list[ReproRow]`` as the check ``id`` (``family.name``).

    A family's checks module (``FamilySpec.checks``) uses it at import; ``evidence`` is the class of
    the row written when the check is skipped or raises (see [`EVIDENCE`][tl_geometry.runs.reproduction_rows.EVIDENCE])."""
    if evidence not in EVIDENCE:
        raise InputError(f"evidence must be one of {EVIDENCE}, got {evidence!r}")

    def deco(fn):
        family = id.split(".", 1)[0]
        _CHECKS.append(
            Check(id=id, family=family, title=title, fn=fn, uses_model=uses_model, heavy=heavy, evidence=evidence)
        )
        return fn

    return deco


# ----------------------------------------------------------------------------- runner
@dataclass(frozen=True)
class ReproduceResult(Tabular):
    """Rows of a reproduce run and where they were written.

    Attributes:
        rows: every row, in check order.
        out: the output folder (``reproduce.md``, ``reproduce.json``, ``reproduce.jsonl``, figures/).
        meta: version, commit, size, families, wall time, per-check seconds.
    """

    rows: tuple[ReproRow, ...]
    out: Path
    meta: dict

    def counts(self) -> dict[str, dict[str, int]]:
        """{evidence class: {status: number of rows}} (classes and statuses with rows only)."""
        return evidence_counts(self.rows)

    def headline(self) -> str:
        """One line per the evidence classes, e.g. "independent: 6 reproduced, 1 differs; ..."."""
        return headline(self.rows)

    @property
    def n_errors(self) -> int:
        return sum(r.status == "error" for r in self.rows)

    def to_markdown(self) -> str:
        """``OUT/reproduce.md`` ([`tl_geometry.runs.reproduction_markdown.markdown`][tl_geometry.runs.reproduction_markdown.markdown])."""
        from tl_geometry.runs.reproduction_markdown import markdown

        return markdown(self.rows, self.meta)

    def records(self) -> list[dict[str, Any]]:
        """One table row per reproduce row (its scalar fields)."""
        from tl_geometry.base.tables import records_of

        return [r for row in self.rows for r in records_of(row)]


def _in_family_order(checks: Sequence[Check]) -> list[Check]:
    """``checks`` by family in the registry's order, each family's in its module's order: the run's
    order does not depend on which family's checks module happened to be imported first."""
    rank = {f: i for i, f in enumerate(families_with_checks())}
    return sorted(checks, key=lambda c: rank.get(c.family, len(rank)))  # stable within a family


def list_checks(families: str | Sequence[str] = "all") -> list[Check]:
    fams = _families(families)
    _load_checks(fams)
    return [c for c in _in_family_order(_CHECKS) if c.family in fams]


def _families(families: str | Sequence[str] | None) -> list[str]:
    known = families_with_checks()
    if families is None:
        return list(known)
    if isinstance(families, str):
        families = [families]
    fams = list(families)
    if not fams or "all" in fams:
        return list(known)
    bad = [f for f in fams if f not in known]
    if bad:
        raise InputError(f"unknown family {bad[0]!r}; expected one of {', '.join(known)} or 'all'")
    return [f for f in known if f in fams]


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def reproduce(
    families: str | Sequence[str] = "all",
    *,
    out: str | os.PathLike = "reproduce",
    size: str = "cpu",
    checks: Sequence[str] | None = None,
    model: Any = None,
    device: str = "cpu",
    fresh: bool = False,
    progress: bool = True,
) -> ReproduceResult:
    """Run every published figure this machine can reach and write the side-by-side table.

    Args:
        families: "all", or one or more families that declare checks ("capacity", "pga",
            "intrinsic_dimension", "interaction", "sae", or a plugin's).
        out: output folder: ``reproduce.md``, ``reproduce.json``, ``reproduce.jsonl`` (one line
            per finished check: the resume file), the experiments' own JSON-lines files, figures/.
        size: "tiny" (seconds, model rows skipped), "cpu" (default, minutes) or "full" (the
            papers' sizes, for a GPU).
        checks: only these check ids (see `list_checks`).
        model: a TransformerLens model to use instead of the offline SmolLM2 in model rows
            (then those rows run at every size, with status "measured").
        device: where the experiments run ("cpu", "cuda", ...).
        fresh: ignore earlier results in ``out`` (the resume file is moved aside to ``.bak``).
        progress: tqdm bars.

    Returns:
        [`ReproduceResult`][tl_geometry.runs.reproduction.ReproduceResult]; rows of checks that raised have status "error".

    Raises:
        ValueError: an unknown family, size or check id; ``out`` is a file.
    """
    from tl_geometry.models import check_device

    if size not in SIZES:
        raise InputError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    fams = _families(families)
    check_device(device)
    todo = _select_checks(fams, checks)
    out = Path(out)
    results = _open_out(out, fresh=fresh)
    ctx = Context(size=size, out=out, device=str(device), progress=progress, model=model)
    model_tag = "zoo:smollm2-135m" if model is None else f"given:{_model_tag(model)}"
    jobs = _jobs(todo, size=size, model_tag=model_tag, device=str(device))
    by_id = {c.id: c for c in todo}
    commit = _git_commit()  # the code that runs: read before the checks, not when they finish
    records, wall = _run_checks(jobs, by_id, ctx, results)
    rows, per_check = _collect(jobs, by_id, records)
    meta = {
        "tl_geometry_version": _version(),
        "git_commit": commit,
        **({"git_commit_at_finish": end} if (end := _git_commit()) != commit else {}),
        "size": size,
        "families": fams,
        "device": str(device),
        "model": model_tag,
        "finished_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_seconds_this_run": round(wall, 1),
        "seconds_per_check": per_check,
        "python": platform.python_version(),
        "reclassified": reclassified(rows),
    }
    result = ReproduceResult(rows=tuple(rows), out=out, meta=meta)
    _write(result)
    return result


def _select_checks(fams: list[str], checks: Sequence[str] | None) -> list[Check]:
    """The checks of ``fams`` (their modules imported), only those named in ``checks`` when given."""
    _load_checks(fams)
    todo = [c for c in _in_family_order(_CHECKS) if c.family in fams]
    if checks is None:
        return todo
    known = {c.id for c in _CHECKS}
    bad = [c for c in checks if c not in known]
    if bad:
        raise InputError(f"unknown check {bad[0]!r}; known: {', '.join(sorted(known))}")
    todo = [c for c in todo if c.id in set(checks)]
    if not todo:
        raise InputError(f"none of the checks {list(checks)} is in the families {fams}")
    return todo


def _open_out(out: Path, *, fresh: bool) -> Path:
    """Create the folder ``out``; the resume file in it (checked as ours; moved aside to ``.bak`` when ``fresh``)."""
    from tl_geometry.runtime.jobs import check_results_file

    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; give a folder (it is created if missing)")
    out.mkdir(parents=True, exist_ok=True)
    results = out / RESULTS_NAME
    check_results_file(results)  # a file we did not write is refused (not moved aside by fresh)
    if fresh and results.exists():
        os.replace(results, results.with_suffix(".jsonl.bak"))
    return results


def _jobs(todo: list[Check], *, size: str, model_tag: str, device: str) -> list[dict[str, Any]]:
    """One job per check: its parameters are its key in the resume file (a changed one runs again)."""
    return [
        {
            "check": c.id,
            "size": size,
            "model": model_tag if c.uses_model else None,
            "device": device,
            "rows_version": ROWS_VERSION,
        }
        for c in todo
    ]


def _run_one(c: Check, ctx: Context) -> dict:
    """One check's record for the resume file: its rows (each with the check's seconds) and seconds;
    a check that needs the model or sae_lens is one "skipped (tiny)" row at size tiny."""
    t0 = time.perf_counter()
    if ctx.size == "tiny" and c.skipped_at_tiny(ctx.model):
        rows = [
            make_row(
                c.id,
                c.title,
                None,
                None,
                None,
                evidence=c.evidence,
                status="skipped (tiny)",
                note="loads the offline model or sae_lens; run at size cpu",
            )
        ]
    else:
        rows = c.fn(ctx)  # an exception is recorded as an "error" record by run_jobs, and retried next run
    secs = time.perf_counter() - t0
    return {
        "rows": [ReproRow(**{**asdict(r), "seconds": round(secs, 3)}).to_dict() for r in rows],
        "seconds": round(secs, 3),
    }


def _run_checks(
    jobs: list[dict[str, Any]], by_id: dict[str, Check], ctx: Context, results: Path
) -> tuple[list[dict], float]:
    """Run the jobs not yet done in ``results`` (errors retried) through the job runner; every record
    of the file afterwards, in file order, and this run's wall seconds. The model cache is emptied."""
    from tl_geometry.runtime.jobs import ResultsFile, run_jobs

    t0 = time.perf_counter()
    rf = ResultsFile(results)

    def one(params: Mapping[str, Any]) -> dict:
        return _run_one(by_id[params["check"]], ctx)

    for _ in run_jobs(jobs, one, rf, retry_errors=True, catch=True, progress=ctx.progress, desc="reproduce"):
        pass
    wall = time.perf_counter() - t0
    ctx._cache.clear()
    return list(rf.records()), wall


def _collect(
    jobs: list[dict[str, Any]], by_id: dict[str, Check], records: Iterable[dict]
) -> tuple[list[ReproRow], dict[str, float | None]]:
    """The rows of each job's latest record (in job order; a failed check is one "error" row) and
    the seconds per check (None for a failed one)."""
    from tl_geometry.runtime.jobs import job_key

    latest: dict[str, dict] = {}
    for rec in records:  # in file order: the last record of a check wins
        if "key" in rec:
            latest[rec["key"]] = rec
    rows: list[ReproRow] = []
    per_check: dict[str, float | None] = {}
    for j in jobs:
        done = latest.get(job_key(j))
        if done is None:
            continue
        c = by_id[str(j["check"])]
        if done.get("status") != "ok":
            per_check[c.id] = None
            rows.append(
                make_row(
                    c.id,
                    c.title,
                    None,
                    None,
                    None,
                    evidence=c.evidence,
                    status="error",
                    note=str(done.get("error", "failed")),
                )
            )
            continue
        per_check[c.id] = done.get("seconds")
        rows += [ReproRow.from_dict(r) for r in done["rows"]]
    return rows, per_check


def _version() -> str:
    import tl_geometry

    return tl_geometry.__version__


def _write(result: ReproduceResult) -> None:
    """``reproduce.json`` (the meta, headline, counts and rows) and ``reproduce.md`` in ``result.out``."""
    from tl_geometry.report import atomic_write_text

    payload = {
        **result.meta,
        "headline": result.headline(),
        "counts": result.counts(),
        "rows": [r.to_dict() for r in result.rows],
    }
    atomic_write_text(result.out / "reproduce.json", json.dumps(payload, indent=1, default=str, allow_nan=True) + "\n")
    atomic_write_text(result.out / "reproduce.md", result.to_markdown())


def _model_tag(model: Any) -> str:
    from tl_geometry.models import model_name_of

    cfg = model.cfg
    return f"{model_name_of(model)}(L={cfg.n_layers},d={cfg.d_model})"
