"""A configuration librdkafka refuses is a ConfigError naming the cluster, with no secret in it,
for every client that builds a librdkafka object (no broker is contacted)."""

from __future__ import annotations

import pytest

from monitor.core.errors import ConfigError
from monitor.core.settings import ClusterConfig
from monitor.kafka import KafkaAdmin, RecordTimestampReader
from monitor.kafka.commit_stream import CommitStreamReader


@pytest.mark.parametrize("client", [KafkaAdmin, RecordTimestampReader, CommitStreamReader])
def test_a_refused_property_names_the_cluster_and_hides_the_password(client: type) -> None:
    cluster = ClusterConfig.model_validate(
        {
            "name": "east",
            "bootstrap_servers": ["127.0.0.1:1"],
            "security": {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                         "sasl_username": "u", "sasl_password": "hunter2-secret"},
            "client_config": {"socket.timeout.ms": "hunter2-secret"},
        }
    )  # fmt: skip
    made = client(cluster)
    with pytest.raises(ConfigError) as raised:
        made.start()
    text = str(raised.value)
    assert "clusters.east:" in text and "rejected the configuration" in text
    assert "hunter2-secret" not in text
