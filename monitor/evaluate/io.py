"""All JDBC I/O of the evaluate stage: transforms never touch PostgreSQL themselves.

Both directions run on the executors, in parallel. A COPY through the driver was tried for the
derived rows and was no cheaper in total than batched INSERTs rewritten into multi-row ones (the
server's index upkeep dominates), and it funnels every row through one Python process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from monitor.evaluate.spark import JdbcTarget

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FETCH_SIZE = 10_000
BATCH_SIZE = 10_000
BINARY_TRANSFER = {"prepareThreshold": "-1"}
"""The PostgreSQL driver's setting for binary results from the first execution (it would use text
for a statement run once, as each read is): timestamps and numbers arrive as bytes to copy instead
of text to parse, which halved the driver's CPU time per row."""


def read_table(
    spark: SparkSession,
    target: JdbcTarget,
    table_or_query: str,
    *,
    partition_column: str | None = None,
    lower_bound: int | None = None,
    upper_bound: int | None = None,
    num_partitions: int = 1,
    predicates: Sequence[str] | None = None,
    fetch_size: int = FETCH_SIZE,
    session_statement: str | None = None,
) -> DataFrame:
    """Read a table (or a `(SELECT ...) AS q` subquery) over JDBC.

    `session_statement` runs on each read's connection before the read (a planner setting).
    With `predicates` (SQL conditions that split the rows between them, each row in exactly
    one), Spark issues one read per predicate, in parallel. With `partition_column` and bounds,
    Spark issues `num_partitions` parallel range reads instead.
    """
    options = {**target.options(), "fetchsize": str(fetch_size), **BINARY_TRANSFER}
    if session_statement is not None:
        options["sessionInitStatement"] = session_statement
    if predicates:
        return spark.read.jdbc(target.url, table_or_query, predicates=list(predicates), properties=options)
    reader = spark.read.format("jdbc").options(**options).option("dbtable", table_or_query)
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
    batch_size: int = BATCH_SIZE,
    truncate: bool = True,
) -> None:
    """Write a DataFrame over JDBC. `overwrite` truncates (keeps the table's DDL) by default.

    The driver rewrites each batch of INSERTs into multi-row INSERTs (`reWriteBatchedInserts`):
    a round trip and a statement per hundreds of rows instead of per row, several times faster
    into PostgreSQL.
    """
    (
        df.write.format("jdbc")
        .options(**target.options())
        .option("dbtable", table)
        .option("batchsize", str(batch_size))
        .option("truncate", "true" if truncate else "false")
        .option("stringtype", "unspecified")
        .option("reWriteBatchedInserts", "true")
        .mode(mode)
        .save()
    )
