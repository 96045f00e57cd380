"""The read records that show a derived entity take their columns from the one definition
(`monitor.core.derived`): every column of the entity is a field of its record, typed from the
column's Spark type, or is left out with a reason; the generated bases are what the generator makes
from the contract now; the SQL select lists are the bases' fields."""

from __future__ import annotations

import dataclasses
import types
import typing
from datetime import datetime
from typing import Any

import pytest
from pydantic import TypeAdapter

from monitor.core.derived import ENTITIES, KEYS, Column
from monitor.expose.read import clusters, derived_records, lag, objectives, topics
from monitor.expose.read.record_columns import GENERATED, PYTHON_TYPES, RECORDS, render, select_list

pytestmark = pytest.mark.unit

READ_RECORDS: dict[str, type[Any]] = {
    "lag.GroupSummary": lag.GroupSummary,
    "lag.GroupTopicLag": lag.GroupTopicLag,
    "lag.GroupPartitionLag": lag.GroupPartitionLag,
    "topics.TopicConsumer": topics.TopicConsumer,
    "topics.TopicSummary": topics.TopicSummary,
    "topics.PartitionState": topics.PartitionState,
    "objectives.GroupObjective": objectives.GroupObjective,
    "clusters.ClusterState": clusters.ClusterState,
    "clusters.BrokerState": clusters.BrokerState,
}
TYPES = {"str": str, "int": int, "float": float, "bool": bool, "datetime": datetime}


def test_the_generated_bases_are_what_the_contract_makes_now() -> None:
    assert GENERATED.read_text(encoding="utf-8") == render(), (
        "monitor/expose/read/derived_records.py is out of date: run `make records`"
    )


def _field_type(record: type[Any], name: str) -> tuple[type, bool]:
    """The Python type of `record`'s field `name`, and whether it may be None."""
    hint = typing.get_type_hints(record)[name]
    if isinstance(hint, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        assert len(args) == 1, (record, name, hint)
        return args[0], True
    return hint, False


PAIRS = [(spec, record) for spec in RECORDS for record in spec.records]


@pytest.mark.parametrize(("spec", "name"), PAIRS, ids=[name for _, name in PAIRS])
def test_every_column_of_the_entity_is_a_field_of_its_record_or_left_out_with_a_reason(
    spec: Any, name: str
) -> None:
    record = READ_RECORDS[name]
    base = getattr(derived_records, spec.name)
    assert issubclass(record, base)
    names = {f.name for f in dataclasses.fields(record)}
    from_entity = {f.name for f in dataclasses.fields(base)}
    entity: tuple[Column, ...] = ENTITIES[spec.entity]
    for column in entity:
        if column.name in spec.left_out:  # not read from the entity (the record may have it from elsewhere)
            assert spec.left_out[column.name].strip(), column.name
            assert column.name not in from_entity, column.name
            continue
        assert column.name in names, f"{spec.record} lacks {spec.entity}.{column.name}"
        python, nullable = _field_type(record, column.name)
        assert python is TYPES[PYTHON_TYPES[column.type]], column.name
        keyed = column.name in KEYS[spec.entity] or column.name in spec.required
        assert nullable is not keyed, column.name
    assert set(spec.left_out) <= {c.name for c in entity}, "a left-out column the entity does not have"
    assert set(spec.required) <= {c.name for c in entity} - set(spec.left_out)


def test_a_column_added_to_an_entity_becomes_a_typed_field_of_its_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    added = Column("rebalances", "bigint", "rebalances of the group over the window")
    monkeypatch.setitem(ENTITIES, "group", (*ENTITIES["group"], added))
    text = render()
    namespace: dict[str, Any] = {}
    exec(compile(text, "derived_records.py", "exec"), namespace)  # the generator's own output
    base = namespace["GroupColumns"]
    assert [f.name for f in dataclasses.fields(base)][-1] == "rebalances"
    assert select_list(base).endswith(", rebalances")
    assert "    rebalances: int | None = None\n" in text


def test_the_select_lists_are_the_generated_fields() -> None:
    assert select_list(derived_records.GroupTopicColumns, "t").split(", ")[:3] == [
        "t.group_id",
        "t.topic",
        "t.partitions",
    ]
    assert "rack" not in select_list(derived_records.BrokerColumns).split(", ")


def test_every_read_record_of_an_entity_is_checked() -> None:
    assert set(READ_RECORDS) == {name for _, name in PAIRS}


def test_every_field_of_the_records_is_described_in_the_api() -> None:
    for name, record in READ_RECORDS.items():
        properties = TypeAdapter(record).json_schema()["properties"]
        undescribed = [field for field, prop in properties.items() if not prop.get("description")]
        assert undescribed == [], name
