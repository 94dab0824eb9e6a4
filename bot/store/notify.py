"""Waking workers across processes on PostgreSQL: ``LISTEN``/``NOTIFY``.

The store notifies ``WORK_CHANNEL`` in the same transaction that queues work (a
delivery stored, a run created, requeued or asked to cancel), so the notice
arrives exactly when the work is visible. Each worker process keeps one
listening connection and wakes its claim loop on every notice; the worker's
poll stays as the fallback for a lost connection.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from bot.core.logs import get_logger
from bot.store.engine import normalize_url

log = get_logger(__name__)

WORK_CHANNEL = "debate_bot_work"
_NOTIFY = sa.text(f"SELECT pg_notify('{WORK_CHANNEL}', '')")


def notify_work(conn: Connection) -> None:
    """Tell listening workers there is work (delivered when ``conn`` commits)."""
    if conn.dialect.name == "postgresql":
        conn.execute(_NOTIFY)


def _conninfo(url: str) -> str:
    """psycopg's own URL form of a SQLAlchemy database URL."""
    parsed = normalize_url(url).set(drivername="postgresql")
    return parsed.render_as_string(hide_password=False)


async def listen_for_work(url: str, wake: Callable[[], None]) -> None:
    """Call ``wake`` on every notice until cancelled; reconnect with backoff."""
    backoff = 1.0
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(
                _conninfo(url), autocommit=True
            ) as conn:
                await conn.execute(f"LISTEN {WORK_CHANNEL}")
                log.info("notify.listening")
                backoff = 1.0
                wake()  # work may have been queued while no one listened
                async for _ in conn.notifies():
                    wake()
        except psycopg.Error as exc:
            log.warning("notify.lost", error=type(exc).__name__, retry_s=backoff)
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)
