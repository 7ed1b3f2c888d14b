"""The SARIF 2.1.0 report (analyzer/report/sarif.py), checked by hand against the spec's
required properties: no network, so the JSON schema itself is not fetched."""

from __future__ import annotations

import json
from typing import Any

from analyzer.report import Report
from analyzer.report import sarif as sarif_report
from tests.support.report_sample import ROWS, make_report


def log(report: Report) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(sarif_report.render(report))
    return data


def test_required_properties(report: Report) -> None:
    got = log(report)
    assert got["version"] == "2.1.0"
    assert got["$schema"].endswith("sarif-2.1.0.json")
    assert isinstance(got["runs"], list) and len(got["runs"]) == 1
    driver = got["runs"][0]["tool"]["driver"]
    assert driver["name"] == "seamwatch"
    assert isinstance(driver["rules"], list)
    results = got["runs"][0]["results"]
    assert len(results) == len(ROWS)
    for result in results:
        assert isinstance(result["ruleId"], str)
        assert isinstance(result["message"]["text"], str) and result["message"]["text"]
        assert result["level"] in ("none", "note", "warning", "error")
        assert result["locations"], "every result has a location"
        assert result["partialFingerprints"]


def test_one_rule_per_detector(report: Report) -> None:
    rules = log(report)["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [det.id for det in report.detectors]
    by_id = {r["id"]: r for r in rules}
    dup = by_id["duplicate-event-id"]
    assert dup["shortDescription"]["text"] == (
        "One event id issued twice in a session with different payloads."
    )
    assert "Must not flag exact replays." in dup["fullDescription"]["text"]
    assert dup["defaultConfiguration"]["level"] == "error"
    assert dup["properties"]["thresholds"] == {"window_s": 120.0}
    assert by_id["capture-health"]["defaultConfiguration"]["level"] == "note"


def test_results_point_at_rules_and_carry_fingerprints(report: Report) -> None:
    run = log(report)["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    fingerprints = report.findings["fingerprint"].to_list()
    for result, fp in zip(run["results"], fingerprints, strict=True):
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["partialFingerprints"] == {"seamwatchFingerprint/v1": fp}
    assert [r["level"] for r in run["results"]] == ["error", "warning", "note", "note"]


def test_location_is_the_input_file_and_the_first_flow(report: Report) -> None:
    run = log(report)["runs"][0]
    assert run["artifacts"] == [
        {"location": {"uri": "captures/cap.jsonl"}},
        {"location": {"uri": "file:///srv/b%20dump.har"}},
    ]
    first, _, open_streams, torn = run["results"]
    (loc,) = first["locations"]
    assert loc["physicalLocation"]["artifactLocation"] == {"uri": "captures/cap.jsonl", "index": 0}
    assert "region" not in loc["physicalLocation"]  # no line numbers are known
    assert loc["logicalLocations"] == [
        {"name": "f-get-2", "fullyQualifiedName": "flow/f-get-2", "kind": "flow"}
    ]
    (loc,) = open_streams["locations"]
    assert loc["physicalLocation"]["artifactLocation"]["index"] == 1
    # no evidence at all: the first input, no logical location
    (loc,) = torn["locations"]
    assert loc == {
        "physicalLocation": {"artifactLocation": {"uri": "captures/cap.jsonl", "index": 0}}
    }


def test_session_names_the_logical_location_when_there_is_no_flow() -> None:
    row = dict(ROWS[0], flow_ids=[], stream_ids=[])
    (result,) = log(make_report([row]))["runs"][0]["results"]
    assert result["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == "session/mcp:7f3c"


def test_same_input_same_bytes() -> None:
    assert sarif_report.render(make_report()) == sarif_report.render(
        make_report(list(reversed(ROWS)))
    )


def test_no_results_still_lists_the_rules(empty_report: Report) -> None:
    run = log(empty_report)["runs"][0]
    assert run["results"] == []
    assert len(run["tool"]["driver"]["rules"]) == len(empty_report.detectors)
