"""Every delivery the bot acts on, as the features declare it: data only, so a
``web`` process judges deliveries without importing a handler, the worker or a
model adapter (docs/architecture.md, "One delivery, end to end")."""

from __future__ import annotations

from typing import Any, Final

from bot.service.features.debates import triggers as debates
from bot.service.features.installations import triggers as installations
from bot.service.features.reviews import triggers as reviews
from bot.service.web.filter import DeliveryFilter, Trigger

TRIGGERS: Final[tuple[Trigger[Any], ...]] = (
    *reviews.TRIGGERS,
    *debates.TRIGGERS,
    *installations.TRIGGERS,
)
DELIVERY_FILTER: Final = DeliveryFilter.of(TRIGGERS)
