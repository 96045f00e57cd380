"""The big red retention button in a real headless Chromium, on the real cluster, PostgreSQL and a
real git repository, in the labelled development mode: the button on the topic page, its
confirmation with the preview's numbers, the instant raise applied, the audit on the page, and a
forged CSRF token refused with a clear message and nothing changed."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka.admin import ConfigResource, ResourceType
from sqlalchemy import Engine, text

from monitor.act.gitrepo import ConfigRepo
from monitor.act.service import RetentionService
from monitor.collect.stage import ClusterCollector
from monitor.core.clock import SystemClock
from monitor.core.settings import CollectConfig, IdentityConfig, NameFilter, RetentionConfig
from monitor.expose.web.app import create_app
from monitor.store.buffer import BufferedWriter
from monitor.store.partitions import ensure_partitions
from monitor.store.runs import RunRecorder
from tests.fixtures.browser import BrowserPage, serve_app
from tests.fixtures.kafka import KafkaTestHelper

pytestmark = pytest.mark.browser

GiB = 2**30
DAY_MS = 86_400_000
CLUSTER = "button-test"
GROUP = "ledger-writer"
POLICY = """
limits: {max_retention_ms: 30d, max_retention_bytes: 1TiB, max_multiple: 10, max_duration: 14d}
instant: {max_retention_ms: 7d, max_retention_bytes: 100GiB, max_multiple: 3, max_duration: 2d}
disk_usage_ceiling: 0.8
reviewers: [kafka-platform]
"""
OWNERS = "teams:\n  - name: payments\n    topics: ['payments-.*']\n"


@dataclass
class Site:
    url: str
    topic: str
    engine: Engine
    kafka: KafkaTestHelper

    @property
    def path(self) -> str:
        return f"/clusters/{CLUSTER}/topics/{self.topic}"

    def retention_ms(self) -> str:
        resource = ConfigResource(ResourceType.TOPIC, self.topic)
        entries = self.kafka.admin.describe_configs([resource])[resource].result(timeout=30)
        return str(entries["retention.ms"].value)


def _collect(kafka: KafkaTestHelper, engine: Engine, topic: str) -> None:
    """What the daemon's collector knows of the topic: its partitions and configs."""
    clock = SystemClock()
    writer = BufferedWriter(engine, 1_000_000, clock)
    collector = ClusterCollector(
        kafka.cluster_config(CLUSTER, topics=NameFilter(allow=[topic])),
        engine, clock, RunRecorder(engine, clock, writer=writer), writer, CollectConfig(),
    )  # fmt: skip
    collector.start()
    try:
        collector.run("metadata")
        collector.run("configs")
    finally:
        collector.stop()


def _evaluated(engine: Engine, kafka: KafkaTestHelper, topic: str) -> None:
    """What an evaluation would have said: 1000 B/s written, one group 5 h behind with 19 h
    until the data it has not read is deleted, and 1000 GiB disks with 100 GiB used."""
    now = datetime.now(UTC)
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO derived_cluster (cluster, evaluated_at) VALUES (:c, :t)"),
            {"c": CLUSTER, "t": now},
        )
        conn.execute(
            text("INSERT INTO derived_partition (cluster, topic, partition, evaluated_at, produce_bytes_rate)"
                 " VALUES (:c, :topic, 0, :t, 1000.0)"),
            {"c": CLUSTER, "topic": topic, "t": now},
        )  # fmt: skip
        conn.execute(
            text("INSERT INTO derived_group_partition (cluster, evaluated_at, group_id, topic, partition,"
                 " offset_lag, lag_seconds, time_until_data_loss_seconds, data_loss_margin_seconds,"
                 " data_loss_occurred) VALUES (:c, :t, :g, :topic, 0, 4200, 18000, 68400, 68400, false)"),
            {"c": CLUSTER, "t": now, "g": GROUP, "topic": topic},
        )  # fmt: skip
        for broker in kafka.broker_ids:
            conn.execute(
                text("INSERT INTO broker_disks (cluster, broker_id, log_dir, sampled_at, total_bytes,"
                     " usable_bytes) VALUES (:c, :b, '/data', :t, :total, :usable)"),
                {"c": CLUSTER, "b": broker, "t": now, "total": 1000 * GiB, "usable": 900 * GiB},
            )  # fmt: skip


@pytest.fixture(scope="module")
def site(kafka: KafkaTestHelper, engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    home = tmp_path_factory.mktemp("retention-page")
    (home / "policy.yaml").write_text(POLICY)
    (home / "owners.yaml").write_text(OWNERS)
    with engine.begin() as conn:
        ensure_partitions(conn, datetime.now(UTC), 30)
    topic = kafka.create_topic(
        f"payments-{uuid.uuid4().hex[:8]}", replication_factor=3, config={"retention.ms": str(DAY_MS)}
    )
    _collect(kafka, engine, topic)
    _evaluated(engine, kafka, topic)
    service = RetentionService(
        RetentionConfig(retry_seconds=1, verify_seconds=10),
        [kafka.cluster_config(CLUSTER, request_timeout_seconds=5)],
        lambda: engine, SystemClock(), ConfigRepo(home / "configs"),
        home / "policy.yaml", home / "owners.yaml",
    )  # fmt: skip
    service.start()
    identity = IdentityConfig(mode="development", development_user="dana", development_teams=["payments"])
    app = create_app(engine, stale_after=timedelta(minutes=5), retention=service, identity=identity)
    try:
        with serve_app(app) as url:
            yield Site(url, topic, engine, kafka)
    finally:
        service.stop()


def test_raise_through_the_button_confirmation_and_audit(browser_page: BrowserPage, site: Site) -> None:
    web, page = browser_page, browser_page.page
    web.base_url = site.url
    web.goto(site.path)
    assert "Development mode" in page.locator("[data-role=development-mode]").inner_text()
    assert "dana" in page.locator("[data-role=identity]").inner_text()
    assert page.locator("[data-role=current-ms]").inner_text() == "now 1 d"
    assert page.locator("#retention-audit-empty").is_visible()
    web.shot("button", "[data-role=raise]", "[data-role=development-mode]", "[data-role=raise-form]")
    button = page.locator("[data-role=raise]")
    assert button.is_enabled() and "Raise retention" in button.inner_text()

    page.fill("#retention_ms_value", "2")  # days, the default unit; for 1 day, the default duration
    page.fill("#reason", "ledger-writer is 5 h behind after the outage")
    with page.expect_navigation():
        button.click()

    # The confirmation: nothing changed yet; current -> new, the lagging group, the disk cost, the tier.
    assert site.retention_ms() == str(DAY_MS)
    assert page.locator("h1").inner_text() == f"Confirm: raise retention of {site.topic}"
    change = page.locator("#change tr[data-config='retention.ms']")
    assert change.locator("[data-role=current]").inner_text() == "1 d"
    assert change.locator("[data-role=new]").inner_text() == "2 d"
    assert page.locator("#tier").get_attribute("data-tier") == "instant"
    assert "applied as soon as you confirm" in page.locator("#tier").inner_text()
    lagging = page.locator(f"#lagging tr[data-group='{GROUP}']")
    assert re.search(r"\b19 h\b", lagging.locator("[data-role=time-until-loss]").inner_text()), (
        lagging.inner_text()
    )
    assert "4,200" in lagging.inner_text() or "4200" in lagging.inner_text(), lagging.inner_text()
    # Stopped: its margin is the 19 h until the deletion, past the 6 h warning tier.
    assert lagging.locator("[data-role=time-until-loss] span").first.get_attribute("class") == "ok"
    disk = page.locator("#disk tr[data-broker]")
    assert disk.count() == 3
    for row in disk.all():  # 100 GiB used + 1000 B/s for one more day (82.4 MiB) of 1000 GiB
        assert row.locator("[data-role=projected]").inner_text() == "10%", row.inner_text()
        assert "80%" in row.inner_text() and "82.4 MiB" in row.inner_text(), row.inner_text()
    assert page.locator("#checks tr[data-rule=disk_headroom]").inner_text().count("under 80%") == 1
    assert page.locator("[data-role=refusal]").count() == 0
    assert "Development mode" in page.locator("[data-role=development-mode]").inner_text()
    web.shot("confirmation", "#change", "#tier", "#lagging", "#disk", "[data-role=confirm]")

    with page.expect_navigation():
        page.locator("[data-role=confirm]").click()

    # Back on the topic page: applied at once (instant tier), in Kafka and in the audit.
    assert page.url.endswith(site.path + "#retention-panel"), page.url
    flash = page.locator("[data-role=flash]")
    assert flash.get_attribute("data-kind") == "ok"
    assert re.search(r"Request \d+ is applied-pending-review: retention\.ms 1 d -> 2 d", flash.inner_text())
    opened = page.locator("[data-role=open-request]")
    assert opened.get_attribute("data-state") == "pending_review"
    assert "applied-pending-review" in opened.locator("[data-role=request-state]").inner_text()
    assert site.retention_ms() == str(2 * DAY_MS)
    actions = [r.get_attribute("data-action") for r in page.locator("#retention-audit tr[data-action]").all()]
    assert actions == ["verified", "applied", "committed", "approved", "requested"]  # newest first
    requested = page.locator("#retention-audit tr[data-action=requested]").inner_text()
    assert "dana" in requested and "retention.ms 1 d → 2 d" in requested and "via development" in requested
    web.shot("applied", "[data-role=flash]", "[data-role=open-request]", "#retention-audit")

    # /retention lists it under pending review, with what dana (of the owning team) may do.
    web.goto("/retention")
    listed = page.locator("#section-review tr[data-request]")
    assert listed.count() == 1 and site.topic in listed.inner_text()
    assert [f.get_attribute("data-action") for f in listed.locator("form").all()] == ["revert", "extend"]
    assert page.locator("#section-awaiting tr[data-request]").count() == 0
    web.shot("requests", "#section-awaiting", "#section-review tr[data-request]")

    # The flash is shown once.
    web.goto(site.path)
    assert page.locator("[data-role=flash]").count() == 0

    # A forged CSRF token: refused, said so, nothing changed.
    revert = page.locator("[data-role=open-request] form[data-action=revert]")
    revert.locator("input[name=csrf_token]").evaluate("input => { input.value = '1700000000.forged' }")
    web.expect_problem("HTTP 403")  # the answer, and Chromium's console line about it
    web.expect_problem("status of 403")
    with page.expect_navigation():
        revert.locator("button").click()
    assert page.locator("h1").inner_text() == "Form expired or forged"
    message = page.locator("[data-role=error]").inner_text()
    assert "CSRF token is missing or invalid" in message and "nothing was changed" in message
    assert site.retention_ms() == str(2 * DAY_MS)

    # The real token reverts it.
    web.goto(site.path)
    with page.expect_navigation():
        page.locator("[data-role=open-request] form[data-action=revert] button").click()
    assert "reverted" in page.locator("[data-role=flash]").inner_text()
    assert site.retention_ms() == str(DAY_MS)
    assert page.locator("[data-role=raise]").is_visible()
