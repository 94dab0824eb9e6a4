"""`debate-bot doctor`: check what a first deployment gets wrong, one line each
with the fix. Secrets are never shown, only whether they are set."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
import yaml
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from rich.cells import cell_len
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from bot.cli.checks import Check, ping
from bot.cli.doctor_agents import agent_checks
from bot.core.errors import BotError, ConfigError
from bot.core.explain import check_sqlite_folder, explain
from bot.core.settings import Settings
from bot.github.gateway import GitHubGateway
from bot.github.manifest import load_app_manifest
from bot.models.router import ModelRouter
from bot.store import RunStore

PERMISSION_RANK = {"read": 1, "write": 2, "admin": 3}
MAX_INSTALLATIONS = 5  # tokens fetched to prove installations are reachable


def _settings_checks(settings: Settings, key: str | None, key_error: str) -> list[Check]:
    key_source = (
        f"file {settings.private_key_file}" if settings.private_key_file else "inline (masked)"
    )
    rows = [
        (
            "DEBATE_BOT_APP_ID",
            "DEBATE_BOT_APP_ID",
            settings.app_id is not None,
            str(settings.app_id) if settings.app_id is not None else "not set",
        ),
        (
            "DEBATE_BOT_PRIVATE_KEY(_FILE)",
            "DEBATE_BOT_PRIVATE_KEY_FILE (or DEBATE_BOT_PRIVATE_KEY)",
            bool(key),
            key_source if key else key_error or "not set",
        ),
        (
            "DEBATE_BOT_WEBHOOK_SECRET",
            "DEBATE_BOT_WEBHOOK_SECRET",
            settings.webhook_secret is not None,
            "set (masked)" if settings.webhook_secret else "not set",
        ),
    ]
    # No app at all (a first deployment): `debate-bot setup` registers one and
    # writes all three; one of them missing is a setting to fill in.
    no_app = settings.app_id is None and not key and not key_error and not settings.webhook_secret
    checks = [
        Check(name, ok, detail, "" if ok else _setting_fix(variable, no_app=no_app))
        for name, variable, ok, detail in rows
    ]
    if key:
        try:
            load_pem_private_key(key.encode(), password=None)
            checks.append(Check("private key parses", True, "PEM private key"))
        except (ValueError, TypeError):
            checks.append(
                Check(
                    "private key parses",
                    False,
                    "not a PEM private key",
                    "download a new key from the app's settings page",
                )
            )
    return checks


def _setting_fix(variable: str, *, no_app: bool) -> str:
    if no_app:
        return "no app yet: run `debate-bot setup` (it registers the app and writes .env)"
    fix = f"set {variable} in .env or the environment"
    if variable == "DEBATE_BOT_APP_ID":
        fix += " (no app yet: run `debate-bot setup`)"
    return fix


def _grants(app: dict[str, Any], manifest: dict[str, Any]) -> list[Check]:
    granted: dict[str, str] = app.get("permissions") or {}
    wanted: dict[str, str] = manifest.get("default_permissions") or {}
    short = [
        f"{name}: {level} (has {granted.get(name, 'none')})"
        for name, level in wanted.items()
        if PERMISSION_RANK.get(granted.get(name, ""), 0) < PERMISSION_RANK.get(level, 0)
    ]
    events = set(app.get("events") or [])
    missing_events = sorted(set(manifest.get("default_events") or []) - events)
    fix = "grant them in the app's settings (Permissions & events), then accept them per install"
    return [
        Check(
            "app permissions",
            not short,
            "as deploy/app.yml" if not short else "missing " + "; ".join(short),
            "" if not short else fix,
        ),
        Check(
            "app events",
            not missing_events,
            "as deploy/app.yml" if not missing_events else "missing " + ", ".join(missing_events),
            "" if not missing_events else fix,
        ),
    ]


async def _github_checks(settings: Settings, manifest: dict[str, Any]) -> list[Check]:
    try:
        gateway = GitHubGateway(settings, max_attempts=2, timeout_s=10.0)
    except ConfigError as exc:
        return [Check("GitHub accepts the app", False, exc.public, "fix the settings above")]
    async with gateway:
        try:
            app = await gateway.app_info()
        except BotError as exc:
            return [
                Check(
                    "GitHub accepts the app",
                    False,
                    str(exc) or exc.public,
                    "check DEBATE_BOT_APP_ID, the key, and DEBATE_BOT_GITHUB_API_URL",
                )
            ]
        checks = [Check("GitHub accepts the app", True, f"GET /app: {app.get('slug')}")]
        if manifest:  # else the manifest row above already failed
            checks += _grants(app, manifest)
        try:
            ids = await gateway.installation_ids()
            for installation_id in ids[:MAX_INSTALLATIONS]:
                await gateway.installation(installation_id)
        except BotError as exc:
            checks.append(
                Check("installations", False, str(exc) or exc.public, "check the app's installs")
            )
            return checks
        checks.append(
            Check(
                "installations",
                bool(ids),
                f"{len(ids)} installed, tokens issued" if ids else "installed nowhere",
                "" if ids else "install the app on a repository from its public page",
            )
        )
    return checks


def _database_checks(settings: Settings) -> list[Check]:
    try:
        check_sqlite_folder(settings.database_url)
        store = RunStore.from_url(settings.database_url)
    except ConfigError as exc:
        return [Check("database", False, exc.public, "fix DEBATE_BOT_DATABASE_URL")]
    except BotError as exc:
        return [Check("database", False, exc.public, "check DEBATE_BOT_DATABASE_URL")]
    try:
        head = ScriptDirectory.from_config(store.alembic_config()).get_current_head()
        with store.engine.connect() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
        migrated = current == head
        return [
            Check("database", True, f"reachable ({store.engine.dialect.name})"),
            Check(
                "schema",
                migrated,
                f"at {current}" if migrated else f"at {current or 'nothing'}, code needs {head}",
                "" if migrated else "run `debate-bot migrate`",
            ),
        ]
    except (BotError, sa.exc.SQLAlchemyError) as exc:
        # The driver's words ("connection refused", "password authentication
        # failed"), the URL's password masked.
        line = explain(exc, database_url=settings.database_url).line
        return [Check("database", False, line, "check DEBATE_BOT_DATABASE_URL and the server")]
    finally:
        store.dispose()


async def _model_checks(settings: Settings) -> list[Check]:
    models = list(dict.fromkeys([*settings.default_models, settings.default_model or ""]))
    models = [m for m in models if m]
    if not models:
        return [
            Check(
                "models",
                False,
                "none configured",
                "set DEBATE_BOT_DEFAULT_MODEL (and a provider key, e.g. OPENAI_API_KEY)",
            )
        ]
    # One attempt each: a server that refuses says so now, not after the backoff.
    async with ModelRouter(settings.model_copy(update={"model_max_retries": 0})) as router:
        return [await _model_check(router, ref) for ref in models]


async def _model_check(router: ModelRouter, ref: str) -> Check:
    return await ping(router, ref, name=f"model {ref}")


async def run_checks(settings: Settings) -> list[Check]:
    try:
        key, key_error = settings.private_key_pem(), ""
    except ConfigError as exc:  # a key file that cannot be read
        key, key_error = None, exc.public
    checks = _settings_checks(settings, key, key_error)
    try:
        manifest = load_app_manifest()
    except (OSError, ConfigError, yaml.YAMLError) as exc:
        checks.append(Check("deploy/app.yml", False, type(exc).__name__, "reinstall debate-bot"))
        manifest = {}
    if settings.app_id is not None and key:
        checks += await _github_checks(settings, manifest)
    checks += _database_checks(settings)
    checks += await _model_checks(settings)
    checks += await agent_checks(settings)
    return checks


HEADERS = ("check", "result", "fix")


def show(checks: Sequence[Check], console: Console) -> None:
    """The checks as a table when the console is wide enough for every name on
    one line and every word of a result or fix whole; else stacked: each check on
    its own line, its result and fix indented below it. Nothing is cut to fit
    (an 80-column terminal, a pipe: rich's 80): a long line wraps between words,
    and only a word longer than the whole line is folded.
    ``console``: bot/cli/terminal.py (no markup: brackets print as written)."""
    widths = _column_widths(checks, console.width)
    if widths is None:
        _stacked(checks, console)
        return
    table = Table(
        Column("", width=1),
        *(Column(h, width=w, overflow="fold") for h, w in zip(HEADERS, widths, strict=True)),
    )
    for c in checks:
        table.add_row(_mark(c), c.name, c.detail, c.fix)
    console.print(table)


def _column_widths(checks: Sequence[Check], width: int) -> list[int] | None:
    """The check, result and fix columns' widths for ``width`` columns: a name
    never wraps, a result or fix wraps between words only, room beyond that goes
    to the columns that can use it. None when the table cannot fit so."""
    cells = [(c.name, c.detail, c.fix) for c in checks]
    columns = [[h, *(row[i] for row in cells)] for i, h in enumerate(HEADERS)]
    longest = [max(_longest_line(t) for t in col) for col in columns]
    least = [longest[0], *(max(_longest_word(t) for t in col) for col in columns[1:])]
    # The mark's column (1), a space either side of each of the 4 columns, 5 rules.
    room = width - (1 + 4 * 2 + 5)
    spare = room - sum(least)
    if spare < 0:
        return None
    wants = [most - fewest for most, fewest in zip(longest, least, strict=True)]
    if sum(wants) <= spare:
        return longest
    return [fewest + spare * want // sum(wants) for fewest, want in zip(least, wants, strict=True)]


def _longest_line(text: str) -> int:
    return max((cell_len(line) for line in text.splitlines()), default=0)


def _longest_word(text: str) -> int:
    return max((cell_len(word) for word in text.split()), default=0)


def _stacked(checks: Sequence[Check], console: Console) -> None:
    indent = "    "
    for c in checks:
        console.print(Text.assemble(_mark(c), " ", c.name), overflow="fold")
        for said in (c.detail, *((f"fix: {c.fix}",) if c.fix else ())):
            lines = Text(said).wrap(console, max(1, console.width - len(indent)), overflow="fold")
            for line in lines:
                line.rstrip()
                console.print(Text(indent) + line)


def _mark(check: Check) -> Text:
    return Text("✓", style="green") if check.ok else Text("✗", style="red")
