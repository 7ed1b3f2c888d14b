"""Tests for analyzer.capture.health: the stats line and the metrics endpoint."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from analyzer.capture.health import COUNTERS, GAUGES, MetricsServer, stats_line
from tests.support.proxy import free_port


def test_the_stats_line_names_every_counter_in_order() -> None:
    line = stats_line({"exchanges": 3, "sse_events": 12, "write_lag_seconds": 0.0421})
    assert line.startswith("exchanges=3 sse_events=12 bytes=0 written=0 dropped=0 ")
    assert line.endswith(" write_lag_seconds=0.042")
    assert [part.split("=")[0] for part in line.split()] == [*COUNTERS, *GAUGES]


def test_metrics_are_read_at_each_scrape_in_prometheus_text_format() -> None:
    values = {"exchanges": 1.0, "written": 5.0, "write_lag_seconds": 0.25}
    server = MetricsServer(lambda: values)
    port = free_port()
    server.start("127.0.0.1", port)
    try:

        def scrape() -> dict[str, float]:
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
            return {
                sample.name: sample.value
                for family in text_string_to_metric_families(text)
                for sample in family.samples
            }

        first = scrape()
        values["exchanges"] = 7.0
        second = scrape()
    finally:
        server.close()
    assert first["seamwatch_exchanges_total"] == 1
    assert second["seamwatch_exchanges_total"] == 7
    assert first["seamwatch_written_total"] == 5
    assert first["seamwatch_write_lag_seconds"] == 0.25
    assert first["seamwatch_dropped_total"] == 0  # every counter, even one not given
    assert set(first) == {f"seamwatch_{name}_total" for name in COUNTERS} | {
        f"seamwatch_{name}" for name in GAUGES
    }
