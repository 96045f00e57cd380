"""Which ownership file: one answer (`core.owners.owners_file`) for alerting and the retention
button, and the shipped example grants nothing unless a configuration names it."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from monitor.act.guardrails import RaiseAsk, check_owner
from monitor.act.stage import build_service
from monitor.alert.config import load_routing, routing_paths
from monitor.core.clock import FakeClock
from monitor.core.owners import default_owners_path, owners_file
from monitor.core.settings import AlertConfig, Settings
from monitor.devtools.demo import demo_settings
from tests.fixtures.retention_requests import facts as topic_facts

pytestmark = pytest.mark.unit

SHIPPED_ROUTING = default_owners_path().with_name("routing.yaml")
OWNERS = "teams:\n  - name: search\n    topics: ['search\\..*']\n"


def _layout(tmp_path: Path) -> dict[str, Path]:
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(SHIPPED_ROUTING, alone / "routing.yaml")
    beside = tmp_path / "beside"
    beside.mkdir()
    shutil.copy(SHIPPED_ROUTING, beside / "routing.yaml")
    (beside / "owners.yaml").write_text(OWNERS)
    (tmp_path / "elsewhere.yaml").write_text(OWNERS)
    return {
        "alone": alone / "routing.yaml",
        "beside": beside / "routing.yaml",
        "owners": beside / "owners.yaml",
        "elsewhere": tmp_path / "elsewhere.yaml",
    }


CASES = [
    # (routing_file, owners_file, the ownership file, teams that own something)
    (None, None, None, ()),  # nothing configured: the shipped example grants nothing
    ("alone", None, None, ()),  # the case of the issue: no owners.yaml beside the routing file
    ("beside", None, "owners", ("search",)),
    ("beside", "elsewhere", "elsewhere", ("search",)),
    (None, "elsewhere", "elsewhere", ("search",)),
    ("shipped", None, None, ()),  # the shipped routing named: its neighbour is still the example
    ("alone", "shipped", "shipped", ("payments",)),  # named explicitly (as the demo does)
]


@pytest.mark.parametrize(("routing", "owners", "expected", "teams"), CASES)
def test_alerting_and_the_retention_button_read_the_same_ownership_file(
    tmp_path: Path, routing: str | None, owners: str | None, expected: str | None, teams: tuple[str, ...]
) -> None:
    paths = {**_layout(tmp_path), "shipped": default_owners_path()}
    if routing == "shipped":
        paths["shipped"], routing = default_owners_path(), None
        config = AlertConfig(routing_file=SHIPPED_ROUTING)
    else:
        config = AlertConfig(
            routing_file=paths[routing] if routing else None, owners_file=paths[owners] if owners else None
        )
    settings = Settings(alert=config)

    alerting = load_routing(*routing_paths(config))
    button = build_service(settings, lambda: None, FakeClock(), tmp_path / "repo")  # type: ignore[arg-type,return-value]

    assert owners_file(config) == (paths[expected] if expected else None)
    assert routing_paths(config)[1] == owners_file(config)
    assert tuple(t.name for t in alerting.teams) == teams
    assert tuple(t.name for t in button.owners().teams) == teams


@pytest.mark.parametrize("topic", ["payments", "payments.orders", "payments-refunds"])
def test_without_an_ownership_file_no_team_may_raise_a_topic_the_example_names(
    tmp_path: Path, topic: str
) -> None:
    config = AlertConfig(routing_file=_layout(tmp_path)["alone"])
    service = build_service(Settings(alert=config), lambda: None, FakeClock(), tmp_path / "repo")  # type: ignore[arg-type,return-value]
    owner = service.owners().topic_owner(topic)
    assert owner is None
    facts = replace(topic_facts(owner=None), topic=topic)
    check = check_owner(facts, RaiseAsk("alice", frozenset({"payments"}), {}, 1))
    assert not check.ok and "alert.owners_file" in check.message


def test_the_demo_names_the_example_owners_itself() -> None:
    demo = demo_settings(Settings())
    assert demo.alert.owners_file == default_owners_path()
    assert load_routing(*routing_paths(demo.alert)).team_for({"topic": "payments.orders"}) == "payments"
    configured = demo_settings(Settings(alert=AlertConfig(routing_file=SHIPPED_ROUTING)))
    assert configured.alert.owners_file is None, "a configured routing keeps the deployment's rule"
