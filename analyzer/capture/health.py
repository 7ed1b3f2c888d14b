"""The capture's health as a long-running daemon shows it: a stats line and Prometheus metrics.

Like Zeek's and Suricata's stats: counts only (exchanges, SSE events, bytes, records written,
dropped and redacted, files, retention's deletions) and the write lag, never a payload, a path
or a header value. The capture worker (`analyzer.capture.worker`) owns the numbers; the stats
line goes to the stderr it shares with the proxy, and `--metrics` serves them in Prometheus
text format from a thread of the worker, read at each scrape.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["COUNTERS", "GAUGES", "MetricsServer", "stats_line"]

#: The counters, in stats-line order, with their help text; `seamwatch_<name>_total` on /metrics.
COUNTERS: Mapping[str, str] = {
    "exchanges": "HTTP requests recorded",
    "sse_events": "Server-Sent Events recorded (events completed by a blank line)",
    "bytes": "bytes of bodies and SSE streams recorded, as they passed the proxy",
    "written": "capture records written to disk",
    "dropped": "capture records dropped (queue full, or given up after failed writes)",
    "redacted": "credentials replaced by the redactor",
    "addon_errors": "errors of the capture path",
    "files": "capture files opened",
    "files_deleted": "capture files deleted by retention (--max-size, --max-age)",
}
#: The gauges, with their help text; `seamwatch_<name>` on /metrics.
GAUGES: Mapping[str, str] = {
    "write_lag_seconds": "time from the proxy seeing traffic to its records being on disk",
}


def stats_line(values: Mapping[str, float]) -> str:
    """`exchanges=12 sse_events=340 ... write_lag_seconds=0.051`: one line, counts only."""
    parts = [f"{name}={int(values.get(name, 0))}" for name in COUNTERS]
    parts += [f"{name}={values.get(name, 0.0):.3f}" for name in GAUGES]
    return " ".join(parts)


@dataclass
class MetricsServer:
    """`/metrics` in Prometheus text format, served from a daemon thread until `close`."""

    read: Callable[[], Mapping[str, float]]
    server: Any = None
    thread: Any = None

    def start(self, host: str, port: int) -> None:
        """Listen on host:port (OSError when it cannot)."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self.read))
        self.server, self.thread = start_http_server(port, host, registry=registry)

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


class _Collector(Collector):
    """Reads the worker's numbers at each scrape: nothing is kept twice."""

    def __init__(self, read: Callable[[], Mapping[str, float]]) -> None:
        self.read = read

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        values = self.read()
        for name, text in COUNTERS.items():
            yield CounterMetricFamily(f"seamwatch_{name}", text, value=values.get(name, 0))
        for name, text in GAUGES.items():
            yield GaugeMetricFamily(f"seamwatch_{name}", text, value=values.get(name, 0.0))
