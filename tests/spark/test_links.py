"""The rows relating sessions for the cross-session detectors (analyzer/spark/links.py)."""

from __future__ import annotations

import polars as pl

from analyzer.normalize import normalize_records
from analyzer.spark.links import CALLS_VIA, SESSIONS_VIA, link_rows
from analyzer.timeline import RawTables, build_timeline
from tests.support.records import Capture, event, req, res, sse


def sid(s: str) -> dict[str, str]:
    return {"Mcp-Session-Id": s}


def session(c: Capture, s: str, ids: tuple[str, str], *, cursor: str | None = None) -> None:
    """initialize of `s` (carrying `cursor` when given), answered with events `ids`."""
    headers = {**({"Last-Event-ID": cursor} if cursor else {})}
    f = c.request(body=req("initialize", 0, protocolVersion="2025-11-25"), headers=headers)
    c.response(f, sse=True, headers=sid(s))
    c.chunk(f, sse(event(id=ids[0], data=""), event(res(0), id=ids[1])), n=0)
    c.end(f)


def call(c: Capture, s: str, rid: int, tool: str) -> None:
    f = c.request(body=req("tools/call", rid, name=tool, arguments={"x": 1}), headers=sid(s))
    c.response(f, body=res(rid, content=[]))
    c.end(f)


def links_of(c: Capture) -> pl.DataFrame:
    frames = normalize_records(c.records)
    timeline = build_timeline(RawTables.from_frames(frames))
    return link_rows(timeline, frames.tools.lazy()).collect()


def keys(links: pl.DataFrame, *, wants: bool) -> set[tuple[str, str]]:
    chosen = links.filter(pl.col("wants") == wants)
    return set(chosen.select("key", "session_id").iter_rows())


def test_a_cursor_issued_in_another_session_is_wanted_from_it() -> None:
    c = Capture().open()
    session(c, "A", ("a0", "a1"))
    session(c, "B", ("b0", "b1"), cursor="a1")  # B carries A's cursor into its initialize
    links = links_of(c)
    assert ("id:a1", "mcp:B") in keys(links, wants=True)
    assert ("id:a1", "mcp:A") in keys(links, wants=False)


def test_a_cursor_of_its_own_session_wants_nothing() -> None:
    c = Capture().open()
    session(c, "A", ("a0", "a1"))
    f = c.request("GET", headers={**sid("A"), "Last-Event-ID": "a1"})
    c.response(f, sse=True)
    c.end(f, "client_closed")
    links = links_of(c)
    assert not any(key.startswith("id:") for key, _ in keys(links, wants=True))


def test_each_tool_call_wants_its_client_and_listing_under_its_call_key() -> None:
    c = Capture().open()
    session(c, "A", ("a0", "a1"))
    call(c, "A", 1, "book")
    call(c, "A", 2, "book")
    links = links_of(c)
    calls = links.filter(pl.col("key").str.starts_with("call:"))
    assert calls.height == 2  # one row a call: the driver counts them
    assert calls["key"].n_unique() == 1
    via = set(links.filter(pl.col("via").is_not_null())["via"].to_list())
    call_key = calls["key"][0]
    assert via == {SESSIONS_VIA + call_key, CALLS_VIA + call_key}
    assert ("list:book", "mcp:A") in keys(links, wants=True)
