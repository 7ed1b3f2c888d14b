"""Write a synthetic seamwatch capture (schema 1) of about N SSE events, for benchmarks.

    .venv/bin/python bench/synth_capture.py OUT_DIR --events 1000000 [--rotate 200000]

Realistic cardinalities, not realistic faults: many sessions (one per ~400 events), each with an
initialize, tools/list, a standalone GET stream of notifications, and tools/call POST streams
of progress notifications ending in their result; one call stream in eight breaks and is
resumed by a GET carrying Last-Event-ID that correctly replays what the client missed (same id,
same payload) and goes on. Payloads differ event to event
(progress counters, timestamps), as they do on the wire. Files rotate every `--rotate` records.

`--get-resumes K`: each session's standalone GET stream also breaks K times, evenly spread, and
is resumed each time from the last event the client saw, as an idle timeout in front of
long-lived streams does; the server replays nothing and goes on (a stress for the judgements
that place every resume in its stream's history). `--counter-ids`: event ids are the session's
event counter ("1", "2", ...), unique in their session as the spec asks, so every session issues
the same ids (a stress for the judgements that look for a cursor in other sessions).
"""

from __future__ import annotations

import argparse
import json
import random
import uuid
from pathlib import Path
from typing import Any


class _Writer:
    def __init__(self, out: Path, rotate: int, run_id: str) -> None:
        self.out = out
        self.rotate = rotate
        self.run_id = run_id
        self.seq = 0
        self.ts = 1_750_000_000_000_000_000
        self.file_index = -1
        self.in_file = 0
        self.fh: Any = None
        self.events = 0
        self._open()

    def _open(self) -> None:
        if self.fh is not None:
            self.fh.close()
        self.file_index += 1
        self.in_file = 0
        path = self.out / f"capture-{self.run_id[:8]}-{self.file_index:04d}.jsonl"
        self.fh = path.open("w", encoding="utf-8")
        self.record(
            "capture_open",
            schema="1.0",
            run_id=self.run_id,
            file_index=self.file_index,
            tool_version="bench",
            mitmproxy_version="12.3.1",
            redaction={"enabled": True, "key_id": "k1", "headers": [], "json_keys": []},
            listen="127.0.0.1:8080",
            upstream="127.0.0.1:9000",
        )

    def record(self, kind: str, **fields: Any) -> None:
        if self.in_file >= self.rotate and kind != "capture_close":
            self._open()
        self.ts += random.randint(50_000, 2_000_000)
        rec = {"kind": kind, "ts_ns": self.ts, "mono_ns": self.ts - 1_000_000_000, **fields}
        rec["seq"] = self.seq
        self.seq += 1
        self.in_file += 1
        self.fh.write(json.dumps(rec, separators=(",", ":"), ensure_ascii=False))
        self.fh.write("\n")

    def close(self) -> None:
        self.record("capture_close", seen=self.seq, written=self.seq + 1, dropped=0)
        self.fh.close()


def _headers(**extra: str) -> list[list[str]]:
    base = [["host", "mcp.test:9000"], ["user-agent", "bench-client/1.0"], ["accept", "*/*"]]
    return base + [[k, v] for k, v in extra.items()]


def _body(msg: dict[str, Any]) -> dict[str, str]:
    return {"text": json.dumps(msg, separators=(",", ":"))}


def _session(
    w: _Writer, client: str, count: int, get_resumes: int = 0, counter_ids: bool = False
) -> None:
    budget = w.events + count
    sid = uuid.UUID(int=random.getrandbits(128)).hex
    counter = 0

    def flow() -> str:
        return str(uuid.UUID(int=random.getrandbits(128), version=4))

    def request(f: str, method: str, msg: dict[str, Any] | None, **h: str) -> None:
        w.record(
            "request",
            flow=f,
            method=method,
            scheme="http",
            authority="mcp.test:9000",
            path="/mcp",
            http_version="HTTP/1.1",
            headers=_headers(**h),
            client=client,
            upstream="127.0.0.1:9000",
            body=_body(msg) if msg else None,
        )

    def response(f: str, status: int, msg: dict[str, Any] | None = None, **h: str) -> None:
        streamed = h.get("content-type") == "text/event-stream"
        w.record(
            "response",
            flow=f,
            status=status,
            http_version="HTTP/1.1",
            headers=[[k, v] for k, v in h.items()],
            replica="127.0.0.1:9000",
            replica_source="upstream",
            streamed=streamed,
            body=_body(msg) if msg else None,
        )

    sent: dict[str, str] = {}  # event id -> its block, for replays

    def event(f: str, n: int, data: dict[str, Any] | None, *, replay: str | None = None) -> str:
        nonlocal counter
        if replay is not None:
            eid, text = replay, sent[replay]  # a correct replay: same id, same payload
        else:
            counter += 1
            eid = str(counter) if counter_ids else f"{f[:8]}_{counter}"
            text = f"id: {eid}\n" + (
                f"data: {json.dumps(data, separators=(',', ':'))}\n\n" if data else "data: \n\n"
            )
            sent[eid] = text
        w.record("chunk", flow=f, n=n, content_encoding=None, data={"text": text})
        w.events += 1
        return eid

    def end(f: str, how: str) -> None:
        w.record("stream_end", flow=f, how=how, error=None)

    hs = {"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
    f = flow()
    request(
        f,
        "POST",
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench-client", "version": "1.0"},
            },
        },
    )
    response(
        f,
        200,
        {
            "jsonrpc": "2.0",
            "id": 0,
            "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bench", "version": "1"},
            },
        },
        **{"content-type": "application/json", "mcp-session-id": sid},
    )
    f = flow()
    request(f, "POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}, **hs)
    response(f, 202)
    f = flow()
    request(f, "POST", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, **hs)
    tools = [
        {
            "name": f"tool{i}",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": i % 2 == 0},
        }
        for i in range(6)
    ]
    response(
        f,
        200,
        {"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}},
        **{"content-type": "application/json"},
    )
    # Standalone GET stream, kept open while calls run (its events interleave in reality; here
    # they come in a burst, which costs the reader the same).
    g = flow()
    request(g, "GET", None, **hs)
    response(g, 200, **{"content-type": "text/event-stream"})
    ticks = max(1, count // 10)
    breaks_at = {ticks * (i + 1) // (get_resumes + 1) for i in range(get_resumes)}
    n = 0
    last = ""
    for tick in range(ticks):
        if tick in breaks_at and last:
            end(g, "client_closed")
            g = flow()
            request(g, "GET", None, **{**hs, "last-event-id": last})
            response(g, 200, **{"content-type": "text/event-stream"})
            n = 0
        last = event(
            g,
            n,
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {
                    "level": "info",
                    "logger": "bench",
                    "data": f"tick {random.random():.6f}",
                },
            },
        )
        n += 1
    rid = 2
    while w.events < budget:
        c = flow()
        name = f"tool{random.randrange(6)}"
        request(
            c,
            "POST",
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "tools/call",
                "params": {
                    "name": name,
                    "arguments": {"path": f"/data/{random.randrange(1000)}", "n": rid},
                    "_meta": {"progressToken": rid},
                },
            },
            **hs,
        )
        response(c, 200, **{"content-type": "text/event-stream"})
        steps = random.randint(5, 40)
        breaks = random.random() < 0.125
        cut = random.randint(1, steps - 1) if breaks else steps
        ids = [event(c, 0, None)]
        for k in range(cut):
            ids.append(
                event(
                    c,
                    k + 1,
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {
                            "progressToken": rid,
                            "progress": k,
                            "total": steps,
                            "message": f"step {k} of {steps} at {w.ts}",
                        },
                    },
                )
            )
        result = {
            "jsonrpc": "2.0",
            "id": rid,
            "result": {
                "content": [{"type": "text", "text": f"done {name} {random.random():.8f}"}],
                "isError": False,
            },
        }
        if not breaks:
            event(c, cut + 1, result)
            end(c, "complete")
        else:
            end(c, "client_closed")
            r = flow()
            request(r, "GET", None, **{**hs, "last-event-id": ids[-2]})
            response(r, 200, **{"content-type": "text/event-stream"})
            # The client saw up to ids[-2]: the server replays the last event, then goes on.
            event(r, 0, None, replay=ids[-1])
            k = 1
            for j in range(cut, steps):
                event(
                    r,
                    k,
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {
                            "progressToken": rid,
                            "progress": j,
                            "total": steps,
                            "message": f"step {j} of {steps} at {w.ts}",
                        },
                    },
                )
                k += 1
            event(r, k, result)
            end(r, "complete")
        rid += 1
    end(g, "client_closed")
    d = flow()
    request(d, "DELETE", None, **hs)
    response(d, 200)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rotate", type=int, default=200_000, help="records per file")
    parser.add_argument("--per-session", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--get-resumes", type=int, default=0, help="resumes of each standalone GET stream"
    )
    parser.add_argument("--counter-ids", action="store_true", help="ids: the session's counter")
    args = parser.parse_args()
    random.seed(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    w = _Writer(args.out, args.rotate, uuid.UUID(int=random.getrandbits(128)).hex)
    clients = [f"10.1.{i // 250}.{i % 250 + 1}:{40000 + i}" for i in range(64)]
    while w.events < args.events:
        count = min(args.per_session, args.events - w.events)
        _session(w, random.choice(clients), count, args.get_resumes, args.counter_ids)
    w.close()
    size = sum(p.stat().st_size for p in args.out.glob("*.jsonl"))
    print(f"{w.events} events, {w.seq} records, {size / 1e6:.1f} MB in {args.out}")


if __name__ == "__main__":
    main()
