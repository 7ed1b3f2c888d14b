"""cross-session-replay: a resume replaying another session's events (analyzer/detectors)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from analyzer.detectors.cross_session_replay import DETECTOR
from tests.support.records import Capture, event, res, timeline_of
from tests.support.streams import Session, note, prime, progress, shared_store_two_answers


def done(i: str, rid: int, text: str = "done") -> str:
    """The result of tools/call `rid` as an event."""
    return event(res(rid, content=[{"type": "text", "text": text}]), id=i)


def shared_store(c: Capture) -> None:
    """One store, keyed by request id, serves A and B: both call request 3, the server closes
    both streams after their priming events; A's resume replays A's rest and B's (ids 4..9),
    then B's resume replays B's own rest (6, 8, 9)."""
    a, b = Session(c, "A"), Session(c, "B")
    a.call(3, prime("1"), end="server_closed")
    b.call(3, prime("2"), end="server_closed")
    a.resume("1", progress("4", 1), progress("5", 1), done("6", 3), done("7", 3))
    b.resume("2", progress("5", 1), done("7", 3))


def lockstep_sessions(c: Capture) -> None:
    """Clean: per-stream counters in two identical clients: equal ids and payloads in both
    sessions, each resume answering its request once."""
    for sid in ("A", "B"):
        s = Session(c, sid)
        s.call(3, prime("3-0"), progress("3-1", 1), end="server_closed")
        s.resume("3-1", progress("3-2", 2), done("3-3", 3))


def answered_twice_alone(c: Capture) -> None:
    """Not ours: a resume answering a request twice, no other session involved
    (`duplicate-response` when the answers differ)."""
    s = Session(c, "A")
    s.call(3, prime("1"), end="server_closed")
    s.resume("1", done("2", 3, "first"), done("3", 3, "second"))


def replayed_twice_under_its_id(c: Capture) -> None:
    """Clean: two resumes of one cursor each replay the response under its own id, and another
    session happens to use the same ids and payloads."""
    for sid in ("A", "B"):
        s = Session(c, sid)
        s.call(3, prime("1"), end="server_closed")
        s.resume("1", done("2", 3), end="client_closed")
        s.resume("1", done("2", 3))


def answered_twice_fresh_in_lockstep(c: Capture) -> None:
    """Not ours: POST streams (no resume) answering twice, alike in two sessions."""
    for sid in ("A", "B"):
        Session(c, sid).call(3, prime("1"), done("2", 3, "x"), done("3", 3, "y"), end="complete")


def answered_twice_by_lockstep_counters(c: Capture) -> None:
    """Not ours: A's resume answers request 3 twice (`duplicate-response`); B, an identical
    client of its own counter, got the same ids and payloads fresh. Both issued "1" and "2" on
    first sendings: each session numbers its own events, their likeness says nothing."""
    a, b = Session(c, "A"), Session(c, "B")
    a.call(3, prime("1"), progress("2", 1), end="server_closed")
    a.resume("2", progress("3", 2), done("4", 3), done("5", 3, "run again"))
    b.call(3, prime("1"), progress("2", 1), progress("3", 2), done("4", 3), end="complete")


def fresh_answers_in_two_sessions(c: Capture) -> None:
    """Unrelated: two sessions answered on their POST streams, no resume."""
    for sid in ("A", "B"):
        Session(c, sid).call(3, prime("1"), done("2", 3), end="complete")


U1 = "0b8e4c1a-7d2f-4e3b-9a6c-5f1d2e3c4b5a"
U2 = "6a1f9e2d-3c4b-4d5e-8f7a-2b3c4d5e6f7a"


def shared_get_stream(c: Capture) -> None:
    """One store keys both sessions' standalone streams `_GET_stream`: B's note, sent live on B's
    GET stream, is replayed on A's GET resume."""
    a, b = Session(c, "A"), Session(c, "B")
    a.get(prime(U2), end="server_closed")
    b.get(prime("b0"), note(U1, "for B only"))
    a.resume(U2, note(U1, "for B only"))


def shared_get_stream_typescript_ids(c: Capture) -> None:
    """As `shared_get_stream`, with the TypeScript example store's ids."""
    a, b = Session(c, "A"), Session(c, "B")
    a.get(note("_GET_stream_1750000000001_k3j2h1g0", "for A"), end="server_closed")
    b.get(note("_GET_stream_1750000000002_q9w8e7r6", "for B only"))
    a.resume("_GET_stream_1750000000001_k3j2h1g0",
             note("_GET_stream_1750000000002_q9w8e7r6", "for B only"))  # fmt: skip


def counter_ids_first_sent_elsewhere(c: Capture) -> None:
    """Clean: per-session counters in lockstep: A's replayed note has the id and payload B's
    live one had."""
    a, b = Session(c, "A"), Session(c, "B")
    a.get(prime("1"), end="server_closed")
    b.get(prime("1"), note("2", "list changed"))
    a.resume("1", note("2", "list changed"))


def uuid_own_replay(c: Capture) -> None:
    """Clean: A's resume replays A's own note; B has nothing alike."""
    a, b = Session(c, "A"), Session(c, "B")
    a.get(prime(U2), note(U1, "for A"), end="server_closed")
    b.get(prime("b0"))
    a.resume(U2, note(U1, "for A"))


def cursor_carried_into_another_session(c: Capture) -> None:
    """Not ours: B's cursor sent in session A (`stale-cursor`); the server replays B's note."""
    a, b = Session(c, "A"), Session(c, "B")
    b.get(prime(U2), note(U1, "for B only"), end="server_closed")
    a.resume(U2, note(U1, "for B only"))


def cursor_carried_then_its_owner_resumes(c: Capture) -> None:
    """Clean here: A sends B's cursor (`stale-cursor`) and gets B's stored note replayed; B then
    resumes its own stream from that cursor and gets its own note."""
    a, b = Session(c, "A"), Session(c, "B")
    b.get(prime(U2), end="server_closed")
    a.resume(U2, note(U1, "for B only"))
    b.resume(U2, note(U1, "for B only"))


CASES: list[tuple[Callable[[Capture], None], list[tuple[str, list[str], list[str]]]]] = [
    (shared_store, [("mcp:A", ["5", "7"], ["3"])]),
    (shared_store_two_answers, [("mcp:A", ["3", "4"], ["3"]), ("mcp:B", ["3", "4"], ["3"])]),
    (lockstep_sessions, []),
    (answered_twice_alone, []),
    (replayed_twice_under_its_id, []),
    (answered_twice_fresh_in_lockstep, []),
    (answered_twice_by_lockstep_counters, []),
    (fresh_answers_in_two_sessions, []),
    (shared_get_stream, [("mcp:A", [U1], [])]),
    (shared_get_stream_typescript_ids, [("mcp:A", ["_GET_stream_1750000000002_q9w8e7r6"], [])]),
    (counter_ids_first_sent_elsewhere, []),
    (uuid_own_replay, []),
    (cursor_carried_into_another_session, []),
    (cursor_carried_then_its_owner_resumes, []),
]


@pytest.mark.parametrize(("build", "expected"), CASES, ids=[b.__name__ for b, _ in CASES])
def test_cases(
    build: Callable[[Capture], None], expected: list[tuple[str, list[str], list[str]]]
) -> None:
    c = Capture()
    build(c)
    found = DETECTOR.detect(timeline_of(c)).collect().sort("session")
    evidence = found.select("session", "event_ids", "request_ids").rows()
    got = [(session, list(events), list(requests)) for session, events, requests in evidence]
    assert got == expected


def test_evidence_and_detail() -> None:
    c = Capture()
    shared_store(c)
    row = DETECTOR.detect(timeline_of(c)).collect().row(0, named=True)
    assert row["title"] == "Resume replayed events of session(s) mcp:B"
    resume_a, resume_b = row["flow_ids"]
    assert resume_a != resume_b and len(row["stream_ids"]) == 1
    assert "from Last-Event-ID 1" in row["detail"] and "request(s) 3 twice" in row["detail"]
    assert row["event_ids"] == ["5", "7"] and "(ids 5, 7) that session(s) mcp:B" in row["detail"]
    assert "scope the event store by session" in row["detail"]
    assert row["first_ts"] <= row["last_ts"]
