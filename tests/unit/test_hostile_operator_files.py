"""Hostile operator files, as data: whatever a settings, rule, routing, ownership or policy file
holds (a control character, a complex key, a number of 5,000 digits, `.inf`), and whatever the
path names (a FIFO, a device, a directory, a loop of symbolic links), the one loader answers with
the file, the line and the fix, at once. Every check command and `kafka-health run` say it in one
line per problem and exit 2: no traceback, no hang."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from monitor.act.policy import load_policy
from monitor.alert.config import check_routing
from monitor.cli.main import app
from monitor.core.errors import ConfigError
from monitor.core.owners import load_owners
from monitor.core.settings import load_settings
from monitor.core.yaml_files import MAX_YAML_NUMBER, read_yaml
from monitor.devtools import stack
from monitor.evaluate.rules import load_rules

runner = CliRunner()
PROMPT = 20.0
"""Seconds within which every refusal comes, on a busy machine; a FIFO would block for ever."""

# (id, the file's bytes, what the one problem says, with its line and column)
HOSTILE_TEXT: list[tuple[str, bytes, str]] = [
    ("nul", b'web:\n  host: "a\x00b"\n', "line 2, column 11: control character U+0000 (NUL) is not allowed"),
    ("escape", b"# colour \x1b[31m\nweb: {}\n", "line 1, column 10: control character U+001B (ESC)"),
    ("bell", b"web: {host: a\x07}\n", "line 1, column 14: control character U+0007 (BEL)"),
    ("delete", b"web: {host: a\x7f}\n", "line 1, column 14: control character U+007F (DEL)"),
    ("c1 next line", "web: {host: a\u0085b}\n".encode(), "line 1, column 14: control character U+0085 (NEL)"),
    ("c1 csi", "web: {host: a\u009b}\n".encode(), "line 1, column 14: control character U+009B"),
    (
        "bidi override",
        'web:\n  host: "\u202etxt.exe"\n'.encode(),
        "line 2, column 10: bidirectional control U+202E (RIGHT-TO-LEFT OVERRIDE)",
    ),
    (
        "bidi isolate in a comment",
        "# \u2066admin\u2069\nweb: {}\n".encode(),
        "line 1, column 3: bidirectional control U+2066 (LEFT-TO-RIGHT ISOLATE)",
    ),
    ("list as key", b"? [a, b]\n: 1\n", "line 1, column 3: a key must be a plain word or number, not a list"),
    (
        "mapping as key",
        b"{a: 1}: 2\n",
        "line 1, column 1: a key must be a plain word or number, not a mapping",
    ),
    (
        "integer of 5,000 digits",
        b"web:\n  port: " + b"9" * 5000 + b"\n",
        "line 2, column 9: the number 999999999999... (5000 characters) is beyond 9,223,372,036,854,775,807",
    ),
    (
        "2**63",
        b"web: {port: 9223372036854775808}\n",
        "line 1, column 13: the number 9223372036854775808 is beyond",
    ),
    ("-2**63-1", b"a: -9223372036854775809\n", "line 1, column 4: the number -9223372036854775809 is beyond"),
    ("hex of 100 digits", b"a: 0x" + b"f" * 100 + b"\n", "line 1, column 4: the number 0xffffffffff..."),
    ("sexagesimal", b"a: 1:2:3:4:5:6:7:8\n", "line 1, column 4: the number 1:2:3:4:5:6:7:8 is beyond"),
    ("inf", b"web: {port: .inf}\n", "line 1, column 13: .inf is not a number a setting can take"),
    ("minus inf", b"a: -.inf\n", "line 1, column 4: -.inf is not a number a setting can take"),
    ("nan", b"a:\n  - .nan\n", "line 2, column 5: .nan is not a number a setting can take"),
    ("float overflow", b"a: 1.0e+400\n", "line 1, column 4: 1.0e+400 is not a number a setting can take"),
    ("float beyond 64 bits", b"a: 1.0e+300\n", "line 1, column 4: the number 1.0e+300 is beyond"),
    ("not yaml", b"a: [\n", "not valid YAML"),
]


def write(tmp_path: Path, content: bytes, name: str = "file.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    return path


def symlink_loop(tmp_path: Path) -> Path:
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    return tmp_path / "a.yaml"


def directory(tmp_path: Path) -> Path:
    (tmp_path / "rules.yaml").mkdir()
    return tmp_path / "rules.yaml"


def device(tmp_path: Path) -> Path:
    (tmp_path / "null.yaml").symlink_to("/dev/null")
    return tmp_path / "null.yaml"


# (id, how to make the path, what the one problem says)
NOT_A_FILE: list[tuple[str, Callable[[Path], Path], str]] = [
    ("fifo", fifo, "a named pipe (FIFO), not a regular file; point the setting at a YAML file"),
    ("symlink loop", symlink_loop, "a loop of symbolic links, not a file; point the setting at a YAML file"),
    ("directory", directory, "a directory, not a regular file; point the setting at a YAML file"),
    ("character device", device, "a character device, not a regular file; point the setting at a YAML file"),
]


def problems_of(path: Path) -> list[str]:
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        read_yaml(path)
    assert time.monotonic() - started < PROMPT
    assert caught.value.source == str(path)
    return caught.value.problems


@pytest.mark.parametrize(
    ("content", "expected"), [(c, e) for _, c, e in HOSTILE_TEXT], ids=[i for i, *_ in HOSTILE_TEXT]
)
def test_the_loader_refuses_hostile_text_with_line_and_column(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    problem = problems_of(write(tmp_path, content))[0]
    assert expected in problem
    assert "Traceback" not in problem


@pytest.mark.parametrize(
    ("make", "expected"), [(m, e) for _, m, e in NOT_A_FILE], ids=[i for i, *_ in NOT_A_FILE]
)
def test_the_loader_reads_only_regular_files(
    tmp_path: Path, make: Callable[[Path], Path], expected: str
) -> None:
    assert problems_of(make(tmp_path)) == [expected]


def test_what_is_allowed_still_loads(tmp_path: Path) -> None:
    path = write(
        tmp_path, b"a: 'x\ty'\r\nb: 9223372036854775807\nc: -9223372036854775807\nd: 1.5e-300\ne: 0x10\n"
    )
    data, _ = read_yaml(path)
    assert data == {"a": "x\ty", "b": MAX_YAML_NUMBER, "c": -MAX_YAML_NUMBER, "d": 1.5e-300, "e": 16}
    assert read_yaml(write(tmp_path, "name: caf\u00e9 \u65e5\u672c\n".encode(), "u.yaml"))[0] == {
        "name": "caf\u00e9 \u65e5\u672c"
    }


def test_many_control_characters_are_counted_past_the_tenth(tmp_path: Path) -> None:
    problems = problems_of(write(tmp_path, b"a: '" + b"\x01" * 25 + b"'\n"))
    assert len(problems) == 11
    assert problems[0].startswith("line 1, column 5: control character U+0001")
    assert problems[-1] == "... and 15 more such characters"


def _rules(path: Path) -> None:
    ruleset = load_rules([path])
    if not ruleset.ok:
        raise ruleset.errors[0]


def _routing(path: Path) -> None:
    _, errors = check_routing(path)
    if errors:
        raise errors[0]


LOADERS: list[tuple[str, Callable[[Path], Any]]] = [
    ("settings", load_settings),
    ("rules", _rules),
    ("routing", _routing),
    ("owners", load_owners),
    ("policy", load_policy),
]


SOME_TEXT = ("nul", "list as key", "integer of 5,000 digits", "inf")
SOME_HOSTILE: list[tuple[str, Callable[[Path], Path], str]] = [
    (i, lambda p, c=c: write(p, c), e) for i, c, e in HOSTILE_TEXT if i in SOME_TEXT
] + NOT_A_FILE


def everything_but_a_rules_directory(names: list[str]) -> list[Any]:
    """(name, make, expected) for each name and hostile file; a directory given as rule files
    stands for the rule files in it, so it is no error there."""
    return [
        pytest.param(name, make, expected, id=f"{name}-{kind}")
        for name in names
        for kind, make, expected in SOME_HOSTILE
        if not (name.startswith("rules") and kind == "directory")
    ]


@pytest.mark.parametrize(
    ("name", "make", "expected"), everything_but_a_rules_directory([n for n, _ in LOADERS])
)
def test_every_operator_file_goes_through_the_one_loader(
    tmp_path: Path, name: str, make: Callable[[Path], Path], expected: str
) -> None:
    path = make(tmp_path)
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        dict(LOADERS)[name](path)
    assert time.monotonic() - started < PROMPT
    assert caught.value.source == str(path)
    assert any(expected in problem for problem in caught.value.problems), caught.value.problems


CHECK_COMMANDS: list[list[str]] = [
    ["config", "check"],
    ["rules", "check"],
    ["routes", "check", "--routing"],
    ["routes", "check", "--owners"],
    ["retention", "policy", "check"],
]


def check_exits_2(command: list[str], path: Path, expected: str) -> str:
    started = time.monotonic()
    result = runner.invoke(app, [*command, str(path)])
    assert time.monotonic() - started < PROMPT
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    [line] = [line for line in result.output.splitlines() if expected in line]
    assert path.name in line
    return result.output


# Every hostile text reaches a check command through the one loader (whose own tests above take
# each of them); the commands are given one of each kind of problem: a control character (one of
# them a terminal escape), a bidirectional control, a complex key, a number too big, one not finite.
EACH_KIND = ("nul", "escape", "bidi override", "list as key", "integer of 5,000 digits", "inf")


@pytest.mark.parametrize("command", CHECK_COMMANDS, ids=" ".join)
@pytest.mark.parametrize(
    ("content", "expected"),
    [(c, e) for i, c, e in HOSTILE_TEXT if i in EACH_KIND],
    ids=[i for i, *_ in HOSTILE_TEXT if i in EACH_KIND],
)
def test_every_check_command_says_the_problem_in_one_line_and_exits_2(
    tmp_path: Path, command: list[str], content: bytes, expected: str
) -> None:
    check_exits_2(command, write(tmp_path, content), expected)


@pytest.mark.parametrize(
    ("name", "make", "expected"),
    [
        pytest.param(" ".join(command), make, expected, id=f"{' '.join(command)}-{kind}")
        for command in CHECK_COMMANDS
        for kind, make, expected in NOT_A_FILE
        if not (command[0] == "rules" and kind == "directory")
    ],
)
def test_every_check_command_refuses_what_is_not_a_file_at_once(
    tmp_path: Path, name: str, make: Callable[[Path], Path], expected: str
) -> None:
    check_exits_2(name.split(), make(tmp_path), expected)


# ---------------------------------------------------------------------------------------------
# `kafka-health run` checks every file before it starts anything


def config_using(tmp_path: Path, section: str, key: str, path: Path) -> Path:
    """A configuration naming `path` as `section.key`; the evaluation is off unless that is its
    section, so that the shipped rule pack (its own tests check it) is not checked again."""
    config = tmp_path / "monitor.yaml"
    config.write_text(
        "clusters:\n  - name: c\n    bootstrap_servers: ['127.0.0.1:9']\n"
        "database:\n  url: postgresql+psycopg://nobody@127.0.0.1:9/none\n"
        f"{section}:\n  {key}: {path}\n" + ("" if section == "evaluate" else "evaluate:\n  enabled: false\n")
    )
    return config


RUN_FILES: list[tuple[str, str, str]] = [
    ("evaluate", "rules_dir", "rules"),
    ("alert", "routing_file", "routing.yaml"),
    ("alert", "owners_file", "owners.yaml"),
    ("retention", "policy_file", "policy.yaml"),
]


@pytest.fixture
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    def must_not_start(*args: object, **kwargs: object) -> None:
        raise AssertionError("local services started before the operator files were checked")

    monkeypatch.setattr(stack, "local_services", must_not_start)


def run_exits_2(config: Path, expected: str) -> None:
    started = time.monotonic()
    result = runner.invoke(app, ["run", "--config", str(config)])
    assert time.monotonic() - started < PROMPT
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert expected in result.output, result.output


@pytest.mark.usefixtures("nothing_starts")
@pytest.mark.parametrize(("section", "key", "name"), RUN_FILES, ids=[f"{s}.{k}" for s, k, _ in RUN_FILES])
@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("fifo", "a named pipe (FIFO), not a regular file"),
        ("nul", "control character U+0000 (NUL)"),
        ("big integer", "(5000 characters) is beyond"),
    ],
)
def test_run_refuses_a_hostile_operator_file_before_starting(
    tmp_path: Path, section: str, key: str, name: str, kind: str, expected: str
) -> None:
    target = tmp_path / name
    if name == "rules":
        target.mkdir()
        target = target / "lag.yaml"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.write_bytes(b"a: '\x00'\n" if kind == "nul" else b"a: " + b"1" * 5000 + b"\n")
    run_exits_2(config_using(tmp_path, section, key, tmp_path / name), expected)


@pytest.mark.usefixtures("nothing_starts")
@pytest.mark.parametrize(
    ("make", "expected"), [(m, e) for _, m, e in NOT_A_FILE], ids=[i for i, *_ in NOT_A_FILE]
)
def test_run_refuses_a_configuration_that_is_not_a_file(
    tmp_path: Path, make: Callable[[Path], Path], expected: str
) -> None:
    run_exits_2(make(tmp_path), expected)


@pytest.mark.usefixtures("nothing_starts")
@pytest.mark.parametrize(
    ("make", "expected"),
    [(m, e) for i, m, e in NOT_A_FILE if i != "directory"] + [(lambda p: p / "missing", "No such file")],
    ids=[i for i, *_ in NOT_A_FILE if i != "directory"] + ["missing"],
)
def test_run_refuses_a_rules_dir_that_is_not_a_directory(
    tmp_path: Path, make: Callable[[Path], Path], expected: str
) -> None:
    run_exits_2(config_using(tmp_path, "evaluate", "rules_dir", make(tmp_path)), expected)
