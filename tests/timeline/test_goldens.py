"""Golden timelines: stored lab captures → reviewed expected frames, plus invariants.

Layout (one folder per scenario):

    tests/timeline/goldens/<scenario>/capture/*.jsonl     the capture, as the proxy wrote it
    tests/timeline/goldens/<scenario>/expected/<frame>.parquet
                                                         reviewed timeline frames

Adding one: run the lab scenario through the real proxy in front of the real `mcp` SDK server
(`seamwatch lab run <scenario> --out OUT`), copy its capture files into
`goldens/<scenario>/capture/`, then write the expected frames with the explicit command

    .venv/bin/python -m tests.timeline.test_goldens --regenerate <scenario>

and review them (`polars.read_parquet(...)`) before committing. Goldens are never rewritten by
a test run. Each golden is also checked against invariants that do not come from the golden:
every resolved resume belongs to a stream of its own session, every delivered response has
its request, and the event and exchange counts match a plain reading of the capture's lines.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analyzer.analysis import read_timeline
from analyzer.record_models import Body
from analyzer.schema import TIMELINE_FRAMES
from analyzer.sse import decode_all
from analyzer.timeline import Timeline

GOLDENS = Path(__file__).parent / "goldens"
SCENARIOS = (
    sorted(p.name for p in GOLDENS.iterdir() if (p / "capture").is_dir())
    if GOLDENS.is_dir()
    else []
)


def _canonical(frame: pl.DataFrame) -> pl.DataFrame:
    """Rows in a stable order (frames with unspecified order are sorted on every column)."""
    key = [c for c, t in frame.schema.items() if not isinstance(t, pl.List | pl.Struct)]
    return frame.sort(key, nulls_last=True)


def _timeline(scenario: str) -> Timeline:
    return read_timeline([GOLDENS / scenario / "capture"], cache=False)


def regenerate(scenario: str) -> None:
    """Write the expected frames of one scenario (explicit command only)."""
    expected = GOLDENS / scenario / "expected"
    expected.mkdir(exist_ok=True)
    for name, frame in _timeline(scenario).frames().items():
        _canonical(frame.collect()).write_parquet(expected / f"{name}.parquet")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_frames_match_the_golden(scenario: str) -> None:
    timeline = _timeline(scenario)
    for name in TIMELINE_FRAMES:
        path = GOLDENS / scenario / "expected" / f"{name}.parquet"
        got = _canonical(timeline.frames()[name].collect())
        assert_frame_equal(got, pl.read_parquet(path), check_exact=True)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_invariants(scenario: str) -> None:
    timeline = _timeline(scenario)
    resumptions = timeline.resumptions.collect()
    streams = timeline.streams.collect()
    resolved = resumptions.filter(pl.col("status") == "resolved").join(
        streams.select("stream_id", pl.col("session_id").alias("stream_session")),
        on="stream_id",
        how="left",
    )
    assert (resolved["stream_session"] == resolved["session_id"]).all()

    messages = timeline.messages.collect()
    requests = messages.filter((pl.col("direction") == "c2s") & (pl.col("kind") == "request"))
    responses = messages.filter(
        (pl.col("direction") == "s2c") & pl.col("kind").is_in(["response", "error"])
    ).filter(pl.col("rpc_id") != "null")
    orphans = responses.join(requests, on=["session_id", "rpc_id"], how="anti")
    assert orphans.height == 0, orphans

    blocks, requests_seen = _transcript(GOLDENS / scenario / "capture")
    assert timeline.sse_events.collect().height == blocks
    assert timeline.exchanges.collect().height == requests_seen


def _transcript(folder: Path) -> tuple[int, int]:
    """SSE blocks and requests in the capture, read with json.loads alone (no analyzer ingest)."""
    streams: dict[str, bytes] = defaultdict(bytes)
    requests = 0
    for path in sorted(folder.glob("*.jsonl*")):
        for line in path.read_bytes().splitlines():
            record = json.loads(line)
            if record["kind"] == "chunk":
                streams[record["flow"]] += Body(**record["data"]).raw()
            elif record["kind"] == "request":
                requests += 1
    return sum(len(decode_all(data)) for data in streams.values()), requests


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Rewrite golden expected frames (review them!)")
    parser.add_argument("--regenerate", nargs="+", metavar="SCENARIO", required=True)
    for name in parser.parse_args().regenerate:
        if not (GOLDENS / name / "capture").is_dir():
            sys.exit(f"no capture at {GOLDENS / name / 'capture'}")
        regenerate(name)
        print(f"wrote {GOLDENS / name / 'expected'}")


def test_goldens_are_stored() -> None:
    assert SCENARIOS, f"no golden capture under {GOLDENS}"


def test_a_frame_that_differs_from_its_golden_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison itself, on a built capture whose stored golden lost a row."""
    from tests.support import traffic

    capture = tmp_path / "demo" / "capture"
    capture.mkdir(parents=True)
    lines = [json.dumps(r) + "\n" for r in traffic.capture_records()]
    (capture / "c.jsonl").write_text("".join(lines))
    monkeypatch.setattr(sys.modules[__name__], "GOLDENS", tmp_path)
    regenerate("demo")
    golden = tmp_path / "demo" / "expected" / "sse_events.parquet"
    frame = pl.read_parquet(golden)
    assert frame.height > 1
    frame.head(frame.height - 1).write_parquet(golden)
    with pytest.raises(AssertionError):
        test_frames_match_the_golden("demo")
