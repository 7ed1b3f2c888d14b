"""duplicate-event-id: one event id, two payloads, in one session (analyzer/detectors)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from analyzer.detectors import run_detectors
from analyzer.detectors.duplicate_event_id import DETECTOR
from tests.support.records import Capture, event, req, res, sse, timeline_of

S1 = {"Mcp-Session-Id": "S1"}
UUID = "0b7c5c52-3f39-4c8e-9d5e-2a8e3c1f7a10"
TS_ID = f"{UUID}_1750000000123_k3j9"  # the TypeScript SDK's <streamId>_<epoch-ms>_<rand>


def progress(n: int) -> dict[str, object]:
    return req("notifications/progress", progressToken="t", progress=n)


def initialized(c: Capture, sid: str = "S1", replica: str = "a") -> None:
    f = c.request(body=req("initialize", 0, protocolVersion="2025-11-25", capabilities={}))
    c.response(f, body=res(0, protocolVersion="2025-11-25"), headers={"Mcp-Session-Id": sid})


def call(c: Capture, rid: int, blocks: list[str], *, headers: dict[str, str] = S1,
         replica: str = "a", how: str = "client_closed") -> str:  # fmt: skip
    f = c.request(body=req("tools/call", rid, name="t", arguments={}), headers=headers)
    c.response(f, sse=True, replica=replica)
    c.chunk(f, sse(*blocks), n=0)
    c.end(f, how)
    return f


def resume(c: Capture, cursor: str, blocks: list[str], *, headers: dict[str, str] = S1,
           replica: str = "a", how: str = "complete") -> str:  # fmt: skip
    f = c.request("GET", headers={**headers, "Last-Event-ID": cursor})
    c.response(f, sse=True, replica=replica)
    c.chunk(f, sse(*blocks), n=0)
    c.end(f, how)
    return f


def counter_restarted_on_other_replica(c: Capture) -> None:
    """Replica b answers the resume with its own counter: 1 (priming), 2 (another message)."""
    initialized(c)
    call(c, 4, [event(id="1", data=""), event(progress(1), id="2"), event(progress(2), id="3")])
    resume(c, "3", [event(id="1", data=""), event(req("notifications/message"), id="2")],
           replica="b", how="client_closed")  # fmt: skip


def uuid_reused_across_streams(c: Capture) -> None:
    initialized(c)
    call(c, 1, [event(id=TS_ID, data=""), event(res(1, content=[]), id=UUID)], how="complete")
    call(c, 2, [event(res(2, content=[]), id=UUID)], how="complete")


def same_data_other_event_type(c: Capture) -> None:
    initialized(c)
    call(c, 1, [event("ready", id="e7", event="status"), event("ready", id="e7")], how="complete")


def exact_replay_on_get(c: Capture) -> None:
    """Clean: server close with retry, resume, faithful replay, a new priming event after it."""
    initialized(c)
    call(c, 3, ["retry: 300\nid: e1\ndata: ", event(progress(1), id="e2")], how="server_closed")
    resume(c, "e1", [event(progress(1), id="e2"), event(res(3, content=[]), id="e3"),
                     event(id="e4", data="")])  # fmt: skip


def priming_id_reused(c: Capture) -> None:
    initialized(c)
    call(c, 1, [event(id=TS_ID, data=""), event(progress(1), id="p")])
    resume(c, TS_ID, [event(id=TS_ID, data=""), event(id="p", data="")], how="client_closed")


def canonically_equal(c: Capture) -> None:
    initialized(c)
    call(c, 1, [event('{"a": 1, "b": [2]}', id="bWVzc2FnZS0x")])
    resume(c, "bWVzc2FnZS0x", [event('{"b":[2],"a":1}', id="bWVzc2FnZS0x")])


def same_id_other_session(c: Capture) -> None:
    initialized(c, "S1")
    call(c, 1, [event(progress(1), id="e2")], how="complete")
    initialized(c, "S2")
    call(c, 1, [event(progress(9), id="e2")], headers={"Mcp-Session-Id": "S2"}, how="complete")


SESSIONLESS = {"MCP-Protocol-Version": "2026-07-28"}


def sessionless_streams_count_alike(c: Capture) -> None:
    call(c, 1, [event(progress(1), id="1"), event(res(1, content=[]), id="2")],
         headers=SESSIONLESS, how="complete")  # fmt: skip
    call(c, 2, [event(progress(5), id="1"), event(res(2, content=[]), id="2")],
         headers=SESSIONLESS, how="complete")  # fmt: skip


def sessionless_stream_reuses_an_id(c: Capture) -> None:
    call(c, 1, [event(progress(1), id="1"), event(res(1, content=[]), id="1")],
         headers=SESSIONLESS, how="complete")  # fmt: skip


CASES: list[tuple[Callable[[Capture], None], list[str]]] = [
    (counter_restarted_on_other_replica, ["2"]),
    (uuid_reused_across_streams, [UUID]),
    (same_data_other_event_type, ["e7"]),
    (sessionless_stream_reuses_an_id, ["1"]),
    (exact_replay_on_get, []),
    (priming_id_reused, []),
    (canonically_equal, []),
    (same_id_other_session, []),
    (sessionless_streams_count_alike, []),
]


@pytest.mark.parametrize(("build", "event_ids"), CASES, ids=[b.__name__ for b, _ in CASES])
def test_cases(build: Callable[[Capture], None], event_ids: list[str]) -> None:
    c = Capture()
    build(c)
    found = run_detectors(timeline_of(c), only=["duplicate-event-id"])
    assert found["detector"].to_list() == ["duplicate-event-id"] * len(event_ids)
    assert [ids[0] for ids in found["event_ids"].to_list()] == event_ids
    assert set(found["severity"].to_list()) <= {"high"}


def test_evidence_and_detail_name_streams_flows_and_replicas() -> None:
    c = Capture()
    counter_restarted_on_other_replica(c)
    found = DETECTOR.detect(timeline_of(c)).collect()
    assert found.height == 1
    row = found.row(0, named=True)
    assert row["session"] == "mcp:S1"
    assert row["event_ids"] == ["2"]
    assert row["flow_ids"] == ["f2", "f3"]  # the call, then the resume, in wire order
    assert row["stream_ids"] == ["f2"]  # the resume is an incarnation of the call's stream
    assert row["era"] == "2025-11-25"
    assert "replica(s): a, b" in row["detail"]
    assert "session-scoped authoritative event log" in row["detail"]
    assert "sticky routing" in row["detail"]
    assert row["first_ts"] < row["last_ts"]
