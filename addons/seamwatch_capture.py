"""mitmproxy addon: record every MCP Streamable HTTP exchange and SSE chunk, untouched.

Load it with `mitmdump -s addons/seamwatch_capture.py --set seamwatch_dir=DIR`, or run
`seamwatch proxy`. The hooks only read the flow and hand plain values to
`analyzer.capture.Recorder`; any exception on the capture path is caught and counted, so the
client always receives the upstream's bytes, byte for byte.
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
from collections.abc import Callable
from pathlib import Path

from mitmproxy import ctx, exceptions, http
from mitmproxy.proxy import server_hooks
from mitmproxy.version import VERSION as MITMPROXY_VERSION

# `mitmdump -s` loads this file as a script: make the project importable next to it.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from analyzer import __version__  # noqa: E402
from analyzer.capture.recorder import Recorder, StreamTap, is_event_stream  # noqa: E402
from analyzer.capture.redaction import Redactor  # noqa: E402
from analyzer.capture.writer import CaptureWriter  # noqa: E402
from analyzer.records import SCHEMA, StreamEndHow  # noqa: E402

log = logging.getLogger(__name__)


def _addr(address: object) -> str | None:
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = address[0], address[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return None


def _end_how(flow: http.HTTPFlow) -> StreamEndHow:
    """Which side broke the exchange, from mitmproxy's error text and connection state."""
    msg = (flow.error.msg if flow.error else "").lower()
    if "client disconnected" in msg:
        return "client_closed"
    if "server closed connection" in msg or "peer closed connection" in msg:
        return "server_closed"
    if flow.client_conn.timestamp_end is not None:
        return "client_closed"
    if flow.server_conn.timestamp_end is not None:
        return "server_closed"
    return "error"


class SeamwatchCapture:
    """Records HTTP exchanges and SSE chunks into schema-1 capture files."""

    def __init__(self) -> None:
        self.writer: CaptureWriter | None = None
        self.recorder: Recorder | None = None
        self.taps: dict[str, StreamTap] = {}

    def load(self, loader: object) -> None:
        add = loader.add_option  # type: ignore[attr-defined]
        add("seamwatch_dir", str, "", "Directory for seamwatch capture files (empty: off).")
        add(
            "seamwatch_replica_header",
            str,
            "",
            "Response header naming the replica that served a response "
            "(default: the upstream address).",
        )
        add(
            "seamwatch_client_header",
            str,
            "",
            "Request header identifying the client, for sessionless (2026) traffic.",
        )
        add(
            "seamwatch_redact",
            bool,
            True,
            "Redact credentials (auth headers, cookies, token fields) before they reach disk.",
        )
        add("seamwatch_upstream", str, "", "Upstream URL, recorded in capture_open.")
        add("seamwatch_rotate_mb", int, 64, "Rotate capture files at this size, in MiB.")
        add("seamwatch_flush_ms", int, 200, "fdatasync capture files at least this often.")

    def configure(self, updated: set[str]) -> None:
        if "seamwatch_rotate_mb" in updated and ctx.options.seamwatch_rotate_mb < 1:
            raise exceptions.OptionsError("seamwatch_rotate_mb must be at least 1")
        if "seamwatch_flush_ms" in updated and not 10 <= ctx.options.seamwatch_flush_ms <= 60000:
            raise exceptions.OptionsError("seamwatch_flush_ms must be within 10..60000")
        if "seamwatch_dir" in updated and ctx.options.seamwatch_dir:
            out = Path(ctx.options.seamwatch_dir).expanduser()
            if out.exists() and not out.is_dir():
                raise exceptions.OptionsError(f"seamwatch_dir is not a directory: {out}")
            if self.writer is None:
                self._open(out)

    def _open(self, out: Path) -> None:
        opts = ctx.options
        redactor = Redactor(enabled=opts.seamwatch_redact, key=secrets.token_bytes(32))
        listen = f"{opts.listen_host or '0.0.0.0'}:{opts.listen_port or 8080}"
        self.writer = CaptureWriter(
            out,
            open_fields={
                "schema": SCHEMA,
                "run_id": secrets.token_hex(8),
                "tool_version": __version__,
                "mitmproxy_version": MITMPROXY_VERSION,
                "redaction": redactor.policy(),
                "listen": listen,
                "upstream": opts.seamwatch_upstream or None,
                "replica_header": opts.seamwatch_replica_header or None,
                "client_header": opts.seamwatch_client_header or None,
            },
            rotate_bytes=opts.seamwatch_rotate_mb << 20,
            flush_interval_s=opts.seamwatch_flush_ms / 1000,
        )
        self.writer.start()
        self.recorder = Recorder(
            self.writer, redactor, replica_header=opts.seamwatch_replica_header or None
        )
        log.info("seamwatch: capturing to %s (pid %d)", out, os.getpid())

    def _failed(self, where: str) -> None:
        if self.writer is not None:
            self.writer.count_error()
        log.debug("seamwatch capture error in %s", where, exc_info=True)

    def request(self, flow: http.HTTPFlow) -> None:
        if self.recorder is None:
            return
        try:
            req = flow.request
            self.recorder.request(
                flow.id,
                method=req.method,
                scheme=req.scheme,
                authority=req.pretty_host if not req.authority else req.authority,
                path=req.path,
                http_version=req.http_version,
                headers=list(req.headers.items(multi=True)),
                client=_addr(flow.client_conn.peername) or "",
                upstream=_addr(flow.server_conn.peername) or _addr(flow.server_conn.address),
                body=req.get_content(strict=False),
            )
        except Exception:
            self._failed("request")

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if self.recorder is None or flow.response is None:
            return
        try:
            headers = list(flow.response.headers.items(multi=True))
            if not is_event_stream(headers):
                return
            tap = self.recorder.response(
                flow.id,
                status=flow.response.status_code,
                http_version=flow.response.http_version,
                headers=headers,
                upstream=_addr(flow.server_conn.peername),
                body=None,
                streamed=True,
            )
        except Exception:
            self._failed("responseheaders")
            return
        if tap is not None:
            self.taps[flow.id] = tap
            flow.response.stream = self._stream(tap)

    def _stream(self, tap: StreamTap) -> Callable[[bytes], bytes]:
        def passthrough(chunk: bytes) -> bytes:
            # The chunk goes back unchanged whatever happens: recording is a side effect.
            try:
                if chunk:
                    tap.feed(chunk)
            except Exception:
                self._failed("stream")
            return chunk

        return passthrough

    def response(self, flow: http.HTTPFlow) -> None:
        if self.recorder is None or flow.response is None:
            return
        try:
            tap = self.taps.pop(flow.id, None)
            if tap is not None:
                tap.end("complete")
                return
            self.recorder.response(
                flow.id,
                status=flow.response.status_code,
                http_version=flow.response.http_version,
                headers=list(flow.response.headers.items(multi=True)),
                upstream=_addr(flow.server_conn.peername),
                body=flow.response.get_content(strict=False),
                streamed=False,
            )
            self.recorder.stream_end(flow.id, "complete")
        except Exception:
            self._failed("response")

    def error(self, flow: http.HTTPFlow) -> None:
        if self.recorder is None:
            return
        try:
            how = _end_how(flow)
            text = flow.error.msg if flow.error else None
            tap = self.taps.pop(flow.id, None)
            if tap is not None:
                tap.end(how, text)
                return
            if flow.response is not None:
                # A non-streamed response that broke mid-body: keep what arrived.
                self.recorder.response(
                    flow.id,
                    status=flow.response.status_code,
                    http_version=flow.response.http_version,
                    headers=list(flow.response.headers.items(multi=True)),
                    upstream=_addr(flow.server_conn.peername),
                    body=flow.response.raw_content,
                    streamed=False,
                )
            self.recorder.stream_end(flow.id, how, text)
        except Exception:
            self._failed("error")

    def server_connect_error(self, data: server_hooks.ServerConnectionHookData) -> None:
        if self.recorder is None:
            return
        try:
            upstream = _addr(data.server.address) or str(data.server.address)
            self.recorder.server_unreachable(upstream, data.server.error or "connect failed")
        except Exception:
            self._failed("server_connect_error")

    def done(self) -> None:
        if self.recorder is not None:
            for tap in list(self.taps.values()):
                try:
                    tap.end("open_at_shutdown")
                except Exception:
                    self._failed("done")
            self.taps.clear()
        if self.writer is not None:
            self.writer.close()
            self.writer = None
            self.recorder = None


addons = [SeamwatchCapture()]
