"""A small in-memory repository and tool runner for tests of the tool loop.

It stands in for the snapshot side (``bot/repo``): the same interface the loop
codes against (``bot/run/tool_loop.py`` ``Reader``, ``RunTool``), with the
refusals of the contract (a path outside the repository, a missing file, a
folder given to ``read_file``, a binary, an unknown tool, arguments that are not
JSON or miss a field) answered as error text, never raised.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

MAX_LINES = 200
MAX_BYTES = 16_000


@dataclass(frozen=True)
class Answer:
    text: str
    is_error: bool = False
    bytes_read: int = 0
    path: str | None = None


@dataclass
class MemoryReader:
    files: dict[str, str]
    commit: str = "0123456789abcdef0123456789abcdef01234567"
    html_url: str = "https://github.com/octo/repo"
    reads: list[str] = field(default_factory=list)  # every tool call, for assertions

    def file_lines(self, path: str) -> list[str] | None:
        text = self.files.get(path)
        return None if text is None or "\0" in text else text.splitlines()

    async def ensure(self, paths: Iterable[str]) -> None:
        """Everything is held already."""


def _refuse(text: str) -> Answer:
    return Answer(text, is_error=True)


def _clean(path: object) -> str | None:
    if not isinstance(path, str) or "\0" in path or path.startswith("/"):
        return None
    parts = [p for p in path.strip().split("/") if p]
    return None if ".." in parts else "/".join(parts)


async def run_tool(reader: MemoryReader, name: str, arguments: str, caps: Any) -> Answer:
    reader.reads.append(name)
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        return _refuse(f'{name}: the arguments are not JSON; send an object like {{"path": ""}}')
    if not isinstance(args, dict):
        return _refuse(f"{name}: the arguments must be a JSON object")
    if name == "list_files":
        return _list(reader, args)
    if name == "read_file":
        return _read(reader, args)
    if name == "search_code":
        return _search(reader, args)
    return _refuse(f"unknown tool {name!r}: use list_files, read_file or search_code")


def _list(reader: MemoryReader, args: dict[str, Any]) -> Answer:
    folder = _clean(args.get("path", ""))
    if folder is None:
        return _refuse("list_files: the path must stay inside the repository")
    prefix = folder + "/" if folder else ""
    entries = sorted(
        {
            p[len(prefix) :].split("/", 1)[0] + ("/" if "/" in p[len(prefix) :] else "")
            for p in reader.files
            if p.startswith(prefix)
        }
    )
    if not entries:
        return _refuse(f"list_files: no folder {folder!r}")
    return Answer("\n".join(entries))


def _read(reader: MemoryReader, args: dict[str, Any]) -> Answer:
    if "path" not in args:
        return _refuse("read_file: the argument `path` is required")
    path = _clean(args["path"])
    if path is None:
        return _refuse("read_file: the path must stay inside the repository")
    if path not in reader.files:
        if any(p.startswith(path + "/") for p in reader.files):
            return _refuse(f"read_file: {path} is a folder; use list_files")
        return _refuse(f"read_file: no file {path}")
    text = reader.files[path]
    if "\0" in text:
        return _refuse(f"read_file: {path} is binary")
    lines = text.splitlines()
    start = int(args.get("start_line") or 1)
    end = min(int(args.get("end_line") or len(lines)), start + MAX_LINES - 1, len(lines))
    out = "\n".join(f"{i}: {lines[i - 1]}" for i in range(max(1, start), end + 1))[:MAX_BYTES]
    return Answer(out, bytes_read=len(out.encode()), path=path)


def _search(reader: MemoryReader, args: dict[str, Any]) -> Answer:
    pattern = args.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        return _refuse("search_code: the argument `pattern` is required")
    try:
        rx = re.compile(pattern)
    except re.error:
        return _refuse("search_code: the pattern is not a valid regular expression")
    hits = [
        f"{p}:{i}: {line}"
        for p, text in sorted(reader.files.items())
        if "\0" not in text
        for i, line in enumerate(text.splitlines(), 1)
        if rx.search(line)
    ]
    out = "\n".join(hits[:50]) or "no matches"
    return Answer(out, bytes_read=len(out.encode()))
