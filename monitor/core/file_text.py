"""The text of an operator file: a regular file, of bounded size, UTF-8, without control characters.

Part of the one loader of operator files (`monitor.core.yaml_files`). A path may name anything: a
named pipe would block a reader for ever, a device never ends, a directory or a symbolic-link loop
has no text. The file is opened without blocking (a FIFO opens at once that way) and refused
unless `fstat` of the opened descriptor says it is a regular file, so nothing swapped in between a
check and the read is read. Characters that steer a terminal or reorder text (C0 and C1 controls,
bidirectional overrides) are refused with their line and column: in a configuration file they are
a mistake or an attempt to show one thing and mean another.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import unicodedata
from pathlib import Path
from typing import Final

from monitor.core.errors import ConfigError
from monitor.core.formatting import CONTROL_CODES

MAX_YAML_BYTES: Final = 4 * 1024 * 1024
"""The largest operator file read: settings, rules, routing, ownership and policy are kilobytes."""

MAX_CHARACTER_PROBLEMS: Final = 10
"""Control characters reported one by one; past this many, the rest are counted."""

_ALLOWED_CONTROLS: Final = frozenset(map(ord, "\t\n\r"))
_REFUSED: Final = re.compile(
    "["
    + "".join(re.escape(chr(code)) for code in sorted(CONTROL_CODES - _ALLOWED_CONTROLS))
    + "\ufffe\uffff]"
)
_SHORT_NAMES: Final = {0x00: "NUL", 0x07: "BEL", 0x08: "BACKSPACE", 0x1B: "ESC", 0x7F: "DEL", 0x85: "NEL"}

_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
"""What a path that is not a regular file names, as the error says it."""


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _not_regular(path: Path, mode: int) -> ConfigError:
    return ConfigError([f"{_kind(mode)}, not a regular file; point the setting at a YAML file"], str(path))


def _open_regular(path: Path) -> int:
    """A descriptor of `path`, opened without blocking; refused unless it is a regular file."""
    try:
        before = path.stat()  # a device is never opened: opening some has effects
        if not stat.S_ISREG(before.st_mode):
            raise _not_regular(path, before.st_mode)
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            problem = "a loop of symbolic links, not a file; point the setting at a YAML file"
        else:
            problem = f"cannot read {path}: {exc.strerror}; check the path"
        raise ConfigError([problem], str(path)) from None
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):  # replaced between the stat and the open
        os.close(descriptor)
        raise _not_regular(path, mode)
    return descriptor


def _read_bounded(path: Path) -> bytes:
    descriptor = _open_regular(path)
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= MAX_YAML_BYTES:
            chunk = os.read(descriptor, MAX_YAML_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ConfigError([f"cannot read {path}: {exc.strerror}; check the path"], str(path)) from None
    finally:
        os.close(descriptor)
    return b"".join(chunks)


def _character_name(char: str) -> str:
    code = ord(char)
    name = _SHORT_NAMES.get(code) or unicodedata.name(char, "")
    kind = "bidirectional control" if code >= 0x2000 else "control character"
    return f"{kind} U+{code:04X}" + (f" ({name})" if name else "")


def control_character_problems(text: str) -> list[str]:
    """`line L, column C: ...` for each character of `text` an operator file may not hold."""
    problems: list[str] = []
    found = list(_REFUSED.finditer(text))
    for match in found[:MAX_CHARACTER_PROBLEMS]:
        line = text.count("\n", 0, match.start()) + 1
        column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
        problems.append(
            f"line {line}, column {column}: {_character_name(match.group())} is not allowed in an "
            "operator file; delete it (write names with plain characters)"
        )
    if len(found) > MAX_CHARACTER_PROBLEMS:
        problems.append(f"... and {len(found) - MAX_CHARACTER_PROBLEMS} more such characters")
    return problems


def read_text(path: Path) -> str:
    """An operator file's text. Raises ConfigError, naming the file, when it is not a regular file
    (a FIFO, a device, a directory, a symbolic-link loop), cannot be read, is larger than
    MAX_YAML_BYTES, is not UTF-8 (with the byte's position and line) or holds a control character
    (with its line and column). Never blocks on a FIFO or a device."""
    raw = _read_bounded(path)
    if len(raw) > MAX_YAML_BYTES:
        raise ConfigError(
            [f"the file is larger than {MAX_YAML_BYTES // 2**20} MiB; this is not a configuration file"],
            str(path),
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            [
                f"line {line}: the file is not UTF-8 text (byte 0x{raw[exc.start]:02x} at position "
                f"{exc.start}); save it as UTF-8"
            ],
            str(path),
        ) from None
    problems = control_character_problems(text)
    if problems:
        raise ConfigError(problems, str(path))
    return text
