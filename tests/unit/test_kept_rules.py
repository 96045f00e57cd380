"""The evaluate stage's rule files are validated again only when one of them changed: an edit, a
file added or removed, a link swapped to another file; a bad file's problems are reported by
every load."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import monitor.evaluate.kept_rules as kept_rules
from monitor.evaluate.kept_rules import KeptRules
from monitor.evaluate.rules import RuleSet
from tests.fixtures.rules import LAG_RULE

SECOND_RULE = LAG_RULE.replace("LagHigh", "LagHigher").replace("> 300", "> 900")


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many files each validation read (one entry per `load_rules` call)."""
    calls: list[int] = []
    real = kept_rules.load_rules

    def counting(paths: list[Path]) -> RuleSet:
        calls.append(len(list(paths)))
        return real(paths)

    monkeypatch.setattr(kept_rules, "load_rules", counting)
    return calls


def _touch_later(path: Path) -> None:
    """Move the file's modification time on, as an edit a while later would."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_unchanged_files_are_validated_once(tmp_path: Path, loads: list[int]) -> None:
    (tmp_path / "lag.yaml").write_text(LAG_RULE)
    rules = KeptRules(tmp_path)
    first = rules.load()
    assert [rule.name for rule in first.rules] == ["LagHigh"]
    assert rules.load() is first
    assert loads == [1]


def test_an_edit_a_new_file_and_a_removed_one_are_read_again(tmp_path: Path, loads: list[int]) -> None:
    lag = tmp_path / "lag.yaml"
    lag.write_text(LAG_RULE)
    rules = KeptRules(tmp_path)
    rules.load()
    lag.write_text(LAG_RULE.replace("> 300", "> 600"))
    _touch_later(lag)
    assert rules.load().rules[0].severities[0].when == "append_lag_seconds > 600"
    (tmp_path / "more.yaml").write_text(SECOND_RULE)
    assert sorted(rule.name for rule in rules.load().rules) == ["LagHigh", "LagHigher"]
    lag.unlink()
    assert [rule.name for rule in rules.load().rules] == ["LagHigher"]
    assert loads == [1, 1, 2, 1]


def test_a_link_swapped_to_another_version_is_read_again(tmp_path: Path, loads: list[int]) -> None:
    """A ConfigMap's update swaps a link to a new directory: the same path, another file."""
    old, new = tmp_path / "v1", tmp_path / "v2"
    old.mkdir()
    new.mkdir()
    (old / "lag.yaml").write_text(LAG_RULE)
    (new / "lag.yaml").write_text(LAG_RULE.replace("LagHigh", "LagRenamed"))
    current = tmp_path / "current"
    current.symlink_to(old)
    rules = KeptRules(current)
    assert [rule.name for rule in rules.load().rules] == ["LagHigh"]
    current.unlink()
    current.symlink_to(new)
    assert [rule.name for rule in rules.load().rules] == ["LagRenamed"]
    assert loads == [1, 1]


def test_a_bad_file_keeps_its_problems_on_every_load(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("rules: 3\n")
    rules = KeptRules(tmp_path)
    assert rules.load().problems == rules.load().problems != ()
