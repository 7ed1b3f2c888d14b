"""`seamwatch export PATH... [--otlp-endpoint URL]` and `analyze --format otlp-json` (issue #32).

`export` reads the inputs as `analyze` does, runs every detector, and sends one trace per
session over OTLP/HTTP. Exit codes: 0 when the receiver accepted every request, 1 when it
refused one or could not be reached (a one-line reason on stderr), 2 for bad usage or
unreadable input.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

import polars as pl

from analyzer.analysis import load_timeline
from analyzer.command import EXIT_OK, UsageError
from analyzer.detectors import run_detectors
from analyzer.otlp import OtlpError
from analyzer.otlp.spans import iter_spans
from analyzer.otlp.wire import send, to_otlp_json
from analyzer.scratch import scratch_prefix

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

__all__ = ["EXIT_NOT_ACCEPTED", "export_command", "otlp_json"]

#: The receiver refused the spans or could not be reached.
EXIT_NOT_ACCEPTED: Final = 1


def otlp_json(timeline: Timeline, findings: pl.DataFrame, *, payloads: bool = False) -> str:
    """The analysis as one OTLP/JSON `ExportTraceServiceRequest` (`analyze --format otlp-json`)."""
    return to_otlp_json(iter_spans(timeline, findings, payloads=payloads))


def check_endpoint(endpoint: str | None) -> None:
    """UsageError unless `--otlp-endpoint` is an http(s) URL (None: the environment decides)."""
    if endpoint is None:
        return
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--otlp-endpoint: expected an http(s) URL, got {endpoint!r}")


def export_command(args: argparse.Namespace) -> int:
    """Run `seamwatch export` with parsed arguments; return the exit code."""
    check_endpoint(args.otlp_endpoint)
    paths = [Path(p) for p in args.paths]
    for path in paths:
        if not path.exists():
            raise UsageError(f"{path}: no such file or directory")
    scratch = tempfile.TemporaryDirectory(prefix=scratch_prefix("spill"))
    with scratch as spill:
        timeline = load_timeline(
            paths,
            replica_header=args.replica_header,
            client_header=args.client_header,
            use_cache=not args.no_cache,
            spill_dir=Path(spill),
        )
        findings = run_detectors(timeline)
        try:
            # Sent as they are made, while the timeline's spill folder still exists.
            sent = send(
                iter_spans(timeline, findings, payloads=args.otlp_payloads), args.otlp_endpoint
            )
        except OtlpError as e:
            print(f"seamwatch: {e}", file=sys.stderr)
            return EXIT_NOT_ACCEPTED
    print(
        f"seamwatch export: {sent.traces} traces, {sent.spans} spans, {findings.height} "
        f"findings; {sent.requests} requests accepted",
        file=sys.stderr,
    )
    return EXIT_OK
