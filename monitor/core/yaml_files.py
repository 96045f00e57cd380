"""The one loader of operator files (settings, rules, routing, ownership, policy): safe YAML with
the line of every key kept, so errors can say where the problem is."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from monitor.core.errors import ConfigError

MAX_YAML_BYTES = 4 * 1024 * 1024
"""The largest operator file read: settings, rules, routing, ownership and policy are kilobytes."""

MAX_YAML_ALIASES = 100
"""Aliases (`*name`) a file may use. Nothing shipped uses any; a few keep a file short."""

MAX_YAML_NODES = 100_000
"""Values a file may hold once its aliases are expanded: a few aliases that each repeat the one
before ("billion laughs") would otherwise expand to gigabytes when the data is copied or checked."""


class _LineLoader(yaml.SafeLoader):
    """A SafeLoader that records the line of every mapping key and sequence item, and bounds the
    aliases a file uses and what they expand to."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.lines: dict[tuple[int, Any], int] = {}
        self.aliases = 0
        self.first_alias_line: int | None = None

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            line = self.peek_event().start_mark.line + 1  # type: ignore[no-untyped-call]
            self.aliases += 1
            self.first_alias_line = self.first_alias_line or line
            if self.aliases > MAX_YAML_ALIASES:
                raise ConfigError(
                    [
                        f"line {line}: more than {MAX_YAML_ALIASES} YAML aliases (*name); "
                        "write the values out instead of repeating anchors"
                    ]
                )
        return super().compose_node(parent, index)


def _expanded_size(root: yaml.Node) -> int:
    """How many values `root` holds with every alias expanded, counted without expanding them."""
    sizes: dict[int, int] = {}
    pending: set[int] = set()

    def size(node: yaml.Node) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in pending:
            raise ConfigError(
                [f"line {node.start_mark.line + 1}: an alias refers to the value that contains it; remove it"]
            )
        pending.add(id(node))
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        total = 1 + sum(size(child) for child in children)
        pending.discard(id(node))
        sizes[id(node)] = total
        return total

    return size(root)


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    result: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in result:
            raise ConfigError([f"line {key_node.start_mark.line + 1}: key {key!r} appears twice; keep one"])
        result[key] = loader.construct_object(value_node, deep=True)
        loader.lines[id(result), key] = key_node.start_mark.line + 1
    return result


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode) -> list[Any]:
    result: list[Any] = []
    for index, item in enumerate(node.value):
        result.append(loader.construct_object(item, deep=True))
        loader.lines[id(result), index] = item.start_mark.line + 1
    return result


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def line_of(data: Any, lines: Mapping[tuple[int, Any], int], loc: tuple[int | str, ...]) -> int | None:
    """The line of the deepest YAML node on the path `loc` that exists in the file."""
    found: int | None = None
    node = data
    for part in loc:
        key = (id(node), part)
        if key not in lines:
            break
        found = lines[key]
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            break
    return found


def _describe(error: Mapping[str, Any]) -> str:
    loc = ".".join(str(p) for p in error["loc"]) or "(top level)"
    kind = error["type"]
    if kind == "extra_forbidden":
        parent = ".".join(str(p) for p in error["loc"][:-1]) or "the top level"
        return f"{loc}: unknown key under {parent}; remove it or check its spelling"
    if kind == "missing":
        return f"{loc}: required key is missing; add it"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{loc}: {message}"


def format_validation_error(
    exc: ValidationError, data: Any = None, lines: Mapping[tuple[int, Any], int] | None = None
) -> list[str]:
    problems = []
    for error in exc.errors():
        text = _describe(error)
        line = line_of(data, lines, tuple(error["loc"])) if lines is not None else None
        problems.append(f"line {line}: {text}" if line else text)
    return problems


def read_text(path: Path) -> str:
    """An operator file's text. Raises ConfigError, naming the file, when it cannot be read, is
    larger than MAX_YAML_BYTES or is not UTF-8 (with the byte's position and line)."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_YAML_BYTES + 1)
    except OSError as exc:
        raise ConfigError([f"cannot read {path}: {exc.strerror}; check the path"], str(path)) from exc
    if len(raw) > MAX_YAML_BYTES:
        raise ConfigError(
            [f"the file is larger than {MAX_YAML_BYTES // 2**20} MiB; this is not a configuration file"],
            str(path),
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            [
                f"line {line}: the file is not UTF-8 text (byte 0x{raw[exc.start]:02x} at position "
                f"{exc.start}); save it as UTF-8"
            ],
            str(path),
        ) from None


def read_yaml(path: Path) -> tuple[Any, dict[tuple[int, Any], int]]:
    """Parse an operator's YAML file, returning its data and the line map used in error messages.

    The one loader of operator files: safe tags only, duplicate keys refused, bounded size and
    aliases. Raises ConfigError naming the file (and the line where there is one)."""
    loader = _LineLoader(read_text(path))
    try:
        node = loader.get_single_node()
        if node is not None and loader.aliases and _expanded_size(node) > MAX_YAML_NODES:
            raise ConfigError(
                [
                    f"line {loader.first_alias_line}: the YAML aliases (*name) expand to more than "
                    f"{MAX_YAML_NODES} values; write the values out instead of repeating anchors"
                ]
            )
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        raise ConfigError([f"not valid YAML: {exc}"], str(path)) from exc
    except ConfigError as exc:
        raise ConfigError(exc.problems, str(path)) from exc
    except RecursionError as exc:
        raise ConfigError(["the YAML is nested too deeply; flatten it"], str(path)) from exc
    finally:
        loader.dispose()
    return data, loader.lines
