"""The daemon's start checks the rule files again only when they, or the code, changed since a start
whose check passed (monitor.core.passed_checks)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from monitor.app import check_operator_files
from monitor.core import passed_checks
from monitor.core.errors import ConfigError
from monitor.core.passed_checks import PassedChecks, fingerprint
from monitor.core.resources import rules_dir
from monitor.core.settings import Settings, load_settings
from monitor.evaluate import rules

pytestmark = pytest.mark.unit


def _settings(tmp_path: Path, rules_at: Path) -> Settings:
    config = tmp_path / "monitor.yaml"
    config.write_text(
        "clusters:\n  - name: c\n    bootstrap_servers: ['127.0.0.1:9']\n"
        f"evaluate:\n  rules_dir: {rules_at}\nalert:\n  enabled: false\nretention:\n  enabled: false\n"
    )
    return load_settings(config)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[int]:
    """The state directory in tmp_path, and each load of the rule files counted."""
    monkeypatch.setenv("KAFKA_HEALTH_VAR", str(tmp_path / "var"))
    calls: list[int] = []
    load = rules.load_rules

    def counting(paths: list[Path]) -> rules.RuleSet:
        calls.append(len(paths))
        return load(paths)

    monkeypatch.setattr(rules, "load_rules", counting)
    return calls


def test_unchanged_rule_files_that_passed_are_not_checked_again(tmp_path: Path, loads: list[int]) -> None:
    folder = tmp_path / "rules"
    folder.mkdir()
    shutil.copy(rules_dir() / "lag.yaml", folder / "lag.yaml")
    settings = _settings(tmp_path, folder)

    check_operator_files(settings)
    check_operator_files(settings)
    assert loads == [1], "the second start found the same files passed"
    assert (tmp_path / "var" / "checked" / "rules").is_file()

    with (folder / "lag.yaml").open("a") as out:
        out.write("# an edit\n")
    check_operator_files(settings)
    assert loads == [1, 1], "an edited file is checked again"

    shutil.copy(rules_dir() / "probe.yaml", folder / "probe.yaml")
    check_operator_files(settings)
    check_operator_files(settings)
    assert loads == [1, 1, 2], "a file added is checked, then remembered"


def test_a_rule_file_that_failed_is_checked_at_every_start(tmp_path: Path, loads: list[int]) -> None:
    folder = tmp_path / "rules"
    folder.mkdir()
    (folder / "bad.yaml").write_text("rules:\n  - name: x\n    entity: nowhere\n")
    settings = _settings(tmp_path, folder)
    for _ in range(2):
        with pytest.raises(ConfigError, match=r"bad\.yaml"):
            check_operator_files(settings)
    assert loads == [1, 1]
    assert not (tmp_path / "var" / "checked" / "rules").exists()


def test_new_code_checks_the_same_files_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lag = rules_dir() / "lag.yaml"
    before = fingerprint([lag])
    assert before is not None and fingerprint([lag]) == before
    monkeypatch.setattr(passed_checks, "code_stamp", lambda: "other code")
    assert fingerprint([lag]) != before


def test_what_cannot_be_fingerprinted_or_kept_is_checked(tmp_path: Path) -> None:
    assert fingerprint([tmp_path / "missing.yaml"]) is None
    assert fingerprint([tmp_path]) is None, "a directory given as a rule file: the loader says what it is"
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    checks = PassedChecks(blocked)
    checks.remember("rules", "abc")  # a state directory that cannot be written is not an error
    assert not checks.passed("rules", "abc")
    assert not PassedChecks(tmp_path).passed("rules", None)
