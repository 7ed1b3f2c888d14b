"""The real proxy (mitmdump + the capture addon) between a scripted origin and a real client.

Every test checks both halves of the contract: the client receives the origin's bytes, byte for
byte and as they are written; the capture holds what passed.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import gzip
import ipaddress
import json
import os
import random
import re
import signal
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from analyzer.cli import main as analyze_main
from analyzer.record_models import RECORD_ADAPTER
from analyzer.sse import SseDecoder, decode_all
from tests.support.origin import Origin, Script
from tests.support.proxy import ROOT, free_port, read_records, run_mitmdump, run_proxy

pytestmark = [pytest.mark.timeout(60), pytest.mark.proxy]

SSE = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]


def events(n: int, *, eol: bytes = b"\n") -> list[bytes]:
    return [
        b'id: %d%sdata: {"jsonrpc":"2.0","method":"notifications/progress","params":'
        b'{"progress":%d}}%s%s' % (i, eol, i, eol, eol)
        for i in range(n)
    ]


def gzip_writes(parts: list[bytes]) -> list[bytes]:
    """gzip with a sync flush after each part, as a streaming server compresses SSE."""
    comp = zlib.compressobj(wbits=31)
    out = [comp.compress(p) + comp.flush(zlib.Z_SYNC_FLUSH) for p in parts]
    out.append(comp.flush())
    return out


def body(record: dict[str, Any]) -> bytes:
    data = record["data"] if record["kind"] == "chunk" else record["body"]
    return data["text"].encode() if "text" in data else base64.b64decode(data["b64"])


def of_kind(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in records if r["kind"] == kind]


def wait_for(out: Path, kind: str, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Poll the capture until a record of `kind` is on disk (the writer flushes every 0.2 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        records = read_records(out)
        if of_kind(records, kind):
            return records
        time.sleep(0.05)
    raise AssertionError(f"no {kind} record within {timeout}s")


class Reader:
    """Reads a streamed response's raw bytes (transfer-decoded, content still encoded)."""

    def __init__(self, response: httpx.Response) -> None:
        self.it = response.iter_raw()
        self.got = b""

    def until(self, expected: bytes) -> None:
        while len(self.got) < len(expected):
            self.got += next(self.it)
        assert self.got == expected


@pytest.mark.parametrize(
    "shape",
    ["plain", "gzip", "crlf-split"],
)
def test_events_reach_the_client_one_by_one_and_byte_identical(tmp_path: Path, shape: str) -> None:
    parts = events(6, eol=b"\r\n" if shape == "crlf-split" else b"\n")
    headers = list(SSE)
    if shape == "gzip":
        writes = gzip_writes(parts)
        headers.append(("Content-Encoding", "gzip"))
    elif shape == "crlf-split":
        # Every write ends between the CR and the LF of a CRLF.
        joined = b"".join(parts)
        cuts = [i + 1 for i in range(len(joined)) if joined[i : i + 2] == b"\r\n"][::3]
        writes = [joined[a:b] for a, b in zip([0, *cuts], [*cuts, len(joined)], strict=True)]
    else:
        writes = parts
    with Origin() as origin, run_proxy(origin.url, tmp_path / "cap") as proxy:
        origin.scripts["/mcp"] = Script(headers=headers, writes=writes, paced=True)
        with (
            httpx.Client(timeout=10) as client,
            client.stream(
                "GET", proxy.url + "/mcp", headers={"Accept-Encoding": "gzip"}
            ) as response,
        ):
            assert response.status_code == 200
            reader = Reader(response)
            for k in range(len(writes)):
                # Write k must arrive before write k+1 is even made: no buffering.
                reader.until(b"".join(writes[: k + 1]))
                origin.step()
            reader.until(b"".join(writes))
            assert b"".join(reader.it) == b""
    records = read_records(tmp_path / "cap")
    for r in records:
        RECORD_ADAPTER.validate_python(r)
    assert records[0]["kind"] == "capture_open"
    assert records[-1]["kind"] == "capture_close"
    chunks = of_kind(records, "chunk")
    decoded = b"".join(body(c) for c in chunks)
    assert decoded == b"".join(parts)
    # Cut at event boundaries: every recorded chunk holds whole events and nothing more.
    for c in chunks:
        decoder = SseDecoder()
        assert decoder.feed(body(c)) and decoder.tail == b""
    assert [e.id for e in decode_all(decoded)] == [str(i) for i in range(6)]
    assert [c["n"] for c in chunks] == list(range(len(chunks)))
    (end,) = of_kind(records, "stream_end")
    assert end["how"] == "complete"
    (resp,) = of_kind(records, "response")
    assert resp["streamed"] and resp["body"] is None
    assert resp["replica_source"] == "upstream" and resp["replica"].startswith("127.0.0.1:")


def test_client_disconnect_mid_stream_is_recorded_as_client_closed(tmp_path: Path) -> None:
    parts = events(8)
    with Origin() as origin, run_proxy(origin.url, tmp_path / "cap") as proxy:
        origin.scripts["/mcp"] = Script(headers=SSE, writes=parts, paced=True)
        with httpx.Client(timeout=10) as client, client.stream("GET", proxy.url + "/mcp") as r:
            reader = Reader(r)
            for k in range(3):
                reader.until(b"".join(parts[: k + 1]))
                origin.step()
        # The client is gone: the proxy ends the flow on its own, before the origin sends more
        # (the rest sent at once could reach the proxy before it saw the close: 'complete').
        records = wait_for(tmp_path / "cap", "stream_end")
        for _ in range(6):  # the origin tries the rest; the proxy keeps running
            origin.step()
    (end,) = of_kind(records, "stream_end")
    assert end["how"] == "client_closed"
    recorded = b"".join(body(c) for c in of_kind(records, "chunk"))
    # What was recorded is a prefix of the origin's stream holding at least what the client got.
    assert b"".join(parts).startswith(recorded)
    assert recorded.startswith(b"".join(parts[:3]))


def test_upstream_death_mid_chunked_stream(tmp_path: Path) -> None:
    parts = events(8)
    with Origin() as origin, run_proxy(origin.url, tmp_path / "cap") as proxy:
        origin.scripts["/mcp"] = Script(headers=SSE, writes=parts, die_after=4)
        got = b""
        with (
            httpx.Client(timeout=10) as client,
            client.stream("GET", proxy.url + "/mcp") as r,
            pytest.raises(httpx.RemoteProtocolError),
        ):
            for piece in r.iter_raw():
                got += piece
        assert got == b"".join(parts[:4])
    records = read_records(tmp_path / "cap")
    (end,) = of_kind(records, "stream_end")
    assert end["how"] == "server_closed"
    assert end["error"]
    assert b"".join(body(c) for c in of_kind(records, "chunk")) == b"".join(parts[:4])


def test_a_failing_capture_path_never_touches_the_traffic(tmp_path: Path) -> None:
    rng = random.Random(20261130)
    parts = events(40)
    faults = sorted(rng.sample(range(40), 7))
    out = tmp_path / "cap"
    with Origin() as origin:
        origin.scripts["/mcp"] = Script(headers=SSE, writes=parts)
        faulty = ROOT / "tests" / "support" / "faulty_addon.py"
        env = {"SEAMWATCH_TEST_FAULTS": ",".join(map(str, faults))}
        with (
            run_mitmdump(origin.url, out, faulty, env=env) as proxy,
            httpx.Client(timeout=10) as client,
            client.stream("GET", proxy.url + "/mcp") as r,
        ):
            # Paced: the proxy reads each write as its own chunk, so chunk k is event k.
            reader = Reader(r)
            for k in range(len(parts)):
                reader.until(b"".join(parts[: k + 1]))
                origin.step()
    records = read_records(out)
    (close,) = of_kind(records, "capture_close")
    assert close["addon_errors"] == len(faults)
    # A faulted chunk is missing from the capture; every other event is there.
    recorded = decode_all(b"".join(body(c) for c in of_kind(records, "chunk")))
    assert [e.id for e in recorded] == [str(i) for i in range(40) if i not in faults]


def test_canary_secrets_never_reach_the_capture(tmp_path: Path) -> None:
    secret_event = (
        b'id: 9\ndata: {"result":{"access_token":"CANARY-ACCESS-7f3a","progressToken":"keep-me"}}'
        b"\n\n"
    )
    split = secret_event.index(b"CANARY") + 4
    gz = zlib.compressobj(wbits=31)
    gz_part = b'id: 10\ndata: {"refresh_token":"CANARY-REFRESH-91c2"}\n\n'
    gz_split = gz_part.index(b"CANARY") + 6
    gz_writes = [
        gz.compress(gz_part[:gz_split]) + gz.flush(zlib.Z_SYNC_FLUSH),
        gz.compress(gz_part[gz_split:]) + gz.flush(zlib.Z_SYNC_FLUSH),
        gz.flush(),
    ]
    with Origin() as origin, run_proxy(origin.url, tmp_path / "cap") as proxy:
        origin.scripts["/plain"] = Script(
            headers=SSE, writes=[secret_event[:split], secret_event[split:]], paced=False
        )
        origin.scripts["/gz"] = Script(
            headers=[*SSE, ("Content-Encoding", "gzip")], writes=gz_writes
        )
        origin.scripts["/json"] = Script(
            headers=[("Content-Type", "application/json"), ("Set-Cookie", "sid=CANARY-COOKIE-55")],
            writes=[b'{"jsonrpc":"2.0","id":1,"result":{"client_secret":"CANARY-CS-0"}}'],
            chunked=False,
        )
        with httpx.Client(timeout=10) as client:
            auth = {"Authorization": "Bearer CANARY-AUTH-1d9e", "Cookie": "s=CANARY-COOKIE-2"}
            assert client.get(proxy.url + "/plain", headers=auth).content == secret_event
            raw = client.get(proxy.url + "/gz", headers={"Accept-Encoding": "gzip"})
            assert raw.content == gz_part  # httpx decodes; the wire carried gzip
            client.post(
                proxy.url + "/json?access_token=CANARY-QUERY-8&token=CANARY-Q-T&key=CANARY-Q-K"
                "&code=CANARY-Q-C",
                content=b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"password":"CANARY-PW-3"}}',
                headers={
                    "Api-Key": "CANARY-H-1",
                    "X-Auth-Token": "CANARY-H-2",
                    "X-Access-Token": "CANARY-H-3",
                    "Authorization-Token": "CANARY-H-4",
                    "X-Vendor-Secret": "CANARY-H-5",
                },
            )
    blob = b"".join(p.read_bytes() for p in (tmp_path / "cap").iterdir())
    assert b"CANARY" not in blob
    records = read_records(tmp_path / "cap")
    requests = of_kind(records, "request")
    assert {r["path"].split("?")[0] for r in requests} == {"/plain", "/gz", "/json"}
    auth_values = [v for r in requests for k, v in r["headers"] if k.lower() == "authorization"]
    assert auth_values and all(v.startswith("Bearer [redacted:") for v in auth_values)
    chunks = of_kind(records, "chunk")
    assert len(chunks) == 2 and {c["n"] for c in chunks} == {0}
    texts = b"".join(body(c) for c in chunks)
    assert b'"progressToken":"keep-me"' in texts and b"[redacted:" in texts
    close = of_kind(records, "capture_close")[0]
    assert close["redacted"] >= 8


def children(pid: int) -> list[int]:
    """Child process ids of pid (Linux /proc)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


@pytest.mark.parametrize("victims", ["proxy", "proxy-and-writer"])
def test_sigkill_keeps_every_record_older_than_two_flush_intervals(
    tmp_path: Path, victims: str
) -> None:
    parts = events(10)
    flush_s = 0.2
    with Origin() as origin, run_proxy(origin.url, tmp_path / "cap") as proxy:
        origin.scripts["/mcp"] = Script(headers=SSE, writes=parts, paced=True)
        (worker,) = children(proxy.proc.pid)
        with httpx.Client(timeout=10) as client, client.stream("GET", proxy.url + "/mcp") as r:
            reader = Reader(r)
            for k in range(5):
                reader.until(b"".join(parts[: k + 1]))
                origin.step()
            reader.until(b"".join(parts[:6]))
            # The property under test is about elapsed time: wait it out on purpose.
            time.sleep(2 * flush_s + 0.2)
            origin.step()
            reader.until(b"".join(parts[:7]))
            if victims == "proxy-and-writer":
                os.kill(worker, signal.SIGKILL)
            proxy.stop(signal.SIGKILL)
    records = read_records(tmp_path / "cap")
    # No capture_close: readers can tell the stop was unclean.
    assert not of_kind(records, "capture_close")
    assert len(of_kind(records, "request")) == 1
    recorded = b"".join(body(c) for c in of_kind(records, "chunk"))
    assert recorded.startswith(b"".join(parts[:6]))
    if victims == "proxy-and-writer":
        assert list((tmp_path / "cap").glob("*.jsonl.partial"))
    else:
        # The writer outlives the proxy: it saw the pipe close and finished the file.
        deadline = time.monotonic() + 10
        while list((tmp_path / "cap").glob("*.partial")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not list((tmp_path / "cap").glob("*.partial"))


def test_unreachable_upstream_is_recorded(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with run_proxy(dead, tmp_path / "cap") as proxy, httpx.Client(timeout=10) as client:
        assert client.get(proxy.url + "/mcp").status_code == 502
    records = read_records(tmp_path / "cap")
    (unreachable,) = of_kind(records, "server_unreachable")
    assert unreachable["upstream"] == dead.removeprefix("http://")
    assert of_kind(records, "stream_end")[0]["how"] in ("error", "server_closed")


def test_capture_files_are_owner_only(tmp_path: Path) -> None:
    with Origin() as origin, run_proxy(origin.url, tmp_path / "cap") as proxy:
        origin.scripts["/x"] = Script(
            headers=[("Content-Type", "application/json")], writes=[b"{}"]
        )
        httpx.get(proxy.url + "/x", timeout=10)
    out = tmp_path / "cap"
    assert out.stat().st_mode & 0o777 == 0o700
    files = list(out.iterdir())
    assert files and all(f.stat().st_mode & 0o777 == 0o600 for f in files)
    assert all(f.name.endswith(".jsonl") for f in files)
    first = json.loads(files[0].read_text().splitlines()[0])
    assert first["kind"] == "capture_open" and first["redaction"]["enabled"] is True


def test_a_stream_open_at_shutdown_is_recorded_as_such(tmp_path: Path) -> None:
    parts = events(5)
    with Origin() as origin, run_proxy(origin.url, tmp_path / "cap") as proxy:
        origin.scripts["/mcp"] = Script(headers=SSE, writes=parts, paced=True)
        with httpx.Client(timeout=10) as client, client.stream("GET", proxy.url + "/mcp") as r:
            reader = Reader(r)
            reader.until(parts[0])
            origin.step()
            reader.until(b"".join(parts[:2]))
            proxy.stop()  # SIGTERM while the stream is open
    records = read_records(tmp_path / "cap")
    (end,) = of_kind(records, "stream_end")
    assert end["how"] == "open_at_shutdown"
    assert records[-1]["kind"] == "capture_close"
    recorded = b"".join(body(c) for c in of_kind(records, "chunk"))
    assert recorded == b"".join(parts[:2])


def test_sse_sent_as_several_gzip_members_records_every_event(tmp_path: Path) -> None:
    # RFC 1952 §2.2: each event its own gzip member is one valid gzip body; clients decode all.
    parts = events(4)
    writes = [gzip.compress(p) for p in parts]
    with Origin() as origin, run_proxy(origin.url, tmp_path / "cap") as proxy:
        origin.scripts["/mcp"] = Script(headers=[*SSE, ("Content-Encoding", "gzip")], writes=writes)
        with (
            httpx.Client(timeout=10) as client,
            client.stream("GET", proxy.url + "/mcp", headers={"Accept-Encoding": "gzip"}) as r,
        ):
            assert b"".join(r.iter_raw()) == b"".join(writes)
    records = read_records(tmp_path / "cap")
    assert b"".join(body(c) for c in of_kind(records, "chunk")) == b"".join(parts)
    (end,) = of_kind(records, "stream_end")
    assert (end["how"], end["error"]) == ("complete", None)


def test_a_secret_straddling_the_event_framing_cap_never_reaches_the_capture(
    tmp_path: Path,
) -> None:
    # A 2 MiB event whose password value straddles offset 1 MiB, the plain framing cap.
    pre = b'data: {"jsonrpc":"2.0","method":"x","params":{"s":"'
    key = b'","password":"'
    pad = (1 << 20) - len(pre) - len(key) - 8
    event = pre + b"c" * pad + key + b"CANARYHD" + b"CANARYTAIL" + b'","z":"'
    event += b"d" * (1 << 20) + b'"}}\n\n'
    writes = [event[i : i + 65536] for i in range(0, len(event), 65536)]
    with Origin() as origin, run_proxy(origin.url, tmp_path / "cap") as proxy:
        origin.scripts["/mcp"] = Script(headers=SSE, writes=writes)
        assert httpx.get(proxy.url + "/mcp", timeout=10).content == event
    blob = b"".join(p.read_bytes() for p in (tmp_path / "cap").iterdir())
    assert b"CANARY" not in blob
    recorded = b"".join(body(c) for c in of_kind(read_records(tmp_path / "cap"), "chunk"))
    (only,) = decode_all(recorded)  # redacted whole: one event, nothing withheld
    assert json.loads(only.data)["params"]["password"].startswith("[redacted:")


def self_signed(tmp_path: Path) -> ssl.SSLContext:
    """A server TLS context with a fresh self-signed certificate for 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    return context


@contextmanager
def tls_origin(context: ssl.SSLContext | None) -> Iterator[int]:
    """A server on 127.0.0.1 that only does TLS handshakes (or, without a context, answers
    like a plain HTTP server would to a ClientHello); yields its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn, contextlib.suppress(OSError):
                conn.settimeout(5)
                if context is None:
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                else:
                    context.wrap_socket(conn, server_side=True).close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


@pytest.mark.parametrize("upstream", ["self-signed certificate", "plain HTTP"])
def test_a_failed_tls_handshake_with_the_upstream_is_recorded(
    tmp_path: Path, upstream: str
) -> None:
    out = tmp_path / "cap"
    with contextlib.ExitStack() as stack:
        context = self_signed(tmp_path) if upstream == "self-signed certificate" else None
        port = stack.enter_context(tls_origin(context))
        proxy = stack.enter_context(run_proxy(f"https://127.0.0.1:{port}", out))
        with httpx.Client(timeout=10) as client:
            for _ in range(2):
                assert client.post(proxy.url + "/mcp", content=b"{}").status_code == 502
    records = read_records(out)
    unreachable = of_kind(records, "server_unreachable")
    assert len(unreachable) == 2
    for record in unreachable:
        RECORD_ADAPTER.validate_python(record)
        assert record["upstream"] == f"127.0.0.1:{port}"
        assert record["error"].startswith("TLS handshake failed: ")
    if upstream == "self-signed certificate":
        assert "certificate" in unreachable[0]["error"].lower()
    # The analysis tells, as it does for a refused connection.
    report = tmp_path / "report.json"
    assert analyze_main(["analyze", str(out), "--format", "json", "--out", str(report)]) == 0
    (finding,) = json.loads(report.read_text())["findings"]
    assert finding["detector"] == "capture-health"
    assert "2 connection(s) to the upstream failed" in finding["detail"]


JSON = [("Content-Type", "application/json")]


def test_a_json_body_cut_off_by_the_upstream_reaches_client_and_capture(tmp_path: Path) -> None:
    head = b'{"jsonrpc":"2.0","id":1,"result":{"password":"CANARY-PW","pad":"' + b"e" * 100
    with Origin() as origin, run_proxy(origin.url, tmp_path / "cap") as proxy:
        # Content-Length promises both writes; the origin dies after the first.
        origin.scripts["/mcp"] = Script(
            headers=JSON, writes=[head, b"x" * 4000], chunked=False, die_after=1
        )
        got = b""
        with (
            httpx.Client(timeout=10) as client,
            client.stream("POST", proxy.url + "/mcp", content=b"{}") as r,
            pytest.raises(httpx.RemoteProtocolError),
        ):
            assert r.status_code == 200  # as the upstream said, not a proxy's 502
            for piece in r.iter_raw():
                got += piece
        assert got == head  # what a direct client would have got
        records = wait_for(tmp_path / "cap", "stream_end")
    (response,) = of_kind(records, "response")
    RECORD_ADAPTER.validate_python(response)
    assert response["status"] == 200 and not response["streamed"]
    before, after = head.split(b"CANARY-PW")
    marker = rb"\[redacted:[0-9a-f]{8}\]"
    assert re.fullmatch(re.escape(before) + marker + re.escape(after), body(response))
    (end,) = of_kind(records, "stream_end")
    assert end["how"] == "server_closed" and f"received {len(head)} bytes" in end["error"]


@pytest.mark.parametrize("encoding", ["identity", "gzip"])
def test_a_json_body_streams_through_and_is_recorded_whole(tmp_path: Path, encoding: str) -> None:
    payload = b'{"jsonrpc":"2.0","id":1,"result":{"items":[' + b'"item",' * 2000 + b"0]}}"
    if encoding == "gzip":
        comp = zlib.compressobj(wbits=31)
        writes = [comp.compress(payload[:7000]) + comp.flush(zlib.Z_SYNC_FLUSH)]
        writes += [comp.compress(payload[7000:]) + comp.flush()]
        headers = [*JSON, ("Content-Encoding", "gzip")]
    else:
        writes, headers = [payload[:7000], payload[7000:]], JSON
    with Origin() as origin, run_proxy(origin.url, tmp_path / "cap") as proxy:
        origin.scripts["/mcp"] = Script(headers=headers, writes=writes, paced=True)
        with (
            httpx.Client(timeout=10) as client,
            client.stream(
                "POST", proxy.url + "/mcp", content=b"{}", headers={"Accept-Encoding": "gzip"}
            ) as r,
        ):
            reader = Reader(r)
            reader.until(writes[0])  # before the second write exists: not buffered
            origin.step()
            reader.until(b"".join(writes))
            # To the response's end (its last chunk comes in a write of its own): closing
            # before it could reach the proxy ahead of the origin's end ("client_closed").
            assert b"".join(reader.it) == b""
        records = wait_for(tmp_path / "cap", "stream_end")
    (response,) = of_kind(records, "response")
    assert not response["streamed"] and "truncated_bytes" not in response["body"]
    assert body(response) == payload  # content-decoded, as a buffered body was
    assert not of_kind(records, "chunk")
    (end,) = of_kind(records, "stream_end")
    assert (end["how"], end["error"]) == ("complete", None)


def test_a_body_past_the_record_cap_keeps_its_head_and_counts_the_rest(tmp_path: Path) -> None:
    payload = b'{"jsonrpc":"2.0","id":1,"result":{"text":"' + b"x" * (9 << 20) + b'"}}'
    with Origin() as origin, run_proxy(origin.url, tmp_path / "cap") as proxy:
        origin.scripts["/mcp"] = Script(headers=JSON, writes=[payload])
        with httpx.Client(timeout=30) as client:
            got = client.post(proxy.url + "/mcp", content=b"{}").content
        records = wait_for(tmp_path / "cap", "stream_end")
    assert got == payload  # the client gets it all
    (response,) = of_kind(records, "response")
    assert body(response) == payload[: 8 << 20]
    assert response["body"]["truncated_bytes"] == len(payload) - (8 << 20)
