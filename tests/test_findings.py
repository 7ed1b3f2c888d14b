"""The findings schema, severities, fingerprints and frame helpers (analyzer/findings.py)."""

from __future__ import annotations

import datetime as dt
import hashlib
import random

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from analyzer.canonical import canonical_json
from analyzer.findings import (
    EVIDENCE_COLUMNS,
    FINDINGS_SCHEMA,
    FindingsSchemaError,
    Severity,
    as_findings,
    emit,
    empty_findings,
    finding_rows,
    findings_frame,
    fingerprint,
    finish_findings,
    merged,
    validate_findings,
)

UTC = dt.UTC
T0 = dt.datetime(2025, 6, 15, 15, 6, 40, tzinfo=UTC)
T0_NS = 1_750_000_000_000_000_000


def row(**fields: object) -> dict[str, object]:
    """A finding row with the required fields filled in."""
    base: dict[str, object] = {
        "detector": "duplicate-event-id",
        "severity": "high",
        "session": "mcp:7f3c",
        "title": "event id 17 issued twice with different payloads",
        "detail": "what happened",
    }
    return base | fields


# --- schema and severity -------------------------------------------------------------------


def test_schema_is_design_section_5_in_order() -> None:
    ids = pl.List(pl.String)
    ts = pl.Datetime("ns", "UTC")
    assert list(FINDINGS_SCHEMA.items()) == [
        ("detector", pl.String),
        ("severity", pl.Enum(["info", "low", "medium", "high"])),
        ("session", pl.String),
        ("era", pl.String),
        ("title", pl.String),
        ("detail", pl.String),
        ("flow_ids", ids),
        ("stream_ids", ids),
        ("event_ids", ids),
        ("request_ids", ids),
        ("first_ts", ts),
        ("last_ts", ts),
        ("fingerprint", pl.String),
    ]
    assert empty_findings().schema == FINDINGS_SCHEMA
    assert empty_findings().height == 0


def test_severity_orders_by_rank_not_alphabet() -> None:
    assert Severity.INFO < Severity.LOW < Severity.MEDIUM < Severity.HIGH
    assert max(Severity) is Severity.HIGH
    assert sorted([Severity.HIGH, Severity.INFO, Severity.MEDIUM]) == [
        Severity.INFO,
        Severity.MEDIUM,
        Severity.HIGH,
    ]
    assert [s.rank for s in Severity] == [0, 1, 2, 3]


def test_severity_levels_are_defined_in_words() -> None:
    assert "executed twice" in Severity.HIGH.meaning
    assert "by luck" in Severity.MEDIUM.meaning
    assert "benign" in Severity.LOW.meaning
    assert "capture health" in Severity.INFO.meaning
    for severity in Severity:
        assert severity.value in (Severity.__doc__ or "")


@pytest.mark.parametrize(("text", "want"), [("high", Severity.HIGH), (" Medium ", Severity.MEDIUM)])
def test_severity_parse(text: str, want: Severity) -> None:
    assert Severity.parse(text) is want


def test_severity_parse_names_the_choices() -> None:
    with pytest.raises(ValueError, match="info, low, medium, high"):
        Severity.parse("critical")


def test_severity_column_sorts_and_compares_by_rank() -> None:
    df = findings_frame([row(severity=s) for s in ("low", "high", "info", "medium")])
    assert df.sort("severity")["severity"].to_list() == ["info", "low", "medium", "high"]
    assert df.filter(pl.col("severity") >= "medium").height == 2


# --- fingerprint -----------------------------------------------------------------------------


def test_fingerprint_is_the_documented_hash() -> None:
    basis = [1, "causal-gap", "mcp:s1", ["e1", "e2"], ['"7"'], []]
    want = hashlib.sha256(canonical_json(basis).encode()).hexdigest()[:32]
    got = fingerprint("causal-gap", "mcp:s1", event_ids=["e2", "e1", "e2"], request_ids=['"7"'])
    assert got == want
    assert len(got) == 32


def test_fingerprint_ignores_flows_streams_and_times() -> None:
    a = findings_frame(
        [row(flow_ids=["f1"], stream_ids=["f1"], event_ids=["e1"], first_ts=T0, last_ts=T0)]
    )
    b = findings_frame(
        [
            row(
                flow_ids=["other-flow"],
                stream_ids=["other-flow"],
                event_ids=["e1"],
                first_ts=T0 + dt.timedelta(hours=1),
                title="reworded",
                detail="other text",
            )
        ]
    )
    assert a["fingerprint"].item() == b["fingerprint"].item()


@pytest.mark.parametrize(
    "change",
    [
        {"detector": "causal-gap"},
        {"session": "mcp:other"},
        {"session": None},
        {"event_ids": ["e2"]},
        {"request_ids": ["1"]},
        {"fingerprint_extra": ["tool-a"]},
    ],
)
def test_fingerprint_changes_with_what_names_the_fault(change: dict[str, object]) -> None:
    base = findings_frame([row(event_ids=["e1"])])["fingerprint"].item()
    changed = findings_frame([row(event_ids=["e1"]) | change])["fingerprint"].item()
    assert base != changed


def test_fingerprint_tells_string_and_number_request_ids_apart() -> None:
    # request ids are canonical JSON text, so 7 and "7" are different ids
    assert fingerprint("d", "s", request_ids=["7"]) != fingerprint("d", "s", request_ids=['"7"'])


@given(
    st.lists(st.text(max_size=8), max_size=6),
    st.lists(st.text(max_size=8), max_size=6),
    st.randoms(),
)
def test_fingerprint_does_not_depend_on_evidence_order(
    events: list[str], requests: list[str], rnd: random.Random
) -> None:
    shuffled_events, shuffled_requests = events[:], requests[:]
    rnd.shuffle(shuffled_events)
    rnd.shuffle(shuffled_requests)
    assert fingerprint("d", "s", event_ids=events, request_ids=requests) == fingerprint(
        "d", "s", event_ids=shuffled_events, request_ids=shuffled_requests
    )


# --- findings_frame --------------------------------------------------------------------------


def test_findings_frame_fills_defaults() -> None:
    df = findings_frame([{"detector": "d", "severity": Severity.LOW, "title": "t", "detail": "x"}])
    assert df.schema == FINDINGS_SCHEMA
    got = df.row(0, named=True)
    assert got["session"] is None and got["era"] is None
    assert got["first_ts"] is None and got["last_ts"] is None
    assert all(got[name] == [] for name in EVIDENCE_COLUMNS)
    assert got["fingerprint"] == fingerprint("d", None)


def test_findings_frame_keeps_nanoseconds_and_evidence_order() -> None:
    df = findings_frame([row(first_ts=T0_NS + 7, last_ts=T0, event_ids=["b", "a", "b"])])
    got = df.select(pl.col("first_ts", "last_ts").dt.epoch("ns")).row(0)
    assert got == (T0_NS + 7, T0_NS)
    assert df["event_ids"].item().to_list() == ["b", "a"]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"flows": ["f1"]}, "unknown finding fields: flows"),
        ({"title": None}, "title"),
        ({"detector": None}, "needs 'detector'"),
        ({"severity": None}, "needs 'severity'"),
        ({"event_ids": "e1"}, "list of str"),
        ({"event_ids": [1]}, "must hold str"),
        ({"first_ts": dt.datetime(2025, 1, 1)}, "timezone-aware"),
        ({"fingerprint": "x"}, "unknown finding fields: fingerprint"),
    ],
)
def test_findings_frame_rejects_bad_rows(bad: dict[str, object], message: str) -> None:
    with pytest.raises(FindingsSchemaError, match=message):
        findings_frame([row() | bad])


def test_findings_frame_rejects_unknown_severity() -> None:
    with pytest.raises(ValueError, match="unknown severity"):
        findings_frame([row(severity="critical")])


def test_findings_frame_of_nothing_is_empty() -> None:
    assert_frame_equal(findings_frame([]), empty_findings())


# --- as_findings -----------------------------------------------------------------------------


def test_as_findings_conforms_a_detector_frame() -> None:
    lf = pl.LazyFrame(
        {
            "session": ["mcp:a", "mcp:b"],
            "title": ["t1", "t2"],
            "detail": ["d1", "d2"],
            "severity": [None, "high"],
            "event_ids": [["e1", None, "e1"], None],
            "first_ts": [dt.datetime(2025, 6, 15, 15, 6, 40)] * 2,  # naive: taken as UTC
            "last_ts": [T0_NS, None],
        }
    )
    got = as_findings(lf, detector="causal-gap", severity=Severity.MEDIUM).collect()
    validate_findings(got)
    assert got["detector"].to_list() == ["causal-gap", "causal-gap"]
    assert got["severity"].to_list() == ["medium", "high"]
    assert got["event_ids"].to_list() == [["e1"], []]
    assert got["flow_ids"].to_list() == [[], []]
    assert got["first_ts"].dt.epoch("ns").to_list() == [T0_NS, T0_NS]
    assert got["last_ts"].dt.epoch("ns").to_list() == [T0_NS, None]
    assert got["fingerprint"].to_list() == [
        fingerprint("causal-gap", "mcp:a", event_ids=["e1"]),
        fingerprint("causal-gap", "mcp:b"),
    ]


def test_emit_names_the_findings_columns_and_ends_each_detail_with_the_remedy() -> None:
    found = pl.LazyFrame(
        {
            "session_id": ["mcp:a"],
            "era": ["2025-11-25"],
            "stream_id": ["f1"],
            "cursor": ["e4"],
            "ts": [T0],
            "noise": [1],
        }
    )
    got = emit(
        found,
        title=pl.format("resume from {}", "cursor"),
        detail=pl.format("Session {} resumed.", "session_id"),
        remedy="Keep a log.",
        severity=pl.lit("low"),
        stream_ids=pl.concat_list("stream_id"),
        event_ids=pl.concat_list("cursor"),
        first_ts="ts",
        last_ts="ts",
        extra=pl.concat_list("cursor"),
    ).collect()
    assert got.columns == [
        "severity", "session", "era", "title", "detail", "stream_ids", "event_ids",
        "first_ts", "last_ts", "fingerprint_extra",
    ]  # fmt: skip
    row = got.row(0, named=True)
    assert row["detail"] == "Session mcp:a resumed. Keep a log."
    assert (row["session"], row["era"], row["title"]) == ("mcp:a", "2025-11-25", "resume from e4")
    assert (row["stream_ids"], row["event_ids"], row["severity"]) == (["f1"], ["e4"], "low")
    conformed = as_findings(got.lazy(), detector="d", severity=Severity.HIGH).collect()
    assert conformed["fingerprint"].item() == fingerprint(
        "d", "mcp:a", event_ids=["e4"], extra=["e4"]
    )


def test_emit_without_a_remedy_keeps_the_detail() -> None:
    found = pl.LazyFrame({"session_id": ["s"], "era": [None], "first_ts": [T0], "last_ts": [T0]})
    got = emit(found, title=pl.lit("t"), detail=pl.lit("d.")).collect()
    assert got["detail"].item() == "d."


def test_merged_makes_one_row_of_a_session_and_extra_in_the_order_of_their_times() -> None:
    at = [T0 + dt.timedelta(seconds=s) for s in (3, 1, 2, 5)]
    found = pl.LazyFrame(
        {
            "session": ["a", "a", "b", "a"],
            "fingerprint_extra": [["t"], ["t"], ["t"], ["u"]],
            "era": ["2025-11-25", "2025-06-18", None, None],
            "severity": ["low", "medium", "low", "high"],
            "flow_ids": [["f2", "f3"], ["f1", "f2"], ["f9"], ["f5"]],
            "first_ts": at,
            "last_ts": at,
        }
    )
    got = merged(found, ["flow_ids"]).sort("session", "fingerprint_extra").collect()
    assert got.select("session", "era", "severity", "flow_ids").rows() == [
        ("a", "2025-06-18", "medium", ["f1", "f2", "f3"]),
        ("a", None, "high", ["f5"]),
        ("b", None, "low", ["f9"]),
    ]
    assert got.row(0, named=True)["first_ts"] == at[1]
    assert got.row(0, named=True)["last_ts"] == at[0]


def test_as_findings_converts_other_time_zones() -> None:
    lf = pl.LazyFrame({"title": ["t"], "detail": ["d"], "first_ts": [T0]}).with_columns(
        pl.col("first_ts").dt.convert_time_zone("Europe/Paris")
    )
    got = as_findings(lf, detector="d", severity=Severity.LOW).collect()
    assert got["first_ts"].dt.epoch("ns").item() == T0_NS


def test_as_findings_on_an_empty_frame() -> None:
    lf = pl.LazyFrame(schema={"title": pl.String, "detail": pl.String})
    got = as_findings(lf, detector="d", severity=Severity.LOW).collect()
    assert_frame_equal(got, empty_findings())


def test_as_findings_detector_id_overrides_the_frame() -> None:
    lf = finding_rows([{"detector": "wrong", "title": "t", "detail": "d"}])
    got = as_findings(lf, detector="right", severity=Severity.LOW).collect()
    assert got["detector"].item() == "right"
    assert got["fingerprint"].item() == fingerprint("right", None)


def test_as_findings_uses_fingerprint_extra_and_drops_it() -> None:
    lf = finding_rows([{"title": "t", "detail": "d", "fingerprint_extra": ["a.jsonl"]}])
    got = as_findings(lf, detector="capture-health", severity=Severity.INFO).collect()
    assert got.schema == FINDINGS_SCHEMA
    assert got["fingerprint"].item() == fingerprint("capture-health", None, extra=["a.jsonl"])


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"title": ["t"], "detail": ["d"], "event_id": [["e"]]}, "unknown finding columns"),
        ({"title": ["t"]}, "missing finding columns: detail"),
    ],
)
def test_as_findings_rejects_unknown_and_missing_columns(
    columns: dict[str, list[object]], message: str
) -> None:
    with pytest.raises(FindingsSchemaError, match=message):
        as_findings(pl.LazyFrame(columns), detector="d", severity=Severity.LOW)


def test_as_findings_needs_a_detector() -> None:
    with pytest.raises(FindingsSchemaError, match="detector"):
        as_findings(pl.LazyFrame({"title": ["t"], "detail": ["d"]}))


def test_validate_findings_names_the_mismatch() -> None:
    with pytest.raises(FindingsSchemaError, match="schema mismatch"):
        validate_findings(empty_findings().drop("era"))
    with pytest.raises(FindingsSchemaError, match="null values in finding columns: detector"):
        validate_findings(findings_frame([row()]).with_columns(detector=pl.lit(None, pl.String)))


# --- finish_findings -------------------------------------------------------------------------


def test_finish_findings_sorts_worst_first_then_detector_session_time() -> None:
    rows = [
        row(detector="b-det", severity="medium", session="mcp:2", first_ts=T0, event_ids=["1"]),
        row(detector="a-det", severity="medium", session="mcp:2", first_ts=T0, event_ids=["2"]),
        row(detector="a-det", severity="medium", session="mcp:1", first_ts=T0, event_ids=["3"]),
        row(detector="z-det", severity="high", session="mcp:9", first_ts=T0, event_ids=["4"]),
        row(detector="a-det", severity="info", session=None, event_ids=["5"]),
        row(detector="a-det", severity="medium", session="mcp:1", first_ts=T0_NS - 1),
    ]
    got = finish_findings(findings_frame(rows))
    assert got.select("severity", "detector", "session").rows() == [
        ("high", "z-det", "mcp:9"),
        ("medium", "a-det", "mcp:1"),
        ("medium", "a-det", "mcp:1"),
        ("medium", "a-det", "mcp:2"),
        ("medium", "b-det", "mcp:2"),
        ("info", "a-det", None),
    ]
    assert got["first_ts"][1] < got["first_ts"][2]


def test_finish_findings_is_independent_of_input_order() -> None:
    rows = [
        row(event_ids=[str(i)], severity=sev, first_ts=T0_NS + i)
        for i, sev in enumerate(["low", "high", "medium", "high", "info"] * 3)
    ]
    want = finish_findings(findings_frame(rows))
    for seed in range(5):
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        assert_frame_equal(finish_findings(findings_frame(shuffled)), want)


def test_finish_findings_makes_colliding_fingerprints_unique_in_time_order() -> None:
    rows = [
        row(event_ids=["e1"], first_ts=T0_NS + 20, flow_ids=["late"]),
        row(event_ids=["e1"], first_ts=T0_NS + 10, flow_ids=["early"]),
        row(event_ids=["e1"], first_ts=T0_NS + 30, flow_ids=["last"]),
    ]
    got = finish_findings(findings_frame(rows))
    base = fingerprint("duplicate-event-id", "mcp:7f3c", event_ids=["e1"])
    by_flow = dict(zip(got["flow_ids"].list.first(), got["fingerprint"], strict=True))
    assert by_flow == {"early": base, "late": f"{base}~2", "last": f"{base}~3"}
    assert got["fingerprint"].is_unique().all()
