"""The matrix's axes: validity, the generator and the per-seed sampler."""

from __future__ import annotations

import dataclasses

import pytest

from lab.matrix.variants import (
    CHUNKINGS,
    ERAS,
    ID_SCHEMES,
    KINDS,
    MODERN_ERA,
    REISSUE,
    Variant,
    all_variants,
    sample,
    valid,
)

BASE = Variant(
    ids="counter",
    seen=2,
    progress="total",
    answer="full",
    owed=True,
    cursor="last",
    replica="same",
    era="2025-11-25",
    chunking="one",
    tool="slow_report",
)


@pytest.mark.parametrize(
    ("change", "ok"),
    [
        ({}, True),
        ({"seen": 0}, True),  # the priming event is the cursor
        ({"seen": 0, "era": "2025-06-18"}, False),  # no priming event: nothing to resume from
        ({"seen": 0, "cursor": "lagging"}, False),  # one id before the cut: nothing lags
        ({"seen": 1, "cursor": "lagging"}, True),  # priming, then one message
        ({"seen": 1, "cursor": "lagging", "era": "2025-03-26"}, False),
        ({"ids": "constant", "cursor": "lagging"}, False),
        ({"owed": False}, False),  # the GET stream carries no progress
        ({"owed": False, "progress": "none"}, True),
        ({"owed": False, "progress": "none", "tool": "create_ticket"}, False),
        ({"answer": REISSUE}, False),  # sessioned eras resume
        ({"era": MODERN_ERA}, False),  # 2026 has no resume
        ({"era": MODERN_ERA, "answer": REISSUE}, True),
        ({"era": MODERN_ERA, "answer": REISSUE, "replica": "other"}, False),
        ({"chunking": "brotli"}, False),
        ({"answer": "stall"}, True),
        ({"cut": "early"}, True),
        ({"cut": "server", "era": "2025-03-26"}, False),  # the retry rides on a priming event
        ({"answer": "stall", "era": "2025-06-18"}, False),  # no priming: the same as empty
        ({"answer": "after-delete", "cut": "early"}, True),
        ({"answer": "superseded"}, False),  # a newer GET stream replaces only a GET stream
        ({"answer": "superseded", "owed": False, "progress": "none"}, True),
        ({"answer": "carried-cursor", "replica": "other"}, True),
        ({"answer": "carried-cursor", "cut": "server"}, False),  # no resume of its own to wait
        ({"answer": "response-on-get"}, True),
        ({"answer": "response-on-get", "cursor": "lagging"}, False),  # no cut, no cursor
        ({"answer": "response-on-get", "owed": False, "progress": "none"}, False),
        ({"answer": "after-delete", "era": MODERN_ERA}, False),  # 2026 has no session
    ],
)
def test_valid(change: dict[str, object], ok: bool) -> None:
    assert valid(dataclasses.replace(BASE, **change)) is ok  # type: ignore[arg-type]


def test_names_follow_the_axes() -> None:
    assert BASE.name == dataclasses.replace(BASE).name
    assert BASE.name.startswith("mx-") and len(BASE.name) == 11
    assert BASE.name != dataclasses.replace(BASE, chunking="gzip").name


def test_json_round_trip_and_refusals() -> None:
    assert Variant.from_json(BASE.to_json()) == BASE
    with pytest.raises(ValueError):
        Variant.from_json({**BASE.to_json(), "seen": 0, "era": "2025-03-26"})
    with pytest.raises(ValueError):
        Variant.from_json({**BASE.to_json(), "extra": 1})


def test_generator_walks_every_axis_value_and_only_valid_variants() -> None:
    variants = list(all_variants())
    assert all(valid(v) for v in variants)
    assert len(set(variants)) == len(variants)
    assert {v.ids for v in variants} == set(ID_SCHEMES)
    assert {v.answer for v in variants} == set(KINDS)
    assert {v.era for v in variants} == set(ERAS)
    assert {v.chunking for v in variants} == set(CHUNKINGS)
    assert {v.seen for v in variants} == {0, 1, 2, 5}


def test_sample_is_deterministic_per_seed() -> None:
    assert sample(30, 5) == sample(30, 5)
    assert sample(30, 5) != sample(30, 6)
    assert sample(10, 5) == sample(30, 5)[:10]


def test_sample_is_distinct_valid_and_covers_every_kind() -> None:
    drawn = sample(len(KINDS), 11)
    assert all(valid(v) for v in drawn)
    assert len({v.name for v in drawn}) == len(drawn)
    assert [v.answer for v in drawn] == list(KINDS)
