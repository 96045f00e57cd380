"""When a match's condition was observed: the newest run of the collection jobs its rule's deciding
columns come from, so that a rule's `for` counts from the sample that showed the condition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from monitor.core.derived import COLUMN_SOURCES, ENTITIES, SOURCES, sources_of
from monitor.evaluate.job import observed_at
from monitor.evaluate.rules import Rule, match_columns
from monitor.store.findings import Match
from tests.fixtures.rules import default_ruleset

T = datetime(2026, 11, 26, 8, 0, tzinfo=UTC)
SHIPPED = default_ruleset().by_name()


def _match(rule: Rule, cluster: str = "prod") -> Match:
    return Match(rule.name, rule.entity, "prod/2", cluster, "critical", 1.0, "s", "d", rule.for_seconds)


def test_a_broker_gone_is_dated_by_the_metadata_run_that_showed_it_not_a_later_log_dirs_run() -> None:
    newest = {("prod", "metadata"): T, ("prod", "log_dirs"): T + timedelta(seconds=20)}

    [down] = observed_at([_match(SHIPPED["BrokerDown"])], list(SHIPPED.values()), newest)

    assert down.observed_at == T


def test_a_broker_gone_holds_until_the_newest_sample_of_any_of_its_jobs() -> None:
    """The `for` counts to the newest sample of the broker's jobs: a metadata run a minute apart
    does not hold BrokerDown back while probe and log-dirs runs go on seeing the cluster."""
    newest = {
        ("prod", "metadata"): T,
        ("prod", "log_dirs"): T + timedelta(seconds=20),
        ("prod", "probe"): T + timedelta(seconds=25),
        ("prod", "offsets"): T + timedelta(seconds=40),  # not a broker's job
    }

    [down] = observed_at([_match(SHIPPED["BrokerDown"])], list(SHIPPED.values()), newest)

    assert (down.observed_at, down.held_at) == (T, T + timedelta(seconds=25))


def test_a_rule_reading_columns_of_several_jobs_is_dated_by_the_newest_of_them() -> None:
    newest = {("prod", "metadata"): T, ("prod", "log_dirs"): T + timedelta(seconds=20)}
    headroom = SHIPPED["BrokerDiskHeadroom"]  # `up` (metadata) and `disk_used_ratio` (log dirs)

    [match] = observed_at([_match(headroom)], [headroom], newest)

    assert match.observed_at == T + timedelta(seconds=20)


def test_only_the_runs_of_the_matchs_own_cluster_count_and_none_without_a_run() -> None:
    down = SHIPPED["BrokerDown"]
    newest = {("other", "metadata"): T + timedelta(seconds=30), ("prod", "log_dirs"): T}

    [match] = observed_at([_match(down)], [down], newest)

    assert match.observed_at is None, "no metadata run of prod: the evaluation time stands"


def test_a_match_of_a_rule_not_given_is_dated_by_its_entitys_jobs() -> None:
    newest = {("prod", "metadata"): T, ("prod", "log_dirs"): T + timedelta(seconds=20)}

    [match] = observed_at([_match(SHIPPED["BrokerDown"])], [], newest)

    assert match.observed_at == T + timedelta(seconds=20)


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
