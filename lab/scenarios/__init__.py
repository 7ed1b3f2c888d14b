"""The lab's scenarios, in one explicit registry (`seamwatch lab list` prints it in this order)."""

from __future__ import annotations

from lab.framework import Scenario
from lab.scenarios import (
    clean_modern,
    clean_resume,
    clean_typescript,
    early_resume,
    legacy_cursor_carryover,
    modern_retry,
    resume_after_delete,
    ring_buffer_eviction,
    round_robin_replicas,
    superseded_stream,
    ttl_counter_reset,
)

SCENARIOS: tuple[Scenario, ...] = (
    # --- lab A: official-SDK servers and scripted clients ---
    clean_resume.SCENARIO,
    clean_modern.SCENARIO,
    legacy_cursor_carryover.SCENARIO,
    superseded_stream.SCENARIO,
    modern_retry.SCENARIO,
    # --- lab B: purpose-built servers, balancer, fault proxy, TypeScript ---
    clean_typescript.SCENARIO,
    round_robin_replicas.SCENARIO,
    ring_buffer_eviction.SCENARIO,
    ttl_counter_reset.SCENARIO,
    resume_after_delete.SCENARIO,
    early_resume.SCENARIO,
)


def by_name(name: str) -> Scenario | None:
    """The registered scenario called `name`, if any."""
    return next((scenario for scenario in SCENARIOS if scenario.name == name), None)
