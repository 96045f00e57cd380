"""Share groups (KIP-932) on a real Kafka 4.4.0 node with real Java share consumers: the
share-groups job lists and describes them, reads their start offsets and the broker's lag
(KIP-1226), stores them with history, and the API serves them."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from rich.console import Console
from sqlalchemy import Engine
from typer.testing import CliRunner

from monitor.cli import share_groups as cli_share_groups
from monitor.cli.main import app as cli
from monitor.collect.stage import ClusterCollector
from monitor.core.settings import MetricsConfig
from monitor.expose.metrics.prometheus import StateCollector
from monitor.expose.web.app import create_app
from tests.fixtures.kafka import KafkaTestHelper
from tests.fixtures.share import ShareConsumers, collected, share_collector
from tests.fixtures.sql import rows

CLUSTER = "share"


def _cells(table: str) -> list[list[str]]:
    """The text of each data row's cells in an HTML table."""
    found = []
    for tr in re.findall(r"<tr>(.*?)</tr>", table, re.S):
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        if cells:
            found.append(cells)
    return found


@pytest.fixture
def collector(share_kafka: KafkaTestHelper, engine: Engine) -> Iterator[ClusterCollector]:
    with share_collector(share_kafka, engine, CLUSTER, "sg-.*") as made:
        yield made


def test_share_groups_collected_stored_and_served(
    monkeypatch: pytest.MonkeyPatch,
    db_url: str,
    share_kafka: KafkaTestHelper,
    share_consumers: ShareConsumers,
    collector: ClusterCollector,
    engine: Engine,
) -> None:
    topic = share_kafka.create_topic(partitions=2)
    keeping, stopping, ignored = f"sg-keeps-{topic}", f"sg-stops-{topic}", f"other-{topic}"
    for group in (keeping, stopping, ignored):
        share_consumers.from_earliest(group)
    share_kafka.produce(topic, [b"a"] * 30, partition=0)
    share_kafka.produce(topic, [b"b"] * 10, partition=1)
    collector.run("metadata")
    share_consumers.start(keeping, topic)
    stopped = share_consumers.start(stopping, topic)
    share_consumers.start(ignored, topic)

    def caught_up(group: str, end: int) -> bool:
        # The start offset the share coordinator keeps may trail acknowledged records for a while
        # (it moves at its next state write); the broker's lag counts them at once.
        found = collected(collector, engine, group)
        have = [(p, r["end_offset"], r["lag"]) for p, r in sorted(found.items())]
        return have == [(0, end, 0), (1, 10, 0)]

    both = lambda: caught_up(keeping, 30) and caught_up(stopping, 30)  # noqa: E731
    share_kafka.wait_for(both, 90, "both groups to read everything")
    share_consumers.stop(stopped)
    share_kafka.produce(topic, [b"c"] * 7, partition=0)

    def lags() -> dict[int, dict[str, Any]] | None:
        found = collected(collector, engine, stopping)
        return found if found[0]["end_offset"] == 37 else None

    stalled = share_kafka.wait_for(lags, 60, "the new records to be listed")
    assert (stalled[0]["lag"], stalled[0]["lag_method"]) == (7, "broker")
    assert stalled[0]["start_offset"] is not None and stalled[0]["start_offset"] <= 30
    share_kafka.wait_for(
        lambda: caught_up(keeping, 37), 60, "the group that keeps up to read the new records"
    )

    (run,) = rows(
        engine,
        "SELECT status, counts FROM collection_runs WHERE cluster = :c AND job = 'share_groups' "
        "ORDER BY id DESC LIMIT 1",
        c=CLUSTER,
    )
    assert run["status"] == "ok" and run["counts"]["share_groups"] == 2  # the group filter holds
    history = rows(
        engine,
        "SELECT count(DISTINCT sampled_at) AS n FROM share_group_offsets WHERE cluster = :c AND group_id = :g",
        c=CLUSTER,
        g=stopping,
    )
    assert history[0]["n"] >= 2  # a sample per run, not a row overwritten
    states = rows(engine, "SELECT group_id, state FROM share_group_state WHERE cluster = :c", c=CLUSTER)
    assert {s["group_id"] for s in states} == {keeping, stopping}

    app = create_app(engine, stale_after=timedelta(minutes=5))
    with TestClient(app) as client:
        listing = client.get(f"/api/v1/clusters/{CLUSTER}/share-groups").json()
        assert listing["available"] is True and listing["total"] == 2
        assert listing["items"][0]["group_id"] == stopping  # most records waiting first
        detail = client.get(f"/api/v1/clusters/{CLUSTER}/share-groups/{stopping}").json()
        assert [(p["partition"], p["lag"], p["lag_method"]) for p in detail["share_partitions"]] == [
            (0, 7, "broker"),
            (1, 0, "broker"),
        ]
        kept = client.get(f"/api/v1/clusters/{CLUSTER}/share-groups/{keeping}").json()
        assert kept["members"] == 1 and kept["member_list"][0]["assignment"] == [f"{topic}:0", f"{topic}:1"]
        missing = client.get(f"/api/v1/clusters/{CLUSTER}/share-groups/nope")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "share_group_not_found"

        # The pages: the list (most records waiting first), one group, the cluster page's section.
        page = client.get(f"/clusters/{CLUSTER}/share-groups")
        assert page.status_code == 200 and "content-security-policy" in page.headers
        listed = page.text[page.text.index('id="share-groups"') :]
        assert listed.index(f"/share-groups/{stopping}") < listed.index(f"/share-groups/{keeping}")
        assert "the broker&#39;s count" in listed or "the broker's count" in listed
        assert ignored not in page.text  # the group filter holds here too
        searched = client.get(f"/clusters/{CLUSTER}/share-groups", params={"q": "sg-keeps"}).text
        assert f"/share-groups/{keeping}" in searched and f"/share-groups/{stopping}" not in searched
        one = client.get(f"/clusters/{CLUSTER}/share-groups/{stopping}")
        assert one.status_code == 200, one.text
        partitions = one.text[one.text.index('id="share-partitions"') : one.text.index('id="share-members"')]
        # topic, partition, end offset, records waiting (the start offset may move meanwhile)
        assert [[c[0], c[1], c[3], c[4]] for c in _cells(partitions)] == [
            [topic, "0", "37", "7"],
            [topic, "1", "10", "0"],
        ]
        kept_page = client.get(f"/clusters/{CLUSTER}/share-groups/{keeping}").text
        assert f"{topic}:0, {topic}:1" in kept_page  # its member's assignment
        cluster_page = client.get(f"/clusters/{CLUSTER}").text
        assert 'data-role="all-share-groups"' in cluster_page and f"/share-groups/{stopping}" in cluster_page
        for path, status, says in (
            (f"/clusters/{CLUSTER}/share-groups/nope", 404, "No share group &#39;nope&#39;"),
            ("/clusters/nope/share-groups", 404, "No cluster &#39;nope&#39;"),
            (f"/clusters/{CLUSTER}/share-groups?offset=-1", 422, "offset"),
        ):
            answer = client.get(path)
            assert answer.status_code == status and says in answer.text, (path, answer.text[:500])

    families = {f.name: f for f in StateCollector(engine, MetricsConfig(), ()).read().families}
    waiting = {s.labels["group"]: s.value for s in families["kafka_health_share_group_lag"].samples}
    assert waiting == {stopping: 7, keeping: 0}
    members = {s.labels["group"]: s.value for s in families["kafka_health_share_group_members"].samples}
    assert members[keeping] == 1

    monkeypatch.setenv("DATABASE_URL", db_url)
    for name in [n for n in os.environ if n.startswith("KAFKA_HEALTH_TEST_")]:
        monkeypatch.delenv(name)  # the test rig's ports, not settings of the monitor
    monkeypatch.setattr(cli_share_groups, "out", Console(width=250, soft_wrap=True, no_color=True))
    shown = CliRunner().invoke(cli, ["share-groups", "--cluster", CLUSTER])
    assert shown.exit_code == 0, shown.output
    assert stopping in shown.output and keeping in shown.output
    one = CliRunner().invoke(cli, ["share-groups", stopping, "--json"])
    assert one.exit_code == 0, one.output
    assert '"lag": 7' in one.output
