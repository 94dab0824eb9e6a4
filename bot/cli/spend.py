"""`debate-bot spend`: the operator's table of model spend from the ledger
(docs/operations.md, "Money"). Registered in ``bot/cli/main.py``."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated, get_args

import typer

from bot.core.errors import BotError, ConfigError
from bot.store.admission import month_start, next_month
from bot.store.rows import SpendBy, SpendLine

_HEADERS = ("runs", "calls", "input", "cached", "output", "usd")


def parse_month(text: str | None, now: datetime) -> datetime:
    """``YYYY-MM`` → that UTC month's first instant; None → this month."""
    if text is None:
        return month_start(now)
    try:
        parsed = datetime.strptime(text, "%Y-%m")
    except ValueError:
        raise ConfigError(f"--month {text!r}: expected YYYY-MM, e.g. 2026-12") from None
    return parsed.replace(tzinfo=UTC)


def format_table(lines: list[SpendLine], by: str, month: str) -> str:
    rows = [
        (
            line.key,
            str(line.runs),
            str(line.calls),
            f"{line.input_tokens:,}",
            f"{line.cached_tokens:,}",
            f"{line.output_tokens:,}",
            f"${line.usd:.4f}",
        )
        for line in lines
    ]
    total = sum(line.usd for line in lines)
    header = (by, *_HEADERS)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def fmt(cells: tuple[str, ...]) -> str:
        first = cells[0].ljust(widths[0])
        return "  ".join([first, *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))])

    out = [f"Spend in {month} (UTC), by {by}", fmt(header)]
    out += [fmt(r) for r in rows] or ["(no model calls recorded)"]
    out.append(f"Total: ${total:.4f}")
    return "\n".join(out) + "\n"


def spend(
    month: Annotated[
        str | None, typer.Option(help="The UTC month, YYYY-MM (default: this month).")
    ] = None,
    by: Annotated[str, typer.Option(help="Group by repo, installation or model.")] = "repo",
    as_json: Annotated[bool, typer.Option("--json", help="JSON instead of a table.")] = False,
) -> None:
    """Model spend from the ledger, for one month, by repository, installation or model."""
    from bot.cli.common import fail, settings
    from bot.service.main import open_store

    try:
        if by not in get_args(SpendBy):
            raise ConfigError(f"--by {by!r}: expected repo, installation or model")
        since = parse_month(month, datetime.now(UTC))
        store = open_store(settings())
        try:
            lines = store.spend_report(since, next_month(since), by)  # type: ignore[arg-type]
        finally:
            store.dispose()
    except BotError as exc:
        raise fail(exc) from None
    label = since.strftime("%Y-%m")
    if as_json:
        doc = {
            "month": label,
            "by": by,
            "rows": [asdict(line) for line in lines],
            "total_usd": round(sum(line.usd for line in lines), 8),
        }
        typer.echo(json.dumps(doc, indent=2))
    else:
        typer.echo(format_table(lines, by, label), nl=False)
