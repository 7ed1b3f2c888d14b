"""Connected components of the flow groups that cross-session links relate, computed in Spark.

The third stage judges related sessions together; sessions are related through the keys of
`analyzer.spark.links` they share (a cursor, a counter prefix, a tool-call key...). Judging the
related groups of a capture in one task holds them all in one worker; a component (the groups
linked, directly or through others, by shared keys) is what one judgement needs, and
components are independent of one another.

First, in Spark, each key ties its groups to its least one (its *anchor*): `node, anchor` rows,
one shuffle by key, as many rows as distinct pairs, however many keys a pair shares. The
components of those pairs are the components of the keys. When they are few (`DRIVER_ROWS` at
most, counted by a bounded collect that stops one row past), the driver takes them and finds
the components itself by union-find: one Spark query, however long the chains of keys, where
the label propagation below plans and schedules two a round. A component is its least node
either way.

Otherwise, label propagation over the bipartite graph of keys and groups, by joins: each group
starts with its own name as label; each round a key takes the least label of its groups and a
group the least label of its keys. A component's label then spreads one key-hop a round, so
the rounds are bounded by the longest chain of keys, and every round is two joins and two
aggregations: nothing is collected on the driver but the count of labels that changed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["ALL_IN_ONE", "DRIVER_ROWS", "MAX_ROUNDS", "components", "least_of_sets"]

#: The most `node, anchor` rows the driver takes (a row is two group names, some 100 bytes on
#: the driver): above it, the components are found in Spark by label propagation.
DRIVER_ROWS: Final = 200_000
#: Rounds before the fallback: a chain of keys longer than this is rare (each hop is a session
#: sharing a key with the next), and the fallback is still correct.
MAX_ROUNDS: Final = 24
#: The label of every group when the labels did not settle within the rounds: one component,
#: judged in one task (correct, as every related group is judged with every other).
ALL_IN_ONE: Final = "*"


def components(
    memberships: DataFrame, *, max_rounds: int = MAX_ROUNDS, driver_rows: int = DRIVER_ROWS
) -> DataFrame:
    """`node, component` of every node of `memberships` (rows `key, node`: a key relates the
    nodes that hold it): `component` is the least node connected to it through shared keys.
    Found on the driver when the key-to-anchor pairs number `driver_rows` at most, else by
    label propagation, whose every node is `ALL_IN_ONE` when it did not settle within
    `max_rounds`."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    edges = memberships.select("key", "node").distinct().persist()
    anchor = F.min("node").over(Window.partitionBy("key"))
    pairs = edges.select("node", anchor.alias("anchor")).distinct()
    taken = pairs.limit(driver_rows + 1).collect()
    if len(taken) <= driver_rows:
        edges.unpersist()
        found = least_of_sets((str(r["node"]), str(r["anchor"])) for r in taken)
        table = pa.table(
            {"node": list(found), "component": list(found.values())},
            schema=pa.schema([("node", pa.string()), ("component", pa.string())]),
        )
        return memberships.sparkSession.createDataFrame(table)
    labels = _propagate(edges, max_rounds)
    edges.unpersist()
    return labels


def least_of_sets(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Each node of `pairs` (a pair joins its two nodes) with the least node of its set:
    union-find, the lesser root becoming the root of a union (so a root is its set's least),
    paths halved as they are walked."""
    parent: dict[str, str] = {}

    def root(node: str) -> str:
        parent.setdefault(node, node)
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for one, other in pairs:
        a, b = root(one), root(other)
        if a != b:
            parent[max(a, b)] = min(a, b)
    return {node: root(node) for node in parent}


def _propagate(edges: DataFrame, max_rounds: int) -> DataFrame:
    """`node, component` by label propagation over `edges` (`key, node`, distinct)."""
    from pyspark.sql import functions as F

    labels = edges.select("node", F.col("node").alias("component")).distinct()
    for _ in range(max_rounds):
        by_key = (
            edges.join(labels, on="node")
            .groupBy("key")
            .agg(F.min("component").alias("key_component"))
        )
        # Each node holds one key at least, and its own label took part in that key's least.
        relabelled = (
            edges.join(by_key, on="key")
            .groupBy("node")
            .agg(F.min("key_component").alias("component"))
            .localCheckpoint()  # cut the lineage: each round would otherwise replan the last
        )
        changed = (
            relabelled.join(labels.withColumnRenamed("component", "before"), on="node")
            .filter(F.col("component") != F.col("before"))
            .count()
        )
        labels = relabelled
        if changed == 0:
            return labels
    return labels.select("node", F.lit(ALL_IN_ONE).alias("component"))
