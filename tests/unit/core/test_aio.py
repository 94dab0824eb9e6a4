"""bot/core/aio.py: two calls side by side, failures raised as themselves."""

from __future__ import annotations

import anyio
import pytest

from bot.core.aio import both
from bot.core.errors import TargetGone


async def _value(v: int, delay: float = 0.0) -> int:
    await anyio.sleep(delay)
    return v


async def _gone() -> int:
    raise TargetGone("issue deleted")


def test_both_returns_the_two_results_in_order() -> None:
    assert anyio.run(lambda: both(_value(1, 0.02), _value(2))) == (1, 2)


def test_a_failure_is_raised_as_itself_and_the_other_call_cancelled() -> None:
    finished: list[int] = []

    async def slow() -> int:
        await anyio.sleep(5)
        finished.append(1)
        return 1

    with pytest.raises(TargetGone):
        anyio.run(lambda: both(slow(), _gone()))
    assert finished == []
