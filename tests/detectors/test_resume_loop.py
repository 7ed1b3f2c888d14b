"""resume-loop: a stream resumed again and again with no new message while its response is owed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from analyzer.detectors import run_detectors
from analyzer.detectors.resume_loop import DETECTOR
from tests.support.records import Capture, event, req, res, sse, timeline_of

VERSION = "2025-11-25"
UUID = "5d1e9f3a-2b7c-4d8e-9f0a-1b2c3d4e5f60"


def ts_id(n: int) -> str:
    return f"{UUID}_17500000001{n:02d}_r{n}"  # TypeScript SDK shape


def session(c: Capture) -> dict[str, str]:
    f = c.request(body=req("initialize", 0, protocolVersion=VERSION))
    c.response(f, body=res(0, protocolVersion=VERSION), headers={"Mcp-Session-Id": "S1"})
    return {"Mcp-Session-Id": "S1", "MCP-Protocol-Version": VERSION}


def polls(
    answers: list[str], *, same_cursor: bool = False, ids: Callable[[int], str] = str
) -> Callable[[Capture], None]:
    """A tools/call stream closed by the server, then one resume per answer.

    Answers: "prime" (a new priming event only), "empty" (200, no event), "progress" (a
    notification), "result" (the response), "404".
    """

    def build(c: Capture) -> None:
        h = session(c)
        p = c.request(body=req("tools/call", 1, name="slow", arguments={}), headers=h)
        c.response(p, sse=True)
        c.chunk(p, sse(f"retry: 10\nid: {ids(0)}\ndata: "), n=0)
        c.end(p, "complete")
        cursor = ids(0)
        for n, answer in enumerate(answers, start=1):
            g = c.request("GET", headers={**h, "Last-Event-ID": cursor}, at=20.0 * n)
            if answer == "404":
                c.response(g, 404)
                continue
            c.response(g, sse=True)
            if answer == "progress":
                note = req("notifications/progress", progressToken="p", progress=n)
                c.chunk(g, sse(event(note, id=ids(n))), n=0)
            elif answer == "result":
                c.chunk(g, sse(event(res(1, content=[]), id=ids(n))), n=0)
            elif answer == "prime":
                c.chunk(g, sse(f"retry: 10\nid: {ids(n)}\ndata: "), n=0)
            c.end(g, "complete")
            if answer != "empty" and not same_cursor:
                cursor = ids(n)

    build.__name__ = "_".join([*answers[:1], str(len(answers))]) + ("_same" if same_cursor else "")
    return build


CASES: list[tuple[Callable[[Capture], None], list[tuple[str, int, int]]]] = [
    # fresh priming events only: the cursor moves, the stream never does
    (polls(["prime"] * 5, ids=ts_id), [("medium", 5, 5)]),
    (polls(["empty"] * 6), [("medium", 6, 1)]),
    (polls(["404"] * 5, ids=lambda n: f"e{n}"), [("medium", 5, 1)]),
    # near miss: one resume short
    (polls(["prime"] * 4, ids=ts_id), []),
    # near miss: a resume that brought a message breaks the run
    (polls(["prime"] * 3 + ["progress"] + ["prime"] * 3), []),
    # clean: polling that delivers the response in the end
    (polls(["prime"] * 7 + ["result"], ids=ts_id), []),
]


@pytest.mark.parametrize(("build", "expected"), CASES, ids=[b.__name__ for b, _ in CASES])
def test_cases(build: Callable[[Capture], None], expected: list[tuple[str, int, int]]) -> None:
    c = Capture()
    build(c)
    found = run_detectors(timeline_of(c), only=["resume-loop"])
    assert found["detector"].to_list() == ["resume-loop"] * len(expected)
    got = [
        (row["severity"], len(row["flow_ids"]), len(row["event_ids"]))
        for row in found.iter_rows(named=True)
    ]
    assert got == expected


def test_threshold_and_evidence() -> None:
    c = Capture()
    polls(["prime"] * 5, ids=ts_id)(c)
    timeline = timeline_of(c)
    row = DETECTOR.detect(timeline).collect().row(0, named=True)
    assert row["session"] == "mcp:S1"
    assert row["stream_ids"] == ["f2"]
    assert row["request_ids"] == ["1"]
    assert row["event_ids"][0] == ts_id(0)
    assert "resumed 5 times in a row" in row["detail"]
    assert DETECTOR.detect(timeline, min_resumes=6).collect().is_empty()
