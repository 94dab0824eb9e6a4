"""Fair turns at a scarce resource: a model endpoint's capacity (bot/models/gate.py)
and an installation's GitHub writes (bot/github/pacing.py).

Waiting work is served round-robin across installations, in virtual time
(start-time fair queueing, one unit a turn): each installation's next turn is
stamped with the later of the virtual time (the stamp last served) and the end
of its own last turn (its stamp plus one), and the smallest stamp goes first.
An installation with fifty runs waiting therefore gets one turn in for every
one of an installation with a single run, and one that was idle joins at the
current virtual time, with no credit saved up. Ties, and the order within an
installation, go to the run that started first: a debate in progress finishes
its rounds before newer debates' openings take the resource, so results arrive
steadily instead of all at the end. With one installation (a pacer's queue),
that is oldest run first, then arrival order.

Selection scans the installations that have work waiting (a queue exists only
while the resource is short).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Share:
    """Whose call it is: the installation and run, and when the run started
    (seconds since the epoch; earlier goes first within equal shares)."""

    installation: int | None = None
    run: str | None = None
    since: float = 0.0


@dataclass(order=True)
class _Entry(Generic[T]):
    since: float
    seq: int
    item: T = field(compare=False)
    live: bool = field(default=True, compare=False)


class FairQueue(Generic[T]):
    def __init__(self) -> None:
        self._clock = 0  # the virtual time: the stamp last served
        self._ends: dict[int | None, int] = {}  # each installation's last stamp, plus one
        self._waiting: dict[int | None, list[_Entry[T]]] = {}
        self._seq = itertools.count()
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def push(self, share: Share, item: T, *, seq: int | None = None) -> _Entry[T]:
        """Queue ``item``; ``seq`` keeps an earlier place in line (a call sent
        back by a rate limit keeps its turn). The entry returned can be dropped."""
        entry = _Entry(share.since, next(self._seq) if seq is None else seq, item)
        heapq.heappush(self._waiting.setdefault(share.installation, []), entry)
        self._len += 1
        return entry

    def drop(self, entry: _Entry[T]) -> None:
        """Take a waiter out (its caller gave up); removed lazily."""
        if entry.live:
            entry.live = False
            self._len -= 1

    def _head(self, installation: int | None) -> _Entry[T] | None:
        heap = self._waiting[installation]
        while heap and not heap[0].live:
            heapq.heappop(heap)
        if not heap:
            del self._waiting[installation]
            return None
        return heap[0]

    def _stamp(self, installation: int | None) -> int:
        return max(self._clock, self._ends.get(installation, 0))

    def _next(self) -> tuple[int | None, _Entry[T]] | None:
        best: tuple[tuple[int, float, int], int | None, _Entry[T]] | None = None
        for installation in list(self._waiting):
            head = self._head(installation)
            if head is None:
                continue
            key = (self._stamp(installation), head.since, head.seq)
            if best is None or key < best[0]:
                best = (key, installation, head)
        return None if best is None else (best[1], best[2])

    def peek(self) -> tuple[T, int] | None:
        """The next item and its place in line, not taken."""
        found = self._next()
        return None if found is None else (found[1].item, found[1].seq)

    def pop(self) -> tuple[T, int] | None:
        """Take the next item (and its place in line, for a later ``push``)."""
        found = self._next()
        if found is None:
            return None
        installation, entry = found
        self._clock = self._stamp(installation)
        self._ends[installation] = self._clock + 1
        heapq.heappop(self._waiting[installation])
        if not self._waiting[installation]:
            del self._waiting[installation]
        entry.live = False
        self._len -= 1
        if not self._waiting:
            # Nobody waits: stamps restart, so the dict does not grow with every
            # installation ever seen.
            self._ends.clear()
            self._clock = 0
        return entry.item, entry.seq
