"""The consumer life cycle both readers share (monitor/kafka/consumer.py): nothing is created
before `start()`, a use before it names the reader, `close()` is idempotent (no broker is
contacted: the consumer connects on its first request). And the commit stream on a new cluster,
where `__consumer_offsets` does not exist yet: unavailable for now, not refused."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from monitor.core.errors import KafkaUnavailableError
from monitor.core.settings import ClusterConfig
from monitor.kafka.commit_stream import CommitStreamReader
from monitor.kafka.consumer import ConsumerClient
from monitor.kafka.timestamps import RecordTimestampReader

CLUSTER = ClusterConfig(name="east", bootstrap_servers=["127.0.0.1:1"])


@pytest.mark.parametrize("reader", [RecordTimestampReader, CommitStreamReader])
def test_a_reader_is_created_by_start_and_released_by_close(reader: type[ConsumerClient]) -> None:
    made = reader(CLUSTER)
    assert repr(made) == f"{reader.__name__}(cluster='east', not started)"
    with made as started:
        assert started is made
        assert repr(made) == f"{reader.__name__}(cluster='east', started)"
    assert repr(made) == f"{reader.__name__}(cluster='east', not started)"
    made.close()  # a second close is harmless


def test_using_a_reader_before_start_names_it() -> None:
    with pytest.raises(
        RuntimeError, match=r"RecordTimestampReader\(cluster='east', not started\): call start"
    ):
        RecordTimestampReader(CLUSTER).read([("t", 0, 5)], 0.1)
    with pytest.raises(RuntimeError, match=r"CommitStreamReader\(cluster='east', not started\): call start"):
        CommitStreamReader(CLUSTER).poll(0.0)


class _NoOffsetsTopic:
    """A consumer of a new cluster: no group has committed, so `__consumer_offsets` is missing."""

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> SimpleNamespace:
        return SimpleNamespace(topics={})

    def close(self) -> None: ...


def test_a_cluster_without_the_offsets_topic_yet_is_unavailable_not_refused() -> None:
    reader = CommitStreamReader(CLUSTER)
    reader._consumer = _NoOffsetsTopic()  # type: ignore[assignment]

    with pytest.raises(KafkaUnavailableError, match="__consumer_offsets does not exist yet"):
        reader.seek_to_end()


class _HeldBackEnd:
    """A consumer just after a leader election: the new leader's high watermark is not caught up."""

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> SimpleNamespace:
        return SimpleNamespace(topics={topic: SimpleNamespace(error=None, partitions={0: None, 1: None})})

    def get_watermark_offsets(self, *args: object, **kwargs: object) -> tuple[int, int]:
        raise KafkaException(
            KafkaError(KafkaError.OFFSET_NOT_AVAILABLE, "leader high watermark is not caught up")
        )

    def close(self) -> None: ...


def test_an_end_held_back_after_an_election_is_asked_again_not_a_stopped_stream() -> None:
    reader = CommitStreamReader(CLUSTER)
    reader._consumer = _HeldBackEnd()  # type: ignore[assignment]

    with pytest.raises(KafkaUnavailableError, match=r"is held back .*; asking again"):
        reader.seek_to_end()
