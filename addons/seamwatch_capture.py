"""mitmproxy addon: record every MCP Streamable HTTP exchange and SSE chunk, untouched.

Load it with `mitmdump -s addons/seamwatch_capture.py --set seamwatch_dir=DIR`, or run
`seamwatch proxy`. The hooks only read the flow and hand plain values to
`analyzer.capture.Recorder`; any exception on the capture path is caught and counted, so the
client always receives the upstream's bytes, byte for byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from mitmproxy import ctx, exceptions, http, tls
from mitmproxy.proxy import server_hooks
from mitmproxy.version import VERSION as MITMPROXY_VERSION

# `mitmdump -s` loads this file as a script: make the project importable next to it.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from analyzer import __version__  # noqa: E402
from analyzer.capture.framing import Decoded, decode_body  # noqa: E402
from analyzer.capture.pipeline import CaptureClient  # noqa: E402
from analyzer.capture.recorder import DEFAULT_BODY_CAP, is_event_stream  # noqa: E402
from analyzer.capture.retention import Retention  # noqa: E402
from analyzer.capture.writer import CaptureError  # noqa: E402
from analyzer.records import SCHEMA, StreamEndHow  # noqa: E402

log = logging.getLogger(__name__)

# Raw bytes of a non-SSE body kept for its response record; the recorder keeps 8 MiB of it
# decoded. mitmproxy used to buffer the whole body, without a bound.
_BODY_KEEP = 64 << 20


def _addr(address: object) -> str | None:
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = address[0], address[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return None


def _metrics_address(value: str) -> tuple[str, int]:
    """`seamwatch_metrics`' HOST:PORT (OptionsError when it is not one)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise exceptions.OptionsError(f"seamwatch_metrics: expected HOST:PORT, got {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


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


class _Body:
    """The raw bytes of a non-SSE response body, kept as they stream through to the client."""

    __slots__ = ("dropped", "raw")

    def __init__(self) -> None:
        self.raw = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = _BODY_KEEP - len(self.raw)
        if len(chunk) > room:
            self.dropped += len(chunk) - max(room, 0)
            chunk = chunk[: max(room, 0)]
        self.raw += chunk


def _body_fields(body: Decoded | None) -> dict[str, object]:
    """The body fields of `CaptureClient.request` / `response` (as `Recorder` takes them)."""
    if body is None:
        return {"body": None}
    fields: dict[str, object] = {"body": body.body}
    if body.dropped:
        fields["body_dropped"] = body.dropped
    if body.error:
        fields["body_decode_error"] = body.error
    return fields


class SeamwatchCapture:
    """Records HTTP exchanges and SSE chunks into schema-1 capture files."""

    def __init__(self) -> None:
        self.client: CaptureClient | None = None
        self.streaming: set[str] = set()
        self.bodies: dict[str, _Body] = {}

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
        add(
            "seamwatch_rotate_bytes",
            int,
            0,
            "Rotate capture files at this size, in bytes (0: seamwatch_rotate_mb decides).",
        )
        add("seamwatch_flush_ms", int, 200, "fdatasync capture files at least this often.")
        add(
            "seamwatch_max_bytes",
            int,
            0,
            "Keep the capture folder within this many bytes by deleting its oldest closed "
            "capture files (0: no bound).",
        )
        add(
            "seamwatch_max_age_s",
            int,
            0,
            "Delete closed capture files older than this many seconds (0: no bound).",
        )
        add(
            "seamwatch_stats_interval_s",
            int,
            -1,
            "Print a stats line on stderr this often, in seconds, and at exit "
            "(0: at exit only; -1: never).",
        )
        add(
            "seamwatch_metrics",
            str,
            "",
            "Serve the capture's counters in Prometheus text format on HOST:PORT (empty: off).",
        )

    def configure(self, updated: set[str]) -> None:
        if "seamwatch_rotate_mb" in updated and ctx.options.seamwatch_rotate_mb < 1:
            raise exceptions.OptionsError("seamwatch_rotate_mb must be at least 1")
        if "seamwatch_flush_ms" in updated and not 10 <= ctx.options.seamwatch_flush_ms <= 60000:
            raise exceptions.OptionsError("seamwatch_flush_ms must be within 10..60000")
        for name in ("seamwatch_rotate_bytes", "seamwatch_max_bytes", "seamwatch_max_age_s"):
            if name in updated and getattr(ctx.options, name) < 0:
                raise exceptions.OptionsError(f"{name} must not be negative")
        if "seamwatch_metrics" in updated and ctx.options.seamwatch_metrics:
            _metrics_address(ctx.options.seamwatch_metrics)
        if "seamwatch_dir" in updated and ctx.options.seamwatch_dir:
            out = Path(ctx.options.seamwatch_dir).expanduser()
            if out.exists() and not out.is_dir():
                raise exceptions.OptionsError(f"seamwatch_dir is not a directory: {out}")
            if self.client is None:
                self._open(out)

    def _open(self, out: Path) -> None:
        opts = ctx.options
        # Read when the capture opens: `seamwatch proxy` sets the listen options in the same
        # update as seamwatch_dir, and `-s` loads this addon after every option is set.
        listen = f"{opts.listen_host or '0.0.0.0'}:{opts.listen_port or 8080}"
        rotate = opts.seamwatch_rotate_bytes or opts.seamwatch_rotate_mb << 20
        retention = None
        if opts.seamwatch_max_bytes or opts.seamwatch_max_age_s:
            retention = Retention(
                max_bytes=opts.seamwatch_max_bytes or None,
                max_age_s=opts.seamwatch_max_age_s or None,
            )
            if opts.seamwatch_max_bytes and rotate > opts.seamwatch_max_bytes // 2:
                # Room for the open file and at least one closed one.
                rotate = max(1, opts.seamwatch_max_bytes // 4)
        stats = opts.seamwatch_stats_interval_s
        try:
            self.client = CaptureClient(
                out,
                open_fields={
                    "schema": SCHEMA,
                    "run_id": secrets.token_hex(8),
                    "tool_version": __version__,
                    "mitmproxy_version": MITMPROXY_VERSION,
                    "listen": listen,
                    "upstream": opts.seamwatch_upstream or None,
                    "replica_header": opts.seamwatch_replica_header or None,
                    "client_header": opts.seamwatch_client_header or None,
                    "mode": ",".join(opts.mode),
                },
                redact=opts.seamwatch_redact,
                replica_header=opts.seamwatch_replica_header or None,
                rotate_bytes=rotate,
                flush_interval_s=opts.seamwatch_flush_ms / 1000,
                retention=retention,
                stats_interval_s=None if stats < 0 else stats,
                metrics=(
                    _metrics_address(opts.seamwatch_metrics) if opts.seamwatch_metrics else None
                ),
            )
        except CaptureError as e:
            raise exceptions.OptionsError(str(e)) from e
        log.info("seamwatch: capturing to %s (pid %d)", out, os.getpid())

    def running(self) -> None:
        # Log rotation tools send SIGHUP: close the current capture file, open the next.
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.rotate)

    def rotate(self) -> None:
        """Close the current capture file and open the next, after what is recorded so far."""
        if self.client is not None:
            self.client.rotate()

    def _failed(self, where: str) -> None:
        if self.client is not None:
            self.client.count_error()
        log.debug("seamwatch capture error in %s", where, exc_info=True)

    def _response(self, flow: http.HTTPFlow, *, streamed: bool, body: Decoded | None) -> None:
        assert self.client is not None and flow.response is not None
        self.client.response(
            flow.id,
            status=flow.response.status_code,
            http_version=flow.response.http_version,
            headers=list(flow.response.headers.items(multi=True)),
            upstream=_addr(flow.server_conn.peername),
            streamed=streamed,
            **_body_fields(body),
        )

    def _body(self, flow: http.HTTPFlow, *, broken: bool) -> Decoded | None:
        """A non-SSE response's body (content decoded, cut at the cap), None when it has none."""
        assert flow.response is not None
        kept = self.bodies.pop(flow.id, None)
        ce = flow.response.headers.get("content-encoding")
        if flow.response.raw_content is not None or kept is None:
            # mitmproxy buffered it after all (no body, or another addon's choice).
            raw = flow.response.raw_content
            return (
                None if raw is None else decode_body(raw, ce, cap=DEFAULT_BODY_CAP, broken=broken)
            )
        # The record keeps at most the cap (the rest counts in truncated_bytes): only that
        # crosses the pipe to the capture worker (a large body sent whole grows the proxy's
        # memory by a good part of its size). The raw bytes past `_BODY_KEEP` count too.
        decoded = decode_body(bytes(kept.raw), ce, cap=DEFAULT_BODY_CAP, broken=broken)
        return decoded._replace(dropped=kept.dropped + decoded.dropped)

    def request(self, flow: http.HTTPFlow) -> None:
        if self.client is None:
            return
        try:
            req = flow.request
            # Decoded within the cap, as a response body is: a client's small gzip bomb must
            # not inflate whole in the proxy. What the upstream gets is `req`, untouched.
            body = None
            if req.raw_content is not None:
                ce = req.headers.get("content-encoding")
                body = decode_body(req.raw_content, ce, cap=DEFAULT_BODY_CAP)
            self.client.request(
                flow.id,
                method=req.method,
                scheme=req.scheme,
                # host:port as the client addressed it (HTTP/1 sends it in Host; a forward
                # proxy's absolute-form target is made origin-form before this hook): the
                # analysis tells origins apart by it (`analyzer.timeline.keys`).
                authority=req.authority or req.host_header or req.pretty_host,
                path=req.path,
                http_version=req.http_version,
                headers=list(req.headers.items(multi=True)),
                client=_addr(flow.client_conn.peername) or "",
                upstream=_addr(flow.server_conn.peername) or _addr(flow.server_conn.address),
                **_body_fields(body),
            )
        except Exception:
            self._failed("request")

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if self.client is None or flow.response is None:
            return
        try:
            if not is_event_stream(list(flow.response.headers.items(multi=True))):
                # Streamed through too, so that the client gets the bytes as they come (and
                # those that came, when the upstream breaks off); its record is made whole,
                # at the end, as for a buffered body.
                flow.response.stream = self._collect(flow.id)
                return
            self._response(flow, streamed=True, body=None)
        except Exception:
            self._failed("responseheaders")
            return
        self.streaming.add(flow.id)
        flow.response.stream = self._stream(self.client, flow.id)

    def _collect(self, flow_id: str) -> Callable[[bytes], bytes]:
        body = self.bodies[flow_id] = _Body()

        def passthrough(chunk: bytes) -> bytes:
            # The chunk goes back unchanged whatever happens: recording is a side effect.
            try:
                body.add(chunk)
            except Exception:
                self._failed("collect")
            return chunk

        return passthrough

    def _stream(self, client: CaptureClient, flow_id: str) -> Callable[[bytes], bytes]:
        def passthrough(chunk: bytes) -> bytes:
            # The chunk goes back unchanged whatever happens: recording is a side effect.
            try:
                if chunk:
                    client.chunk(flow_id, chunk)
            except Exception:
                self._failed("stream")
            return chunk

        return passthrough

    def response(self, flow: http.HTTPFlow) -> None:
        if self.client is None or flow.response is None:
            return
        try:
            if flow.id in self.streaming:
                self.streaming.discard(flow.id)
            else:
                self._response(flow, streamed=False, body=self._body(flow, broken=False))
            self.client.stream_end(flow.id, "complete")
        except Exception:
            self._failed("response")

    def error(self, flow: http.HTTPFlow) -> None:
        if self.client is None:
            return
        try:
            if flow.id in self.streaming:
                self.streaming.discard(flow.id)
            elif flow.response is not None:
                # A non-SSE response that broke mid-body: keep what arrived.
                self._response(flow, streamed=False, body=self._body(flow, broken=True))
            self.client.stream_end(flow.id, _end_how(flow), flow.error.msg if flow.error else None)
        except Exception:
            self._failed("error")

    def server_connect_error(self, data: server_hooks.ServerConnectionHookData) -> None:
        if self.client is None:
            return
        try:
            upstream = _addr(data.server.address) or str(data.server.address)
            self.client.server_unreachable(upstream, data.server.error or "connect failed")
        except Exception:
            self._failed("server_connect_error")

    def tls_failed_server(self, data: tls.TlsData) -> None:
        # The TCP connection to the upstream worked but its TLS handshake did not (a bad
        # certificate, a server that does not speak TLS): to the client it is the same 502 as
        # a refused connection, so it is recorded the same way.
        if self.client is None:
            return
        try:
            upstream = _addr(data.conn.address) or str(data.conn.address)
            reason = data.conn.error or "unknown error"
            self.client.server_unreachable(upstream, f"TLS handshake failed: {reason}")
        except Exception:
            self._failed("tls_failed_server")

    def done(self) -> None:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        if self.client is None:
            return
        for flow_id in self.streaming:
            self.client.stream_end(flow_id, "open_at_shutdown")
        self.streaming.clear()
        self.bodies.clear()
        self.client.close()
        self.client = None


addons = [SeamwatchCapture()]
