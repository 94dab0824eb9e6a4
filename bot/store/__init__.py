"""Durable storage: webhook deliveries, runs, turns and the bot's own comments.

SQLAlchemy Core over SQLite (default, WAL) or PostgreSQL, with Alembic
migrations shipped in ``bot/store/migrations``.
"""

from bot.store.codec import spec_from_json, spec_to_json
from bot.store.facade import RunStore
from bot.store.rows import (
    CommentKind,
    CommentRecord,
    DeliveryRow,
    DeliveryState,
    NewDelivery,
    NewRun,
    RunRow,
    RunState,
)
from bot.store.schema import ACTIVE_RUN_STATES, RUN_STATES

__all__ = [
    "ACTIVE_RUN_STATES",
    "RUN_STATES",
    "CommentKind",
    "CommentRecord",
    "DeliveryRow",
    "DeliveryState",
    "NewDelivery",
    "NewRun",
    "RunRow",
    "RunState",
    "RunStore",
    "spec_from_json",
    "spec_to_json",
]
