"""`seamwatch analyze` of damaged captures: whatever the damage, a report (exit 0 or 1) or a
one-line error (exit 2), in every format; never an internal error (exit 3).

The captures are a sessioned tools/call whose stream breaks and is resumed, then damaged the
ways a capture is: lines lost, repeated, swapped or cut, a flow's records lost but its chunks
(retention deleted the file holding its start), a record's field given any JSON value,
the JSON inside a chunk's SSE text or a body changed, a capture rotated into two files. The
readers have fuzz tests of their own (tests/ingest); this runs every stage after them.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer import cli
from tests.support.examples import examples
from tests.support.records import Capture, event, req, res, sse

_V = "2025-11-25"
_FORMATS = ("table", "json", "junit", "sarif", "otlp-json")
_ODD: Any = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.sampled_from(["", "f1", "f2", "e1", "x" * 300, "\ud800", "chunk", "request"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _capture() -> Capture:
    c = Capture().open()
    init = c.request(body=req("initialize", 1, protocolVersion=_V, capabilities={}))
    c.response(
        init, body=res(1, protocolVersion=_V, capabilities={}), headers={"mcp-session-id": "s1"}
    )
    h = {"mcp-session-id": "s1", "mcp-protocol-version": _V}
    call = c.request(body=req("tools/call", 2, name="pay", arguments={"amount": 5}), headers=h)
    c.response(call, sse=True, headers=h)
    c.chunk(call, "id: p1\nretry: 500\ndata: \n\n", n=0)
    progress = req("notifications/progress", progressToken=1, progress=1)
    c.chunk(call, sse(event(progress, id="e1")), n=1)
    c.end(call, "client_closed")
    get = c.request("GET", headers={**h, "last-event-id": "e1", "accept": "text/event-stream"})
    c.response(get, sse=True, headers=h)
    c.chunk(get, sse(event(res(2, content=[{"type": "text", "text": "paid"}]), id="e2")), n=0)
    c.end(get)
    again = c.request(body=req("tools/call", 3, name="pay", arguments={"amount": 5}), headers=h)
    c.response(again, body=res(3, content=[]), headers=h)
    return c.close()


def _changed(value: Any, data: st.DataObject) -> Any:
    """`value` with one part, at any depth, replaced by an odd JSON value."""
    if isinstance(value, dict) and value and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(value)))
        return {**value, key: _changed(value[key], data)}
    if isinstance(value, list) and value and data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(value) - 1))
        return [*value[:at], _changed(value[at], data), *value[at + 1 :]]
    return data.draw(_ODD)


def _changed_inside(record: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    """The JSON held in a record's text changed: a `data:` line of its SSE text, or its body."""
    holder = "data" if "data" in record else "body"
    held = record.get(holder)
    text = held.get("text") if isinstance(held, dict) else None
    if not isinstance(held, dict) or not isinstance(text, str):
        return record
    if text.lstrip().startswith(("{", "[")):
        try:
            changed = json.dumps(_changed(json.loads(text), data))
        except ValueError:
            return record
    else:
        lines = text.split("\n")
        at = data.draw(st.integers(0, len(lines) - 1))
        field, _, value = lines[at].partition(":")
        try:
            lines[at] = f"{field}: {json.dumps(_changed(json.loads(value), data))}"
        except ValueError:
            lines[at] = (
                f"{field}:{data.draw(st.sampled_from(['', ' e1', ' 99999999999999999999']))}"
            )
        changed = "\n".join(lines)
    return {**record, holder: {**held, "text": changed}}


def _damaged(data: st.DataObject) -> list[bytes]:
    lines = _capture().lines()
    for _ in range(data.draw(st.integers(1, 5))):
        at = data.draw(st.integers(0, len(lines) - 1))
        how = data.draw(
            st.sampled_from(["drop", "repeat", "swap", "cut", "field", "inside", "headless"])
        )
        if how == "drop":
            del lines[at]
        elif how == "headless":  # all but a flow's chunks lost (retention took the file before)
            flow = data.draw(st.sampled_from(["f1", "f2", "f3", "f4"]))
            lines = [
                line
                for line in lines
                if f'"flow":"{flow}"'.encode() not in line or b'"kind":"chunk"' in line
            ]
        elif how == "repeat":
            lines.insert(data.draw(st.integers(0, len(lines))), lines[at])
        elif how == "swap":
            other = data.draw(st.integers(0, len(lines) - 1))
            lines[at], lines[other] = lines[other], lines[at]
        elif how == "cut":
            lines[at] = lines[at][: data.draw(st.integers(0, len(lines[at])))]
        else:
            try:
                record = json.loads(lines[at])
            except ValueError:  # a line cut before
                continue
            if isinstance(record, dict):
                record = _changed(record, data) if how == "field" else _changed_inside(record, data)
            lines[at] = json.dumps(record).encode()
        if not lines:
            break
    return lines


@settings(
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_damaged_capture_gets_a_report_or_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: st.DataObject
) -> None:
    lines = _damaged(data)
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    capture = folder / "capture"
    capture.mkdir()
    cut = data.draw(st.integers(1, max(len(lines) - 1, 1))) if data.draw(st.booleans()) else None
    if cut is None or len(lines) < 3:
        (capture / "capture-r-0000.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    else:  # rotated: the second file opens with the run's capture_open, as the writer's do
        opened = json.dumps({**json.loads(_capture().lines()[0]), "file_index": 1}).encode()
        parts = [lines[:cut], [opened, *lines[cut:]]]
        for index, part in enumerate(parts):
            path = capture / f"capture-r-{index:04d}.jsonl"
            path.write_bytes(b"".join(line + b"\n" for line in part))
    form = data.draw(st.sampled_from(_FORMATS))
    out = folder / "report"
    capsys.readouterr()
    code = cli.main(
        [
            "analyze",
            str(capture),
            "--no-cache",
            "--format",
            form,
            "--fail-on",
            "low",
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert code in (0, 1, 2), err
    if code == 2:
        assert err.startswith("seamwatch: ") and err.count("\n") == 1, err
    else:
        assert out.stat().st_size > 0
