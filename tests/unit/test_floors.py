"""The import contracts in pyproject.toml ([tool.importlinter]) hold for the
project, and each one fails when a module breaks it: a probe module is added to
a copy of the package and `lint-imports` must name the broken contract."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(where: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=where,
        env={"PYTHONPATH": str(where), "PATH": "/usr/bin:/bin", "COLUMNS": "300"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_project_keeps_its_contracts() -> None:
    proc = _lint(ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "0 broken" in proc.stdout


@pytest.mark.parametrize(
    ("probe", "source", "contract"),
    [
        ("bot/core/_probe.py", "import bot.engine.types\n", "floors"),
        ("bot/engine/_probe.py", "import httpx\n", "the engine is pure"),
        ("bot/engine/_probe.py", "import bot.core.settings\n", "the engine is pure"),
        ("bot/store/_probe.py", "import bot.service.worker.pool\n", "floors"),
        ("bot/service/web/_probe.py", "import bot.models.router\n", "the web tier"),
        ("bot/service/worker/_probe.py", "import bot.service.features.table\n", "the service"),
        ("bot/service/web/_probe.py", "import bot.engine.protocol\n", "the web tier"),
        ("bot/cli/eval/_probe.py", "import bot.service.worker.pool\n", "eval runs"),
    ],
)
def test_each_contract_fails_on_a_probe(
    tmp_path: Path, probe: str, source: str, contract: str
) -> None:
    shutil.copytree(ROOT / "bot", tmp_path / "bot", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / probe).write_text(source)
    proc = _lint(tmp_path)
    assert proc.returncode != 0
    broken = [line for line in proc.stdout.splitlines() if " BROKEN" in line]
    assert len(broken) == 1 and broken[0].startswith(contract), proc.stdout[-3000:]


def _circles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The import circles (strongly connected groups of modules), Tarjan's way."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in imports.get(v, ()):
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            if group:
                found.append(sorted([v, *group]))

    for module in sorted(imports):
        if module not in order:
            visit(module)
    return found


def test_no_module_imports_itself_round_a_circle() -> None:
    """Type-only imports count: a circle is a circle to the reader too."""
    grimp = pytest.importorskip("grimp")  # import-linter's own import graph
    graph = grimp.build_graph("bot", cache_dir=None)
    imports = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert _circles(imports) == []
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
