"""The oracle: each rule on hand-picked variants, derived from the fault (never from output)."""

from __future__ import annotations

import dataclasses

import pytest

from lab.framework import Expected
from lab.matrix.oracle import expected
from lab.matrix.variants import CHUNKINGS, ID_SCHEMES, MODERN_ERA, REISSUE, Variant, sample

OWED = Variant(
    ids="uuid",
    seen=2,
    progress="none",
    answer="full",
    owed=True,
    cursor="last",
    replica="same",
    era="2025-11-25",
    chunking="one",
    tool="slow_report",
)
GET = dataclasses.replace(OWED, owed=False)
LOSS = [["causal-gap", "lost-response"]]


def v(base: Variant, **change: object) -> Variant:
    return dataclasses.replace(base, **change)  # type: ignore[arg-type]


CASES = [
    # Clean: a full replay, or a ring that evicted only what the client had.
    ("full replay, response owed", v(OWED), Expected()),
    ("full replay, GET stream", v(GET, cursor="lagging"), Expected()),
    ("ring evicted only seen events", v(OWED, answer="tail-seen", progress="total"), Expected()),
    # Surviving tail after eviction of unseen events: a skip, required where the wire shows it.
    (
        "tail, progress with total",
        v(OWED, answer="tail-unseen", progress="total"),
        Expected(required=["causal-gap"]),
    ),
    (
        "tail, one bare progress before the cut",
        v(OWED, answer="tail-unseen", progress="bare", seen=1),
        Expected(required=["causal-gap"]),
    ),
    (
        "tail, zero-padded counter ids on the GET stream",
        v(GET, answer="tail-unseen", ids="padded"),
        Expected(required=["causal-gap"]),
    ),
    (
        "tail, progress with total, none before the cut: where it started is unknown",
        v(OWED, answer="tail-unseen", progress="total", seen=0),
        Expected(allowed=["causal-gap"]),
    ),
    (
        "tail, UUIDs and no progress: no trace of the skip",
        v(OWED, answer="tail-unseen"),
        Expected(allowed=["causal-gap"]),
    ),
    (
        "tail past a lagging cursor, opaque ids, GET: looks fresh",
        v(GET, answer="tail-unseen", cursor="lagging"),
        Expected(allowed=["causal-gap", "phantom-resume"]),
    ),
    (
        "tail past a lagging cursor, session-wide counter ids, GET: a fresh stream's look alike",
        v(GET, answer="tail-unseen", cursor="lagging", ids="padded"),
        Expected(required=["causal-gap"], allowed=["phantom-resume"]),
    ),
    (
        "tail past a lagging cursor, <stream>_<n> ids, GET alone has ids: a prefix of S or "
        "of the session",
        v(GET, answer="tail-unseen", cursor="lagging", ids="stream"),
        Expected(required=["causal-gap"], allowed=["phantom-resume"]),
    ),
    # Fresh ids where a response was due: a phantom, and the response is lost.
    ("fresh, response owed", v(OWED, answer="fresh"), Expected(["phantom-resume"], LOSS)),
    (
        "fresh, GET stream, nothing due on the wire",
        v(GET, answer="fresh"),
        Expected(allowed=["causal-gap", "phantom-resume"]),
    ),
    (
        "fresh, GET stream, an event read past the cursor",
        v(GET, answer="fresh", cursor="lagging"),
        Expected(["phantom-resume"], allowed=["causal-gap"]),
    ),
    # The tool ran again while the client was away: its request answered twice.
    (
        "answered twice on the replay",
        v(OWED, answer="answer-twice", replica="other"),
        Expected(["duplicate-response"]),
    ),
    # A collected buffer: a fresh stream whose counter starts again on the resumed stream.
    (
        "restart, padded counter, two seen",
        v(OWED, answer="restart", ids="padded"),
        Expected(["counter-reset", "duplicate-event-id", "phantom-resume"], LOSS),
    ),
    (
        "restart from the priming cursor: nothing runs backwards, no id reused",
        v(GET, answer="restart", ids="counter", seen=0),
        Expected(allowed=["causal-gap", "counter-reset", "phantom-resume"]),
    ),
    (
        "restart, UUIDs: a fresh stream",
        v(OWED, answer="restart"),
        Expected(["phantom-resume"], LOSS),
    ),
    # The due ids with other payloads: a duplicate only where the first copy was on the wire.
    (
        "other payloads, lagging cursor",
        v(OWED, answer="other-payloads", cursor="lagging"),
        Expected(["duplicate-event-id", "phantom-resume"], LOSS),
    ),
    (
        "other payloads, cursor at the last id",
        v(OWED, answer="other-payloads"),
        Expected(["phantom-resume"], LOSS),
    ),
    # No event at all: no phantom (§5 must-not); the owed response is lost.
    (
        "empty 200s, response owed: the client resumes five times",
        v(OWED, answer="empty"),
        Expected(["resume-loop"], LOSS),
    ),
    (
        "priming-only 200s, response owed",
        v(OWED, answer="stall"),
        Expected(["resume-loop"], LOSS, ["phantom-resume"]),
    ),
    (
        "priming-only 200s on the GET stream: no response owed, no loop",
        v(GET, answer="stall"),
        Expected(allowed=["causal-gap", "phantom-resume"]),
    ),
    ("empty 200, GET stream", v(GET, answer="empty"), Expected(allowed=["causal-gap"])),
    # Honest answers: no phantom; a side-effecting re-issue after loss is a repeated call.
    (
        "control event, side-effecting re-issue",
        v(OWED, answer="honest-new", tool="create_ticket"),
        Expected(["repeated-tool-call"], allowed=["causal-gap"]),
    ),
    (
        "re-establish error, read-only re-issue",
        v(OWED, answer="honest-error"),
        Expected(allowed=["causal-gap"]),
    ),
    (
        "404, re-initialized, side-effecting re-issue",
        v(OWED, answer="404", tool="create_ticket"),
        Expected(["repeated-tool-call"], allowed=["causal-gap", "lost-response"]),
    ),
    ("409 on the GET stream", v(GET, answer="409"), Expected(allowed=["causal-gap"])),
    # Replicas: cross-replica only when the capture can tell.
    (
        "fresh from another replica, named",
        v(OWED, answer="fresh", replica="other"),
        Expected(["cross-replica-resume", "phantom-resume"], LOSS),
    ),
    (
        "fresh from another replica, hidden",
        v(OWED, answer="fresh", replica="hidden"),
        Expected(["phantom-resume"], LOSS),
    ),
    (
        "another replica delivered the owed response: a shared log",
        v(OWED, answer="full", replica="other"),
        Expected(),
    ),
    (
        "another replica replayed the GET stream",
        v(GET, replica="other"),
        Expected(["cross-replica-resume"]),
    ),
    (
        "an error from another replica",
        v(OWED, answer="409", replica="other"),
        Expected(allowed=["causal-gap"]),
    ),
    # One constant id for every event: uniqueness broken as soon as two messages share it.
    ("constant ids, full replay", v(OWED, ids="constant"), Expected(["duplicate-event-id"])),
    (
        "constant ids, one message only",
        v(GET, ids="constant", seen=1, answer="empty"),
        Expected(allowed=["causal-gap"]),
    ),
    # The server ends the stream after `retry:`: waiting is clean, coming back at once is not.
    ("server cut, the client waits the retry", v(OWED, cut="server"), Expected()),
    ("server cut, the client resumes at once", v(OWED, cut="early"), Expected(["retry-violation"])),
    # Families: the fault lies outside the resume's answer, which is the full replay.
    (
        "resume after the session was DELETEd",
        v(OWED, answer="after-delete"),
        Expected(["resume-after-termination"]),
    ),
    (
        "resume after DELETE, GET stream, another replica, at once after a server cut",
        v(GET, answer="after-delete", replica="other", cut="early"),
        Expected(["cross-replica-resume", "resume-after-termination", "retry-violation"]),
    ),
    (
        "an older GET stream resumed after a newer one",
        v(GET, answer="superseded"),
        Expected(["superseded-stream"]),
    ),
    (
        "an older GET stream resumed, constant ids: the cursor resolves to the newer stream",
        v(GET, answer="superseded", ids="constant", seen=0, cut="early"),
        Expected(["duplicate-event-id"], allowed=["retry-violation", "superseded-stream"]),
    ),
    (
        "a cursor carried into a new session, response owed in the old one",
        v(OWED, answer="carried-cursor", replica="other"),
        Expected(["stale-cursor"], LOSS),
    ),
    (
        "a cursor carried into a new session from the GET stream",
        v(GET, answer="carried-cursor", ids="constant", seen=1),
        Expected(["stale-cursor"], allowed=["causal-gap"]),
    ),
    (
        "the response on the GET stream instead of the call's",
        v(OWED, answer="response-on-get", tool="create_ticket"),
        Expected(["response-on-get-stream"]),
    ),
    (
        "the response on the GET stream, constant ids",
        v(OWED, answer="response-on-get", ids="constant"),
        Expected(["duplicate-event-id", "response-on-get-stream"]),
    ),
    # 2026: no resume; closing the stream cancels; the client re-issues under a new id.
    (
        "2026 re-issue of a side-effecting call",
        v(OWED, era=MODERN_ERA, answer=REISSUE, tool="create_ticket"),
        Expected(["repeated-tool-call"]),
    ),
    ("2026 re-issue of a read-only call", v(OWED, era=MODERN_ERA, answer=REISSUE), Expected()),
]


@pytest.mark.parametrize(("variant", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule(variant: Variant, want: Expected) -> None:
    assert expected(variant) == want


@pytest.mark.parametrize("ids", [i for i in ID_SCHEMES if i != "constant"])
def test_full_replay_is_clean_for_every_unique_id_scheme(ids: str) -> None:
    for base in (OWED, GET):
        assert expected(v(base, ids=ids)) == Expected()


def test_chunking_and_gzip_never_change_the_expected_set() -> None:
    for variant in sample(200, 1):
        want = expected(variant)
        assert all(expected(v(variant, chunking=c)) == want for c in CHUNKINGS)
