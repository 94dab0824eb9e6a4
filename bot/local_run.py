"""`debate-bot run FILE`: debate a markdown file locally and write a transcript.

- The plan is FILE, else ``.github/debate.md`` in the current directory (or its
  repository root); with neither, a minimal example goes to stderr (exit 2).
- ``@path`` references resolve against the repository root: the nearest
  directory above the plan holding ``.git``, else the current directory.
- The transcript goes to ``--output-dir``, else the frontmatter's ``output_dir``
  (relative to the repository root, and inside it even after symlinks), else
  ``./debates`` under the current directory, as ``debate-YYYY-MM-DD-HHMMSS.md``;
  its path is the only line on stdout. Progress goes to stderr.
- Exit codes: 0 done, 1 the debate aborted (the transcript is still written),
  2 a usage or configuration error (``ConfigError``, printed by the CLI),
  130 interrupted.
"""

from __future__ import annotations

import posixpath
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import anyio
from rich.console import Console
from rich.text import Text

from bot.brief import build_brief, plan_fetches
from bot.brief.local import read_text, read_tree
from bot.commands.plan import Plan, cap_subject, parse_plan
from bot.config import RepoConfig, Settings
from bot.debate.render import render_transcript
from bot.debate.types import ContextFile, DebateSpec, Outcome, SubjectKind, Turn
from bot.errors import ConfigError
from bot.llm.router import ModelRouter
from bot.local.dry_run import format_plan, simulate
from bot.local.execute import Progress, run_debate, step_label
from bot.local.files import (
    DEFAULT_PLAN,
    EXAMPLE_PLAN,
    display_name,
    find_default_plan,
    load_refs,
    read_plan,
    repo_root,
)
from bot.local.log_setup import cli_logging
from bot.local.spec import Overrides, build_spec, check_models, parse_mode
from bot.redact import redact_secrets

DEFAULT_OUTPUT_DIR = Path("debates")

EXIT_OK, EXIT_ABORTED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

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


@dataclass(frozen=True)
class Prepared:
    """Everything read from disk before any model is called."""

    source: str
    plan: Plan
    subject: str
    truncated: bool
    context: tuple[ContextFile, ...]
    warnings: tuple[str, ...]
    output_dir: Path
    subject_kind: SubjectKind = "plan"
    title: str = ""  # instead of the plan's, for a repository review


def run_local(
    settings: Settings,
    options: LocalOptions,
    *,
    clock: Callable[[], datetime] = datetime.now,
) -> int:
    """Run the debate; return the exit code. Raises ConfigError (exit 2) for
    problems with the plan, its references, the flags or the model setup."""
    cwd = Path.cwd()
    path = options.file if options.file is not None else find_default_plan(cwd)
    if path is None:
        sys.stderr.write(
            f"No plan file given, and there is no {DEFAULT_PLAN.as_posix()} here.\n"
            f"Create {DEFAULT_PLAN.as_posix()} (or any markdown file) like this, then run "
            "`debate-bot run [FILE]`:\n\n" + EXAMPLE_PLAN
        )
        return EXIT_USAGE
    overrides = Overrides(
        rounds=options.rounds,
        mode=parse_mode(options.mode),
        model=options.model,
        judge=options.judge,
        alternating=options.alternating,
    )
    return _start(settings, options, overrides, _prepare(path, options, overrides, cwd), clock)


def review_local(
    settings: Settings,
    options: LocalOptions,
    target: Path,
    *,
    clock: Callable[[], datetime] = datetime.now,
) -> int:
    """`debate-bot review [PATH]`: a design review of a checkout (or one folder of
    it) from its repository brief, like `/debate review` on GitHub."""
    if not target.is_dir():
        raise ConfigError(f"{target}: not a folder; `debate-bot run FILE` reviews a plan file")
    overrides = Overrides(
        rounds=options.rounds,
        mode="critique",
        model=options.model,
        judge=options.judge,
        alternating=options.alternating,
    )
    return _start(settings, options, overrides, _prepare_review(target, options), clock)


def _start(
    settings: Settings,
    options: LocalOptions,
    overrides: Overrides,
    prepared: Prepared,
    clock: Callable[[], datetime],
) -> int:
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    started_at = clock()
    try:
        with cli_logging(settings):
            return anyio.run(_run, settings, options, overrides, prepared, console, started_at)
    except KeyboardInterrupt:
        console.print("interrupted; no transcript was written", style="red")
        return EXIT_INTERRUPTED


def _prepare(path: Path, options: LocalOptions, overrides: Overrides, cwd: Path) -> Prepared:
    source = display_name(path, cwd)
    plan = parse_plan(read_plan(path, source), source=source, mode=overrides.mode)
    root = repo_root(path)
    subject, truncated = cap_subject(plan.body)
    context, warnings = load_refs(plan.refs, root, plan.body, plan.context_budget_kb)
    return Prepared(
        source=source,
        plan=plan,
        subject=subject,
        truncated=truncated,
        context=context,
        warnings=warnings,
        output_dir=_output_dir(options, plan, root),
    )


def _prepare_review(target: Path, options: LocalOptions) -> Prepared:
    found = repo_root(target)
    # Outside a git checkout the folder itself is the repository.
    root = found if (found / ".git").exists() else target.resolve()
    scope = target.resolve().relative_to(root).as_posix() if target.resolve() != root else ""
    entries = read_tree(root)
    label = "the working tree"
    paths = plan_fetches(entries, scope, ref=label)
    contents = {p: read_text(root, p) for p in paths}
    brief = build_brief(
        entries,
        scope,
        contents,
        budget_kb=RepoConfig().context_budget_kb,
        ref=label,
        repo=root.name,
    )
    subject, truncated = cap_subject(brief.subject_text())
    return Prepared(
        source=brief.title,
        plan=parse_plan(subject, source=brief.title, mode="critique"),
        subject=subject,
        truncated=truncated,
        context=brief.files,
        warnings=(*brief.audit_warnings(), *(("subject truncated",) if truncated else ())),
        output_dir=options.output_dir or DEFAULT_OUTPUT_DIR,
        subject_kind="repository",
        title=brief.title,
    )


def _output_dir(options: LocalOptions, plan: Plan, root: Path) -> Path:
    if options.output_dir is not None:
        return options.output_dir
    if plan.output_dir:
        # A plan may come from someone else: it may only name a place in the repository.
        raw = plan.output_dir.strip().replace("\\", "/")
        norm = posixpath.normpath(raw) if raw else "."
        if raw.startswith(("/", "~")) or norm == ".." or norm.startswith("../"):
            raise ConfigError(
                f"{plan.source}: output_dir {plan.output_dir!r} must be a relative path inside "
                "the repository; use --output-dir for any other place"
            )
        return _inside_root(root / norm, root, plan)
    return DEFAULT_OUTPUT_DIR


def _inside_root(directory: Path, root: Path, plan: Plan) -> Path:
    """``directory`` with symlinks resolved, if that is still inside ``root``.

    The lexical check is not enough: ``docs -> /elsewhere`` in the repository would
    carry the transcript out. Resolving follows links through the existing part of
    the path (even dangling ones); the rest is appended as written.
    """
    try:
        resolved = directory.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise ConfigError(
            f"{plan.source}: output_dir {plan.output_dir!r} cannot be resolved: {exc}"
        ) from None
    if not resolved.is_relative_to(root.resolve()):
        raise ConfigError(
            f"{plan.source}: output_dir {plan.output_dir!r} leads outside the repository "
            f"(to {resolved}) through a symbolic link; use --output-dir for any other place"
        )
    return resolved


async def _run(
    settings: Settings,
    options: LocalOptions,
    overrides: Overrides,
    prepared: Prepared,
    console: Console,
    started_at: datetime,
) -> int:
    async with ModelRouter(settings) as router:
        spec = build_spec(
            prepared.plan,
            subject=prepared.subject,
            subject_truncated=prepared.truncated,
            context_files=prepared.context,
            warnings=prepared.warnings,
            overrides=overrides,
            settings=settings,
            available_providers=router.available_providers(),
            seed=started_at.strftime("%Y%m%d%H%M%S"),
        )
        spec = replace(spec, subject_kind=prepared.subject_kind, title=prepared.title or spec.title)
        if options.dry_run:
            return _dry_run(spec, router, prepared.source)
        for note in check_models(spec, router):
            console.print(f"note: {note}", style="yellow", markup=False)
        _mkdir(prepared.output_dir)
        _announce(console, spec, prepared)
        progress = Progress(console)
        turns, outcome = await run_debate(spec, router, progress)
    path = _write_transcript(
        prepared.output_dir,
        started_at,
        render_transcript(
            spec,
            turns,
            outcome,
            date=started_at.strftime("%Y-%m-%d %H:%M:%S"),
            plan=prepared.source,
        ),
    )
    return _report(console, outcome, turns, progress.elapsed(), path)


def _dry_run(spec: DebateSpec, router: ModelRouter, source: str) -> int:
    notes: list[str] = []
    try:
        notes += check_models(spec, router)
    except ConfigError as exc:
        notes.append(f"{exc.public} (a real run would stop here)")
    # Plan with the models as configured, not as rerouted for missing credentials.
    batches, outcome = simulate(replace(spec, available_providers=frozenset()))
    sys.stdout.write(
        format_plan(spec, batches, outcome, source=source, notes=notes, prices=router.prices)
    )
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
