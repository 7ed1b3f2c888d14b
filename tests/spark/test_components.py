"""Connected components of related flow groups (analyzer/spark/components.py)."""

from __future__ import annotations

from typing import Any

import pytest

from analyzer.spark.components import ALL_IN_ONE, components

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


@pytest.mark.parametrize(("rows", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_components(spark: Any, rows: list[tuple[str, str]], expected: dict[str, str]) -> None:
    frame = spark.createDataFrame(rows, "key string, node string")
    found = {r["node"]: r["component"] for r in components(frame).collect()}
    assert found == expected


def test_labels_that_do_not_settle_put_every_node_in_one_component(spark: Any) -> None:
    rows = [("k1", "d"), ("k1", "c"), ("k2", "c"), ("k2", "b"), ("k3", "b"), ("k3", "a")]
    rows += [("k9", "x"), ("k9", "y")]
    frame = spark.createDataFrame(rows, "key string, node string")
    found = {r["node"]: r["component"] for r in components(frame, max_rounds=1).collect()}
    assert found == dict.fromkeys(("a", "b", "c", "d", "x", "y"), ALL_IN_ONE)
