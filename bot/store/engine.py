"""Engine construction: URL normalisation and per-backend connection setup."""

from __future__ import annotations

import sqlite3
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.pool import StaticPool

from bot.core.errors import StoreError, StoreUnavailable

SQLITE_BUSY_TIMEOUT_MS = 15_000
# Execution option marking a connection whose transaction only reads; on SQLite
# it gets a deferred BEGIN instead of BEGIN IMMEDIATE.
READ_ONLY = "debate_bot_read_only"


# The database is down, unreachable, busy or dropped the connection: an outage,
# waited out. Anything else (a constraint, bad SQL, bad data) is a verdict.
_OUTAGES = (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.TimeoutError)


def store_failure(op: str, exc: sa.exc.SQLAlchemyError) -> StoreError:
    """The store's error for a failed operation: ``StoreUnavailable`` for an
    outage, else ``StoreError``. Class name only: driver messages can quote SQL
    parameters."""
    outage = isinstance(exc, _OUTAGES) or (
        isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated
    )
    kind = StoreUnavailable if outage else StoreError
    return kind(f"{op} failed: {type(exc).__name__}")


def normalize_url(url: str) -> sa.URL:
    """Parse a database URL, mapping bare PostgreSQL URLs to the psycopg 3 driver."""
    try:
        parsed = make_url(url)
    except Exception as exc:
        # The parser's message may quote the password: keep only the class.
        raise StoreError(f"invalid database URL ({type(exc).__name__})") from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def create_engine(url: str, **kwargs: Any) -> Engine:
    parsed = normalize_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(parsed, **kwargs)
    if backend == "postgresql":
        kwargs.setdefault("pool_pre_ping", True)
        # Bounded connects, so /readyz answers "not ready" instead of hanging.
        kwargs["connect_args"] = {"connect_timeout": 10, **kwargs.get("connect_args", {})}
        return sa.create_engine(parsed, **kwargs)
    raise StoreError(f"unsupported database backend {backend!r}; use sqlite or postgresql")


def _sqlite_engine(url: sa.URL, **kwargs: Any) -> Engine:
    memory = url.database in (None, "", ":memory:")
    if memory:
        # One shared connection, or every pooled connection would see its own
        # empty database. Concurrency needs a file database.
        kwargs.setdefault("poolclass", StaticPool)
        kwargs.setdefault("connect_args", {"check_same_thread": False})
        kwargs.pop("pool_size", None)  # a single connection has no pool to size
        kwargs.pop("max_overflow", None)
    engine = sa.create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control away from pysqlite so that "begin" below
        # decides how each transaction starts (and DDL is transactional).
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys = ON")
            if not memory:
                cursor.execute("PRAGMA journal_mode = WAL")
                # WAL + NORMAL: no corruption on power loss, and commits stay cheap.
                cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Writers take the write lock up front: a deferred transaction that
        # reads and then writes can fail with SQLITE_BUSY (no busy wait) when
        # another writer got in between. Sent on the driver's connection: through
        # SQLAlchemy's execution path this one statement cost a tenth of every
        # store call's CPU. Its failures are wrapped as SQLAlchemy would.
        sql = "BEGIN" if conn.get_execution_options().get(READ_ONLY, False) else "BEGIN IMMEDIATE"
        driver = conn.connection.driver_connection
        assert driver is not None  # a connection being begun is checked out
        try:
            driver.execute(sql)
        except sqlite3.Error as exc:
            raise sa.exc.DBAPIError.instance(sql, None, exc, sqlite3.Error) from exc

    return engine
