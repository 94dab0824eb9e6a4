"""The tool-calling fake model server for a test, and settings that send
``openai/…`` references to it (tests of the tool loop, eval and the CLI)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bot.core.settings import Settings
from testkit.fakes.tool_server import Script, ToolModelServer

KEY = "sk-test-" + secrets.token_hex(8)


@contextmanager
def tool_server(script: Script, **quirks: bool) -> Iterator[ToolModelServer]:
    """``quirks``: ``reject_tools``, ``ignore_tool_choice``… (``ToolModelServer``)."""
    with ToolModelServer(script=script, openai_api_key=KEY, **quirks) as server:
        yield server


def settings_for(
    server: ToolModelServer,
    *,
    concurrency: dict[str, int] | None = None,
    prices: Path | None = None,
) -> Settings:
    """Quick to fail (no retries), optionally with a window per provider and a price file."""
    return Settings(
        _env_file=None,
        openai_api_key=KEY,
        openai_base_url=server.openai_base_url,
        model_timeout_s=5.0,
        model_max_retries=0,
        provider_concurrency=concurrency or {},
        prices_file=prices,
    )
