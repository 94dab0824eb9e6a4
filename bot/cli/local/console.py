"""`debate-bot run FILE` and `review [PATH]`: the console around ``prepare``
(bot/cli/local/prepare.py) and ``bot.run.execute``.

- The plan is FILE (``-``: standard input), else ``.github/debate.md`` in the
  current directory (or its repository root); with neither, a minimal example
  goes to stderr (exit 2).
- The transcript goes to the prepared folder as ``debate-YYYY-MM-DD-HHMMSS.md``;
  its path is the only line on stdout. Progress goes to stderr.
- Exit codes: 0 done, 1 the debate aborted (the transcript is still written),
  2 a usage or configuration error (``ConfigError``, printed by the CLI),
  130 interrupted.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Protocol

import anyio
from rich.console import Console
from rich.text import Text

from bot.cli.local.dry_run import format_plan
from bot.cli.local.files import DEFAULT_PLAN, EXAMPLE_PLAN, find_default_plan
from bot.cli.local.log_setup import cli_logging
from bot.cli.local.prepare import STDIN, Prepared, prepare_review, prepare_run
from bot.cli.local.progress import Progress, step_label
from bot.cli.local.spec import PLANNING_MODEL, Flags, check_models, parse_mode
from bot.cli.terminal import make_console
from bot.core.errors import ConfigError
from bot.core.explain import FAILURE, INTERRUPTED, OK, SETUP_ERROR
from bot.core.redact import redact_secrets
from bot.core.settings import Settings
from bot.engine.render import render_transcript
from bot.engine.types import DebateSpec, Mode, Outcome, Turn
from bot.models.router import ModelRouter
from bot.repo.local import open_checkout
from bot.run.completers import Wiring, needs_reader, run_models, seat_agents
from bot.run.estimate import Forecast, forecast, supply_of
from bot.run.execute import Completer, execute

EXIT_OK, EXIT_ABORTED, EXIT_USAGE, EXIT_INTERRUPTED = OK, FAILURE, SETUP_ERROR, INTERRUPTED

_ABORTED = {
    "quorum_lost": "fewer than two personas were left to debate",
    "vendor_unavailable": "no configured model could be reached",
    "synthesis_failed": "the judge could not write the synthesis",
}


@dataclass(frozen=True)
class LocalOptions:
    file: Path | None = None
    rounds: int | None = None
    mode: str | None = None
    model: str | None = None
    judge: str | None = None
    alternating: bool = False
    dry_run: bool = False
    output_dir: Path | None = None
    no_tools: bool = False


def run_local(
    settings: Settings,
    options: LocalOptions,
    *,
    clock: Callable[[], datetime] = datetime.now,
) -> int:
    """Run the debate; return the exit code. Raises ConfigError (exit 2) for
    problems with the plan, its references, the repo config, the flags or the
    model setup."""
    cwd = Path.cwd()
    path = options.file if options.file is not None else find_default_plan(cwd)
    if path is None:
        sys.stderr.write(
            f"No plan file given, and there is no {DEFAULT_PLAN.as_posix()} here.\n"
            f"Create {DEFAULT_PLAN.as_posix()} (or any markdown file) like this, then run "
            "`debate-bot run [FILE]` (or pipe it to `debate-bot run -`):\n\n" + EXAMPLE_PLAN
        )
        return EXIT_USAGE
    prepare = functools.partial(
        prepare_run,
        path,
        _flags(options, parse_mode(options.mode)),
        stdin=sys.stdin.buffer if path == STDIN else None,
    )
    return _start(settings, options, prepare, clock)


def review_local(
    settings: Settings,
    options: LocalOptions,
    target: Path,
    *,
    clock: Callable[[], datetime] = datetime.now,
) -> int:
    """`debate-bot review [PATH]`: a design review of a checkout (or one folder of
    it) from its repository brief, like `/debate review` on GitHub."""
    prepare = functools.partial(prepare_review, target, _flags(options, "critique"))
    return _start(settings, options, prepare, clock)


def _flags(options: LocalOptions, mode: Mode | None) -> Flags:
    return Flags(
        rounds=options.rounds,
        mode=mode,
        model=options.model,
        judge=options.judge,
        alternating=options.alternating,
        no_tools=options.no_tools,
        # A dry run calls no model: with none configured it plans with a stand-in.
        stand_in=PLANNING_MODEL if options.dry_run else None,
    )


class Prepare(Protocol):
    """``prepare_run`` or ``prepare_review`` with the target and flags bound."""

    def __call__(
        self,
        *,
        settings: Settings,
        available_providers: frozenset[str],
        seed: str,
        cwd: Path,
        output_dir: Path | None,
    ) -> Prepared: ...


def _start(
    settings: Settings, options: LocalOptions, prepare: Prepare, clock: Callable[[], datetime]
) -> int:
    console = make_console(stderr=True, highlight=False, soft_wrap=True)
    started_at = clock()
    try:
        with cli_logging(settings):
            return anyio.run(_run, settings, options, prepare, console, started_at)
    except KeyboardInterrupt:
        console.print("interrupted; no transcript was written", style="red")
        return EXIT_INTERRUPTED


async def _run(
    settings: Settings,
    options: LocalOptions,
    prepare: Prepare,
    console: Console,
    started_at: datetime,
) -> int:
    async with ModelRouter(settings) as router:
        prepared = prepare(
            settings=settings,
            available_providers=router.available_providers(),
            seed=started_at.strftime("%Y%m%d%H%M%S"),
            cwd=Path.cwd(),
            output_dir=options.output_dir,
        )
        spec = prepared.spec
        if options.dry_run:
            return await _dry_run(spec, router, prepared)
        spec = seat_agents(spec, router)  # AgentUnavailable: no sandbox or CLI, no run
        for note in check_models(spec, router):
            console.print(f"note: {note}", style="yellow", markup=False)
        _mkdir(prepared.output_dir)
        _announce(console, spec, prepared)
        progress = Progress(console)
        try:
            async with local_models(router, spec, prepared.root) as models:
                outcome = await execute(spec, (), models=models, hooks=progress)
        finally:
            progress.close()
    path = _write_transcript(
        prepared.output_dir,
        started_at,
        render_transcript(
            spec,
            progress.turns,
            outcome,
            date=started_at.strftime("%Y-%m-%d %H:%M:%S"),
            plan=prepared.source,
        ),
    )
    return _report(console, outcome, progress.turns, progress.elapsed(), path)


async def _dry_run(spec: DebateSpec, router: ModelRouter, prepared: Prepared) -> int:
    """The plan and its estimate (bot/run/estimate.py): no model is called, so
    no key is needed; with tools, bounded by what the checkout holds."""
    notes: list[str] = []
    try:
        notes += check_models(spec, router)
    except ConfigError as exc:
        notes.append(f"{exc.public} (a real run would stop here)")
    # Plan with the models as configured, not as rerouted for missing credentials.
    planned = replace(spec, available_providers=frozenset())
    root = prepared.root

    def walk() -> Forecast:
        supply = supply_of(open_checkout(root)) if planned.tools and root is not None else None
        return forecast(planned, router.prices, supply_bytes=supply)

    est = await anyio.to_thread.run_sync(walk)
    sys.stdout.write(format_plan(spec, est, source=prepared.source, notes=notes))
    return EXIT_OK


def _announce(console: Console, spec: DebateSpec, prepared: Prepared) -> None:
    who = ", ".join(p.name for p in spec.personas) or "personas auto-picked by the judge"
    console.print(
        Text.assemble(
            ("debate-bot run ", "bold"),
            f"{prepared.source}: {spec.mode}, up to {spec.rounds} round(s), {spec.turn_order}; "
            f"{who}",
        )
    )
    for f in spec.context_files:
        mark = " [CONDENSED]" if f.condensed else ""
        console.print(f"  context: {f.path} ({f.size_bytes:,} bytes){mark}", markup=False)
    for w in spec.warnings:
        console.print(f"  warning: {w}", style="yellow", markup=False)


def _mkdir(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create the output directory {directory}: {exc.strerror}"
        ) from None


def _write_transcript(directory: Path, started_at: datetime, text: str) -> Path:
    stem = f"debate-{started_at.strftime('%Y-%m-%d-%H%M%S')}"
    body = redact_secrets(text)
    for n in range(1, 100):
        path = directory / (stem + (f"-{n}" if n > 1 else "") + ".md")
        try:
            with path.open("x", encoding="utf-8") as fh:  # never overwrite an earlier run
                fh.write(body)
            return path
        except FileExistsError:
            continue
        except OSError as exc:
            raise ConfigError(f"cannot write the transcript {path}: {exc.strerror}") from None
    raise ConfigError(f"too many transcripts named {stem}-*.md in {directory}")


def _report(
    console: Console, outcome: Outcome, turns: list[Turn], elapsed_s: float, path: Path
) -> int:
    for t in turns:
        if t.status == "dropped":
            console.print(
                f"dropped: {t.key.slot} ({t.drop_class}) in {step_label(t.key)}",
                style="red",
                markup=False,
            )
    tokens = sum(t.usage.input_tokens + t.usage.output_tokens for t in turns)
    summary = f"{len(turns)} model calls, {tokens:,} tokens, {elapsed_s:.1f}s"
    sys.stdout.write(f"{path}\n")
    if outcome.kind == "aborted":
        why = _ABORTED.get(outcome.reason, "the debate could not continue")
        console.print(
            f"aborted ({outcome.reason or 'unknown'}): {why}; {summary}. "
            f"The partial transcript is at {path}",
            style="red",
            markup=False,
        )
        return EXIT_ABORTED
    if outcome.kind == "pending_decision":
        points = ", ".join(str(p) for p in outcome.pending_points)
        console.print(
            f"stalemate on point(s) {points}: the transcript lists the positions to decide "
            f"between; {summary}.",
            style="yellow",
            markup=False,
        )
    else:
        console.print(f"done: {outcome.kind}; {summary}.", style="green", markup=False)
    console.print(f"transcript: {path}", markup=False)
    return EXIT_OK


def local_models(
    router: ModelRouter, spec: DebateSpec, root: Path | None
) -> contextlib.AbstractAsyncContextManager[Completer]:
    """The run's completer (bot/run/completers.py) over the working tree (only what
    ``git ls-files`` lists: an ignored ``.env`` never reaches a model or an
    agent's workspace). A local run is short and restarts cheaply, so its steps
    are not stored."""
    reader = open_checkout(root) if root is not None and needs_reader(spec) else None
    return run_models(spec, Wiring(router, router, reader, "local"))
