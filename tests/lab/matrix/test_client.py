"""The matrix client's reading of a cut stream: where it stops and which cursor it keeps."""

from __future__ import annotations

import dataclasses

import anyio
import httpx
import pytest

from lab.clients.raw import SseStream
from lab.matrix.client import arguments, cursor_of, read_to_cut
from lab.matrix.variants import Variant, sample

BODY = (
    b"id: 1\ndata: \n\n"
    b'event: message\nid: 2\ndata: {"jsonrpc":"2.0","method":"notifications/message"}\n\n'
    b'event: message\nid: 3\ndata: {"jsonrpc":"2.0","method":"notifications/message"}\n\n'
    b'event: message\nid: 4\ndata: {"jsonrpc":"2.0","method":"notifications/message"}\n\n'
)
BASE = Variant(
    "counter", 2, "none", "full", True, "last", "same", "2025-11-25", "one", "slow_report", "client"
)


def stream() -> SseStream:
    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=BODY)
    return SseStream(response)


@pytest.mark.parametrize(
    ("change", "read", "cursor"),
    [
        ({}, ["1", "2", "3"], "3"),
        ({"cursor": "lagging"}, ["1", "2", "3"], "2"),
        ({"seen": 0}, ["1"], "1"),  # only the priming event
        ({"seen": 1, "cursor": "lagging"}, ["1", "2"], "1"),
        ({"era": "2025-06-18", "seen": 1}, ["1", "2"], "2"),  # no priming expected, read anyway
    ],
)
def test_reads_to_the_cut_and_keeps_the_cursor(
    change: dict[str, object], read: list[str], cursor: str
) -> None:
    variant = dataclasses.replace(BASE, **change)  # type: ignore[arg-type]
    cut = stream()
    anyio.run(read_to_cut, cut, variant)
    assert [e.id for e in cut.events] == read
    assert cursor_of(cut, variant) == cursor


def test_arguments_name_the_variant() -> None:
    a, b = sample(2, 3)
    assert a.name in str(arguments(a)) and arguments(a) != arguments(b)
