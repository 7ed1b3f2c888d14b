"""Run a lab scenario through the real proxy and read its capture back, record by record.

The analyzer is not used on purpose: these tests check what the capture files hold (json.loads
per line), so they stay true whatever the analysis derives from them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.clients.raw import SseEvent, SseLineParser
from lab.framework import LabError, load_lab_record, run_scenario
from lab.scenarios import by_name
from lab.ts import ensure_installed


def _header(headers: list[list[str]], name: str) -> str | None:
    return next((value for key, value in headers if key.lower() == name.lower()), None)


@dataclass
class Flow:
    """One HTTP exchange from the capture: its request, response, chunks and stream end."""

    id: str
    request: dict[str, Any]
    response: dict[str, Any] | None = None
    chunks: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] | None = None

    @property
    def method(self) -> str:
        return str(self.request["method"])

    def request_header(self, name: str) -> str | None:
        return _header(self.request["headers"], name)

    def response_header(self, name: str) -> str | None:
        return None if self.response is None else _header(self.response["headers"], name)

    @property
    def status(self) -> int | None:
        return None if self.response is None else int(self.response["status"])

    @property
    def body(self) -> dict[str, Any] | None:
        """The request's JSON-RPC message."""
        text = (self.request.get("body") or {}).get("text")
        return json.loads(text) if text else None

    @property
    def rpc_method(self) -> str | None:
        body = self.body
        return None if body is None else body.get("method")

    @property
    def tool(self) -> str | None:
        body = self.body
        if body is None or body.get("method") != "tools/call":
            return None
        return str(body["params"]["name"])

    @property
    def events(self) -> list[SseEvent]:
        """The SSE events of a streamed response, id-only priming events included."""
        parser = SseLineParser()
        text = "".join(chunk["data"].get("text", "") for chunk in self.chunks)
        events = []
        for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
            event = parser.feed(line)
            if event is not None:
                events.append(event)
        return events

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The JSON-RPC messages the response delivered (SSE data or the JSON body)."""
        if self.response is not None and not self.response.get("streamed"):
            text = (self.response.get("body") or {}).get("text")
            return [json.loads(text)] if text else []
        return [m for m in (event.message for event in self.events) if m is not None]

    @property
    def request_ts(self) -> int:
        return int(self.request["ts_ns"])


@dataclass
class LabRun:
    """A finished scenario: its directory, notes, expected.json and capture records."""

    directory: Path
    notes: dict[str, Any]
    expected: dict[str, Any]
    files: list[list[dict[str, Any]]]

    @property
    def records(self) -> list[dict[str, Any]]:
        return [record for records in self.files for record in records]

    @property
    def flows(self) -> list[Flow]:
        """Every captured exchange, in the order its request was recorded."""
        flows: dict[str, Flow] = {}
        for record in sorted(self.records, key=lambda r: r["seq"]):
            kind = record["kind"]
            if kind == "request":
                flows[record["flow"]] = Flow(record["flow"], record)
            elif kind in ("response", "chunk", "stream_end") and record["flow"] in flows:
                flow = flows[record["flow"]]
                if kind == "response":
                    flow.response = record
                elif kind == "chunk":
                    flow.chunks.append(record)
                else:
                    flow.end = record
        return list(flows.values())

    def calls(self, tool: str) -> list[Flow]:
        return [flow for flow in self.flows if flow.tool == tool]

    @property
    def resumes(self) -> list[Flow]:
        """The exchanges whose request carried `Last-Event-ID`, in request order."""
        return [flow for flow in self.flows if flow.request_header("last-event-id")]


def load_run(directory: Path) -> LabRun:
    """The capture records, notes and expected.json a scenario left in `directory`."""
    files = []
    for path in sorted((directory / "capture").glob("capture-*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            files.append([json.loads(line) for line in lines if line.strip()])
    lab = load_lab_record(directory)
    expected = json.loads((directory / "expected.json").read_text(encoding="utf-8"))
    notes = lab["notes"]
    assert isinstance(notes, dict)
    return LabRun(directory, notes, expected, files)


class LabRuns:
    """Each lab scenario run at most once per test session, on first use, into `out`.

    A scenario's tests and the expectations test read the same run (nothing here writes into
    it: analyses run with `--no-cache`), and a scenario that failed fails every later asker
    with the same error instead of running again.
    """

    def __init__(self, out: Path) -> None:
        self.out = out
        self._ran: dict[str, Path | LabError] = {}
        self._install_error: LabError | None = None
        self._installed = False

    def directory(self, name: str) -> Path:
        """The directory of scenario `name`'s run; LabError when it could not run."""
        if name not in self._ran:
            self._ran[name] = self._run(name)
        ran = self._ran[name]
        if isinstance(ran, LabError):
            raise ran
        return ran

    def load(self, name: str) -> LabRun:
        """Scenario `name`'s run, its capture read back record by record."""
        return load_run(self.directory(name))

    def _run(self, name: str) -> Path | LabError:
        scenario = by_name(name)
        assert scenario is not None, f"scenario {name} is not registered"
        if not self._installed:
            # `npm ci` in lab/ts when the pinned SDK is missing; only the TypeScript scenarios
            # need it, so its failure is said with theirs.
            self._installed = True
            try:
                ensure_installed()
            except LabError as exc:
                self._install_error = exc
        try:
            return run_scenario(scenario, self.out)
        except LabError as exc:
            if self._install_error is not None:
                return LabError(f"{exc} (and the TypeScript SDK: {self._install_error})")
            return exc


def assert_well_formed(run: LabRun) -> None:
    """capture_open first in every file, seq without gaps, capture_close last, no drops."""
    assert run.files, f"no capture-*.jsonl in {run.directory / 'capture'}"
    for records in run.files:
        assert records[0]["kind"] == "capture_open"
    seqs = sorted(record["seq"] for record in run.records)
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "seq has gaps: records lost"
    last = run.files[-1][-1]
    assert last["kind"] == "capture_close", "no capture_close: the proxy did not stop cleanly"
    assert last.get("dropped", 0) == 0
    for flow in run.flows:
        assert flow.response is not None, f"{flow.method} {flow.request['path']} got no response"


def assert_tool_stream_resumed_after_retry(run: LabRun) -> tuple[Flow, Flow]:
    """The run's one `slow_report` call (3 steps): a priming event with the run's `retry_ms`,
    progress 1, then the server ended the stream; one resume from the last event, sent at least
    the retry later (10% tolerance), replayed progress 2, 3 and the result. Returns both flows."""
    (call,) = run.calls("slow_report")
    events = call.events
    assert events[0].data == "" and events[0].id and events[0].retry == run.notes["retry_ms"]
    assert [m["params"]["progress"] for m in call.messages] == [1]  # then the server closed
    assert call.end is not None and call.end["how"] in ("complete", "server_closed")
    (resume,) = run.resumes
    assert resume.method == "GET" and resume.status == 200
    assert resume.request_header("last-event-id") == events[-1].id
    waited_ms = (resume.request_ts - int(call.end["ts_ns"])) / 1e6
    assert waited_ms >= run.notes["retry_ms"] * 0.9
    messages = resume.messages
    assert [m["params"]["progress"] for m in messages if "method" in m] == [2, 3]
    assert call.body is not None
    assert messages[-1]["id"] == call.body["id"] and "result" in messages[-1]
    assert run.notes["progress_seen"] == [1, 2, 3]
    return call, resume
