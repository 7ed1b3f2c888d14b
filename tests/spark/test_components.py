"""Connected components of related flow groups (analyzer/spark/components.py)."""

from __future__ import annotations

from typing import Any

import pytest

from analyzer.spark.components import ALL_IN_ONE, components, least_of_sets

# (case, `key, node` rows, expected node -> component)
CASES = [
    (
        "a chain of keys joins its ends",
        [("k1", "a"), ("k1", "b"), ("k2", "b"), ("k2", "c"), ("k3", "c"), ("k3", "d")],
        {"a": "a", "b": "a", "c": "a", "d": "a"},
    ),
    (
        "nodes sharing no key stay apart",
        [("k1", "a"), ("k1", "b"), ("k2", "c"), ("k2", "d"), ("k3", "e"), ("k3", "f")],
        {"a": "a", "b": "a", "c": "c", "d": "c", "e": "e", "f": "e"},
    ),
    (
        "the least label reaches a node from the far end",
        [("k1", "z"), ("k1", "y"), ("k2", "y"), ("k2", "x"), ("k3", "x"), ("k3", "a")],
        {"z": "a", "y": "a", "x": "a", "a": "a"},
    ),
    (
        "a key many nodes hold is one component, a repeated row changes nothing",
        [("k", "c"), ("k", "b"), ("k", "a"), ("k", "a"), ("j", "d"), ("j", "e")],
        {"a": "a", "b": "a", "c": "a", "d": "d", "e": "d"},
    ),
]


# Where the components are found: on the driver (the pairs fit), in Spark (they do not).
WHERE = {"driver": 1000, "propagation": 0}


@pytest.mark.parametrize("where", list(WHERE))
@pytest.mark.parametrize(("rows", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_components(
    spark: Any, rows: list[tuple[str, str]], expected: dict[str, str], where: str
) -> None:
    frame = spark.createDataFrame(rows, "key string, node string")
    found = components(frame, driver_rows=WHERE[where])
    assert {r["node"]: r["component"] for r in found.collect()} == expected


@pytest.mark.parametrize(("rows", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_least_of_sets(rows: list[tuple[str, str]], expected: dict[str, str]) -> None:
    # The pairs Spark hands the driver: each key's nodes tied to its least one.
    anchors = {key: min(n for k, n in rows if k == key) for key, _ in rows}
    assert least_of_sets((node, anchors[key]) for key, node in rows) == expected


def test_least_of_sets_roots_each_set_at_its_least_node_whatever_the_order() -> None:
    pairs = [("m", "z"), ("b", "z"), ("q", "r"), ("a", "m"), ("r", "c")]
    expected = dict.fromkeys(("a", "b", "m", "z"), "a") | dict.fromkeys(("c", "q", "r"), "c")
    assert least_of_sets(pairs) == expected
    assert least_of_sets(reversed(pairs)) == expected


def test_labels_that_do_not_settle_put_every_node_in_one_component(spark: Any) -> None:
    rows = [("k1", "d"), ("k1", "c"), ("k2", "c"), ("k2", "b"), ("k3", "b"), ("k3", "a")]
    rows += [("k9", "x"), ("k9", "y")]
    frame = spark.createDataFrame(rows, "key string, node string")
    found = components(frame, max_rounds=1, driver_rows=0).collect()
    assert {r["node"]: r["component"] for r in found} == dict.fromkeys("abcdxy", ALL_IN_ONE)


def test_pairs_the_driver_takes_need_no_rounds(spark: Any) -> None:
    # The same chain as above, within the driver's bound: its components whatever the rounds.
    rows = [("k1", "d"), ("k1", "c"), ("k2", "c"), ("k2", "b"), ("k3", "b"), ("k3", "a")]
    rows += [("k9", "x"), ("k9", "y")]
    frame = spark.createDataFrame(rows, "key string, node string")
    found = components(frame, max_rounds=1, driver_rows=8).collect()
    assert {r["node"]: r["component"] for r in found} == {
        **dict.fromkeys("abcd", "a"),
        **dict.fromkeys("xy", "x"),
    }


def test_pairs_past_the_bound_go_to_propagation(spark: Any) -> None:
    # 8 distinct pairs (one a node): a bound of 7 is one short, and the unsettled rounds show it.
    rows = [("k1", "d"), ("k1", "c"), ("k2", "c"), ("k2", "b"), ("k3", "b"), ("k3", "a")]
    rows += [("k9", "x"), ("k9", "y")]
    frame = spark.createDataFrame(rows, "key string, node string")
    found = components(frame, max_rounds=1, driver_rows=7).collect()
    assert {r["component"] for r in found} == {ALL_IN_ONE}


def test_no_memberships_no_components(spark: Any) -> None:
    frame = spark.createDataFrame([], "key string, node string")
    assert components(frame).collect() == []
