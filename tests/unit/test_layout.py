"""Shared test code lives in tests/harness/ and tests/fakes/: no module under
tests/ imports a test module (tests/test_*.py) or conftest."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _is_test_module(dotted: str) -> bool:
    parts = dotted.split(".")
    return parts[0] == "tests" and len(parts) > 1 and parts[1].startswith(("test_", "conftest"))


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
    assert not offenders, f"move shared helpers to tests/harness/: {offenders}"


def test_the_check_catches_each_import_form() -> None:
    for source in (
        "from tests.test_service_e2e import seed_issue",
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
