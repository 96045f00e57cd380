"""Which Kafka release a cluster runs, learned from the API versions its brokers answer, and how
each surface says what that release cannot give (`monitor.core.kafka_features`, one wording).

The answers are those kafka-python keeps per release, copied from real brokers' ApiVersions."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import kafka.errors
import pytest
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
from markupsafe import escape

from monitor.core.kafka_features import (
    Feature,
    KafkaVersion,
    parse_version,
    unavailable_features,
    unavailable_text,
)
from monitor.core.settings import ClusterConfig
from monitor.expose.read.clusters import Unavailable, unavailable
from monitor.expose.read.collection import JobHealth
from monitor.expose.web.context import template_environment
from monitor.kafka.fake import FakeCluster
from monitor.kafka.pyclient import kafka_version_of
from monitor.kafka.registry import BrokerRegistryClient

T0 = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
NEWER = {**BROKER_API_VERSIONS[(4, 3)], 93: (0, 0), 94: (0, 0)}
"""A 4.4 broker: it is the first to list API key 93."""
UNKNOWN_NEWER = {**NEWER, 1: (4, 19), 120: (0, 2)}
"""A release newer than any known here: taken as the newest known."""

INFERRED = [
    # (case, answered API versions, release)
    ("2.8", BROKER_API_VERSIONS[(2, 8)], (2, 8)),
    ("3.3", BROKER_API_VERSIONS[(3, 3)], (3, 3)),
    ("3.9", BROKER_API_VERSIONS[(3, 9)], (3, 9)),
    ("4.0", BROKER_API_VERSIONS[(4, 0)], (4, 0)),
    ("4.1", BROKER_API_VERSIONS[(4, 1)], (4, 1)),
    ("4.4", NEWER, (4, 4)),
    ("unknown newer", UNKNOWN_NEWER, (4, 4)),
    ("nothing answered", {}, None),
    ("no known API", {18: (0, 3)}, None),
]


@pytest.mark.parametrize(("case", "answered", "release"), INFERRED, ids=[c[0] for c in INFERRED])
def test_the_release_is_inferred_from_the_answered_api_versions(
    case: str, answered: dict[int, tuple[int, int]], release: KafkaVersion | None
) -> None:
    assert kafka_version_of(answered) == release, case


def registry(answers: dict[int, Any]) -> BrokerRegistryClient:
    """A registry client whose kafka-python client answers each broker's ApiVersions from
    `answers` (an exception is raised as the broker's failure)."""

    def version_data(broker_id: int) -> SimpleNamespace:
        answer = answers[broker_id]
        if isinstance(answer, BaseException):
            raise answer
        return SimpleNamespace(api_versions=answer)

    client = BrokerRegistryClient(ClusterConfig(name="prod", bootstrap_servers=["127.0.0.1:9092"]))
    admin = SimpleNamespace(get_broker_version_data=version_data)
    client._connect = lambda: SimpleNamespace(admin=admin)  # type: ignore[method-assign,assignment,return-value]
    client.start()
    return client


CLUSTERS = [
    # (case, each broker's answer, the cluster's release)
    ("one release", {1: BROKER_API_VERSIONS[(3, 9)], 2: BROKER_API_VERSIONS[(3, 9)]}, (3, 9)),
    ("rolling upgrade: the oldest", {1: BROKER_API_VERSIONS[(4, 1)], 2: BROKER_API_VERSIONS[(3, 3)]}, (3, 3)),
    ("a broker not ready", {1: kafka.errors.NodeNotReadyError(1), 2: BROKER_API_VERSIONS[(2, 8)]}, (2, 8)),
    ("none answers", {1: kafka.errors.KafkaConnectionError("refused"), 2: TimeoutError()}, None),
    ("nothing answered", {1: None, 2: {}}, None),
    ("no broker", {}, None),
]


@pytest.mark.parametrize(("case", "answers", "release"), CLUSTERS, ids=[c[0] for c in CLUSTERS])
def test_the_cluster_runs_its_oldest_identified_release_and_a_failure_never_raises(
    case: str, answers: dict[int, Any], release: KafkaVersion | None
) -> None:
    client = registry(answers)
    try:
        assert client.kafka_version(sorted(answers)) == release, case
    finally:
        client.close()


def test_the_fake_says_its_release_as_the_real_cluster_does() -> None:
    fake = FakeCluster("prod", brokers=1)
    admin = fake.admin()
    admin.start()
    assert admin.describe_cluster().kafka_version == (4, 1)
    fake.kafka_version = None
    assert admin.describe_cluster().kafka_version is None


SHOWN = [
    # (stored release, features it cannot give)
    ("2.8", list(Feature)),
    ("3.3", [Feature.KIP848_GROUPS, Feature.SIMPLE_GROUP_TOMBSTONE, Feature.SHARE_GROUPS]),
    ("3.9", [Feature.KIP848_GROUPS, Feature.SIMPLE_GROUP_TOMBSTONE, Feature.SHARE_GROUPS]),
    ("4.0", [Feature.SHARE_GROUPS]),
    ("4.1", []),
    ("4.4", []),
    (None, []),
]


@pytest.mark.parametrize(("stored", "missing"), SHOWN)
def test_the_api_lists_what_the_release_cannot_give_in_the_one_wording(
    stored: str | None, missing: list[Feature]
) -> None:
    found = unavailable(stored)

    assert [u.feature for u in found] == [f.value for f in missing]
    if stored is not None:
        version = parse_version(stored)
        assert missing == unavailable_features(version)
        assert [u.text for u in found] == [unavailable_text(f, version) for f in missing]


def test_an_unavailable_feature_names_the_release_that_gives_it() -> None:
    assert unavailable("2.8")[1] == Unavailable(
        "log_dir_volume", "log directory volume size: not available on Kafka 2.8 (from 3.3)", "3.3"
    )


def collection_page(kafka: dict[str, Any], cluster: str = "prod") -> str:
    last = {"status": "ok", "started_at": T0, "duration_ms": 900, "counts": {}, "error": None}
    job = JobHealth(cluster, "metadata", last, T0, 60.0, 0.0)
    return template_environment().get_template("web/collection.html").render(
        clusters={cluster: [job]}, stale=[], failures=[], as_of=T0, now=T0, stale_intervals=3,
        title="Collection health", inbox_nav=False, generated_at="", kafka=kafka,
    )  # fmt: skip


@pytest.mark.parametrize(("stored", "missing"), SHOWN)
def test_the_collection_page_shows_the_release_beside_each_cluster(
    stored: str | None, missing: list[Feature]
) -> None:
    html = collection_page({"prod": (stored, unavailable(stored))})
    heading = next(line for line in html.splitlines() if "<h2>prod" in line)
    listed = [line for line in html.splitlines() if 'data-role="unavailable"' in line]

    assert ('data-role="kafka-version">Kafka ' + str(stored) in heading) is (stored is not None)
    assert html.count('data-role="kafka-version"') == (stored is not None)
    assert html.count("<li data-feature=") == len(missing)
    if missing:
        (line,) = listed
        version = parse_version(str(stored))
        assert all(str(escape(unavailable_text(f, version))) in line for f in missing)
    else:
        assert listed == []


@pytest.mark.parametrize("name", ["<script>alert(1)</script>", "a&b\"'", "prod\u202egnp."])
def test_a_cluster_name_beside_its_release_is_data(name: str) -> None:
    html = collection_page({name: ("2.8", unavailable("2.8"))}, cluster=name)

    assert "<script>alert" not in html and "Kafka 2.8" in html
    assert "\u202e" not in html


def test_a_broker_whose_release_stays_unknown_is_said_once_until_it_is_known(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers: dict[int, Any] = {
        1: kafka.errors.KafkaConnectionError("refused"),
        2: BROKER_API_VERSIONS[(3, 9)],
    }
    client = registry(answers)
    caplog.set_level(logging.INFO, logger="monitor.kafka.registry")
    try:

        def said() -> int:
            return sum("broker 1 is unknown" in r.getMessage() for r in caplog.records)

        for _ in range(3):
            assert client.kafka_version([1, 2]) == (3, 9)
        assert said() == 1
        answers[1] = BROKER_API_VERSIONS[(3, 3)]
        assert client.kafka_version([1, 2]) == (3, 3)
        answers[1] = TimeoutError()
        client.kafka_version([1, 2])
        assert said() == 2, "failing again after it was known is said again"
    finally:
        client.close()
