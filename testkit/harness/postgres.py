"""A throwaway PostgreSQL database on the test server (DEBATE_BOT_TEST_PG_URL)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from bot.store.engine import create_engine, normalize_url


@contextmanager
def fresh_pg_database(prefix: str) -> Iterator[str]:
    """Create a uniquely named database on the test server; drop it on exit.

    Unreachable server: a failure in CI (CI=true), a skip elsewhere."""
    admin_url = os.environ.get(
        "DEBATE_BOT_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
    )
    admin = create_engine(
        admin_url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3}
    )
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    except sa.exc.OperationalError as exc:
        admin.dispose()
        reason = f"PostgreSQL unreachable at DEBATE_BOT_TEST_PG_URL ({type(exc).__name__})"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(reason)
        pytest.skip(reason + "; set CI=true to make this a failure")
    try:
        yield normalize_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()
