"""The opening docstring or comment of a source file: what its author says it
is for, without the licence header. A design review reads this instead of the
whole file."""

from __future__ import annotations

import posixpath
import re

MAX_LINES = 40
MAX_BYTES = 2048

_HASH_COMMENTS = frozenset(
    [".py", ".pyi", ".rb", ".sh", ".pl", ".r", ".ex", ".exs", ".jl", ".nim", ".cr", ".tcl"]
)
_DASH_COMMENTS = frozenset([".lua", ".hs", ".sql", ".elm"])
_PY = frozenset({".py", ".pyi"})
_DOCSTRING = re.compile(r'^[rRuU]?("""|\'\'\')')
_LICENCE = re.compile(r"copyright|licen[cs]e|spdx-|all rights reserved", re.I)
_PREAMBLE = re.compile(r"^(#!|#\s*-\*-|#\s*(vim|type):|//\s*(@ts-|eslint|go:build|\+build))")


def opening_comment(text: str, path: str) -> str:
    """The first comment blocks and (Python) the module docstring, licence
    headers skipped; ``""`` when the file opens with code."""
    ext = posixpath.splitext(path.lower())[1]
    line_marks = ("#",) if ext in _HASH_COMMENTS else ("--",) if ext in _DASH_COMMENTS else ("//",)
    lines = text.splitlines()
    i, blocks = 0, []
    while i < len(lines):
        line = lines[i].strip()
        if not line or _PREAMBLE.match(line):
            i += 1
            continue
        if ext in _PY and (m := _DOCSTRING.match(line)):
            j = _until(lines, i, m.group(1), len(m.group(0)))
            blocks.append(lines[i : j + 1])
            break  # nothing after the docstring belongs to the opening
        if line.startswith(line_marks):
            j = i
            while j + 1 < len(lines) and lines[j + 1].strip().startswith(line_marks):
                j += 1
        elif line.startswith("/*") and "//" in line_marks:
            j = _until(lines, i, "*/", 2)
        else:
            break
        block = lines[i : j + 1]
        if not _LICENCE.search("\n".join(block)):
            blocks.append(block)
        i = j + 1
    return _bounded("\n\n".join("\n".join(b).strip() for b in blocks))


def _until(lines: list[str], i: int, close: str, skip: int) -> int:
    """The index of the line closing a block opened on line ``i``."""
    if close in lines[i].strip()[skip:]:
        return i
    for j in range(i + 1, len(lines)):
        if close in lines[j]:
            return j
    return len(lines) - 1


def _bounded(text: str) -> str:
    lines = text.splitlines()[:MAX_LINES]
    out = "\n".join(lines).encode()[:MAX_BYTES].decode("utf-8", errors="ignore")
    return out + ("\n[…]" if len(out) < len(text) else "")
