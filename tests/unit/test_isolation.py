"""The autouse `isolation` fixture: no bot settings from the environment, no
network beyond loopback; loopback, unix sockets and subprocesses still work."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import httpx
import pytest

from bot.core.settings import Settings
from testkit.harness.isolation import (
    TEST_VARIABLES,
    ForbiddenConnection,
    NetworkGuard,
    clear_settings,
    is_local,
)


def test_no_setting_variable_reaches_a_test() -> None:
    names = {n.upper() for n in os.environ} - TEST_VARIABLES
    assert not {n for n in names if n.startswith("DEBATE_BOT_")}
    assert not names & {"OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"}
    assert Settings(_env_file=None).openai_api_key is None


def test_clear_settings_unsets_every_variable_settings_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("DEBATE_BOT_APP_ID", "debate_bot_port", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("DEBATE_BOT_TEST_PG_URL", "postgresql://kept")
    monkeypatch.setenv("UNRELATED_SETTING", "kept")
    clear_settings(monkeypatch)
    settings = Settings(_env_file=None)
    assert (settings.app_id, settings.port, settings.openai_api_key) == (None, 3000, None)
    assert settings.anthropic_base_url == "https://api.anthropic.com"
    prefixes = ("DEBATE_BOT_", "OPENAI", "ANTHROPIC")
    assert {n for n in os.environ if n.upper().startswith(prefixes)} == {"DEBATE_BOT_TEST_PG_URL"}
    assert os.environ["UNRELATED_SETTING"] == "kept"


def test_a_real_model_host_is_refused(isolation: NetworkGuard) -> None:
    with pytest.raises(ForbiddenConnection, match=r"api\.openai\.com"):
        socket.create_connection(("api.openai.com", 443), timeout=1)
    with pytest.raises(ForbiddenConnection, match=r"api\.anthropic\.com"):
        httpx.get("https://api.anthropic.com/v1/models", timeout=1)
    with pytest.raises(ForbiddenConnection, match=r"192\.0\.2\.1"), socket.socket() as sock:
        sock.connect(("192.0.2.1", 443))  # an address needs no lookup: refused at connect
    # Each attempt was recorded: the fixture fails the test at teardown even when the
    # code under test swallowed the error. Cleared here, as they were expected.
    assert len(isolation.refused) == 3
    isolation.refused.clear()


async def test_asyncio_connections_are_guarded_too(isolation: NetworkGuard) -> None:
    async with httpx.AsyncClient() as client:
        with pytest.raises(ForbiddenConnection):
            await client.get("https://api.openai.com/v1/models", timeout=1)
    assert isolation.refused
    isolation.refused.clear()


def test_loopback_unix_sockets_and_subprocesses_still_work() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("localhost", port), timeout=5):
            pass
        with socket.socket() as sock:
            sock.connect(("127.0.0.1", port))
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"x")
        assert right.recv(1) == b"x"
    out = subprocess.run([sys.executable, "-c", "print('ok')"], capture_output=True, text=True)
    assert out.stdout == "ok\n"


@pytest.mark.parametrize(
    ("host", "local"),
    [
        (None, True),
        ("localhost", True),
        ("127.0.0.1", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        (b"127.0.0.2", True),
        ("0.0.0.0", True),
        ("api.openai.com", False),
        ("10.0.0.1", False),
        ("169.254.169.254", False),
        ("2001:db8::1", False),
    ],
)
def test_is_local(host: object, local: bool) -> None:
    assert is_local(host) is local
