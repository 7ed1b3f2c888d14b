"""Connected components of the flow groups that cross-session links relate, computed in Spark.

The third stage judges related sessions together; sessions are related through the keys of
`analyzer.spark.links` they share (a cursor, a counter prefix, a tool-call key...). Judging the
related groups of a capture in one task holds them all in one worker; a component (the groups
linked, directly or through others, by shared keys) is what one judgement needs, and
components are independent of one another.

Label propagation over the bipartite graph of keys and groups, by joins: each group starts
with its own name as label; each round a key takes the least label of its groups and a group
the least label of its keys. A component's label then spreads one key-hop a round, so the
rounds are bounded by the longest chain of keys, and every round is two joins and two
aggregations: nothing is collected on the driver but the count of labels that changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["ALL_IN_ONE", "MAX_ROUNDS", "components"]

#: Rounds before the fallback: a chain of keys longer than this is rare (each hop is a session
#: sharing a key with the next), and the fallback is still correct.
MAX_ROUNDS: Final = 24
#: The label of every group when the labels did not settle within the rounds: one component,
#: judged in one task (correct, as every related group is judged with every other).
ALL_IN_ONE: Final = "*"


def components(memberships: DataFrame, *, max_rounds: int = MAX_ROUNDS) -> DataFrame:
    """`node, component` of every node of `memberships` (rows `key, node`: a key relates the
    nodes that hold it): `component` is the least node connected to it through shared keys,
    or `ALL_IN_ONE` for every node when that did not settle within `max_rounds`."""
    from pyspark.sql import functions as F

    edges = memberships.select("key", "node").distinct().persist()
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
            edges.unpersist()
            return labels
    edges.unpersist()
    return labels.select("node", F.lit(ALL_IN_ONE).alias("component"))
