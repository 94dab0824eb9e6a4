"""What admission exchanges with the store: the sums it asks for and reads,
and the decision the store acts on.

The policy is the run layer's (``bot/run/admission.py``) and is passed in to
``create_run`` as an :class:`Admission`; the store takes the locks, counts what
its :class:`Tally` asks for, and calls it inside the insert's transaction, so
two commands at once cannot both take the last run or the last dollars.
Imports only the standard library and ``bot.core.errors``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from bot.core.errors import AdmissionRefused


@dataclass(frozen=True)
class Tally:
    """What to count under the admission locks (nothing by default)."""

    # Runs created in the repository at or after this (all, and the requester's).
    runs_since: datetime | None = None
    # This month's spend and active runs' holds: the repository's, the installation's
    # (whose lock is taken too, when the run has an installation).
    repo_month: bool = False
    installation_month: bool = False


@dataclass(frozen=True)
class Used:
    """What the store counted under its lock: runs created since the tally's
    ``runs_since`` (all, and the requester's), and spend this month with the
    active runs' reservations (the repository's and the installation's)."""

    repo_runs: int = 0
    user_runs: int = 0
    repo_month_usd: float = 0.0
    installation_month_usd: float = 0.0


@dataclass(frozen=True)
class Admitted:
    """Start the run; ``cap_usd`` (None: uncapped) is its ``max_cost_usd`` and
    ``reserved_usd`` what it holds against the budgets until it ends."""

    cap_usd: float | None
    reserved_usd: float


class Admission(Protocol):
    """A run's admission as ``create_run`` runs it, inside its transaction."""

    @property
    def tally(self) -> Tally: ...

    def decide(self, used: Used, now: datetime) -> Admitted | AdmissionRefused:
        """Admit with a cap, or the refusal ``create_run`` raises (``now``: the
        store's clock)."""
        ...


def month_start(now: datetime) -> datetime:
    """The first instant of ``now``'s UTC month: where monthly budgets reset."""
    now = now.astimezone(UTC)
    return datetime(now.year, now.month, 1, tzinfo=UTC)


def next_month(start: datetime) -> datetime:
    """The first instant of the UTC month after the one ``start`` falls in."""
    start = start.astimezone(UTC)
    if start.month == 12:
        return datetime(start.year + 1, 1, 1, tzinfo=UTC)
    return datetime(start.year, start.month + 1, 1, tzinfo=UTC)
