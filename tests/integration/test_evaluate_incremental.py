"""The incremental evaluation against the full one, on the real PostgreSQL and Spark: at every step
of a timeline, the daemon's kind of evaluation (a kept plan, carrying the groups that stood still)
runs first, then a full one at the same time; the full one must change nothing: not one derived
row of any entity, not one finding.

The timeline (an evaluation every 30 s, a 90 s window, the shipped consumer rules): groups that stay caught
up (`still-a` on two partitions; `still-b` until its topic gets new messages at step 6, read at
step 7), one lagging and moving, one stopped behind (Empty, no member), one that rewinds at step 3
and catches up again at step 4, one missing from a partial run at step 5 (`blind`); the daemon
restarts before step 6 (a new plan: a full evaluation) and the rules change at step 8 (the same).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import Connection, Engine, text

from monitor.core.clock import to_millis
from monitor.core.derived import ENTITIES, KEYS, table_of
from monitor.core.records import (
    CommitObservation,
    CommittedOffset,
    GroupDescription,
    GroupMember,
    GroupOffsetSample,
    OffsetsBatch,
    PartitionOffsets,
    PartitionSample,
)
from monitor.evaluate import job
from monitor.evaluate.engine import KEY_SEPARATOR
from monitor.evaluate.job import JobSettings, run_evaluation
from monitor.evaluate.plan import Plans
from monitor.evaluate.rules import Rule, default_rule_paths, load_rules
from monitor.evaluate.spark import jdbc_target
from monitor.evaluate.transforms.rollups import OFFSETS_JOB, REACHED, SAMPLE_STALE_AFTER
from monitor.store import carry
from monitor.store.engine import make_engine
from monitor.store.samples import write_offsets_batch
from tests.fixtures.postgres import PgServer, migrated_database
from tests.fixtures.sql import record_offsets_run, rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

CLUSTER = "incremental"
STEP = timedelta(seconds=30)
SETTINGS = JobSettings(window=timedelta(seconds=90))
T = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=8)
BASE_MS = to_millis(T) - 600_000
"""The append time of offset 0 of every topic; one record every 100 ms after it."""


def appended(offset: int) -> int:
    return BASE_MS + offset * 100


def ends(step: int) -> dict[tuple[str, int], int]:
    return {
        ("quiet", 0): 500,
        ("quiet", 1): 500,
        ("orders", 0): 1000 + 100 * step,
        ("events", 0): 1000 if step < 6 else 1100,
    }


def positions(step: int) -> dict[str, dict[tuple[str, int], int]]:
    """Each group's committed offsets at `step`."""
    groups = {
        "still-a": {("quiet", 0): 500, ("quiet", 1): 500},
        "still-b": {("events", 0): 1100 if step >= 7 else 1000},
        "lagging": {("orders", 0): 700 + 100 * step},
        "stopped": {("orders", 0): 200},
        "rewinding": {("quiet", 0): 100 if step == 3 else 500},
    }
    if step != 5:
        groups["blind"] = {("quiet", 1): 500}
    return groups


def write_step(engine: Engine, step: int) -> None:
    """The offsets run of `step`: started 2 s before its evaluation, sampled 1 s before it;
    partial at step 5 (without `blind`)."""
    at = T + step * STEP
    sampled = at - timedelta(seconds=1)
    ms = to_millis(sampled)
    end = ends(step)
    before = positions(step - 1) if step else {}
    samples, observed, described = [], [], []
    for group, offsets in positions(step).items():
        stopped = group == "stopped"
        members = () if stopped else (GroupMember(f"{group}-1", group, "/127.0.0.1", tuple(offsets)),)
        described.append(
            GroupDescription(group, "Empty" if stopped else "Stable", "consumer", "range", 1, members)
        )
        for (topic, partition), committed in offsets.items():
            lag = end[(topic, partition)] - committed
            samples.append(
                GroupOffsetSample(
                    CommittedOffset(group, topic, partition, committed), end[(topic, partition)], 0, lag, False,
                    appended(committed) if lag else None, appended(committed - 1), "exact",
                )
            )  # fmt: skip
            previous = before.get(group, {}).get((topic, partition))
            if previous != committed:
                # The first commits seen were made minutes before the first run; later ones within it.
                when = ms - (300_000 if step == 0 else 500)
                observed.append(CommitObservation(group, topic, partition, committed, previous, when))
    with engine.begin() as conn:
        record_offsets_run(
            conn, CLUSTER, at - timedelta(seconds=2), sampled, "partial" if step == 5 else "ok"
        )
        partitions = [
            PartitionSample(PartitionOffsets(topic, partition, 0, offset), appended(0), appended(offset - 1), "CreateTime")
            for (topic, partition), offset in end.items()
        ]  # fmt: skip
        write_offsets_batch(
            conn,
            OffsetsBatch(
                CLUSTER, sampled, partitions=partitions, groups=described, group_offsets=samples,
                commit_observations=observed,
            ),
        )  # fmt: skip


def derived(engine: Engine, at: datetime) -> dict[str, list[dict[str, Any]]]:
    """Every entity's rows of the evaluation at `at`, by key."""
    found = {}
    for entity in ENTITIES:
        order = ", ".join(f'"{key}"' for key in KEYS[entity]) or "cluster"
        sql = f"SELECT * FROM {table_of(entity)} WHERE cluster = :c AND evaluated_at = :at ORDER BY {order}"
        found[entity] = rows(engine, sql, c=CLUSTER, at=at)
    return found


def findings(engine: Engine) -> list[dict[str, Any]]:
    return rows(engine, "SELECT * FROM findings WHERE cluster = :c ORDER BY rule, entity_key, id", c=CLUSTER)


def carried(engine: Engine) -> set[str]:
    """The groups the newest incremental evaluation carried (of the plan that ran last)."""
    with engine.connect() as conn:
        plan = conn.execute(text("SELECT plan_id FROM evaluation_clocks ORDER BY touched_at DESC LIMIT 1"))
        rows = conn.execute(
            text("SELECT group_id FROM evaluation_carried WHERE plan_id = :p AND cluster = :c"),
            {"p": plan.scalar_one(), "c": CLUSTER},
        )
        return {str(group) for (group,) in rows}


def differences(
    incremental: dict[str, list[dict[str, Any]]], full: dict[str, list[dict[str, Any]]]
) -> list[str]:
    """Readable differences between two `derived` answers (for the failure message)."""
    found = []
    for entity in ENTITIES:
        if len(incremental[entity]) != len(full[entity]):
            found.append(f"{entity}: {len(incremental[entity])} rows incremental, {len(full[entity])} full")
            continue
        for mine, theirs in zip(incremental[entity], full[entity], strict=True):
            changed = {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}
            if changed:
                key = tuple(mine[k] for k in KEYS[entity])
                found.append(f"{entity} {key}: {changed}")
    return found


EXTRA = Rule.model_validate({
    "name": "GroupQuiet", "description": "a group no one reads", "entity": "group",
    "condition": "members == 0", "value": "offset_lag", "for": "5m",
    "severities": [{"severity": "info"}], "summary": "{{ group_id }} has no member",
})  # fmt: skip


@pytest.fixture
def store(pg_server: PgServer) -> Iterator[tuple[str, Engine]]:
    """A database of its own for each case."""
    with migrated_database(pg_server) as url:
        engine = make_engine(url)
        try:
            yield url, engine
        finally:
            engine.dispose()


@pytest.mark.parametrize("one_action_rows", [None, 5], ids=["one-action", "sized-by-computed"])
def test_an_incremental_evaluation_gives_what_a_full_one_gives(
    spark: SparkSession,
    store: tuple[str, Engine],
    one_action_rows: int | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With `one_action_rows` at 5 (None: as shipped), the full evaluations (7 group-partitions) run on the plan that
    Spark writes from, and an incremental one that carries 2 group-partitions or more runs on a
    one-action plan (sized by what it computes), which the plan that decided the carry hands its
    groups to: both are marked complete."""
    if one_action_rows is not None:
        monkeypatch.setattr(job, "ONE_ACTION_ROWS", one_action_rows)
    db_url, engine = store
    lag_rules = load_rules([path for path in default_rule_paths() if path.name == "lag.yaml"])
    assert lag_rules.ok and lag_rules.rules, lag_rules.problems
    target, rules = jdbc_target(db_url), list(lag_rules.rules)
    plans, full_plans = Plans(), Plans()
    kinds, carried_at = [], {}
    for step in range(10):
        at = T + step * STEP
        write_step(engine, step)
        if step == 6:
            plans = Plans()  # a restart: a new plan, without a previous evaluation
        step_rules = [*rules, EXTRA] if step >= 8 else rules
        result = run_evaluation(spark, target, engine, step_rules, [CLUSTER], at, SETTINGS, plans)
        kinds.append(result.kind)
        carried_at[step] = carried(engine) if result.carried_groups is not None else None
        assert result.carried_groups == (len(carried_at[step]) if carried_at[step] is not None else None)
        mine, found = derived(engine, at), findings(engine)

        full = run_evaluation(
            spark, target, engine, step_rules, [CLUSTER], at, SETTINGS, full_plans, full=True
        )
        assert full.kind == "full"
        theirs = derived(engine, at)
        assert mine == theirs, f"step {step}: " + "; ".join(differences(mine, theirs))
        assert found == findings(engine), f"step {step}: the findings differ"
        assert sum(result.carried_rows.values()) + sum(result.rows.values()) == sum(full.rows.values())

    assert kinds == ["full", *["incremental"] * 5, "full", "incremental", "full", "incremental"]
    # The last step's plans: the full evaluation's, and the incremental one's, or the two of it
    # (the plan that decided the carry and the smaller one that ran).
    completed = rows(
        engine, "SELECT plan_id FROM evaluation_clocks WHERE completed_at = :at", at=T + 9 * STEP
    )
    assert len(completed) == (2 if one_action_rows is None else 3)
    # Carried: what stood still, caught up, for a window and more; never what moved or lags.
    assert carried_at[2] == {"still-a", "still-b", "rewinding", "blind"}
    assert carried_at[3] == {"still-a", "still-b", "blind"}, "rewinding moved"
    assert carried_at[5] == {"still-a", "still-b"}, "blind is missing from the partial run"
    # Step 7: still-b's topic moved, then its offset; blind's commit was seen again at step 6 (the
    # stream had lost it at step 5); rewinding's rewind has left the window.
    assert carried_at[7] == {"still-a", "rewinding"}
    assert all(not {"lagging", "stopped"} & (groups or set()) for groups in carried_at.values())


def test_a_group_carried_before_is_compared_on_its_samples_since_then(
    spark: SparkSession, store: tuple[str, Engine]
) -> None:
    """The decision compares a group the previous evaluation carried on its samples since the
    offsets run before that evaluation only (carry.CARRIED `recent`), and any other group on the
    whole window. Shown with a sample the writer never writes (stamped before that run, written
    after the decision that read the window): the group carried before is carried again, the
    same decision without what was carried finds the sample and carries nothing of the group;
    a differing sample since that run stops the carry either way."""
    db_url, engine = store
    lag_rules = load_rules([path for path in default_rule_paths() if path.name == "lag.yaml"])
    target, plans = jdbc_target(db_url), Plans()
    for step in range(4):
        write_step(engine, step)
        run_evaluation(
            spark, target, engine, list(lag_rules.rules), [CLUSTER], T + step * STEP, SETTINGS, plans
        )
    assert "still-a" in carried(engine)
    write_step(engine, 4)
    now, previous = T + 4 * STEP, T + 3 * STEP

    def decide(conn: Connection, planted_at: datetime, forget: bool) -> set[str]:
        plan_id = conn.execute(
            text("SELECT plan_id FROM evaluation_clocks WHERE completed_at = :p"), {"p": previous}
        ).scalar_one()
        conn.execute(
            text(
                "INSERT INTO group_offsets (cluster, group_id, topic, partition, sampled_at, committed_offset,"
                " end_offset, start_offset, lag, timestamp_method) VALUES (:c, 'still-a', 'quiet', 0, :at,"
                " 499, 500, 0, 1, 'exact')"
            ),
            {"c": CLUSTER, "at": planted_at},
        )
        if forget:
            conn.execute(text("DELETE FROM evaluation_carried WHERE plan_id = :p"), {"p": plan_id})
        carry.choose_carried(
            conn, plan_id, [CLUSTER], previous, now, SETTINGS.window, stale_after=SAMPLE_STALE_AFTER,
            separator=KEY_SEPARATOR, offsets_job=OFFSETS_JOB, reached=REACHED,
        )  # fmt: skip
        found = conn.execute(
            text("SELECT group_id FROM evaluation_carried WHERE plan_id = :p"), {"p": plan_id}
        )
        return {str(group) for (group,) in found}

    before_run = previous - timedelta(seconds=20)  # in the window, before step 3's run (2 s before it)
    since_run = previous + timedelta(seconds=10)
    for planted_at, forget, expected in [
        (before_run, False, True), (before_run, True, False), (since_run, False, False), (since_run, True, False)
    ]:  # fmt: skip
        with engine.connect() as conn:
            assert ("still-a" in decide(conn, planted_at, forget)) is expected, (planted_at, forget)
            conn.rollback()
