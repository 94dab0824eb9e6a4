"""Shared test code lives in testkit/ (harness/, fakes/): no module under tests/
imports a test module (tests/**/test_*.py) or conftest; tests never import
benchmarks/, and benchmarks/ and testkit/ never import tests/."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent


def _is_test_module(dotted: str) -> bool:
    parts = dotted.split(".")
    return parts[0] == "tests" and any(p.startswith(("test_", "conftest")) for p in parts[1:])


def imported_test_modules(source: str, module: str) -> list[str]:
    """The test modules that ``source`` (the module named ``module``) imports."""
    package = module.split(".")[:-1]
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _is_test_module(a.name)]
        elif isinstance(node, ast.ImportFrom):
            # A relative import is resolved against this module's package.
            anchor = package[: len(package) - node.level + 1] if node.level else []
            base = ".".join([*anchor, node.module] if node.module else anchor)
            candidates = [base, *(f"{base}.{a.name}" for a in node.names)]
            found += [c for c in candidates if _is_test_module(c)][:1]
    return found


def test_no_module_under_tests_imports_a_test_module() -> None:
    offenders = {}
    for path in sorted(TESTS.rglob("*.py")):
        module = ".".join(path.relative_to(TESTS.parent).with_suffix("").parts)
        imported = imported_test_modules(path.read_text(encoding="utf-8"), module)
        if imported:
            offenders[module] = imported
    assert not offenders, f"move shared helpers to testkit/harness/: {offenders}"


def imported_tops(source: str) -> set[str]:
    """The top-level packages ``source`` imports absolutely."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_tests_benchmarks_and_testkit_import_one_way() -> None:
    """tests -> testkit, bot; benchmarks -> testkit, bot; testkit -> bot."""
    banned = {"tests": {"benchmarks"}, "benchmarks": {"tests"}, "testkit": {"tests", "benchmarks"}}
    offenders = {
        path.relative_to(ROOT).as_posix(): sorted(hit)
        for folder, refused in banned.items()
        for path in sorted((ROOT / folder).rglob("*.py"))
        if (hit := imported_tops(path.read_text(encoding="utf-8")) & refused)
    }
    assert not offenders, offenders


def test_the_check_catches_each_import_form() -> None:
    for source in (
        "from tests.test_service_e2e import seed_issue",
        "from tests.e2e.test_service_e2e import seed_issue",
        "from tests.unit.store import test_store",
        "from tests.unit.conftest import pg",
        "import tests.test_engine_render",
        "from tests import test_store",
        "from tests.conftest import fresh_pg_database",
        "from .test_service_e2e import runs",
        "from . import conftest",
    ):
        assert imported_test_modules(source, "tests.test_example"), source
    for source in (
        "from testkit.harness.scenarios import runs",
        "from testkit.fakes.github_server import FakeGitHub",
        "import testkit.harness.engine",
        "from .harness import engine",
    ):
        assert not imported_test_modules(source, "tests.test_example"), source
