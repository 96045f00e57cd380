"""The dashboard pages over synthetic rows: the overview, a cluster, a topic and a consumer group
render what an on-call engineer must see first (a down broker, a lagging group's lag, lost
replicas, the data-loss margin), say how fresh the data is, and answer 404 and 422 pages
for unknown names and a bad window. The data-loss margin is coloured as TimeUntilDataLoss
pages: `billing` (stopped, its oldest unread message deleted in 15 min) is red; `mirror` keeps
up on a topic that keeps a minute of data (deleted in 50 s, but it reads it first) and is
green, as the rule is quiet about it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Connection, Engine, text

from monitor.core.clock import FakeClock
from monitor.core.kafka_features import Feature, unavailable_text
from monitor.expose.web.app import create_app
from monitor.store.partitions import ensure_partitions

T = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
NOW = T + timedelta(seconds=20)
STALE = timedelta(minutes=5)


def _insert(conn: Connection, table: str, rows: list[dict[str, object]]) -> None:
    for row in rows:
        columns = ", ".join(row)
        values = ", ".join(f":{k}" for k in row)
        conn.execute(text(f"INSERT INTO {table} ({columns}) VALUES ({values})"), row)


def _metadata(conn: Connection) -> None:
    _insert(
        conn,
        "clusters",
        [
            {
                "name": "prod",
                "bootstrap": "k:9092",
                "controller_id": 1,
                "first_seen": T,
                "last_seen": T,
                "kafka_version": "2.8",
            },
            {"name": "fresh", "bootstrap": "f:9092", "controller_id": 1, "first_seen": T, "last_seen": T},
        ],
    )
    _insert(
        conn,
        "brokers",
        [
            {"cluster": "prod", "broker_id": b, "host": f"kafka-{b}", "port": 9092, "rack": f"r{b}",
             "first_seen": T, "last_seen": T, "up": b != 3}
            for b in (1, 2, 3)
        ],
    )  # fmt: skip
    _insert(
        conn,
        "topics",
        [
            {"cluster": "prod", "topic": t, "partition_count": n, "replication_factor": 3, "internal": False,
             "first_seen": T, "last_seen": T}
            for t, n in (("orders", 2), ("payments", 1))
        ],
    )  # fmt: skip
    _insert(
        conn,
        "partitions",
        [
            {"cluster": "prod", "topic": "orders", "partition": 0, "leader": 1, "replicas": [1, 2, 3],
             "isr": [1, 2], "updated_at": T},
            {"cluster": "prod", "topic": "orders", "partition": 1, "leader": 2, "replicas": [2, 3, 1],
             "isr": [2, 1], "updated_at": T},
            {"cluster": "prod", "topic": "payments", "partition": 0, "leader": None, "replicas": [3, 1, 2],
             "isr": [3], "updated_at": T},
        ],
    )  # fmt: skip
    _insert(
        conn,
        "topic_configs",
        [
            {"cluster": "prod", "topic": "orders", "name": n, "value": v, "source": "topic", "sensitive": False,
             "valid_from": T - timedelta(days=1), "valid_to": None}
            for n, v in (("retention.ms", "7200000"), ("retention.bytes", "1073741824"), ("cleanup.policy", "delete"))
        ],
    )  # fmt: skip
    _insert(
        conn,
        "group_members",
        [
            {"cluster": "prod", "group_id": "billing", "member_id": "m-1", "client_id": "billing-app",
             "host": "/10.0.0.7", "group_instance_id": None, "assignment": ["orders:0", "orders:1"], "updated_at": T},
        ],
    )  # fmt: skip


def _runs(conn: Connection) -> None:
    _insert(
        conn,
        "collection_runs",
        [
            {"cluster": "prod", "job": "metadata", "instance": "i1", "started_at": T, "finished_at": T,
             "duration_ms": 40, "status": "ok", "error": None},
            {"cluster": "ghost", "job": "metadata", "instance": "i1", "started_at": T - timedelta(minutes=1),
             "finished_at": T, "duration_ms": 3000, "status": "failed", "error": "old failure"},
            {"cluster": "ghost", "job": "metadata", "instance": "i1", "started_at": T, "finished_at": T,
             "duration_ms": 3000, "status": "failed", "error": "cannot read the cluster metadata of ghost"},
        ],
    )  # fmt: skip


def _evaluation(conn: Connection) -> None:
    _insert(
        conn,
        "derived_cluster",
        [{"cluster": "prod", "evaluated_at": T, "brokers": 3, "brokers_down": 1, "partitions": 3,
          "offline_partitions": 1, "under_replicated_partitions": 3, "under_min_isr_partitions": 1,
          "max_leader_imbalance": 1.5, "collection_age_seconds": 5, "unreachable": False}],
    )  # fmt: skip
    _insert(
        conn,
        "derived_broker",
        [
            {"cluster": "prod", "evaluated_at": T, "broker_id": b, "up": b != 3, "down": b == 3, "leaders": n,
             "fair_share_leaders": 1.5, "leader_imbalance": n / 1.5, "non_preferred_leaders": 0, "replicas": 3,
             "disk_total_bytes": 1000, "disk_usable_bytes": u, "disk_used_ratio": None if u is None else 1 - u / 1000}
            for b, n, u in ((1, 1, 600), (2, 1, 40), (3, 0, None))
        ],
    )  # fmt: skip
    _insert(
        conn,
        "derived_topic",
        [
            {"cluster": "prod", "evaluated_at": T, "topic": "orders", "partitions": 2, "size_bytes": 2048,
             "max_size_ratio": 0.5, "min_time_coverage_seconds": 600, "retention_ms": 7200000,
             "retention_bytes": 1073741824, "retention_shortfall_seconds": 6600, "max_replicas_lost": 1,
             "under_replicated_partitions": 2, "under_min_isr_partitions": 0, "offline_partitions": 0,
             "min_time_until_data_loss_seconds": 50, "min_data_loss_margin_seconds": 900},
            {"cluster": "prod", "evaluated_at": T, "topic": "payments", "partitions": 1, "size_bytes": 10,
             "max_replicas_lost": 2, "under_replicated_partitions": 1, "under_min_isr_partitions": 1,
             "offline_partitions": 1},
        ],
    )  # fmt: skip
    _insert(
        conn,
        "derived_partition",
        [
            {"cluster": "prod", "evaluated_at": T, "topic": "orders", "partition": p, "size_bytes": 1024,
             "retention_bytes": 1073741824, "retention_ms": 7200000, "size_ratio": 0.5,
             "time_coverage_seconds": 600, "retention_shortfall_seconds": 6600, "leader": p + 1,
             "replication_factor": 3, "isr": 2, "min_insync_replicas": 2, "replicas_lost": 1,
             "under_replicated": True, "under_min_isr": False, "offline": False, "non_preferred_leader": False}
            for p in (0, 1)
        ]
        + [{"cluster": "prod", "evaluated_at": T, "topic": "payments", "partition": 0, "leader": None,
            "replication_factor": 3, "isr": 1, "min_insync_replicas": 2, "replicas_lost": 2,
            "under_replicated": True, "under_min_isr": True, "offline": True}],
    )  # fmt: skip
    lag = {"offset_lag": 4321, "lag_seconds": 1250.0, "append_lag_seconds": 1100.0, "commit_lag_seconds": 40.0,
           "time_since_last_commit_seconds": 700.0, "time_until_data_loss_seconds": 900.0,
           "data_loss_margin_seconds": 900.0, "data_loss_occurred": False}  # fmt: skip
    keeps_up = {"offset_lag": 12, "lag_seconds": 2.0, "time_since_last_commit_seconds": 3.0,
                "time_until_data_loss_seconds": 50.0, "data_loss_margin_seconds": None,
                "data_loss_occurred": False}  # fmt: skip
    caught_up = {"offset_lag": 0, "lag_seconds": 0.0, "data_loss_occurred": False}
    _insert(
        conn,
        "derived_group",
        [
            {"cluster": "prod", "evaluated_at": T, "group_id": "billing", "topics": 1, "partitions": 2, **lag,
             "max_offset_lag": 4000, "max_lag_seconds": 1250.0, "status": "ERR", "group_state": "Stable",
             "members": 1, "lag_growing": True, "consume_rate": 3.0, "produce_rate": 5.0, "catching_up": False,
             "consumers_needed": 2},
            {"cluster": "prod", "evaluated_at": T, "group_id": "audit", "topics": 1, "partitions": 2, **caught_up,
             "status": "OK", "group_state": "Stable", "members": 2, "lag_growing": False},
            {"cluster": "prod", "evaluated_at": T, "group_id": "mirror", "topics": 1, "partitions": 1,
             **keeps_up, "max_offset_lag": 12, "max_lag_seconds": 2.0, "status": "OK", "group_state": "Stable",
             "members": 1, "lag_growing": False},
        ]
        + [  # billing's history: one evaluation a minute over the last 30 minutes
            {"cluster": "prod", "evaluated_at": T - timedelta(minutes=m), "group_id": "billing",
             "offset_lag": 4321 - 100 * m, "lag_seconds": 1250.0 - 30 * m, "status": "WARN"}
            for m in range(1, 31)
        ],
    )  # fmt: skip
    _insert(
        conn,
        "derived_group_topic",
        [
            {"cluster": "prod", "evaluated_at": T, "group_id": "billing", "topic": "orders", "partitions": 2,
             **lag, "max_lag_seconds": 1250.0, "status": "STOP", "group_state": "Stable", "members": 1},
            {"cluster": "prod", "evaluated_at": T, "group_id": "audit", "topic": "orders", "partitions": 2,
             **caught_up, "status": "OK", "group_state": "Stable", "members": 2},
            {"cluster": "prod", "evaluated_at": T, "group_id": "mirror", "topic": "orders", "partitions": 1,
             **keeps_up, "max_lag_seconds": 2.0, "status": "OK", "group_state": "Stable", "members": 1},
        ],
    )  # fmt: skip
    _insert(
        conn,
        "derived_group_partition",
        [
            {"cluster": "prod", "evaluated_at": T, "group_id": "billing", "topic": "orders", "partition": 0,
             "committed_offset": 100, "end_offset": 4100, "offset_lag": 4000, "lag_seconds": 1250.0,
             "lag_seconds_method": "exact", "time_until_data_loss_seconds": 900.0, "data_loss_limit": "time",
             "data_loss_margin_seconds": 900.0, "data_loss_occurred": False, "status": "STOP"},
            {"cluster": "prod", "evaluated_at": T, "group_id": "billing", "topic": "orders", "partition": 1,
             "committed_offset": 500, "end_offset": 821, "offset_lag": 321, "lag_seconds": 300.0,
             "lag_seconds_method": "interpolated", "lag_seconds_error": 12.0, "data_loss_occurred": False,
             "status": "OK"},
            {"cluster": "prod", "evaluated_at": T, "group_id": "audit", "topic": "orders", "partition": 0,
             "committed_offset": 4100, "end_offset": 4100, **caught_up, "status": "OK"},
            {"cluster": "prod", "evaluated_at": T, "group_id": "mirror", "topic": "orders", "partition": 1,
             "committed_offset": 809, "end_offset": 821, **keeps_up, "lag_seconds_method": "exact",
             "time_to_read_seconds": 2.4, "data_loss_limit": "size", "status": "OK"},
        ],
    )  # fmt: skip
    _insert(
        conn,
        "alerts",
        [
            {"fingerprint": "fp-billing", "rule": "TimeUntilDataLoss", "cluster": "prod", "entity": "group_partition",
             "entity_key": "prod/billing/orders/0",
             "labels": json.dumps({"cluster": "prod", "group_id": "billing", "topic": "orders"}),
             "severity": "critical", "state": "firing", "summary": "billing loses data on orders-0 in 15 min",
             "description": "", "pending_since": T, "starts_at": T, "updated_at": T},
        ],
    )  # fmt: skip


@pytest.fixture(scope="module")
def client(engine: Engine) -> Iterator[TestClient]:
    with engine.begin() as conn:
        ensure_partitions(conn, T - timedelta(days=1), ahead_days=2)
        _metadata(conn)
        _runs(conn)
        _evaluation(conn)
    app = create_app(engine, stale_after=STALE, clock=FakeClock(NOW))
    with TestClient(app) as test_client:
        yield test_client


def test_overview_marks_the_down_broker_and_the_counts(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    html = page.text
    assert 'data-cluster="prod"' in html and "card-bad" in html
    assert "2 / 3" in html and "down: 3" in html
    assert "Data as of 2026-06-01 12:00:00 UTC (20 s ago)" in html
    assert "No evaluation yet" in html  # the cluster "fresh" was never evaluated
    assert html.count("<svg") == 2  # leader balance and disk of prod; none for the unevaluated cluster
    assert "Partition leaders per broker, prod" in html and "broker 3 (down)" in html
    assert 'id="runs"' in html


def test_overview_shows_a_cluster_never_reached_first(client: TestClient) -> None:
    html = client.get("/").text
    ghost = html.index('data-cluster="ghost"')
    assert ghost < html.index('data-cluster="prod"')
    card = html[ghost : html.index("</section>", ghost)]
    assert "Never reached" in card and "cannot read the cluster metadata of ghost" in card
    assert "old failure" not in card


def test_cluster_page_lists_brokers_topics_and_groups_worst_first(client: TestClient) -> None:
    html = client.get("/clusters/prod").text
    brokers = html[html.index('id="brokers"') : html.index('id="topics"')]
    assert 'data-broker="3"' in brokers and 'pill-bad">down' in brokers
    assert "96%" in brokers  # broker 2: 40 of 1000 bytes free
    topics = html[html.index('id="topics"') : html.index('id="groups"')]
    assert topics.index("payments") < topics.index("orders"), "the offline topic comes first"
    assert "1 h 50 min short" in topics
    groups = html[html.index('id="groups"') :]
    assert groups.index("billing") < groups.index("audit")
    assert "4,321" in groups and "STOP" in groups and "15 min" in groups
    assert "billing loses data on orders-0 in 15 min" in html


def test_the_cluster_page_says_its_kafka_release_once_with_what_it_cannot_give(client: TestClient) -> None:
    prod = unescape(client.get("/clusters/prod").text)
    assert prod.count('data-role="kafka-version">Kafka 2.8<') == 1
    for feature in Feature:
        assert prod.count(unavailable_text(feature, (2, 8))) == 1, feature
    assert "log directory volume size: not available on Kafka 2.8 (from 3.3)" in prod
    fresh = client.get("/clusters/fresh").text  # never identified: nothing extra
    assert 'data-role="kafka-version"' not in fresh and 'data-role="unavailable"' not in fresh
    collection = unescape(client.get("/collection").text)
    heading = collection[collection.index('<section class="cluster-jobs" data-cluster="prod">') :]
    assert heading[: heading.index("</h2>")].endswith('data-role="kafka-version">Kafka 2.8</span>')
    assert collection.count(unavailable_text(Feature.LOG_DIR_VOLUME, (2, 8))) == 1


def _row(html: str, table: str, name: str) -> str:
    """The `<tr ...>` of `name` in the table whose id is `table`, its opening tag included."""
    body = html[html.index(f'id="{table}"') :]
    body = body[: body.index("</table>")]
    start = body.rindex("<tr", 0, body.index(f">{name}<"))
    return body[start : body.index("</tr>", start)]


def test_the_data_loss_margin_is_coloured_as_the_rule_pages(client: TestClient) -> None:
    # billing is stopped with 15 min left: TimeUntilDataLoss pages (critical under 30 min), the
    # page is red. mirror's oldest unread message is deleted in 50 s but it reads it in 2 s: the
    # rule is quiet, the page green, the 50 s shown only as a hint.
    cluster = client.get("/clusters/prod").text
    billing, mirror = _row(cluster, "groups", "billing"), _row(cluster, "groups", "mirror")
    assert 'class="row-bad"' in billing and '<span class="bad">15 min</span>' in billing
    assert 'class="row-ok"' in mirror and "not at risk" in mirror and 'class="bad"' not in mirror
    assert "the oldest unread message is deleted in 50 s; the group reads it first" in unescape(mirror)
    topic = client.get("/clusters/prod/topics/orders").text
    assert 'class="row-ok"' in _row(topic, "topic-groups", "mirror")
    group = client.get("/clusters/prod/groups/mirror").text
    assert 'data-role="data-loss" class="ok"' in group and "not at risk" in group
    assert "data-loss margin" in group
    stopped = client.get("/clusters/prod/groups/billing").text
    assert 'data-role="data-loss" class="bad"' in stopped


def test_the_api_shows_the_data_loss_margin(client: TestClient) -> None:
    mirror = client.get("/api/v1/clusters/prod/groups/mirror").json()
    assert mirror["group"]["time_until_data_loss_seconds"] == 50.0
    assert mirror["group"]["data_loss_margin_seconds"] is None, "it reads its backlog first"
    (partition,) = client.get("/api/v1/clusters/prod/groups/mirror/lag").json()["items"]
    assert (partition["time_to_read_seconds"], partition["data_loss_margin_seconds"]) == (2.4, None)
    billing = client.get("/api/v1/clusters/prod/groups/billing").json()
    assert billing["group"]["data_loss_margin_seconds"] == 900.0
    orders = client.get("/api/v1/clusters/prod/topics/orders").json()
    assert (orders["topic"]["min_time_until_data_loss_seconds"], orders["topic"]["min_data_loss_margin_seconds"]) == (
        50.0, 900.0,
    )  # fmt: skip
    margins = {c["group_id"]: c["data_loss_margin_seconds"] for c in orders["consumers"]}
    assert margins == {"billing": 900.0, "audit": None, "mirror": None}
    by_partition = {p["partition"]: p["min_data_loss_margin_seconds"] for p in orders["partitions"]["items"]}
    assert by_partition == {0: 900.0, 1: None}


def test_topic_page_shows_lost_replicas_retention_and_lagging_groups(client: TestClient) -> None:
    html = client.get("/clusters/prod/topics/orders").text
    assert '<span class="replica lost" title="replica on broker 3 is out of sync">3</span>' in html
    assert "Retention shortfall: 1 h 50 min" in html
    assert "1.0 GiB per partition" in html and "2 h" in html
    assert "Request more retention" in html and "disabled" in html
    groups = html[html.index('id="topic-groups"') : html.index('id="partitions"')]
    assert groups.index("billing") < groups.index("audit")
    assert "15 min" in groups and "(time limit)" in groups
    offline = client.get("/clusters/prod/topics/payments").text
    assert 'pill-bad">offline' in offline and "under min ISR 2" in offline


def test_group_page_shows_status_lag_members_and_history(client: TestClient) -> None:
    html = client.get("/clusters/prod/groups/billing").text
    assert 'data-role="status"' in html and "ERR" in html and "STOP" in html
    assert "<strong>4,321</strong>" in html and "growing" in html
    assert "21 min" in html  # 1250 s of lag in seconds
    assert "interpolated on 1 of 2 lagging partitions, error up to 12 s, exact elsewhere" in html
    assert "billing-app on /10.0.0.7" in html and "orders:0, orders:1" in html
    assert "31 evaluations in the window" in html  # 30 in the history and the newest
    # What to do: the forecast and the consumer advice, the sentences the notifications say.
    forecast = "not catching up: reads 3.0/s, 5.0/s arrive; retention deletes unread data in 15 min"
    assert f'data-role="catch-up">{forecast}</dd>' in html
    advice = "2 consumers (now 1) would read the backlog before retention deletes it"
    assert f'data-role="advice">{advice}</dd>' in html
    # The backlog's projection on the chart: 2/s more arrive than are read, for a quarter of the
    # window ahead (15 min of the hour): 4,321 + 1,800.
    assert "projected: 6,121 messages in 15 min at the current rates" in html
    assert "projected at the current rates" in html  # the dashed line's legend
    assert "Lag in messages of billing over the last 1 h" in html
    assert '<option value="1h" selected>' in html
    short = client.get("/clusters/prod/groups/billing?window=15m").text
    assert "15 evaluations in the window" in short


def test_unknown_names_are_404_pages_that_link_back(client: TestClient) -> None:
    for path, what in (
        ("/clusters/nope", "No cluster 'nope'"),
        ("/clusters/nope/topics/orders", "No cluster 'nope'"),
        ("/clusters/prod/topics/nope", "No topic 'nope' on cluster 'prod'"),
        ("/clusters/prod/groups/nope", "No consumer group 'nope' on cluster 'prod'"),
    ):
        page = client.get(path)
        assert page.status_code == 404, path
        assert page.headers["content-type"].startswith("text/html")
        assert what in unescape(page.text) and 'href="/"' in page.text


def test_a_bad_window_is_a_422_page(client: TestClient) -> None:
    page = client.get("/clusters/prod/groups/billing?window=2w")
    assert page.status_code == 422
    assert "must be one of 15m, 1h, 6h, 24h, 7d, 30d, 90d, not '2w'" in unescape(page.text)
    assert 'href="/clusters/prod/groups/billing?window=1h"' in page.text


def test_stale_data_is_marked(engine: Engine) -> None:
    app = create_app(engine, stale_after=STALE, clock=FakeClock(T + timedelta(hours=1)))
    with TestClient(app) as late:
        html = late.get("/clusters/prod").text
    assert "(1 h ago)" in html and "<strong>stale</strong>" in html


def test_the_share_group_pages_list_colour_and_escape(client: TestClient, engine: Engine) -> None:
    """A cluster whose brokers have no share groups says why; on one that has them, the list is
    most records waiting first, coloured by the open findings of share-group rules (a pending
    warning is amber), and a name with markup is shown as text."""
    marked = "<b>queue</b>"
    with engine.begin() as conn:
        _insert(
            conn,
            "share_group_support",
            [
                {
                    "cluster": "prod",
                    "available": False,
                    "sampled_at": T,
                    "reason": "not available on Kafka 2.8: share groups need Kafka 4.1 (KIP-932)",
                },
                {"cluster": "fresh", "available": True, "reason": None, "sampled_at": T},
            ],
        )
        _insert(
            conn,
            "share_group_states",
            [
                {
                    "cluster": "fresh",
                    "group_id": g,
                    "sampled_at": T,
                    "state": "Stable",
                    "members": m,
                    "assignor": "simple",
                    "coordinator": 1,
                }
                for g, m in (("jobs", 0), ("mail", 2), (marked, 1))
            ],
        )
        _insert(
            conn,
            "share_group_offsets",
            [
                {
                    "cluster": "fresh",
                    "sampled_at": T,
                    "group_id": g,
                    "topic": "work",
                    "partition": p,
                    "start_offset": 10,
                    "end_offset": 10 + lag,
                    "lag": lag,
                    "lag_method": "end_minus_start",
                }
                for g, p, lag in (("jobs", 0, 500), ("jobs", 1, 20), ("mail", 0, 3), (marked, 0, 0))
            ],
        )
        _insert(
            conn,
            "share_group_members",
            [
                {
                    "cluster": "fresh",
                    "group_id": "mail",
                    "member_id": "m-1",
                    "client_id": "mailer",
                    "host": "/10.0.0.7",
                    "rack": None,
                    "assignment": ["work:0"],
                    "updated_at": T,
                },
            ],
        )
        conn.execute(
            text(
                "INSERT INTO findings (rule, entity, entity_key, cluster, labels, severity, value, summary,"
                " description, for_seconds, state, first_seen, last_seen, evaluated_at)"
                " VALUES ('ShareGroupNoMembers', 'share_group', 'fresh/jobs', 'fresh', CAST(:labels AS jsonb),"
                " 'warning', 520, 'no members', '', 600, 'pending', :t, :t, :t)"
            ),
            {"labels": json.dumps({"cluster": "fresh", "group_id": "jobs"}), "t": T},
        )  # fmt: skip

    none = client.get("/clusters/prod/share-groups")
    assert none.status_code == 200
    assert "share groups need Kafka 4.1 (KIP-932)" in none.text and 'id="share-groups"' not in none.text
    assert 'id="share-groups"' not in client.get("/clusters/prod").text

    listed = client.get("/clusters/fresh/share-groups").text
    table = listed[
        listed.index('id="share-groups"') : listed.index("</table>", listed.index('id="share-groups"'))
    ]
    assert table.index(">jobs<") < table.index(">mail<") < table.index("&lt;b&gt;queue&lt;/b&gt;")
    assert marked not in listed
    assert 'class="row-warn">\n    <td><a href="/clusters/fresh/share-groups/jobs"' in table
    assert "end offset - start offset, an upper bound" in table
    assert 'data-role="all-share-groups"' in client.get("/clusters/fresh").text

    jobs = client.get("/clusters/fresh/share-groups/jobs").text
    assert "pill-warn" in jobs and "No members: nobody is there to deliver records to." in jobs
    assert ">520<" in jobs  # records waiting over both share partitions
    mail = client.get("/clusters/fresh/share-groups/mail").text
    assert "mailer" in mail and "work:0" in mail and "pill-ok" in mail
    escaped = client.get("/clusters/fresh/share-groups/%3Cb%3Equeue%3C%2Fb%3E")
    assert escaped.status_code == 200 and marked not in escaped.text
