"""The consumer advice as one sentence (monitor.core.formatting.consumer_advice_text), as lag
notifications and `kafka-health lag` say it, and as the templates' `advice` clause: a table of
derived rows."""

from __future__ import annotations

import pytest

from monitor.core.formatting import advice_filter, consumer_advice_text
from monitor.evaluate.rules import template_environment

# members, consumers_needed, advice_limited_by, hot_topic, hot_partition, offset_lag, data loss -> sentence
CASES = [
    ((1, 3, None, None, None, 9600, 604000.0), "3 consumers (now 1) would read the backlog before retention deletes it"),
    ((2, 1, None, None, None, 50, 604000.0), "1 consumer (now 2) would read the backlog before retention deletes it"),
    ((2, 2, None, None, None, 3200, None), "2 consumers (now 2) would read the backlog within 30 min"),
    ((1, 2, "partitions", None, None, 1600, 604000.0),
     "even 2 consumers (one per partition; now 1) cannot read the backlog before retention deletes it: "
     "it needs more partitions"),
    ((1, 1, "partitions", None, None, 1600, None),
     "even 1 consumer (one per partition; now 1) cannot read the backlog within 30 min: it needs more partitions"),
    ((1, 3, "hot_partition", "orders", 7, 800, 604000.0),
     "more consumers cannot help: partition 7 of orders alone gets more than one consumer reads"),
    ((0, None, None, None, None, 800, 604000.0), "no consumer is running: start one (more of them cannot help before)"),
    ((1, None, None, None, None, 800, 604000.0), ""),  # no consume rate over the window yet
    ((0, None, None, None, None, 0, None), ""),  # caught up: nothing to advise, running or not
    ((None, None, None, None, None, None, None), ""),
]  # fmt: skip


@pytest.mark.parametrize(("row", "sentence"), CASES, ids=[c[1][:40] or "none" for c in CASES])
def test_the_advice_reads_as_one_sentence(row: tuple[object, ...], sentence: str) -> None:
    assert consumer_advice_text(*row) == sentence  # type: ignore[arg-type]
    assert advice_filter(*row) == (f"; {sentence}" if sentence else "")


def test_a_summary_ends_with_the_forecast_and_the_advice() -> None:
    template = template_environment().from_string(
        "{{ offset_lag | catch_up(consume_rate, produce_rate, time_to_catch_up_seconds) }}"
        "{{ members | advice(consumers_needed, advice_limited_by, hot_topic, hot_partition, offset_lag,"
        " time_until_data_loss_seconds) }}"
    )
    row = {"offset_lag": 9600, "consume_rate": 6.0, "produce_rate": 12.0, "time_to_catch_up_seconds": None,
           "members": 1, "consumers_needed": 3, "advice_limited_by": None, "hot_topic": None, "hot_partition": None,
           "time_until_data_loss_seconds": 604000.0}  # fmt: skip
    assert template.render(row) == (
        "not catching up: reads 6.0/s, 12/s arrive; 3 consumers (now 1) would read the backlog before retention deletes it"
    )
    assert template.render({**row, "offset_lag": 0}) == "caught up"
