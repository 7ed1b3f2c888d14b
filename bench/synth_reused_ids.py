"""Write a synthetic capture (schema 1) of K short-lived client runs that reuse request ids.

    .venv/bin/python bench/synth_reused_ids.py OUT_DIR --runs 4000 [--era 2025-11-25 --resume]

Each run is a fresh client from one address that counts its ids from 1: `server/discover` (1),
`tools/list` (2), then `tools/call` (3) streaming `--progress` notifications and its result. All
runs fall under one session key, so every id recurs K times in it: under `client:` keys in
2026-07-28 traffic (`--era 2026-07-28`, the default), under one `anon:` key for a 2025 server
without sessions whose clients' `initialize` is not in the capture (`--era 2025-11-25`). Correct
traffic, no finding expected; a stress for every judgement that matches an answer to its request
or a resume to its stream by request id (such joins once cost the square of K).

`--resume`: each call's stream breaks after its progress and a GET with Last-Event-ID resumes it
and delivers the result (2025 only: 2026-07-28 has no resumption). `--unanswered`: the first
run's resume never delivers its result: lost-response and causal-gap must flag that one (the
later runs' answers to their own id 3 do not answer it).
"""

from __future__ import annotations

import argparse
import json
import random
import uuid
from pathlib import Path
from typing import Any

from synth_capture import _Writer  # the same record writer (seq, times, rotation, open, close)

_TOOLS = {"tools": [{"name": "report", "inputSchema": {"type": "object"},
                     "annotations": {"readOnlyHint": True}}]}  # fmt: skip


def _text(msg: dict[str, Any]) -> str:
    return json.dumps(msg, separators=(",", ":"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--progress", type=int, default=5, help="notifications a call streams")
    parser.add_argument("--era", default="2026-07-28")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--unanswered", action="store_true")
    parser.add_argument("--rotate", type=int, default=200_000, help="records per file")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.resume and args.era >= "2026-":
        parser.error("--resume needs a 2025 era: 2026-07-28 has no resumption")
    args.out.mkdir(parents=True, exist_ok=True)
    random.seed(args.seed)
    w = _Writer(args.out, args.rotate, uuid.UUID(int=random.getrandbits(128)).hex)
    meta = {"io.modelcontextprotocol/protocolVersion": args.era,
            "io.modelcontextprotocol/clientInfo": {"name": "cli", "version": "1"}}  # fmt: skip

    def exchange(method: str, rpc: dict[str, Any] | None, headers: list[list[str]]) -> str:
        flow = str(uuid.UUID(int=random.getrandbits(128), version=4))
        w.record("request", flow=flow, method=method, scheme="http", authority="127.0.0.1",
                 path="/mcp", http_version="HTTP/1.1", client="10.0.0.5:40000",
                 upstream="127.0.0.1:9000", body={"text": _text(rpc)} if rpc else None,
                 headers=[["host", "127.0.0.1:9000"], ["mcp-protocol-version", args.era],
                          ["accept", "application/json, text/event-stream"], *headers])  # fmt: skip
        return flow

    def respond(flow: str, body: str | None) -> None:
        kind = "application/json" if body else "text/event-stream"
        w.record("response", flow=flow, status=200, http_version="HTTP/1.1",
                 headers=[["content-type", kind]], replica="127.0.0.1:9000",
                 replica_source="upstream", streamed=body is None,
                 body={"text": body} if body else None)  # fmt: skip

    def event(flow: str, n: int, msg: dict[str, Any], event_id: str | None) -> None:
        head = f"id: {event_id}\n" if event_id is not None else ""
        text = f"{head}event: message\ndata: {_text(msg)}\n\n"
        w.record("chunk", flow=flow, n=n, content_encoding=None, data={"text": text})

    for run in range(args.runs):
        for rid, method, result in ((1, "server/discover", {"supportedVersions": [args.era]}),
                                    (2, "tools/list", _TOOLS)):  # fmt: skip
            f = exchange("POST", {"jsonrpc": "2.0", "id": rid, "method": method,
                                  "params": {"_meta": meta}}, [])  # fmt: skip
            respond(f, _text({"jsonrpc": "2.0", "id": rid, "result": result}))
            w.record("stream_end", flow=f, how="complete", error=None)
        params = {
            "name": "report",
            "arguments": {"run": run},
            "_meta": {**meta, "progressToken": 3},
        }
        f = exchange("POST", {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params},
                     [])  # fmt: skip
        respond(f, None)
        answer = {
            "jsonrpc": "2.0",
            "id": 3,
            "result": {"content": [{"type": "text", "text": "ok"}]},
        }
        steps = range(args.progress + 1)
        ids = [f"{f}-{i}" if args.resume else None for i in steps]
        for i in range(args.progress):
            progress = {"progressToken": 3, "progress": i + 1, "total": args.progress}
            note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": progress}
            event(f, i, note, ids[i])
        if args.resume:
            w.record("stream_end", flow=f, how="client_closed", error=None)
            g = exchange("GET", None, [["last-event-id", str(ids[args.progress - 1])]])
            respond(g, None)
            if not (args.unanswered and run == 0):
                event(g, 0, answer, ids[args.progress])
            f = g
        else:
            event(f, args.progress, answer, None)
        w.record("stream_end", flow=f, how="complete", error=None)
    w.close()


if __name__ == "__main__":
    main()
