"""Smoke job: proves the Spark <-> PostgreSQL path end to end.

Reads the `topics` table over JDBC, counts topics and partitions per cluster, and writes the result
to a table of the caller's choosing. Runs inside the daemon's session or through spark-submit:

    spark-submit --jars postgresql.jar -m monitor.evaluate.smoke --database-url URL --target T
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from monitor.evaluate.io import read_table, write_table
from monitor.evaluate.spark import JdbcTarget, jdbc_target

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def topic_counts(topics: DataFrame) -> DataFrame:
    """Pure transform: one row per cluster with its topic and partition counts."""
    from pyspark.sql import functions as F

    live = topics.where(F.col("deleted_at").isNull())
    return live.groupBy("cluster").agg(
        F.count(F.lit(1)).cast("long").alias("topic_count"),
        F.sum("partition_count").cast("long").alias("partition_count"),
    )


def run(spark: SparkSession, target: JdbcTarget, result_table: str) -> int:
    """Extract -> transform -> load. Returns the number of result rows written."""
    topics = read_table(spark, target, "topics")
    result = topic_counts(topics).cache()
    rows = result.count()
    write_table(result, target, result_table, mode="overwrite", truncate=False)
    result.unpersist()
    return rows


def main(argv: list[str] | None = None) -> None:
    from pyspark.sql import SparkSession

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--database-url", required=True, help="SQLAlchemy URL of the monitor's database")
    parser.add_argument("--target", default="spark_smoke", help="table to write the result to")
    args = parser.parse_args(argv)
    spark = SparkSession.builder.appName("kafka-health-smoke").getOrCreate()
    written = run(spark, jdbc_target(args.database_url), args.target)
    print(f"smoke: wrote {written} row(s) to {args.target}")


if __name__ == "__main__":
    main()
