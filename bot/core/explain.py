"""One line for a failed command: what went wrong, why (the driver's or the
operating system's own words), and what to do. Used by every CLI command, so a
mistake in the setup never ends in a traceback (README "Running it").

Nothing here prints: ``explain`` returns the line and the exit code, and the
caller decides. Secrets never reach the line: database passwords are masked
from URLs and driver messages, and the whole line goes through the redactor.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError

from bot.core.errors import BotError, ConfigError, StoreError
from bot.core.redact import redact_known, redact_secrets
from bot.core.settings import Settings

# Every command's exit codes, here once.
OK = 0
FAILURE = 1  # the setup is right; something failed on the way (a service, a run)
SETUP_ERROR = 2  # a wrong setup or input: fix it and run again
INTERRUPTED = 130  # Ctrl-C, as a shell reports it


@dataclass(frozen=True)
class Explained:
    line: str
    code: int


def mask_url(url: str) -> str:
    """A database URL with its password replaced by ``***`` (unparsable: a hint only)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return "(an unparsable URL)"


def _password(url: str) -> str:
    try:
        return make_url(url).password or ""
    except (ArgumentError, ValueError):
        return ""


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, what caused it, and the leaves of exception groups, depth first."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        if isinstance(e, BaseExceptionGroup):
            todo.extend(e.exceptions)
        if e.__cause__ is not None:
            todo.append(e.__cause__)
        elif e.__context__ is not None and not e.__suppress_context__:
            todo.append(e.__context__)


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def os_reason(exc: BaseException) -> str | None:
    """The operating system's words for the first OSError in ``exc``'s chain,
    e.g. "connection refused"."""
    for e in _chain(exc):
        if isinstance(e, OSError) and (e.errno or e.strerror):
            text = os.strerror(e.errno) if e.errno else str(e.strerror)
            return text[:1].lower() + text[1:]
    return None


def _database_line(exc: BaseException, database_url: str) -> str | None:
    for e in _chain(exc):
        if not isinstance(e, SQLAlchemyError):
            continue
        where = mask_url(database_url)
        orig = e.orig if isinstance(e, DBAPIError) else None
        # Connection-level errors carry the server's or the file system's words;
        # others (a constraint, a bad statement) may quote SQL parameters: class only.
        if isinstance(orig, sqlite3.OperationalError) or type(orig).__name__ in {
            "OperationalError",
            "InterfaceError",
        }:
            reason = first_line(str(orig)).removeprefix("connection failed: ")
            hint = _sqlite_hint(database_url) or (
                "check DEBATE_BOT_DATABASE_URL and that the server runs"
            )
            return f"database {where}: {reason}; {hint}"
        return f"database {where}: {type(orig or e).__name__}; check DEBATE_BOT_DATABASE_URL"
    return None


def _sqlite_hint(database_url: str) -> str | None:
    try:
        url = make_url(database_url)
    except (ArgumentError, ValueError):
        return None
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    folder = Path(url.database).parent
    if not folder.is_dir():
        return f"the folder {folder} does not exist: create it, or change DEBATE_BOT_DATABASE_URL"
    if not os.access(folder, os.W_OK):
        return f"the folder {folder} is not writable by this user"
    return "check DEBATE_BOT_DATABASE_URL"


def check_sqlite_folder(database_url: str) -> None:
    """Refuse a SQLite path whose folder is missing before the driver's vaguer
    "unable to open database file"."""
    try:
        url = make_url(database_url)
    except (ArgumentError, ValueError):
        return  # normalize_url reports it
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        folder = Path(url.database).parent
        if not folder.is_dir():
            raise ConfigError(
                f"database {mask_url(database_url)}: the folder {folder} does not exist; "
                "create it or point DEBATE_BOT_DATABASE_URL elsewhere"
            )


def _os_line(exc: BaseException) -> str | None:
    for e in _chain(exc):
        if isinstance(e, OSError) and not isinstance(e, ConnectionError | TimeoutError):
            what = f"{e.filename}: " if e.filename else ""
            reason = e.strerror or type(e).__name__
            if e.errno == errno.ENOSPC:
                reason += " (free some disk space)"
            return f"{what}{reason}"
    return None


def explain(exc: BaseException, *, database_url: str = "") -> Explained:
    """The line and the exit code for any exception a command let through."""
    line: str | None = None
    code = SETUP_ERROR
    leaves = [e for e in _chain(exc) if not isinstance(e, BaseExceptionGroup)]
    bot = next((e for e in leaves if isinstance(e, BotError)), None)
    if isinstance(bot, StoreError) and database_url:
        line = _database_line(bot, database_url)
    if line is None and bot is not None:
        line = bot.public
        if not isinstance(bot, ConfigError):
            detail = first_line(str(bot))
            if detail and detail != bot.public:
                line = f"{bot.public.rstrip('.')} ({detail})"
    if line is None and database_url:
        line = _database_line(exc, database_url)
    if line is None:
        line = _os_line(exc)
    if line is None:
        leaf = leaves[0] if leaves else exc
        # Not a mistake we know: still one line, and a way to see more.
        line = (
            f"{type(leaf).__name__}: {first_line(str(leaf)) or 'no details'} "
            "(an internal error; set DEBATE_BOT_LOG_LEVEL=DEBUG for details)"
        )
        code = FAILURE
    line = redact_secrets(redact_known(line, [_password(database_url)]))
    return Explained(" ".join(line.split()), code)


def settings_variable(field: str) -> str:
    """The environment variable of a ``Settings`` field, e.g. app_id → DEBATE_BOT_APP_ID."""
    info = Settings.model_fields.get(field)
    alias = info.validation_alias if info is not None else None
    if alias is not None and hasattr(alias, "choices"):
        return str(alias.choices[0])
    return f"DEBATE_BOT_{field.upper()}"


def format_settings_error(exc: ValidationError) -> str:
    """Settings that do not validate, named by variable, with the value's problem."""
    parts = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        name = settings_variable(loc[0]) if loc else "(settings)"
        inner = "".join(f"[{p}]" for p in loc[1:])
        parts.append(f"{name}{inner}: {err['msg']}")
    return "settings: " + "; ".join(parts)
