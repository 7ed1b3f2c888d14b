"""Detectors: the explicit registry of every detector module's row (DESIGN.md §5).

A detector is one module of this package holding a pure `detect(timeline, *, <thresholds with
defaults>) -> LazyFrame` and a `DETECTOR = Detector(...)` row (`analyzer.detection`, which
imports no detector); `DETECTORS` below lists every row, and a test checks that no module is
left out (STYLE.md item 8). The runner and the configuration checks of `analyzer.detection`
are bound here to this registry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Final

import analyzer.detection as detection
import analyzer.detectors.analysis_error as analysis_error
import analyzer.detectors.capture_health as capture_health
import analyzer.detectors.causal_gap as causal_gap
import analyzer.detectors.counter_reset as counter_reset
import analyzer.detectors.cross_replica_resume as cross_replica_resume
import analyzer.detectors.cross_session_replay as cross_session_replay
import analyzer.detectors.cross_stream_replay as cross_stream_replay
import analyzer.detectors.double_delivery as double_delivery
import analyzer.detectors.duplicate_event_id as duplicate_event_id
import analyzer.detectors.duplicate_response as duplicate_response
import analyzer.detectors.header_mismatch as header_mismatch
import analyzer.detectors.lost_response as lost_response
import analyzer.detectors.orphaned_incarnation as orphaned_incarnation
import analyzer.detectors.phantom_resume as phantom_resume
import analyzer.detectors.reconnect_storm as reconnect_storm
import analyzer.detectors.repeated_tool_call as repeated_tool_call
import analyzer.detectors.response_on_get_stream as response_on_get_stream
import analyzer.detectors.resume_after_termination as resume_after_termination
import analyzer.detectors.resume_loop as resume_loop
import analyzer.detectors.retry_violation as retry_violation
import analyzer.detectors.stale_cursor as stale_cursor
import analyzer.detectors.superseded_stream as superseded_stream
from analyzer.detection import ANALYSIS_ERROR, ConfigError, Detector, DetectorConfig

__all__ = [
    "ANALYSIS_ERROR",
    "CROSS_SESSION",
    "DETECTORS",
    "PER_SESSION",
    "ConfigError",
    "Detector",
    "DetectorConfig",
    "load_config",
    "run_detectors",
    "select_detectors",
    "validate_config",
]

#: Every detector, in no particular order (reports sort findings themselves). A new detector
#: module adds its row here.
DETECTORS: Final[tuple[Detector, ...]] = (
    analysis_error.DETECTOR,
    capture_health.DETECTOR,
    causal_gap.DETECTOR,
    counter_reset.DETECTOR,
    phantom_resume.DETECTOR,
    cross_replica_resume.DETECTOR,
    duplicate_event_id.DETECTOR,
    stale_cursor.DETECTOR,
    superseded_stream.DETECTOR,
    repeated_tool_call.DETECTOR,
    retry_violation.DETECTOR,
    resume_after_termination.DETECTOR,
    resume_loop.DETECTOR,
    header_mismatch.DETECTOR,
    cross_stream_replay.DETECTOR,
    cross_session_replay.DETECTOR,
    duplicate_response.DETECTOR,
    lost_response.DETECTOR,
    response_on_get_stream.DETECTOR,
    reconnect_storm.DETECTOR,
    double_delivery.DETECTOR,
    orphaned_incarnation.DETECTOR,
)

#: `analyzer.detection`'s runner and selection over this registry (`detectors=` chooses others).
select_detectors: Final = partial(detection.select_detectors, detectors=DETECTORS)
run_detectors: Final = partial(detection.run_detectors, detectors=DETECTORS)

#: The detectors whose findings on a session may depend on other sessions' traffic, by id; every
#: other detector judges each session from that session's frames alone. An engine that splits
#: the work by session (`analyzer.spark`) runs these where the sessions they relate meet; the
#: single-machine engine sees every session at once. Why each one looks past its session:
CROSS_SESSION: Final[frozenset[str]] = frozenset(
    {
        # The inputs' reports (losses, torn lines) belong to no session.
        capture_health.DETECTOR.id,
        # A counter's skipped numbers that no event anywhere in the capture carries; another
        # session's numbers under the same prefix.
        causal_gap.DETECTOR.id,
        # Events another session received, replayed on this session's resume.
        cross_session_replay.DETECTOR.id,
        # A resume's answers that another session received too are not this session's.
        duplicate_response.DETECTOR.id,
        # The client's next session; tool annotations from any session's `tools/list`.
        repeated_tool_call.DETECTOR.id,
        # A cursor issued in another session (DESIGN.md §2: cursors resolve within a session).
        stale_cursor.DETECTOR.id,
    }
)

#: The registry split in two by `CROSS_SESSION`, in registry order.
PER_SESSION: Final[tuple[Detector, ...]] = tuple(
    det for det in DETECTORS if det.id not in CROSS_SESSION
)


def load_config(path: Path, detectors: Iterable[Detector] = DETECTORS) -> DetectorConfig:
    """`analyzer.detection.load_config` over this registry unless given other detectors."""
    return detection.load_config(path, detectors)


def validate_config(
    config: Mapping[str, object], detectors: Iterable[Detector] = DETECTORS
) -> DetectorConfig:
    """`analyzer.detection.validate_config` over this registry unless given other detectors."""
    return detection.validate_config(config, detectors)
