"""OTLP export of the timelines: one trace per session, in the OpenTelemetry MCP conventions.

`spans` maps a timeline and its findings to OpenTelemetry SDK spans (from the frames `frames`
collects, as `draft` spans whose attribute values `fields` reads); `wire` encodes them as an
OTLP/JSON `ExportTraceServiceRequest` or sends them over OTLP/HTTP; `command` holds the
`seamwatch export` and `analyze --format otlp-json` entry points. OpenTelemetry is imported by
these modules only, and they only when OTLP is asked for (docs/otlp.md).
"""

from __future__ import annotations

from analyzer import SeamwatchError

__all__ = ["OtlpError"]


class OtlpError(SeamwatchError):
    """An OTLP export that the receiver refused or could not be reached."""
