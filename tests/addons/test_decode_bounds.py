"""Decompression bombs: the capture decodes at most the record's cap of any body.

A few hundred KB of gzip inflate to hundreds of MB. The proxy forwards such a body untouched;
its record keeps the head (the cap) and counts the rest as not kept, and decoding it costs the
proxy about the cap in memory, never the inflated size.
"""

from __future__ import annotations

import base64
import functools
import json
import sys
import textwrap
import zlib
from pathlib import Path
from typing import Any

import brotli
import httpx
import pytest

from analyzer.capture.framing import _BODY_STEP, decode_body
from analyzer.capture.recorder import DEFAULT_BODY_CAP
from analyzer.cli import main as analyze_main
from analyzer.record_models import RECORD_ADAPTER
from tests.support.memory import traced_peak
from tests.support.origin import Origin, Script
from tests.support.proxy import read_records, run_mitmdump, run_proxy

if sys.version_info >= (3, 14):  # pragma: no cover
    from compression import zstd
else:
    from backports import zstd

CAP = DEFAULT_BODY_CAP
MIB = 1 << 20


@functools.cache
def bomb(content_encoding: str, size: int, head: bytes = b"", tail: bytes = b"") -> bytes:
    """`head`, `size` bytes of b"a", `tail`, compressed a MiB at a time (never whole)."""
    block = b"a" * MIB
    compress: Any
    if content_encoding in ("gzip", "deflate"):
        comp = zlib.compressobj(9, zlib.DEFLATED, 31 if content_encoding == "gzip" else 15)
        compress, finish = comp.compress, comp.flush
    elif content_encoding == "br":
        comp_br = brotli.Compressor(quality=5)
        compress, finish = comp_br.process, comp_br.finish
    else:
        comp_zs = zstd.ZstdCompressor(level=3)
        compress, finish = comp_zs.compress, comp_zs.flush
    parts = [compress(head)]
    parts += [compress(block) for _ in range(size // MIB)]
    parts += [compress(tail), finish()]
    return b"".join(parts)


@pytest.mark.parametrize("content_encoding", ["gzip", "deflate", "br", "zstd"])
def test_a_bomb_decodes_to_the_cap_and_counts_what_was_not_decoded(
    content_encoding: str,
) -> None:
    raw = bomb(content_encoding, 200 * MIB)
    assert len(raw) < 256 << 10  # ~1000:1 or better
    result, peak = traced_peak(lambda: decode_body(raw, content_encoding, cap=CAP))
    # The head is decoded once and copied at most twice more (joined, cut): a few caps.
    assert peak < 4 * CAP, f"decoding took {peak >> 20} MiB at its peak"
    body, not_kept, error = result
    assert error is None  # cut at the cap, not undecodable
    assert body == b"a" * CAP
    # The decoded byte past the cap, plus the encoded bytes never handed to the decoder
    # (it is handed whole steps of them).
    fed = len(raw) - (not_kept - 1)
    assert 0 < fed <= len(raw) and (fed % _BODY_STEP == 0 or fed == len(raw))
    if len(raw) > 2 * _BODY_STEP:  # gzip, deflate: ~1000:1, the cap took a small part
        assert not_kept > len(raw) // 2


@pytest.mark.parametrize("content_encoding", ["gzip", "br", "zstd"])
def test_a_body_one_byte_past_the_cap_counts_that_byte(content_encoding: str) -> None:
    over = bomb(content_encoding, 8 * MIB, tail=b"z")
    assert decode_body(over, content_encoding, cap=CAP) == (b"a" * CAP, 1, None)
    whole = bomb(content_encoding, 8 * MIB)
    assert decode_body(whole, content_encoding, cap=CAP) == (b"a" * CAP, 0, None)


@pytest.mark.parametrize(
    ("content_encoding", "raw", "error"),
    [
        ("compress", b"\x1f\x9d plain?", "unsupported content-encoding: compress"),
        ("gzip", b'{"jsonrpc":"2.0"}', "content decoding failed: Error -3 while decompressing"),
        ("br", brotli.compress(b'{"id":1}')[:-2], "content decoding failed: the br stream ended"),
    ],
    ids=["unknown coding", "says gzip, is not", "br cut short"],
)
def test_a_body_that_cannot_be_decoded_is_kept_encoded_and_says_why(
    content_encoding: str, raw: bytes, error: str
) -> None:
    body, dropped, said = decode_body(raw, content_encoding, cap=CAP)
    assert (body, dropped) == (raw, 0)
    assert said is not None and said.startswith(error)


@pytest.mark.parametrize("content_encoding", [None, "identity", "gzip", "br", "zstd"])
def test_an_empty_or_plain_body_has_no_decode_error(content_encoding: str | None) -> None:
    assert decode_body(b"", content_encoding, cap=CAP) == (b"", 0, None)


# -- through the real proxy -----------------------------------------------------------------

BUFFERING_ADDON = textwrap.dedent(
    """
    # Loaded after the capture addon: mitmproxy buffers every response body after all.
    def responseheaders(flow):
        if flow.response is not None:
            flow.response.stream = False
    """
)


def peak_rss(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) << 10
    raise AssertionError(f"no VmHWM for process {pid}")


def body_of(record: dict[str, Any], key: str = "body") -> bytes:
    data = record[key]
    return data["text"].encode() if "text" in data else base64.b64decode(data["b64"])


@pytest.mark.proxy
@pytest.mark.timeout(120)
@pytest.mark.parametrize("response_body", ["streamed through", "buffered by another addon"])
def test_bombs_both_ways_pass_untouched_and_are_recorded_within_the_cap(
    tmp_path: Path, response_body: str
) -> None:
    inflated = 256 * MIB
    req_head = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"pad":"'
    resp_head = b'{"jsonrpc":"2.0","id":1,"result":{"pad":"'
    req_bomb = bomb("gzip", inflated, req_head, b'"}}')
    resp_bomb = bomb("gzip", inflated, resp_head, b'"}}')
    out = tmp_path / "cap"
    scripts = []
    if response_body == "buffered by another addon":
        (tmp_path / "buffering.py").write_text(BUFFERING_ADDON)
        scripts.append(tmp_path / "buffering.py")
    with Origin() as origin:
        json_gz = [("Content-Type", "application/json"), ("Content-Encoding", "gzip")]
        origin.scripts["/mcp"] = Script(headers=json_gz, writes=[resp_bomb], chunked=False)
        origin.scripts["/small"] = Script(
            headers=[("Content-Type", "application/json")], writes=[b"{}"], chunked=False
        )
        with run_mitmdump(origin.url, out, *scripts) as proxy, httpx.Client(timeout=60) as client:
            # Warm up (imports, the first flow) before measuring the proxy's memory.
            assert client.get(proxy.url + "/small").content == b"{}"
            before = peak_rss(proxy.proc.pid)
            with client.stream(
                "POST",
                proxy.url + "/mcp",
                content=req_bomb,
                headers={"Content-Encoding": "gzip", "Accept-Encoding": "gzip"},
            ) as r:
                assert r.status_code == 200
                got = b"".join(r.iter_raw())  # as on the wire: still gzip
            # The proxy is still up and answers the next request.
            assert client.get(proxy.url + "/small").content == b"{}"
            grown = peak_rss(proxy.proc.pid) - before
        sent = [body for method, path, _headers, body in origin.requests if path == "/mcp"]
    assert got == resp_bomb  # the client got the upstream's bytes, unchanged
    assert sent == [req_bomb]  # the upstream got the client's bytes, unchanged
    # Each bomb inflates to 256 MiB; the proxy held a few caps of it at most.
    assert grown < 96 * MIB, f"the proxy's peak memory grew by {grown >> 20} MiB"
    records = read_records(out)
    for r in records:
        RECORD_ADAPTER.validate_python(r)
    (request,) = [r for r in records if r["kind"] == "request" and r["path"] == "/mcp"]
    (response,) = [r for r in records if r["kind"] == "response" and r["flow"] == request["flow"]]
    for record, head, raw in ((request, req_head, req_bomb), (response, resp_head, resp_bomb)):
        kept = body_of(record)
        assert kept == (head + b"a" * CAP)[:CAP]
        # Not kept: at least the encoded bytes that were never decoded (DEFAULT_BODY_CAP
        # decodes from a small part of the ~250 KB of gzip).
        assert record["body"]["truncated_bytes"] > len(raw) // 2
    assert [r["how"] for r in records if r["kind"] == "stream_end"] == ["complete"] * 3


# -- several codings through the real proxy -------------------------------------------------


def gzip_then_br(events: list[bytes]) -> list[bytes]:
    """Each event as a write of `Content-Encoding: gzip, br` (gzip applied first), flushed."""
    gz = zlib.compressobj(9, zlib.DEFLATED, 31)
    br = brotli.Compressor()
    writes = []
    for i, event in enumerate(events):
        last = i == len(events) - 1
        inner = gz.compress(event) + gz.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)
        writes.append(br.process(inner) + (br.finish() if last else br.flush()))
    return writes


@pytest.mark.proxy
@pytest.mark.timeout(60)
def test_an_sse_stream_sent_as_gzip_then_br_is_recorded_decoded(tmp_path: Path) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    result = {
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "s", "version": "1"},
    }
    events = [
        b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message",'
        b'"params":{"level":"info","data":"starting"}}\n\n',
        b"event: message\ndata: "
        + json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode()
        + b"\n\n",
    ]
    writes = gzip_then_br(events)
    out = tmp_path / "cap"
    with Origin() as origin, run_proxy(origin.url, out) as proxy:
        origin.scripts["/mcp"] = Script(
            headers=[
                ("Content-Type", "text/event-stream"),
                ("Content-Encoding", "gzip, br"),
                ("Mcp-Session-Id", "s-1"),
            ],
            writes=writes,
        )
        with (
            httpx.Client(timeout=10) as client,
            client.stream(
                "POST",
                proxy.url + "/mcp",
                json=init,
                headers={"Accept": "application/json, text/event-stream"},
            ) as r,
        ):
            assert r.headers["content-encoding"] == "gzip, br"
            got = b"".join(r.iter_raw())
    assert got == b"".join(writes)  # the client got the upstream's bytes, unchanged
    records = read_records(out)
    for record in records:
        RECORD_ADAPTER.validate_python(record)
    chunks = [r for r in records if r["kind"] == "chunk"]
    assert b"".join(body_of(c, "data") for c in chunks) == b"".join(events)
    assert all(c["content_encoding"] == "gzip, br" for c in chunks)
    (end,) = [r for r in records if r["kind"] == "stream_end"]
    assert end["how"] == "complete" and not end.get("error")
    report = tmp_path / "report.json"
    assert analyze_main(["analyze", str(out), "--format", "json", "--out", str(report)]) == 0
    assert json.loads(report.read_text())["findings"] == []


@pytest.mark.proxy
@pytest.mark.timeout(60)
def test_a_json_answer_the_proxy_cannot_decode_is_a_capture_gap_not_a_lost_response(
    tmp_path: Path,
) -> None:
    """An upstream answering in a coding the proxy does not know: the body is recorded as it
    came, saying why; the analysis says the capture has a gap (capture-health), not that the
    server lost the response (which the client, knowing the coding, did get)."""
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    encoded = b"\x1f\x9d\x90" + json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}).encode()
    out = tmp_path / "cap"
    with Origin() as origin, run_proxy(origin.url, out) as proxy:
        origin.scripts["/mcp"] = Script(
            headers=[("Content-Type", "application/json"), ("Content-Encoding", "compress")],
            writes=[encoded],
        )
        with httpx.Client(timeout=10) as client:
            r = client.post(proxy.url + "/mcp", json=ping)
            assert r.content == encoded  # httpx leaves an unknown coding as it is
    records = read_records(out)
    for record in records:
        RECORD_ADAPTER.validate_python(record)
    (response,) = [r for r in records if r["kind"] == "response"]
    assert body_of(response) == encoded
    assert response["body"]["decode_error"] == "unsupported content-encoding: compress"
    report = tmp_path / "report.json"
    code = analyze_main(["analyze", str(out), "--format", "json", "--out", str(report)])
    found = {(f["detector"], f["severity"]) for f in json.loads(report.read_text())["findings"]}
    assert found == {("capture-health", "low"), ("lost-response", "info")}
    assert code == 0  # nothing at medium or above
