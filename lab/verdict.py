"""Whether a scenario's findings match its `expected.json` (DESIGN.md §7): one pure function.

`judge(expected, findings)` takes the findings as mappings (rows of a findings frame, or the
`findings` of `seamwatch analyze --format json`) and returns a `Verdict`. The rules:

- every `required` detector has a finding (any severity: the scenario says what happens, not
  how bad a detector rates it);
- each `any_of` group has a finding of at least one of its detectors;
- every id of `evidence` (per key: `event_ids`, `request_ids`, ...) is cited, under that key, by
  some finding of an expected detector (required or in an `any_of` group). `expected.json`
  does not say which detector cites which id, so the ids are looked up across all of them;
  a finding of an `allowed` detector does not count;
- no finding of a detector neither required, in an `any_of` group nor allowed is at medium or
  higher;
- a clean scenario (nothing required, no `any_of`) has no resumption finding at any severity
  (outside `allowed`, which clean scenarios leave empty).

Resumption findings are those of every catalogue detector except `NOT_RESUMPTION`:
`capture-health` (notes on the capture itself: losses, open streams) and `analysis-error` (a
detector that crashed; it is high, so the medium rule above still fails the scenario).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from analyzer.findings import EVIDENCE_COLUMNS, Severity
from lab.framework import Expected

__all__ = ["NOT_RESUMPTION", "Verdict", "expected_text", "judge"]

#: Detector ids whose findings are not about resumption (see the module docstring).
NOT_RESUMPTION = frozenset({"capture-health", "analysis-error"})


@dataclass(frozen=True)
class Verdict:
    """How a scenario's findings compare with what it expects; `ok` when nothing is wrong."""

    expected: Expected
    #: worst severity per detector id, over every finding
    found: Mapping[str, Severity]
    missing: tuple[str, ...] = ()
    unmet_any_of: tuple[tuple[str, ...], ...] = ()
    #: evidence key -> expected ids no finding of an expected detector cites
    missing_evidence: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: detector id -> worst severity of a finding the scenario does not allow
    unexpected: Mapping[str, Severity] = field(default_factory=dict)
    #: expected detector ids no registered detector has (when the registry was given)
    unregistered: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unmet_any_of or self.missing_evidence or self.unexpected)

    @property
    def clean(self) -> bool:
        """The scenario expects no finding at all."""
        return is_clean(self.expected)

    def problems(self) -> list[str]:
        """What is wrong, one phrase each (empty when ok)."""
        out: list[str] = []
        pending = set(self.unregistered)
        for det in self.missing:
            out.append(f"missing {det}" + (" (not implemented)" if det in pending else ""))
        for group in self.unmet_any_of:
            absent = all(det in pending for det in group)
            out.append(f"none of {' or '.join(group)}" + (" (not implemented)" if absent else ""))
        for key, ids in self.missing_evidence.items():
            out.append(f"{key} not cited: {', '.join(ids)}")
        for det, severity in self.unexpected.items():
            out.append(f"unexpected {det} ({severity.value})")
        return out

    def text(self) -> str:
        """'ok', or 'FAIL: ' and the problems."""
        return "ok" if self.ok else "FAIL: " + "; ".join(self.problems())

    def found_text(self) -> str:
        """The detectors found and their worst severity; capture-health notes left out unless
        the scenario expects them."""
        named = {*self.expected.required, *(d for group in self.expected.any_of for d in group)}
        shown = [
            f"{det} ({severity.value})"
            for det, severity in sorted(self.found.items())
            if det != "capture-health" or severity >= Severity.MEDIUM or det in named
        ]
        return ", ".join(shown) or "nothing"


def is_clean(expected: Expected) -> bool:
    """Whether a scenario expects nothing (no required detector, no any_of group)."""
    return not expected.required and not expected.any_of


def expected_text(expected: Expected) -> str:
    """The expectation in one line: required, `a or b` for an any_of group, `(+c)` allowed."""
    if is_clean(expected):
        return "nothing"
    parts = [*expected.required, *(" or ".join(group) for group in expected.any_of)]
    text = ", ".join(parts)
    if expected.allowed:
        text += " (+" + ", ".join(expected.allowed) + ")"
    return text


def judge(
    expected: Expected,
    findings: Iterable[Mapping[str, object]],
    *,
    registered: Iterable[str] | None = None,
) -> Verdict:
    """Compare findings with a scenario's expectations (rules in the module docstring).

    Each finding needs `detector` and `severity` (a Severity or its name); evidence lists
    (`event_ids`, `request_ids`, `flow_ids`, `stream_ids`) may be absent. `registered`, the
    ids of the detectors that exist, only marks expected ones that do not as not implemented.
    """
    rows = list(findings)
    found: dict[str, Severity] = {}
    for row in rows:
        det, severity = str(row["detector"]), _severity(row["severity"])
        found[det] = max(found.get(det, severity), severity)
    in_groups = {det for group in expected.any_of for det in group}
    expected_ids = set(expected.required) | in_groups
    cited: dict[str, set[str]] = {key: set() for key in EVIDENCE_COLUMNS}
    for row in rows:
        if row["detector"] in expected_ids:
            for key in EVIDENCE_COLUMNS:
                cited[key].update(_ids(row.get(key)))
    missing_evidence = {
        key: tuple(i for i in ids if i not in cited.get(key, set()))
        for key, ids in expected.evidence.items()
    }
    tolerated = expected_ids | set(expected.allowed)
    clean = is_clean(expected)
    unexpected = {
        det: severity
        for det, severity in sorted(found.items())
        if det not in tolerated
        and (severity >= Severity.MEDIUM or (clean and det not in NOT_RESUMPTION))
    }
    known = None if registered is None else set(registered)
    return Verdict(
        expected=expected,
        found=found,
        missing=tuple(det for det in expected.required if det not in found),
        unmet_any_of=tuple(
            tuple(group) for group in expected.any_of if not any(d in found for d in group)
        ),
        missing_evidence={key: ids for key, ids in missing_evidence.items() if ids},
        unexpected=unexpected,
        unregistered=()
        if known is None
        else tuple(sorted(d for d in expected_ids | set(expected.allowed) if d not in known)),
    )


def _severity(value: object) -> Severity:
    return value if isinstance(value, Severity) else Severity.parse(str(value))


def _ids(value: object) -> Sequence[str]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(f"evidence must be a list of ids, not {type(value).__name__}")
    return [str(item) for item in value]
