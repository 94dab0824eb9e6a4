"""`debate-bot runs`: the recent runs in the store, with their state, age, cost
and the link to their thread on GitHub."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.engine import make_url

from bot.core.errors import ConfigError
from bot.core.explain import check_sqlite_folder
from bot.core.settings import Settings
from bot.store import RUN_STATES, RunStore
from bot.store.rows import RunSummary


def html_base(api_url: str) -> str:
    """github.com's pages for api.github.com; a GHES host's for HOST/api/v3."""
    api = api_url.rstrip("/")
    if api == "https://api.github.com":
        return "https://github.com"
    return api.removesuffix("/api/v3")


def thread_url(settings: Settings, run: RunSummary) -> str:
    kind = "pull" if run.is_pr else "issues"
    return f"{html_base(settings.github_api_url)}/{run.repo}/{kind}/{run.issue_number}"


def age(since: datetime, now: datetime) -> str:
    seconds = max(0, int((now - since).total_seconds()))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def recent_runs(
    settings: Settings, *, repo: str | None, state: str | None, limit: int
) -> list[RunSummary]:
    if state is not None and state not in RUN_STATES:
        raise ConfigError(f"--state {state!r}: one of {', '.join(RUN_STATES)}")
    if repo is not None and repo.count("/") != 1:
        raise ConfigError(f"--repo {repo!r}: expected OWNER/NAME")
    check_sqlite_folder(settings.database_url)
    url = make_url(settings.database_url)
    local = url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:")
    if local and not Path(str(url.database)).exists():  # never create one just to read it
        raise ConfigError(
            f"no database at {url.database}: start the service first, or point "
            "DEBATE_BOT_DATABASE_URL at its database"
        )
    store = RunStore.from_url(settings.database_url)
    try:
        return store.recent_runs(repo=repo, state=state, limit=limit)
    finally:
        store.dispose()


def rows(settings: Settings, found: list[RunSummary]) -> list[tuple[str, ...]]:
    now = datetime.now(UTC)
    return [
        (
            run.id[:8],
            run.state + (f" ({run.error_class})" if run.error_class else ""),
            age(run.created_at, now),
            run.mode,
            f"${run.cost_usd:.4f}",
            f"{run.tokens_total:,}",
            thread_url(settings, run),
        )
        for run in found
    ]
