from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from bot.store.engine import create_engine, normalize_url
from tests.fakes.github_server import FakeGitHub
from tests.fakes.model_server import FakeModelServer
from tests.harness.service import APP_ID, INSTALLATION, REPO, Harness, rsa_keypair


@pytest.fixture(scope="session")
def app_keys() -> tuple[str, str]:
    """A fresh RSA key pair for the app, made by the tests (never committed)."""
    return rsa_keypair()


@pytest.fixture
def harness(tmp_path: Path, app_keys: tuple[str, str]) -> Iterator[Harness]:
    private, public = app_keys
    with FakeGitHub(app_id=APP_ID, public_key_pem=public) as github, FakeModelServer() as models:
        github.add_repo(REPO, installation_id=INSTALLATION)
        github.set_permission(REPO, "Codertocat", "admin")
        h = Harness(tmp_path, github, models, private)
        try:
            yield h
        finally:
            h.stop()


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


@pytest.fixture
def pg_database() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test."""
    with fresh_pg_database("debate_bot_e2e") as url:
        yield url
