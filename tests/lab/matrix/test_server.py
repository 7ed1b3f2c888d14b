"""The matrix server's wire pieces: id schemes, SSE frames and chunkings (pure parts)."""

from __future__ import annotations

import asyncio
import re
import zlib

import anyio
import pytest

from lab.matrix.server import CutStream, Frame, IdScheme, SseBody

PATTERNS = {
    "counter": r"[1-9]\d*",
    "padded": r"evt-\d{6}",
    "stream": r"s1_\d+",
    "uuid": r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
    "epoch": r"s1_\d{13}_[0-9a-f]{6}",
    "constant": r"0",
}


@pytest.mark.parametrize(("scheme", "pattern"), PATTERNS.items())
def test_id_schemes(scheme: str, pattern: str) -> None:
    ids = IdScheme(scheme)
    issued = [ids.issue("s1") for _ in range(3)]
    assert all(re.fullmatch(pattern, i) for i in issued), issued
    assert len(set(issued)) == (1 if scheme == "constant" else 3)


def test_counters_number_the_session_or_the_stream() -> None:
    ids = IdScheme("padded")
    assert [ids.issue("a"), ids.issue("b")] == ["evt-000001", "evt-000002"]
    ids = IdScheme("stream")
    assert [ids.issue("a"), ids.issue("b"), ids.issue("a")] == ["a_1", "b_1", "a_2"]


def test_frames() -> None:
    assert Frame("7", "").encode() == b"id: 7\ndata: \n\n"  # priming: an id, empty data
    assert Frame("7", "", retry=250).encode() == b"id: 7\nretry: 250\ndata: \n\n"
    assert Frame("8", "{}").encode() == b"event: message\nid: 8\ndata: {}\n\n"
    assert Frame("9", "{}", "stream-reset").encode().startswith(b"event: stream-reset\n")


FRAMES = [Frame("1", ""), Frame("2", '{"a":1}'), Frame("3", '{"b":2}')]


async def _body(chunking: str) -> tuple[list[dict[str, object]], list[bytes]]:
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        await anyio.sleep(10)  # the client stays
        return {"type": "http.disconnect"}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    await SseBody(FRAMES, chunking=chunking, headers={"x-served-by": "r"})({}, receive, send)
    bodies = [m["body"] for m in sent if m["type"] == "http.response.body"]
    return sent, bodies  # type: ignore[return-value]


@pytest.mark.parametrize("chunking", ["one", "several", "midline", "gzip"])
def test_chunkings_carry_the_same_stream(chunking: str) -> None:
    sent, bodies = anyio.run(_body, chunking)
    headers = dict(sent[0]["headers"])  # type: ignore[arg-type]
    assert headers[b"content-type"] == b"text/event-stream"
    assert (headers.get(b"content-encoding") == b"gzip") is (chunking == "gzip")
    data = b"".join(bodies)
    if chunking == "gzip":
        data = zlib.decompress(data, wbits=31)
    assert data == b"".join(frame.encode() for frame in FRAMES)
    pieces = [b for b in bodies if b]
    expected_count = {"one": 3, "several": 1, "midline": 6, "gzip": 4}[chunking]
    assert len(pieces) == expected_count
    if chunking == "midline":
        assert not any(piece.endswith(b"\n") for piece in pieces[::2])


async def _held_and_fed() -> tuple[bytes, bool]:
    feed: asyncio.Queue[Frame] = asyncio.Queue()
    left = asyncio.Event()
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    hold = CutStream([], 0)
    body = SseBody(FRAMES[:1], chunking="one", headers={}, hold=hold, feed=feed)
    task = asyncio.ensure_future(body({}, receive, send))
    await asyncio.sleep(0.05)
    feed.put_nowait(FRAMES[2])  # the response of `response-on-get`, written while held
    await asyncio.sleep(0.05)
    left.set()
    await asyncio.wait_for(task, 2)
    data = b"".join(m["body"] for m in sent if m["type"] == "http.response.body")  # type: ignore[misc]
    return data, hold.gone.is_set()


def test_a_held_body_writes_what_its_feed_brings_until_the_client_leaves() -> None:
    data, gone = asyncio.run(_held_and_fed())
    assert data == FRAMES[0].encode() + FRAMES[2].encode()
    assert gone
