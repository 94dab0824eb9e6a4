"""The prepare step of `debate-bot run` and `review`: plan, references, repo
config and spec, read from disk before any model is called.

No console and no exit codes: it returns a ``Prepared`` or raises a
``ConfigError`` naming the file and the fix, so the CLI (``bot.cli.local.console``)
and eval can both call it and then ``bot.run.execute``.

- The plan is a file, or standard input for ``-``; ``@path`` references resolve
  against the repository root: the nearest directory above the plan (for
  standard input, the current directory) holding ``.git``, else the current
  directory.
- The checkout's ``.github/debate.yml`` is read as the bot reads it on GitHub:
  the plan's frontmatter wins over it, the flags over both (bot/cli/local/spec.py).
- The transcript's folder: ``--output-dir``, else the frontmatter's
  ``output_dir`` (relative to the repository root, and inside it even after
  symlinks), else ``./debates``.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from bot.cli.local.files import display_name, load_refs, read_plan, read_stdin, repo_root
from bot.cli.local.spec import Flags, SpecInputs, spec_from_inputs
from bot.core.errors import ConfigError
from bot.core.settings import Settings
from bot.engine.types import DebateSpec
from bot.inputs.plan import Plan, parse_plan
from bot.inputs.repo_config import RepoConfig, load_repo_config
from bot.inputs.text import cap_subject
from bot.repo.brief import build_brief, plan_fetches
from bot.repo.brief.local import read_text, read_tree

DEFAULT_OUTPUT_DIR = Path("debates")
REPO_CONFIG = Path(".github") / "debate.yml"
STDIN = Path("-")  # `debate-bot run -`: the plan comes from standard input
STDIN_SOURCE = "<stdin>"


@dataclass(frozen=True)
class Prepared:
    """Everything read from disk, and the spec built from it."""

    source: str  # how the plan is named in messages and the transcript
    spec: DebateSpec
    output_dir: Path
    root: Path | None = None  # the checkout the debaters' tools read (spec.tools)


def read_repo_config(root: Path, cwd: Path) -> RepoConfig:
    """The checkout's ``.github/debate.yml``, or the defaults when it has none.
    An invalid file is a ConfigError naming the file and the key or line."""
    path = root / REPO_CONFIG
    if not path.is_file():
        return RepoConfig()
    source = display_name(path, cwd)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"{source}: cannot read the file ({why})") from None
    return load_repo_config(text, source=source)


def prepare_run(
    file: Path,
    flags: Flags,
    *,
    settings: Settings,
    available_providers: frozenset[str],
    seed: str,
    cwd: Path,
    output_dir: Path | None = None,
    stdin: BinaryIO | None = None,
) -> Prepared:
    """A plan file (or standard input, for ``-``) as a spec."""
    if file == STDIN:
        if stdin is None:
            raise ConfigError("`-` reads the plan from standard input, but there is none")
        source, text, root = STDIN_SOURCE, read_stdin(stdin), repo_root(cwd)
    else:
        source = display_name(file, cwd)
        text, root = read_plan(file, source), repo_root(file)
    config = read_repo_config(root, cwd)
    plan = parse_plan(text, source=source, mode=flags.mode)
    if flags.mode is None and "mode" not in plan.frontmatter_keys and config.mode:
        # The repo's default mode stands where the file names none, as on GitHub.
        plan = parse_plan(text, source=source, mode=config.mode)
    budget = (
        plan.context_budget_kb
        if "context_budget_kb" in plan.frontmatter_keys
        else config.context_budget_kb
    )
    subject, truncated = cap_subject(plan.body)
    context, warnings = load_refs(plan.refs, root, plan.body, budget)
    spec = spec_from_inputs(
        plan,
        SpecInputs(
            subject=subject,
            subject_truncated=truncated,
            context_files=context,
            warnings=warnings,
            flags=flags,
            config=config,
            settings=settings,
            available_providers=available_providers,
            seed=seed,
            tools_available=True,  # the working tree, as git ls-files lists it
        ),
    )
    return Prepared(source, spec, output_dir or _output_dir(plan, root), root)


def prepare_review(
    target: Path,
    flags: Flags,
    *,
    settings: Settings,
    available_providers: frozenset[str],
    seed: str,
    cwd: Path,
    output_dir: Path | None = None,
) -> Prepared:
    """A design review of a checkout (or one folder of it) from its repository
    brief, like `/debate review` on GitHub."""
    if not target.exists():
        raise ConfigError(f"{target}: no such folder; give `debate-bot review` a folder to review")
    if not target.is_dir():
        raise ConfigError(f"{target}: not a folder; `debate-bot run FILE` reviews a plan file")
    folder = target.resolve()
    found = repo_root(folder)
    # Outside a git checkout the folder itself is the repository.
    inside = (found / ".git").exists() and folder.is_relative_to(found)
    root = found if inside else folder
    scope = folder.relative_to(root).as_posix() if folder != root else ""
    config = read_repo_config(root, cwd)
    entries = read_tree(root)
    label = "the working tree"
    paths = plan_fetches(entries, scope, ref=label)
    contents = {p: read_text(root, p) for p in paths}
    brief = build_brief(
        entries,
        scope,
        contents,
        budget_kb=config.context_budget_kb,
        ref=label,
        repo=root.name,
    )
    subject, truncated = cap_subject(brief.subject_text())
    plan = parse_plan(subject, source=brief.title, mode="critique")
    spec = spec_from_inputs(
        plan,
        SpecInputs(
            subject=subject,
            subject_truncated=truncated,
            context_files=brief.files,
            warnings=(*brief.audit_warnings(), *(("subject truncated",) if truncated else ())),
            flags=replace(flags, mode="critique"),
            config=config,
            settings=settings,
            available_providers=available_providers,
            seed=seed,
            tools_available=True,
        ),
    )
    spec = replace(spec, subject_kind="repository", title=brief.title)
    return Prepared(brief.title, spec, output_dir or DEFAULT_OUTPUT_DIR, root)


def _output_dir(plan: Plan, root: Path) -> Path:
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
