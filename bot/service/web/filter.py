"""What the webhook route must know of the bot's triggers: data, not handlers.

Each feature declares the deliveries it acts on as ``Trigger`` values in its
own ``triggers`` module (bot/service/features/<name>/triggers.py); its handlers
are bound to those same values, so a trigger is written once. The process
wiring hands the merged ``DeliveryFilter`` (bot/service/features/declared.py) to
the web app and the redeliverer. The route judges from it which deliveries are
worth storing without importing a feature's handlers, a model adapter or the
worker (see docs/architecture.md, "One delivery, end to end").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from bot.github.events import WebhookEvent, is_bot

E = TypeVar("E", bound=WebhookEvent)


@dataclass(frozen=True)
class Trigger(Generic[E]):
    """One kind of delivery a feature acts on: an event's model and actions."""

    model: type[E]
    actions: frozenset[str]
    # A comment trigger: the delivery is work only if this object's body is a
    # slash command (judged by the webhook route before anything is stored).
    command_in: str | None = None
    # About the installation itself: answered even while it is not active, and
    # without an installation token (there may be none).
    about_installation: bool = False

    @property
    def event(self) -> str:
        return self.model.name


def trigger(
    model: type[E], *actions: str, command_in: str | None = None, about_installation: bool = False
) -> Trigger[E]:
    return Trigger(model, frozenset(actions), command_in, about_installation)


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

    @classmethod
    def of(cls, triggers: Iterable[Trigger[Any]]) -> DeliveryFilter:
        """The triggers merged by event: every action, every object a model needs."""
        by_event: dict[str, list[Trigger[Any]]] = {}
        for t in triggers:
            by_event.setdefault(t.event, []).append(t)
        events = {}
        for name, ts in by_event.items():
            required: dict[str, None] = {}
            for t in ts:
                required.update(dict.fromkeys(t.model.required_objects()))
            events[name] = EventTriggers(
                actions=frozenset().union(*(t.actions for t in ts)),
                required_objects=tuple(required),
                command_in=next((t.command_in for t in ts if t.command_in), None),
            )
        return cls(events)

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
