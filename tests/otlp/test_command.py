"""`seamwatch analyze --format otlp-json` and `seamwatch export` on a real lab capture.

The capture comes from the lab's ring-buffer-eviction scenario run through the real proxy: one
tools/call stream cut after e4, resumed from e4 by a GET that gets only e7..e10.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from analyzer.cli import build_parser, main
from tests.support.lab_capture import LabRun, LabRuns
from tests.support.otlp import attributes, otlp_receiver, parse_otlp_json, spans_of

pytestmark = [pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def run(lab_runs: LabRuns) -> LabRun:
    return lab_runs.load("ring-buffer-eviction")


@pytest.fixture(scope="module")
def otlp_file(run: LabRun, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("otlp") / "traces.json"
    code = main(
        [
            "analyze",
            str(run.directory / "capture"),
            "--format",
            "otlp-json",
            "--out",
            str(out),
        ]
    )
    assert code == 1  # causal-gap is high: the report's exit code is the analysis's
    return out


def _named(spans: list[Span], name: str) -> Span:
    (span,) = [s for s in spans if s.name == name]
    return span


def _events(span: Span, name: str) -> list[dict[str, object]]:
    return [attributes(e) for e in span.events if e.name == name]


def test_otlp_json_of_a_resumed_stream(run: LabRun, otlp_file: Path) -> None:
    spans = spans_of(parse_otlp_json(otlp_file.read_text(encoding="utf-8")))
    assert len({s.trace_id for s in spans}) == 1  # one session
    (call_flow,) = run.calls("slow_report")
    (resume_flow,) = [f for f in run.flows if f.method == "GET"]

    root = _named(spans, "mcp session")
    assert attributes(root)["mcp.session.id"] == call_flow.request_header("mcp-session-id")
    call = _named(spans, "tools/call slow_report")
    assert call.parent_span_id == root.span_id
    assert call.kind == Span.SPAN_KIND_CLIENT
    assert call.start_time_unix_nano == call_flow.request_ts  # the capture's wall clock
    call_attrs = attributes(call)
    assert call_attrs["mcp.method.name"] == "tools/call"
    assert call_attrs["gen_ai.tool.name"] == "slow_report"
    assert call_attrs["jsonrpc.request.id"] == "3"
    assert not [k for k in call_attrs if k.startswith("gen_ai.tool.call.")]  # no payloads

    stream = _named(spans, "SSE stream tools/call")
    first, second = _named(spans, "SSE incarnation 0"), _named(spans, "SSE incarnation 1")
    assert first.parent_span_id == second.parent_span_id == stream.span_id
    assert second.start_time_unix_nano == resume_flow.request_ts
    sse = "seamwatch.sse.event"
    assert [e["seamwatch.sse.event_id"] for e in _events(first, sse)] == ["e1", "e2", "e3", "e4"]
    assert [e["seamwatch.sse.priming"] for e in _events(first, sse)] == [True, False, False, False]
    replayed = _events(second, sse)
    assert [e["seamwatch.sse.event_id"] for e in replayed] == ["e7", "e8", "e9", "e10"]
    assert replayed[-1]["jsonrpc.request.id"] == "3"
    assert replayed[0]["mcp.method.name"] == "notifications/progress"
    (link,) = second.links
    assert (link.trace_id, link.span_id) == (first.trace_id, first.span_id)
    assert attributes(link)["seamwatch.sse.cursor"] == "e4"

    (gap,) = _events(call, "seamwatch.finding")
    assert gap["seamwatch.detector"] == "causal-gap"
    assert gap["seamwatch.severity"] == "high"
    assert gap["seamwatch.finding.event_ids"] == ["e4", "e7"]
    assert call.status.code == Status.STATUS_CODE_ERROR
    findings = [s.name for s in spans if _events(s, "seamwatch.finding")]
    assert findings == ["tools/call slow_report"]


def test_export_sends_the_same_traces_to_an_otlp_receiver(
    run: LabRun, otlp_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with otlp_receiver() as receiver:
        code = main(
            [
                "export",
                str(run.directory / "capture"),
                "--otlp-endpoint",
                receiver.url,
            ]
        )
    assert code == 0
    assert not receiver.problems
    assert receiver.requests
    assert receiver.spans == spans_of(parse_otlp_json(otlp_file.read_text(encoding="utf-8")))
    assert "requests accepted" in capsys.readouterr().err


def test_export_with_payloads_carries_the_tool_calls_arguments(run: LabRun) -> None:
    with otlp_receiver() as receiver:
        code = main(
            [
                "export",
                str(run.directory / "capture"),
                "--otlp-endpoint",
                receiver.url,
                "--otlp-payloads",
            ]
        )
    assert code == 0
    (call,) = [s for s in receiver.spans if s.name == "tools/call slow_report"]
    (flow,) = run.calls("slow_report")
    assert flow.body is not None
    arguments = attributes(call)["gen_ai.tool.call.arguments"]
    assert isinstance(arguments, str) and arguments.startswith("{")
    assert json.loads(arguments) == flow.body["params"]["arguments"]
    assert "gen_ai.tool.call.result" in attributes(call)


def test_a_refusing_receiver_is_exit_1_with_one_line(
    run: LabRun, capsys: pytest.CaptureFixture[str]
) -> None:
    with otlp_receiver() as receiver:
        receiver.status = 400
        code = main(
            [
                "export",
                str(run.directory / "capture"),
                "--otlp-endpoint",
                receiver.url,
            ]
        )
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err  # the exporter's own warnings are folded into it
    assert err[0].startswith(
        f"seamwatch: the OTLP receiver at {receiver.url} did not accept "
        f"{len(receiver.spans)} spans (after 0 accepted requests): "
    )
    assert "400" in err[0]


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["--otlp-endpoint", "ftp://127.0.0.1:4318"], "expected an http(s) URL"),
        (["--otlp-endpoint", "127.0.0.1:4318"], "expected an http(s) URL"),
    ],
)
def test_export_usage_errors_are_exit_2(
    run: LabRun, argv: list[str], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", str(run.directory / "capture"), *argv]) == 2
    assert reason in capsys.readouterr().err


def test_export_of_a_missing_path_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nothing"
    assert main(["export", str(missing), "--otlp-endpoint", "http://127.0.0.1:9"]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_analyze_json_does_not_import_opentelemetry(run: LabRun, tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from analyzer.cli import main\n"
        f"main(['analyze', {str(run.directory / 'capture')!r}, '--format', 'json',"
        f" '--out', {str(tmp_path / 'r.json')!r}])\n"
        "otel = ('opentelemetry', 'google.protobuf')\n"
        "print(sorted(m for m in sys.modules if m.startswith(otel)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "[]", done.stderr
    assert (tmp_path / "r.json").stat().st_size > 0


def test_every_export_argument_has_help() -> None:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    export = sub.choices["export"]
    assert [a.dest for a in export._actions if not (a.help or "").strip()] == []
    formats = next(a for a in sub.choices["analyze"]._actions if "--format" in a.option_strings)
    assert formats.choices is not None and "otlp-json" in formats.choices


def test_otlp_json_to_stdout_with_payloads(
    run: LabRun, otlp_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capture = str(run.directory / "capture")
    code = main(["analyze", capture, "--format", "otlp-json", "--otlp-payloads"])
    assert code == 1
    spans = spans_of(parse_otlp_json(capsys.readouterr().out))
    call = _named(spans, "tools/call slow_report")
    assert "gen_ai.tool.call.arguments" in attributes(call)
    without = spans_of(parse_otlp_json(otlp_file.read_text(encoding="utf-8")))
    assert [s.span_id for s in spans] == [s.span_id for s in without]
