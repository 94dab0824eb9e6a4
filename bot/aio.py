"""Small structured-concurrency helpers shared by the worker."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

import anyio

A = TypeVar("A")
B = TypeVar("B")


def first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception in a (nested) group: a failure surfaced as itself, so
    callers can tell an outage from a broken run by its type."""
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


async def both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Await two calls side by side (two round trips for the time of one). If one
    fails, the other is cancelled and the failure is raised as itself."""
    results: list[Any] = [None, None]

    async def put(i: int, call: Awaitable[Any]) -> None:
        results[i] = await call

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(put, 0, first)
            tg.start_soon(put, 1, second)
    except BaseExceptionGroup as group:
        leaf = first_leaf(group)
        if isinstance(leaf, Exception):
            raise leaf from group
        raise
    return results[0], results[1]
