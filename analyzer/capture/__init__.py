"""Capture side of seamwatch: what the mitmproxy addon uses to record traffic (DESIGN.md §4).

`Redactor` replaces credentials before a record is queued; `CaptureWriter` numbers records and
writes them, on its own thread, to rotated `capture-<run_id>-<index>.jsonl` files. Neither
imports mitmproxy: the addon in `addons/` hands them plain values.
"""

from analyzer.capture.redaction import (
    DEFAULT_HEADERS,
    DEFAULT_JSON_KEYS,
    DEFAULT_QUERY_KEYS,
    Redactor,
)
from analyzer.capture.writer import CaptureError, CaptureWriter

__all__ = [
    "DEFAULT_HEADERS",
    "DEFAULT_JSON_KEYS",
    "DEFAULT_QUERY_KEYS",
    "CaptureError",
    "CaptureWriter",
    "Redactor",
]
