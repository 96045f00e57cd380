"""The Spark <-> PostgreSQL path: a real local SparkSession reads over JDBC and writes back."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import Engine, text

from monitor.evaluate import smoke
from monitor.evaluate.spark import jdbc_target

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_smoke_job_reads_and_writes_over_jdbc(spark: SparkSession, db_url: str, engine: Engine) -> None:
    now = datetime.now(UTC)
    rows = [
        ("a", "orders", 6, 3, None),
        ("a", "payments", 4, 3, None),
        ("a", "gone", 2, 1, now),  # deleted topics are not counted
        ("b", "clicks", 12, 2, None),
    ]
    with engine.begin() as conn:
        for cluster, topic, partitions, rf, deleted in rows:
            conn.execute(
                text(
                    "INSERT INTO topics (cluster, topic, partition_count, replication_factor, internal,"
                    " first_seen, last_seen, deleted_at) VALUES (:c, :t, :p, :rf, false, :now, :now, :d)"
                ),
                {"c": cluster, "t": topic, "p": partitions, "rf": rf, "now": now, "d": deleted},
            )

    written = smoke.run(spark, jdbc_target(db_url), "spark_smoke_result")

    assert written == 2
    with engine.connect() as conn:
        result = conn.execute(
            text("SELECT cluster, topic_count, partition_count FROM spark_smoke_result ORDER BY cluster")
        ).all()
    assert [tuple(r) for r in result] == [("a", 2, 10), ("b", 1, 12)]


def test_topic_counts_transform(spark: SparkSession) -> None:
    from pyspark.testing import assertDataFrameEqual

    topics = spark.createDataFrame(
        [("x", "t1", 3, None), ("x", "t2", 5, None), ("y", "t3", 1, None)],
        "cluster string, topic string, partition_count int, deleted_at timestamp",
    )
    expected = spark.createDataFrame(
        [("y", 1, 1), ("x", 2, 8)], "cluster string, topic_count long, partition_count long"
    )
    assertDataFrameEqual(smoke.topic_counts(topics), expected)  # order-insensitive
