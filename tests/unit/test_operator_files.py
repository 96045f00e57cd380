"""Operator files (settings, rules, routing, ownership, policy, the config repository) are read by
one loader that refuses what is not a configuration file: bytes that are not UTF-8, files of
megabytes, YAML aliases that expand to gigabytes. Each refusal names the file and the line, and
the commands exit with the message, never a traceback or a hang."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from monitor.act.gitrepo import ConfigRepo, ConfigRepoError
from monitor.act.policy import load_policy
from monitor.cli.main import app
from monitor.core.errors import ConfigError
from monitor.core.owners import load_owners
from monitor.core.settings import ClusterConfig, NameFilter, load_settings
from monitor.core.yaml_files import MAX_YAML_ALIASES, MAX_YAML_BYTES, read_yaml
from monitor.evaluate.rules import load_rules

runner = CliRunner()

NOT_UTF8 = b"clusters:\n  - name: caf\xe9\n    bootstrap_servers: [a:9092]\n"

# Nine levels, each a list of nine aliases of the level before: 9**9 strings once expanded.
BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{before}'] * 9)}]\n"
    for before, name in zip("abcdefgh", "bcdefghi", strict=True)
)


def problems_of(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        read_yaml(path)
    assert caught.value.source == str(path)
    return caught.value.problems


def test_a_file_that_is_not_utf8_names_the_byte_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_bytes(NOT_UTF8)
    assert problems_of(path) == [
        "line 2: the file is not UTF-8 text (byte 0xe9 at position 23); save it as UTF-8"
    ]


@pytest.mark.parametrize(
    ("command", "code"),
    [
        (["config", "check"], 2),
        (["rules", "check"], 2),
        (["routes", "check", "--routing"], 2),
    ],
)
def test_the_check_commands_refuse_a_file_that_is_not_utf8(
    tmp_path: Path, command: list[str], code: int
) -> None:
    path = tmp_path / "file.yaml"
    path.write_bytes(NOT_UTF8)
    result = runner.invoke(app, [*command, str(path)])
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "is not UTF-8 text (byte 0xe9 at position 23); save it as UTF-8" in result.output
    assert str(path.name) in result.output
    assert "Traceback" not in result.output


def test_every_operator_file_loader_refuses_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "file.yaml"
    path.write_bytes(NOT_UTF8)
    for load in (load_settings, load_owners, load_policy):
        with pytest.raises(ConfigError, match="not UTF-8 text"):
            load(path)
    ruleset = load_rules([path])
    assert not ruleset.ok
    assert "not UTF-8 text" in ruleset.problems[0]


def test_an_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text(BILLION_LAUGHS)
    assert len(BILLION_LAUGHS) < 700
    started = time.monotonic()
    problems = problems_of(path)
    assert time.monotonic() - started < 2
    assert problems == [
        "line 2: the YAML aliases (*name) expand to more than 100000 values; "
        "write the values out instead of repeating anchors"
    ]
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 2
    assert "expand to more than 100000 values" in result.output


def test_too_many_aliases_are_refused_with_the_line(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    items = "\n".join("  - *x" for _ in range(MAX_YAML_ALIASES + 1))
    path.write_text(f"base: &x 1\nitems:\n{items}\n")
    assert problems_of(path) == [
        f"line {MAX_YAML_ALIASES + 3}: more than {MAX_YAML_ALIASES} YAML aliases (*name); "
        "write the values out instead of repeating anchors"
    ]


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text("loop: &x\n  - 1\n  - *x\n")
    [problem] = problems_of(path)
    assert problem.startswith("line 1: an alias refers to the value that contains it")


def test_a_few_aliases_still_load_with_their_lines(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text("servers: &servers [a:9092, b:9092]\nagain: *servers\nmore:\n  - *servers\n")
    data, lines = read_yaml(path)
    assert data == {
        "servers": ["a:9092", "b:9092"],
        "again": ["a:9092", "b:9092"],
        "more": [["a:9092", "b:9092"]],
    }
    assert lines[id(data), "again"] == 2


def test_a_file_of_megabytes_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_bytes(b"# " + b"x" * MAX_YAML_BYTES + b"\n")
    assert problems_of(path) == ["the file is larger than 4 MiB; this is not a configuration file"]


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    [problem] = problems_of(tmp_path / "nowhere.yaml")
    assert problem.startswith(f"cannot read {tmp_path / 'nowhere.yaml'}: No such file")


def test_the_config_repository_reads_its_files_with_the_same_loader(tmp_path: Path) -> None:
    repo = ConfigRepo(tmp_path)
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "t.yaml").write_text(BILLION_LAUGHS)
    with pytest.raises(ConfigRepoError, match="expand to more than"):
        repo.read_topic("local", "t")
    (tmp_path / "local" / "u.yaml").write_text("configs: {retention.ms: 1000}\n")
    assert repo.read_topic("local", "u") == {"retention.ms": "1000"}


# ---------------------------------------------------------------------------------------------
# Name patterns match names as data: `.` matches a newline too


def test_the_default_filter_accepts_a_group_id_with_a_newline() -> None:
    cluster = ClusterConfig(name="c", bootstrap_servers=["a:9092"])
    assert cluster.groups.accepts("orders\nINFO forged log line")
    assert cluster.topics.accepts("t\x1b[31m")


def test_patterns_match_whole_names_across_newlines() -> None:
    names = NameFilter(allow=["orders.*"], deny=[".*-tmp"])
    assert names.accepts("orders\nbatch")
    assert not names.accepts("orders\nx-tmp")
    assert not names.accepts("x\norders")


def test_a_pattern_of_a_thousand_characters_is_refused() -> None:
    with pytest.raises(ValueError, match="at most 1000 are accepted"):
        NameFilter(allow=["a" * 1001])


def test_owners_patterns_match_names_with_newlines(tmp_path: Path) -> None:
    path = tmp_path / "owners.yaml"
    path.write_text("teams:\n  - name: payments\n    groups: ['payments-.*']\n")
    owners = load_owners(path)
    (team,) = owners.teams
    assert team.owns_group("payments-\nworker") and team.name == "payments"
