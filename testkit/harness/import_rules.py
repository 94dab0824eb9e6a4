"""Helpers for the import-rule tests: a package's ruff allow-list (written as a
ban of everything else), checked against the project's modules, its runtime
dependencies and the package's actual imports."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import pkgutil
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import bot

ROOT = Path(__file__).resolve().parents[2]


def banned(rules: Path) -> list[str]:
    config = tomllib.loads(rules.read_text())
    return sorted(config["lint"]["flake8-tidy-imports"]["banned-api"])


def ruff(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--output-format", "json", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def tid251(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [d["message"] for d in json.loads(proc.stdout) if d["code"] == "TID251"]


def bot_modules() -> set[str]:
    """``bot.x`` for every top-level module and package of ``bot``."""
    return {f"bot.{m.name}" for m in pkgutil.iter_modules(bot.__path__) if m.name != "__main__"}


def runtime_modules() -> set[str]:
    """Top-level import names of every runtime dependency installed here."""
    lock = (ROOT / "requirements-runtime.lock").read_text()
    wanted = {
        re.split(r"[=<>\[; ]", line, maxsplit=1)[0].lower().replace("_", "-")
        for line in lock.splitlines()
        if re.match(r"^[A-Za-z]", line)
    }
    found: set[str] = set()
    for module, dists in importlib.metadata.packages_distributions().items():
        if any(d.lower().replace("_", "-") in wanted for d in dists):
            found.add(module)
    return found


def imports_of(package: Path) -> dict[str, set[str]]:
    """Every absolute module a package's files import, by file."""
    out: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
        out[path.relative_to(ROOT).as_posix()] = names
    return out


def allowed(module: str, prefixes: tuple[str, ...]) -> bool:
    top = module.split(".")[0]
    if top in sys.stdlib_module_names or top == "__future__":
        return True
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def gaps(rules: Path, allowed_modules: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """(what the rule should ban but does not, what it bans but is allowed): an
    allow-list written as bans is complete when both are empty."""
    ruled = set(banned(rules))
    should = (bot_modules() | runtime_modules()) - set(allowed_modules)
    return should - ruled, ruled & set(allowed_modules)


def imports_outside(package: Path, allowed_modules: tuple[str, ...]) -> dict[str, list[str]]:
    """The package's imports that are neither the standard library nor allowed, by file."""
    found = {
        path: sorted(n for n in names if not allowed(n, allowed_modules))
        for path, names in imports_of(package).items()
    }
    return {path: names for path, names in found.items() if names}
