"""What the webhook route must know of the bot's triggers: data, not handlers.

The table itself is ``bot/service/web/triggers.py`` (the worker's router checks its
features' registrations against it at start); the process wiring hands it to
the web app and the redeliverer, Action mode the router's own. The route
judges from it which deliveries are worth storing without importing a
feature, a model adapter or the worker (see docs/architecture.md, "One
delivery, end to end").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.github.events import is_bot


@dataclass(frozen=True)
class EventTriggers:
    """One event's triggers, merged over every handler registered for it."""

    actions: frozenset[str]
    # The payload objects the handlers read: without them a delivery is malformed.
    required_objects: tuple[str, ...] = ()
    # A comment trigger: the delivery is work only if this object's body is a
    # slash command.
    command_in: str | None = None


@dataclass(frozen=True)
class DeliveryFilter:
    events: Mapping[str, EventTriggers]

    @property
    def event_names(self) -> frozenset[str]:
        return frozenset(self.events)

    def accepts(self, event: str, action: object) -> bool:
        triggers = self.events.get(event)
        return triggers is not None and action in triggers.actions

    def required_objects(self, event: str) -> tuple[str, ...]:
        triggers = self.events.get(event)
        return triggers.required_objects if triggers is not None else ()

    def command_in(self, event: str) -> str | None:
        triggers = self.events.get(event)
        return triggers.command_in if triggers is not None else None

    def prefilter(self, event: str, payload: dict[str, Any]) -> str | None:
        """Why a delivery needs no work, judged from fields that don't depend on repo
        config (None: store it). Defensive about types: nothing is validated yet."""
        if not self.accepts(event, payload.get("action")):
            return "event"
        sender = _obj(payload, "sender")
        if is_bot(sender.get("type"), sender.get("login")):
            return "bot sender"
        if (holder := self.command_in(event)) is not None:
            body = _obj(payload, holder).get("body")
            if not isinstance(body, str) or not body.lstrip().startswith("/"):
                return "not a command"
        installation = _obj(payload, "installation").get("id")
        if not isinstance(installation, int) or isinstance(installation, bool):
            return "no installation"
        return None


def _obj(payload: dict[str, Any], key: str) -> dict[str, Any]:
    value = payload.get(key)
    return value if isinstance(value, dict) else {}
