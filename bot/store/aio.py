"""AsyncStore: the store for async code, ``await db.x(…)`` for ``store.x(…)``.

The store is synchronous (SQLAlchemy Core, one short transaction a call). Each
method here runs its ``RunStore`` namesake through ``bot.core.aio.store_call``: a
PostgreSQL call in a worker thread (its round trip would hold up every other
run and delivery on the event loop), at most as many at once as the pool holds;
a SQLite call on the event loop, where it costs less than the hop. Same
arguments and result types (a ``_Hop`` descriptor keeps the signature for mypy).
A test checks that every public query of the store has its hop here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from bot.core.aio import store_call
from bot.store.facade import RunStore

P = ParamSpec("P")
T = TypeVar("T")

# Not for async callers: process start-up and shutdown, run once, synchronously.
SYNC_ONLY = frozenset({"alembic_config", "dispose", "from_url", "migrate"})


class _Hop(Generic[P, T]):
    """A ``RunStore`` method as a coroutine function (``store_call``)."""

    def __init__(self, method: Callable[Concatenate[RunStore, P], T]) -> None:
        self.method = method  # for the signature; the call looks the name up
        self.name = method.__name__

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, db: None, owner: type[Any]) -> _Hop[P, T]: ...
    @overload
    def __get__(self, db: AsyncStore, owner: type[Any]) -> Callable[P, Awaitable[T]]: ...
    def __get__(
        self, db: AsyncStore | None, owner: type[Any]
    ) -> _Hop[P, T] | Callable[P, Awaitable[T]]:
        if db is None:
            return self
        store = db.sync
        # Looked up on the store itself: a subclass's or a patched method is the one run.
        bound: Callable[P, T] = getattr(store, self.name)

        async def hop(*args: P.args, **kwargs: P.kwargs) -> T:
            return await store_call(store, bound, *args, **kwargs)

        return hop


class AsyncStore:
    """One ``RunStore``, awaited. ``sync`` is the store itself, for start-up code."""

    def __init__(self, store: RunStore) -> None:
        self.sync = store

    # deliveries
    record_delivery = _Hop(RunStore.record_delivery)
    record_deliveries = _Hop(RunStore.record_deliveries)
    claim_delivery = _Hop(RunStore.claim_delivery)
    claim_deliveries = _Hop(RunStore.claim_deliveries)
    finish_delivery = _Hop(RunStore.finish_delivery)
    get_delivery = _Hop(RunStore.get_delivery)
    prune_deliveries = _Hop(RunStore.prune_deliveries)
    delivery_backlog = _Hop(RunStore.delivery_backlog)
    delivery_counts_by_state = _Hop(RunStore.delivery_counts_by_state)
    drop_installation_deliveries = _Hop(RunStore.drop_installation_deliveries)
    # runs
    create_run = _Hop(RunStore.create_run)
    get_run = _Hop(RunStore.get_run)
    active_run = _Hop(RunStore.active_run)
    latest_run = _Hop(RunStore.latest_run)
    recent_runs = _Hop(RunStore.recent_runs)
    claim_run = _Hop(RunStore.claim_run)
    claim_runs = _Hop(RunStore.claim_runs)
    renew_lease = _Hop(RunStore.renew_lease)
    release_run = _Hop(RunStore.release_run)
    defer_run = _Hop(RunStore.defer_run)
    requeue = _Hop(RunStore.requeue)
    request_cancel = _Hop(RunStore.request_cancel)
    run_control = _Hop(RunStore.run_control)
    update_spec = _Hop(RunStore.update_spec)
    end_installation_runs = _Hop(RunStore.end_installation_runs)
    counts_by_state = _Hop(RunStore.counts_by_state)
    quota_counts = _Hop(RunStore.quota_counts)
    run_health = _Hop(RunStore.run_health)
    # turns and the tool loop's steps
    save_turn = _Hop(RunStore.save_turn)
    load_turns = _Hop(RunStore.load_turns)
    load_evidence = _Hop(RunStore.load_evidence)
    save_step = _Hop(RunStore.save_step)
    load_steps = _Hop(RunStore.load_steps)
    # comments
    comment_id = _Hop(RunStore.comment_id)
    run_comments = _Hop(RunStore.run_comments)
    record_comment = _Hop(RunStore.record_comment)
    # installations
    installation_state = _Hop(RunStore.installation_state)
    set_installation_state = _Hop(RunStore.set_installation_state)
    # redeliveries
    unseen_guids = _Hop(RunStore.unseen_guids)
    claim_redelivery = _Hop(RunStore.claim_redelivery)
    settle_redelivery = _Hop(RunStore.settle_redelivery)
    redelivery_claims = _Hop(RunStore.redelivery_claims)
    redelivery_scan = _Hop(RunStore.redelivery_scan)
    set_redelivery_scan = _Hop(RunStore.set_redelivery_scan)
    prune_redeliveries = _Hop(RunStore.prune_redeliveries)
    # schedules
    set_schedule = _Hop(RunStore.set_schedule)
    list_schedules = _Hop(RunStore.list_schedules)
    drop_schedules = _Hop(RunStore.drop_schedules)
    claim_due_schedule = _Hop(RunStore.claim_due_schedule)
    schedule_started = _Hop(RunStore.schedule_started)
    # GitHub write pacing and model limits, shared between processes
    reserve_write = _Hop(RunStore.reserve_write)
    extend_write_slot = _Hop(RunStore.extend_write_slot)
    hold_writes = _Hop(RunStore.hold_writes)
    sync_model_limit = _Hop(RunStore.sync_model_limit)
    # spend
    run_spend = _Hop(RunStore.run_spend)
    usage_history = _Hop(RunStore.usage_history)
    month_spend = _Hop(RunStore.month_spend)
    installation_month_spend = _Hop(RunStore.installation_month_spend)
    spend_totals = _Hop(RunStore.spend_totals)
    spend_report = _Hop(RunStore.spend_report)
    # health
    ping = _Hop(RunStore.ping)
