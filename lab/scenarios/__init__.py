"""The lab's scenarios, in one explicit registry (`seamwatch lab list` prints it in this order)."""

from __future__ import annotations

from lab.framework import Scenario
from lab.scenarios import (
    answered_twice,
    clean_concurrent,
    clean_era_fallback,
    clean_json_response,
    clean_legacy_sse,
    clean_modern,
    clean_python_client_typescript_server,
    clean_resume,
    clean_shared_replicas,
    clean_stateless,
    clean_stateless_shared_host,
    clean_typescript,
    clean_typescript_client,
    clean_typescript_pair,
    clean_typescript_stateless,
    cleared_final_response,
    cursor_past_end,
    cut_stream_typescript_client,
    dropped_response,
    early_resume,
    fresh_resume,
    legacy_cursor_carryover,
    lenient_headers,
    modern_retry,
    open_at_shutdown,
    response_on_get,
    resume_after_delete,
    resume_loop,
    ring_buffer_eviction,
    ring_buffer_typescript_client,
    round_robin_replicas,
    round_robin_typescript_client,
    sdk_get_stream_replay,
    shared_event_store,
    split_stream_id,
    superseded_stream,
    ttl_counter_reset,
    unshared_event_store,
)

SCENARIOS: tuple[Scenario, ...] = (
    # --- lab A: official-SDK servers and scripted clients ---
    clean_resume.SCENARIO,
    clean_modern.SCENARIO,
    legacy_cursor_carryover.SCENARIO,
    superseded_stream.SCENARIO,
    sdk_get_stream_replay.SCENARIO,
    shared_event_store.SCENARIO,
    modern_retry.SCENARIO,
    clean_legacy_sse.SCENARIO,
    clean_stateless.SCENARIO,
    clean_stateless_shared_host.SCENARIO,
    clean_json_response.SCENARIO,
    open_at_shutdown.SCENARIO,
    clean_concurrent.SCENARIO,
    # --- lab B: purpose-built servers, balancer, fault proxy, TypeScript ---
    clean_typescript.SCENARIO,
    clean_typescript_client.SCENARIO,
    clean_typescript_pair.SCENARIO,
    clean_python_client_typescript_server.SCENARIO,
    clean_typescript_stateless.SCENARIO,
    clean_era_fallback.SCENARIO,
    round_robin_replicas.SCENARIO,
    round_robin_typescript_client.SCENARIO,
    clean_shared_replicas.SCENARIO,
    ring_buffer_eviction.SCENARIO,
    ring_buffer_typescript_client.SCENARIO,
    ttl_counter_reset.SCENARIO,
    resume_after_delete.SCENARIO,
    early_resume.SCENARIO,
    response_on_get.SCENARIO,
    resume_loop.SCENARIO,
    answered_twice.SCENARIO,
    dropped_response.SCENARIO,
    cut_stream_typescript_client.SCENARIO,
    fresh_resume.SCENARIO,
    lenient_headers.SCENARIO,
    # --- issue #26: resumption bugs reported against MCP SDKs (lab.faults.bugs) ---
    split_stream_id.SCENARIO,
    cleared_final_response.SCENARIO,
    unshared_event_store.SCENARIO,
    cursor_past_end.SCENARIO,
)


def by_name(name: str) -> Scenario | None:
    """The registered scenario called `name`, if any."""
    return next((scenario for scenario in SCENARIOS if scenario.name == name), None)
