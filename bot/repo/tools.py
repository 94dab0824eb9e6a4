"""The three read-only tools the debaters call: ``list_files``, ``read_file``,
``search_code``. Their names, descriptions and arguments are the engine's
contract (``bot/engine/tools.py`` ``TOOL_DEFINITIONS``); calls are checked
against it here.

``run_tool`` never raises for anything the model did: an unknown tool,
arguments that are not JSON or miss a field, a path outside the repository, a
binary, a pattern that cannot be run — each is an ``is_error`` answer whose
text says what to do instead, so the turn goes on. Only an outage of GitHub
while loading a file (``GitHubError``) propagates: the run's own retry policy
decides about those.

Default caps (``ToolCaps``), per call:

- ``max_lines`` 400 and ``max_bytes`` 24,000: a whole typical source file
  (median ~200 lines) in one call, about 6,000 tokens at most, so a turn's
  budget of calls is not spent on one file; longer files are paged with
  ``start_line``.
- ``max_entries`` 300: a folder listing a model can scan; bigger folders are cut
  and say so (list a subfolder).
- ``max_matches`` 50: enough to find a definition and its callers; a pattern
  that matches more is too broad to be evidence anyway.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import anyio

from bot.engine.tools import TOOL_DEFINITIONS, required_arguments, tool_named
from bot.engine.types import ToolName
from bot.repo.paths import Refused, clean_path
from bot.repo.search import compile_pattern, search
from bot.repo.snapshot import Entry, Snapshot, split_lines

LINE_CHARS = 2000  # one line as read_file shows it (minified code has 1 MB lines)
SEARCH_FETCH_CONCURRENCY = 8


@dataclass(frozen=True)
class ToolCaps:
    max_lines: int = 400
    max_bytes: int = 24_000
    max_entries: int = 300
    max_matches: int = 50


@dataclass(frozen=True)
class ToolAnswer:
    text: str
    is_error: bool
    bytes_read: int  # the answer's size in UTF-8 bytes (what the model is sent)
    path: str | None  # the file read_file read (resolved), else None


async def run_tool(reader: Snapshot, name: str, arguments: str, caps: ToolCaps) -> ToolAnswer:
    """Run one tool call on the snapshot; every refusal is an error answer."""
    path: str | None = None
    try:
        tool, args = _arguments(name, arguments)
        if tool == "list_files":
            text = await list_files(reader, _string(args, "path"), caps)
        elif tool == "read_file":
            path, text = await read_file(
                reader,
                _string(args, "path"),
                _line(args, "start_line"),
                _line(args, "end_line"),
                caps,
            )
        else:
            text = await search_code(reader, _string(args, "pattern"), _folder(args), caps)
    except Refused as exc:
        return _answer(str(exc), error=True, path=None)
    return _answer(text, error=False, path=path)


def _answer(text: str, *, error: bool, path: str | None) -> ToolAnswer:
    return ToolAnswer(text, error, len(text.encode("utf-8")), path)


def _arguments(name: str, raw: str) -> tuple[ToolName, dict[str, Any]]:
    tool = tool_named(name)
    if tool is None:
        raise Refused(f"there is no tool {name!r}; the tools are {', '.join(TOOL_DEFINITIONS)}.")
    try:
        args = json.loads(raw) if raw.strip() else {}
    except ValueError:
        raise Refused(
            f"the arguments of {name} are not valid JSON; send an object such as "
            f"{json.dumps(_example(name))}."
        ) from None
    if not isinstance(args, dict):
        raise Refused(f"the arguments of {name} must be a JSON object.")
    for required in required_arguments(tool):
        if required not in args:
            raise Refused(f"{name} needs the argument `{required}`.")
    return tool, args


def _example(name: str) -> dict[str, Any]:
    return {"pattern": "def main"} if name == "search_code" else {"path": "src/app.py"}


def _string(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise Refused(f"`{key}` must be a string.")
    return value


def _folder(args: dict[str, Any]) -> str:
    return "" if args.get("path") is None else _string(args, "path")


def _line(args: dict[str, Any], key: str) -> int | None:
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)  # models often quote numbers
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise Refused(f"`{key}` must be a line number (an integer, 1 or more).")
    return value


# -- the tools --------------------------------------------------------------------


async def list_files(snap: Snapshot, raw: str, caps: ToolCaps) -> str:
    resolved, entry = await snap.resolve(clean_path(raw))
    if entry is not None:
        if entry.kind == "file":
            raise Refused(f"`{entry.path}` is a file; use read_file to read it.")
        raise Refused(snap.describe(entry) + ".")
    names = snap.children(resolved)
    if not names:
        return "(the repository is empty)" if not resolved else f"(`{resolved}/` is empty)"
    lines = []
    for name in names[: caps.max_entries]:
        e = snap.entry(name)
        lines.append(snap.describe(e) if e is not None else name)
    if len(names) > caps.max_entries:
        lines.append(f"[cut: {caps.max_entries} of {len(names):,} entries shown; list a subfolder]")
    if snap.truncated:  # GitHub cut the tree: a folder may hold more than is known
        lines.append("[the repository has more files than this listing holds]")
    return "\n".join(lines)


async def read_file(
    snap: Snapshot, raw: str, start: int | None, end: int | None, caps: ToolCaps
) -> tuple[str, str]:
    path = clean_path(raw)
    if not path:
        raise Refused("read_file needs a file path; use list_files for a folder.")
    text = await snap.read_text(path)
    lines = split_lines(text.data)
    total = len(lines)
    first = start or 1
    if total == 0:
        return text.path, f"(`{text.path}` is empty)"
    if first > total:
        raise Refused(f"`{text.path}` has {total:,} lines; start_line {first} is past its end.")
    last = min(end or total, total)
    if last < first:
        raise Refused(f"end_line {end} is before start_line {first}.")
    out: list[str] = []
    size = 0
    shown = first - 1
    for number in range(first, min(last, first + caps.max_lines - 1) + 1):
        line = lines[number - 1]
        if len(line) > LINE_CHARS:
            line = line[:LINE_CHARS] + " …[line cut]"
        row = f"{number}: {line}"
        size += len(row.encode("utf-8")) + 1
        if out and size > caps.max_bytes:
            break
        out.append(row)
        shown = number
    if shown < last:
        out.append(
            f"[lines {first}-{shown} of {total:,} shown; call read_file with "
            f"start_line={shown + 1} to read on]"
        )
    if text.cut and last == total:
        out.append(
            f"[the file is {text.size:,} bytes; only its first {len(text.data):,} are "
            "readable here]"
        )
    return text.path, "\n".join(out)


async def search_code(snap: Snapshot, pattern: str, raw_folder: str, caps: ToolCaps) -> str:
    regex = compile_pattern(pattern)
    folder, entry = await snap.resolve(clean_path(raw_folder))
    if entry is not None:
        raise Refused(f"`{entry.path}` is not a folder; give search_code a folder as `path`.")
    candidates = [
        e for e in snap.files_under(folder) if e.size <= snap.limits.max_file_bytes or e.size == 0
    ]
    await _load_for_search(snap, folder, candidates)
    files = [(e.path, data) for e in candidates if (data := snap.held(e.path)) is not None]
    found = await anyio.to_thread.run_sync(
        lambda: search(regex, files, max_matches=caps.max_matches)
    )
    where = f"`{folder}/`" if folder else "the repository"
    if not found.lines:
        text = f"no match for /{pattern}/ in {where} ({found.files_searched:,} text files)"
    else:
        text = "\n".join(found.lines)
    if found.cut:
        text += f"\n[cut: {found.cut}; narrow the pattern or give a folder as `path`]"
    if snap.truncated:
        text += "\n[the repository has more files than this snapshot holds; some were not searched]"
    return text


async def _load_for_search(snap: Snapshot, folder: str, candidates: list[Entry]) -> None:
    """A lazy snapshot reads the files a search needs, within its bounds."""
    if snap.complete:
        return
    missing = snap.unheld(candidates)
    if snap.remote:
        need = sum(e.size for e in missing)
        limits = snap.limits
        if len(missing) > limits.search_fetch_files or need > limits.search_fetch_bytes:
            where = f"`{folder}/`" if folder else "the whole repository"
            raise Refused(
                f"{where} is too large to search here ({len(missing):,} files not read yet, "
                f"{need / 1e6:.1f} MB): give `path` a folder with at most "
                f"{limits.search_fetch_files} files, or read_file the files you suspect."
            )
    limiter = anyio.CapacityLimiter(SEARCH_FETCH_CONCURRENCY)

    async def load(path: str) -> None:
        async with limiter:
            try:
                await snap.read_text(path)
            except Refused:
                return  # binary or gone: not searched

    async with anyio.create_task_group() as tg:
        for e in missing:
            tg.start_soon(load, e.path)
