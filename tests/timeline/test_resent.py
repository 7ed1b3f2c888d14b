"""Messages sent more than once: the copies `duplicate-response` groups (analyzer/timeline/
resent.py; the findings are judged in tests/detectors/test_duplicate_response.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import polars as pl
import pytest

from analyzer.timeline import resent
from analyzer.timeline.resent import recurring
from tests.support.records import Capture, event, req, res, timeline_of
from tests.support.streams import (
    initialized,
    replay_with_another_result,
    response_on_two_streams,
    stream,
    ticket_call,
)


def built(build: Callable[[Capture], None]) -> Any:
    c = Capture()
    build(c)
    return timeline_of(c)


def test_responses_keep_only_a_recurring_request_id_keyed_by_its_request() -> None:
    tl = built(replay_with_another_result)
    got = resent.responses(tl).sort("ts").collect()
    assert got.select("rpc_id", "incarnation").rows() == [("4", 0), ("4", 1)]
    assert got["rkey"].n_unique() == 1 and got["carrier"].n_unique() == 1
    assert got["payload_hash"].n_unique() == 2


def test_fresh_events_are_first_sends_of_a_recurring_id_with_their_carrier() -> None:
    def same_event_twice(c: Capture) -> None:
        initialized(c)
        n = req("notifications/message", level="info", data="hello")
        stream(c, [event(n, id="u_1"), event(res(6, content=[]), id="a")], body=ticket_call(6))
        stream(c, [event(n, id="u_1"), event(res(7, content=[]), id="b")], body=ticket_call(7))

    got = resent.fresh_events(built(same_event_twice)).collect()
    assert got["event_id"].to_list() == ["u_1", "u_1"]
    assert got["carrier"].n_unique() == 2
    assert resent.fresh_events(built(replay_with_another_result)).collect().is_empty()


def test_evidence_lists_a_groups_copies_in_wire_order() -> None:
    tl = built(response_on_two_streams)
    got = (
        resent.responses(tl)
        .group_by("session_id", "rkey")
        .agg(*resent.evidence(pl.col("rpc_id"), pl.col("carrier").n_unique()))
        .collect()
    )
    row = got.row(0, named=True)
    assert (row["key"], row["what"], row["event_ids"]) == ("5", 2, ["11", "12"])
    assert len(row["stream_ids"]) == 2 and row["first_ts"] < row["last_ts"]


# --- `recurring`, on hand-built frames ---------------------------------------------------------

KEYED = pl.LazyFrame(
    {
        "s": ["a", "a", "a", "b", "b", None, None, "c", "c", "c"],
        "k": ["1", "1", "2", "1", "2", "1", "1", "9", "9", "9"],
        "n": list(range(10)),
    }
)


@pytest.mark.parametrize("engine", ["streaming", "in-memory"])
def test_recurring_keeps_every_row_of_a_recurring_key_once(
    engine: Literal["streaming", "in-memory"],
) -> None:
    got = recurring(KEYED, "s", "k").collect(engine=engine)
    assert got.columns == ["s", "k", "n"]
    assert sorted(got["n"].to_list()) == [0, 1, 5, 6, 7, 8, 9]


def test_recurring_without_a_recurring_key_is_empty_with_the_rows_columns() -> None:
    lone = KEYED.filter(pl.col("n").is_in([2, 4]))  # ("a", "2") and ("b", "2"): once each
    got = recurring(lone, "s", "k").collect()
    assert got.height == 0
    assert got.schema == recurring(KEYED, "s", "k").collect().schema == lone.collect_schema()
