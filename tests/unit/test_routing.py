"""Routing and ownership: the tree picks receivers the way Alertmanager does, children inherit,
owners add a team and its receivers, the shipped tiers page only for what should page, every
mistake in the files names the file and the line, and `kafka-health routes` says so."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from monitor.alert.config import (
    Routing,
    check_routing,
    console_inboxes,
    default_routing_paths,
    load_routing,
    routing_paths,
)
from monitor.alert.dispatch import route
from monitor.cli import routes as cli_routes
from monitor.core.errors import ConfigError
from monitor.core.settings import AlertConfig
from monitor.core.vocabulary import parse_duration

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

RECEIVERS = """\
receivers:
  - name: default
    console: {}
  - name: pager
    pagerduty: {routing_key_env: PAGER_KEY}
  - name: slack
    slack: {channel: "#a", token_env: SLACK_TOKEN}
  - name: mail
    email: {to: [a@example.com], from: b@example.com, smarthost: smtp.example.com:587}
  - name: payments-slack
    slack: {channel: "#payments", token_env: SLACK_TOKEN}
"""

TREE = (
    RECEIVERS
    + """\
route:
  receiver: default
  group_wait: 1m
  routes:
    - matchers: [severity=critical]            # root/0
      receiver: pager
      continue: true
      repeat_interval: 1h
    - matchers: [severity=~critical|warning]   # root/1
      receiver: slack
      escalate_after: 2h
      escalate_to: pager
      routes:
        - matchers: [team=payments]            # root/1/0
          receiver: payments-slack
          group_by: ['...']
          send_resolved: false
        - matchers: [cluster=staging]          # root/1/1
          receiver: mail
    - matchers: [severity=warning]             # root/2: shadowed by root/1 (no continue)
      receiver: mail
"""
)

OWNERS = """\
teams:
  - name: payments
    receivers: [payments-slack]
    topics: ['payments\\..*']
    groups: ['payments-.*']
  - name: search
    receivers: [mail, slack]
    topics: ['search\\..*', 'payments\\.search']
    groups: ['search-.*']
"""


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def load(tmp_path: Path, text: str = TREE, owners: str | None = OWNERS) -> Routing:
    owners_path = write(tmp_path, "owners.yaml", owners) if owners is not None else None
    return load_routing(write(tmp_path, "routing.yaml", text), owners_path)


def picks(result: list[Any]) -> list[tuple[str, str]]:
    return [(m.receiver, m.route_path) for m in result]


@pytest.fixture
def tree(tmp_path: Path) -> Routing:
    return load(tmp_path)


# ---------------------------------------------------------------------------------------------
# The tree

# (case, labels, [(receiver, route path)] in order)
TREE_CASES: list[tuple[int, dict[str, str], list[tuple[str, str]]]] = [
    # 1. nothing matches a child: the root takes it
    (1, {"severity": "info"}, [("default", "root")]),
    # 2. continue: the pager, then the next sibling that matches; that one has no matching child,
    #    so it takes the alert itself
    (2, {"severity": "critical"}, [("pager", "root/0"), ("slack", "root/1")]),
    # 3. first match wins: root/2 would match a warning too, but root/1 has no continue
    (3, {"severity": "warning"}, [("slack", "root/1")]),
    # 4. depth first: a matching child takes it instead of its parent
    (4, {"severity": "warning", "team": "payments"}, [("payments-slack", "root/1/0")]),
    (5, {"severity": "critical", "cluster": "staging"}, [("pager", "root/0"), ("mail", "root/1/1")]),
    # 6. first matching child wins among children too
    (6, {"severity": "warning", "team": "payments", "cluster": "staging"}, [("payments-slack", "root/1/0")]),
    # 7. no labels at all
    (7, {}, [("default", "root")]),
]


@pytest.mark.parametrize(("case", "labels", "expected"), TREE_CASES, ids=[f"case{c[0]}" for c in TREE_CASES])
def test_tree(tree: Routing, case: int, labels: dict[str, str], expected: list[tuple[str, str]]) -> None:
    assert picks(tree.route(labels)) == expected


def test_children_inherit_unless_they_set(tree: Routing) -> None:
    root, pager, slack = tree.route({})[0], *tree.route({"severity": "critical"})
    assert (root.group_by, root.group_wait, root.group_interval, root.repeat_interval) == (
        ("cluster", "rule", "group_id"),
        60,
        120,
        4 * 3600,
    )
    assert root.send_resolved is True and root.escalate_after is None and root.escalate_to is None
    # root/0 sets repeat_interval only; group_wait comes from the root, the rest from defaults
    assert (pager.group_wait, pager.repeat_interval, pager.group_by) == (60, 3600, route.DEFAULT_GROUP_BY)
    # root/1 sets the escalation; its children inherit it with everything else they do not set
    assert (slack.escalate_after, slack.escalate_to) == (7200, "pager")
    team = tree.route({"severity": "warning", "team": "payments"})[0]
    assert (team.escalate_after, team.escalate_to, team.group_wait) == (7200, "pager", 60)
    assert team.group_by == ("...",) and team.send_resolved is False
    mail = tree.route({"severity": "warning", "cluster": "staging"})[0]
    assert mail.group_by == route.DEFAULT_GROUP_BY and mail.send_resolved is True


def test_group_labels(tree: Routing) -> None:
    labels = {"severity": "warning", "team": "payments", "cluster": "prod", "rule": "X", "topic": "t"}
    by_all = tree.route(labels)[0]
    assert by_all.group_labels(labels) == labels
    by_rule = tree.route({"severity": "info"})[0]
    assert by_rule.group_labels(labels) == {"cluster": "prod", "rule": "X"}
    assert by_rule.group_labels({"rule": "X"}) == {"rule": "X"}


def test_escalation_to_the_routes_own_receiver_is_dropped_when_inherited(tmp_path: Path) -> None:
    text = (
        RECEIVERS
        + """\
route:
  receiver: default
  routes:
    - matchers: [severity=warning]
      receiver: slack
      escalate_after: 1h
      escalate_to: pager
      routes:
        - matchers: [page=true]
          receiver: pager
"""
    )
    routing_ = load(tmp_path, text, owners=None)
    paged = routing_.route({"severity": "warning", "page": "true"})[0]
    assert paged.receiver == "pager" and paged.escalate_to is None and paged.escalate_after is None


# ---------------------------------------------------------------------------------------------
# Ownership


def test_team_by_topic_then_group(tree: Routing) -> None:
    assert tree.team_for({"topic": "payments.orders"}) == "payments"
    assert tree.team_for({"group_id": "payments-ledger"}) == "payments"
    assert tree.team_for({"group": "search-indexer"}) == "search"
    # topic first: a search group reading a payments topic belongs to payments
    assert tree.team_for({"topic": "payments.orders", "group_id": "search-indexer"}) == "payments"
    # first team in the file wins when two patterns match
    assert tree.team_for({"topic": "payments.search"}) == "payments"
    # whole-name patterns
    assert tree.team_for({"topic": "old-payments.orders"}) is None
    assert tree.team_for({"topic": "other", "group_id": "other"}) is None
    # a rule's own team label wins
    assert tree.team_for({"team": "kafka-platform", "topic": "payments.orders"}) == "kafka-platform"


def test_ownership_adds_team_label_and_receivers(tree: Routing) -> None:
    labels = {"severity": "info", "topic": "search.docs", "cluster": "prod"}
    assert tree.with_team(labels) == {**labels, "team": "search"}
    chosen = tree.receivers_for(labels)
    assert picks(chosen) == [("default", "root"), ("mail", "owners:search"), ("slack", "owners:search")]
    # the team's receivers get the matched route's timings, not an escalation of their own
    assert {(m.group_wait, m.repeat_interval, m.escalate_to) for m in chosen} == {(60, 4 * 3600, None)}


def test_team_label_reaches_the_tree_and_receivers_are_deduplicated(tree: Routing) -> None:
    # the team label from owners.yaml makes root/1/0 match; payments-slack is not added twice
    chosen = tree.receivers_for({"severity": "critical", "topic": "payments.orders"})
    assert picks(chosen) == [("pager", "root/0"), ("payments-slack", "root/1/0")]
    # search's receivers: slack is already chosen by the tree (its route's settings win), mail is added
    chosen = tree.receivers_for({"severity": "warning", "group_id": "search-indexer"})
    assert picks(chosen) == [("slack", "root/1"), ("mail", "owners:search")]
    assert chosen[0].escalate_to == "pager" and chosen[1].escalate_to is None


def test_without_owners_file(tmp_path: Path) -> None:
    routing_ = load(tmp_path, owners=None)
    assert routing_.teams == ()
    assert routing_.team_for({"topic": "payments.orders"}) is None
    assert picks(routing_.receivers_for({"severity": "info", "topic": "payments.orders"})) == [
        ("default", "root")
    ]


def test_receiver_configs_keep_the_raw_mapping(tree: Routing) -> None:
    assert tree.receiver_configs["slack"] == {
        "name": "slack",
        "slack": {"channel": "#a", "token_env": "SLACK_TOKEN"},
    }
    assert list(tree.receiver_configs) == ["default", "pager", "slack", "mail", "payments-slack"]


# ---------------------------------------------------------------------------------------------
# The shipped files


def rule_labels(name: str, severity: str) -> dict[str, str]:
    """The labels a finding of the shipped rule `name` carries at `severity`."""
    for path in sorted((ROOT / "alert_rules").glob("*.yaml")):
        for rule in (yaml.safe_load(path.read_text()) or {}).get("rules", []):
            if rule["name"] == name:
                assert severity in [tier["severity"] for tier in rule["severities"]], (name, severity)
                return {"cluster": "prod", "rule": name, "severity": severity, **rule.get("labels", {})}
    raise AssertionError(f"no shipped rule {name}")


@pytest.fixture
def shipped() -> Routing:
    return load_routing(*default_routing_paths())


def receivers(routing_: Routing, labels: dict[str, str]) -> set[str]:
    return {match.receiver for match in routing_.receivers_for(labels)}


def test_shipped_files_are_the_checkouts() -> None:
    assert default_routing_paths() == (
        ROOT / "alert_rules" / "routing.yaml",
        ROOT / "alert_rules" / "owners.yaml",
    )


def test_one_replica_lost_goes_to_slack_and_email_not_the_pager(shipped: Routing) -> None:
    labels = {**rule_labels("PartitionReplicaLost", "warning"), "topic": "orders", "partition": "0"}
    assert receivers(shipped, labels) == {"ops-slack", "ops-email"}
    slack = next(m for m in shipped.receivers_for(labels) if m.receiver == "ops-slack")
    assert (slack.escalate_after, slack.escalate_to) == (2 * 3600, "oncall-pager")
    # exactly one route escalates, so an unacknowledged warning pages once
    assert [m.receiver for m in shipped.receivers_for(labels) if m.escalate_to] == ["ops-slack"]


@pytest.mark.parametrize(
    "rule",
    ["PartitionReplicasLost", "PartitionOffline", "PartitionUnderMinIsr", "BrokerDown", "ClusterUnreachable"],
)
def test_critical_replication_and_cluster_alerts_page_and_reach_slack(shipped: Routing, rule: str) -> None:
    labels = {**rule_labels(rule, "critical"), "topic": "orders", "partition": "0", "broker_id": "1"}
    assert receivers(shipped, labels) == {"oncall-pager", "ops-slack"}
    assert shipped.receivers_for(labels)[0].receiver == "oncall-pager"


def test_data_about_to_be_deleted_pages(shipped: Routing) -> None:
    labels = {**rule_labels("TimeUntilDataLoss", "critical"), "group_id": "g", "topic": "t", "partition": "0"}
    assert "oncall-pager" in receivers(shipped, labels)


def test_a_warning_of_a_paging_rule_does_not_page_at_once(shipped: Routing) -> None:
    """Lag rules carry page "true" for their critical tier; their warnings go to Slack and email."""
    labels = {**rule_labels("ConsumerAppendLag", "warning"), "group_id": "g", "topic": "t"}
    assert labels["page"] == "true"
    assert receivers(shipped, labels) == {"ops-slack", "ops-email"}


def test_a_critical_tier_marked_not_to_page_goes_to_slack(shipped: Routing) -> None:
    assert receivers(shipped, {"severity": "critical", "page": "false", "rule": "X"}) == {"ops-slack"}


def test_info_goes_to_the_console_only(shipped: Routing) -> None:
    assert receivers(shipped, rule_labels("LeaderImbalance", "info")) == {"console"}


def test_shipped_example_team_owns_payments(shipped: Routing) -> None:
    labels = {
        **rule_labels("ConsumerLagSeconds", "warning"),
        "group_id": "payments-ledger",
        "topic": "payments",
    }
    assert shipped.team_for(labels) == "payments"
    assert receivers(shipped, labels) == {"ops-slack", "ops-email", "payments-slack"}
    # a replication rule keeps its own team (kafka-platform), even on a payments topic
    labels = {**rule_labels("PartitionReplicaLost", "warning"), "topic": "payments.orders"}
    assert shipped.team_for(labels) == "kafka-platform"


def test_shipped_inhibition(shipped: Routing) -> None:
    broker_down = rule_labels("BrokerDown", "critical") | {"broker_id": "1"}
    echo = rule_labels("PartitionReplicaLost", "warning")
    assert shipped.inhibits(broker_down, echo)
    assert not shipped.inhibits(broker_down, {**echo, "cluster": "other"})
    # worse than one broker down says: told, and still counted in the broker's impact
    for worse in ("PartitionReplicasLost", "PartitionUnderMinIsr"):
        target = rule_labels(worse, "critical")
        assert not shipped.inhibits(broker_down, target), worse
        rule = shipped.inhibit_rules[0]
        assert rule.covers(broker_down, target) and rule.still_told(target), worse
        assert not rule.covers(broker_down, {**target, "cluster": "other"}), worse
    lag = rule_labels("ConsumerAppendLag", "critical") | {"group_id": "g", "topic": "t"}
    assert shipped.inhibits(broker_down, lag)
    # an offline partition and data loss still need their own decisions
    assert not shipped.inhibits(broker_down, rule_labels("PartitionOffline", "critical"))
    assert not shipped.inhibits(broker_down, rule_labels("DataLossOccurred", "critical"))

    unreachable = rule_labels("ClusterUnreachable", "critical")
    assert shipped.inhibits(unreachable, broker_down)
    assert shipped.inhibits(unreachable, rule_labels("PartitionOffline", "critical"))
    assert not shipped.inhibits(unreachable, {**broker_down, "cluster": "other"})
    assert not shipped.inhibits(unreachable, unreachable)  # an alert never mutes itself
    assert not shipped.inhibits(unreachable, {**unreachable, "cluster": "other"})


def test_shipped_lag_inhibition_waits_for_the_cause(shipped: Routing) -> None:
    lag = rule_labels("ConsumerAppendLag", "critical") | {"group_id": "g", "topic": "t"}
    broker_down = rule_labels("BrokerDown", "critical") | {"broker_id": "1"}
    replica = rule_labels("PartitionReplicaLost", "warning")
    by_target = {
        name: [r.only_after_source for r in shipped.inhibit_rules if r.inhibits(broker_down, labels)]
        for name, labels in (("lag", lag), ("replica", replica))
    }
    assert by_target == {"lag": [True], "replica": [False]}


def test_only_after_source_must_be_a_boolean(tmp_path: Path) -> None:
    text = TREE + (
        "inhibit_rules:\n  - source_matchers: [rule=A]\n    target_matchers: [rule=B]\n"
        "    only_after_source: sometimes\n"
    )
    _, problems = routing_problems(tmp_path, text)
    assert any("only_after_source" in p for p in problems), problems


def test_inhibition_rule_names_are_real_rules(shipped: Routing) -> None:
    names = {
        rule["name"]
        for path in (ROOT / "alert_rules").glob("*.yaml")
        for rule in (yaml.safe_load(path.read_text()) or {}).get("rules", [])
    }
    for rule in shipped.inhibit_rules:
        for matcher in (*rule.source_matchers, *rule.target_matchers):
            assert matcher.name == "rule"
            mentioned = set(re.findall(r"[A-Za-z]+", matcher.value))
            assert mentioned <= names, mentioned - names


def test_shipped_settings(shipped: Routing) -> None:
    assert shipped.settings.silence_max_duration == 7 * 86400
    kinds = {name: next(k for k in raw if k != "name") for name, raw in shipped.receiver_configs.items()}
    assert kinds["oncall-pager"] == "pagerduty" and kinds["ops-slack"] == "slack"
    assert kinds["ops-email"] == "email" and kinds["console"] == "console"
    assert (
        shipped.receiver_configs["oncall-pager"]["pagerduty"]["routing_key_env"]
        == "KAFKA_HEALTH_PAGERDUTY_ROUTING_KEY"
    )
    assert shipped.receiver_configs["ops-slack"]["slack"]["token_env"] == "KAFKA_HEALTH_SLACK_TOKEN"
    assert shipped.receiver_configs["ops-slack"]["slack"]["channel"] == "#kafka-alerts"


# ---------------------------------------------------------------------------------------------
# Mistakes name the file and the line


def routing_problems(tmp_path: Path, text: str, owners: str | None = None) -> tuple[Path, list[str]]:
    path = write(tmp_path, "routing.yaml", text)
    owners_path = write(tmp_path, "owners.yaml", owners) if owners is not None else None
    loaded, errors = check_routing(path, owners_path)
    assert loaded is None and errors
    with pytest.raises(ConfigError) as caught:
        load_routing(path, owners_path)
    assert str(errors[0].source) in str(caught.value)
    return path, [f"{e.source}: {p}" for e in errors for p in e.problems]


def line_of(text: str, needle: str) -> int:
    """The line where `needle` (which may span lines) first starts."""
    return text[: text.index(needle)].count("\n") + 1


def edited(old: str, new: str, base: str = TREE) -> str:
    assert old in base
    return base.replace(old, new, 1)


# (case, old text in TREE, new text, the line holding this text, words the problem must contain)
MISTAKES: list[tuple[int, str, str, str, list[str]]] = [
    (1, "  continue: true", "  contine: true", "contine", ["contine", "unknown key", "remove it"]),
    (2, "[severity=critical]", "[severity==critical]", "severity==critical", ["bad matcher", "label=value"]),
    (3, "[cluster=staging]", "[cluster=~(staging]", "(staging", ["invalid regular expression"]),
    (
        4,
        "receiver: mail\n",
        "receiver: mial\n",
        "mial",
        ["unknown receiver 'mial'", "did you mean 'mail'", "receivers:"],
    ),
    (5, "escalate_to: pager", "escalate_to: pagr", "pagr", ["unknown receiver 'pagr'"]),
    (6, "repeat_interval: 1h", "repeat_interval: 1 hour", "1 hour", ["bad duration '1 hour'", "30s, 5m"]),
    (7, "group_wait: 1m", "group_wait: 60", "group_wait", ["add a unit", "60s"]),
    (8, "escalate_after: 2h", "escalate_after: 0", "escalate_after", ["longer than 0s"]),
    (9, "group_by: ['...']", "group_by: ['...', cluster]", "group_by", ["'...'", "alone"]),
    (
        10,
        "  - name: mail\n",
        "  - name: slack\n",
        "  - name: slack\n    email",
        ["duplicate receiver name 'slack'", "line 6", "rename"],
    ),
    (
        11,
        "  receiver: default\n",
        "  receiver: default\n  matchers: [a=b]\n",
        "matchers: [a=b]",
        ["root route", "child route"],
    ),
    (12, "      escalate_to: pager\n", "", "escalate_after", ["escalate_to"]),
    (13, "  continue: true", "  continue: maybe", "maybe", ["continue", "bool"]),
]


@pytest.mark.parametrize(
    ("case", "old", "new", "needle", "words"), MISTAKES, ids=[f"case{c[0]}" for c in MISTAKES]
)
def test_routing_mistakes_name_file_and_line(
    tmp_path: Path, case: int, old: str, new: str, needle: str, words: list[str]
) -> None:
    text = edited(old, new)
    path, problems = routing_problems(tmp_path, text)
    line = line_of(text, needle)
    found = [p for p in problems if p.startswith(f"{path}: line {line}: ")]
    assert len(found) == 1, (line, problems)
    for word in words:
        assert word in found[0], (word, found[0])


def test_root_needs_a_receiver(tmp_path: Path) -> None:
    path, problems = routing_problems(tmp_path, edited("  receiver: default\n", ""))
    assert problems == [
        f"{path}: line {line_of(TREE, 'route:')}: route: the root route needs a receiver: it gets every "
        "alert no child takes, e.g. receiver: console"
    ]


def test_not_a_routing_file(tmp_path: Path) -> None:
    _, problems = routing_problems(tmp_path, "- just a list\n")
    assert "must hold a mapping with `receivers:` and `route:`" in problems[0]
    _, problems = routing_problems(tmp_path, "route: {receiver: x\n")
    assert "not valid YAML" in problems[0]
    _, problems = routing_problems(tmp_path, "receivers: []\n")
    assert any("route: required key is missing" in p for p in problems)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = edited(
        "receiver: mail\n", "receiver: mial\n", edited("[severity=critical]", "[severity==critical]")
    )
    _, problems = routing_problems(tmp_path, text)
    lines = [int(found.group(1)) for p in problems if (found := re.search(r": line (\d+): ", p))]
    assert len(lines) == 2 and lines == sorted(lines), problems


def test_settings_block(tmp_path: Path) -> None:
    text = "settings:\n  silence_max_duration: 1d\n  external_url: https://kh.example.com/\n" + TREE
    loaded = load(tmp_path, text)
    assert loaded.settings.silence_max_duration == 86400
    assert loaded.settings.external_url == "https://kh.example.com"
    bad = "settings:\n  silence_max_duration: forever\n  extrnal_url: x\n" + TREE
    path, problems = routing_problems(tmp_path, bad)
    assert any(p.startswith(f"{path}: line 2: settings.silence_max_duration: bad duration") for p in problems)
    assert any(p.startswith(f"{path}: line 3: settings.extrnal_url: unknown key") for p in problems)


def test_inhibit_rules_are_checked(tmp_path: Path) -> None:
    text = (
        TREE
        + "inhibit_rules:\n  - source_matchers: [rule=A]\n    target_matchers: []\n    equal: [clus-ter]\n"
    )
    _, problems = routing_problems(tmp_path, text)
    lines = textwrap.dedent(text).splitlines()
    at = {p.split(": ")[1]: p for p in problems}
    assert "at least one matcher" in at[f"line {lines.index('    target_matchers: []') + 1}"]
    assert "bad label name 'clus-ter'" in at[f"line {lines.index('    equal: [clus-ter]') + 1}"]


# Receiver kinds: checked by the receivers' registry


KIND_MISTAKES: list[tuple[int, str, str]] = [
    # (case, receiver entry replacing `console: {}` of `default`, words)
    (1, "    slak: {}", "(did you mean 'slack' instead of 'slak'?)"),
    (2, "    console: {}\n    email: {}", "receiver has email and console"),
    (3, "", "receiver needs one kind key besides name: one of slack, email"),
]


@pytest.mark.parametrize(
    ("case", "entry", "words"), KIND_MISTAKES, ids=[f"case{c[0]}" for c in KIND_MISTAKES]
)
def test_receiver_kinds_come_from_the_registry(tmp_path: Path, case: int, entry: str, words: str) -> None:
    text = TREE.replace("    console: {}", entry, 1) if entry else TREE.replace("    console: {}\n", "", 1)
    path, problems = routing_problems(tmp_path, text)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{path}: line {line_of(text, '- name: default')}: receivers.0")
    assert words in problems[0]


def test_receiver_settings_checked_by_the_receivers_package(tmp_path: Path) -> None:
    text = TREE.replace(
        'slack: {channel: "#a", token_env: SLACK_TOKEN}', 'slack: {channel: "#a", tokn: x}', 1
    )
    path, problems = routing_problems(tmp_path, text)
    line = line_of(text, "tokn")
    assert problems and all(p.startswith(f"{path}: line {line}: receivers.2") for p in problems), problems
    assert any("tokn" in p for p in problems)
    text = TREE.replace("    console: {}", "    consol: {}", 1)
    path, problems = routing_problems(tmp_path, text)
    assert problems[0].startswith(f"{path}: line {line_of(text, '- name: default')}: receivers.0: ")


def test_a_bad_receiver_is_not_also_an_unknown_one(tmp_path: Path) -> None:
    _, problems = routing_problems(
        tmp_path, TREE.replace("pagerduty: {routing_key_env: PAGER_KEY}", "pagerdty: {}")
    )
    assert len(problems) == 1 and "pagerdty" in problems[0]


# owners.yaml


# (case, old text in OWNERS, new text, needle, words)
OWNER_MISTAKES: list[tuple[int, str, str, str, list[str]]] = [
    (
        1,
        "receivers: [mail, slack]",
        "receivers: [mail, slakc]",
        "slakc",
        ["unknown receiver 'slakc'", "did you mean 'slack'", "routing.yaml"],
    ),
    (2, "groups: ['payments-.*']", "groupz: ['payments-.*']", "groupz", ["unknown key"]),
    (3, "topics: ['payments\\..*']", "topics: ['payments(']", "payments(", ["invalid regular expression"]),
    (
        4,
        "  - name: search",
        "  - name: payments",
        "  - name: payments\n    receivers: [mail",
        ["duplicate team 'payments'"],
    ),
    (5, "  - name: search", "  - name: search team", "search team", ["team name"]),
]


@pytest.mark.parametrize(
    ("case", "old", "new", "needle", "words"), OWNER_MISTAKES, ids=[f"case{c[0]}" for c in OWNER_MISTAKES]
)
def test_owners_mistakes_name_file_and_line(
    tmp_path: Path, case: int, old: str, new: str, needle: str, words: list[str]
) -> None:
    owners = edited(old, new, OWNERS)
    _, problems = routing_problems(tmp_path, TREE, owners)
    path = tmp_path / "owners.yaml"
    line = line_of(owners, needle)
    found = [p for p in problems if p.startswith(f"{path}: line {line}: teams.")]
    assert len(found) == 1, (line, problems)
    for word in words:
        assert word in found[0], (word, found[0])


def test_both_files_bad_names_each_file(tmp_path: Path) -> None:
    routing_path = write(tmp_path, "routing.yaml", edited("receiver: mail\n", "receiver: mial\n"))
    owners_path = write(tmp_path, "owners.yaml", edited("[mail, slack]", "[mail, slakc]", OWNERS))
    with pytest.raises(ConfigError) as caught:
        load_routing(routing_path, owners_path)
    message = str(caught.value)
    assert f"{routing_path}: line " in message and f"{owners_path}: line " in message


def test_durations() -> None:
    assert [parse_duration(t) for t in ("30s", "5m", "2h", "1d", "1h30m", 0, "0")] == [
        30,
        300,
        7200,
        86400,
        5400,
        0,
        0,
    ]
    for bad in ("5", "1 h", "h", "", True, 5, "1.5h"):
        with pytest.raises(ValueError, match="bad duration"):
            parse_duration(bad)


# ---------------------------------------------------------------------------------------------
# `kafka-health routes`


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """A console wide enough that table cells do not wrap."""
    monkeypatch.setattr(cli_routes, "out", Console(width=200, soft_wrap=True))


def rows(output: str) -> dict[str, str]:
    """Table rows by their first cell (the receiver)."""
    found = {}
    for line in output.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃|]", line) if c.strip()]
        if cells:
            found[cells[0]] = line
    return found


def test_cli_test_critical_payments(wide: None) -> None:
    result = runner.invoke(cli_routes.app, ["test", "severity=critical", "topic=payments", "cluster=prod"])
    assert result.exit_code == 0, result.output
    assert "team: payments (from owners.yaml)" in result.output
    table = rows(result.output)
    assert "root/0" in table["oncall-pager"] and "10s" in table["oncall-pager"]
    assert "root/1" in table["ops-slack"]
    assert "owners:payments" in table["payments-slack"]
    assert "ops-email" not in table


def test_cli_test_one_replica_lost(wide: None) -> None:
    args = ["test", "severity=warning", "rule=PartitionReplicaLost", "team=kafka-platform", "page=false"]
    result = runner.invoke(cli_routes.app, args)
    assert result.exit_code == 0, result.output
    assert "team: kafka-platform (from its team label)" in result.output
    table = rows(result.output)
    assert set(table) >= {"ops-slack", "ops-email"} and "oncall-pager" not in table
    assert "after 2h to oncall-pager" in table["ops-slack"]


def test_cli_test_with_other_files(tmp_path: Path, wide: None) -> None:
    routing_path = write(tmp_path, "routing.yaml", TREE)
    write(tmp_path, "owners.yaml", OWNERS)
    result = runner.invoke(
        cli_routes.app, ["test", "severity=info", "group_id=search-x", "--routing", str(routing_path)]
    )
    assert result.exit_code == 0, result.output
    assert "team: search" in result.output and set(rows(result.output)) >= {"default", "mail", "slack"}


@pytest.mark.parametrize("bad", ["severity", "=critical", "sev-erity=critical"])
def test_cli_test_bad_label_argument(bad: str) -> None:
    result = runner.invoke(cli_routes.app, ["test", "severity=critical", bad])
    assert result.exit_code == 2
    assert f"{bad!r} is not LABEL=VALUE" in result.output


def test_cli_check_shipped_files() -> None:
    result = runner.invoke(cli_routes.app, ["check"])
    assert result.exit_code == 0, result.output
    assert "routing.yaml: OK (5 receiver(s), 5 route(s), 3 inhibit rule(s))" in result.output
    assert "owners.yaml: OK (1 team(s))" in result.output


def test_cli_check_reports_file_and_line_and_fails(tmp_path: Path) -> None:
    routing_path = write(tmp_path, "routing.yaml", edited("receiver: mail\n", "receiver: mial\n"))
    owners_path = write(tmp_path, "owners.yaml", edited("[mail, slack]", "[mail, slakc]", OWNERS))
    result = runner.invoke(
        cli_routes.app, ["check", "--routing", str(routing_path), "--owners", str(owners_path)]
    )
    assert result.exit_code == 2
    assert (
        f"{routing_path}: line {line_of(edited('receiver: mail', 'receiver: mial'), 'mial')}: "
        in result.output
    )
    assert f"{owners_path}: line " in result.output and "slakc" in result.output


def test_cli_test_with_a_bad_routing_file_fails(tmp_path: Path) -> None:
    routing_path = write(tmp_path, "routing.yaml", edited("receiver: mail\n", "receiver: mial\n"))
    result = runner.invoke(cli_routes.app, ["test", "severity=info", "--routing", str(routing_path)])
    assert result.exit_code == 2 and "mial" in result.output


def test_cli_show(wide: None) -> None:
    result = runner.invoke(cli_routes.app, ["show"])
    assert result.exit_code == 0, result.output
    assert "root {every alert} -> console" in result.output
    assert "root/0 {severity=critical, page!=false} -> oncall-pager" in result.output
    assert "escalate after 2h to oncall-pager" in result.output
    assert "team payments: receivers payments-slack" in result.output
    assert "inhibit: {rule=BrokerDown} mutes" in result.output


def test_console_inboxes_are_the_console_receivers_with_a_path(tmp_path: Path) -> None:
    text = TREE.replace("    console: {}", f"    console: {{path: {tmp_path / 'inbox.jsonl'}}}", 1)
    text = text.replace("receivers:\n", "receivers:\n  - name: log-only\n    console: {}\n", 1)
    routing_path = write(tmp_path, "routing.yaml", text)
    routing = load_routing(*routing_paths(AlertConfig(routing_file=routing_path)))
    assert console_inboxes(routing) == {"default": tmp_path / "inbox.jsonl"}
