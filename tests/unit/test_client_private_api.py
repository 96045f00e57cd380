"""No private name of a Kafka client library is used in `monitor/`: a minor release of kafka-python
or confluent-kafka may rename or remove any of them, and collection would break silently.

Checked on the source of every module of `monitor/` that imports one of the libraries (the only
ones that can hold their objects; import-linter keeps them to `monitor/kafka` and the development
tools): no attribute with a leading underscore is read off anything but `self`, `cls` or `super()`, or named
in `getattr`, and no private module or name is imported. What is not a private name:

- confluent-kafka's error codes for librdkafka's own errors, `KafkaError._PARTITION_EOF` and its
  kind (librdkafka's `RD_KAFKA_RESP_ERR__...`), public constants of `KafkaError`;
- a member of one of the monitor's own `Protocol`s (`translate.CallOwner`), a contract between
  the monitor's own classes.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

import pytest
from confluent_kafka import KafkaError

from tests.fixtures.source import monitor_modules

LIBRARIES = ("kafka", "confluent_kafka")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _error_code(node: ast.Attribute) -> bool:
    """`KafkaError._SOMETHING`, when confluent-kafka defines it as an error code."""
    return (
        isinstance(node.value, ast.Name)
        and node.value.id == "KafkaError"
        and isinstance(getattr(KafkaError, node.attr, None), int)
    )


def protocol_members(nodes: Iterable[ast.AST]) -> set[str]:
    """The private members declared by the `Protocol` classes of a module (`nodes`: all of its nodes)."""
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith("Protocol") for b in node.bases):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    found.add(item.target.id)
                elif isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    found.add(item.name)
    return {name for name in found if _private(name)}


def imports_a_client_library(nodes: Iterable[ast.AST]) -> bool:
    for node in nodes:
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in LIBRARIES for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in LIBRARIES:
            return True
    return False


def private_uses(nodes: Iterable[ast.AST], own: set[str]) -> Iterator[str]:
    """Each private name of another object or module that a module uses (`nodes`: all of its
    nodes), as `line: code`."""
    for node in nodes:
        used: str | None = None
        if isinstance(node, ast.Attribute) and _private(node.attr):
            ours = ast.unparse(node.value) in ("self", "cls", "super()")
            if not ours and node.attr not in own and not _error_code(node):
                used = ast.unparse(node)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
        ):
            named = node.args[1] if len(node.args) > 1 else None
            if isinstance(named, ast.Constant) and isinstance(named.value, str) and _private(named.value):
                used = ast.unparse(node)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in LIBRARIES:
            if any(_private(part) for part in (node.module or "").split(".")) or any(
                _private(a.name) for a in node.names
            ):
                used = ast.unparse(node)
        elif isinstance(node, ast.Import) and any(
            n.name.split(".")[0] in LIBRARIES and any(map(_private, n.name.split("."))) for n in node.names
        ):
            used = ast.unparse(node)
        if used is not None:
            yield f"{node.lineno}: {used}"


def _uses(source: str) -> list[str]:
    nodes = list(ast.walk(ast.parse(source)))
    return list(private_uses(nodes, protocol_members(nodes)))


@pytest.mark.parametrize(
    "source",
    [
        "client._manager.run(call)",
        "async def f(client):\n    return await client._find_coordinator_ids(['g'])",
        "self._connect()._manager.send(request)",
        "self._client._net.poll()",
        "getattr(admin, '_manager')",
        "kafka.errors._private_thing",
        "KafkaError._NOT_A_CODE_AT_ALL",
        "from kafka.admin._groups import GroupAdminMixin",
        "from kafka.net.manager import _helper",
        "import kafka.admin._groups",
    ],
)
def test_a_private_name_of_a_library_is_found(source: str) -> None:
    assert _uses(source), source


@pytest.mark.parametrize(
    "source",
    [
        "self._client.close()",
        "cls._lock",
        "super()._discard()",
        "KafkaError._PARTITION_EOF",
        "from kafka.admin import KafkaAdminClient",
        "getattr(meta, 'leader_epoch', None)",
        "class Owner(Protocol):\n    _generation: int\n\ndef f(owner):\n    return owner._generation",
        "obj.__class__",
    ],
)
def test_what_is_not_a_private_name_of_a_library(source: str) -> None:
    assert _uses(source) == [], source


def test_no_module_of_the_monitor_uses_a_private_name_of_a_kafka_client_library() -> None:
    modules = monitor_modules()
    own = set().union(*(protocol_members(module.nodes) for module in modules))
    scanned = {module.name: module.nodes for module in modules if imports_a_client_library(module.nodes)}

    found = [f"{path}:{use}" for path, nodes in scanned.items() for use in private_uses(nodes, own)]

    assert {"monitor/kafka/describe.py", "monitor/kafka/groups.py", "monitor/kafka/pyclient.py"} <= set(
        scanned
    )
    assert found == []
