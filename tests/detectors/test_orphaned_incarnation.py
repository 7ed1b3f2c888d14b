"""orphaned-incarnation: a live incarnation left open and silent after a later resume."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from analyzer.detectors import run_detectors
from analyzer.detectors.orphaned_incarnation import DETECTOR
from tests.support.records import Capture, event, req, res, sse, timeline_of

VERSION = "2025-11-25"
UUID = "5d1e9f3a-2b7c-4d8e-9f0a-1b2c3d4e5f60"


def counter(n: int) -> str:
    return str(n)


def ts_id(n: int) -> str:
    return f"{UUID}_17500000001{n:02d}_r{n}"  # TypeScript SDK shape


def session(c: Capture) -> dict[str, str]:
    f = c.request(body=req("initialize", 0, protocolVersion=VERSION))
    c.response(f, body=res(0, protocolVersion=VERSION), headers={"Mcp-Session-Id": "S1"})
    return {"Mcp-Session-Id": "S1", "MCP-Protocol-Version": VERSION}


def progress(n: int) -> dict[str, object]:
    return req("notifications/progress", progressToken="p", progress=n)


def two_resumes(
    *,
    first_end: str | None = "client_closed",
    first_end_at: float = 9000.0,
    second_status: int = 200,
    first_fed_after: bool = False,
    post_open: bool = False,
    ids: Callable[[int], str] = counter,
) -> Callable[[Capture], None]:
    """tools/call (id 7) broken after progress 1 (unless `post_open`: its POST stays open and
    silent); resume A at 100 ms from that cursor replays progress 2; resume B at 200 ms with the
    same cursor is answered `second_status` and carries progress 3 and the result. A ends as
    `first_end` at `first_end_at` ms (None: no stream_end); with `first_fed_after` A carries
    one more event after B's answer."""

    def build(c: Capture) -> None:
        h = session(c)
        p = c.request(body=req("tools/call", 7, name="slow", arguments={}), headers=h, at=10.0)
        c.response(p, sse=True, at=11.0)
        c.chunk(p, sse(f"id: {ids(1)}\ndata: ", event(progress(1), id=ids(2))), n=0, at=12.0)
        if not post_open:
            c.end(p, "client_closed", at=50.0)
        cursor = {**h, "Last-Event-ID": ids(2)}
        a = c.request("GET", headers=cursor, at=100.0)
        c.response(a, sse=True, at=101.0)
        c.chunk(a, sse(event(progress(2), id=ids(3))), n=0, at=102.0)
        if first_end is not None and first_end_at < 200.0:
            c.end(a, first_end, at=first_end_at)
        b = c.request("GET", headers=cursor, at=200.0)
        if second_status != 200:
            c.response(b, second_status, at=201.0)
        else:
            c.response(b, sse=True, at=201.0)
            c.chunk(b, sse(event(progress(2), id=ids(3))), n=0, at=202.0)
            c.chunk(b, sse(event(progress(3), id=ids(4))), n=1, at=203.0)
            c.chunk(b, sse(event(res(7, content=[]), id=ids(5))), n=2, at=204.0)
            c.end(b, "complete", at=205.0)
        if first_fed_after:
            c.chunk(a, sse(event(progress(9), id=ids(9))), n=1, at=300.0)
        if first_end is not None and first_end_at >= 200.0:
            c.end(a, first_end, at=first_end_at)
        if post_open:
            c.end(p, "client_closed", at=first_end_at + 1)

    build.__name__ = "_".join(
        [
            str(first_end),
            f"{first_end_at:g}",
            str(second_status),
            "fed" if first_fed_after else "silent",
            "post_open" if post_open else "post_closed",
            "ts" if ids is ts_id else "n",
        ]
    )
    return build


CASES: list[tuple[Callable[[Capture], None], list[int]]] = [
    # the report: A stays open, silent, until the client gives up on it
    (two_resumes(), [1]),
    (two_resumes(first_end="open_at_shutdown", first_end_at=60_000.0, ids=ts_id), [1]),
    (two_resumes(first_end=None), [1]),
    # the original POST left open and silent while its stream is resumed (twice)
    (two_resumes(post_open=True, first_end_at=5000.0), [0, 1]),
    # near miss: A ended before B was sent, or within overlap_s of B's answer
    (two_resumes(first_end_at=150.0), []),
    (two_resumes(first_end="server_closed", first_end_at=900.0), []),
    # near miss: B refused
    (two_resumes(second_status=409), []),
    # near miss: A still fed after B
    (two_resumes(first_fed_after=True), []),
]


@pytest.mark.parametrize(("build", "expected"), CASES, ids=[b.__name__ for b, _ in CASES])
def test_cases(build: Callable[[Capture], None], expected: list[int]) -> None:
    c = Capture()
    build(c)
    found = run_detectors(timeline_of(c), only=["orphaned-incarnation"])
    assert found["detector"].to_list() == ["orphaned-incarnation"] * len(expected)
    assert found["severity"].to_list() == ["medium"] * len(expected)
    incarnations = sorted(int(row["title"].split()[1]) for row in found.iter_rows(named=True))
    assert incarnations == expected


def test_clean_resume_chain_is_silent() -> None:
    c = Capture()
    h = session(c)
    p = c.request(body=req("tools/call", 7, name="slow", arguments={}), headers=h)
    c.response(p, sse=True)
    c.chunk(p, sse("id: 1\nretry: 10\ndata: "), n=0)
    c.end(p, "server_closed")
    for n in range(2, 5):
        g = c.request("GET", headers={**h, "Last-Event-ID": str(n - 1)}, at=100.0 * n)
        c.response(g, sse=True)
        c.chunk(g, sse(f"id: {n}\nretry: 10\ndata: "), n=0)
        c.end(g, "server_closed")
    assert run_detectors(timeline_of(c), only=["orphaned-incarnation"]).is_empty()


def test_threshold_and_evidence() -> None:
    c = Capture()
    two_resumes(first_end="client_closed", first_end_at=1500.0)(c)
    timeline = timeline_of(c)
    row = DETECTOR.detect(timeline).collect().row(0, named=True)
    assert row["session"] == "mcp:S1"
    assert row["flow_ids"] == ["f3", "f4"]  # the orphan, then the resume that replaced it
    assert row["stream_ids"] == ["f2"]
    assert row["event_ids"] == ["2"]
    assert row["request_ids"] == ["7"]
    assert DETECTOR.detect(timeline, overlap_s=2.0).collect().is_empty()
