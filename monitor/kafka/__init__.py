"""The one package that talks to the Kafka client libraries.

Everything else in `monitor/` gets the typed records of `monitor.core.records` and the named errors of
`monitor.core.errors`; no client-library object or exception leaves this package. Every request is
bounded by the cluster's `request_timeout_seconds` (or an explicit budget) and its client errors
are translated:

- `KafkaUnavailableError`: the cluster did not answer (transport failure, timeout, all brokers
  down, no leader or coordinator available right now). Retrying later may succeed.
- `KafkaRequestError`: a broker answered and refused the request (unknown topic, authorisation,
  invalid configuration, topic already exists ...). Retrying the same request will not help.

Requests over many entities return a `Partial`: what answered, and an error per entity that did
not; they raise only when nothing answered because the cluster did not.

Secrets (SASL and key passwords) go to the clients and nowhere else: the configuration objects
mask them in their repr, and error messages are scrubbed of them before they are raised.

Modules: `properties` (librdkafka configuration), `translate` (errors, `Outcome`, `KafkaCall`),
`records` (client objects -> records), `admin` (`KafkaAdmin`), `leaders` (`LeaderAdmin`:
preferred leader election, and replica reordering over kafka-python), `timestamps`
(`RecordTimestampReader`) with `cursor` (one partition's progress, pure), all over confluent-kafka;
over kafka-python (`pyclient`: options, the client's lifecycle and the IO loop its requests run
on, through kafka-python's public names only; `paced`: requests paced to what a connection takes;
`coordinators`: FindCoordinator): `logdirs` (`LogDirClient`,
DescribeLogDirs, which librdkafka lacks), and the group requests librdkafka's admin client cannot
survive while a coordinator dies: `groups` (`GroupOffsetsClient`, OffsetFetch) and `describe`
(`GroupDescribeClient`, DescribeGroups and ConsumerGroupDescribe, whose messages are in
`messages`), behind `KafkaAdmin.committed_offsets` and `KafkaAdmin.describe_groups`; `probe`
(`ProbeClient`: the end-to-end probe's topic, producer and consumer group). `wire` decodes the
two big answers of a cycle (OffsetFetch v8 for `groups`, ListOffsets for `listoffsets`) straight
from their bytes.

`commit_stream` (`CommitStreamReader`) reads `__consumer_offsets` as it is written, decoded by
`offsets_topic` (pure). Both it and `RecordTimestampReader` are a `consumer.ConsumerClient`: one
consumer that never joins a group, created by `start()` and released by `close()`.

The collectors depend on the protocols of `protocol` (`AdminApi`, `TimestampReader`,
`LogDirReader`, `CommitStream`), not on these classes; `fake` is a cluster in memory behind the
same protocols, with injectable failures, for unit tests and benches (tests/contract holds it to
the real one).
"""

from __future__ import annotations

from monitor.kafka.admin import KafkaAdmin
from monitor.kafka.commit_stream import CommitStreamReader
from monitor.kafka.leaders import LeaderAdmin
from monitor.kafka.logdirs import LogDirClient, describe_log_dirs
from monitor.kafka.probe import ProbeClient
from monitor.kafka.properties import ClientConfig, client_config
from monitor.kafka.pyclient import KafkaPythonOptions, kafka_python_options
from monitor.kafka.records import CONFIG_KEYS
from monitor.kafka.timestamps import RecordTimestampReader

__all__ = [
    "CONFIG_KEYS",
    "ClientConfig",
    "CommitStreamReader",
    "KafkaAdmin",
    "KafkaPythonOptions",
    "LeaderAdmin",
    "LogDirClient",
    "ProbeClient",
    "RecordTimestampReader",
    "client_config",
    "describe_log_dirs",
    "kafka_python_options",
]
