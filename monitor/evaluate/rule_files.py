"""Which files of a rules directory are rule files: a module of its own, so that the daemon's
start finds them (to know whether they changed, monitor.core.passed_checks) without importing the
rule loader (jinja2, sqlglot)."""

from __future__ import annotations

from pathlib import Path

from monitor.core.resources import rules_dir

NOT_RULE_FILES = frozenset({"routing.yaml", "owners.yaml", "retention-policy.yaml", "objectives.yaml"})
"""Files of `alert_rules/` that hold routing, ownership, retention policy and lag objectives, not
rules."""


def default_rule_paths(root: Path | None = None) -> list[Path]:
    """`alert_rules/*.yaml` (the shipped ones, or those under `root`), without the routing,
    ownership and policy files."""
    return rule_files_in(rules_dir() if root is None else root / "alert_rules")


def rule_files_in(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.yaml") if p.name not in NOT_RULE_FILES)


def rule_files(directory: Path | None) -> list[Path]:
    """The rule files: those of `evaluate.rules_dir`, else the shipped alert_rules/. A
    `rules_dir` that is not a directory (a FIFO, a loop of links, a missing path) is given as it
    is, so that the loader says what it is rather than finding no rules in it."""
    if directory is None:
        return default_rule_paths()
    return rule_files_in(directory) if directory.is_dir() else [directory]
