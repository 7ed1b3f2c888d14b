"""analyzer.normalize.describe: payloads → hashes, message rows and listed tools."""

# ruff: noqa: E501  (expected rows are tables, one row a line)

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer import jsonrpc
from analyzer.canonical import canonical_hash, canonical_json
from analyzer.normalize import describe as N
from analyzer.normalize import fast_canonical_hash, normalize_records
from tests.support.examples import examples
from tests.support.records import Capture, event, req, res, sse


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


@settings(max_examples=examples(400), deadline=None)
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


@settings(max_examples=examples(600), deadline=None)
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


@settings(max_examples=examples(800), deadline=None)
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
