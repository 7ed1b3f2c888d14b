"""analyzer.ingest.bulk: the bulk lane gives the frames of the per-record lane, its reference."""

# ruff: noqa: E501  (hand-built records are tables, one record a line)

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from analyzer.ingest import bulk, jsonl
from analyzer.ingest.jsonl import read_capture
from analyzer.normalize import normalize_records
from tests.support.examples import examples
from tests.support.records import Capture, req, res

# Sort keys that make each table's rows comparable whatever order a lane wrote them in.
_ORDER = {
    "flows": ["flow_id"],
    "events": ["flow_id", "ordinal"],
    "messages": ["flow_id", "source", "ordinal", "member", "seq"],
    "tools": ["flow_id", "seq", "tool_name"],
    "payloads": ["data_hash"],
}

_PAYLOADS = [
    "",
    json.dumps(req("notifications/progress", progressToken=7, progress=1, total=3)),
    json.dumps(res(2, content=[{"type": "text", "text": "done"}], isError=False)),
    json.dumps(res(3, tools=[{"name": "t", "annotations": {"readOnlyHint": True}}])),
    json.dumps(res(0, protocolVersion="2025-11-25")),
    '{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"\u00e9 \U0001f600"}}',
    "not json",
    "two\nlines",
    "",
    '[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":1,"result":{}}]',
    # Plain messages in their other shapes, and near misses the general way describes.
    '{"params":{"total":9,"progressToken":"t","progress":4},"method":"notifications/progress","jsonrpc":"2.0"}',
    '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":2.5}}',
    '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":123456789012345678901,"progress":1}}',
    '{"jsonrpc":"2.0","id":"r\\u00e91","result":{"isError":true,"content":[]}}',
    '{"jsonrpc":"2.0","id":4,"result":{"resultType":"input_required","inputRequests":{"a":1}}}',
    '{"jsonrpc":"2.0","id":5,"method":"ping"}',
    '{"jsonrpc":"2.0","id":6,"result":"text"}',
    '{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"x"}}',
]

_event = st.fixed_dictionaries(
    {
        # Mostly the plain shape the bulk lane takes, sometimes what it must leave.
        "id": st.sampled_from([None, "", "7", "s_1", "a b"]),
        "data": st.sampled_from([*_PAYLOADS, None]),  # None: no data line (id alone)
        "event": st.sampled_from([None, None, None, "message", "", "endpoint"]),
        "retry": st.sampled_from([None] * 7 + ["3000"]),
        "comment": st.sampled_from([False] * 7 + [True]),
        "event_at": st.sampled_from([0, 1, 2]),  # where the `event` line goes among the others
    }
)


def _block(event: dict[str, Any]) -> list[str]:
    lines = []
    if event["id"] is not None:
        lines.append(f"id: {event['id']}")
    if event["retry"] is not None:
        lines.append(f"retry: {event['retry']}")
    if event["data"] is not None:
        lines.extend(f"data: {part}" for part in event["data"].split("\n"))
    if event["event"] is not None:
        lines.insert(min(event["event_at"], len(lines)), f"event: {event['event']}")
    return [": keep-alive", *lines] if event["comment"] else lines


@st.composite
def _stream(draw: st.DrawFn) -> list[str]:
    """One response's chunk texts: whole events mostly, cut anywhere sometimes."""
    events = draw(st.lists(_event, min_size=1, max_size=6))
    end = draw(st.sampled_from(["\n", "\n", "\r\n", "\r"]))
    blocks = [end.join(_block(e)) + end + end for e in events]
    if draw(st.booleans()):  # at event boundaries, some events together
        chunks: list[str] = []
        for block in blocks:
            if chunks and draw(st.booleans()):
                chunks[-1] += block
            else:
                chunks.append(block)
        return chunks
    text = "".join(blocks)
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=4)))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True) if a < b]


@st.composite
def _capture(draw: st.DrawFn) -> Capture:
    streams = draw(st.lists(_stream(), min_size=1, max_size=4))
    capture = Capture().open()
    pending: list[list[tuple[str, Any]]] = []
    for chunks in streams:
        steps: list[tuple[str, Any]] = [("request", None), ("response", None)]
        steps += [("chunk", (n, text)) for n, text in enumerate(chunks)]
        if draw(st.integers(0, 9)) == 0 and len(chunks) > 1:  # a chunk lost or repeated
            steps.pop(draw(st.integers(2, len(steps) - 1)))
        if draw(st.integers(0, 9)) == 0:
            steps.insert(3, steps[2])
        if draw(st.booleans()):
            steps.append(("end", None))
        pending.append(steps)
    flows: list[str] = [f"flow-{i}" for i in range(len(streams))]
    while any(pending):
        index = draw(st.sampled_from([i for i, steps in enumerate(pending) if steps]))
        step, value = pending[index].pop(0)
        flow = flows[index]
        if step == "request":
            capture.request(body=req("tools/call", index, name="t", arguments={}), flow=flow)
        elif step == "response":
            capture.response(flow, sse=True)
        elif step == "chunk":
            capture.chunk(flow, value[1], n=value[0])
        else:
            capture.end(flow)
    return capture.close()


def _tables(out: Path) -> dict[str, pl.DataFrame]:
    return {
        table: pl.concat([pl.read_parquet(part) for part in sorted(out.glob(f"{table}-*.parquet"))])
        for table in _ORDER
        if any(out.glob(f"{table}-*.parquet"))
    }


def _written(capture: Capture, path: Path) -> Path:
    """The capture with its records laid out as the capture writer does (`seq` first)."""
    lines = [
        json.dumps({"seq": r["seq"], **r}, separators=(",", ":")).encode() + b"\n"
        for r in capture.records
    ]
    path.write_bytes(b"".join(lines))
    return path


@settings(max_examples=examples(60), deadline=None)
@given(
    capture=_capture(),
    block=st.sampled_from([1 << 8, 1 << 10, 1 << 20]),
    writer_layout=st.booleans(),
)
def test_both_lanes_give_the_same_frames(capture: Capture, block: int, writer_layout: bool) -> None:
    reference = normalize_records(capture.records)
    held = jsonl._READ_BLOCK
    jsonl._READ_BLOCK = block  # blocks cut runs and flows: the lane must carry state across
    try:
        with tempfile.TemporaryDirectory() as folder:
            name = Path(folder) / "cap.jsonl"
            path = _written(capture, name) if writer_layout else capture.write(name)
            out = Path(folder) / "out"
            out.mkdir()
            read_capture(path, out, workers=1)
            tables = _tables(out)
    finally:
        jsonl._READ_BLOCK = held
    for table, keys in _ORDER.items():
        expected = getattr(reference, table)
        got = tables.get(table, expected.clear())
        if table == "payloads":
            got = got.unique("data_hash")
        assert_frame_equal(got.sort(keys), expected.sort(keys), check_row_order=True)


def test_plain_chunks_are_split_in_bulk_and_the_rest_is_left() -> None:
    lines = [
        b'{"kind":"chunk","seq":3,"ts_ns":5,"flow":"f","n":0,"data":{"text":"id: 1\\r\\ndata: {}\\r\\n\\r\\n"}}',
        b'{"seq":4,"kind":"chunk","ts_ns":6,"flow":"f","n":1,"data":{"text":"id: 2\\n\\n"}}',
        b'{"kind":"chunk","seq":5,"ts_ns":7,"flow":"f","n":2,"data":{"text":": hi\\n\\n"}}',
        b'{"kind":"chunk","seq":6,"ts_ns":8,"flow":"f","n":"3","data":{"text":"id: 3\\n\\n"}}',
        b'{"kind":"chunk","seq":7,"ts_ns":9,"flow":"f","n":4,"data":{"text":"a","text":"b"}}',
        b'{"kind":"chunk","seq":8,"ts_ns":9,"flow":"f","n":5,"data":{"text":"\\ud800"}}',
        b'{"kind":"chunk","seq":9,"ts_ns":9,"flow":"f","n":6,"data":{"b64":"AA=="}}',
        b'{"kind":"chunk","seq":10,"ts_ns":9,"flow":"f","n":7,"data":{"text":"x"},"decompress_capped":true}',
        b'{"kind":"chunk","seq":11,"ts_ns":9,"flow":"f","n":8,"data":{"text":"x"}',
        b'{"kind":"chunk","seq":12,"ts_ns":9,"flow":"f","n":9,"data":{"text":"\xff"}}',
    ]
    chunks, refused = bulk.read_chunks(lines)
    assert chunks["line"].to_list() == [0, 1, 2]
    assert refused == [3, 4, 5, 6, 7, 8, 9]
    events, plain = bulk.plain_events(chunks)
    assert plain.to_list() == [True, True, False]
    assert events.select("event_id", "data", "id_only").rows() == [
        ("1", "{}", False),
        ("2", "", True),
    ]


def test_each_flow_has_one_owner_and_a_line_without_one_goes_to_the_first() -> None:
    lines = [
        b'{"kind":"capture_open","seq":0,"ts_ns":1,"schema":"1.2","run_id":"r"}',
        *(
            b'{"kind":"chunk","seq":%d,"ts_ns":1,"flow":"f%d","n":0,"data":{"text":"x"}}'
            % (i, i % 7)
            for i in range(1, 60)
        ),
        b'{"kind":"request","seq":60,"ts_ns":1,"flow" : "f3","method":"GET"}',  # a space
        b'{"kind":"server_unreachable","seq":61,"ts_ns":1,"flow":null,"upstream":"u"}',
        b'{"kind":"chunk","flow":"f1","data":{"text":"\xff"}}',  # no UTF-8, its flow whole
    ]
    owners = [bulk.owner(line, 2) for line in lines]
    by_flow: dict[str, set[int]] = {}
    for line, owner in zip(lines[1:60], owners[1:60], strict=True):
        by_flow.setdefault(json.loads(line)["flow"], set()).add(owner)
    assert all(len(found) == 1 for found in by_flow.values())
    assert {min(found) for found in by_flow.values()} == {0, 1}  # both workers get flows
    assert owners[0] == owners[-2] == 0
    assert owners[60] == by_flow["f3"].pop()
    assert owners[-1] == by_flow["f1"].pop()
    both = [bulk.sieve(lines, 2, part, skip_first=True) for part in (0, 1)]
    for part, (chunks, others) in enumerate(both):
        assert all(owners[i] == part for i in chunks + others)
        assert all(b'"kind":"chunk"' in lines[i] for i in chunks)
    assert sorted(i for taken in both for group in taken for i in group) == list(range(63))
    chunks, others = bulk.sieve(lines, 1, 0, skip_first=False)
    assert (len(chunks), len(others)) == (60, 3)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id: 1\ndata: {}\n\n", [("1", "{}")]),
        ("id: 1\nevent: message\ndata: {}\n\n", [("1", "{}")]),
        ("event: message\nid:1\ndata:{}\n\n", [("1", "{}")]),
        ("data:  x\nevent: message\n\n", [(None, " x")]),
        ("id: 7\n\nid: 8\ndata: y\n\n", [("7", ""), ("8", "y")]),
        ("event: message\n\n", [(None, "")]),
        ("data: x\nid: 2\n\n", [("2", "x")]),  # data first: read by the line patterns
        ("id: 1\nevent: message\nevent: message\ndata: x\n\n", [("1", "x")]),
        ("id: 1\nevent:\ndata: x\n\n", [("1", "x")]),
    ],
)
def test_each_plain_block_gives_its_id_and_data(
    text: str, expected: list[tuple[str | None, str]]
) -> None:
    chunk = {"kind": "chunk", "seq": 1, "ts_ns": 1, "flow": "f", "n": 0, "data": {"text": text}}
    chunks, _ = bulk.read_chunks([json.dumps(chunk, separators=(",", ":")).encode()])
    events, plain = bulk.plain_events(chunks)
    assert plain.to_list() == [True]
    assert events.select("event_id", "data").rows() == expected


_WRITTEN = '{"seq":3,"kind":"chunk","ts_ns":5,"mono_ns":4,"flow":"f","n":0,"content_encoding":null,"data":{"text":"%s"}}'


@pytest.mark.parametrize(
    ("line", "usual", "taken"),
    [
        (_WRITTEN % r"id: 1\ndata: {\"a\":\"\u00e9\\ud800\"}\n\n", True, True),  # "\\ud800": text
        (_WRITTEN.replace('"seq":3,', "").replace("}}", '},"seq":3}') % "x", True, True),
        (_WRITTEN % r"\ud800", False, False),  # a lone surrogate: no Unicode text
        (_WRITTEN % r"\udc00 \ud7ff", False, False),
        (_WRITTEN.replace('"n":0', '"n":0,"seq":9') % "x", False, False),  # seq twice
        (_WRITTEN.replace("null", '"gzip"') % "x", True, True),
        (_WRITTEN.replace("}}", '},"decompress_capped":null}') % "x", False, True),
        (_WRITTEN.replace('"text":"%s"', '"b64":"AA=="'), False, False),
        (_WRITTEN.replace('"n":0', '"n":-1') % "x", False, False),
    ],
)
def test_a_line_in_the_writers_layout_is_taken_in_one_search(
    line: str, usual: bool, taken: bool
) -> None:
    assert (pl.Series([line]).str.contains(bulk.WRITER_SHAPE).item()) is usual
    chunks, refused = bulk.read_chunks([line.encode()])
    assert (chunks.height, refused) == ((1, []) if taken else (0, [0]))


# Lab captures stored with the timeline's goldens: real SDK traffic, as the proxy wrote it.
_STORED = sorted((Path(__file__).parents[1] / "timeline" / "goldens").glob("*/capture"))


def _read_lanes(
    capture: Path, out: Path, bulk_lane: bool, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, int]:
    """`read_capture` of `capture` into `out`, with the bulk lane, or every line the
    per-record way (the sieve sends none to the bulk lane); and the events the bulk lane cut."""
    out.mkdir()
    cut = [0]
    with monkeypatch.context() as patch:
        if bulk_lane:
            plain = bulk.plain_events

            def counted(chunks: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
                events, mask = plain(chunks)
                cut[0] += events.height
                return events, mask

            patch.setattr(bulk, "plain_events", counted)
        else:
            owned = bulk.sieve
            patch.setattr(
                bulk, "sieve", lambda *args: ([], sorted(i for g in owned(*args) for i in g))
            )
        return read_capture(capture, out, workers=1), cut[0]


@pytest.mark.parametrize("capture", _STORED, ids=[p.parent.name for p in _STORED])
def test_stored_lab_captures_give_the_same_frames_through_both_lanes(
    capture: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, cut = _read_lanes(capture, tmp_path / "fast", True, monkeypatch)
    full, none = _read_lanes(capture, tmp_path / "full", False, monkeypatch)
    assert cut > 0 and none == 0  # the bulk lane read events of the one, none of the other
    assert (fast.counts, fast.records) == (full.counts, full.records)
    fast_tables, full_tables = _tables(tmp_path / "fast"), _tables(tmp_path / "full")
    assert fast_tables.keys() == full_tables.keys() and fast_tables["events"].height > 0
    for table, keys in _ORDER.items():
        if table in fast_tables:
            assert_frame_equal(fast_tables[table].sort(keys), full_tables[table].sort(keys))


def test_the_stored_lab_captures_are_there() -> None:
    assert len(_STORED) >= 2
