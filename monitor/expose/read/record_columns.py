"""Which derived columns each read record carries, and the generator of their typed bases.

A read record that shows a derived entity (`monitor.core.derived`) extends a base dataclass made
from the entity's columns: `derived_records.py`, written by `make records` (`python -m
monitor.expose.read.record_columns`) from `RECORDS`. Each base has every column of its entity, in
the contract's order, but those its records read from elsewhere (each with the reason), typed
from the column's Spark type: a key column (`derived.KEYS`, never null in its table) or one the
records require has its plain type, any other may be null (None when not given: the fields are
keyword-only, so a record adds its own fields after them in any order). The records' SQL selects
the bases' fields (`select_list`) from the derived tables' newest rows
(`monitor.store.evaluation.latest_rows`: a view keeps the columns it was created with). A column
added to an entity is therefore a field of its records, read and shown, after a regeneration; a
unit test fails while `derived_records.py` is not what `render()` writes now.

The meanings shown in the API and on the pages stay in `fields.py` and the contract.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

from monitor.core.derived import ENTITIES, KEYS, Column

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

PYTHON_TYPES: dict[str, str] = {
    "string": "str",
    "int": "int",
    "bigint": "int",
    "double": "float",
    "boolean": "bool",
    "timestamp": "datetime",
}
"""A column's Spark SQL type -> the Python type of its field."""


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """The base `name` of the read records `records` (module.class) showing `entity`: its columns
    but `left_out` (column -> why they are not read from the entity); `required` are never null."""

    name: str
    entity: str
    records: tuple[str, ...]
    left_out: Mapping[str, str] = field(default_factory=dict)
    required: tuple[str, ...] = ()

    def columns(self) -> tuple[Column, ...]:
        return tuple(c for c in ENTITIES[self.entity] if c.name not in self.left_out)

    def annotation(self, column: Column) -> str:
        """The field's annotation, with its default: None for a column that may be null."""
        python = PYTHON_TYPES[column.type]
        if column.name in KEYS[self.entity] or column.name in self.required:
            return python
        return f"{python} | None = None"


_METADATA = "the record has the collected metadata's (the brokers table), known before any evaluation"
_TOPIC_SETTINGS = "the record has the topic's settings as configured now (topics, topic_configs)"
_REPLICAS = "the record has the partition's current leader and in-sync replicas (the partitions table)"

RECORDS: tuple[RecordColumns, ...] = (
    RecordColumns("GroupColumns", "group", ("lag.GroupSummary",)),
    RecordColumns("GroupTopicColumns", "group_topic", ("lag.GroupTopicLag", "topics.TopicConsumer")),
    RecordColumns("GroupPartitionColumns", "group_partition", ("lag.GroupPartitionLag",)),
    RecordColumns(
        "TopicColumns",
        "topic",
        ("topics.TopicSummary",),
        left_out=dict.fromkeys(("partitions", "retention_ms", "retention_bytes"), _TOPIC_SETTINGS),
    ),
    RecordColumns(
        "PartitionColumns",
        "partition",
        ("topics.PartitionState",),
        left_out=dict.fromkeys(("leader", "isr"), _REPLICAS),
    ),
    RecordColumns("ClusterColumns", "cluster", ("clusters.ClusterState",)),
    RecordColumns(
        "BrokerColumns",
        "broker",
        ("clusters.BrokerState",),
        left_out={
            "rack": _METADATA,
            "up": _METADATA,
            "down": "the record's `up` (the metadata's) says it: a broker gone from it is up = false",
        },
    ),
    RecordColumns(
        "GroupObjectiveColumns",
        "lag_objective",
        ("objectives.GroupObjective",),
        required=(
            "lag_threshold_seconds",
            "target",
            "window_days",
            "bad_minutes",
            "recorded_minutes",
            "budget_remaining",
        ),
    ),
)
"""Every read record base `derived_records.py` has."""


def column_names(base: type[DataclassInstance]) -> tuple[str, ...]:
    """The columns of `base` (a class of `derived_records`), in order."""
    return tuple(f.name for f in fields(base))


def select_list(
    base: type[DataclassInstance], alias: str | None = None, elsewhere: Mapping[str, str] | None = None
) -> str:
    """The SQL select list of `base`'s columns, each `alias.` when given, but those `elsewhere`
    maps to another alias (e.g. a key the metadata's table has before any evaluation)."""
    other = elsewhere or {}
    return ", ".join(
        f"{other[name]}.{name}" if name in other else name if alias is None else f"{alias}.{name}"
        for name in column_names(base)
    )


_HEADER = '''"""The derived columns each read record carries, typed: generated from `monitor.core.derived` by
`monitor.expose.read.record_columns` (`make records`). Do not edit; regenerate."""

from __future__ import annotations

from dataclasses import dataclass
{datetime}'''


def render() -> str:
    """The text of `derived_records.py` as `RECORDS` and the contract make it now."""
    timestamps = any(c.type == "timestamp" for spec in RECORDS for c in spec.columns())
    parts = [_HEADER.format(datetime="from datetime import datetime\n" if timestamps else "")]
    for spec in RECORDS:
        carried = " and ".join(f"`{record}`" for record in spec.records)
        doc = f'    """The columns of `derived_{spec.entity}` read into {carried}."""'
        lines = ["", "", "@dataclass(frozen=True, slots=True, kw_only=True)", f"class {spec.name}:", doc, ""]
        lines += [f"    {c.name}: {spec.annotation(c)}" for c in spec.columns()]
        parts.append("\n".join(lines) + "\n")
    return "".join(parts)


GENERATED = Path(__file__).with_name("derived_records.py")


def main() -> int:
    GENERATED.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {GENERATED}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
