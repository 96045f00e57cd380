"""All JDBC I/O of the evaluate stage: transforms never touch PostgreSQL themselves."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from monitor.evaluate.spark import JdbcTarget

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def read_table(
    spark: SparkSession,
    target: JdbcTarget,
    table_or_query: str,
    *,
    partition_column: str | None = None,
    lower_bound: int | None = None,
    upper_bound: int | None = None,
    num_partitions: int = 1,
    fetch_size: int = 10_000,
) -> DataFrame:
    """Read a table (or a `(SELECT ...) AS q` subquery) over JDBC.

    With `partition_column` and bounds, Spark issues `num_partitions` parallel range reads.
    """
    reader = spark.read.format("jdbc").options(**target.options())
    reader = reader.option("dbtable", table_or_query).option("fetchsize", str(fetch_size))
    if partition_column is not None and lower_bound is not None and upper_bound is not None:
        reader = (
            reader.option("partitionColumn", partition_column)
            .option("lowerBound", str(lower_bound))
            .option("upperBound", str(upper_bound))
            .option("numPartitions", str(num_partitions))
        )
    return reader.load()


def write_table(
    df: DataFrame,
    target: JdbcTarget,
    table: str,
    *,
    mode: Literal["append", "overwrite"] = "append",
    batch_size: int = 10_000,
    truncate: bool = True,
) -> None:
    """Write a DataFrame over JDBC. `overwrite` truncates (keeps the table's DDL) by default."""
    (
        df.write.format("jdbc")
        .options(**target.options())
        .option("dbtable", table)
        .option("batchsize", str(batch_size))
        .option("truncate", "true" if truncate else "false")
        .option("stringtype", "unspecified")
        .mode(mode)
        .save()
    )
