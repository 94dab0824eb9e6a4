"""Small structured-concurrency helpers shared by the worker and the run layer."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar
from weakref import WeakKeyDictionary

import anyio
import anyio.lowlevel
from anyio.lowlevel import RunVar

A = TypeVar("A")
B = TypeVar("B")
P = ParamSpec("P")
T = TypeVar("T")

# Each event loop's limiter per store (a limiter belongs to the loop that made it).
_LIMITERS: RunVar[WeakKeyDictionary[Any, anyio.CapacityLimiter]] = RunVar("store_limiters")


def _limiter(store: object) -> anyio.CapacityLimiter | None:
    calls = getattr(store, "parallel_calls", None)
    if not isinstance(calls, int):  # a stand-in without a bound: anyio's default
        return None
    try:
        limiters = _LIMITERS.get()
    except LookupError:
        limiters = WeakKeyDictionary()
        _LIMITERS.set(limiters)
    limiter = limiters.get(store)
    if limiter is None:
        limiter = limiters[store] = anyio.CapacityLimiter(calls)
    return limiter


async def store_call(store: object, query: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``query`` (a method of ``store``), awaited (docs/architecture.md, ``bot/store/``).

    A local store (SQLite: ``store.local``) runs it right here, on the event loop:
    its calls take a millisecond or two and go one at a time to its one writer, so
    a thread would only add a hop and a GIL handoff each way (under load, the
    calls queued behind one another for the GIL longer than they ran). Any other
    store runs it in a worker thread, at most ``store.parallel_calls`` at once (a
    PostgreSQL pool's connections), the rest waiting here as coroutines, not as
    threads blocked on the pool."""
    if getattr(store, "local", False) is True:
        await anyio.lowlevel.checkpoint()  # as a thread hop would, let others run first
        return query(*args, **kwargs)
    call = functools.partial(query, *args, **kwargs)
    return await anyio.to_thread.run_sync(call, limiter=_limiter(store))


@contextmanager
def first_failure() -> Iterator[None]:
    """Around a task group: its first failure raised as itself, not as a group,
    so callers can tell an outage from a broken run by its type."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        if isinstance(leaf, Exception):
            raise leaf from group
        raise


async def both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Await two calls side by side (two round trips for the time of one). If one
    fails, the other is cancelled and the failure is raised as itself."""
    results: list[Any] = [None, None]

    async def put(i: int, call: Awaitable[Any]) -> None:
        results[i] = await call

    with first_failure():
        async with anyio.create_task_group() as tg:
            tg.start_soon(put, 0, first)
            tg.start_soon(put, 1, second)
    return results[0], results[1]


async def each(items: Iterable[A], call: Callable[[A], Awaitable[object]]) -> None:
    """``call(item)`` for every item side by side; the first failure cancels the
    rest and is raised as itself."""

    async def one(item: A) -> None:
        await call(item)

    with first_failure():
        async with anyio.create_task_group() as tg:
            for item in items:
                tg.start_soon(one, item)


async def beside(
    main: Callable[[], Awaitable[object]],
    side: Callable[[], Awaitable[object]],
    *,
    wait_out: Callable[[Exception], bool],
) -> None:
    """Run ``main`` with ``side`` beside it and return when both are done.

    - ``main`` failing lets ``side`` finish, then its failure is raised (before
      any of ``side``'s): the main work's verdict comes first.
    - ``side`` failing with an error ``wait_out`` accepts lets ``main`` finish,
      then that error is raised.
    - any other failure of ``side`` cancels ``main`` and is raised at once.
    """
    main_error: Exception | None = None
    side_error: Exception | None = None

    async def run_side() -> None:
        nonlocal side_error
        try:
            await side()
        except Exception as exc:
            if not wait_out(exc):
                raise
            side_error = exc

    with first_failure():
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_side)
            try:
                await main()
            except Exception as exc:
                main_error = exc
    if main_error is not None:
        raise main_error
    if side_error is not None:
        raise side_error
