"""A capture run rotated over three files, its flows crossing the file edges: what a reader
that splits a capture folder by file (the Spark engine's ingest) must read as one capture."""

from __future__ import annotations

from pathlib import Path

from tests.support.records import Capture, event, req, res, sse

SESSION = {"mcp-session-id": "S1"}


def write_rotated(folder: Path) -> Path:
    """Three files of run `run-rot`. Crossing the edges: a GET stream (an event cut in two by
    the first edge, its id 1 delivered again with another payload after it, a torn chunk line
    ending the last file) and a tools/call whose response and end are each in the next file.
    Also: flows within one file, a byte order mark, a record lost in the middle file (a `seq`
    gap) and no `capture_close`."""
    c = Capture(run_id="run-rot").open(file_index=0)
    init = c.request(body=req("initialize", 1, protocolVersion="2025-06-18"))
    c.response(init, body=res(1, protocolVersion="2025-06-18"), headers=SESSION)
    c.end(init)
    get = c.request("GET", headers=SESSION)
    c.response(get, sse=True, headers=SESSION)
    c.chunk(get, sse(event({"jsonrpc": "2.0", "method": "a"}, id="1")), n=0)
    c.chunk(get, 'id: 2\ndata: {"jsonrpc":"2.0",', n=1)  # the event ends in the next file
    call = c.request(body=req("tools/call", 2, name="t", arguments={}), headers=SESSION)
    files = [c.lines()]
    c.records.clear()

    c.open(file_index=1)
    c.chunk(get, '"method":"b"}\n\n' + sse(event({"jsonrpc": "2.0", "method": "c"}, id="1")), n=2)
    c.response(call, sse=True, headers=SESSION)
    c.chunk(call, sse(event(res(2, content=[]), id="9")), n=0)
    ping = c.request(body=req("ping", 3), headers=SESSION)
    c.response(ping, body=res(3), headers=SESSION)
    c.end(ping)
    lines = c.lines()
    del lines[-2]  # the ping's response: lost on disk
    lines[0] = b"\xef\xbb\xbf" + lines[0]
    files.append(lines)
    c.records.clear()

    c.open(file_index=2)
    c.end(call)
    other = c.request(body=req("ping", 4), headers={"mcp-session-id": "S2"})
    c.response(other, body=res(4), headers={"mcp-session-id": "S2"})
    c.end(other)
    c.chunk(get, sse(event({"jsonrpc": "2.0", "method": "d"}, id="3")), n=3)
    lines = c.lines()
    lines[-1] = lines[-1][: len(lines[-1]) // 2]  # torn: the writer stopped mid-line
    files.append(lines)

    folder.mkdir(parents=True)
    for index, written in enumerate(files):
        last = b"" if index == len(files) - 1 else b"\n"
        data = b"\n".join(written) + last
        (folder / f"capture-run-rot-{index:04d}.jsonl").write_bytes(data)
    return folder
