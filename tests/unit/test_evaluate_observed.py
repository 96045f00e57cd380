"""When a match's condition was observed: the start of the newest run of the collection jobs its
rule's deciding columns come from, so that a rule's `for` counts from the run that showed the
condition, to the end of the newest run of the entity's jobs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from monitor.core.derived import COLUMN_SOURCES, ENTITIES, SOURCES, sources_of
from monitor.evaluate.observed import observed_at
from monitor.evaluate.rules import Rule, match_columns
from monitor.store.findings import Match
from monitor.store.runs import Reached
from tests.fixtures.rules import default_ruleset

T = datetime(2026, 11, 26, 8, 0, tzinfo=UTC)
SHIPPED = default_ruleset().by_name()


def _ran(started: datetime, seconds: float = 0.05) -> Reached:
    return Reached(started, started + timedelta(seconds=seconds))


def _match(rule: Rule, cluster: str = "prod") -> Match:
    return Match(rule.name, rule.entity, "prod/2", cluster, "critical", 1.0, "s", "d", rule.for_seconds)


def test_a_broker_gone_is_dated_by_the_metadata_run_that_showed_it_not_a_later_log_dirs_run() -> None:
    newest = {("prod", "metadata"): _ran(T), ("prod", "log_dirs"): _ran(T + timedelta(seconds=20))}

    [down] = observed_at([_match(SHIPPED["BrokerDown"])], list(SHIPPED.values()), newest)

    assert down.observed_at == T, "when that run started"


def test_a_broker_gone_holds_until_the_newest_sample_of_any_of_its_jobs() -> None:
    """The `for` counts to the newest sample of the broker's jobs: a metadata run a minute apart
    does not hold BrokerDown back while probe and log-dirs runs go on seeing the cluster."""
    newest = {
        ("prod", "metadata"): _ran(T),
        ("prod", "log_dirs"): _ran(T + timedelta(seconds=20)),
        ("prod", "probe"): _ran(T + timedelta(seconds=25)),
        ("prod", "offsets"): _ran(T + timedelta(seconds=40)),  # not a broker's job
    }

    [down] = observed_at([_match(SHIPPED["BrokerDown"])], list(SHIPPED.values()), newest)

    assert (down.observed_at, down.held_at) == (T, T + timedelta(seconds=25.05)), (
        "to the end of the probe's run"
    )


def test_a_rule_reading_columns_of_several_jobs_is_dated_by_the_newest_of_them() -> None:
    newest = {("prod", "metadata"): _ran(T), ("prod", "log_dirs"): _ran(T + timedelta(seconds=20))}
    headroom = SHIPPED["BrokerDiskHeadroom"]  # `up` (metadata) and `disk_used_ratio` (log dirs)

    [match] = observed_at([_match(headroom)], [headroom], newest)

    assert match.observed_at == T + timedelta(seconds=20)


def test_only_the_runs_of_the_matchs_own_cluster_count_and_none_without_a_run() -> None:
    down = SHIPPED["BrokerDown"]
    newest = {("other", "metadata"): _ran(T + timedelta(seconds=30)), ("prod", "log_dirs"): _ran(T)}

    [match] = observed_at([_match(down)], [down], newest)

    assert match.observed_at is None, "no metadata run of prod: the evaluation time stands"


def test_a_match_of_a_rule_not_given_is_dated_by_its_entitys_jobs() -> None:
    newest = {("prod", "metadata"): _ran(T), ("prod", "log_dirs"): _ran(T + timedelta(seconds=20))}

    [match] = observed_at([_match(SHIPPED["BrokerDown"])], [], newest)

    assert match.observed_at == T + timedelta(seconds=20)


def test_a_for_of_whole_intervals_elapses_at_the_run_it_ends_in_however_long_each_run_took() -> None:
    """A metadata run every 15 s: the one that shows a broker gone took 90 ms, the fourth after it
    started 40 µs early by the scheduler's clock and took 50 ms. Counted from start to end, the
    60 s have elapsed at that fourth run (end to end they would not have, by 40 ms, and the page
    would wait for a fifth)."""
    down = SHIPPED["BrokerDown"]
    first = Reached(T, T + timedelta(milliseconds=90))
    fourth = _ran(T + timedelta(seconds=60, microseconds=-40), 0.05)

    [seen] = observed_at([_match(down)], [down], {("prod", "metadata"): first})
    [held] = observed_at([_match(down)], [down], {("prod", "metadata"): fourth})

    assert seen.observed_at is not None and held.held_at is not None
    assert held.held_at - seen.observed_at >= timedelta(seconds=down.for_seconds)
    assert fourth.finished_at - first.finished_at < timedelta(seconds=down.for_seconds)


@pytest.mark.parametrize(
    ("rule", "jobs"),
    [
        ("BrokerDown", ("metadata",)),
        ("PartitionOffline", ("metadata",)),
        ("PartitionUnderMinIsr", ("metadata",)),
        ("ProbeFailing", ("probe",)),
        ("BrokerDiskHeadroom", ("metadata", "log_dirs")),
        ("PartitionNearRetentionBytes", ("log_dirs",)),
        ("DataLossOccurred", ("offsets",)),
        ("ClusterUnreachable", ()),
    ],
)
def test_the_shipped_rules_are_dated_by_the_jobs_their_conditions_read(
    rule: str, jobs: tuple[str, ...]
) -> None:
    shipped = SHIPPED[rule]
    assert sources_of(shipped.entity, match_columns(shipped)) == jobs


def test_key_and_common_columns_add_no_job_and_a_constant_condition_reads_the_whole_entity() -> None:
    assert sources_of("broker", ["cluster", "broker_id", "evaluated_at", "down"]) == ("metadata",)
    assert sources_of("broker", ["broker_id"]) == SOURCES["broker"]
    constant = SHIPPED["BrokerDown"].model_copy(update={"condition": "true"})
    assert sources_of("broker", match_columns(constant)) == SOURCES["broker"]


def test_a_tiers_when_decides_too_and_lambda_parameters_are_not_columns() -> None:
    rule = SHIPPED["BrokerDown"].model_copy(
        update={
            "condition": "exists(array(1, 2), x -> x > leaders)",
            "severities": (SHIPPED["BrokerDiskHeadroom"].severities[0],),
        }
    )
    assert match_columns(rule) == {"leaders", "disk_used_ratio"}


def test_column_sources_narrow_their_entitys_sources_to_known_columns() -> None:
    for entity, columns in COLUMN_SOURCES.items():
        names = {c.name for c in ENTITIES[entity]}
        for column, jobs in columns.items():
            assert column in names, f"{entity}.{column} is not a derived column"
            assert jobs and set(jobs) <= set(SOURCES[entity]), f"{entity}.{column}: {jobs} not in SOURCES"


def test_a_run_of_a_deciding_job_begun_by_the_end_of_the_reads_dates_the_match_others_do_not() -> None:
    """A metadata run still going (or begun while the evaluation read) may have written the
    broker's absence: dated from its start, never from the run before. A later log-dirs run
    decides nothing of BrokerDown and moves nothing."""
    newest = {("prod", "metadata"): _ran(T), ("prod", "log_dirs"): _ran(T + timedelta(seconds=5))}
    going = T + timedelta(seconds=15)
    begun = {("prod", "metadata"): going, ("prod", "log_dirs"): going + timedelta(seconds=2)}

    [down] = observed_at([_match(SHIPPED["BrokerDown"])], list(SHIPPED.values()), newest, begun)
    [alone] = observed_at([_match(SHIPPED["BrokerDown"])], [], {}, {("prod", "metadata"): going})

    assert (down.observed_at, down.held_at) == (going, T + timedelta(seconds=5.05))
    assert (alone.observed_at, alone.held_at) == (going, None), "no run reached yet: still not before it"
