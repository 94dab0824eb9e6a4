from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.store import RunStore
from testkit.fakes.github_server import FakeGitHub
from testkit.fakes.model_server import FakeModelServer
from testkit.harness.isolation import NetworkGuard, clear_settings
from testkit.harness.postgres import fresh_pg_database
from testkit.harness.service import APP_ID, INSTALLATION, REPO, Harness, rsa_keypair

E2E = Path(__file__).resolve().parent / "e2e"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/e2e/ starts a process (the service, the CLI, a server
    in a child): marked ``e2e`` by its folder, so ``-m "not e2e"`` is the inner loop."""
    for item in items:
        if item.path.is_relative_to(E2E):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(autouse=True)
def isolation(monkeypatch: pytest.MonkeyPatch) -> Iterator[NetworkGuard]:
    """Every test runs without the bot's settings from the environment and cannot
    reach beyond loopback (testkit/harness/isolation.py). A refused attempt fails
    the test even when the code under test swallowed the error."""
    clear_settings(monkeypatch)
    guard = NetworkGuard()
    guard.install(monkeypatch)
    yield guard
    if guard.refused:
        pytest.fail(f"the test tried to reach hosts beyond loopback: {guard.refused}")


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


@pytest.fixture
def pg_database() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test."""
    with fresh_pg_database("debate_bot_e2e") as url:
        yield url


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    """A migrated SQLite store in the test's directory (modules may define their own)."""
    s = RunStore.from_url(f"sqlite:///{tmp_path / 'db.sqlite'}")
    s.migrate()
    yield s
    s.dispose()
