"""The `debate-bot` command. Thin: parses arguments, builds settings, delegates.

Each command imports what it runs inside its own function: `--version`, `migrate`
or `doctor` need not load the web app, the worker and the model clients.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from pydantic import ValidationError

from bot.config import Settings, format_validation_error
from bot.errors import BotError, ConfigError
from bot.eval.cli import eval_app

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="debate-bot: structured adversarial debates between LLM personas on GitHub.",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"debate-bot {version('debate-bot')}")
        raise typer.Exit()


@app.callback()
def _root(
    _show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit"
        ),
    ] = False,
) -> None:
    """debate-bot: structured adversarial debates between LLM personas on GitHub."""


def _settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source="settings")) from exc


def _fail(exc: BotError) -> typer.Exit:
    typer.secho(f"error: {exc.public}", err=True, fg=typer.colors.RED)
    return typer.Exit(2)


def _exit_with(command: Callable[[], int]) -> NoReturn:
    """Exit with the command's code; a BotError is a usage error (exit 2)."""
    try:
        code = command()
    except BotError as exc:
        raise _fail(exc) from None
    raise typer.Exit(code)


def _run_service(*, web: bool, worker: bool) -> None:
    from bot.service import run_service

    try:
        run_service(_settings(), web=web, worker=worker)
    except ConfigError as exc:
        raise _fail(exc) from None


@app.command()
def serve() -> None:
    """Web server and embedded worker in one process (SQLite by default)."""
    _run_service(web=True, worker=True)


@app.command()
def web() -> None:
    """Web server only (scale-out: workers run separately on PostgreSQL)."""
    _run_service(web=True, worker=False)


@app.command()
def worker() -> None:
    """Worker only: claims deliveries and runs from the shared database."""
    _run_service(web=False, worker=True)


@app.command()
def migrate() -> None:
    """Apply database migrations."""
    from bot.store import RunStore

    try:
        settings = _settings()
        RunStore.from_url(settings.database_url).migrate()
    except BotError as exc:
        raise _fail(exc) from None
    typer.echo("migrations applied")


@app.command()
def run(
    file: Annotated[
        Path | None,
        typer.Argument(
            help="Markdown plan or question (default: .github/debate.md); "
            "@path references resolve against the repository root"
        ),
    ] = None,
    rounds: Annotated[
        int | None, typer.Option(min=1, max=10, help="Rounds (overrides frontmatter)")
    ] = None,
    mode: Annotated[
        str | None, typer.Option(help="debate | critique | arbitrate | proposal")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model for every persona, e.g. openai/gpt-4.1-mini")
    ] = None,
    judge: Annotated[str | None, typer.Option(help="Model for the judge")] = None,
    alternating: Annotated[
        bool, typer.Option("--alternating", help="A then B within a round")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the planned batches; call no model")
    ] = False,
    output_dir: Annotated[
        Path | None,
        typer.Option(
            help="Where to write the transcript (default: the frontmatter's output_dir "
            "under the repository root, else ./debates)"
        ),
    ] = None,
) -> None:
    """Debate a markdown file locally and write a transcript."""
    from bot.local_run import LocalOptions, run_local

    options = LocalOptions(
        file=file,
        rounds=rounds,
        mode=mode,
        model=model,
        judge=judge,
        alternating=alternating,
        dry_run=dry_run,
        output_dir=output_dir,
    )
    _exit_with(lambda: run_local(_settings(), options))


@app.command()
def review(
    path: Annotated[
        Path,
        typer.Argument(help="The checkout, or one folder of it, to review (default: here)"),
    ] = Path("."),
    rounds: Annotated[int | None, typer.Option(min=1, max=10, help="Rounds")] = None,
    model: Annotated[
        str | None, typer.Option(help="Model for every persona, e.g. openai/gpt-4.1-mini")
    ] = None,
    judge: Annotated[str | None, typer.Option(help="Model for the judge")] = None,
    alternating: Annotated[
        bool, typer.Option("--alternating", help="A then B within a round")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the planned batches; call no model")
    ] = False,
    output_dir: Annotated[
        Path | None, typer.Option(help="Where to write the transcript (default: ./debates)")
    ] = None,
) -> None:
    """Design review of a repository (or a folder) on disk; writes a transcript like `run`."""
    from bot.local_run import LocalOptions, review_local

    options = LocalOptions(
        rounds=rounds,
        model=model,
        judge=judge,
        alternating=alternating,
        dry_run=dry_run,
        output_dir=output_dir,
    )
    _exit_with(lambda: review_local(_settings(), options, path))


@app.command()
def action() -> None:
    """Handle this GitHub Actions job's event (see docs/github-action.md); exit 0 when
    the outcome is posted, 1 when the run failed, 2 for a bad setup."""
    import os

    import anyio

    from bot.action import job_settings, read_job, run_job
    from bot.logs import configure_logging

    try:
        job = read_job(os.environ)
        settings = job_settings(_settings(), job)
    except BotError as exc:
        raise _fail(exc) from None
    configure_logging(settings.log_level, json=False)
    try:
        code = anyio.run(run_job, settings, job)
    except BotError as exc:  # e.g. GitHub unreachable: the job fails, with the reason
        typer.secho(f"error: {exc.public}", err=True, fg=typer.colors.RED)
        raise typer.Exit(1) from None
    raise typer.Exit(code)


@app.command()
def setup(
    org: Annotated[str | None, typer.Option(help="Register the app for this organization")] = None,
    github_url: Annotated[
        str, typer.Option(help="GitHub, or a GitHub Enterprise Server: https://HOST")
    ] = "https://github.com",
    host: Annotated[str, typer.Option(help="Where the setup page listens")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port of the setup page")] = 3000,
    public_url: Annotated[
        str | None, typer.Option(help="The service's public URL, for the webhook (default: local)")
    ] = None,
    env_file: Annotated[Path, typer.Option(help="Where to write the settings")] = Path(".env"),
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing app's settings")
    ] = False,
) -> None:
    """Register the GitHub App through GitHub's manifest flow; writes .env and the key."""
    import uvicorn

    from bot.setup import SetupOptions, check_not_configured, create_setup_app

    options = SetupOptions(
        github_url=github_url,
        org=org,
        host=host,
        port=port,
        public_url=public_url,
        env_file=env_file,
        force=force,
    )
    try:
        check_not_configured(options)
    except BotError as exc:
        raise _fail(exc) from None
    installed: list[str] = []
    server: uvicorn.Server | None = None

    def done(install_url: str) -> None:
        installed.append(install_url)
        assert server is not None
        server.should_exit = True

    config = uvicorn.Config(
        create_setup_app(options, done), host=host, port=port, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    typer.echo(f"Open {options.local_url}/setup to create the GitHub App.")
    server.run()
    if not installed:
        raise typer.Exit(1)
    typer.echo(f"Saved the app to {env_file}. Install it: {installed[0]}")


@app.command()
def doctor() -> None:
    """Check settings, the app's key and grants on GitHub, the database and the models."""
    import anyio
    from rich.console import Console
    from rich.table import Table

    from bot.doctor import run_checks
    from bot.logs import configure_logging

    # Warnings (a model that did not answer, …) go to stderr, redacted; the table
    # on stdout says what failed.
    configure_logging("WARNING", json=False)
    try:
        checks = anyio.run(run_checks, _settings())
    except BotError as exc:
        raise _fail(exc) from None
    table = Table("", "check", "result", "fix")
    for c in checks:
        table.add_row("[green]✓[/]" if c.ok else "[red]✗[/]", c.name, c.detail, c.fix)
    Console().print(table)
    raise typer.Exit(0 if all(c.ok for c in checks) else 1)


@app.command()
def replay(
    file: Annotated[Path, typer.Argument(help="A webhook payload (JSON), posted byte for byte")],
    event: Annotated[str, typer.Option(help="X-GitHub-Event, e.g. issue_comment")],
    url: Annotated[
        str | None,
        typer.Option(help="Webhook URL (default: this host's DEBATE_BOT_HOST/PORT)"),
    ] = None,
) -> None:
    """Sign a payload with the webhook secret and post it to a running service."""
    import httpx

    from bot.replay import replay as post_delivery

    try:
        result = post_delivery(_settings(), file, event, url)
    except BotError as exc:
        raise _fail(exc) from None
    except httpx.HTTPError as exc:
        typer.secho(f"error: the service did not answer: {exc}", err=True, fg=typer.colors.RED)
        raise typer.Exit(1) from None
    typer.echo(f"{result.status} {result.body} (delivery {result.delivery_id})")
    raise typer.Exit(0 if 200 <= result.status < 300 else 1)


app.add_typer(eval_app, name="eval")


def main() -> None:
    app()
