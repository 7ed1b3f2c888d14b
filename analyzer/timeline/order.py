"""The latest earlier row: for each row of one frame, the last row of another frame with the
same key that came strictly before it in capture order (time, then record number).

Found by sorting the two frames together and carrying the last candidate forward, at a cost in
their sum. Joining every row to every candidate of its key and keeping the earlier ones costs
their product, and keys recur: a stream resumed k times met its k incarnations k times over; a
per-session counter id such as "17", issued in every session, met every resume whose cursor was
"17" once per session; a request id reused in a session key met every request with it
(`analyzer.timeline.answers`).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

__all__ = ["latest_before"]


def latest_before(
    rows: pl.LazyFrame,
    candidates: pl.LazyFrame,
    *,
    by: Sequence[str],
    on: tuple[str, str],
    candidate_on: tuple[str, str],
    other_than: tuple[str, str] | None = None,
) -> pl.LazyFrame:
    """`rows`, each with the other columns of the last of `candidates` with the same `by` values
    that came strictly before it (nulls when none did).

    `on` names a row's time and record number, `candidate_on` a candidate's: a candidate came
    before a row when its time is earlier, or the same and its number lower. Nulls compare as
    SQL does (a row with no time has no candidate; one without a number only those of an earlier
    time; a candidate without a time comes before no row, without a number only rows of a later
    time), as do null `by` values (no candidate). `candidates` carry the `by` columns under the
    same names; their other columns must not clash with the rows'. With `other_than=(row
    column, candidate column)`, only a candidate whose value there differs from the row's counts
    (neither null).
    """
    by = list(by)
    r_ts, r_seq = on
    c_ts, c_seq = candidate_on
    known = pl.all_horizontal(pl.col(by).is_not_null())
    rows = rows.with_row_index("_row").cache()  # read three times below: numbered once
    # Only the candidates of keys some row has are sorted (usually a few of them).
    cands = candidates.join(rows.select(by).filter(known).unique(), on=by, how="semi")
    if other_than is not None:
        cands = cands.filter(pl.col(other_than[1]).is_not_null())
    # Row numbers in the order candidates are compared in; within one key they are contiguous.
    cands = cands.sort([*by, c_ts, c_seq], nulls_last=True).with_row_index("_cand")
    mine: list[pl.Expr] = []
    if other_than is not None:
        # The last candidate before a run of candidates of one value: the latest of another.
        run = pl.col(other_than[1]).rle_id().over(by)
        start = pl.col("_cand").min().over([*by, run])
        cands = cands.with_columns(
            pl.when(start > pl.col("_cand").min().over(by)).then(start - 1).alias("_cand_other")
        )
        mine = [pl.col(other_than[0]).alias("_mine")]
    # Read up to three times below: numbered once (candidates tied in the sort would otherwise
    # be numbered in a different order by each read).
    cands = cands.cache()
    places = pl.concat(
        [
            rows.select(
                *by,
                pl.col(r_ts).alias("_ts"),
                # A row without a number comes before every candidate of its time.
                pl.col(r_seq).fill_null(-1).alias("_seq"),
                "_row",
                pl.lit(None, pl.UInt32).alias("_cand"),
                (known & pl.col(r_ts).is_not_null()).alias("_valid"),
                *mine,
            ),
            cands.select(
                *by,
                pl.col(c_ts).alias("_ts"),
                pl.col(c_seq).alias("_seq"),
                pl.lit(None, pl.UInt32).alias("_row"),
                "_cand",
            ),
        ],
        how="diagonal_relaxed",
    )
    latest = (
        # At the same time and number a row sorts before a candidate: only earlier ones count.
        places.sort([*by, "_ts", "_seq", pl.col("_row").is_null()], nulls_last=True)
        .with_columns(pl.col("_cand").forward_fill().over(by))
        .filter(pl.col("_row").is_not_null() & pl.col("_valid"))
    )
    if other_than is not None:
        latest = latest.join(
            cands.select("_cand", pl.col(other_than[1]).alias("_theirs"), "_cand_other"),
            on="_cand",
            how="left",
        ).with_columns(
            pl.when(pl.col("_mine").is_null())
            .then(None)
            .when(pl.col("_theirs") != pl.col("_mine"))
            .then("_cand")
            .otherwise("_cand_other")
            .alias("_cand")
        )
    chosen = latest.select("_row", "_cand")
    return (
        rows.join(chosen, on="_row", how="left")
        .join(cands.drop(by, "_cand_other", strict=False), on="_cand", how="left")
        .drop("_row", "_cand")
    )
