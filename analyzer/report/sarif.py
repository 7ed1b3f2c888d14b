"""The SARIF 2.1.0 report: one rule per detector, one result per finding (DESIGN.md §6).

Spec: https://docs.oasis-open.org/sarif/sarif/v2.1.0/sarif-v2.1.0.html

Each result names its rule, level and message, carries a location and `partialFingerprints`
from the finding's fingerprint (§3.27.17), so code-scanning services match a fault across runs.
The location is the input file that holds the finding's first evidence flow (a physical
location without a region: capture records are not lines a reader keeps track of) plus a
logical location naming that flow, or the session when there is no flow. Findings without any
evidence (a failed detector) point at the first input.
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Final, TextIO
from urllib.parse import quote

from analyzer import __version__
from analyzer.detectors import Detector
from analyzer.findings import FINGERPRINT_VERSION, Severity
from analyzer.report import Report, finding_records

__all__ = ["LEVELS", "SCHEMA_URI", "render", "to_object", "write"]

SCHEMA_URI: Final = "https://json.schemastore.org/sarif-2.1.0.json"

#: Severity -> SARIF `level` (§3.27.10): error, warning, note; info is context, a note too.
LEVELS: Final = {
    Severity.HIGH: "error",
    Severity.MEDIUM: "warning",
    Severity.LOW: "note",
    Severity.INFO: "note",
}

#: Key of `partialFingerprints`: names the hash and its version (§3.27.17).
FINGERPRINT_KEY: Final = f"seamwatchFingerprint/v{FINGERPRINT_VERSION}"


def to_object(report: Report) -> dict[str, object]:
    """The SARIF log as plain JSON values."""
    rule_index = {det.id: i for i, det in enumerate(report.detectors)}
    rules = [
        {
            "id": det.id,
            "name": _camel(det.id),
            "shortDescription": {"text": det.summary},
            "fullDescription": {"text": " ".join(det.description.split())},
            "defaultConfiguration": {"level": LEVELS[det.severity]},
            "properties": {"severity": det.severity.value, "thresholds": _thresholds(det)},
        }
        for det in report.detectors
    ]
    artifacts = [{"location": {"uri": _uri(item.path)}} for item in report.inputs]
    results = []
    for finding in finding_records(report.findings):
        detector = str(finding["detector"])
        result: dict[str, object] = {
            "ruleId": detector,
            "level": LEVELS[Severity(finding["severity"])],
            "message": {"text": f"{finding['title']}\n{finding['detail']}"},
            "locations": [_location(report, finding)],
            "partialFingerprints": {FINGERPRINT_KEY: finding["fingerprint"]},
            "properties": {
                name: finding[name]
                for name in (
                    "severity",
                    "session",
                    "era",
                    "flow_ids",
                    "stream_ids",
                    "event_ids",
                    "request_ids",
                    "first_ts",
                    "last_ts",
                )
            },
        }
        if detector in rule_index:
            result["ruleIndex"] = rule_index[detector]
        results.append(result)
    run: dict[str, object] = {
        "tool": {
            "driver": {
                "name": "seamwatch",
                "version": __version__,
                "rules": rules,
            }
        },
        "artifacts": artifacts,
        "results": results,
    }
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def render(report: Report) -> str:
    """The SARIF log as JSON text, ending with a newline."""
    return json.dumps(to_object(report), indent=2, ensure_ascii=True) + "\n"


def write(report: Report, out: TextIO) -> None:
    """Write the SARIF log to a text stream."""
    out.write(render(report))


def _location(report: Report, finding: dict[str, object]) -> dict[str, object]:
    """Where a finding is: its first flow's input file, and the flow (or session) by name."""
    flows = finding["flow_ids"]
    flow = str(flows[0]) if isinstance(flows, list) and flows else None
    index = report.flow_inputs.get(flow, 0) if flow is not None else 0
    location: dict[str, object] = {}
    if report.inputs:
        index = index if 0 <= index < len(report.inputs) else 0
        location["physicalLocation"] = {
            "artifactLocation": {"uri": _uri(report.inputs[index].path), "index": index}
        }
    if flow is not None:
        location["logicalLocations"] = [
            {"name": flow, "fullyQualifiedName": f"flow/{flow}", "kind": "flow"}
        ]
    elif finding["session"] is not None:
        session = str(finding["session"])
        location["logicalLocations"] = [
            {"name": session, "fullyQualifiedName": f"session/{session}", "kind": "session"}
        ]
    return location


def _uri(path: str) -> str:
    """A URI reference for an input path: relative paths stay relative (§3.4.3)."""
    pure = PurePath(path)
    if pure.is_absolute():
        return "file://" + quote(pure.as_posix())
    return quote(pure.as_posix())


def _camel(detector_id: str) -> str:
    """A rule's `name` (§3.49.7): the id in PascalCase, e.g. DuplicateEventId."""
    return "".join(part.capitalize() for part in detector_id.split("-"))


def _thresholds(det: Detector) -> dict[str, object]:
    """A detector's threshold defaults as JSON values."""
    return {key: _jsonable(value) for key, value in sorted(det.thresholds.items())}


def _jsonable(value: object) -> object:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    return repr(value)
