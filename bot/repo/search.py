"""``search_code``'s engine: an untrusted pattern over many files, in bounded time.

The pattern comes from a model, so it is run by RE2 (PyPI ``google-re2``), whose
matching time is linear in the text: no backtracking, so ``(a+)+$`` over 50,000
``a``s takes microseconds instead of Python ``re``'s centuries. Linear is not
free: the cost is text size times program size, so both are bounded — the
pattern's length (``MAX_PATTERN_CHARS``), its compiled size (RE2's
``max_mem``: a pattern past it is refused at compile time), the text (the
snapshot's own bounds) and a wall-clock deadline checked between files, past
which the search stops and says so (one file costs at most ~0.3 s per MB for
the heaviest patterns RE2 accepts under this ``max_mem``; see
tests/unit/repo/test_search.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import re2  # type: ignore[import-untyped]

from bot.repo.paths import Refused

Regex = Any  # re2's compiled pattern (the package ships no type hints)
MAX_PATTERN_CHARS = 500
MAX_PROGRAM_BYTES = 4 * 1024 * 1024  # RE2 max_mem: its DFA cache and program
DEADLINE_S = 3.0
LINE_CHARS = 240  # a match line as shown (minified files have 100 kB lines)


@dataclass
class Found:
    lines: list[str] = field(default_factory=list)  # "path:line: text"
    files_searched: int = 0
    cut: str = ""  # why the search stopped early ("" = it did not)


def compile_pattern(pattern: str) -> Regex:
    """The pattern compiled for bytes, ``^``/``$`` per line. Refused when it is
    empty, too long, not RE2 syntax (lookaround, backreferences) or too big."""
    if not pattern:
        raise Refused("search_code needs a non-empty `pattern`.")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise Refused(f"the pattern is longer than {MAX_PATTERN_CHARS} characters; shorten it.")
    options = re2.Options()
    options.log_errors = False
    options.max_mem = MAX_PROGRAM_BYTES
    options.never_capture = True
    try:
        return re2.compile(b"(?m)" + pattern.encode("utf-8"), options)
    except re2.error as exc:
        arg = exc.args[0] if exc.args else b"invalid"
        reason = arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)
        raise Refused(
            f"the pattern cannot be run: {reason}. Patterns are RE2 syntax (no lookaround, "
            "no backreferences, repetition counts up to 1000); simplify it."
        ) from None


def search(
    regex: Regex,
    files: Iterable[tuple[str, bytes]],
    *,
    max_matches: int,
    deadline_s: float = DEADLINE_S,
    clock: Callable[[], float] = time.monotonic,
) -> Found:
    """Matching lines, one per line however many matches it holds, in file order.
    Blocking and CPU-bound: run it in a thread."""
    found = Found()
    stop_at = clock() + deadline_s
    for path, data in files:
        if clock() > stop_at:
            found.cut = f"the search took longer than {deadline_s:g} s"
            return found
        found.files_searched += 1
        last_line = -1
        line_no, scanned = 1, 0
        for seen, match in enumerate(regex.finditer(data)):
            if seen % 4096 == 4095 and clock() > stop_at:
                found.cut = f"the search took longer than {deadline_s:g} s"
                return found
            start = match.start()
            line_no += data.count(b"\n", scanned, start)
            scanned = start
            if line_no == last_line:
                continue
            last_line = line_no
            begin = data.rfind(b"\n", 0, start) + 1
            end = data.find(b"\n", start)
            text = data[begin : end if end >= 0 else len(data)].decode("utf-8", "replace")
            text = text.rstrip("\r")
            if len(text) > LINE_CHARS:
                text = text[:LINE_CHARS] + "…"
            found.lines.append(f"{path}:{line_no}: {text}")
            if len(found.lines) >= max_matches:
                found.cut = f"stopped at {max_matches} matches"
                return found
    return found
