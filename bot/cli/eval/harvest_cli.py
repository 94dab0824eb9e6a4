"""`debate-bot eval harvest OWNER/REPO`: authenticate, read, write the case file.

Auth: a token from ``GITHUB_TOKEN`` (a personal or Actions token that can read
the repository), else the GitHub App's installation on the repository
(``DEBATE_BOT_APP_ID`` and its private key).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from bot.cli.eval.harvest import Harvest, harvest
from bot.core.errors import ConfigError, GitHubError
from bot.core.settings import Settings
from bot.github.gateway import GitHubGateway

TOKEN_INSTALLATION = 0  # a plain token speaks for itself, as in Actions mode
_SINCE = re.compile(r"^(\d{1,4})([dwmy])$")
_DAYS = {"d": 1, "w": 7, "m": 30, "y": 365}
_REPO = re.compile(r"^[A-Za-z0-9-]{1,39}/[A-Za-z0-9._-]{1,100}$")


def parse_since(value: str, now: datetime) -> datetime:
    m = _SINCE.match(value.strip())
    if m is None or int(m.group(1)) == 0:
        raise ConfigError(f"--since {value!r}: use a number and a unit, e.g. 90d, 12w, 6m or 1y")
    return now - timedelta(days=int(m.group(1)) * _DAYS[m.group(2)])


def parse_bots(value: str | None) -> frozenset[str] | None:
    if value is None:
        return None
    logins = frozenset(
        b.strip().lower().removesuffix("[bot]") for b in value.split(",") if b.strip()
    )
    if not logins:
        raise ConfigError("--bots: name at least one login, e.g. --bots coderabbitai,copilot")
    return logins | frozenset(f"{b}[bot]" for b in logins)


def run_harvest(
    repo: str, *, since: str, bots: str | None, out: Path | None, settings: Settings
) -> int:
    if not _REPO.match(repo):
        raise ConfigError(f"{repo!r} is not OWNER/REPO (e.g. octo-org/octo-repo)")
    start = parse_since(since, datetime.now(UTC))
    logins = parse_bots(bots)
    token = os.environ.get("GITHUB_TOKEN", "").strip()
    if not token and not (settings.app_id and settings.private_key_pem()):
        raise ConfigError(
            "no GitHub credentials: set GITHUB_TOKEN to a token that can read "
            f"{repo}, or configure the app (DEBATE_BOT_APP_ID and its private key)"
        )
    try:
        result = asyncio.run(_harvest(settings, token, repo, start, logins))
    except GitHubError as exc:
        status = exc.github_status
        if status in (401, 403, 404):
            raise ConfigError(
                f"GitHub answered {status}: check that {repo} exists and that the token "
                "(or the app's installation) can read it"
            ) from None
        raise ConfigError(f"GitHub failed: {str(exc)[:200]}") from None
    text = _yaml(result.cases, repo, since)
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")
    left = ", ".join(f"{n} {why}" for why, n in result.ambiguous.most_common()) or "none"
    print(
        f"harvested {len(result.cases)} case(s) from {result.pulls} merged PR(s): "
        f"{result.count('CONFIRMED')} CONFIRMED, {result.count('DISMISSED')} DISMISSED; "
        f"{sum(result.ambiguous.values())} ambiguous left out ({left})",
        file=sys.stderr,
    )
    return 0


async def _harvest(
    settings: Settings,
    token: str,
    repo: str,
    since: datetime,
    bots: frozenset[str] | None,
) -> Harvest:
    async with GitHubGateway(settings, actions_token=token or None) as gateway:
        installation = TOKEN_INSTALLATION if token else await gateway.repo_installation(repo)
        gh = await gateway.installation(installation)
        license_id = await gh.license_id(repo)
        pulls = await gh.merged_pulls(repo, since)
        return await harvest(gh, repo, pulls, bots=bots, license_id=license_id)


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> Any:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _yaml(cases: list[dict[str, Any]], repo: str, since: str) -> str:
    head = (
        f"# Arbitration cases harvested from {repo} (merged PRs, last {since}) by "
        "`debate-bot eval harvest`.\n"
        "# Labels are heuristic (label_source: heuristic): read each before trusting it.\n"
    )
    if not cases:
        return head + "[]\n"
    return head + yaml.dump(cases, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
