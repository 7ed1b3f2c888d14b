"""Attribute values read from captured text (analyzer/otlp/fields.py)."""

from __future__ import annotations

import pytest

from analyzer.otlp.fields import json_field, parse_traceparent, rpc_id_text, server_attributes

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


def test_parse_traceparent_takes_future_versions_with_more_fields() -> None:
    assert parse_traceparent(f"01-{TRACE}-{PARENT}-01-extra") == (int(TRACE, 16), int(PARENT, 16))
    assert parse_traceparent(f"00-{TRACE}-{PARENT}-01-extra") is None


@pytest.mark.parametrize(
    ("rpc_id", "text"),
    [("7", "7"), ('"a"', "a"), ("null", None), (None, None), ("not json", "not json")],
)
def test_rpc_id_text_is_the_id_as_the_semconv_writes_it(
    rpc_id: str | None, text: str | None
) -> None:
    assert rpc_id_text(rpc_id) == text


@pytest.mark.parametrize(
    ("authority", "attributes"),
    [
        ("example.com:8443", {"server.address": "example.com", "server.port": 8443}),
        ("[::1]:9000", {"server.address": "::1", "server.port": 9000}),
        ("example.com", {"server.address": "example.com"}),
        (None, {}),
    ],
)
def test_server_attributes_split_host_and_port(
    authority: str | None, attributes: dict[str, object]
) -> None:
    assert server_attributes(authority) == attributes


def test_json_field_is_the_compact_sorted_json_of_the_path_or_none() -> None:
    body = '{"params": {"arguments": {"b": 1, "a": "é"}}}'
    assert json_field(body, "params", "arguments") == '{"a":"é","b":1}'
    assert json_field(body, "params", "missing") is None
    assert json_field("{broken", "params") is None
