"""dashboards.charts: lanes, layers and the Vega-Lite spec of the session timeline."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from analyzer.findings import empty_findings, findings_frame
from dashboards import charts, data
from tests.support.planted import ACTING, spoofing_capture

pytestmark = pytest.mark.usefixtures("fresh_caches")

S1 = "S1 POST tools/call id 4 · replica-a → replica-b"
S2 = "S2 POST tools/call id 5 · replica-a"


@pytest.fixture
def view(lab_capture: Path) -> data.SessionView:
    source = (str(lab_capture),)
    return data.session_view(source, data.signature(source), "mcp:rr-1")


def named(event_ids: list[str], request_ids: list[str]) -> pl.DataFrame:
    return findings_frame(
        [
            {
                "detector": "duplicate-event-id",
                "severity": "high",
                "session": "mcp:rr-1",
                "title": "t",
                "detail": "d",
                "event_ids": event_ids,
            },
            {
                "detector": "repeated-tool-call",
                "severity": "high",
                "session": "mcp:rr-1",
                "title": "t",
                "detail": "d",
                "request_ids": request_ids,
            },
        ]
    )


def test_lanes_name_kind_request_and_replicas(view: data.SessionView) -> None:
    assert charts.lanes(view)["lane"].to_list() == [S1, S2]


def test_marks_place_every_event_request_and_answer(view: data.SessionView) -> None:
    layers = charts.marks(view, empty_findings())
    points = layers["points"]
    # 21 SSE events, 8 requests, 3 JSON answers (initialize, tools/list, ping)
    assert points.height == 21 + 8 + 3
    by_lane = dict(points.group_by("lane").len().iter_rows())
    assert by_lane == {S1: 9 + 2 + 2, S2: 10 + 1, charts.NO_STREAM: 5 + 3}
    assert dict(points.group_by("category").len().iter_rows()) == {
        "notification": 17,
        "priming (id only)": 3,
        "request": 5,  # initialize, initialized, tools/list, ping, DELETE
        "response": 3,  # their JSON answers
        "resume request": 1,
        "tool call": 2,
        "tool result": 1,  # only the second call's result arrived
    }
    assert points.filter(pl.col("category") == "tool result")["event_id"].to_list() == ["e20"]
    assert points.filter(pl.col("category") == "resume request")["event_id"].to_list() == ["e7"]
    assert points.filter(pl.col("category") == "tool call")["rpc_id"].to_list() == ["4", "5"]
    assert points["order"].min() == 0 and points["t_ms"].min() >= 0  # type: ignore[operator]
    assert not points["named"].any()


def test_bars_ends_and_the_resume(view: data.SessionView) -> None:
    layers = charts.marks(view, empty_findings())
    bars = layers["bars"].sort("lane", "incarnation")
    assert bars.select("lane", "incarnation", "replica", "cursor").rows() == [
        (S1, 0, "replica-a", None),
        (S1, 1, "replica-b", "e7"),
        (S2, 0, "replica-a", None),
    ]
    ends = layers["ends"].sort("lane", "incarnation")
    assert ends.select("end_how", "break").rows() == [
        ("client_closed", True),
        ("client_closed", True),
        ("complete", False),
    ]
    (resume,) = layers["resumes"].iter_rows(named=True)
    assert (resume["lane"], resume["to_lane"], resume["cursor"]) == (S1, S1, "e7")
    assert (resume["cursor_replica"], resume["answer_replica"]) == ("replica-a", "replica-b")
    assert resume["order"] < resume["order2"]  # from the cursor's event to the resume


def test_findings_ring_the_events_and_requests_they_name(view: data.SessionView) -> None:
    points = charts.marks(view, named(["e2"], ["4", "5"]))["points"]
    ringed = points.filter(pl.col("named")).sort("order")
    assert ringed.select("category", "event_id", "rpc_id", "findings").rows() == [
        ("tool call", None, "4", "repeated-tool-call"),
        ("notification", "e2", None, "duplicate-event-id"),
        ("notification", "e2", None, "duplicate-event-id"),
        ("tool call", None, "5", "repeated-tool-call"),
    ]


@pytest.mark.parametrize("spacing", ["time", "wire order"])
def test_chart_spec(view: data.SessionView, spacing: charts.Spacing) -> None:
    layers = charts.marks(view, named(["e2"], []))
    spec = charts.timeline_chart(layers, spacing=spacing).to_dict()  # validates the schema
    x_field = "t_ms" if spacing == "time" else "order"
    assert [layer["mark"]["type"] for layer in spec["layer"]] == [
        "bar",
        "rule",
        "tick",
        "point",
        "point",
    ]
    assert all(layer["encoding"]["x"]["field"] == x_field for layer in spec["layer"])
    assert spec["layer"][0]["encoding"]["y"]["sort"] == [S1, S2, charts.NO_STREAM]
    assert {p["name"] for p in spec["params"]} == {"zoom", "pick"}
    tooltip = {t["field"] for t in spec["layer"][4]["encoding"]["tooltip"]}
    assert {"event_id", "payload", "findings", "replica"} <= tooltip
    assert spec["resolve"]["scale"]["color"] == "independent"


def test_wire_order_gives_every_mark_a_place(view: data.SessionView) -> None:
    layers = charts.marks(view, empty_findings())
    points = layers["points"]
    assert sorted(points["order"].to_list()) == [float(i) for i in range(points.height)]
    s2 = points.filter(pl.col("lane") == S2).sort("order")
    # S2's bar spans its marks; its end sits just after its last mark
    bar = layers["bars"].filter(pl.col("lane") == S2).row(0, named=True)
    end = layers["ends"].filter(pl.col("lane") == S2).row(0, named=True)
    events = s2.filter(pl.col("what").str.starts_with("SSE"))
    assert bar["order"] < events["order"].min() <= events["order"].max() < bar["order2"]
    assert end["order"] == bar["order2"]


def test_window_cuts_every_layer(view: data.SessionView) -> None:
    layers = charts.marks(view, empty_findings())
    cut = charts.window(layers, 0, 12)
    assert cut["points"]["order"].max() == 12  # type: ignore[comparison-overlap]
    assert cut["bars"]["lane"].to_list() == [S1]
    assert cut["resumes"].height == 0  # the resume comes later
    assert cut["ends"].height == 0


def test_chart_data_shows_controls_and_bidi_overrides_as_replacement_characters(
    tmp_path: Path,
) -> None:
    source = (str(spoofing_capture(tmp_path / "spoof")),)
    view = data.session_view(source, data.signature(source), "mcp:s\u202etxt.exe")
    chart = charts.timeline_chart(charts.marks(view, empty_findings()))
    spec = json.dumps(chart.to_dict(), ensure_ascii=False)
    assert [c for c in ACTING if c in spec] == []
    assert "e1\ufffdtxt.exe\ufffd[2J" in spec  # the event id, in the tooltips' data
