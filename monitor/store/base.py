"""The declarative base every table of the store shares: one metadata with one naming
convention, the key that marks a table partitioned by day, and the CHECK helper. The table modules
(`models`, `evaluation`, `alerting`, `audit`, `retention`) build on it; `schema` gathers them."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Integer, MetaData, Text
from sqlalchemy.orm import DeclarativeBase

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

PARTITION_COLUMN_KEY = "partitioned_by_day"
"""Key in ``Table.info`` naming the time column a table is range-partitioned on, by day."""

Timestamp = DateTime(timezone=True)


def one_of(column: str, values: tuple[str, ...]) -> str:
    """A CHECK constraint's text: `column` holds one of `values`."""
    quoted = ", ".join(f"'{value}'" for value in values)
    return f"{column} IN ({quoted})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: Timestamp, str: Text, int: Integer}
