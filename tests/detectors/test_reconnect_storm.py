"""reconnect-storm: standalone GET streams the server ends empty at once, reopened at once."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from analyzer.detectors import run_detectors
from analyzer.detectors.reconnect_storm import DETECTOR
from tests.support.records import Capture, event, req, res, sse, timeline_of

VERSION = "2025-11-25"


def session(c: Capture, sid: str = "S1") -> dict[str, str]:
    f = c.request(body=req("initialize", 0, protocolVersion=VERSION))
    c.response(f, body=res(0, protocolVersion=VERSION), headers={"Mcp-Session-Id": sid})
    return {"Mcp-Session-Id": sid, "MCP-Protocol-Version": VERSION}


def gets(
    answers: list[str], *, every_ms: float = 20.0, open_ms: float = 1.0, sid: str = "S1"
) -> Callable[[Capture], None]:
    """GETs without a cursor, one per answer, `every_ms` apart, each answered at once.

    Answers: "empty" (200 SSE, ended by the server after `open_ms` with no event), "closed"
    (the same, but the client closed it), "prime" (a priming event, then ended), "message" (a
    notification, then ended), "405", "409".
    """

    def build(c: Capture) -> None:
        h = session(c, sid)
        for n, answer in enumerate(answers):
            at = 10.0 + every_ms * n
            g = c.request("GET", headers={**h, "Accept": "text/event-stream"}, at=at)
            if answer in ("405", "409"):
                c.response(g, int(answer), at=at + 0.5)
                continue
            c.response(g, sse=True, at=at + 0.5)
            if answer == "prime":
                c.chunk(g, sse(f"id: p{n}\ndata: "), n=0, at=at + 0.6)
            elif answer == "message":
                note = req("notifications/message", level="info", data="hi")
                c.chunk(g, sse(event(note, id=f"m{n}")), n=0, at=at + 0.6)
            how = "client_closed" if answer == "closed" else "complete"
            c.end(g, how, at=at + 0.5 + open_ms)

    build.__name__ = f"{answers[0]}_{len(answers)}_{every_ms:g}ms_{open_ms:g}ms"
    return build


CASES: list[tuple[Callable[[Capture], None], list[int]]] = [
    (gets(["empty"] * 5), [5]),
    (gets(["empty"] * 9, every_ms=1100.0, open_ms=3.0, sid="other"), [9]),
    (gets(["message"] + ["empty"] * 6 + ["405"]), [6]),
    # near miss: one stream short
    (gets(["empty"] * 4), []),
    # near miss: a stream that carried a priming event breaks the run
    (gets(["empty"] * 3 + ["prime"] + ["empty"] * 3), []),
    # near miss: reconnects slower than max_gap_s
    (gets(["empty"] * 6, every_ms=6000.0), []),
    # near miss: idle streams the server ended after a while
    (gets(["empty"] * 6, every_ms=20000.0, open_ms=10000.0), []),
    # unrelated: the client closed each stream; GETs refused
    (gets(["closed"] * 6), []),
    (gets(["405"] * 6), []),
    (gets(["409"] * 6), []),
    # clean: a standalone stream that carries messages, reopened
    (gets(["message"] * 6), []),
]


@pytest.mark.parametrize(("build", "expected"), CASES, ids=[b.__name__ for b, _ in CASES])
def test_cases(build: Callable[[Capture], None], expected: list[int]) -> None:
    c = Capture()
    build(c)
    found = run_detectors(timeline_of(c), only=["reconnect-storm"])
    assert found["detector"].to_list() == ["reconnect-storm"] * len(expected)
    assert found["severity"].to_list() == ["medium"] * len(expected)
    assert [len(row["flow_ids"]) for row in found.iter_rows(named=True)] == expected


def test_thresholds_and_evidence() -> None:
    c = Capture()
    gets(["empty"] * 5)(c)
    timeline = timeline_of(c)
    row = DETECTOR.detect(timeline).collect().row(0, named=True)
    assert row["session"] == "mcp:S1"
    assert row["flow_ids"] == row["stream_ids"] == ["f2", "f3", "f4", "f5", "f6"]
    assert "5 times in a row" in row["detail"]
    assert DETECTOR.detect(timeline, min_streams=6).collect().is_empty()
    assert DETECTOR.detect(timeline, max_gap_s=0.001).collect().is_empty()
    assert DETECTOR.detect(timeline, max_open_s=0.0001).collect().is_empty()
