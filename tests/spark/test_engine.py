"""Starting the Spark engine (analyzer/spark/engine.py); its results: tests/spark/test_init.py."""

from __future__ import annotations

from typing import Any

import pytest

from analyzer.ingest import InputReport
from analyzer.spark import engine
from analyzer.spark.links import CALLS_VIA, LISTED_VIA, ORDER
from analyzer.spark.tasks import ANALYSIS_OUT_DDL


def test_without_java_it_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine.shutil, "which", lambda name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(engine.SparkUnavailable, match="needs Java 17"):
        engine.session()


def test_repeated_flows_are_counted_in_the_input_report() -> None:
    report = InputReport("a", "capture", 10, 0, {"seq_gap": 1}, ("w",))
    counted = engine.with_repeats(report, 3)
    assert counted.counts == {"seq_gap": 1, "duplicate_flow": 3}
    assert len(counted.warnings) == 2
    assert engine.with_repeats(report, 0) is report


def _link(key: str, session: str, *, wants: bool = False, via: str | None = None,
          ts: int | None = None) -> dict[str, object]:  # fmt: skip
    return {"what": "link", "key": key, "session": session, "wants": wants, "via": via, "ts": ts}


S = 1_000_000_000  # a second, in the link rows' epoch nanoseconds


def related(first: Any, window_s: float | None = 120.0) -> dict[str, str]:
    return {r["group"]: r["component"] for r in engine.related_groups(first, window_s).collect()}


def test_related_groups_are_split_into_components_of_narrowed_links(spark: Any) -> None:
    """Client c's sessions s1..s5 start in that order; call key K recurs in s1 and s2, key J
    twice in s5 alone; every session lists tool t with the same hints; s2 did not list it."""
    k, j = "call:c|srv|t|K", "call:c|srv|t|J"
    rows = [{"what": "session", "key": f"g{i}", "session": f"s{i}"} for i in range(1, 6)]
    rows += [_link(ORDER + "c", f"s{i}", ts=i) for i in range(1, 6)]
    rows += [_link("list:t", f"s{i}", via="true,false") for i in (1, 3, 4, 5)]
    rows += [_link(k, "s1", wants=True, ts=S), _link(k, "s2", wants=True, ts=2 * S)]
    rows += [_link(j, "s5", wants=True, ts=5 * S), _link(j, "s5", wants=True, ts=6 * S)]
    rows += [
        _link("list:t", "s1", wants=True, via=LISTED_VIA + CALLS_VIA + k, ts=S),
        _link("list:t", "s2", wants=True, via=CALLS_VIA + k, ts=2 * S),
        _link("list:t", "s5", wants=True, via=LISTED_VIA + CALLS_VIA + j, ts=5 * S),
        _link("list:t", "s5", wants=True, via=LISTED_VIA + CALLS_VIA + j, ts=6 * S),
    ]
    first = spark.createDataFrame(rows, ANALYSIS_OUT_DDL)
    found = related(first)
    # s1, s2 (the key), s3 (s2's next session), s1..s5 (s2 reads every listing: it listed none)
    assert found == dict.fromkeys(("g1", "g2", "g3", "g4", "g5"), "g1")
    # Once s2 lists the tool too, only the key and the next sessions relate sessions.
    rows = [r for r in rows if r.get("via") != CALLS_VIA + k]
    rows += [_link("list:t", "s2", wants=True, via=LISTED_VIA + CALLS_VIA + k, ts=2 * S)]
    rows += [_link("list:t", "s2", via="true,false")]
    first = spark.createDataFrame(rows, ANALYSIS_OUT_DDL)
    found = related(first)
    assert found == {"g1": "g1", "g2": "g1", "g3": "g1"}
    # Listings that differ in hints: each repeated call reads them all again.
    rows += [_link("list:t", "s4", via="true,true")]
    first = spark.createDataFrame(rows, ANALYSIS_OUT_DDL)
    found = related(first)
    assert found == dict.fromkeys(("g1", "g2", "g3", "g4", "g5"), "g1")
    # Without repeated-tool-call, tool calls relate nothing.
    assert related(first, None) == {}


def test_tool_call_keys_relate_only_calls_chained_within_the_window(spark: Any) -> None:
    """Key K in s1 (t=0 s), s2 (t=100 s), s3 (t=190 s) and s4 (t=400 s); each session of
    its own client (no next sessions)."""
    k = "call:c|srv|t|K"
    at = {"s1": 0, "s2": 100, "s3": 190, "s4": 400}
    rows = [{"what": "session", "key": f"g{s[1]}", "session": s} for s in at]
    rows += [_link(ORDER + s, s, ts=t * S) for s, t in at.items()]
    rows += [_link(k, s, wants=True, ts=t * S) for s, t in at.items()]
    first = spark.createDataFrame(rows, ANALYSIS_OUT_DDL)
    # s1-s3 chain by gaps of 100 and 90 s; s4 comes 210 s after s3: a key of its own.
    assert related(first, 120.0) == dict.fromkeys(("g1", "g2", "g3"), "g1")
    assert related(first, 95.0) == {"g2": "g2", "g3": "g2"}  # 100 s apart: s1 alone
    assert related(first, 80.0) == {}
    assert related(first, 210.0) == dict.fromkeys(("g1", "g2", "g3", "g4"), "g1")
