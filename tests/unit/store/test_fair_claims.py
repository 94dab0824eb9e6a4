"""Run claims are fair across installations (docs/operations.md, "Model capacity"):
one installation's burst does not hold back another's run queued after it.
On SQLite and on PostgreSQL (the ``postgres`` half needs its test server)."""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from datetime import timedelta

from bot.engine.types import DebateSpec
from bot.store import NewRun, RunStore
from bot.store.rows import RunRow
from testkit.harness.stores import FakeClock, race
from testkit.harness.stores import clock as clock
from testkit.harness.stores import db_url as db_url
from testkit.harness.stores import pg_url as pg_url
from testkit.harness.stores import store as store

LEASE = 30.0
A, B, C = 101, 202, 303
SPEC = DebateSpec(mode="debate", title="t", subject="s")
ISSUES = itertools.count(1)


def queue(store: RunStore, clock: FakeClock, installation: int | None, n: int) -> list[str]:
    """Queue ``n`` runs for ``installation``, a second apart (its repo, one issue each)."""
    ids = []
    for _ in range(n):
        clock.advance(1)
        run = store.create_run(
            NewRun(
                repo=f"org{installation}/repo",
                issue_number=next(ISSUES),
                spec=SPEC,
                installation_id=installation,
            )
        )
        ids.append(run.id)
    return ids


def owners(claimed: list[RunRow]) -> list[int | None]:
    return sorted((row.installation_id for row in claimed), key=str)


def test_a_burst_does_not_hold_back_a_run_queued_after_it(store, clock):
    burst = queue(store, clock, A, 5)
    (single,) = queue(store, clock, B, 1)
    claimed = store.claim_runs("w1", LEASE, 2)
    assert {row.id for row in claimed} == {burst[0], single}
    # Within an installation, oldest first.
    assert [row.id for row in store.claim_runs("w1", LEASE, 2)] == burst[1:3]


def test_runs_an_installation_already_holds_count_against_its_turn(store, clock):
    burst = queue(store, clock, A, 6)
    assert [row.id for row in store.claim_runs("w1", LEASE, 3)] == burst[:3]
    (single,) = queue(store, clock, B, 1)
    # A slot frees: B's one run goes before A's older queued ones, A holding three.
    assert [row.id for row in store.claim_runs("w2", LEASE, 1)] == [single]
    # C holds none: its two runs take turns 1 and 2, before A's next (turn 4).
    c_runs = queue(store, clock, C, 2)
    claimed = store.claim_runs("w2", LEASE, 2)
    assert [row.id for row in claimed] == c_runs
    assert [row.id for row in store.claim_runs("w2", LEASE, 5)] == burst[3:]


def test_runs_without_an_installation_share_one_turn_order(store, clock):
    local = queue(store, clock, None, 3)
    (hosted,) = queue(store, clock, A, 1)
    claimed = store.claim_runs("w1", LEASE, 2)
    assert {row.id for row in claimed} == {local[0], hosted}
    assert owners(claimed) == [101, None]


def test_expired_leases_are_claimed_again_and_no_longer_count_as_held(store, clock):
    a_runs = queue(store, clock, A, 2)
    b_runs = queue(store, clock, B, 2)
    first = store.claim_runs("w1", LEASE, 2)
    assert {row.id for row in first} == {a_runs[0], b_runs[0]}
    # Both second runs have turn 2 (one held each): the older, A's, goes first.
    assert [row.id for row in store.claim_runs("w2", LEASE, 1)] == [a_runs[1]]
    clock.advance(LEASE + 1)  # every lease lapses: w1 and w2 died
    again = store.claim_runs("w3", LEASE, 10)
    assert {row.id for row in again} == set(a_runs + b_runs)
    for row in again:
        assert row.lease_owner == "w3" and row.state == "running"
    assert {row.id: row.attempts for row in again} == {
        a_runs[0]: 2,
        b_runs[0]: 2,
        a_runs[1]: 2,
        b_runs[1]: 1,
    }
    assert store.claim_runs("w4", LEASE, 10) == []  # all held again


def test_held_runs_are_not_claimed_and_a_deferred_run_waits(store, clock):
    (run,) = queue(store, clock, A, 1)
    store.claim_runs("w1", LEASE, 1)
    assert store.claim_runs("w2", LEASE, 5) == []
    assert store.defer_run(run, "w1", clock.now + timedelta(seconds=5 * LEASE))
    clock.advance(LEASE + 1)
    assert store.claim_runs("w2", LEASE, 5) == []  # deferred past its lease
    clock.advance(4 * LEASE)
    assert [row.id for row in store.claim_runs("w2", LEASE, 5)] == [run]


def test_concurrent_claimers_never_share_a_run(db_url, clock, store):
    ids: set[str] = set()
    for installation, n in ((A, 30), (B, 12), (C, 6), (None, 4)):
        ids.update(queue(store, clock, installation, n))
    stores = [RunStore.from_url(db_url, clock=clock) for _ in range(3)]
    claims: list[tuple[str, str]] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        me = f"w{n}"
        while batch := stores[n % 3].claim_runs(me, LEASE, 1 + n % 3):
            with lock:
                claims.extend((row.id, me) for row in batch)

    race(6, worker)
    for s in stores:
        s.dispose()
    counted = Counter(run_id for run_id, _ in claims)
    assert set(counted) == ids
    assert max(counted.values()) == 1
    for run_id, owner in claims:  # the database agrees with who got what
        row = store.get_run(run_id)
        assert row is not None and row.lease_owner == owner and row.attempts == 1
