"""What reading an input gave, as the timeline and the reports carry it (read by
`analyzer.ingest`; here, below both, so that the timeline needs no reader)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["InputReport"]


@dataclass(frozen=True)
class InputReport:
    """What reading one input gave: the `inputs[]` entry of the JSON report (DESIGN.md §6)."""

    path: str
    kind: str  # capture | mitm | har
    records: int  # records read (synthesized ones for dumps and HAR)
    skipped: int  # lines or entries skipped
    counts: Mapping[str, int] = field(default_factory=dict)  # DAMAGE key -> count
    warnings: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    cached: bool = False  # read from the Parquet cache

    def as_json(self) -> dict[str, object]:
        """The report's `inputs[]` object."""
        return {
            "path": self.path,
            "records": self.records,
            "skipped": self.skipped,
            "warnings": list(self.warnings),
        }
