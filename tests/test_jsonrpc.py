"""JSON-RPC 2.0 classification: one table row per kind and per reason, then properties."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer import jsonrpc
from analyzer.canonical import canonical_json
from analyzer.jsonrpc import Kind, Message, Reason, classify, classify_value, iter_messages
from tests.support.examples import examples

R = '"jsonrpc":"2.0"'

# (input, kind, reason, id, method)
TABLE: list[tuple[bytes | str, Kind, str | None, str | None, str | None]] = [
    # Requests: every id type JSON-RPC admits, keeping its JSON type.
    (f'{{{R},"id":1,"method":"ping"}}', Kind.REQUEST, None, "1", "ping"),
    (f'{{{R},"id":"1","method":"ping"}}', Kind.REQUEST, None, '"1"', "ping"),
    (f'{{{R},"id":"","method":""}}', Kind.REQUEST, None, '""', ""),
    (f'{{{R},"id":-1.5,"method":"a"}}', Kind.REQUEST, None, "-1.5", "a"),
    (f'{{{R},"id":7.0,"method":"a"}}', Kind.REQUEST, None, "7", "a"),
    (f'{{{R},"id":1e21,"method":"a"}}', Kind.REQUEST, None, "1e+21", "a"),
    (
        f'{{{R},"id":18446744073709551617,"method":"a"}}',
        Kind.REQUEST,
        None,
        "18446744073709551617",
        "a",
    ),
    (f'{{{R},"id":"\\u20ac\\ud83d\\ude00","method":"a"}}', Kind.REQUEST, None, '"€😀"', "a"),
    # Null id: allowed ("discouraged") by JSON-RPC, forbidden by MCP; a detector's business.
    (f'{{{R},"id":null,"method":"a"}}', Kind.REQUEST, None, "null", "a"),
    (
        f'{{{R},"id":2,"method":"tools/call","params":{{"name":"x"}}}}',
        Kind.REQUEST,
        None,
        "2",
        "tools/call",
    ),
    (f'{{{R},"id":2,"method":"a","params":[1,2]}}', Kind.REQUEST, None, "2", "a"),
    (f'{{{R},"id":2,"method":"a","params":null}}', Kind.REQUEST, None, "2", "a"),
    (f'{{"method":"a",{R},"x-extra":true,"id":3}}', Kind.REQUEST, None, "3", "a"),
    (f' \r\n\t{{ {R} , "id" : 4 , "method" : "a" }}\n', Kind.REQUEST, None, "4", "a"),
    # A UTF-8 BOM is skipped (RFC 8259 §8.1 lets parsers ignore it), as bytes and as str.
    (b'\xef\xbb\xbf{"jsonrpc":"2.0","id":5,"method":"a"}', Kind.REQUEST, None, "5", "a"),
    (f'\ufeff{{{R},"id":5,"method":"a"}}', Kind.REQUEST, None, "5", "a"),
    # Notifications.
    (
        f'{{{R},"method":"notifications/initialized"}}',
        Kind.NOTIFICATION,
        None,
        None,
        "notifications/initialized",
    ),
    (f'{{{R},"method":"n","params":{{"progress":0.5}}}}', Kind.NOTIFICATION, None, None, "n"),
    # Responses: any result value, any id type.
    (f'{{{R},"id":1,"result":{{}}}}', Kind.RESPONSE, None, "1", None),
    (f'{{{R},"id":"a","result":null}}', Kind.RESPONSE, None, '"a"', None),
    (f'{{{R},"id":null,"result":[1]}}', Kind.RESPONSE, None, "null", None),
    # Errors: `error` only has to be an object (a malformed code is for a detector).
    (f'{{{R},"id":1,"error":{{"code":-32601,"message":"no"}}}}', Kind.ERROR, None, "1", None),
    (
        f'{{{R},"id":null,"error":{{"code":-32700,"message":"Parse error"}}}}',
        Kind.ERROR,
        None,
        "null",
        None,
    ),
    (f'{{{R},"id":1,"error":{{"code":"x"}}}}', Kind.ERROR, None, "1", None),
    (f'{{{R},"id":1,"error":{{}}}}', Kind.ERROR, None, "1", None),
    # Batches.
    (f'[{{{R},"id":1,"method":"a"}},{{{R},"method":"b"}}]', Kind.BATCH, None, None, None),
    ("[1]", Kind.BATCH, None, None, None),
    # Not a JSON text at all.
    (b"\xff", Kind.INVALID, "not-utf8", None, None),
    (b'{"jsonrpc":"2.0","method":"\xed\xa0\x80"}', Kind.INVALID, "not-utf8", None, None),  # CESU
    (b"\xfe\xff\x00{\x00}", Kind.INVALID, "not-utf8", None, None),  # UTF-16 with its BOM
    (b"", Kind.INVALID, "not-json", None, None),
    ("   ", Kind.INVALID, "not-json", None, None),
    ("{", Kind.INVALID, "not-json", None, None),
    (f'{{{R},"id":1,"method":"a"}} {{}}', Kind.INVALID, "not-json", None, None),
    ("{'jsonrpc':'2.0'}", Kind.INVALID, "not-json", None, None),
    (f'{{{R},"id":01,"method":"a"}}', Kind.INVALID, "not-json", None, None),
    (f'{{{R},"id":1,"method":"a",}}', Kind.INVALID, "not-json", None, None),
    ('{"jsonrpc":"2.0","method":"a\x01"}', Kind.INVALID, "not-json", None, None),  # raw control
    (b"\xef\xbb\xbf\xef\xbb\xbf{}", Kind.INVALID, "not-json", None, None),  # only one BOM
    (" \ufeff{}", Kind.INVALID, "not-json", None, None),
    (f'{{{R},"id":NaN,"method":"a"}}', Kind.INVALID, "nan-or-infinity", None, None),
    (f'{{{R},"method":"a","params":[Infinity]}}', Kind.INVALID, "nan-or-infinity", None, None),
    ("-Infinity", Kind.INVALID, "nan-or-infinity", None, None),
    (f'{{{R},"id":{"9" * 5000},"method":"a"}}', Kind.INVALID, "number-too-long", None, None),
    (f'{{{R},"id":1e400,"method":"a"}}', Kind.INVALID, "number-out-of-range", None, None),
    (
        f'{{{R},"method":"a","params":[-1{"0" * 400}.5]}}',
        Kind.INVALID,
        "number-out-of-range",
        None,
        None,
    ),
    ("[" * 100_000, Kind.INVALID, "too-deep", None, None),
    ('{"a":' * 5000 + "1" + "}" * 5000, Kind.INVALID, "too-deep", None, None),
    # Lone surrogates, anywhere in the message, escaped in either case or literal in a str.
    (f'{{{R},"id":1,"method":"\\ud800"}}', Kind.INVALID, "lone-surrogate", None, None),
    (f'{{{R},"id":"\\uDFFF","method":"a"}}', Kind.INVALID, "lone-surrogate", None, None),
    (f'{{{R},"id":1,"result":{{"k\\udc00":1}}}}', Kind.INVALID, "lone-surrogate", None, None),
    (f'{{{R},"method":"a","params":[["x\\ud83dy"]]}}', Kind.INVALID, "lone-surrogate", None, None),
    (
        f'{{{R},"method":"a","params":["\\ude00\\ud83d"]}}',
        Kind.INVALID,
        "lone-surrogate",
        None,
        None,
    ),
    (f'{{{R},"id":1,"method":"\ud800"}}', Kind.INVALID, "lone-surrogate", None, None),
    ('"\\ud800"', Kind.INVALID, "lone-surrogate", None, None),
    # Not a JSON-RPC object.
    ("1", Kind.INVALID, "not-an-object", None, None),
    ('"x"', Kind.INVALID, "not-an-object", None, None),
    ("null", Kind.INVALID, "not-an-object", None, None),
    ("true", Kind.INVALID, "not-an-object", None, None),
    ("[]", Kind.INVALID, "empty-batch", None, None),
    (" [ ] ", Kind.INVALID, "empty-batch", None, None),
    ('{"id":1,"method":"a"}', Kind.INVALID, "missing-jsonrpc", "1", "a"),
    ("{}", Kind.INVALID, "missing-jsonrpc", None, None),
    ('{"jsonrpc":"1.0","id":1,"method":"a"}', Kind.INVALID, "bad-jsonrpc-version", "1", "a"),
    ('{"jsonrpc":2.0,"id":1,"result":1}', Kind.INVALID, "bad-jsonrpc-version", "1", None),
    ('{"jsonrpc":null,"method":"a"}', Kind.INVALID, "bad-jsonrpc-version", None, "a"),
    (f'{{{R},"id":true,"method":"a"}}', Kind.INVALID, "bad-id-type", None, "a"),
    (f'{{{R},"id":false,"result":1}}', Kind.INVALID, "bad-id-type", None, None),
    (f'{{{R},"id":{{}},"method":"a"}}', Kind.INVALID, "bad-id-type", None, "a"),
    (f'{{{R},"id":[1],"error":{{}}}}', Kind.INVALID, "bad-id-type", None, None),
    (f'{{{R},"id":1,"method":5}}', Kind.INVALID, "bad-method-type", "1", None),
    (f'{{{R},"method":null}}', Kind.INVALID, "bad-method-type", None, None),
    (f'{{{R},"id":1,"method":"a","params":"x"}}', Kind.INVALID, "bad-params-type", "1", "a"),
    (f'{{{R},"method":"a","params":3}}', Kind.INVALID, "bad-params-type", None, "a"),
    (
        f'{{{R},"id":1,"method":"a","result":1}}',
        Kind.INVALID,
        "method-with-result-or-error",
        "1",
        "a",
    ),
    (
        f'{{{R},"id":1,"method":"a","error":{{}}}}',
        Kind.INVALID,
        "method-with-result-or-error",
        "1",
        "a",
    ),
    (f'{{{R},"id":1,"result":1,"error":{{}}}}', Kind.INVALID, "both-result-and-error", "1", None),
    (f'{{{R},"id":1,"error":"boom"}}', Kind.INVALID, "bad-error-type", "1", None),
    (f'{{{R},"id":1,"error":null}}', Kind.INVALID, "bad-error-type", "1", None),
    (f'{{{R},"result":1}}', Kind.INVALID, "missing-id", None, None),
    (f'{{{R},"error":{{"code":1,"message":"m"}}}}', Kind.INVALID, "missing-id", None, None),
    (f'{{{R},"id":1}}', Kind.INVALID, "no-method-result-or-error", "1", None),
    (f"{{{R}}}", Kind.INVALID, "no-method-result-or-error", None, None),
]


def _row_id(row: tuple[Any, ...]) -> str:
    raw, kind, reason = row[0], row[1], row[2]
    text = bytes(raw).decode("utf-8", "replace") if not isinstance(raw, str) else raw
    return f"{reason or kind}:{text[:40]!r}"


@pytest.mark.parametrize(("raw", "kind", "reason", "id_", "method"), TABLE, ids=map(_row_id, TABLE))
def test_table(
    raw: bytes | str, kind: Kind, reason: str | None, id_: str | None, method: str | None
) -> None:
    message = classify(raw)
    assert (message.kind, message.reason, message.id, message.method) == (kind, reason, id_, method)
    _check_shape(message)


def test_every_reason_has_a_row() -> None:
    tabled = {row[2] for row in TABLE}
    # Batch members have their own test; only classify_value can meet a non-JSON value.
    assert set(Reason) - tabled == {Reason.NESTED_BATCH, Reason.NOT_JSON_VALUE}


def test_batch_members_are_classified_one_by_one() -> None:
    raw = (
        f'[{{{R},"id":1,"method":"a"}}, 7, [], {{{R},"method":"n"}}, {{{R},"id":"x","result":2}},'
        f' {{{R},"id":null,"error":{{"code":-32600,"message":"m"}}}},'
        f' {{{R},"id":2,"method":"\\ud800"}},'
        f' {{"id":3,"result":1}}]'
    )
    message = classify(raw)
    assert message.kind is Kind.BATCH
    assert message.id is message.method is message.reason is None
    assert message.value == json.loads(raw)
    assert [(m.kind, m.reason, m.id) for m in message.members] == [
        (Kind.REQUEST, None, "1"),
        (Kind.INVALID, "not-an-object", None),
        (Kind.INVALID, "nested-batch", None),
        (Kind.NOTIFICATION, None, None),
        (Kind.RESPONSE, None, '"x"'),
        (Kind.ERROR, None, "null"),
        (Kind.INVALID, "lone-surrogate", None),
        (Kind.INVALID, "missing-jsonrpc", "3"),
    ]
    assert [m.value for m in message.members] == message.value
    assert list(iter_messages(message)) == list(message.members)


def test_iter_messages_yields_a_single_message_itself() -> None:
    message = classify(f'{{{R},"method":"a"}}')
    assert list(iter_messages(message)) == [message]
    invalid = classify(b"\xff")
    assert list(iter_messages(invalid)) == [invalid]


def test_value_is_the_parsed_json_and_none_when_unparsed() -> None:
    assert classify(f'{{{R},"id":1,"result":[1.5,"x"]}}').value == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": [1.5, "x"],
    }
    assert classify("nope").value is None
    assert classify("1").value == 1


def test_messages_are_hashable_despite_a_dict_value() -> None:
    raw = f'{{{R},"id":1,"method":"a","params":{{"x":[1]}}}}'
    assert hash(classify(raw)) == hash(classify(raw.encode()))
    assert classify(raw) == classify(raw.encode())


def _cycle() -> list[object]:
    cycle: list[object] = []
    cycle.append(cycle)
    return cycle


@pytest.mark.parametrize(
    ("value", "kind", "reason"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "a"}, Kind.REQUEST, None),
        ({"jsonrpc": "2.0", "id": float("nan"), "method": "a"}, Kind.INVALID, "nan-or-infinity"),
        (
            {"jsonrpc": "2.0", "method": "a", "params": [float("-inf")]},
            Kind.INVALID,
            "nan-or-infinity",
        ),
        ({"jsonrpc": "2.0", "id": 10**5000, "method": "a"}, Kind.INVALID, "number-too-long"),
        ({"jsonrpc": "2.0", "method": "\udfff"}, Kind.INVALID, "lone-surrogate"),
        ({"jsonrpc": "2.0", "method": "a", "params": {1, 2}}, Kind.INVALID, "not-json-value"),
        ({"jsonrpc": "2.0", "method": "a", "params": [b"x"]}, Kind.INVALID, "not-json-value"),
        (object(), Kind.INVALID, "not-json-value"),
        ({"a": _cycle()}, Kind.INVALID, "not-json-value"),
        ([], Kind.INVALID, "empty-batch"),
        ("x", Kind.INVALID, "not-an-object"),
    ],
)
def test_classify_value(value: object, kind: Kind, reason: str | None) -> None:
    message = classify_value(value)
    assert (message.kind, message.reason) == (kind, reason)
    assert message.value is value


def test_classify_value_pins_defects_on_batch_members() -> None:
    good = {"jsonrpc": "2.0", "method": "a"}
    message = classify_value([good, {"jsonrpc": "2.0", "id": float("inf"), "result": 1}, _cycle()])
    assert message.kind is Kind.BATCH
    assert [(m.kind, m.reason) for m in message.members] == [
        (Kind.NOTIFICATION, None),
        (Kind.INVALID, "nan-or-infinity"),
        (Kind.INVALID, "not-json-value"),
    ]


def test_classify_value_too_deep() -> None:
    deep = _nested(100_000)
    assert classify_value({"jsonrpc": "2.0", "method": "a", "params": deep}).reason == "too-deep"
    batch = classify_value(deep)
    assert [(m.kind, m.reason) for m in batch.members] == [(Kind.INVALID, "too-deep")]


def _nested(depth: int) -> object:
    value: object = {"jsonrpc": "2.0", "method": "a"}
    for _ in range(depth):
        value = [value]
    return value


def _check_shape(message: Message) -> None:
    """Exactly one kind, and the fields that go with it."""
    assert isinstance(message.kind, Kind)
    assert (message.reason is not None) == (message.kind is Kind.INVALID)
    if message.reason is not None:
        assert message.reason in set(Reason)
    assert (message.kind is Kind.BATCH) == bool(message.members)
    if message.kind in (Kind.REQUEST, Kind.NOTIFICATION):
        assert isinstance(message.method, str)
    if message.kind in (Kind.REQUEST, Kind.RESPONSE, Kind.ERROR):
        assert message.id is not None
    if message.kind is Kind.NOTIFICATION:
        assert message.id is None
    for text in (message.id, message.method):
        if text is not None:
            text.encode("utf-8")  # never a lone surrogate in a column
    for member in message.members:
        assert member.kind is not Kind.BATCH
        _check_shape(member)


# -- properties: totality ---------------------------------------------------------------------

_lone_surrogates = st.integers(0xD800, 0xDFFF).map(chr)
_wild_strings = st.text(max_size=6) | st.lists(
    st.text(max_size=2) | _lone_surrogates, max_size=4
).map("".join)
_wild_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(4000, 5000).map(lambda n: 10**n)  # past the 4300-digit str limit
    | st.floats()  # NaN and infinities included
    | _wild_strings
    | st.sampled_from(["2.0", "jsonrpc", "id", "method", "result", "error", "params"])
)
_wild_values = st.recursive(
    _wild_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["jsonrpc", "id", "method", "result", "error", "params"])
            | _wild_strings,
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)
_deep_values = st.tuples(st.integers(0, 3000), _wild_values).map(
    lambda pair: _wrap(pair[1], pair[0])
)


def _wrap(value: object, depth: int) -> object:
    for _ in range(depth):
        value = [value]
    return value


def _fingerprint(message: Message) -> tuple[Any, ...]:
    return (
        message.kind,
        message.reason,
        message.id,
        message.method,
        tuple(_fingerprint(member) for member in message.members),
    )


@settings(max_examples=examples(300))
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_raise(raw: bytes) -> None:
    _check_shape(classify(raw))


@settings(max_examples=examples(300))
@given(st.text(st.characters(codec=None), max_size=100))
def test_arbitrary_str_never_raises(raw: str) -> None:
    _check_shape(classify(raw))


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
@given(_wild_values | _deep_values)
def test_arbitrary_values_never_raise(value: object) -> None:
    from_value = classify_value(value)
    _check_shape(from_value)
    try:
        text = json.dumps(value)
    except (ValueError, RecursionError):  # an int past 4300 digits, or too deep to write
        return
    from_text = classify(text)
    _check_shape(from_text)
    _check_shape(classify(json.dumps(value, ensure_ascii=False)))
    _check_shape(classify(text.encode()))
    # The text and its parsed value classify alike, but for NaN and Infinity, which spoil a whole
    # text while a value shows which member holds them, and depths near CPython's limit, which
    # one path may reach and not the other. (Compared with the reparsed value, not `value`: a
    # surrogate pair split over two str code points is invalid as a value, valid once written.)
    try:
        reparsed = classify_value(json.loads(text))
    except RecursionError:
        return
    spoilers = {"nan-or-infinity", "too-deep"}
    if not (spoilers & (_reasons(from_text) | _reasons(reparsed))):
        assert _fingerprint(from_text) == _fingerprint(reparsed)


def _reasons(message: Message) -> set[str | None]:
    return {member.reason for member in (message, *message.members)}


@settings(max_examples=examples(50))
@given(st.integers(0, 20_000), st.sampled_from(["[", '{"a":', '[{"b":']))
def test_deep_texts_never_raise(depth: int, opener: str) -> None:
    _check_shape(classify(opener * depth))
    closer = "".join({"[": "]", "{": "}"}[c] for c in reversed(opener) if c in "[{")
    _check_shape(classify(opener * depth + "1" + closer * depth))


# -- properties: valid messages keep their kind and id ---------------------------------------

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)
_ids = (
    st.integers()
    | st.integers(-(10**40), 10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
_methods = st.text(max_size=20) | st.sampled_from(["initialize", "tools/call", "ping"])
_params = st.fixed_dictionaries(
    {},
    optional={
        "params": st.none()
        | st.lists(_json_values, max_size=3)
        | st.dictionaries(st.text(max_size=5), _json_values, max_size=3)
    },
)


def _request(
    id_: object, method: str, params: dict[str, object]
) -> tuple[Kind, object, dict[str, object]]:
    return Kind.REQUEST, id_, {"jsonrpc": "2.0", "id": id_, "method": method, **params}


def _notification(method: str, params: dict[str, object]) -> tuple[Kind, object, dict[str, object]]:
    return Kind.NOTIFICATION, None, {"jsonrpc": "2.0", "method": method, **params}


def _response(id_: object, result: object) -> tuple[Kind, object, dict[str, object]]:
    return Kind.RESPONSE, id_, {"jsonrpc": "2.0", "id": id_, "result": result}


def _error(
    id_: object, code: int, text: str, data: dict[str, object]
) -> tuple[Kind, object, dict[str, object]]:
    error = {"code": code, "message": text, **data}
    return Kind.ERROR, id_, {"jsonrpc": "2.0", "id": id_, "error": error}


_valid_messages = st.one_of(
    st.builds(_request, _ids | st.none(), _methods, _params),
    st.builds(_notification, _methods, _params),
    st.builds(_response, _ids | st.none(), _json_values),
    st.builds(
        _error,
        _ids | st.none(),
        st.integers(-32768, 32767),
        st.text(max_size=10),
        st.fixed_dictionaries({}, optional={"data": _json_values}),
    ),
)


def _expect(message: Message, kind: Kind, id_: object, obj: dict[str, object]) -> None:
    assert message.kind is kind
    assert message.reason is None
    assert message.id == (None if kind is Kind.NOTIFICATION else canonical_json(id_))
    assert message.method == obj.get("method")


@settings(max_examples=examples(300))
@given(_valid_messages, st.sampled_from([None, 1]), st.booleans())
def test_valid_messages_keep_kind_and_id(
    case: tuple[Kind, object, dict[str, object]], indent: int | None, ensure_ascii: bool
) -> None:
    kind, id_, obj = case
    text = json.dumps(obj, indent=indent, ensure_ascii=ensure_ascii)
    _expect(classify(text.encode()), kind, id_, obj)
    _expect(classify(text), kind, id_, obj)
    _expect(classify_value(obj), kind, id_, obj)


@settings(max_examples=examples(150))
@given(st.lists(_valid_messages, min_size=1, max_size=5))
def test_valid_batches_keep_kinds_and_ids(
    cases: list[tuple[Kind, object, dict[str, object]]],
) -> None:
    batch = [obj for _, _, obj in cases]
    message = classify(json.dumps(batch).encode())
    assert message.kind is Kind.BATCH
    assert len(message.members) == len(cases)
    for member, (kind, id_, obj) in zip(message.members, cases, strict=True):
        _expect(member, kind, id_, obj)
    assert list(iter_messages(message)) == list(message.members)


# --- the orjson fast path of `classify` gives what the full `json` path gives -------------------

_FAST_PATH_EDGES = [
    '{"jsonrpc":"2.0","id":18446744073709551615,"method":"a"}',  # 2**64 - 1: orjson's last int
    '{"jsonrpc":"2.0","id":18446744073709551616,"method":"a"}',  # orjson would make it a float
    '{"jsonrpc":"2.0","id":-9223372036854775809,"method":"a"}',
    '{"jsonrpc":"2.0","id":1,"result":1e400}',
    '{"jsonrpc":"2.0","id":1,"result":"\\ud800"}',
    '{"jsonrpc":"2.0","id":1,"result":"\\udc00\\ud800"}',
    '{"jsonrpc":"2.0","id":1,"result":"\\ud83d\\ude00"}',
    '{"jsonrpc":"2.0","id":1,"result":NaN}',
    '{"jsonrpc":"2.0","id":1,"result":"a\tb"}',
    '{"jsonrpc":"2.0","id":1,"result":1} x',
    '{"jsonrpc":"2.0","id":1,"id":2,"result":1}',
    '\ufeff{"jsonrpc":"2.0","method":"a"}',
    "[" * 1100 + "]" * 1100,
    "[" * 900 + "]" * 900,
    " \n[1,2]\t",
    # A 19-digit run in a string is no number token; the same run as a value is one.
    '{"jsonrpc":"2.0","id":1,"result":"at 18446744073709551616"}',
    '{"jsonrpc":"2.0","id":1,"result":"a:18446744073709551616"}',
    '{"jsonrpc":"2.0","id":1,"result":[0, \n\t 18446744073709551616]}',
    '{"jsonrpc":"2.0","id":1,"result":{"n" :\r\n-9223372036854775809}}',
    '{"jsonrpc":"2.0","id":1,"result":[1844674407370955161.5]}',
    " 18446744073709551616",
    "-18446744073709551616",
]


@pytest.mark.parametrize("text", _FAST_PATH_EDGES)
def test_fast_path_edges_classify_as_the_full_path(text: str) -> None:
    assert classify(text) == jsonrpc._classify_text(text.removeprefix("\ufeff"), False)
    assert classify(text.encode()) == classify(text)


@settings(max_examples=examples(400), suppress_health_check=[HealthCheck.too_slow])
@given(_wild_values, st.booleans(), st.sampled_from([None, 1]))
def test_fast_path_classifies_as_the_full_path(
    value: object, ascii_only: bool, indent: Any
) -> None:
    try:
        text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    except (ValueError, TypeError, RecursionError):
        return
    assert classify(text) == jsonrpc._classify_text(text, not text.isascii() and _lone(text))


# Ints on both sides of orjson's range, beside strings holding 19-digit runs.
_big_int_values = st.recursive(
    st.integers(-(2**70), 2**70)
    | st.integers(2**63 - 3, 2**64 + 3)
    | st.integers(-(2**63) - 3, -(2**63) + 3)
    | st.text(alphabet="0123456789 :,[", max_size=24),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=examples(400))
@given(_big_int_values, st.sampled_from([None, 0, 1, "\t"]))
def test_fast_path_keeps_big_ints_exact(value: object, indent: Any) -> None:
    text = json.dumps({"jsonrpc": "2.0", "id": 1, "result": value}, indent=indent)
    message = classify(text)
    assert message == jsonrpc._classify_text(text, False)
    # As text: an int that became a float compares equal to it, but does not print the same.
    assert json.dumps(message.value) == json.dumps({"jsonrpc": "2.0", "id": 1, "result": value})


def _lone(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def test_fast_message_constructor_sets_every_field() -> None:
    assert [f.name for f in dataclasses.fields(Message)] == [
        "kind",
        "id",
        "method",
        "reason",
        "members",
        "value",
    ]
    built = jsonrpc._new_message(Kind.REQUEST, "1", "ping", {"a": 1})
    assert built == Message(Kind.REQUEST, id="1", method="ping", value={"a": 1})
    assert hash(built) == hash(Message(Kind.REQUEST, id="1", method="ping", value={"a": 1}))


def _holds_float(value: object) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_holds_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_float(v) for v in value)
    return False


_finite_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children)
    ),
    max_leaves=12,
)


@settings(max_examples=examples(500))
@given(_finite_json)
def test_may_hold_float_never_misses_a_float(value: object) -> None:
    if _holds_float(value):
        assert jsonrpc.may_hold_float(orjson.dumps(value))


@pytest.mark.parametrize(
    ("value", "maybe"),
    [
        ({"jsonrpc": "2.0", "id": 7, "result": {"n": 1_750_000_204_842_821_421}}, False),
        ({"jsonrpc": "2.0", "id": 7, "result": {"x": 1e16}}, True),
        ({"jsonrpc": "2.0", "id": 7, "result": {"x": -0.0}}, True),
        ([5e-324], True),
        ({"jsonrpc": "2.0", "method": "v1.2"}, False),  # in a string, after no ':' ',' '['
        ({"jsonrpc": "2.0", "method": "a", "params": {"m": "tick 0.945271"}}, False),
        ({"jsonrpc": "2.0", "method": "a", "params": {"1.5": 1}}, False),
        ({"jsonrpc": "2.0", "method": "a:1.5"}, True),  # unsure: looks like a member's float
        ({"jsonrpc": "2.0", "method": "[1e5"}, True),
        (1.5, True),
        (-1e300, True),
        ([1, 2.5], True),
    ],
)
def test_may_hold_float_examples(value: object, maybe: bool) -> None:
    assert jsonrpc.may_hold_float(orjson.dumps(value)) is maybe


# Strings and keys built to look like float tokens, so that the no-false-negative property is
# also tried where the pre-filter (a digit then '.', 'e', 'E') fires on string content.
_float_like_text = st.text(alphabet='0123456789.eE-:,[]{}" a', max_size=10)
_float_bait_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _float_like_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(_float_like_text, children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=examples(1500))
@given(_float_bait_json, st.booleans())
def test_may_hold_float_never_misses_a_float_among_float_like_strings(
    value: object, sort_keys: bool
) -> None:
    compact = orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else 0)
    if _holds_float(value):
        assert jsonrpc.may_hold_float(compact)
    elif not any(mark in compact for mark in (b":", b",", b"[")) and compact[:1] == b'"':
        # A lone string: whatever it holds, no float token can start in it.
        assert not jsonrpc.may_hold_float(compact)
