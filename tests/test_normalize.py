"""analyzer.normalize: records → flows, SSE events, messages, tools and payloads."""

# ruff: noqa: E501  (expected rows are tables, one row a line)

from __future__ import annotations

import base64
import gzip
import json
import zlib
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from analyzer import jsonrpc
from analyzer import schema as S
from analyzer.canonical import canonical_hash, canonical_json
from analyzer.capture.framing import ContentDecoder
from analyzer.normalize import Normalizer, fast_canonical_hash, handlers, normalize_records
from analyzer.normalize import describe as N
from tests.support.records import Capture, event, ms, req, res, sse

H = {"mcp-session-id": "S1"}


def ts(at: float) -> Any:
    return pl.Series([ms(at)]).cast(S.TS).item()


def test_event_takes_ts_and_seq_of_the_chunk_that_completed_it() -> None:
    c = Capture()
    f = c.request("GET", headers=H, at=0)
    c.response(f, sse=True, at=1)
    c.chunk(f, 'id: 1\ndata: {"jsonrpc":"2.0",', n=0, at=2)  # event incomplete
    c.chunk(f, '"method":"a"}\n\nid: 2\ndata: x\n\n', n=1, at=3)  # completes both
    c.chunk(f, ": ping\nid: 3\n\n", n=2, at=4)
    c.end(f, at=5)
    events = normalize_records(c.records).events
    expected = pl.DataFrame(
        {
            "flow_id": ["f1"] * 3,
            "ts": [ts(3), ts(3), ts(4)],
            "seq": [3, 3, 4],
            "ordinal": [0, 1, 2],
            "chunk_n": [1, 1, 2],
            "event_id": ["1", "2", "3"],
            "last_event_id": ["1", "2", "3"],
            "event": ["message"] * 3,
            "data_bytes": [30, 1, 0],
            "retry": [None, None, None],
            "id_only": [False, False, True],
            "comments": [0, 0, 1],
            "warnings": [[], [], []],
            "payload_seen": [1, 2, 2],
        },
        schema_overrides={k: v for k, v in S.RAW_EVENTS.items()},
    )
    assert_frame_equal(events.select(expected.columns), expected)
    assert events["data_hash"].null_count() == 1  # the id-only event has no payload


def test_flow_row_collects_request_response_and_end() -> None:
    c = Capture()
    f = c.request(
        path="/mcp?x=1",
        body=req("tools/call", 7, name="t", arguments={}),
        headers={**H, "MCP-Protocol-Version": "2025-11-25", "Last-Event-ID": "e9"},
    )
    c.response(f, sse=True, headers={"Content-Type": "text/event-stream; charset=utf-8"})
    c.chunk(f, sse(event(id="a", data=""), "retry: 500\n" + event({"x": 1}, id="b")), n=0)
    c.chunk(f, "data: torn", n=1)
    c.end(f, "server_closed", error="reset")
    row = normalize_records(c.records).flows.row(0, named=True)
    assert (row["path"], row["query"], row["method"]) == ("/mcp", "x=1", "POST")
    assert (row["last_event_id"], row["mcp_session_id"], row["protocol_version"]) == (
        "e9",
        "S1",
        "2025-11-25",
    )
    assert (row["rpc_kind"], row["rpc_id"], row["rpc_method"]) == ("request", "7", "tools/call")
    assert (row["status"], row["content_type"], row["streamed"]) == (200, "text/event-stream", True)
    assert (row["events"], row["payload_events"], row["chunks"]) == (2, 1, 2)
    assert (row["first_cursor"], row["last_cursor"], row["last_retry_ms"]) == ("a", "b", 500)
    assert (row["end_how"], row["end_error"], row["tail_bytes"]) == ("server_closed", "reset", 10)
    assert row["client_ip"] == "10.0.0.1"


def test_bytes_withheld_from_chunks_count_as_a_truncated_response() -> None:
    c = Capture()
    f = c.request(body=req("tools/call", 7, name="t", arguments={}), headers=H)
    c.response(f, sse=True)
    c.chunk(f, sse(event({"x": 1}, id="a")), n=0)
    c.chunk(f, 'data: {"cut', n=1)
    c.records[-1]["data"]["truncated_bytes"] = 1000
    c.chunk(f, '\n\ndata: {"cut', n=2)
    c.records[-1]["data"]["truncated_bytes"] = 24
    c.end(f)
    row = normalize_records(c.records).flows.row(0, named=True)
    assert row["response_truncated_bytes"] == 1024


def _undecodable(encoding: str, raw: bytes) -> str:
    decoder = ContentDecoder(encoding)
    decoder.decode(raw)
    assert decoder.failed is not None
    return decoder.failed


@pytest.mark.parametrize(
    "failure",
    [
        _undecodable("compress", b"x"),
        _undecodable("gzip", b"not gzip at all"),
        _undecodable("gzip", gzip.compress(b"data: x\n\n") + b"trailing garbage"),
        _undecodable("deflate", zlib.compress(b"data: x\n\n") + b"garbage"),
        _undecodable("br", b"\xff\xff\xff not br"),
        "peer closed connection; " + _undecodable("br", b"\xff\xff\xff not br"),
    ],
)
def test_a_stream_the_proxy_could_not_decode_is_a_body_missing(failure: str) -> None:
    """However the decoder words its failure (the stream's end error), the normalizer knows it:
    the flow's body is not all in the capture, and the input's report says so."""
    c = Capture()
    f = c.request(body=req("tools/call", 7, name="t", arguments={}), headers=H)
    c.response(f, sse=True)
    c.end(f, "complete", error=failure)
    normalizer = Normalizer()
    normalizer.add_all(c.records)
    row = normalizer.finish().flows.row(0, named=True)
    assert row["body_missing"] is True
    assert normalizer.counts == {"undecoded_body": 1}


def test_a_transport_error_alone_is_no_missing_body() -> None:
    c = Capture()
    f = c.request(body=req("tools/call", 7, name="t", arguments={}), headers=H)
    c.response(f, sse=True)
    c.end(f, "error", error="peer closed connection without sending complete message body")
    normalizer = Normalizer()
    normalizer.add_all(c.records)
    assert normalizer.finish().flows.row(0, named=True)["body_missing"] is None
    assert normalizer.counts == {}


def test_messages_from_bodies_and_events_with_their_extracted_fields() -> None:
    c = Capture()
    init = req(
        "initialize", 1, protocolVersion="2025-06-18", clientInfo={"name": "c", "version": "2"}
    )
    f = c.request(body=[init, req("notifications/cancelled", requestId="x")])
    c.response(f, body=[res(1, protocolVersion="2025-06-18")])
    g = c.request(
        body=req("tools/call", 2, name="rm", arguments={"b": 2, "a": 1}, requestState="s")
    )
    c.response(g, sse=True)
    c.chunk(
        g, sse(event({"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "m"}})), n=0
    )
    c.chunk(g, sse(event(res(2, resultType="input_required", inputRequests={"a": {}}))), n=1)
    c.chunk(g, sse(event("not json", event="endpoint")), n=2)
    messages = normalize_records(c.records).messages
    got = messages.select(
        "flow_id",
        "source",
        "member",
        "direction",
        "kind",
        "rpc_id",
        "method",
        "tool_name",
        "mrtr_params",
        "input_required",
        "error_code",
        "protocol_version",
        "client_info",
        "cancel_id",
    ).rows()
    assert got == [
        ("f1", "request_body", 0, "c2s", "request", "1", "initialize", None, None, None, None, "2025-06-18", "c/2", None),
        ("f1", "request_body", 1, "c2s", "notification", None, "notifications/cancelled", None, None, None, None, None, None, '"x"'),
        ("f1", "response_body", 0, "s2c", "response", "1", None, None, None, False, None, "2025-06-18", None, None),
        ("f2", "request_body", None, "c2s", "request", "2", "tools/call", "rm", True, None, None, None, None, None),
        ("f2", "sse", None, "s2c", "error", "2", None, None, None, None, -32000, None, None, None),
        ("f2", "sse", None, "s2c", "response", "2", None, None, None, True, None, None, None, None),
    ]  # fmt: skip
    call = messages.filter(pl.col("method") == "tools/call").row(0, named=True)
    assert call["arguments_hash"] == canonical_hash({"a": 1, "b": 2})
    flows = normalize_records(c.records).flows
    assert flows.filter(pl.col("flow_id") == "f1")["rpc_client_info"].item() == "c/2"
    assert flows.filter(pl.col("flow_id") == "f1")["initialize"].item() is True


def test_payload_hash_is_canonical_and_payload_text_is_stored_once() -> None:
    c = Capture()
    f = c.request("GET", headers=H)
    c.response(f, sse=True)
    c.chunk(f, 'id: 1\ndata: {"b":1,"a":2}\n\n', n=0)
    c.chunk(f, 'id: 2\ndata: {"a":2, "b":1}\n\n', n=1)  # same value, other bytes
    c.chunk(f, 'id: 3\ndata: {"b":1,"a":2}\n\n', n=2)  # same bytes as 1
    frames = normalize_records(c.records)
    events = frames.events
    assert events["payload_hash"].n_unique() == 1
    assert events["payload_hash"][0] == canonical_hash({"a": 2, "b": 1})
    assert events["data_hash"].n_unique() == 2
    assert frames.payloads.height == 2
    assert set(frames.payloads["text"]) == {'{"b":1,"a":2}', '{"a":2, "b":1}'}


def test_tools_list_result_gives_one_row_per_tool() -> None:
    c = Capture()
    f = c.request(body=req("tools/list", 3))
    tools = [
        {"name": "a", "annotations": {"readOnlyHint": True, "destructiveHint": False}},
        {"name": "b"},
        {"nope": 1},
    ]
    c.response(f, body=res(3, tools=tools))
    got = normalize_records(c.records).tools
    assert got.select("rpc_id", "tool_name", "annotated", "read_only_hint", "destructive_hint").rows() == [
        ("3", "a", True, True, False),
        ("3", "b", False, None, None),
    ]  # fmt: skip


def test_damage_is_counted_and_skipped() -> None:
    c = Capture()
    f = c.request("GET")
    c.response(f, sse=True)
    c.chunk(f, "id: 1\ndata: a\n\n", n=0)
    c.chunk(f, "id: 1\ndata: a\n\n", n=0)  # duplicate
    c.chunk(f, "id: 3\ndata: c\n\n", n=2)  # chunk 1 lost
    c.end(f)
    c.end(f)  # duplicate
    c.chunk(f, "id: 4\ndata: d\n\n", n=3)  # after the end
    normalizer = Normalizer()
    normalizer.add_all(c.records)
    frames = normalizer.finish()
    assert dict(normalizer.counts) == {"duplicate_record": 2, "chunk_gap": 1, "late_record": 1}
    assert frames.events["event_id"].to_list() == ["1", "3"]


def test_only_the_latest_ended_flows_are_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handlers, "_ENDED_MAX", 2)
    c = Capture()
    flows = [c.request("GET") for _ in range(3)]
    for f in flows:
        c.response(f, sse=True)
        c.chunk(f, "data: a\n\n", n=0)
        c.end(f)
    normalizer = Normalizer()
    normalizer.add_all(c.records)
    assert list(normalizer._ended) == flows[1:]  # bounded, the earliest forgotten
    normalizer.add_all([r for r in c.records if r["kind"] == "chunk" and r["flow"] == flows[2]])
    assert normalizer.counts["duplicate_record"] == 1  # a recent flow's record is still told


def test_replica_header_overrides_the_recorded_replica() -> None:
    c = Capture()
    f = c.request("GET")
    c.response(f, sse=True, headers={"X-Served-By": "r2"}, replica="10.9.9.9:1")
    g = c.request("GET")
    c.response(g, sse=True, replica="10.9.9.9:1")
    flows = normalize_records(c.records, replica_header="x-served-by").flows
    assert flows.select("replica", "replica_source").rows() == [
        ("r2", "header"),
        ("10.9.9.9:1", "upstream"),
    ]


def test_batches_drain_without_losing_rows() -> None:
    c = Capture()
    f = c.request("GET")
    c.response(f, sse=True)
    for n in range(25):
        c.chunk(f, f'id: {n}\ndata: {{"n": {n}}}\n\n', n=n)
    normalizer = Normalizer(batch_events=10)
    parts = []
    for record in c.records:
        normalizer.add(record)
        if normalizer.pending_events() >= 10:
            parts.append(normalizer.drain())
    parts.append(normalizer.finish())
    assert [p.events.height for p in parts] == [10, 10, 5]
    assert pl.concat([p.events for p in parts])["ordinal"].to_list() == list(range(25))


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(_json)
def test_fast_canonical_hash_equals_canonical_hash(value: object) -> None:
    assert fast_canonical_hash(value) == canonical_hash(value)


@pytest.mark.parametrize(
    "value",
    [
        1.0,
        1e21,
        1e-7,
        {"é": 1, "z": 2},
        {"\U0001f600": 1, "\ufb01": 2},
        {"jsonrpc": "2.0", "x": 1e16},
        {"jsonrpc": "2.0", "x": 1.0},
        {"a": "2.0", "b": 5e-7},
        [1e16],
    ],
)
def test_fast_canonical_hash_edge_cases(value: object) -> None:
    assert fast_canonical_hash(value) == canonical_hash(value)
    assert canonical_json(value)  # sanity: the reference accepts it


def _reference_described(raw: bytes, text: str) -> tuple[str, str, tuple[Any, ...]]:
    """What `describe_payload` gives, from the full `json` classifier and `canonical_hash`."""
    raw_hash = N.bytes_hash(raw)
    top = jsonrpc._classify_text(text.removeprefix("\ufeff"), False)
    unparsed = top.reason in N._UNPARSED
    payload_hash = raw_hash if unparsed else canonical_hash(top.value)
    rows = []
    for index, member in enumerate(jsonrpc.iter_messages(top)):
        row, _ = N._describe(member, index if top.kind is jsonrpc.Kind.BATCH else None, raw_hash)
        assert row[5] == (
            raw_hash if member.reason in N._UNPARSED else canonical_hash(member.value)
        )
        rows.append(row)
    return top.kind.value, payload_hash, tuple(rows)


_rpc_payloads = st.one_of(
    st.builds(lambda p: {"jsonrpc": "2.0", "method": "notifications/progress", "params": p}, _json),
    st.builds(lambda i, r: {"jsonrpc": "2.0", "id": i, "result": r}, st.integers(0, 99), _json),
    st.lists(st.builds(lambda r: {"jsonrpc": "2.0", "id": 1, "result": r}, _json), max_size=3),
    _json,
)


@settings(max_examples=600, deadline=None)
@given(
    _rpc_payloads,
    st.booleans(),
    st.sampled_from([(",", ":"), (", ", ": ")]),
    st.booleans(),
    st.sampled_from(["", "\ufeff"]),
)
def test_describe_payload_equals_the_reference_path(
    value: object, sort_keys: bool, separators: tuple[str, str], ascii_only: bool, bom: str
) -> None:
    # Compact, sorted, non-ASCII text of a float-free value is its canonical text: raw == sorted.
    text = bom + json.dumps(
        value, sort_keys=sort_keys, separators=separators, ensure_ascii=ascii_only
    )
    raw = text.encode("utf-8")
    described = N.describe_payload(raw, text)
    kind, payload_hash, rows = _reference_described(raw, text)
    assert (described.top_kind, described.payload_hash, described.rows) == (
        kind,
        payload_hash,
        rows,
    )
    assert N.describe_payload(raw) == described


@pytest.mark.parametrize(
    "text",
    [
        '{"jsonrpc":"2.0","method":"a","params":{"x":1.0}}',  # orjson "1.0", RFC 8785 "1"
        '{"jsonrpc":"2.0","method":"a","params":{"x":"a:1.5"}}',
        '{"id":1,"jsonrpc":"2.0","result":{"n":18446744073709551616}}',  # canonical, big int
        '{"id":1,"jsonrpc":"2.0","result":{"\U0001f600":1,"\ufb01":2}}',  # UTF-16 key order
        '{"id":1,"jsonrpc":"2.0","result":{}}',  # sent canonical: raw hash is payload hash
        '[{"jsonrpc":"2.0","id":1,"result":1e16},{"jsonrpc":"2.0","method":"m"}]',
        '{"jsonrpc":"2.0","method":"a","params":' + "[" * 300 + "]" * 300 + "}",
        "NaN",
    ],
)
def test_describe_payload_edge_cases(text: str) -> None:
    raw = text.encode("utf-8")
    described = N.describe_payload(raw, text)
    assert (described.top_kind, described.payload_hash, described.rows) == _reference_described(
        raw, text
    )


_rpc_ids = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=4) | st.floats()
)
_members = {
    "jsonrpc": st.sampled_from(["2.0", "1.0", 2.0]),
    "id": _rpc_ids,
    "method": st.sampled_from(["notifications/progress", "ping", "tools/call", "initialize"])
    | st.integers(0, 3),
    "params": st.none()
    | st.fixed_dictionaries(
        {},
        optional={
            "progressToken": _rpc_ids,
            "progress": st.integers(0, 9) | st.floats() | st.text(max_size=2),
            "_meta": _json,
            "x": _json,
        },
    )
    | _json,
    "result": st.fixed_dictionaries(
        {},
        optional={
            "protocolVersion": st.sampled_from(["2025-11-25", 1]),
            "resultType": st.sampled_from(["input_required", "complete"]),
            "inputRequests": _json,
            "isError": st.booleans() | st.none(),
            "tools": _json,
            "content": _json,
        },
    )
    | _json,
    "error": _json,
}
_messages = st.fixed_dictionaries({}, optional=_members)  # type: ignore[arg-type]


@settings(max_examples=800, deadline=None)
@given(_messages, st.booleans(), st.sampled_from([(",", ":"), (", ", ": ")]))
def test_plain_description_equals_the_reference_path(
    value: dict[str, Any], sort_keys: bool, separators: tuple[str, str]
) -> None:
    text = json.dumps(value, sort_keys=sort_keys, separators=separators, ensure_ascii=False)
    raw = text.encode("utf-8")
    plain = N._describe_plain(raw)
    if plain is not None:
        assert (plain.top_kind, plain.payload_hash, plain.rows) == _reference_described(raw, text)
        assert plain.tools == ()


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (
            '{"jsonrpc":"2.0","method":"notifications/progress",'
            '"params":{"progressToken":"t","progress":3,"total":9,"message":"é"}}',
            "notification",
        ),
        ('{"id":7,"jsonrpc":"2.0","result":{"protocolVersion":"2025-11-25"}}', "response"),
        ('{"jsonrpc":"2.0","id":"a","method":"ping"}', "request"),
        ('{"result":{"resultType":"input_required"},"id":1,"jsonrpc":"2.0"}', "response"),
    ],
)
def test_the_usual_messages_are_described_plainly(text: str, kind: str) -> None:
    raw = text.encode("utf-8")
    plain = N._describe_plain(raw)
    assert plain is not None
    assert plain.top_kind == kind
    assert (plain.top_kind, plain.payload_hash, plain.rows) == _reference_described(raw, text)


@pytest.mark.parametrize(
    "text",
    [
        '{"jsonrpc":"2.0","method":"a","params":{"x":1.5}}',  # a float: RFC 8785 numbers
        '{"jsonrpc":"2.0","id":null,"method":"a"}',  # a null id
        '{"jsonrpc":"2.0","id":1,"error":{"code":-1}}',
        '{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}',
        '{"jsonrpc":"2.0","method":"a","params":{"_meta":{}}}',
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}',
        '{"jsonrpc":"2.0","id":1,"result":{"\U0001f600":1}}',
        '\ufeff{"jsonrpc":"2.0","method":"a"}',
        '[{"jsonrpc":"2.0","method":"a"}]',
    ],
)
def test_the_others_take_the_general_way(text: str) -> None:
    assert N._describe_plain(text.encode("utf-8")) is None


def test_a_flow_row_is_written_at_its_stream_end() -> None:
    c = Capture()
    done = c.request("GET")
    c.response(done, 405)
    c.end(done)
    still_open = c.request("GET")
    c.response(still_open, sse=True)
    normalizer = Normalizer()
    normalizer.add_all(c.records)
    assert normalizer.drain().flows["flow_id"].to_list() == ["f1"]
    assert normalizer.finish().flows.select("flow_id", "end_how").rows() == [("f2", None)]


def test_progress_notifications_carry_their_token_and_numeric_value() -> None:
    c = Capture()
    f = c.request(body=req("tools/call", 1, name="t", arguments={}))
    c.response(f, sse=True)
    sent = [
        {"progressToken": 4, "progress": 1},
        {"progressToken": "p", "progress": 2.5},
        {"progressToken": "q", "progress": True},  # not a number
        {"progressToken": "r", "progress": "3"},  # not a number either
        {"progressToken": 5, "progress": 10**400},  # beyond float range
        {"progress": 7},  # no token
    ]
    for n, params in enumerate(sent):
        c.chunk(f, sse(event(req("notifications/progress", **params))), n=n)
    c.chunk(f, sse(event(req("notifications/cancelled", requestId=1, progress=9))), n=len(sent))
    got = normalize_records(c.records).messages.filter(pl.col("source") == "sse")
    assert got.select("progress_token", "progress").rows() == [
        ("4", 1.0),
        ('"p"', 2.5),
        ('"q"', None),
        ('"r"', None),
        ("5", None),
        (None, 7.0),
        (None, None),  # other methods never carry them
    ]


def test_payload_integers_past_int64_are_null_and_the_rows_kept() -> None:
    # A JSON-RPC error code and an SSE retry are the server's data: past Int64 they are
    # recorded as absent (the retry with a warning), the message and the event still are.
    c = Capture()
    f = c.request("GET", headers=H)
    c.response(f, sse=True)
    code = '{"jsonrpc":"2.0","id":1,"error":{"code":99999999999999999999999,"message":"m"}}'
    c.chunk(f, f"id: 1\nretry: 99999999999999999999999\ndata: {code}\n\n", n=0)
    c.chunk(f, "id: 2\nretry: 9223372036854775807\ndata: x\n\n", n=1)  # the Int64 maximum
    c.end(f)
    frames = normalize_records(c.records)
    assert frames.messages.select("kind", "rpc_id", "error_code").rows()[0] == ("error", "1", None)
    assert frames.events.select("event_id", "retry", "warnings").rows() == [
        ("1", None, ["retry-too-large"]),
        ("2", 2**63 - 1, []),
    ]
    assert frames.flows["last_retry_ms"].to_list() == [2**63 - 1]


def test_a_body_text_with_a_lone_surrogate_is_stored_as_its_bytes() -> None:
    # A leniently read capture line can hold one ("\udc00" in JSON): no UTF-8 text column can,
    # so the payload keeps the bytes the text stands for, as base64, under their hash.
    text = '{"jsonrpc":"2.0","id":1,"method":"a\udc00"}'
    c = Capture()
    f = c.request(body=req("ping", 1))
    c.records[-1]["body"] = {"text": text}
    c.response(f, body=res(1))
    c.end(f)
    frames = normalize_records(c.records)
    raw = text.encode("utf-8", "surrogatepass")
    body_hash = frames.flows["request_body_hash"].item()
    assert body_hash == N.bytes_hash(raw)
    stored = frames.payloads.filter(pl.col("data_hash") == body_hash).row(0, named=True)
    assert (stored["text"], stored["base64"]) == (base64.b64encode(raw).decode(), True)
    assert frames.messages.filter(pl.col("direction") == "c2s")["reason"].to_list() == ["not-utf8"]
