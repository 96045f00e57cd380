"""No private name of a third-party library is used in `monitor/` (pyspark, sqlalchemy, fastapi,
the Kafka clients, ...): a minor release may rename or remove any of them, as Spark's physical
plan classes behind `DataFrame._jdf` do.

The source cannot tell whose object a name is read off, so the scan asks the other way round: an
attribute with a leading underscore read off anything but `self`, `cls` or `super()` must be a
name the monitor defines itself (a method, a class attribute, an attribute assigned on `self`, a
module-level name of `monitor/`, a member of one of its `Protocol`s). What is not a private name
though it starts with one:

- the documented members of named tuples and of SQLAlchemy's `Row` (`_mapping`, `_asdict`,
  `_replace`, ...), named with an underscore so that they cannot clash with a field;
- confluent-kafka's error codes for librdkafka's own errors (`KafkaError._TIMED_OUT`), public
  constants (tests/unit/test_client_private_api.py checks them);
- names of the standard library's modules (not third-party; `zlib._Compress` is the stub's name
  of the compressor's type, in an annotation).

A third-party private name that the monitor also happens to define for itself goes unseen: the
scan proves the absence of every other one.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Sequence

import pytest

from tests.fixtures.source import MONITOR, SourceModule, monitor_modules, parsed

pytestmark = pytest.mark.unit

DOCUMENTED = frozenset(
    {"_mapping", "_asdict", "_fields", "_replace", "_make", "_t", "_tuple", "_field_defaults"}
)
"""Named tuples' and SQLAlchemy `Row`'s public members (their names start with an underscore)."""


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own(node: ast.expr) -> bool:
    """`self`, `cls` or `super()`: the monitor's own object."""
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def defined_names(nodes: Iterable[ast.AST]) -> set[str]:
    """The private names a module of the monitor defines (`nodes`: all of its nodes): functions,
    methods, classes, class and module attributes, attributes it assigns on `self`/`cls`, and its
    imports of its own modules."""
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _own(node.value):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("monitor"):
            names.update(alias.asname or alias.name for alias in node.names)
    return {name for name in names if _private(name)}


def _standard_library(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in sys.stdlib_module_names


def _kafka_error_code(node: ast.Attribute) -> bool:
    return isinstance(node.value, ast.Name) and node.value.id == "KafkaError" and node.attr.isupper()


def foreign_private_reads(modules: Sequence[SourceModule]) -> list[str]:
    """`path:line expression` of every private attribute read off an object that is not the
    monitor's own, whose name the monitor does not define."""
    ours = set().union(*(defined_names(module.nodes) for module in modules))
    found = []
    for module in modules:
        for node in module.nodes:
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            if _own(node.value) or node.attr in ours or node.attr in DOCUMENTED:
                continue
            if _standard_library(node.value) or _kafka_error_code(node):
                continue
            found.append(f"{module.name}:{node.lineno} {ast.unparse(node)}")
    return found


def test_monitor_reads_no_private_name_of_a_third_party_library() -> None:
    assert foreign_private_reads(monitor_modules()) == []


def test_the_scan_finds_a_private_attribute_of_a_library_object() -> None:
    source = """
def plan(frame):
    return frame._jdf.queryExecution()

class Reader:
    def __init__(self):
        self._engine = None

    def engine(self, other):
        return other._engine, self._engine
"""
    modules = (*monitor_modules(), parsed(MONITOR / "example.py", source))
    assert foreign_private_reads(modules) == ["monitor/example.py:3 frame._jdf"]
