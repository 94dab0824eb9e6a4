"""Prometheus metrics. One registry per process object (not the global one), so
tests can build many apps side by side."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector


class _RunStates(Collector):
    """Reads run counts by state from the store at scrape time."""

    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self._counts = counts

    def collect(self) -> list[Metric]:
        family = GaugeMetricFamily("debate_bot_runs", "Runs by state", labels=["state"])
        try:
            counts = self._counts()
        except Exception:  # a scrape must not fail because the database is down
            counts = {}
        for state, n in sorted(counts.items()):
            family.add_metric([state], n)
        return [family]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.deliveries = Counter(
            "debate_bot_deliveries",
            "Webhook deliveries by event and result",
            ["event", "result"],
            registry=r,
        )
        self.model_latency = Histogram(
            "debate_bot_model_latency_seconds",
            "Model call latency",
            ["provider", "status"],
            registry=r,
            buckets=(0.5, 1, 2, 5, 10, 20, 40, 80, 160),
        )
        self.model_tokens = Counter(
            "debate_bot_model_tokens", "Model tokens by kind", ["provider", "kind"], registry=r
        )
        self.github_calls = Counter(
            "debate_bot_github_calls",
            "GitHub REST calls",
            ["method", "route", "status"],
            registry=r,
        )
        self.redeliveries = Counter(
            "debate_bot_redeliveries",
            "Failed webhook deliveries GitHub was asked to redeliver, by outcome "
            "(requested, refused, failed)",
            ["outcome"],
            registry=r,
        )
        self.github_rate_remaining = Gauge(
            "debate_bot_github_rate_limit_remaining",
            "Last seen x-ratelimit-remaining",
            ["installation"],
            registry=r,
        )

    def watch_runs(self, counts: Callable[[], dict[str, int]]) -> None:
        self.registry.register(_RunStates(counts))

    def render(self) -> bytes:
        return generate_latest(self.registry)
