"""causal-gap: what a resumed stream carried or owed after the cursor and never delivered."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from analyzer.detectors.causal_gap import DETECTOR
from tests.support.records import (
    ID_SCHEMES,
    PER_STREAM_COUNTERS,
    Capture,
    Cut,
    event,
    req,
    res,
    sse,
)
from tests.support.streams import Session, findings, note, prime, progress

U = ("6f1c0a52-3e9b-4c1d-9a57-0b2e8d4f6a11", "a3d9e6f0-7b21-4f8e-8c3a-5e0d1b9c2f47",
     "0c8e5b7a-9d14-4e2f-b6a1-3f7c9e2d8b50", "d27f4a13-6c5e-4b98-a0e1-8b3c7d9f1e62",
     "91b0e8d2-4a6f-4c37-9e15-2d8a6b4c0f73", "5e2a7c91-0b3d-4f68-8a24-c6e1f9d7b384",
     "b84d1f6e-2c9a-4e05-97b3-1a5f0c8e6d95")  # fmt: skip
TS = "15ebf62e-07b4-4391-a83e-033ef8d202cf_17500000001{:02d}_x{}k3j"  # TypeScript SDK shape


def result(i: str, rid: int) -> str:
    return event(res(rid, content=[{"type": "text", "text": "done"}]), id=i)


def run(build: Callable[[Capture], None]) -> list[dict[str, Any]]:
    return findings(build, DETECTOR.id, opened=True).to_dicts()


# --- must flag --------------------------------------------------------------------------------


def ring_buffer_eviction(c: Capture) -> None:
    s = Session(c, "ring-1")
    s.call(3, prime("e1"), progress("e2", 1), progress("e3", 2), progress("e4", 3))
    s.resume("e4", progress("e7", 6), progress("e8", 7), progress("e9", 8), result("e10", 3))


def replica_without_the_buffer(c: Capture) -> None:
    s = Session(c, "rr-1")
    s.call(4, prime(U[0]), progress(U[1], 1), progress(U[2], 2), progress(U[3], 3))
    # The client resumes from the older cursor U[1]: U[2], U[3] were due again.
    s.resume(U[1], prime(U[4]), note(U[5], "fresh"), end="client_closed", replica="b")


def counter_restarted_response_never_came(c: Capture) -> None:
    s = Session(c, "ttl-1")
    s.call(3, prime(TS.format(1, 1)), progress(TS.format(2, 2), 1))
    s.resume(TS.format(2, 2), prime(TS.format(1, 3)), note(TS.format(3, 4), "x"))


def standalone_stream_skipped_by_a_replay(c: Capture) -> None:
    s = Session(c, "7q2dUm9xWk4")
    s.get(note("QUJD", "a"), note("REVG", "b"), note("R0hJ", "c"))
    s.resume("QUJD", note("SktM", "d"), end="open_at_shutdown")


def still_open_at_capture_end(c: Capture) -> None:
    s = Session(c, "ttl-2")
    s.call(3, prime("17"), progress("18", 1))
    s.resume("18", prime("19"), end="open_at_shutdown")


def uneven_progress_and_counter_skip(c: Capture) -> None:
    s = Session(c, "S1")
    s.call(5, prime("s1_1"), progress("s1_2", 100), progress("s1_3", 350), progress("s1_4", 900))
    s.resume("s1_4", progress("s1_9", 5000), result("s1_10", 5))


def reused_id_answered_only_before(c: Capture) -> None:
    """The client reuses id 3 in its session: the first call's answer came before the second
    call was made, so it pays nothing the resumed second stream owed."""
    s = Session(c, "reuse-1")
    s.call(3, prime("e1"), result("e2", 3), end="complete")
    s.call(3, prime("e3"), progress("e4", 1))
    s.resume("e4", prime("e5"))


def lockstep_counter_in_another_session(c: Capture) -> None:
    """The GET stream's replay goes on at 5 after cursor 2; another session carries 3 and 4,
    but it issued 1 and 2 too: its own counter in lockstep, not one the sessions share."""
    Cut(ids="integer", seen=2, owed=False, progress="none", answer="tail", era="2025-06-18").build(
        c
    )
    s = Session(c, "9d4b7e2a1c3f5e60")
    s.get(*(note(str(n), f"other {n}") for n in range(1, 7)), end="complete")


FLAGGED: dict[str, tuple[Callable[[Capture], None], str, list[str], list[str]]] = {
    "ring buffer: replay starts at progress 6 after 3": (
        ring_buffer_eviction, "high", ["e4", "e7"], ["3"]),
    "resume on a replica without the buffer": (
        replica_without_the_buffer, "high", [U[1], U[2], U[3]], ["4"]),
    "counter restarted, response never came": (
        counter_restarted_response_never_came, "high", [TS.format(2, 2)], ["3"]),
    "standalone stream, replay skipped two": (
        standalone_stream_skipped_by_a_replay, "info", ["QUJD", "REVG", "R0hJ"], []),
    "still open at capture end": (still_open_at_capture_end, "info", ["18"], ["3"]),
    "id reused, answered only before": (reused_id_answered_only_before, "high", ["e4"], ["3"]),
    "GET stream skipped two, another session's counter in lockstep": (
        lockstep_counter_in_another_session, "medium", ["2", "5"], []),
    "uneven progress (medium) and a counter skip (medium): high": (
        uneven_progress_and_counter_skip, "high", ["s1_4", "s1_9"], ["5"]),
}  # fmt: skip


@pytest.mark.parametrize(("build", "severity", "event_ids", "request_ids"), FLAGGED.values(),
                         ids=FLAGGED.keys())  # fmt: skip
def test_flags_what_never_arrived(
    build: Callable[[Capture], None], severity: str, event_ids: list[str], request_ids: list[str]
) -> None:
    found = run(build)
    assert len(found) == 1
    assert found[0]["severity"] == severity
    assert found[0]["event_ids"] == event_ids
    assert found[0]["request_ids"] == request_ids
    assert "What to change" in found[0]["detail"]


def test_ring_buffer_detail_names_the_jump() -> None:
    detail = run(ring_buffer_eviction)[0]["detail"]
    assert "at 6 (event e7)" in detail and "last progress was 3" in detail
    assert "about 2 message(s)" in detail


# --- must not flag ----------------------------------------------------------------------------


def correct_replay_then_new_priming(c: Capture) -> None:
    s = Session(c, "8f2e4c1a9b7d4e6f")
    s.call(2, prime(U[0]), progress(U[1], 1), end="complete")  # server close with retry
    s.resume(U[1], progress(U[2], 2), progress(U[3], 3), result(U[4], 2), prime(U[5]))


def replay_finished_at_a_later_incarnation(c: Capture) -> None:
    s = Session(c, "S1")
    s.call(5, prime("e1"), progress("e2", 1), progress("e3", 2), progress("e4", 3))
    s.resume("e2", progress("e3", 2), end="server_closed")
    s.resume("e3", progress("e4", 3), progress("e5", 4), result("e6", 5))


def replay_under_fresh_ids(c: Capture) -> None:  # the same messages, renumbered
    s = Session(c, "S1")
    s.call(5, prime("e1"), progress("e2", 1), progress("e3", 2), progress("e4", 3))
    s.resume("e2", progress("f3", 2), progress("f4", 3), result("f5", 5))


def uneven_progress_counter_goes_on(c: Capture) -> None:
    # Progress jumps, but the stream's own counter goes on at cursor + 1: nothing was skipped.
    s = Session(c, "S1")
    s.call(5, prime("s1_1"), progress("s1_2", 100), progress("s1_3", 350), progress("s1_4", 900))
    s.resume("s1_4", progress("s1_5", 5000), result("s1_6", 5))


def contiguous_replay_in_even_steps(c: Capture) -> None:
    s = Session(c, "S1")
    s.call(5, prime("e1"), progress("e2", 0.1), progress("e3", 0.2), progress("e4", 0.3))
    # The client resumes from an older cursor: the replay starts right after it.
    s.resume("e3", progress("e4", 0.3), progress("e5", 0.4), progress("e6", 0.5), result("e7", 5))


def cancelled_after_the_resume(c: Capture) -> None:
    s = Session(c, "S1")
    s.call(5, prime("e1"), progress("e2", 1))
    s.resume("e2", prime("e3"), end="client_closed")
    s.cancel(5)


def never_resumed(c: Capture) -> None:
    s = Session(c, "S1")
    s.call(5, prime("e1"), progress("e2", 1))


def sessionless_stream_closed_then_reissued(c: Capture) -> None:
    meta = {"_meta": {"io.modelcontextprotocol/clientInfo": {"name": "app", "version": "1"}}}
    for rid in (1, 2):
        f = c.request(body=req("tools/call", rid, name="report", arguments={}, **meta),
                      headers={"MCP-Protocol-Version": "2026-07-28"})  # fmt: skip
        c.response(f, sse=True)
        c.chunk(f, sse(progress("", 1)), n=0)
        c.end(f, "client_closed")
    g = c.request("GET", headers={"MCP-Protocol-Version": "2026-07-28", "Last-Event-ID": "x"})
    c.response(g, 405)


CLEAN = {
    "correct replay, then a new priming event": correct_replay_then_new_priming,
    "replay finished at a later incarnation": replay_finished_at_a_later_incarnation,
    "replay under fresh ids": replay_under_fresh_ids,
    "uneven progress, counter goes on at cursor + 1": uneven_progress_counter_goes_on,
    "contiguous replay in even steps": contiguous_replay_in_even_steps,
    "client cancelled the request": cancelled_after_the_resume,
    "never resumed (lost-response, not a gap)": never_resumed,
    "2026: closed streams re-issued": sessionless_stream_closed_then_reissued,
}


@pytest.mark.parametrize("build", CLEAN.values(), ids=CLEAN.keys())
def test_quiet_on_continuations(build: Callable[[Capture], None]) -> None:
    assert run(build) == []


# --- the shapes real servers take (tests/support/records.py `Cut`) ----------------------------


def _expected(cut: Cut) -> str | None:
    """What the rules of DESIGN.md §5 say of a `tail` answer (two messages skipped)."""
    progress_before = cut.progress != "none" and cut.seen >= 1
    replayed = cut.messages - cut.seen - 2  # progress notifications in the tail
    step_known = replayed >= 2 or cut.seen >= 2 or cut.progress == "total"
    by_progress = progress_before and replayed >= 1 and step_known
    by_counter = cut.ids in PER_STREAM_COUNTERS
    if by_progress:
        return "high"
    return "medium" if by_counter else None


SHAPES = [
    Cut(ids=ids, seen=seen, progress=progress, answer="tail", chunking=chunking, era=era)
    for ids in ID_SCHEMES
    for seen, progress, chunking, era in (
        (0, "total", "one", "2025-11-25"),  # only the priming event before the cut
        (1, "total", "several", "2025-11-25"),  # ONE progress notification before the cut
        (2, "bare", "midline", "2025-06-18"),
        (3, "none", "one", "2025-03-26"),  # notifications/message only: no progress
        (2, "total", "gzip", "2025-11-25"),
    )
] + [
    Cut(ids="uuid", seen=1, messages=4, progress="total", answer="tail"),  # step from total
    Cut(ids="uuid", seen=1, messages=4, progress="bare", answer="tail"),  # no step: nothing
    Cut(ids="padded", seen=2, owed=False, progress="none", answer="tail"),  # GET stream
]


@pytest.mark.parametrize("cut", SHAPES, ids=repr)
def test_a_skipping_replay_in_every_shape(cut: Cut) -> None:
    found = run(cut.build)
    expected = _expected(cut)
    assert [f["severity"] for f in found] == ([expected] if expected else [])


CONTINUATIONS = [
    Cut(ids=ids, seen=seen, progress=progress, answer=answer, chunking=chunking, era=era)
    for ids in ID_SCHEMES
    for seen, progress, answer, chunking, era in (
        (0, "total", "replay", "midline", "2025-11-25"),
        (1, "bare", "replay", "several", "2025-06-18"),
        (3, "none", "replay", "one", "2025-11-25"),
        (2, "total", "tail", "one", "2026-07-28"),  # no resume in 2026: GET refused
    )
]


@pytest.mark.parametrize("cut", CONTINUATIONS, ids=repr)
def test_no_gap_in_a_full_replay_of_any_shape(cut: Cut) -> None:
    assert run(cut.build) == []


def test_a_counter_shared_by_the_sessions_streams_skips_legitimately() -> None:
    def shared(c: Capture) -> None:
        Cut(ids="integer", seen=2, progress="none", answer="tail").build(c)
        # Another stream of the capture carried the numbers the replay went past.
        s = Session(c, "other")
        s.get(note("4", "a"), note("5", "b"))

    assert run(shared) == []
