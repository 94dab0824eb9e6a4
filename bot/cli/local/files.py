"""Finding and reading the plan file and its ``@path`` references on disk.

Every problem with the plan itself is a ``ConfigError`` naming the file (the
CLI prints it and exits 2); problems with a referenced file are warnings that
end up in the transcript, except a reference leaving the repository, which is
refused outright.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from bot.core.errors import ConfigError
from bot.engine.types import ContextFile
from bot.inputs.text import assemble_context, check_ref

PLAN_MAX_BYTES = 1024 * 1024
# A referenced file is condensed to the context budget anyway; this only keeps a
# stray multi-gigabyte log from being read into memory.
REF_MAX_BYTES = 8 * 1024 * 1024
DEFAULT_PLAN = Path(".github") / "debate.md"

EXAMPLE_PLAN = """\
---
rounds: 2              # optional; every field has a default
# personas:            # optional; exactly 2 (debate/critique), auto-picked if omitted
#   - name: Feasibility
#     perspective: Is this realistic to build and run?
#     model: openai/gpt-4.1-mini
#   - name: Security
#     perspective: What can go wrong, and who can abuse it?
#     model: anthropic/claude-sonnet-4-5
---
# Move session storage to Redis

A plan of 50 words or more is critiqued issue by issue; a shorter question
(under 50 words) is debated for and against. Reference repository files with
@path, for example @src/session.py, to embed them as context.
"""


def repo_root(start: Path) -> Path:
    """The nearest directory at or above ``start`` holding ``.git`` (a directory,
    or a file in worktrees); the current directory if there is none."""
    here = start.resolve()
    if not here.is_dir():
        here = here.parent
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return candidate
    return Path.cwd().resolve()


def find_default_plan(cwd: Path) -> Path | None:
    """``.github/debate.md`` in the current directory, else in its repository root."""
    for base in (cwd, repo_root(cwd)):
        candidate = base / DEFAULT_PLAN
        if candidate.is_file():
            return candidate
    return None


def display_name(path: Path, cwd: Path) -> str:
    """How the plan is named in messages and the transcript: relative when it can be."""
    try:
        return path.resolve().relative_to(cwd.resolve()).as_posix()
    except ValueError:
        return str(path)


def read_plan(path: Path, source: str) -> str:
    try:
        if path.is_dir():
            raise ConfigError(f"{source}: is a directory; give the path of a markdown file")
        size = path.stat().st_size
    except FileNotFoundError:
        raise ConfigError(f"{source}: file not found") from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read the file ({exc.strerror})") from None
    if not path.is_file():
        raise ConfigError(f"{source}: not a regular file")
    if size > PLAN_MAX_BYTES:
        raise ConfigError(
            f"{source}: the file is {size:,} bytes; plan files are limited to 1 MiB "
            f"({PLAN_MAX_BYTES:,} bytes). Move long material into @path references."
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read the file ({exc.strerror})") from None
    if not data.strip():
        raise ConfigError(f"{source}: the file is empty; write a plan or a question in it")
    return _plan_text(data, source)


def read_stdin(stream: BinaryIO, source: str = "<stdin>") -> str:
    """The plan piped in (`debate-bot run -`), held to a plan file's limits."""
    try:
        data = stream.read(PLAN_MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read standard input ({exc.strerror})") from None
    if len(data) > PLAN_MAX_BYTES:
        raise ConfigError(
            f"{source}: the plan is over 1 MiB ({PLAN_MAX_BYTES:,} bytes); "
            "move long material into @path references"
        )
    if not data.strip():
        raise ConfigError(
            f"{source}: standard input is empty; pipe a plan or a question in, "
            "e.g. `echo 'Should we use gRPC?' | debate-bot run -`"
        )
    return _plan_text(data, source)


def _plan_text(data: bytes, source: str) -> str:
    text = _text(data)
    if text is None:
        raise ConfigError(f"{source}: looks like a binary file, not UTF-8 markdown text")
    return text


def _text(data: bytes) -> str | None:
    """UTF-8 text, or None for anything binary (NUL bytes or invalid UTF-8)."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def load_refs(
    refs: Sequence[str], root: Path, subject: str, budget_kb: int
) -> tuple[tuple[ContextFile, ...], tuple[str, ...]]:
    """Read the ``@path`` files under ``root`` and fit them to the budget.

    A reference that leaves ``root`` (``..``, an absolute path, or a symbolic
    link pointing outside) is refused with ``ConfigError``. Missing, binary,
    oversized files and directories become warnings."""
    base = root.resolve()
    loaded: dict[str, str | None] = {}
    warnings: list[str] = []
    for raw in refs:
        try:
            norm = check_ref(raw)
        except ConfigError as exc:
            raise ConfigError(f"{exc.public}; refused (repository root: {base})") from None
        target = (base / norm).resolve()
        if not target.is_relative_to(base):
            raise ConfigError(
                f"`{raw}`: the path leaves the repository root through a symbolic link; "
                f"refused (repository root: {base})"
            )
        if norm in loaded or any(w.startswith(f"`{norm}`:") for w in warnings):
            continue
        text, problem = _read_ref(target)
        if problem:
            warnings.append(f"`{norm}`: {problem}; skipped")
        else:
            loaded[norm] = text
    files, budget_warnings = assemble_context(subject, loaded, budget_kb)
    return files, (*warnings, *budget_warnings)


def _read_ref(path: Path) -> tuple[str | None, str]:
    """(text or None when missing, a problem sentence or "")."""
    if not path.exists():
        return None, ""  # assemble_context reports it as not found
    if path.is_dir():
        return None, "is a directory, not a file"
    try:
        size = path.stat().st_size
        if size > REF_MAX_BYTES:
            return None, f"file too large ({size:,} bytes; limit {REF_MAX_BYTES // 2**20} MiB)"
        data = path.read_bytes()
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror})"
    text = _text(data)
    if text is None:
        return None, "binary file (not UTF-8 text)"
    return text, ""
