"""The `debate-bot` command. Thin: parses arguments, builds settings, delegates.

Each command imports what it runs inside its own function: `--version`, `migrate`
or `doctor` need not load the web app, the worker and the model clients.
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.cli import spend as spend_command
from bot.cli.common import exit_with as _exit_with
from bot.cli.common import fail as _fail
from bot.cli.common import settings as _settings
from bot.cli.eval.cli import eval_app
from bot.core.errors import BotError
from bot.core.explain import FAILURE, OK, SETUP_ERROR
from bot.core.settings import Settings

if TYPE_CHECKING:
    import socket

    from bot.cli.setup import SetupOptions

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    # A failure is one line (main() below), never a page of frames.
    pretty_exceptions_enable=False,
    help="debate-bot: structured adversarial debates between LLM personas on GitHub.",
)

Host = Annotated[
    str | None, typer.Option(help="Listen address (default: DEBATE_BOT_HOST, 127.0.0.1)")
]
# The options `run` and `review` share.
Model = Annotated[
    str | None, typer.Option(help="Model for every persona, e.g. openai/gpt-4.1-mini")
]
Judge = Annotated[str | None, typer.Option(help="Model for the judge")]
Alternating = Annotated[bool, typer.Option("--alternating", help="A then B within a round")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Print the planned batches; call no model")]


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


def _local_settings() -> Settings:
    """A local run's settings: warnings on stderr unless DEBATE_BOT_LOG_LEVEL says
    otherwise, so a dropped model call says why ("cannot connect (connection
    refused)"), not only its class."""
    settings = _settings()
    if "log_level" in settings.model_fields_set:
        return settings
    return _settings(log_level="WARNING")


def _run_service(settings: Settings, *, web: bool, worker: bool) -> None:
    from bot.service.main import run_service

    run_service(settings, web=web, worker=worker)


@app.command()
def serve(
    host: Host = None,
    port: Annotated[int | None, typer.Option(help="Port (default: DEBATE_BOT_PORT, 3000)")] = None,
) -> None:
    """Web server and embedded worker in one process (SQLite by default)."""
    _run_service(_settings(host=host, port=port), web=True, worker=True)


@app.command()
def web(
    host: Host = None,
    port: Annotated[int | None, typer.Option(help="Port (default: DEBATE_BOT_PORT, 3000)")] = None,
) -> None:
    """Web server only (scale-out: workers run separately on PostgreSQL)."""
    _run_service(_settings(host=host, port=port), web=True, worker=False)


@app.command()
def worker(
    host: Host = None,
    port: Annotated[
        int | None,
        typer.Option(
            help="Port for /healthz, /readyz and /metrics (default: DEBATE_BOT_WORKER_PORT; none)"
        ),
    ] = None,
) -> None:
    """Worker only: claims deliveries and runs from the shared database."""
    _run_service(_settings(host=host, worker_port=port), web=False, worker=True)


@app.command()
def migrate() -> None:
    """Apply database migrations."""
    from bot.core.explain import check_sqlite_folder
    from bot.store import RunStore

    settings = _settings()
    check_sqlite_folder(settings.database_url)
    RunStore.from_url(settings.database_url).migrate()
    typer.echo("migrations applied")


@app.command()
def run(
    file: Annotated[
        Path | None,
        typer.Argument(
            help="Markdown plan or question (default: .github/debate.md; `-` reads it "
            "from standard input); @path references resolve against the repository root"
        ),
    ] = None,
    rounds: Annotated[
        int | None, typer.Option(min=1, max=10, help="Rounds (overrides frontmatter)")
    ] = None,
    mode: Annotated[
        str | None, typer.Option(help="debate | critique | arbitrate | proposal")
    ] = None,
    model: Model = None,
    judge: Judge = None,
    alternating: Alternating = False,
    dry_run: DryRun = False,
    output_dir: Annotated[
        Path | None,
        typer.Option(
            help="Where to write the transcript (default: the frontmatter's output_dir "
            "under the repository root, else ./debates)"
        ),
    ] = None,
    no_tools: Annotated[
        bool, typer.Option("--no-tools", help="Argue without reading the repository")
    ] = False,
) -> None:
    """Debate a markdown file locally and write a transcript."""
    from bot.cli.local.console import LocalOptions, run_local

    options = LocalOptions(
        file=file,
        rounds=rounds,
        mode=mode,
        model=model,
        judge=judge,
        alternating=alternating,
        dry_run=dry_run,
        output_dir=output_dir,
        no_tools=no_tools,
    )
    _exit_with(lambda: run_local(_local_settings(), options))


@app.command()
def review(
    path: Annotated[
        Path,
        typer.Argument(help="The checkout, or one folder of it, to review (default: here)"),
    ] = Path("."),
    rounds: Annotated[int | None, typer.Option(min=1, max=10, help="Rounds")] = None,
    model: Model = None,
    judge: Judge = None,
    alternating: Alternating = False,
    dry_run: DryRun = False,
    output_dir: Annotated[
        Path | None, typer.Option(help="Where to write the transcript (default: ./debates)")
    ] = None,
    no_tools: Annotated[
        bool, typer.Option("--no-tools", help="Review without reading the repository")
    ] = False,
) -> None:
    """Design review of a repository (or a folder) on disk; writes a transcript like `run`."""
    from bot.cli.local.console import LocalOptions, review_local

    options = LocalOptions(
        rounds=rounds,
        model=model,
        judge=judge,
        alternating=alternating,
        dry_run=dry_run,
        output_dir=output_dir,
        no_tools=no_tools,
    )
    _exit_with(lambda: review_local(_local_settings(), options, path))


@app.command()
def action() -> None:
    """Handle this GitHub Actions job's event (see docs/github-action.md); exit 0 when
    the outcome is posted, 1 when the run failed, 2 for a bad setup."""
    import os

    import anyio

    from bot.core.logs import configure_logging
    from bot.service.action import job_settings, read_job, run_job

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
        raise typer.Exit(FAILURE) from None
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
        str | None,
        typer.Option(help="The service's public URL: GitHub posts webhooks to it"),
    ] = None,
    webhook_proxy_url: Annotated[
        str | None,
        typer.Option(
            help="Instead of a public URL: a webhook-proxy channel (https://smee.io/new) "
            "the service follows; written as DEBATE_BOT_WEBHOOK_PROXY_URL"
        ),
    ] = None,
    env_file: Annotated[Path, typer.Option(help="Where to write the settings")] = Path(".env"),
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing app's settings")
    ] = False,
) -> None:
    """Register the GitHub App through GitHub's manifest flow; writes .env and the key."""
    from bot.cli.setup import SetupOptions, check_not_configured
    from bot.core.listen import bind_socket

    options = SetupOptions(
        github_url=github_url,
        org=org,
        host=host,
        port=port,
        public_url=public_url,
        webhook_proxy_url=webhook_proxy_url,
        env_file=env_file,
        force=force,
    )
    try:
        check_not_configured(options)
        sock = bind_socket(host, port)  # a busy port: one line, before "Open …"
    except BotError as exc:
        raise _fail(exc) from None
    install_url = _serve_setup_page(options, sock)
    if install_url is None:
        raise typer.Exit(FAILURE)
    typer.echo(f"Saved the app to {env_file}. Install it: {install_url}")
    typer.echo('Then start it: debate-bot serve (or docker compose, README "Running it").')


def _serve_setup_page(options: SetupOptions, sock: socket.socket) -> str | None:
    """Serve the setup page on ``sock`` until GitHub hands the new app back: its
    install URL, or None when the page was stopped first."""
    import uvicorn

    from bot.cli.setup import create_setup_app

    installed: list[str] = []
    server: uvicorn.Server | None = None

    def done(install_url: str) -> None:
        installed.append(install_url)
        assert server is not None
        server.should_exit = True

    config = uvicorn.Config(
        create_setup_app(options, done),
        host=options.host,
        port=options.port,
        log_level="warning",
        lifespan="off",
    )
    server = uvicorn.Server(config)
    typer.echo(f"Open {options.local_url}/setup to create the GitHub App.")
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return installed[0] if installed else None


@app.command()
def doctor() -> None:
    """Check settings, the app's key and grants on GitHub, the database and the models."""
    import anyio

    from bot.cli.doctor import run_checks, show
    from bot.cli.terminal import make_console
    from bot.core.logs import configure_logging

    # Warnings (a model that did not answer, …) go to stderr, redacted; the checks
    # on stdout say what failed (a table, or stacked when the terminal is narrow).
    configure_logging("WARNING", json=False)
    try:
        checks = anyio.run(run_checks, _settings())
    except BotError as exc:
        raise _fail(exc) from None
    show(checks, make_console())
    raise typer.Exit(0 if all(c.ok for c in checks) else 1)


@app.command()
def replay(
    file: Annotated[
        Path | None,
        typer.Argument(help="A webhook payload (JSON), posted byte for byte"),
    ] = None,
    event: Annotated[
        str | None, typer.Option(help="X-GitHub-Event of FILE, e.g. issue_comment")
    ] = None,
    comment: Annotated[
        str | None,
        typer.Option(help='Instead of FILE: an issue comment to deliver, e.g. "/debate status"'),
    ] = None,
    repo: Annotated[str | None, typer.Option(help="With --comment: OWNER/NAME")] = None,
    issue: Annotated[
        int | None, typer.Option(help="With --comment: the issue or PR number")
    ] = None,
    installation: Annotated[
        int | None,
        typer.Option(help="With --comment: the app's installation id on the repository"),
    ] = None,
    sender: Annotated[str, typer.Option(help="With --comment: who wrote it (a login)")] = "octocat",
    pull_request: Annotated[
        bool, typer.Option("--pull-request", help="With --comment: ISSUE is a pull request")
    ] = False,
    url: Annotated[
        str | None,
        typer.Option(help="Webhook URL (default: this host's DEBATE_BOT_HOST/PORT)"),
    ] = None,
) -> None:
    """Sign a delivery with the webhook secret and post it to a running service:
    a payload file, or an issue comment built for --repo and --issue."""
    import httpx

    from bot.cli.replay import CommentFlags, delivery, post_delivery

    built = (
        None
        if comment is None
        else CommentFlags(comment, repo, issue, installation, sender, pull_request)
    )
    try:
        settings = _settings()
        name, body = delivery(settings, file, event, built)
        result = post_delivery(settings, body, name, url)
    except BotError as exc:
        raise _fail(exc) from None
    except httpx.HTTPError as exc:
        typer.secho(f"error: the service did not answer: {exc}", err=True, fg=typer.colors.RED)
        raise typer.Exit(FAILURE) from None
    typer.echo(f"{result.status} {result.body} (delivery {result.delivery_id})")
    raise typer.Exit(OK if 200 <= result.status < 300 else FAILURE)


app.command(name="spend")(spend_command.spend)


@app.command("check-config")
def check_config(
    path: Annotated[
        Path,
        typer.Argument(help="A .github/debate.yml, a plan (.md), or a checkout (default: here)"),
    ] = Path("."),
) -> None:
    """Validate a repo config and plan frontmatter as the bot reads them: every
    error with its key and line (exit 2), exit 0 when valid."""
    from bot.inputs.checkconfig import check_config as check

    report = check(path)
    for line in report.errors:
        typer.secho(f"error: {line}", err=True, fg=typer.colors.RED)
    if report.errors:
        raise typer.Exit(SETUP_ERROR)
    for checked in report.checked:
        typer.echo(f"{checked}: valid")


@app.command()
def runs(
    repo: Annotated[str | None, typer.Option(help="Only this repository: OWNER/NAME")] = None,
    state: Annotated[
        str | None,
        typer.Option(help="Only this state: queued, running, waiting, done, failed, ..."),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many, newest first")] = 20,
) -> None:
    """Recent runs from the store: state, age, cost and the link to their thread."""
    from rich.table import Table

    from bot.cli.reports import recent_runs, rows
    from bot.cli.terminal import make_console

    settings = _settings()
    found = recent_runs(settings, repo=repo, state=state, limit=limit)
    if not found:
        typer.echo("no runs" + (" match" if repo or state else " yet"))
        return
    table = Table("run", "state", "age", "mode", "cost", "tokens", "thread", box=None)
    for row in rows(settings, found):
        table.add_row(*row)
    make_console(width=200).print(table)


app.add_typer(eval_app, name="eval")


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except SystemExit:
        raise
    except BaseException as exc:
        # Every failure a command let through: one line, never a traceback, unless
        # the operator asked for the details.
        if os.environ.get("DEBATE_BOT_LOG_LEVEL", "").upper() == "DEBUG":
            raise
        code = _fail(exc).exit_code
        sys.exit(code)
