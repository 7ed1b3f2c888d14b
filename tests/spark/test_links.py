"""The rows relating sessions for the cross-session detectors (analyzer/spark/links.py)."""

from __future__ import annotations

import polars as pl

from analyzer.normalize import normalize_records
from analyzer.spark.links import CALLS_VIA, LISTED_VIA, ORDER, link_rows, window_of
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


def listing(c: Capture, s: str, rid: int, tool: str, **annotations: bool) -> None:
    """tools/list of `s` naming `tool` (with `annotations` when given)."""
    named = {
        "name": tool,
        "inputSchema": {},
        **({"annotations": annotations} if annotations else {}),
    }
    f = c.request(body=req("tools/list", rid), headers=sid(s))
    c.response(f, body=res(rid, tools=[named]))
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


def test_each_tool_call_wants_its_listing_under_its_call_key() -> None:
    c = Capture().open()
    session(c, "A", ("a0", "a1"))
    call(c, "A", 1, "book")
    call(c, "A", 2, "book")
    links = links_of(c)
    calls = links.filter(pl.col("key").str.starts_with("call:"))
    assert calls.height == 2  # one row a call: the driver counts them
    assert calls["key"].n_unique() == 1
    wanted = links.filter(pl.col("wants") & pl.col("via").is_not_null())
    assert set(wanted.select("key", "via").iter_rows()) == {
        ("list:book", CALLS_VIA + calls["key"][0])
    }
    # Each at its call's time: the driver chains a key's calls by the detector's window.
    assert calls["ts"].null_count() == 0 and calls["ts"].n_unique() == 2
    assert sorted(wanted["ts"].to_list()) == sorted(calls["ts"].to_list())


def test_the_window_is_the_configured_one_else_the_default_and_none_when_not_run() -> None:
    assert window_of(("repeated-tool-call",), None) == 120.0
    assert window_of(("repeated-tool-call",), {"repeated-tool-call": {"window_s": 30}}) == 30.0
    assert window_of(("stale-cursor",), None) is None


def test_each_session_offers_its_place_among_its_clients_sessions() -> None:
    c = Capture().open()
    session(c, "A", ("a0", "a1"))
    session(c, "B", ("b0", "b1"))
    order = links_of(c).filter(pl.col("key").str.starts_with(ORDER)).sort("ts")
    assert order["session_id"].to_list() == ["mcp:A", "mcp:B"]
    assert order["ts"].null_count() == 0
    assert not order["wants"].any()


def wants_of(links: pl.DataFrame, key: str) -> dict[str, str | None]:
    rows = links.filter(pl.col("wants") & (pl.col("key") == key))
    return dict(rows.select("session_id", "via").iter_rows())


def test_a_call_its_own_session_lists_wants_the_listings_only_when_their_hints_differ() -> None:
    c = Capture().open()
    session(c, "A", ("a0", "a1"))
    listing(c, "A", 1, "book", readOnlyHint=False)
    call(c, "A", 2, "book")
    session(c, "B", ("b0", "b1"))
    call(c, "B", 1, "book")  # B never listed the tool: it reads another session's listing
    links = links_of(c)
    calls = links.filter(pl.col("key").str.starts_with("call:"))
    call_of = dict(calls.select("session_id", "key").iter_rows())
    assert wants_of(links, "list:book") == {
        "mcp:A": LISTED_VIA + CALLS_VIA + call_of["mcp:A"],
        "mcp:B": CALLS_VIA + call_of["mcp:B"],
    }
    offers = links.filter(~pl.col("wants") & (pl.col("key") == "list:book"))
    assert offers.select("session_id").to_series().to_list() == ["mcp:A"]
    hints = offers["via"][0]
    assert hints is not None and hints.startswith("true,false")  # annotated, readOnlyHint


def test_listings_with_other_hints_offer_other_hints() -> None:
    c = Capture().open()
    session(c, "A", ("a0", "a1"))
    listing(c, "A", 1, "book")
    session(c, "B", ("b0", "b1"))
    listing(c, "B", 1, "book", readOnlyHint=True)
    offers = links_of(c).filter(~pl.col("wants") & (pl.col("key") == "list:book"))
    assert offers["via"].n_unique() == 2
