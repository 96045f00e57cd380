"""Test modules share builders through `tests/fixtures/` only: a test module that imports another
runs that module's imports and module-level code, and couples two files nobody reads together."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
TEST_PACKAGES = ("tests.unit", "tests.integration", "tests.contract")


def imported_test_modules(path: Path) -> list[str]:
    """The test modules `path` imports (statements anywhere in it, not strings)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [name for name in names if name.startswith(TEST_PACKAGES) and name.count(".") >= 2]
    return found


def test_no_test_module_imports_another() -> None:
    offenders = {
        str(path.relative_to(TESTS)): imported
        for path in sorted(TESTS.rglob("test_*.py"))
        if (imported := imported_test_modules(path))
    }
    assert offenders == {}, "move what they share into tests/fixtures/"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from tests.integration.test_collectors import rows", "tests.integration.test_collectors"),
        ("import tests.unit.test_wire", "tests.unit.test_wire"),
        ("from tests.unit import test_wire", "tests.unit.test_wire"),
        ("def f():\n    from tests.contract.test_x import y", "tests.contract.test_x"),
        ("from tests.fixtures.sql import rows", None),
        ("x = 'from tests.unit.test_wire import y'", None),
    ],
)
def test_the_check_sees_every_form_of_import(tmp_path: Path, source: str, expected: str | None) -> None:
    path = tmp_path / "test_sample.py"
    path.write_text(source)
    found = imported_test_modules(path)
    assert (expected in found) if expected else found == []
