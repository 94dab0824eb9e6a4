"""The debaters' tools (bot/repo/tools.py) over a snapshot: answers, caps and
every refusal (each an error answer, never an exception)."""

from __future__ import annotations

import json
import threading

import anyio
import pytest

from bot.engine.tools import TOOL_DEFINITIONS
from bot.repo.search import compile_pattern, search
from bot.repo.snapshot import Limits
from bot.repo.tools import ToolAnswer, ToolCaps, run_tool
from testkit.harness.repo import archived

FILES = {
    "README.md": b"# Widgets\n\nSee src/.\n",
    "src/app.py": b"".join(f"line {i}\n".encode() for i in range(1, 1001)),
    "src/util.py": b"def helper():\n    return MAX_RETRIES\n\nMAX_RETRIES = 3\r\n",
    "src/empty.py": b"",
    "docs/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00rest",
    "docs/guide.md": b"guide\n",
    "link_ok": b"src/util.py",
    "link_dir": b"src",
    "link_out": b"../../etc/passwd",
    "link_abs": b"/etc/passwd",
    "loop_a": b"loop_b",
    "loop_b": b"loop_a",
    "vendor/lib": b"f" * 40,
}
MODES = {
    "link_ok": "120000",
    "link_dir": "120000",
    "link_out": "120000",
    "link_abs": "120000",
    "loop_a": "120000",
    "loop_b": "120000",
    "vendor/lib": "160000",
}


@pytest.fixture(scope="module")
def snap():
    return archived(FILES, MODES)


def call(snap, name: str, args: object, caps: ToolCaps | None = None) -> ToolAnswer:
    raw = args if isinstance(args, str) else json.dumps(args)
    return anyio.run(lambda: run_tool(snap, name, raw, caps or ToolCaps()))


def test_calls_are_checked_against_the_engines_contract(snap) -> None:
    schemas = {name: schema for name, (_, schema) in TOOL_DEFINITIONS.items()}
    assert set(schemas) == {"list_files", "read_file", "search_code"}
    assert set(schemas["read_file"]["properties"]) == {"path", "start_line", "end_line"}
    assert set(schemas["search_code"]["properties"]) == {"pattern", "path"}
    for name, schema in schemas.items():
        (required,) = schema["required"]
        answer = call(snap, name, {})
        assert answer.is_error and answer.text == f"{name} needs the argument `{required}`."


def test_list_files_root_and_folder(snap) -> None:
    root = call(snap, "list_files", {"path": ""})
    assert not root.is_error and root.path is None
    lines = root.text.splitlines()
    assert "src/" in lines and "docs/" in lines and "README.md" in lines
    assert "link_ok -> src/util.py" in lines
    assert "vendor/" in lines
    assert (
        call(snap, "list_files", {"path": "vendor"}).text == "vendor/lib (submodule, not readable)"
    )
    src = call(snap, "list_files", {"path": "./src/"}).text.splitlines()
    assert src == ["src/app.py", "src/empty.py", "src/util.py"]
    # A folder through a symlink is listed at its real place.
    assert call(snap, "list_files", {"path": "link_dir"}).text.splitlines() == src
    assert root.bytes_read == len(root.text.encode())


def test_list_files_is_capped_and_says_so(snap) -> None:
    answer = call(snap, "list_files", {"path": ""}, ToolCaps(max_entries=3))
    lines = answer.text.splitlines()
    assert len(lines) == 4 and lines[-1].startswith("[cut: 3 of ")


def test_read_file_numbers_lines_and_pages(snap) -> None:
    answer = call(snap, "read_file", {"path": "src/util.py"})
    assert answer.text.splitlines() == [
        "1: def helper():",
        "2:     return MAX_RETRIES",
        "3: ",
        "4: MAX_RETRIES = 3",
    ]
    assert answer.path == "src/util.py" and not answer.is_error
    part = call(snap, "read_file", {"path": "src/app.py", "start_line": 10, "end_line": 12})
    assert part.text == "10: line 10\n11: line 11\n12: line 12"
    capped = call(snap, "read_file", {"path": "src/app.py"}, ToolCaps(max_lines=5)).text
    assert capped.splitlines()[:5] == [f"{i}: line {i}" for i in range(1, 6)]
    assert "start_line=6" in capped.splitlines()[-1] and "of 1,000" in capped
    small = call(snap, "read_file", {"path": "src/app.py"}, ToolCaps(max_bytes=40)).text
    assert small.splitlines()[0] == "1: line 1" and "start_line=" in small.splitlines()[-1]
    assert len(small.splitlines()) < 6
    # Through a symlink, reported at the file's real path; quoted numbers are fine.
    via = call(snap, "read_file", {"path": "link_ok", "start_line": "4"})
    assert via.text == "4: MAX_RETRIES = 3" and via.path == "src/util.py"
    assert call(snap, "read_file", {"path": "link_dir/util.py"}).path == "src/util.py"
    assert call(snap, "read_file", {"path": "src/empty.py"}).text == "(`src/empty.py` is empty)"


@pytest.mark.parametrize(
    ("name", "args", "says"),
    [
        ("read_file", {"path": "../secrets"}, "leaves the repository"),
        ("read_file", {"path": "src/../../x"}, "leaves the repository"),
        ("read_file", {"path": "/etc/passwd"}, "absolute"),
        ("read_file", {"path": "C:/x"}, "absolute"),
        ("read_file", {"path": "src/a\x00b"}, "NUL"),
        ("read_file", {"path": "src//app.py"}, "not a clean path"),
        ("read_file", {"path": "link_out"}, "points outside the repository"),
        ("read_file", {"path": "link_abs"}, "points outside the repository"),
        ("read_file", {"path": "loop_a"}, "symlink loop"),
        ("read_file", {"path": "nope.py"}, "does not exist"),
        ("read_file", {"path": "src"}, "is a folder"),
        ("read_file", {"path": ""}, "needs a file path"),
        ("read_file", {"path": "vendor/lib"}, "submodule"),
        ("read_file", {"path": "vendor/lib/x.c"}, "submodule"),
        ("read_file", {"path": "src/util.py/x"}, "is a file, not a folder"),
        ("read_file", {"path": "docs/logo.png"}, "binary"),
        ("read_file", {"path": "src/util.py", "start_line": 9}, "past its end"),
        ("read_file", {"path": "src/util.py", "start_line": 3, "end_line": 2}, "before"),
        ("read_file", {"path": "src/util.py", "start_line": 0}, "line number"),
        ("read_file", {"path": "src/util.py", "start_line": True}, "line number"),
        ("read_file", {"path": 7}, "must be a string"),
        ("read_file", {}, "needs the argument `path`"),
        ("read_file", "{not json", "not valid JSON"),
        ("read_file", "[1, 2]", "JSON object"),
        ("list_files", {"path": "src/util.py"}, "is a file"),
        ("list_files", {"path": "missing/"}, "does not exist"),
        ("search_code", {"path": "src"}, "needs the argument `pattern`"),
        ("search_code", {"pattern": ""}, "non-empty"),
        ("search_code", {"pattern": "(?<=x)y"}, "cannot be run"),
        ("search_code", {"pattern": "(a{1000}){1000}"}, "cannot be run"),
        ("search_code", {"pattern": "a" * 501}, "longer than"),
        ("search_code", {"pattern": "x", "path": "src/util.py"}, "not a folder"),
        ("search_code", {"pattern": "x", "path": "../"}, "leaves the repository"),
        ("run_shell", {"cmd": "ls"}, "there is no tool"),
    ],
)
def test_every_refusal_is_an_error_answer(snap, name: str, args: object, says: str) -> None:
    answer = call(snap, name, args)
    assert answer.is_error, answer.text
    assert says in answer.text
    assert answer.path is None and answer.bytes_read == len(answer.text.encode())


def test_search_code_answers_path_line_text(snap) -> None:
    answer = call(snap, "search_code", {"pattern": r"MAX_RETRIES\b"})
    assert answer.text.splitlines() == [
        "src/util.py:2:     return MAX_RETRIES",
        "src/util.py:4: MAX_RETRIES = 3",
    ]
    only_docs = call(snap, "search_code", {"pattern": "guide", "path": "docs"}).text
    assert only_docs == "docs/guide.md:1: guide"
    none = call(snap, "search_code", {"pattern": "zebra"})
    assert not none.is_error and none.text.startswith("no match for /zebra/")
    many = call(snap, "search_code", {"pattern": "^line"}, ToolCaps(max_matches=3)).text
    assert many.splitlines()[:3] == [
        "src/app.py:1: line 1",
        "src/app.py:2: line 2",
        "src/app.py:3: line 3",
    ]
    assert "[cut: stopped at 3 matches" in many
    # A binary is never searched (its bytes would be noise, or worse).
    assert "no match" in call(snap, "search_code", {"pattern": "PNG"}).text


def test_a_catastrophic_pattern_runs_in_linear_time() -> None:
    """``(a+)+$`` against 50,000 ``a``s and a ``b``: exponential for a backtracking
    engine (Python's ``re`` would not finish this century), linear for RE2."""
    regex = compile_pattern("(a+)+$")
    data = b"a" * 50_000 + b"b"
    result: list[object] = []
    worker = threading.Thread(
        target=lambda: result.append(search(regex, [("x", data)], max_matches=5))
    )
    worker.start()
    worker.join(timeout=60)  # a bound on correctness, not a timing: RE2 takes microseconds
    assert not worker.is_alive() and result
    assert result[0].lines == []  # type: ignore[attr-defined]
    ok = search(regex, [("x", b"a" * 50_000)], max_matches=5)
    assert ok.lines == ["x:1: " + "a" * 240 + "…"]


def test_the_search_deadline_stops_between_files() -> None:
    ticks = iter(range(100))
    found = search(
        compile_pattern("x"),
        [(f"f{i}", b"x\n") for i in range(10)],
        max_matches=100,
        deadline_s=3,
        clock=lambda: float(next(ticks)),
    )
    assert found.cut.startswith("the search took longer") and len(found.lines) < 10


def test_file_lines_for_citations(snap) -> None:
    assert snap.file_lines("src/util.py")[3] == "MAX_RETRIES = 3"  # CRLF's CR dropped
    assert snap.file_lines("link_ok") == snap.file_lines("src/util.py")
    assert snap.file_lines("missing.py") is None
    assert snap.file_lines("docs/logo.png") is None
    assert snap.file_lines("../x") is None  # refused paths are None, never raise
    assert snap.file_lines("loop_a") is None
    assert snap.commit == "0123456789abcdef0123456789abcdef01234567"
    assert snap.html_url == "https://github.com/acme/widgets"


def test_per_file_and_per_snapshot_bounds() -> None:
    limits = Limits(max_file_bytes=100, max_bytes=250, max_files=4)
    files = {f"f{i}.txt": b"y\n" * 80 for i in range(6)}
    snap = archived(files, limits=limits)
    assert snap.truncated and snap.file_count == 4
    answer = call(snap, "read_file", {"path": "f0.txt"})
    assert "only its first 100 are readable" in answer.text
    assert snap.nbytes < 250 + 4 * 200
    listing = call(snap, "list_files", {"path": ""}).text
    assert "more files than this listing holds" in listing
    assert "does not exist" in call(snap, "read_file", {"path": "f5.txt"}).text
