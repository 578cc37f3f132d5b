"""What a study is made of and what it returns: its models, its result, its files."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tl_geometry.base.tables import Tabular
from tl_geometry.errors import InputError

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
SETTINGS_FILE = "study-settings.json"
RESULTS_FILE = "study.jsonl"
OUTPUT_FILES = ("study.json", "study.md", "index.html", "profiles.png", "capacity_table1.png", "convergence.png")
"""The files a study writes besides its settings and results (replaced on every run)."""


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
