"""Before and after, side by side in one run: ``python -m benchmarks._compare``
(not in ``python -m benchmarks``'s all: it runs the others, twice).

Runs the named benchmarks (default: critical_path, tokens, github_economy,
ingest, concurrent_runs at N = 200) in a copy of an earlier commit (``--base``,
unpacked with ``git archive`` into a temporary folder, so nothing in the
checkout changes) and in this tree, alternately, with the same interpreter
and packages, and prints one table: each benchmark's verdict lines (``PASS`` /
``FAIL`` / ``info``) matched by their text, the figures of both versions
beside each other. Ratios, not absolute times: both sides share the machine's
noise, as each pair runs back to back.

The default base is the last commit before issue 17's work (the run layer, the
web tier, the store in pieces), whose "no figure worse" it checks.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE = "956eeba"
# Each benchmark and the arguments it runs with on both sides.
DEFAULT_RUNS: dict[str, tuple[str, ...]] = {
    "critical_path": (),
    "tokens": (),
    "github_economy": (),
    "ingest": (),
    "concurrent_runs": ("--topology", "serve", "--sizes", "1,200"),
}
VERDICT = re.compile(r"^(PASS|FAIL|info)\s+(.*)$")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def unpack(commit: str, into: Path) -> Path:
    """The tree of ``commit`` in ``into`` (git archive: no worktree to clean up)."""
    tar = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(into, filter="data")
    return into


def run(tree: Path, name: str, args: tuple[str, ...]) -> str:
    """One benchmark's output, run from ``tree`` with its own ``bot`` first on the path."""
    entry = f"import sys; from benchmarks.{name} import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run(
        [sys.executable, "-c", entry, *args],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=3600,
    )
    return proc.stdout + proc.stderr


def verdicts(output: str) -> dict[str, str]:
    """Verdict lines keyed by their text with the figures blanked out."""
    found: dict[str, str] = {}
    for line in output.splitlines():
        m = VERDICT.match(line.strip())
        if m:
            found[NUMBER.sub("#", m.group(2))] = f"{m.group(1)} {m.group(2)}"
    return found


def figures(line: str | None) -> str:
    if line is None:
        return "—"
    status, _, text = line.partition(" ")
    return f"{status} {', '.join(NUMBER.findall(text)) or '—'}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._compare")
    parser.add_argument("names", nargs="*", help=f"benchmarks (default: {', '.join(DEFAULT_RUNS)})")
    parser.add_argument("--base", default=BASE, help=f"the earlier commit (default {BASE})")
    parser.add_argument("--quick", action="store_true", help="each benchmark's --quick run")
    args = parser.parse_args(argv)
    names = args.names or list(DEFAULT_RUNS)
    rows: list[tuple[str, str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="debate-bot-base-") as tmp:
        try:
            base = unpack(args.base, Path(tmp))
        except subprocess.CalledProcessError:
            print(f"compare: {args.base!r} is not a commit of this repository", file=sys.stderr)
            return 2
        for name in names:
            extra = ("--quick",) if args.quick else DEFAULT_RUNS.get(name, ())
            print(f"compare: {name} at {args.base} …", file=sys.stderr, flush=True)
            before = verdicts(run(base, name, extra))
            print(f"compare: {name} here …", file=sys.stderr, flush=True)
            after = verdicts(run(ROOT, name, extra))
            for key in dict.fromkeys([*after, *before]):
                text = (after.get(key) or before[key]).partition(" ")[2]
                rows.append((name, text[:70], figures(before.get(key)), figures(after.get(key))))
    print(f"\nBefore ({args.base}) and after (this tree), side by side\n")
    print(f"| benchmark | check (figures as after) | before ({args.base}) | after |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(cell.replace("|", "/") for cell in row) + " |")
    worse = [r for r in rows if r[2].startswith("PASS") and r[3].startswith("FAIL")]
    for r in worse:
        print(f"FAIL  {r[0]}: {r[1]} passed before, fails after")
    if not worse:
        print("PASS  no check that passed before fails after")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
