"""Small structured-concurrency helpers shared by the worker."""

from __future__ import annotations

from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio

A = TypeVar("A")
B = TypeVar("B")


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
