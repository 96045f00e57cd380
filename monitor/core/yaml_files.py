"""The one loader of operator files (settings, rules, routing, ownership, policy): safe YAML with
the line of every key kept, so errors can say where the problem is. Whatever the file holds, the
loader answers with a ConfigError naming the file, the line and the fix, never another exception
and never a hang: see `read_yaml` for what it refuses."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import ValidationError

from monitor.core.errors import ConfigError
from monitor.core.file_text import MAX_YAML_BYTES, read_text

__all__ = ["MAX_YAML_BYTES", "format_validation_error", "line_of", "read_text", "read_yaml"]

MAX_YAML_ALIASES = 100
"""Aliases (`*name`) a file may use. Nothing shipped uses any; a few keep a file short."""

MAX_YAML_NODES = 100_000
"""Values a file may hold once its aliases are expanded: a few aliases that each repeat the one
before ("billion laughs") would otherwise expand to gigabytes when the data is copied or checked."""

MAX_YAML_NUMBER: Final = 2**63 - 1
"""The largest number a file may hold: Kafka's and PostgreSQL's 64-bit integers end there, and
no setting, rule or policy needs more. Checked on the text, before it is converted."""

_MAX_NUMBER_TEXT: Final = 40
"""Characters of a number's text beyond which it cannot be within MAX_YAML_NUMBER (digits,
separators and a sign): refused unconverted, so 5,000 digits cost nothing."""


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


def _where(node: yaml.Node) -> str:
    return f"line {node.start_mark.line + 1}, column {node.start_mark.column + 1}"


def _shown_number(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:12]}... ({len(text)} characters)"


def _too_large(node: yaml.ScalarNode) -> ConfigError:
    return ConfigError(
        [
            f"{_where(node)}: the number {_shown_number(str(node.value))} is beyond {MAX_YAML_NUMBER:,} "
            "(the largest 64-bit integer); write a smaller one"
        ]
    )


def _construct_int(loader: _LineLoader, node: yaml.ScalarNode) -> int:
    text = str(node.value).strip().replace("_", "").lstrip("+-").lstrip("0") or "0"
    if len(text) > _MAX_NUMBER_TEXT or text.count(":") > 3:
        raise _too_large(node)
    value: int = loader.construct_yaml_int(node)
    if abs(value) > MAX_YAML_NUMBER:
        raise _too_large(node)
    return value


def _construct_float(loader: _LineLoader, node: yaml.ScalarNode) -> float:
    if len(str(node.value)) > 2 * _MAX_NUMBER_TEXT or str(node.value).count(":") > 3:
        raise _too_large(node)
    value: float = loader.construct_yaml_float(node)
    if math.isnan(value) or math.isinf(value):
        raise ConfigError(
            [f"{_where(node)}: {node.value} is not a number a setting can take; write a finite number"]
        )
    if abs(value) > MAX_YAML_NUMBER:
        raise _too_large(node)
    return value


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    result: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            kind = "list" if isinstance(key_node, yaml.SequenceNode) else "mapping"
            raise ConfigError(
                [
                    f"{_where(key_node)}: a key must be a plain word or number, not a {kind} "
                    "(a `? ` or `[...]:` key); write the key as text"
                ]
            )
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
_LineLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_LineLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)


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
    if kind == "finite_number":
        return f"{loc}: must be a finite number, not inf or nan; write e.g. 30"
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


def read_yaml(path: Path) -> tuple[Any, dict[tuple[int, Any], int]]:
    """Parse an operator's YAML file, returning its data and the line map used in error messages.

    The one loader of operator files: only a regular file's text, bounded in size, UTF-8, without
    control characters (`monitor.core.file_text`); safe tags only; keys plain scalars, each once;
    numbers finite and within MAX_YAML_NUMBER; bounded aliases. Raises ConfigError naming the
    file (and the line and column where there is one)."""
    text = read_text(path)
    loader: _LineLoader | None = None
    try:
        loader = _LineLoader(text)
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
        if loader is not None:
            loader.dispose()
    return data, loader.lines
