"""`debate-bot eval CASES...` and `debate-bot eval harvest OWNER/REPO`.

A Typer sub-app; a first argument that is not a subcommand runs the eval
(``eval CASES…`` is ``eval run CASES…``). Heavy modules are imported inside
the commands. Every mistake is one line on stderr and exit code 2.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from bot.cli.common import settings
from bot.core.errors import BotError
from bot.core.explain import SETUP_ERROR

DEFAULT_OUT = Path("eval-report")


class _DefaultToRun(TyperGroup):
    """``eval CASES…`` means ``eval run CASES…``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


eval_app = typer.Typer(
    cls=_DefaultToRun,
    no_args_is_help=True,
    add_completion=False,
    help="Measure configurations on labelled cases: accuracy, cost, time (see `eval run`).",
)


def _guard(command: Callable[[], int]) -> None:
    try:
        code = command()
    except BotError as exc:
        typer.secho(f"error: {exc.public}", err=True, fg=typer.colors.RED)
        raise typer.Exit(SETUP_ERROR) from None
    except KeyboardInterrupt:
        typer.secho(
            "interrupted: finished cases are kept; run the same command again to resume",
            err=True,
        )
        raise typer.Exit(130) from None
    raise typer.Exit(code)


@eval_app.command("run")
def run_command(
    cases: Annotated[
        list[Path], typer.Argument(help="Case files (YAML, JSONL) or folders of them")
    ],
    config: Annotated[
        list[str] | None,
        typer.Option(
            "--config",
            "-c",
            help="NAME=SPEC (repeat), SPEC: single:MODEL | vote:N:MODEL | "
            "debate:MODEL[,MODEL...][;rounds=R][;tools=on|off][;judge=MODEL]; or a YAML file",
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option(help="Report folder (also holds the resumable cache.sqlite)")
    ] = DEFAULT_OUT,
    budget_usd: Annotated[
        float | None,
        typer.Option(min=0.0, help="Stop starting model calls once this run spent this much"),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=256, help="Cases in flight")] = 4,
) -> None:
    """Run CASES under each configuration; write report.md, report.json, accuracy-cost.png."""

    def go() -> int:
        from bot.cli.eval.main import run_eval

        return run_eval(
            cases,
            config or [],
            out=out,
            budget_usd=budget_usd,
            concurrency=concurrency,
            settings=settings(),
        )

    _guard(go)


@eval_app.command("harvest")
def harvest_command(
    repo: Annotated[str, typer.Argument(help="OWNER/REPO on GitHub")],
    since: Annotated[str, typer.Option(help="How far back: 90d, 12w, 6m")] = "90d",
    bots: Annotated[
        str | None,
        typer.Option(help="Review bots' logins, comma-separated (default: any Bot account)"),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Case file to write (default: stdout)")] = None,
) -> None:
    """Arbitration cases from a repository's merged PRs, labelled by what happened next."""

    def go() -> int:
        from bot.cli.eval.harvest_cli import run_harvest

        return run_harvest(repo, since=since, bots=bots, out=out, settings=settings())

    _guard(go)
