"""Snapshots shared by the runs of one process, one fetch per commit, evicted by size.

Fifty runs arbitrating comments on the same PR head hold one snapshot, not
fifty: the first run's ``get`` builds it and the others wait for that build
(one in-flight fetch per key). Held snapshots are evicted least recently used
once their sizes (``Snapshot.nbytes``, which grows as a lazy snapshot loads
files) pass ``max_bytes``. A run keeps its own reference, so eviction never
pulls a snapshot from under a run that is reading it; it only stops new runs
from finding it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

from bot.repo.snapshot import Snapshot

Key = tuple[str, str]  # ("owner/name" lowercased, commit sha)


@dataclass
class _Flight:
    done: anyio.Event = field(default_factory=anyio.Event)
    snapshot: Snapshot | None = None
    error: BaseException | None = None


class SnapshotCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._held: OrderedDict[Key, Snapshot] = OrderedDict()
        self._flights: dict[Key, _Flight] = {}
        self.builds = 0  # snapshots built (fetched), for tests and benchmarks

    @staticmethod
    def key(repo: str, commit: str) -> Key:
        return (repo.lower(), commit.lower())

    @property
    def held_bytes(self) -> int:
        return sum(s.nbytes for s in self._held.values())

    def __contains__(self, key: Key) -> bool:
        return key in self._held

    async def get(self, key: Key, build: Callable[[], Awaitable[Snapshot]]) -> Snapshot:
        """The snapshot for ``key``: held, being built (wait for it) or built now.
        A failed build is raised to every run waiting on it and not remembered; a
        cancelled one (its run was cancelled) is taken over by a run still waiting."""
        while True:
            held = self._held.get(key)
            if held is not None:
                self._held.move_to_end(key)
                return held
            flight = self._flights.get(key)
            if flight is None:
                break
            await flight.done.wait()
            if flight.error is not None:
                raise flight.error
            if flight.snapshot is not None:
                return flight.snapshot
        flight = _Flight()
        self._flights[key] = flight
        try:
            snapshot = await build()
        except Exception as exc:
            flight.error = exc
            raise
        finally:
            del self._flights[key]
            flight.done.set()
        flight.snapshot = snapshot
        self.builds += 1
        self._held[key] = snapshot
        self._evict()
        return snapshot

    def _evict(self) -> None:
        """Oldest first until the rest fits (the newest too, if it alone does not)."""
        total = self.held_bytes
        while self._held and total > self.max_bytes:
            _, dropped = self._held.popitem(last=False)
            total -= dropped.nbytes
