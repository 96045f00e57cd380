"""What each Kafka version gives the monitor, and how a missing feature is worded."""

from __future__ import annotations

import pytest

from monitor.core.kafka_features import (
    Feature,
    available,
    parse_version,
    unavailable_features,
    unavailable_text,
)


@pytest.mark.parametrize(
    ("version", "missing"),
    [
        ("2.8.2", set(Feature)),
        ("3.6.2", {Feature.KIP848_GROUPS, Feature.SIMPLE_GROUP_TOMBSTONE, Feature.SHARE_GROUPS}),
        ("3.9.1", {Feature.KIP848_GROUPS, Feature.SIMPLE_GROUP_TOMBSTONE, Feature.SHARE_GROUPS}),
        ("4.0.0", {Feature.SHARE_GROUPS}),
        ("4.1.2", set()),
        ("4.4", set()),
    ],
)
def test_each_version_lacks_what_came_after_it(version: str, missing: set[Feature]) -> None:
    assert set(unavailable_features(parse_version(version))) == missing
    assert all(available(f, parse_version(version)) for f in set(Feature) - missing)


@pytest.mark.parametrize("text", ["", "4", "four.one", "4.1.2.3", "v4.1.2", "-1.2", "4.1.x"])
def test_a_version_that_is_not_one_is_refused_by_name(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a Kafka version such as 3\.9\.1"):
        parse_version(text)


def test_a_missing_feature_names_the_version_and_the_first_that_gives_it() -> None:
    text = unavailable_text(Feature.LOG_DIR_VOLUME, (2, 8))

    assert text == "log directory volume size: not available on Kafka 2.8 (from 3.3)"
