"""Prometheus metrics. One registry per process object (not the global one), so
tests can build many apps side by side."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector


def github_error_kind(status: int, rate_limited: bool = False) -> str | None:
    """The class of a failed GitHub call for ``debate_bot_github_errors`` (None: no
    error). ``rate_limited``: the session judged it a rate limit (a 403 is also
    GitHub's refusal: a missing permission, a locked issue)."""
    if status == 0:
        return "no_response"
    if rate_limited or status == 429:
        return "rate_limited"
    if status >= 500:
        return "server"
    if status >= 400 and status != 404:  # 404 is the answer to "does it exist?"
        return "client"
    return None


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


_HEALTH_HELP: Final = {
    "oldest_queued_age_seconds": "Age of the oldest queued run (0: none queued)",
    "expired_leases": "Running runs whose lease lapsed: their worker died or hangs",
    "resumed_active": "Active runs on a second or later attempt",
}


class _StoreFigures(Collector):
    """Figures the store reads at scrape time (``run_health()``,
    ``delivery_backlog()``) as gauges named ``<prefix><figure>``."""

    def __init__(
        self, prefix: str, helps: dict[str, str], read: Callable[[], dict[str, float]]
    ) -> None:
        self._prefix, self._helps, self._read = prefix, helps, read

    def collect(self) -> list[Metric]:
        try:
            figures = self._read()
        except Exception:  # a scrape must not fail because the database is down
            return []
        return [
            GaugeMetricFamily(self._prefix + name, help_text, value=figures[name])
            for name, help_text in self._helps.items()
            if name in figures
        ]


# A backlog with no worker shows here while every run gauge stays at 0.
_BACKLOG_HELP: Final = {
    "pending": "Webhook deliveries stored and waiting for a worker",
    "oldest_pending_age_seconds": "Age of the oldest pending delivery (0: none pending)",
}


class _RateLimits(Collector):
    def __init__(self, remaining: Callable[[], dict[int, int]]) -> None:
        self._remaining = remaining

    def collect(self) -> list[Metric]:
        family = GaugeMetricFamily(
            "debate_bot_github_rate_limit_remaining",
            "Last seen x-ratelimit-remaining",
            labels=["installation"],
        )
        for installation, left in sorted(self._remaining().items()):
            family.add_metric([str(installation)], left)
        return [family]


class _Spend(Collector):
    """The spend ledger at scrape time (docs/operations.md, "Money"):
    ``debate_bot_spend_usd_total`` per installation, repository and model, and
    each installation's monthly budget and what is left of it."""

    def __init__(
        self,
        totals: Callable[[], Iterable[tuple[int | None, str, str, float]]],
        month: Callable[[], dict[int, float]],
        limit: float | None,
    ) -> None:
        self._totals = totals
        self._month = month
        self._limit = limit

    def collect(self) -> list[Metric]:
        spend = CounterMetricFamily(
            "debate_bot_spend_usd",
            "Model spend in USD from the ledger",
            labels=["installation", "repository", "model"],
        )
        families: list[Metric] = [spend]
        try:
            for installation, repo, model, usd in self._totals():
                spend.add_metric(
                    ["" if installation is None else str(installation), repo, model], usd
                )
            month = self._month() if self._limit is not None else {}
        except Exception:  # a scrape must not fail because the database is down
            return families
        if self._limit is not None:
            limit = GaugeMetricFamily(
                "debate_bot_budget_limit_usd",
                "Monthly budget per installation (DEBATE_BOT_BUDGET_INSTALLATION_MONTH_USD)",
            )
            limit.add_metric([], self._limit)
            remaining = GaugeMetricFamily(
                "debate_bot_budget_remaining_usd",
                "Monthly budget left per installation: the limit less this month's spend "
                "and the active runs' reservations",
                labels=["installation"],
            )
            for installation, used in sorted(month.items()):
                remaining.add_metric([str(installation)], self._limit - used)
            families += [limit, remaining]
        return families


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
        self.github_errors = Counter(
            "debate_bot_github_errors",
            "GitHub calls that failed, by class: rate_limited (403/429), client (4xx), "
            "server (5xx), no_response",
            ["kind"],
            registry=r,
        )
        self.model_errors = Counter(
            "debate_bot_model_errors",
            "Dropped model turns by provider and class (timeout, rate_limited, ...)",
            ["provider", "drop_class"],
            registry=r,
        )
        self._evidence(r)

    def _evidence(self, r: CollectorRegistry) -> None:
        """Repository tools and citations (bot/run/tool_loop.py)."""
        self.tool_calls = Counter(
            "debate_bot_tool_calls",
            "Repository tool calls by tool and result (ok, refused, over_budget)",
            ["tool", "result"],
            registry=r,
        )
        self.tool_bytes = Counter(
            "debate_bot_tool_bytes_read", "Bytes of repository content the tools read", registry=r
        )
        self.tool_files = Counter(
            "debate_bot_tool_files_read", "Files read per turn, summed over turns", registry=r
        )
        self.citations = Counter(
            "debate_bot_citations",
            "Code citations by check result (verified, repaired, unverified)",
            ["status"],
            registry=r,
        )
        self.tool_static_turns = Counter(
            "debate_bot_tool_static_turns",
            "Turns answered from the prompt alone because the server refused tools",
            registry=r,
        )

    def watch_runs(
        self,
        counts: Callable[[], dict[str, int]],
        health: Callable[[], dict[str, float]] | None = None,
    ) -> None:
        self.registry.register(_RunStates(counts))
        if health is not None:
            self.registry.register(_StoreFigures("debate_bot_runs_", _HEALTH_HELP, health))

    def watch_deliveries(self, backlog: Callable[[], dict[str, float]]) -> None:
        """``debate_bot_deliveries_pending`` and ``…_oldest_pending_age_seconds``."""
        self.registry.register(_StoreFigures("debate_bot_deliveries_", _BACKLOG_HELP, backlog))

    def watch_rate_limits(self, remaining: Callable[[], dict[int, int]]) -> None:
        """``debate_bot_github_rate_limit_remaining``: the last x-ratelimit-remaining
        seen per installation, read at scrape time."""
        self.registry.register(_RateLimits(remaining))

    def watch_spend(
        self,
        totals: Callable[[], Iterable[tuple[int | None, str, str, float]]],
        month: Callable[[], dict[int, float]],
        limit: float | None,
    ) -> None:
        """Spend and budget remaining, read from the store at scrape time."""
        self.registry.register(_Spend(totals, month, limit))

    def render(self) -> bytes:
        return generate_latest(self.registry)
