"""The SARIF 2.1.0 report: one rule per detector, one result per finding (DESIGN.md §6).

Spec: https://docs.oasis-open.org/sarif/sarif/v2.1.0/sarif-v2.1.0.html

Made for code scanning services: stable `ruleId`s (the detector ids) with `help.text` from the
detector's description; each result has a level, a message, a location and
`partialFingerprints` under a versioned key (§3.27.17), so a fault is matched across runs. The
location is the capture file that holds the finding's first evidence flow, as a relative URI
where the path allows, with the JSONL line of that flow's first record as `region.startLine`
when `locate` found it (a dump or HAR has no such line), plus a logical location naming the flow,
or the session when there is no flow. Findings without any evidence (a failed detector) point
at the first input. A clean run writes `"results": []`, which closes the alerts of the last one.
At most MAX_RESULTS results are written (worst first); a cut run says so in a notification.
With a baseline, each result's `baselineState` is `unchanged` (baselined) or `new`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Final, TextIO
from urllib.parse import quote

from analyzer import __version__
from analyzer.detection import Detector
from analyzer.findings import FINGERPRINT_VERSION, Severity
from analyzer.report import Report, finding_records

__all__ = [
    "LEVELS",
    "MAX_RESULTS",
    "SCHEMA_URI",
    "Places",
    "locate",
    "render",
    "to_object",
    "write",
]

SCHEMA_URI: Final = "https://json.schemastore.org/sarif-2.1.0.json"

#: Results written at most: code scanning shows no more than this many of one run.
MAX_RESULTS: Final = 5000

#: Severity -> SARIF `level` (§3.27.10): error, warning, note; info is context, a note too.
LEVELS: Final = {
    Severity.HIGH: "error",
    Severity.MEDIUM: "warning",
    Severity.LOW: "note",
    Severity.INFO: "note",
}

#: Key of `partialFingerprints`: names the hash and its version (§3.27.17).
FINGERPRINT_KEY: Final = f"seamwatchFingerprint/v{FINGERPRINT_VERSION}"

_REQUEST_MARK: Final = b'"kind":"request"'
_FLOW_MARK: Final = b'"flow":"'


@dataclass(frozen=True)
class Places:
    """Where findings are on disk: read by `locate`, so `render` itself reads nothing."""

    #: per input (as `Report.inputs`), the file to point at when no line is known
    inputs: tuple[str, ...] = ()
    #: flow id -> (capture file, 1-based line of the flow's request record)
    flows: Mapping[str, tuple[str, int]] = field(default_factory=dict)


def locate(report: Report, *, cwd: Path | None = None, limit: int = MAX_RESULTS) -> Places:
    """Find the capture file and JSONL line of each reported finding's first flow.

    Reads the capture files of the inputs that are seamwatch captures (a folder's
    `capture-*.jsonl` files, or one such file), line by line, parsing only request records,
    until every wanted flow is found. Paths under `cwd` (default: the working folder) are made
    relative to it, so a code scanning service resolves them in the checkout.
    """
    base = Path.cwd() if cwd is None else cwd
    wanted_by_input: dict[int, set[str]] = {}
    for flows in report.findings["flow_ids"].head(limit).to_list():
        if flows:
            index = report.flow_inputs.get(flows[0], 0)
            wanted_by_input.setdefault(index, set()).add(flows[0])
    inputs: list[str] = []
    found: dict[str, tuple[str, int]] = {}
    for index, item in enumerate(report.inputs):
        files = _capture_files(Path(item.path))
        inputs.append(_relative(files[0] if files else Path(item.path), base))
        wanted = set(wanted_by_input.get(index, ()))
        for file in files:
            if not wanted:
                break
            for flow, line in _request_lines(file, wanted):
                found[flow] = (_relative(file, base), line)
                wanted.discard(flow)
    return Places(tuple(inputs), found)


def to_object(report: Report, places: Places | None = None) -> dict[str, object]:
    """The SARIF log as plain JSON values."""
    if places is None:
        places = Places(tuple(item.path for item in report.inputs))
    rule_index = {det.id: i for i, det in enumerate(report.detectors)}
    rules = [
        {
            "id": det.id,
            "name": _camel(det.id),
            "shortDescription": {"text": det.summary},
            "fullDescription": {"text": _prose(det.description)},
            "help": {"text": _help(det)},
            "defaultConfiguration": {"level": LEVELS[det.severity]},
            "properties": {"severity": det.severity.value, "thresholds": _thresholds(det)},
        }
        for det in report.detectors
    ]
    artifacts = _Artifacts(places.inputs)
    records = finding_records(report.findings)
    results = []
    for finding in records[:MAX_RESULTS]:
        detector = str(finding["detector"])
        properties: dict[str, object] = {
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
        }
        origin = report.finding_origin(finding["session"])
        if origin is not None:  # the analysis reaches several origins
            properties["origin"] = origin
        result: dict[str, object] = {
            "ruleId": detector,
            "level": LEVELS[Severity(finding["severity"])],
            "message": {"text": f"{finding['title']}\n{finding['detail']}"},
            "locations": [_location(report, places, artifacts, finding)],
            "partialFingerprints": {FINGERPRINT_KEY: finding["fingerprint"]},
            "properties": properties,
        }
        if detector in rule_index:
            result["ruleIndex"] = rule_index[detector]
        if report.baseline is not None:
            baselined = report.is_baselined(str(finding["fingerprint"]))
            result["baselineState"] = "unchanged" if baselined else "new"
        results.append(result)
    invocation: dict[str, object] = {"executionSuccessful": True}
    if len(records) > MAX_RESULTS:
        text = (
            f"{len(records)} findings; the first {MAX_RESULTS} (worst first) are reported here. "
            "Run `seamwatch analyze --format json` for all of them."
        )
        invocation["toolExecutionNotifications"] = [{"level": "note", "message": {"text": text}}]
    run: dict[str, object] = {
        "tool": {
            "driver": {
                "name": "seamwatch",
                "version": __version__,
                "rules": rules,
            }
        },
        "invocations": [invocation],
        "artifacts": [{"location": {"uri": uri}} for uri in artifacts.uris],
        "results": results,
    }
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def render(report: Report, places: Places | None = None) -> str:
    """The SARIF log as JSON text, ending with a newline."""
    return json.dumps(to_object(report, places), indent=2, ensure_ascii=True) + "\n"


def write(report: Report, out: TextIO) -> None:
    """Write the SARIF log to a text stream."""
    out.write(render(report))


class _Artifacts:
    """The run's `artifacts`: the inputs' files first, then capture files results point at."""

    def __init__(self, inputs: Iterable[str]) -> None:
        self._index: dict[str, int] = {}
        self.input_indexes = [self.index_of(path) for path in inputs]

    def index_of(self, path: str) -> int:
        return self._index.setdefault(_uri(path), len(self._index))

    @property
    def uris(self) -> list[str]:
        return list(self._index)


def _location(
    report: Report, places: Places, artifacts: _Artifacts, finding: dict[str, object]
) -> dict[str, object]:
    """Where a finding is: its first flow's capture file and line (or its input file), and the
    flow (or session) by name."""
    flows = finding["flow_ids"]
    flow = str(flows[0]) if isinstance(flows, list) and flows else None
    input_index = report.flow_inputs.get(flow, 0) if flow is not None else 0
    location: dict[str, object] = {}
    if flow is not None and flow in places.flows:
        path, line = places.flows[flow]
        index = artifacts.index_of(path)
        location["physicalLocation"] = {
            "artifactLocation": {"uri": _uri(path), "index": index},
            "region": {"startLine": line},
        }
    elif artifacts.input_indexes:
        input_index = input_index if 0 <= input_index < len(artifacts.input_indexes) else 0
        index = artifacts.input_indexes[input_index]
        location["physicalLocation"] = {
            "artifactLocation": {"uri": artifacts.uris[index], "index": index}
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


def _relative(path: Path, base: Path) -> str:
    """`path` relative to `base` when it lies under it, else as it is."""
    if not path.is_absolute():
        return str(path)
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)


def _capture_files(path: Path) -> list[Path]:
    """The seamwatch capture files of an input, in name order; none for a dump or HAR."""
    if path.is_dir():
        names = sorted(p for p in path.iterdir() if p.is_file() and _is_capture_name(p.name))
        return names
    return [path] if path.is_file() and _is_capture_name(path.name) else []


def _is_capture_name(name: str) -> bool:
    return name.endswith(".jsonl") or name.endswith(".jsonl.partial")


def _request_lines(path: Path, wanted: set[str]) -> Iterator[tuple[str, int]]:
    """(flow id, 1-based line) of each request record of a wanted flow in a capture file."""
    try:
        with path.open("rb") as lines:
            for number, line in enumerate(lines, start=1):
                if _REQUEST_MARK not in line[:120]:
                    continue
                flow = _flow_of(line)
                if flow in wanted:
                    yield flow, number
    except OSError:
        return  # unreadable now: the finding keeps its file-level location


def _flow_of(line: bytes) -> str | None:
    """The `flow` of a request record line; JSON-parsed only when the quick read is unsure."""
    start = line.find(_FLOW_MARK)
    if start >= 0:
        end = line.find(b'"', start + len(_FLOW_MARK))
        value = line[start + len(_FLOW_MARK) : end]
        if end > start and b"\\" not in value:
            return value.decode("utf-8", "replace")
    try:
        record = json.loads(line)
    except ValueError:
        return None
    flow = record.get("flow") if isinstance(record, dict) else None
    return flow if isinstance(flow, str) else None


def _prose(text: str) -> str:
    """A docstring as plain text: paragraphs kept, each on one line."""
    paragraphs = [" ".join(part.split()) for part in text.strip().split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)


def _help(det: Detector) -> str:
    """A rule's help: the description, then what to change (`Detector.remedy`) when it has one."""
    text = _prose(det.description)
    return f"{text}\n\nWhat to change: {det.remedy}" if det.remedy else text


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
