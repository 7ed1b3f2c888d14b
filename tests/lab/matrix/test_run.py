"""The matrix run: attribution, the confusion table, exit codes, and one real run."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lab.framework import Expected
from lab.matrix.run import (
    EXIT_FINDINGS,
    EXIT_LAB_ERROR,
    EXIT_OK,
    MatrixResult,
    Outcome,
    attribute,
    confusion,
    exit_code,
    faulted_streams,
    render,
    run_batches,
    uncited,
)
from lab.matrix.variants import sample
from lab.verdict import judge

A, B, C = sample(3, 42)


def finding(detector: str, severity: str, session: str) -> dict[str, object]:
    return {"detector": detector, "severity": severity, "session": session}


def test_findings_go_to_the_variant_named_in_their_session() -> None:
    findings = [
        finding("causal-gap", "high", f"mcp:{A.name}-1"),
        finding("repeated-tool-call", "high", f"mcp:{A.name}-2"),  # its re-initialized session
        finding("phantom-resume", "high", f"client:127.0.0.1|{B.name}|"),
        finding("capture-health", "info", ""),
        finding("stale-cursor", "medium", "mcp:mx-00000000-1"),  # no variant of this run
    ]
    owned, rest = attribute([A, B, C], findings)
    assert [f["detector"] for f in owned[A.name]] == ["causal-gap", "repeated-tool-call"]
    assert [f["detector"] for f in owned[B.name]] == ["phantom-resume"]
    assert owned[C.name] == []
    assert [f["detector"] for f in rest] == ["capture-health", "stale-cursor"]


def outcome(expected: Expected, *found: tuple[str, str]) -> Outcome:
    findings = [finding(det, sev, "s") for det, sev in found]
    return Outcome(A, expected, verdict=judge(expected, findings))


def test_confusion_counts_hits_misses_and_false_alarms() -> None:
    outcomes = [
        outcome(Expected(required=["causal-gap"]), ("causal-gap", "low")),  # any severity hits
        outcome(Expected(required=["causal-gap"])),  # a miss
        outcome(Expected(any_of=[["causal-gap", "lost-response"]]), ("lost-response", "high")),
        outcome(Expected(), ("phantom-resume", "low")),  # clean: any resumption finding
        outcome(
            Expected(required=["x"], allowed=["counter-reset"]),
            ("x", "high"),
            ("counter-reset", "high"),
            ("stale-cursor", "low"),
        ),  # allowed; low tolerated
        outcome(Expected(), ("capture-health", "info")),  # not a resumption finding
    ]
    table = {det: (r.fired, r.silent, r.false_alarm) for det, r in confusion(outcomes).items()}
    assert table == {
        "causal-gap": (1, 1, 0),
        "causal-gap|lost-response": (1, 0, 0),
        "phantom-resume": (0, 0, 1),
        "x": (1, 0, 0),
    }
    assert exit_code(MatrixResult(outcomes)) == EXIT_FINDINGS
    assert exit_code(MatrixResult([outcomes[0], outcomes[2], outcomes[5]])) == EXIT_OK
    loud = [finding("stale-cursor", "medium", "")]
    assert exit_code(MatrixResult([outcomes[0]], unattributed=loud)) == EXIT_FINDINGS


def test_a_variant_that_did_not_run_fails_the_run_with_2() -> None:
    broken = Outcome(B, Expected(), error="ReadTimeout: ")
    result = MatrixResult([outcome(Expected()), broken], wall_s=1.5)
    assert exit_code(result) == EXIT_LAB_ERROR
    text = render(result, seed=9)
    assert text.startswith("seed 9, 2 variants, wall time 1.5 s")
    assert f"{B.name} ReadTimeout" in text and B.axes_text() in text


def test_a_required_detection_only_on_another_stream_counts_as_silent() -> None:
    wanted = Expected(
        required=["phantom-resume", "repeated-tool-call"], any_of=[["causal-gap", "lost-response"]]
    )
    found = [
        {**finding("phantom-resume", "high", "s"), "stream_ids": ["re-issued"]},
        {**finding("repeated-tool-call", "high", "s"), "stream_ids": ["re-issued"]},  # not S's
        {**finding("lost-response", "high", "s"), "stream_ids": ["faulted"]},
    ]
    missed = uncited(wanted, found, "faulted")
    assert missed == ("phantom-resume",)
    assert uncited(wanted, found, None) == ()  # a 2026 variant: no faulted stream known
    assert uncited(wanted, found[:2], "faulted") == ("phantom-resume",)  # the group is silent
    judged = Outcome(A, wanted, verdict=judge(wanted, found), uncited=missed)
    table = {det: (r.fired, r.silent, r.false_alarm) for det, r in confusion([judged]).items()}
    assert table["phantom-resume"] == (0, 1, 0)
    assert table["causal-gap|lost-response"] == (1, 0, 0)
    assert not judged.ok and exit_code(MatrixResult([judged])) == EXIT_FINDINGS
    assert "MISS phantom-resume on the faulted stream" in render(MatrixResult([judged]), seed=1)


def test_the_faulted_stream_is_the_first_call_or_get_of_the_first_session(tmp_path: Path) -> None:
    owed = dataclasses.replace(A, owed=True, answer="full")
    get = dataclasses.replace(owed, owed=False, progress="none", tool="slow_report")
    newer = dataclasses.replace(get, answer="superseded", ids="constant")  # resolves to the newer

    def request(flow: str, method: str, session: str, body: str = "", **more: str) -> str:
        headers = [
            ["mcp-session-id", session],
            *([k.replace("_", "-"), v] for k, v in more.items()),
        ]
        record = {"kind": "request", "flow": flow, "method": method, "headers": headers}
        return json.dumps({**record, "body": {"text": body}})

    call = '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}'
    lines = [
        request("list", "POST", f"{owed.name}-1", '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'),
        request("call", "POST", f"{owed.name}-1", call),
        request("again", "POST", f"{owed.name}-1", call),
        request("resume", "GET", f"{get.name}-1", last_event_id="4"),
        request("get", "GET", f"{get.name}-1"),
        request("next", "GET", f"{get.name}-2"),
        request("older", "GET", f"{newer.name}-1"),
        request("newer", "GET", f"{newer.name}-1"),
        request("resumed", "GET", f"{newer.name}-1", last_event_id="0"),
    ]
    (tmp_path / "capture-x-0000.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    found = faulted_streams(tmp_path, [owed, get, newer])
    assert found == {owed.name: "call", get.name: "get", newer.name: "newer"}


ROW = re.compile(r"^(\S+)\s+(\d+)\s+(\d+)\s+(\d+)$")


@pytest.mark.lab
@pytest.mark.timeout(240)
def test_cli_runs_a_fixed_sample_with_no_miss_and_no_false_alarm(tmp_path: Path) -> None:
    out = tmp_path / "matrix"
    argv = [sys.executable, "-m", "analyzer.cli", "lab", "matrix", "--sample", "18"]
    done = subprocess.run(
        [*argv, "--seed", "2025", "--out", str(out)], capture_output=True, text=True, timeout=230
    )
    text = done.stdout
    assert "seed 2025, 18 variants, wall time" in text, done.stderr
    rows = [ROW.match(line) for line in text.splitlines()]
    counts = {m.group(1): tuple(int(g) for g in m.groups()[1:]) for m in rows if m}
    assert counts, text
    # A zero gate: every required detection fired, nothing forbidden did.
    assert all(row[1:] == (0, 0) for row in counts.values()), text
    assert "findings of no variant" not in text and "lab errors (" not in text, text
    assert done.returncode == EXIT_OK, text + done.stderr
    assert (out / "matrix.json").is_file() and any((out / "capture").glob("capture-*.jsonl"))


@pytest.mark.lab
@pytest.mark.timeout(240)
def test_batches_each_get_their_own_capture_and_one_result(tmp_path: Path) -> None:
    variants = sample(5, 77)
    result = run_batches(variants, tmp_path, batch=3)
    assert [o.variant for o in result.outcomes] == variants
    assert sorted(p.name for p in tmp_path.glob("batch-*")) == ["batch-0000", "batch-0001"]
    for k, size in ((0, 3), (1, 2)):
        record = json.loads((tmp_path / f"batch-{k:04d}" / "matrix.json").read_text())
        assert len(record["variants"]) == size
