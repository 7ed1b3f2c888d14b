"""Capture schema 1: its version, and what the capture and its readers share about records.

A capture file holds one JSON object a line (DESIGN.md §4). The addon writes what passed the
wire and nothing it had to guess; everything else (SSE events, JSON-RPC messages, sessions) is
derived later by the analyzer. The recorder builds plain dicts on the hot path, and the readers
read plain dicts: the pydantic models of every record kind, the reference for both and for the
tests, are in `analyzer.record_models` (kept apart: the analyzer does not pay for importing
pydantic and building the models on every run).
"""

from __future__ import annotations

import base64
from typing import Literal

SCHEMA_MAJOR = 1
SCHEMA_MINOR = 3  # 1.1: `redaction.query_keys`; 1.2: `decode_error` of a body;
# 1.3: capture_open's `mode` and `retention` (files deleted by --max-size / --max-age)
SCHEMA = f"{SCHEMA_MAJOR}.{SCHEMA_MINOR}"

StreamEndHow = Literal["complete", "client_closed", "server_closed", "error", "open_at_shutdown"]
ReplicaSource = Literal["header", "upstream"]


def body_from_bytes(
    raw: bytes, cap: int | None = None, *, dropped: int = 0, decode_error: str | None = None
) -> dict[str, object]:
    """Encode bytes as a schema-1 body dict, keeping the head up to `cap` bytes; `dropped`
    more bytes were not kept before (they add to `truncated_bytes`); `decode_error`: why the
    bytes are still content-encoded."""
    truncated = dropped
    if cap is not None and len(raw) > cap:
        truncated += len(raw) - cap
        raw = raw[:cap]
    body: dict[str, object]
    try:
        body = {"text": raw.decode("utf-8")}
    except UnicodeDecodeError:
        body = {"b64": base64.b64encode(raw).decode("ascii")}
    if truncated:
        body["truncated_bytes"] = truncated
    if decode_error:
        body["decode_error"] = decode_error
    return body
