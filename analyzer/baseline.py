"""Baselines: today's known findings, accepted, so CI fails only on new ones (issue 29).

A baseline is plain JSON, reviewed in pull requests:

    {"schema": 1, "findings": [{"fingerprint": ..., "detector": ..., "title": ...,
                                "reason": ... or null}, ...]}

in a stable order (detector, then fingerprint), two-space indented, one trailing newline, so a
re-written baseline diffs only where findings changed. A finding is matched by its fingerprint
alone (DESIGN.md §5: detector, session and evidence ids, never flow ids, paths or times), so the
same fault in a re-run stays baselined. Entries no finding matches any more are *fixed*: the
file can be pruned of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import polars as pl

from analyzer import UserError

__all__ = [
    "SCHEMA",
    "Baseline",
    "BaselineEntry",
    "BaselineError",
    "BaselineOutcome",
    "apply_baseline",
    "baseline_from",
    "load_baseline",
    "render_baseline",
]

#: Version of the file's shape; a reader refuses any other.
SCHEMA: Final = 1


class BaselineError(UserError):
    """A baseline file that cannot be read; the message is one line naming the file."""


@dataclass(frozen=True)
class BaselineEntry:
    """One accepted finding: its fingerprint, what it was, and why it is accepted."""

    fingerprint: str
    detector: str
    title: str
    reason: str | None = None


@dataclass(frozen=True)
class Baseline:
    """The accepted findings, in file order."""

    entries: tuple[BaselineEntry, ...]

    @property
    def fingerprints(self) -> frozenset[str]:
        return frozenset(entry.fingerprint for entry in self.entries)


@dataclass(frozen=True)
class BaselineOutcome:
    """A run's findings split by a baseline: new ones, baselined ones, and fixed entries."""

    path: str
    new: pl.DataFrame
    baselined: pl.DataFrame
    fixed: tuple[BaselineEntry, ...]
    #: fingerprints of the baselined findings
    accepted: frozenset[str] = frozenset()


def baseline_from(
    findings: pl.DataFrame, *, reason: str | None = None, previous: Baseline | None = None
) -> Baseline:
    """A baseline of every finding (any severity: a lower `--fail-on` later must not turn an
    accepted finding into a new one). A finding already in `previous` keeps its reason there;
    the others get `reason`."""
    kept = {entry.fingerprint: entry.reason for entry in previous.entries} if previous else {}
    entries: dict[str, BaselineEntry] = {}
    for row in findings.select("fingerprint", "detector", "title").iter_rows(named=True):
        fingerprint = str(row["fingerprint"])
        if fingerprint not in entries:
            entries[fingerprint] = BaselineEntry(
                fingerprint=fingerprint,
                detector=str(row["detector"]),
                title=str(row["title"]),
                reason=kept.get(fingerprint, reason),
            )
    return Baseline(_ordered(entries.values()))


def render_baseline(baseline: Baseline) -> str:
    """The baseline as its file's text."""
    document = {
        "schema": SCHEMA,
        "findings": [
            {
                "fingerprint": entry.fingerprint,
                "detector": entry.detector,
                "title": entry.title,
                "reason": entry.reason,
            }
            for entry in _ordered(baseline.entries)
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def load_baseline(path: Path) -> Baseline:
    """Read a baseline file; BaselineError (one line) when it is missing or malformed."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise BaselineError(f"baseline {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise BaselineError(f"baseline {path}: not JSON: {e}") from None
    if not isinstance(document, Mapping) or document.get("schema") != SCHEMA:
        raise BaselineError(f'baseline {path}: expected an object with "schema": {SCHEMA}')
    items = document.get("findings")
    if not isinstance(items, list):
        raise BaselineError(f'baseline {path}: "findings" must be a list')
    entries = []
    for number, item in enumerate(items, start=1):
        entries.append(_entry(path, number, item))
    return Baseline(tuple(entries))


def apply_baseline(findings: pl.DataFrame, baseline: Baseline, *, path: str) -> BaselineOutcome:
    """Split `findings` into new and baselined ones; list the entries nothing matched."""
    accepted = pl.Series(sorted(baseline.fingerprints), dtype=pl.String)
    matched = pl.col("fingerprint").is_in(accepted.implode())
    found = set(findings["fingerprint"].to_list())
    baselined = findings.filter(matched)
    return BaselineOutcome(
        path=path,
        new=findings.filter(~matched),
        baselined=baselined,
        fixed=tuple(e for e in _ordered(baseline.entries) if e.fingerprint not in found),
        accepted=frozenset(baselined["fingerprint"].to_list()),
    )


def _entry(path: Path, number: int, item: object) -> BaselineEntry:
    where = f"baseline {path}: finding {number}"
    if not isinstance(item, Mapping):
        raise BaselineError(f"{where}: expected an object")
    values: dict[str, str | None] = {}
    for key in ("fingerprint", "detector", "title"):
        value = item.get(key)
        if not isinstance(value, str) or not value:
            raise BaselineError(f"{where}: {key!r} must be a non-empty string")
        values[key] = value
    reason = item.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise BaselineError(f"{where}: 'reason' must be a string or null")
    return BaselineEntry(
        fingerprint=str(values["fingerprint"]),
        detector=str(values["detector"]),
        title=str(values["title"]),
        reason=reason,
    )


def _ordered(entries: Iterable[BaselineEntry]) -> tuple[BaselineEntry, ...]:
    return tuple(sorted(entries, key=lambda e: (e.detector, e.fingerprint)))
