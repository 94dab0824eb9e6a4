#!/usr/bin/env python3
"""Bootstrap and run debate-bot with nothing but Python 3.11+.

    python3 dev.py serve [ARGS] start the service on the embedded defaults (ARGS go to
                                `debate-bot serve`, e.g. --port 3100); installs only
                                what the service needs (requirements-runtime.lock)
    python3 dev.py test [ARGS]  run the test suite (ARGS go to pytest)
    python3 dev.py lint         ruff + lint-imports + mypy (bot, tests, testkit, benchmarks)
    python3 dev.py bench        run the benchmarks
    python3 dev.py lock         refresh uv.lock, requirements.lock (everything) and
                                requirements-runtime.lock (the image's) (needs uv)

The first call creates ./.venv and installs requirements.lock plus the project
(`serve`: requirements-runtime.lock, the image's); later calls reinstall only
when the lock file or pyproject.toml changed.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".debate-bot-installed"  # everything: requirements.lock
RUNTIME_STAMP = VENV / ".debate-bot-runtime-installed"  # the service's: runtime lock
FULL, RUNTIME = "requirements.lock", "requirements-runtime.lock"


def _digest(lock: str) -> str:
    h = hashlib.sha256()
    for name in (lock, "pyproject.toml"):
        h.update((ROOT / name).read_bytes())
    return h.hexdigest()


def _current(stamp: Path, lock: str) -> bool:
    return stamp.exists() and stamp.read_text() == _digest(lock)


def ensure_env(lock: str = FULL) -> None:
    """A .venv with ``lock`` installed; the full lock also holds the runtime one."""
    if sys.version_info < (3, 11):
        sys.exit("debate-bot needs Python 3.11 or newer")
    if not (BIN / "python").exists():
        print("creating .venv …", file=sys.stderr)
        venv.create(VENV, with_pip=True)
    if _current(STAMP, FULL) or (lock == RUNTIME and _current(RUNTIME_STAMP, RUNTIME)):
        return
    print(f"installing dependencies from {lock} …", file=sys.stderr)
    pip = [str(BIN / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "-r", str(ROOT / lock)], check=True)
    subprocess.run([*pip, "--no-deps", "-e", str(ROOT)], check=True)
    (STAMP if lock == FULL else RUNTIME_STAMP).write_text(_digest(lock))


def serve(args: list[str]) -> int:
    """The service in this process's place: a signal to `dev.py serve` (Ctrl-C,
    kill, a supervisor's SIGTERM) reaches `debate-bot serve` itself, which drains."""
    command = [str(BIN / "debate-bot"), "serve", *args]
    os.chdir(ROOT)
    if os.name == "posix":
        os.execv(command[0], command)  # noqa: S606 (never returns; our own venv's entry point)
    return run(*command)  # Windows: Ctrl-C reaches the whole console group


def run(*cmd: str) -> int:
    return subprocess.run(list(cmd), cwd=ROOT).returncode


def main(argv: list[str]) -> int:
    action, rest = (argv[0], argv[1:]) if argv else ("help", [])
    if action == "lock":
        export = ["uv", "export", "--frozen", "--no-hashes", "--no-emit-project"]
        txt = ["--format", "requirements-txt", "-o"]
        return (
            run("uv", "lock")
            or run(*export, "--all-groups", *txt, "requirements.lock")
            # What the container image installs: no linters or test runners.
            or run(*export, "--no-dev", *txt, "requirements-runtime.lock")
        )
    if action not in {"serve", "test", "lint", "bench"}:
        print(__doc__, file=sys.stderr)
        return 2
    if action == "serve":
        ensure_env(RUNTIME)
        return serve(rest)
    ensure_env()
    if action == "test":
        return run(str(BIN / "python"), "-m", "pytest", *rest)
    if action == "lint":
        return (
            run(str(BIN / "ruff"), "check", ".")
            or run(str(BIN / "lint-imports"))
            or run(str(BIN / "mypy"), "bot", "tests", "testkit", "benchmarks")
        )
    return run(str(BIN / "python"), "-m", "benchmarks", *rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
