"""The daemon's evaluation plans: one per thing they are built from, the least recently used
dropped (with its clock) past the limit, and a changed rule a new plan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from monitor.evaluate.plan import EntityRows, Plan, Plans, plan_key
from monitor.evaluate.spark import JdbcTarget
from tests.fixtures.rules import default_ruleset


def _plan(plan_id: str) -> Plan:
    return Plan(plan_id, {}, None, ())  # type: ignore[arg-type]  # no Spark: the map only


def _key(session: Any, readers: int = 1, rules: Any = ()) -> Any:
    target = JdbcTarget("jdbc:postgresql://127.0.0.1:5432/kh", "kh", "secret")
    return plan_key(session, target, ["prod"], rules, timedelta(minutes=15), 10, readers, True)


def test_the_least_recently_used_plan_is_dropped_past_the_limit() -> None:
    plans = Plans(limit=2)
    session = object()
    a, b, c = _key(session, 1), _key(session, 2), _key(session, 3)
    assert plans.put(a, _plan("a")) == [] and plans.put(b, _plan("b")) == []
    assert plans.get(a) is not None  # a is used again: b is now the least recent

    dropped = plans.put(c, _plan("c"))

    assert [p.plan_id for p in dropped] == ["b"], "the dropped plan is returned, for its clock"
    assert plans.get(b) is None and plans.get(a) is not None and plans.get(c) is not None
    assert sorted(p.plan_id for p in plans.clear()) == ["a", "c"] and len(plans) == 0


def test_a_plan_belongs_to_its_session_its_size_and_its_rules() -> None:
    rules = default_ruleset().rules
    session, other = object(), object()
    assert _key(session, rules=rules) == _key(session, rules=rules)
    assert _key(session, rules=rules) != _key(other, rules=rules), "another SparkSession"
    assert _key(session, readers=1, rules=rules) != _key(session, readers=2, rules=rules)
    changed = [rules[0].model_copy(update={"for_seconds": rules[0].for_seconds + 60}), *rules[1:]]
    assert _key(session, rules=rules) != _key(session, rules=changed), "a threshold changed in a file"


def test_gathered_rows_become_tuples_in_the_structs_order_with_exact_aware_timestamps() -> None:
    from pyspark.sql import Row

    evaluated = datetime(2026, 12, 4, 18, 0, 0, 123456, tzinfo=UTC)
    micros = (evaluated - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    first = Row(evaluated_at=micros, cluster="prod", group_id="billing", offset_lag=7)
    rows = EntityRows("group", first)
    rows.add(first)
    rows.add(Row(evaluated_at=None, cluster="prod", group_id="audit", offset_lag=None))

    assert rows.columns == ["evaluated_at", "cluster", "group_id", "offset_lag"]
    assert rows.rows == [(evaluated, "prod", "billing", 7), (None, "prod", "audit", None)]
    assert rows.rows[0][0].tzinfo is not None, "a timestamp comes back aware, whatever the driver's zone"
