"""analyzer.timeline.replays: the events whose id recurs, those of resumed streams, their
messages and the progress the resumed streams made."""

from __future__ import annotations

import datetime as dt

import polars as pl
from polars.testing import assert_frame_equal

from analyzer import schema as S
from analyzer.timeline.replays import (
    RECURRING_EVENT_COLUMNS,
    REPLAY_MESSAGE_COLUMNS,
    RESUMED_EVENT_COLUMNS,
    RESUMED_PROGRESS_COLUMNS,
    carried_keys,
    delivered_twice,
    other_session_replays,
    recurring_events,
    recurring_keys,
    reissued,
    replay_messages,
    resumed_events,
    resumed_flows,
    resumed_progress,
)


def events(*rows: tuple[str | None, str | None, str | None, bool]) -> pl.LazyFrame:
    """SSE_EVENTS rows given as (session_id, stream_id, event_id, id_only), numbered by
    `ordinal` (the other columns null)."""
    given = {
        "session_id": [r[0] for r in rows],
        "stream_id": [r[1] for r in rows],
        "event_id": [r[2] for r in rows],
        "id_only": [r[3] for r in rows],
        "ordinal": list(range(len(rows))),
    }
    return pl.LazyFrame(
        {name: given.get(name, [None] * len(rows)) for name in S.SSE_EVENTS},
        schema=S.SSE_EVENTS,
    )


def test_recurring_events_are_those_whose_id_another_event_of_the_session_carries() -> None:
    frame = events(
        ("s1", "a", "1", False),  # 0: id 1 twice in s1, on two streams: both kept
        ("s1", "b", "1", False),  # 1
        ("s1", "a", "2", False),  # 2: once in s1 ...
        ("s2", "c", "2", False),  # 3: ... and once in s2: not a recurrence
        ("s1", "a", "3", True),  # 4: an id-only event does not count ...
        ("s1", "a", "3", False),  # 5: ... so id 3 carried once
        (None, "d", "9", False),  # 6: no session is one session: kept
        (None, "e", "9", False),  # 7
        ("s1", "a", "", False),  # 8: empty and missing ids name nothing
        ("s1", "a", "", False),  # 9
        ("s1", "a", None, False),  # 10
        ("s1", "a", None, False),  # 11
        ("s3", "f", "4", False),  # 12: three times: all kept
        ("s3", "f", "4", False),  # 13
        ("s3", "g", "4", False),  # 14
        ("s3", "g", "4", True),  # 15: but not the id-only one
    )
    found = recurring_events(frame, recurring_keys(frame)).collect()
    assert sorted(found["ordinal"]) == [0, 1, 6, 7, 12, 13, 14]
    assert tuple(found.columns) == RECURRING_EVENT_COLUMNS
    assert recurring_keys(frame).collect().height == 3  # (s1, 1), (None, 9), (s3, 4)


RESUMPTIONS = pl.LazyFrame(
    {
        "status": ["resolved", "resolved", "unresolved"],
        "stream_id": ["s1", "s2", "s3"],
        # s1 continued by its resume; s2's resume was answered as a stream of its own.
        "answer_stream_id": ["s1", "g2", None],
    }
)


def test_reissued_are_the_ids_issued_with_several_payloads_where_ids_must_be_unique() -> None:
    rows = [  # (session_id, stream_id, event_id, event, payload_hash)
        ("S", "s1", "e1", "message", "p"),  # a replay of one payload: not reissued
        ("S", "s2", "e1", "message", "p"),
        ("S", "s1", "e2", "message", "p"),  # two payloads on two streams of a session
        ("S", "s2", "e2", "message", "q"),
        ("S", "s1", "e3", "message", "p"),  # the same data as another event type
        ("S", "s1", "e3", "other", "p"),
        ("A", "a1", "e5", "message", "p"),  # no server session: two streams may share an id
        ("A", "a2", "e5", "message", "q"),
        ("A", "a1", "e6", "message", "p"),  # but not within one stream
        ("A", "a1", "e6", "message", "q"),
        ("A", "a1", "e6", "message", "r"),
    ]
    names = ("session_id", "stream_id", "event_id", "event", "payload_hash")
    recurring = pl.LazyFrame(
        {n: [dict(zip(names, r, strict=True)).get(n) for r in rows] for n in S.RECURRING_EVENTS},
        schema=S.RECURRING_EVENTS,
    )
    sessions = pl.LazyFrame(
        {"session_id": ["S", "A"], "kind": ["mcp", "anon"]},
        schema={"session_id": pl.String, "kind": S.SESSIONS["kind"]},
    )
    found = reissued(recurring, sessions).collect()
    got = sorted(found.select("event_id", "stream_id", "_scope", "_payloads").rows())
    assert got == [
        ("e2", "s1", "", 2),
        ("e2", "s2", "", 2),
        ("e3", "s1", "", 2),
        ("e3", "s1", "", 2),
        ("e6", "a1", "a1", 3),
        ("e6", "a1", "a1", 3),
        ("e6", "a1", "a1", 3),
    ]


def test_resumed_events_are_every_event_of_the_streams_a_resume_continued() -> None:
    frame = events(
        *((None, stream, None, False) for stream in ["s1", "s1", "s2", "s3", None, "s1"])
    )
    found = resumed_events(frame, RESUMPTIONS).collect()
    assert sorted(found["ordinal"]) == [0, 1, 5]
    assert tuple(found.columns) == RESUMED_EVENT_COLUMNS


def test_resumed_flows_are_the_flows_whose_events_resumed_events_keeps() -> None:
    streams = ["s1", "s1", "s2", "s3", None, "s1"]
    placed = pl.LazyFrame(
        {"flow_id": [f"f{i}" for i in range(len(streams))], "stream_id": streams},
        schema={"flow_id": pl.String, "stream_id": pl.String},
    )
    found = resumed_flows(placed, RESUMPTIONS).collect()
    assert sorted(found["flow_id"]) == ["f0", "f1", "f5"]  # s1's: s2's resume was no incarnation
    assert found.columns == ["flow_id"]
    # Its flows' events, placed, are the events `resumed_events` keeps of all of them.
    frame = events(*((None, stream, None, False) for stream in streams)).with_columns(
        pl.concat_str(pl.lit("f"), pl.col("ordinal")).alias("flow_id")
    )
    of_flows = frame.join(found.lazy(), on="flow_id", how="semi")
    assert_frame_equal(
        resumed_events(of_flows, RESUMPTIONS).collect(),
        resumed_events(frame, RESUMPTIONS).collect(),
        check_row_order=False,
    )


def test_carried_keys_are_the_distinct_flow_and_ordinal_of_every_carrier() -> None:
    first = pl.LazyFrame({"flow_id": ["f1", "f1", "f3"], "ordinal": [0, 0, 0], "ts": [1, 2, 3]})
    second = pl.LazyFrame({"flow_id": ["f2", "f1"], "ordinal": [0, 1]})
    found = carried_keys(first, second).collect()
    assert found.columns == ["flow_id", "ordinal"]
    assert sorted(found.rows()) == [("f1", 0), ("f1", 1), ("f2", 0), ("f3", 0)]


def test_replay_messages_are_the_messages_the_given_events_carried() -> None:
    rows = [  # (flow_id, source, ordinal, member)
        ("f1", "sse", 0, None),  # carried by an event of the first set
        ("f1", "sse", 1, None),  # its event is in neither
        ("f2", "sse", 0, 0),  # a batch of two in an event of the second set: both kept
        ("f2", "sse", 0, 1),
        ("f2", "request_body", None, None),  # not carried by an event
    ]
    names = ("flow_id", "source", "ordinal", "member")
    messages = pl.LazyFrame(
        {name: [dict(zip(names, r, strict=True)).get(name) for r in rows] for name in S.MESSAGES},
        schema=S.MESSAGES,
    )
    first = pl.LazyFrame({"flow_id": ["f1", "f3"], "ordinal": [0, 0]})
    second = pl.LazyFrame({"flow_id": ["f2", "f1"], "ordinal": [0, 0]})  # (f1, 0) in both
    found = replay_messages(messages, first, second).collect()
    assert sorted(found.select("flow_id", "ordinal").rows()) == [("f1", 0), ("f2", 0), ("f2", 0)]
    assert tuple(found.columns) == REPLAY_MESSAGE_COLUMNS
    # Given the carriers' keys instead, as `build_timeline` does: the same rows.
    by_keys = replay_messages(messages, carried_keys(first, second)).collect()
    assert_frame_equal(by_keys, found, check_row_order=False)


def at(second: int) -> dt.datetime:
    """A time `second` seconds into the epoch (UTC)."""
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=second)


def test_delivered_twice_is_what_one_response_carried_again_with_the_same_payload() -> None:
    rows = [  # (flow_id, stream_id, event_id, payload_hash, source, direction, ts)
        ("f1", "s1", "e1", "p", "sse", "s2c", at(1)),  # carried three times on f1
        ("f1", "s1", "e1", "p", "sse", "s2c", at(2)),
        ("f1", "s1", "e1", "p", "sse", "s2c", at(5)),
        ("f1", "s1", "e2", "p", "sse", "s2c", at(3)),  # the same payload under another id: once
        ("f1", "s1", "e3", "p", "sse", "s2c", at(3)),
        ("f1", "s1", "e4", "a", "sse", "s2c", at(3)),  # the same id with another payload
        ("f1", "s1", "e4", "b", "sse", "s2c", at(4)),
        ("f2", "s1", "e1", "p", "sse", "s2c", at(6)),  # a replay on a later response: not twice
        ("f3", "s3", "e9", "q", "request_body", "c2s", at(1)),  # not an SSE event
        ("f3", "s3", "e9", "q", "request_body", "c2s", at(2)),
        ("f4", "s4", None, "q", "sse", "s2c", at(1)),  # no event id
        ("f4", "s4", None, "q", "sse", "s2c", at(2)),
    ]
    names = ("flow_id", "stream_id", "event_id", "payload_hash", "source", "direction", "ts")
    messages = pl.LazyFrame(
        {name: [dict(zip(names, r, strict=True)).get(name) for r in rows] for name in S.MESSAGES},
        schema=S.MESSAGES,
    )
    found = delivered_twice(messages).collect()
    assert found.select("flow_id", "_event_id", "payload_hash", "_times").rows() == [
        ("f1", "e1", "p", 3)
    ]
    assert found.select("first_ts", "last_ts").row(0) == (at(1), at(5))


def test_resumed_progress_is_each_resumed_streams_progress_in_stream_order() -> None:
    rows = [  # (stream_id, incarnation, ordinal, progress_token, progress)
        ("s1", 1, 0, "7", 3.0),  # the resume's incarnation: after the first's two events
        ("s1", 0, 1, "7", 2.0),
        ("s1", 0, 0, "7", 1.0),
        ("s1", 0, 0, "8", 5.0),  # another token, same event position
        ("s1", 1, 1, None, None),  # not a progress notification
        ("s2", 0, 0, "7", 1.0),  # a stream no resume continued
    ]
    names = ("stream_id", "incarnation", "ordinal", "progress_token", "progress")
    messages = pl.LazyFrame([dict(zip(names, r, strict=True)) for r in rows])
    resumptions = pl.LazyFrame(
        {"status": ["resolved"], "stream_id": ["s1"], "answer_stream_id": ["s1"]}
    )
    incarnations = pl.LazyFrame(
        {"stream_id": ["s1", "s1", "s2"], "incarnation": [0, 1, 0], "base_events": [0, 2, 0]}
    )
    found = resumed_progress(
        messages.with_columns(
            pl.lit(None, S.TS).alias("ts"),
            pl.lit(None, pl.String).alias("event_id"),
            pl.lit(None, pl.String).alias("data_hash"),
        ),
        resumptions,
        incarnations,
    ).collect()
    assert tuple(found.columns) == RESUMED_PROGRESS_COLUMNS
    assert found.select("progress_token", "incarnation", "stream_pos", "progress").rows() == [
        ("7", 0, 0, 1.0),
        ("7", 0, 1, 2.0),
        ("7", 1, 2, 3.0),
        ("8", 0, 0, 5.0),
    ]


def test_other_session_replays_name_what_the_answer_carried_again_after_the_cursor() -> None:
    ts = [dt.datetime(2026, 1, 1, 0, 0, n, tzinfo=dt.UTC) for n in range(8)]
    resumptions = pl.LazyFrame(
        {
            "flow_id": ["g", "h"],
            "status": ["other_session", "resolved"],
            "cursor": ["a2", "b1"],
            "cursor_session_id": ["A", "B"],
            "cursor_stream_id": ["sa", "sb"],
            "cursor_ts": [ts[1], ts[0]],
        }
    )
    rows = [  # (session_id, stream_id, flow_id, ordinal, event_id, payload_hash, id_only, ts)
        ("A", "sa", "sa", 0, "a1", "p1", False, ts[0]),
        ("A", "sa", "sa", 1, "a2", "p2", False, ts[1]),  # the cursor: not a replay of it
        ("A", "sa", "sa", 2, "a3", "p3", False, ts[2]),
        ("A", "sa", "sa", 3, "a4", "p4", False, ts[3]),
        ("B", "sg", "g", 0, "a2", "p2", False, ts[4]),
        ("B", "sg", "g", 1, "a4", "p4", False, ts[5]),  # replayed, answer order kept
        ("B", "sg", "g", 2, "a3", "p3", False, ts[6]),
        ("B", "sg", "g", 3, "a1", "p1", False, ts[6]),  # sent before the cursor: no
        ("B", "sg", "g", 4, "a5", "p5", False, ts[7]),  # never sent in A: no
        ("B", "sb", "h", 0, "a3", "p3", False, ts[7]),  # a resume of its own session: no
    ]
    names = ("session_id", "stream_id", "flow_id", "ordinal", "event_id", "payload_hash",
             "id_only", "ts")  # fmt: skip
    events = pl.LazyFrame(
        {name: [r[i] for r in rows] for i, name in enumerate(names)},
        schema_overrides={"ts": pl.Datetime("us", "UTC")},
    )
    got = other_session_replays(resumptions, events).collect()
    assert got.rows() == [("g", ["a4", "a3"])]
    none = other_session_replays(resumptions.filter(pl.col("flow_id") == "h"), events)
    assert none.collect().is_empty()
