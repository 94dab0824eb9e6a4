"""The store's aggregates share only their base: no two define the same member
(the facade inherits them all, and the first in its bases would win silently)."""

from __future__ import annotations

from collections import defaultdict

from bot.store import RunStore
from bot.store.base import StoreBase


def test_no_two_aggregates_define_the_same_member() -> None:
    aggregates = [
        c for c in RunStore.__mro__[1:] if issubclass(c, StoreBase) and c is not StoreBase
    ]
    assert len(aggregates) >= 10
    owners: dict[str, list[str]] = defaultdict(list)
    for cls in aggregates:
        for name in vars(cls):
            if not (name.startswith("__") and name.endswith("__")):
                owners[name].append(cls.__name__)
    shared = {name: classes for name, classes in owners.items() if len(classes) > 1}
    assert shared == {}
