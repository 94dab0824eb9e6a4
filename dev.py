#!/usr/bin/env python3
"""Bootstrap and run debate-bot with nothing but Python 3.11+.

    python3 dev.py serve        start the service on the embedded defaults
    python3 dev.py test [ARGS]  run the test suite (ARGS go to pytest)
    python3 dev.py lint         ruff + mypy (bot and tests)
    python3 dev.py bench        run the benchmarks
    python3 dev.py lock         refresh uv.lock, requirements.lock (everything) and
                                requirements-runtime.lock (the image's) (needs uv)

The first call creates ./.venv and installs requirements.lock plus the project;
later calls reinstall only when requirements.lock or pyproject.toml changed.
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
STAMP = VENV / ".debate-bot-installed"


def _digest() -> str:
    h = hashlib.sha256()
    for name in ("requirements.lock", "pyproject.toml"):
        h.update((ROOT / name).read_bytes())
    return h.hexdigest()


def ensure_env() -> None:
    if sys.version_info < (3, 11):
        sys.exit("debate-bot needs Python 3.11 or newer")
    if not (BIN / "python").exists():
        print("creating .venv …", file=sys.stderr)
        venv.create(VENV, with_pip=True)
    digest = _digest()
    if STAMP.exists() and STAMP.read_text() == digest:
        return
    print("installing dependencies from requirements.lock …", file=sys.stderr)
    pip = [str(BIN / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "-r", str(ROOT / "requirements.lock")], check=True)
    subprocess.run([*pip, "--no-deps", "-e", str(ROOT)], check=True)
    STAMP.write_text(digest)


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
    ensure_env()
    if action == "serve":
        return run(str(BIN / "debate-bot"), "serve", *rest)
    if action == "test":
        return run(str(BIN / "python"), "-m", "pytest", *rest)
    if action == "lint":
        return run(str(BIN / "ruff"), "check", ".") or run(str(BIN / "mypy"), "bot", "tests")
    return run(str(BIN / "python"), "-m", "benchmarks", *rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
