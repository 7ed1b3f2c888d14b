"""Attribute values of the OTLP export read from captured text: JSON-RPC ids, W3C
`traceparent` values, JSON fields of bodies, server addresses."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from analyzer.otlp.draft import Attributes

__all__ = [
    "json_field",
    "meta_traceparent",
    "parse_traceparent",
    "put",
    "rpc_id_text",
    "server_attributes",
]


def rpc_id_text(rpc_id: str | None) -> str | None:
    """`jsonrpc.request.id` of a canonical JSON id: 7 -> "7", "a" -> "a"; None for null ids."""
    if rpc_id is None or rpc_id == "null":
        return None
    try:
        value = json.loads(rpc_id)
    except ValueError:
        return rpc_id
    if value is None:
        return None
    return value if isinstance(value, str) else rpc_id


def parse_traceparent(value: object) -> tuple[int, int] | None:
    """(trace id, parent span id) of a W3C `traceparent` value; None unless well formed."""
    if not isinstance(value, str):
        return None
    parts = value.strip().split("-")
    # W3C Trace Context §3.2: version-traceid-parentid-flags, lowercase hex; version ff is
    # invalid, and so are all-zero ids.
    if len(parts) < 4 or [len(p) for p in parts[:4]] != [2, 32, 16, 2]:
        return None
    version, trace, parent, flags = parts[:4]
    hexdigits = set("0123456789abcdef")
    if not all(set(p) <= hexdigits for p in (version, trace, parent, flags)) or version == "ff":
        return None
    if version == "00" and len(parts) != 4:
        return None
    trace_id, span_id = int(trace, 16), int(parent, 16)
    if not trace_id or not span_id:
        return None
    return trace_id, span_id


def meta_traceparent(text: str | None) -> tuple[int, int] | None:
    """The traceparent of a request body's `params._meta` (the MCP semconv's propagation)."""
    if not text:
        return None
    try:
        body = json.loads(text)
    except ValueError:
        return None
    messages = body if isinstance(body, list) else [body]
    for message in messages:
        params = message.get("params") if isinstance(message, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict):
            found = parse_traceparent(meta.get("traceparent"))
            if found is not None:
                return found
    return None


def json_field(text: str | None, *path: str) -> str | None:
    """Canonical-enough JSON text of `path` inside the JSON document `text`, or None."""
    if not text:
        return None
    try:
        value: Any = json.loads(text)
    except ValueError:
        return None
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def server_attributes(authority: str | None) -> Attributes:
    """`server.address` and `server.port` of an authority `host[:port]`."""
    if not authority:
        return {}
    host, sep, port = authority.rpartition(":")
    if sep and port.isdigit() and not host.endswith(":"):
        return {"server.address": host.strip("[]"), "server.port": int(port)}
    return {"server.address": authority.strip("[]")}


def put(attributes: Attributes, values: Mapping[str, Any]) -> None:
    """Set the attributes whose value is known (OTLP has no null attribute)."""
    attributes.update((key, value) for key, value in values.items() if value is not None)
