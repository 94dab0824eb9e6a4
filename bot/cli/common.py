"""What every command shares: settings from the environment (and `.env`) with
the command line's options on top, and a failure as one line with its exit
code (bot/core/explain.py), never a traceback."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NoReturn

import typer
from pydantic import ValidationError
from pydantic_settings import SettingsError

from bot.core.errors import BotError, ConfigError
from bot.core.explain import explain, format_settings_error, settings_variable
from bot.core.settings import Settings


def settings(**overrides: Any) -> Settings:
    """Settings from the environment and .env; options given on the command line win."""
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        raise ConfigError(format_settings_error(exc)) from exc
    except SettingsError as exc:  # a JSON setting that does not parse
        field = str(exc).split('"')[1] if str(exc).count('"') >= 2 else ""
        name = settings_variable(field) if field else "a setting"
        raise ConfigError(f"settings: {name}: not valid JSON (see docs/configuration.md)") from None


def database_url() -> str:
    """For masking its password in a message, and naming it: the setting if it reads."""
    try:
        return Settings().database_url
    except Exception:  # settings that do not validate: the environment's value
        return os.environ.get("DEBATE_BOT_DATABASE_URL", "")


def fail(exc: BaseException) -> typer.Exit:
    """One line on stderr with the cause and the fix (bot/core/explain.py); its exit code."""
    result = explain(exc, database_url=database_url())
    typer.secho(f"error: {result.line}", err=True, fg=typer.colors.RED)
    return typer.Exit(result.code)


def exit_with(command: Callable[[], int]) -> NoReturn:
    """Exit with the command's code; a BotError is a usage error (exit 2)."""
    try:
        code = command()
    except BotError as exc:
        raise fail(exc) from None
    raise typer.Exit(code)
