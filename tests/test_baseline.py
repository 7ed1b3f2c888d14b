"""Baselines (analyzer/baseline.py): the file format, matching by fingerprint, and the round trip
`seamwatch baseline write` -> `seamwatch analyze --baseline` on a real lab capture."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from analyzer.baseline import (
    Baseline,
    BaselineEntry,
    BaselineError,
    apply_baseline,
    baseline_from,
    load_baseline,
    render_baseline,
)
from analyzer.cli import main
from tests.support.report_sample import make_report

LAB_CAPTURE = Path(__file__).resolve().parent / "fixtures" / "dashboard" / "round-robin-replicas"


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    """A copy of a real lab capture: two replicas, a resume on the wrong one, a re-issued call."""
    target = tmp_path / "capture"
    shutil.copytree(LAB_CAPTURE / "capture", target)
    return target


def _analyze(capture: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    out = capture.parent / "report.json"
    code = main(["analyze", str(capture), "--format", "json", "--out", str(out), *extra])
    return code, json.loads(out.read_text())


def test_round_trip_on_a_lab_capture(capture: Path) -> None:
    baseline = capture.parent / "baseline.json"
    code = main(["baseline", "write", str(capture), "--out", str(baseline), "--reason", "known"])
    assert code == 0
    written = json.loads(baseline.read_text())
    assert written["schema"] == 1
    entries = written["findings"]
    assert [list(e) for e in entries] == [["fingerprint", "detector", "title", "reason"]] * len(
        entries
    )
    assert entries == sorted(entries, key=lambda e: (e["detector"], e["fingerprint"]))
    assert {e["reason"] for e in entries} == {"known"}

    before_code, before = _analyze(capture)
    assert before_code == 1
    assert {e["fingerprint"] for e in entries} == {f["fingerprint"] for f in before["findings"]}

    code, report = _analyze(capture, "--baseline", str(baseline))
    assert code == 0
    assert all(f["baselined"] for f in report["findings"])
    assert report["baseline"] == {
        "path": str(baseline),
        "baselined": len(entries),
        "new": 0,
        "fixed": [],
    }


def test_only_findings_outside_the_baseline_fail(capture: Path) -> None:
    baseline = capture.parent / "baseline.json"
    main(["baseline", "write", str(capture), "--out", str(baseline)])
    document = json.loads(baseline.read_text())
    dropped = next(e for e in document["findings"] if e["detector"] == "repeated-tool-call")
    document["findings"].remove(dropped)
    gone = {"fingerprint": "0" * 16, "detector": "causal-gap", "title": "fixed", "reason": "x"}
    document["findings"].append(gone)
    baseline.write_text(json.dumps(document))

    code, report = _analyze(capture, "--baseline", str(baseline))
    assert code == 1
    new = [f for f in report["findings"] if not f["baselined"]]
    assert [f["fingerprint"] for f in new] == [dropped["fingerprint"]]
    assert report["baseline"]["new"] == 1
    assert report["baseline"]["fixed"] == [gone]
    table = capture.parent / "report.txt"
    argv = ["analyze", str(capture), "--baseline", str(baseline), "--out", str(table)]
    assert main(argv) == 1
    text = table.read_text()
    assert "baseline: 6 baselined, 1 fixed" in text
    assert f"  causal-gap {'0' * 16} fixed" in text.splitlines()
    assert text.count("(baselined)") == 6
    # --fail-on above the new finding's severity: the baselined ones never count.
    assert _analyze(capture, "--baseline", str(baseline), "--fail-on", "high")[0] == 1
    assert _analyze(capture, "--baseline", str(baseline), "--fail-on", "none")[0] == 0


def test_rewriting_keeps_reasons_and_bytes(capture: Path) -> None:
    baseline = capture.parent / "baseline.json"
    main(["baseline", "write", str(capture), "--out", str(baseline), "--reason", "first"])
    first = baseline.read_text()
    main(["baseline", "write", str(capture), "--out", str(baseline), "--reason", "second"])
    assert baseline.read_text() == first


def test_analysis_options_shape_the_baseline(capture: Path) -> None:
    baseline = capture.parent / "baseline.json"
    argv = ["baseline", "write", str(capture), "--out", str(baseline)]
    assert main([*argv, "--only", "repeated-tool-call,lost-response"]) == 0
    detectors = {e["detector"] for e in json.loads(baseline.read_text())["findings"]}
    assert detectors == {"repeated-tool-call", "lost-response"}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("not json", "not JSON"),
        ('{"schema": 2, "findings": []}', '"schema": 1'),
        ('{"schema": 1}', '"findings" must be a list'),
        ('{"schema": 1, "findings": [{"fingerprint": "a"}]}', "finding 1: 'detector'"),
        (
            '{"schema": 1, "findings": [{"fingerprint": "a", "detector": "d", "title": "t", '
            '"reason": 3}]}',
            "'reason' must be a string or null",
        ),
    ],
)
def test_a_bad_baseline_is_exit_2_with_one_line(
    capture: Path, capsys: pytest.CaptureFixture[str], text: str, reason: str
) -> None:
    baseline = capture.parent / "baseline.json"
    baseline.write_text(text)
    code = main(["analyze", str(capture), "--baseline", str(baseline)])
    assert code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert reason in line and str(baseline) in line


def test_a_missing_baseline_is_exit_2(capture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(capture), "--baseline", str(capture.parent / "none.json")]) == 2
    assert "none.json" in capsys.readouterr().err


def test_baseline_from_takes_each_fingerprint_once_in_stable_order() -> None:
    findings = make_report().findings
    baseline = baseline_from(findings, reason="r")
    assert len(baseline.entries) == findings["fingerprint"].n_unique()
    assert [e.detector for e in baseline.entries] == sorted(e.detector for e in baseline.entries)
    again = baseline_from(findings.reverse(), reason="r")
    assert render_baseline(again) == render_baseline(baseline)


def test_apply_baseline_splits_and_lists_fixed() -> None:
    findings = make_report().findings
    first = findings.row(0, named=True)
    kept = BaselineEntry(first["fingerprint"], first["detector"], first["title"], "ok")
    fixed = BaselineEntry("f" * 16, "causal-gap", "gone")
    outcome = apply_baseline(findings, Baseline((kept, fixed)), path="b.json")
    assert outcome.baselined["fingerprint"].to_list() == [first["fingerprint"]]
    assert outcome.new.height == findings.height - 1
    assert outcome.fixed == (fixed,)
    assert outcome.accepted == {first["fingerprint"]}


def test_load_baseline_reads_what_render_wrote(tmp_path: Path) -> None:
    baseline = baseline_from(make_report().findings, reason=None)
    path = tmp_path / "b.json"
    path.write_text(render_baseline(baseline))
    assert load_baseline(path) == baseline


def test_load_baseline_error_is_a_baseline_error(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match=r"(?i)no such file"):
        load_baseline(tmp_path / "absent.json")
