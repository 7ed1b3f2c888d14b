"""A capture whose wire text tries to run script and fetch URLs in the dashboard's browser.

Every string an attacker controls on the wire carries a payload: the session id (a markdown
image and bold), the tool name and arguments (an `<img onerror>`), SSE data (the same, a
`<script>`, a markdown image), so a page that renders any of them as HTML or markdown sets
`window.pwned` or adds an `<img>` pointing at `MARKDOWN_IMAGE_URL`. The traffic is a broken
`tools/call` resumed on another replica (same event id, another payload) and then re-issued,
so the findings' titles and details quote the tool name too.

`spoofing_capture` plants the other kind of hostile text: terminal escapes and bidi overrides,
which must reach the screen as U+FFFD (or as JSON escapes in a JSON payload).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from tests.support.records import Capture, event, req, res, sse

HTML: Final = '<img src=x onerror="window.pwned=1">'
SCRIPT: Final = "<script>window.pwned=1</script>"
MARKDOWN_IMAGE_URL: Final = "http://127.0.0.1:9/planted.png"
MARKDOWN: Final = f"![planted]({MARKDOWN_IMAGE_URL}) **bold**"
SESSION: Final = f"plant-![s]({MARKDOWN_IMAGE_URL})-**b**"
TOOL: Final = HTML
VERSION: Final = "2025-11-25"
SPOOF_ID: Final = "e1\u202etxt.exe\x1b[2J"
#: Characters a terminal or browser acts on: none of them may reach the screen.
ACTING: Final = ("\x1b", "\x07", "\x9b", "\u202e", "\u2066")


def planted_capture(directory: Path) -> Path:
    """Write the planted capture into `directory` (created); return the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    c = Capture("planted-run").open()
    base = {"MCP-Protocol-Version": VERSION}
    own = {**base, "Mcp-Session-Id": SESSION}
    init = c.request(
        body=req(
            "initialize",
            1,
            protocolVersion=VERSION,
            capabilities={},
            clientInfo={"name": HTML, "version": MARKDOWN},
        ),
        headers=base,
    )
    c.response(
        init,
        body=res(1, protocolVersion=VERSION, capabilities={}, serverInfo={"name": SCRIPT}),
        headers={"Mcp-Session-Id": SESSION},
        replica="replica-a",
    )
    listed = c.request(body=req("tools/list", 2), headers=own)
    c.response(
        listed,
        body=res(2, tools=[{"name": TOOL, "description": MARKDOWN, "inputSchema": {}}]),
        replica="replica-a",
    )
    arguments = {"note": HTML, "more": MARKDOWN}
    first = c.request(body=req("tools/call", 3, name=TOOL, arguments=arguments), headers=own)
    c.response(first, sse=True, replica="replica-a")
    c.chunk(
        first,
        sse(
            event(id="p1", data=""),
            event(req("notifications/message", level="info", data=HTML), id="p2"),
            event(req("notifications/message", level="info", data=MARKDOWN), id="p3"),
        ),
        n=0,
    )
    c.end(first, "client_closed")
    resume = c.request("GET", headers={**own, "Last-Event-ID": "p2"})
    c.response(resume, sse=True, replica="replica-b")
    c.chunk(
        resume,
        sse(event(req("notifications/message", level="info", data=SCRIPT), id="p3")),
        n=0,
    )
    c.end(resume, "client_closed")
    again = c.request(body=req("tools/call", 4, name=TOOL, arguments=arguments), headers=own)
    c.response(again, sse=True, replica="replica-a")
    result = res(4, content=[{"type": "text", "text": f"{HTML} {SCRIPT} {MARKDOWN}"}])
    c.chunk(again, sse(event(id="p4", data=""), event(result, id="p5")), n=0)
    c.end(again)
    c.close()
    c.write(directory / "capture-planted-0000.jsonl")
    return directory


def spoofing_capture(directory: Path) -> Path:
    """A broken tools/call stream resumed on another replica that reissues event id `SPOOF_ID`
    with another payload, where the session id, the event id and both payloads carry terminal
    escapes and bidi overrides (`e1<RLO>txt.exe` reads as "e1exe.txt")."""
    session = {"Mcp-Session-Id": "s\u202etxt.exe", "MCP-Protocol-Version": "2025-11-25"}
    c = Capture("spoof-run").open()
    call = c.request(body=req("tools/call", 1, name="t\x1b[2J", arguments={}), headers=session)
    c.response(call, sse=True, replica="replica-a")
    log = req("notifications/message", level="info", data="ok \u202egnp.exe \x1b]0;pwned\x07")
    c.chunk(call, sse(event(log, id=SPOOF_ID)), n=0)
    c.end(call, "client_closed")
    resume = c.request("GET", headers={**session, "Last-Event-ID": "e0"})
    c.response(resume, sse=True, replica="replica-b")
    c.chunk(resume, sse(event("plain \u2066text\x9b31m", id=SPOOF_ID)), n=0)
    c.end(resume, "client_closed")
    c.close()
    directory.mkdir(parents=True, exist_ok=True)
    c.write(directory / "capture-spoof-0000.jsonl")
    return directory
