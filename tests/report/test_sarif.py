"""The SARIF 2.1.0 report (analyzer/report/sarif.py): the spec's required properties by hand,
and every log validated against the SARIF 2.1.0 JSON schema (tests/fixtures/sarif, as GitHub's
code scanning upload action ships it), on hand-built reports and on a lab capture."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from analyzer.baseline import Baseline, BaselineEntry, apply_baseline
from analyzer.cli import main
from analyzer.report import Report
from analyzer.report import sarif as sarif_report
from tests.support.report_sample import ROWS, make_report
from tests.support.sarif import assert_valid_sarif

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LAB_CAPTURE = FIXTURES / "dashboard" / "round-robin-replicas"


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


def test_the_schema_catches_a_broken_log(report: Report) -> None:
    broken = log(report)
    broken["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(AssertionError, match="level"):
        assert_valid_sarif(broken)


def test_hand_built_logs_are_valid(report: Report, empty_report: Report) -> None:
    assert_valid_sarif(log(report))
    assert_valid_sarif(log(empty_report))


def test_rules_carry_help_text(report: Report) -> None:
    rules = log(report)["runs"][0]["tool"]["driver"]["rules"]
    by_id = {r["id"]: r for r in rules}
    assert by_id["duplicate-event-id"]["help"]["text"] == (
        "One event id issued twice in a session with different payloads.\n\n"
        "Must not flag exact replays."
    )
    assert all(rule["help"]["text"] for rule in rules)


def test_a_rule_help_ends_with_its_detectors_remedy(report: Report) -> None:
    (row,) = report.detectors[:1]
    remedied = dataclasses.replace(row, remedy="Keep a session-scoped event log.")
    rules = log(dataclasses.replace(report, detectors=(remedied,)))["runs"][0]["tool"]["driver"]
    assert rules["rules"][0]["help"]["text"].endswith(
        "\n\nWhat to change: Keep a session-scoped event log."
    )


def _rows(n: int) -> list[dict[str, object]]:
    return [dict(ROWS[0], event_ids=[str(i)], title=f"event id {i}") for i in range(n)]


def test_the_cap_is_what_code_scanning_shows() -> None:
    assert sarif_report.MAX_RESULTS == 5000


def test_results_are_capped_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    # The cut, not its size, is tested here (the size just above): a cap of 5 makes the log
    # small enough that its schema check costs nothing, where 5,000 results took seconds.
    monkeypatch.setattr(sarif_report, "MAX_RESULTS", 5)
    got = log(make_report(_rows(7)))
    assert_valid_sarif(got)
    run = got["runs"][0]
    assert len(run["results"]) == 5
    (note,) = run["invocations"][0]["toolExecutionNotifications"]
    assert note["level"] == "note"
    assert note["message"]["text"].startswith("7 findings; the first 5 (worst first)")


def test_no_note_when_nothing_was_cut(report: Report) -> None:
    assert log(report)["runs"][0]["invocations"] == [{"executionSuccessful": True}]


def test_baselined_results_are_unchanged_the_rest_new(report: Report) -> None:
    first = report.findings.row(0, named=True)
    entry = BaselineEntry(first["fingerprint"], first["detector"], first["title"])
    outcome = apply_baseline(report.findings, Baseline((entry,)), path="b.json")
    got = log(report.with_baseline(outcome))
    assert_valid_sarif(got)
    states = [r["baselineState"] for r in got["runs"][0]["results"]]
    assert states == ["unchanged", "new", "new", "new"]
    assert "baselineState" not in log(report)["runs"][0]["results"][0]


@pytest.fixture
def lab_capture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of a real lab capture (round-robin replicas) under the working folder."""
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "staging" / "capture"
    shutil.copytree(LAB_CAPTURE / "capture", target)
    return target


def test_a_lab_capture_gives_a_valid_log_with_lines(lab_capture: Path) -> None:
    out = lab_capture.parent / "seamwatch.sarif"
    # An absolute input path under the working folder: the URIs come out relative.
    code = main(["analyze", str(lab_capture), "--format", "sarif", "--out", str(out)])
    assert code == 1
    got = json.loads(out.read_text())
    assert_valid_sarif(got)
    run = got["runs"][0]
    (capture_file,) = lab_capture.glob("capture-*.jsonl")
    relative = f"staging/capture/{capture_file.name}"
    assert relative in run["artifacts"][0]["location"]["uri"]
    lines = capture_file.read_text().splitlines()
    assert run["results"]
    for result in run["results"]:
        (location,) = result["locations"]
        physical = location["physicalLocation"]
        assert physical["artifactLocation"]["uri"] == relative
        flows = result["properties"]["flow_ids"]
        if not flows:
            continue
        record = json.loads(lines[physical["region"]["startLine"] - 1])
        assert (record["kind"], record["flow"]) == ("request", flows[0])


def test_a_clean_run_writes_empty_results(lab_capture: Path) -> None:
    out = lab_capture.parent / "seamwatch.sarif"
    argv = ["analyze", str(lab_capture), "--format", "sarif", "--out", str(out)]
    code = main([*argv, "--only", "header-mismatch"])
    assert code == 0
    got = json.loads(out.read_text())
    assert_valid_sarif(got)
    assert got["runs"][0]["results"] == []


def test_several_origins_give_each_result_its_sessions_origin(report: Report) -> None:
    origins = {"mcp:7f3c": "https://a.test:443", "legacy:abc": "http://127.0.0.1:9002"}
    results = log(dataclasses.replace(report, origins=origins))["runs"][0]["results"]
    assert [r["properties"].get("origin") for r in results] == [
        "https://a.test:443",
        "https://a.test:443",
        "http://127.0.0.1:9002",
        None,
    ]
    assert all("origin" not in r["properties"] for r in log(report)["runs"][0]["results"])
