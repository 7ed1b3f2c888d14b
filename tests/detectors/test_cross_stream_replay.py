"""cross-stream-replay: a resume replaying another stream's messages (analyzer/detectors)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from analyzer.detectors.cross_stream_replay import DETECTOR
from tests.support.records import Capture, event, req, res, timeline_of
from tests.support.streams import S1, findings, initialized, stream

A = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
B = "1f2e3d4c-5b6a-4978-8a7b-6c5d4e3f2a1b"


def tag(stream: str, n: int) -> str:
    """A TypeScript-SDK style event id: `<streamId>_<epoch-ms>_<rand>`."""
    return f"{stream}_17500000000{n:02d}_r{n}"


def progress(token: str, n: int) -> dict[str, object]:
    return req("notifications/progress", progressToken=token, progress=n)


def call(c: Capture, rid: int, blocks: list[str], how: str = "complete") -> str:
    return stream(c, blocks, body=req("tools/call", rid, name="t", arguments={}), how=how)


def resume(c: Capture, cursor: str, blocks: list[str]) -> str:
    return stream(c, blocks, headers={**S1, "Last-Event-ID": cursor})


def two_calls(c: Capture, ids: tuple[str, str, str, str]) -> None:
    """Stream f2 answers request 4; stream f3 (request 5) breaks after one progress event."""
    initialized(c)
    call(c, 4, [event(progress("a", 1), id=ids[0]), event(res(4, content=[]), id=ids[1])])
    call(c, 5, [event(id=ids[2], data=""), event(progress("b", 1), id=ids[3])], "server_closed")


def replays_other_streams_event(c: Capture) -> None:
    two_calls(c, ("a1", "a2", "b1", "b2"))
    resume(c, "b2", [event(progress("a", 1), id="a1"), event(res(5, content=[]), id="b3")])


def replays_other_streams_event_twice(c: Capture) -> None:
    """Both resumes of stream f3 replay f2's event: one finding per incarnation."""
    two_calls(c, ("a1", "a2", "b1", "b2"))
    resume(c, "b2", [event(progress("a", 1), id="a1")])
    resume(c, "b2", [event(progress("a", 1), id="a1"), event(res(5, content=[]), id="b3")])


def replays_other_streams_response(c: Capture) -> None:
    """A store keyed by session, not stream: request 4's response comes back under a new id."""
    two_calls(c, (tag(A, 1), tag(A, 2), tag(B, 3), tag(B, 4)))
    resume(c, tag(B, 4), [event(res(4, content=[]), id=tag(B, 5)), event(res(5), id=tag(B, 6))])


def own_replay(c: Capture) -> None:
    """Clean: the resume replays the stream's own event, then its response and a priming event."""
    two_calls(c, ("1", "2", "3", "4"))
    resume(c, "3", [event(progress("b", 1), id="4"), event(res(5), id="5"), event(id="6", data="")])


def equal_payload_fresh_id(c: Capture) -> None:
    """Clean: an equal payload under a fresh event id is a new message."""
    two_calls(c, ("e1", "e2", "e3", "e4"))
    resume(c, "e4", [event(progress("a", 1), id="e5"), event(res(5), id="e6")])


def same_id_other_payload(c: Capture) -> None:
    """Not ours: an id reused with another payload is duplicate-event-id's finding."""
    two_calls(c, ("x1", "x2", "x3", "x4"))
    resume(c, "x4", [event(progress("b", 2), id="x1"), event(res(5), id="x5")])


def reused_request_id(c: Capture) -> None:
    """Clean: the client reuses id 4 in its session; the resume replays its own stream's
    response to 4, not the earlier stream's (which answered its own 4)."""
    initialized(c)
    call(c, 4, [event(res(4, content=[]), id="a1")])
    call(c, 4, [event(id="b1", data=""), event(progress("b", 1), id="b2")], "server_closed")
    resume(c, "b2", [event(res(4, content=[]), id="b3")])


def reused_request_id_other_response(c: Capture) -> None:
    """A standalone GET stream's resume carries a response to 4, which two streams used: it is
    the latest one's (f3), whose own stream never carried it."""
    initialized(c)
    call(c, 4, [event(res(4, content=[]), id="a1")])
    call(c, 4, [event(id="b1", data="")], "server_closed")
    stream(c, [event(id="g1", data="")], headers=S1, how="server_closed")
    resume(c, "g1", [event(res(4, content=[]), id="g2")])


CASES: list[tuple[Callable[[Capture], None], list[tuple[list[str], list[str]]]]] = [
    (replays_other_streams_event, [(["a1"], [])]),
    (replays_other_streams_event_twice, [(["a1"], []), (["a1"], [])]),
    (replays_other_streams_response, [([tag(B, 5)], ["4"])]),
    (reused_request_id_other_response, [(["g2"], ["4"])]),
    (own_replay, []),
    (reused_request_id, []),
    (equal_payload_fresh_id, []),
    (same_id_other_payload, []),
]


@pytest.mark.parametrize(("build", "expected"), CASES, ids=[b.__name__ for b, _ in CASES])
def test_cases(
    build: Callable[[Capture], None], expected: list[tuple[list[str], list[str]]]
) -> None:
    found = findings(build, "cross-stream-replay", opened=False)
    assert found["detector"].to_list() == ["cross-stream-replay"] * len(expected)
    assert set(found["severity"].to_list()) <= {"high"}
    got = [(list(e), list(r)) for e, r in found.select("event_ids", "request_ids").rows()]
    assert got == expected


def test_evidence_and_detail() -> None:
    c = Capture()
    replays_other_streams_event(c)
    row = DETECTOR.detect(timeline_of(c)).collect().row(0, named=True)
    assert row["session"] == "mcp:S1"
    assert row["flow_ids"] == ["f4"] and row["stream_ids"] == ["f3", "f2"]
    assert row["title"] == "Resume of stream f3 replayed messages of stream(s) f2"
    assert "Last-Event-ID b2" in row["detail"] and "key the event store by stream" in row["detail"]


def test_a_reused_id_names_the_latest_stream_that_used_it() -> None:
    c = Capture()
    reused_request_id_other_response(c)
    row = DETECTOR.detect(timeline_of(c)).collect().row(0, named=True)
    assert row["stream_ids"] == ["f4", "f3"]
