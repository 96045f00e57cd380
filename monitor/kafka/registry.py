"""The brokers registered with the controller, and the Kafka release the brokers run, through
kafka-python (librdkafka's DescribeCluster lists only the live ones, and says no version).

DescribeCluster v2 (KIP-1073, Kafka 4.0) with `IncludeFencedBrokers` also lists the brokers the
controller still has registered but fenced: a broker that stopped stays registered until it is
unregistered (`kafka-cluster.sh unregister`, the admin API's unregisterBroker), which is how a
decommissioned broker is told apart from one that is down.

The release comes from the ApiVersions answer kafka-python negotiates on each connection
(`pyclient.kafka_version_of`).

The active controller of a KRaft cluster comes from the metadata quorum (DescribeQuorum, Kafka
3.3+): there the controller id of DescribeCluster and Metadata is any live broker, chosen anew
for each answer (clients cannot reach the controllers), so it changes from one sample to the
next. A ZooKeeper cluster has no quorum to describe, and its DescribeCluster names the real one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import kafka.errors
from kafka.protocol.admin import DescribeClusterRequest

from monitor.core.kafka_features import KafkaVersion
from monitor.core.settings import ClusterConfig
from monitor.kafka.pyclient import KafkaPythonClient, kafka_version_of

log = logging.getLogger(__name__)

_FENCED_BROKERS_VERSION = 2
"""The first DescribeCluster version that can include fenced brokers."""


class BrokerRegistryClient(KafkaPythonClient):
    """Which brokers the controller has registered (see `KafkaPythonClient` for the lifecycle)."""

    def __init__(self, cluster: ClusterConfig) -> None:
        super().__init__(cluster)
        self._unidentified: set[int] = set()
        """The brokers whose release could not be read, said once until one is read again."""
        self._quorum_unknown = False
        """Whether the metadata quorum's failure was said (once, until it answers again)."""

    def registered_brokers(self) -> tuple[int, ...] | None:
        """Ids of the registered brokers, alive or fenced, sorted; None when the cluster cannot
        say (a broker older than Kafka 4.0) or did not answer: then a broker missing from the live
        ones counts as down, never as gone. Blocks for at most one request timeout."""
        with self._lock:
            self._require_started()
            try:
                loop = self._connect().loop
                request = DescribeClusterRequest(
                    include_cluster_authorized_operations=False,
                    include_fenced_brokers=True,
                    min_version=_FENCED_BROKERS_VERSION,
                )
                timeout_ms = int(self.timeout * 1000)

                async def ask() -> Any:
                    return await loop.send(request, request_timeout_ms=timeout_ms)

                response = loop.run(ask)
            except kafka.errors.IncompatibleBrokerVersion:
                return None
            except Exception as exc:  # any failure: unknown, so nothing is taken as gone
                log.info("cluster %s: registered brokers unknown: %s", self._cluster.name, self._text(exc))
                self._discard()
                return None
        if response.error_code:
            return None
        return tuple(sorted(int(b.broker_id) for b in response.brokers))

    def active_controller(self) -> tuple[bool, int | None]:
        """(whether the cluster has a KRaft metadata quorum, the node id of its leader: the active
        controller). (False, None) when it has none (ZooKeeper mode, or a release before 3.3) or
        did not answer: the caller keeps DescribeCluster's controller, the real one in ZooKeeper
        mode. (True, None) when the quorum's leader is not known: Kafka 3.3 to 3.7 answer
        DescribeQuorum in versions 0 and 1, which kafka-python cannot read (it looks for the
        partition's error message, added in version 2), and there DescribeCluster names any live
        broker, so the controller is reported unknown rather than wrong. Blocks for at most one
        request timeout; never raises."""
        with self._lock:
            self._require_started()
            try:
                quorum = self._connect().admin.describe_metadata_quorum()
            except (kafka.errors.IncompatibleBrokerVersion, kafka.errors.UnsupportedVersionError):
                return False, None
            except KeyError as exc:  # an answer kafka-python cannot read (before Kafka 3.8)
                self._say_quorum_unknown(f"its DescribeQuorum answer is unreadable (no {exc})")
                return True, None
            except Exception as exc:  # unknown for now: the next sample asks again
                self._say_quorum_unknown(self._text(exc))
                return False, None
        self._quorum_unknown = False
        for topic in quorum.get("topics") or ():
            for partition in topic.get("partitions") or ():
                leader = partition.get("leader_id")
                if partition.get("error") is None and isinstance(leader, int) and leader >= 0:
                    return True, leader
        return True, None

    def _say_quorum_unknown(self, why: str) -> None:
        if not self._quorum_unknown:
            self._quorum_unknown = True
            log.info("cluster %s: the active controller is unknown: %s (said once)", self._cluster.name, why)

    def kafka_version(self, broker_ids: Sequence[int]) -> KafkaVersion | None:
        """The oldest Kafka release among the brokers `broker_ids` (during a rolling upgrade the
        oldest decides what the cluster gives), from the ApiVersions each answered; None when no
        broker could be identified. Never raises: a broker that fails is left out. Blocks for at
        most one connection per broker not connected yet."""
        found: list[KafkaVersion] = []
        with self._lock:
            self._require_started()
            for broker_id in broker_ids:
                try:
                    answered = self._connect().admin.get_broker_version_data(broker_id).api_versions
                except Exception as exc:  # unknown for now: the next run asks again
                    if broker_id not in self._unidentified:
                        self._unidentified.add(broker_id)
                        log.info(
                            "cluster %s: the Kafka version of broker %s is unknown: %s"
                            " (said once until it is known)",
                            self._cluster.name,
                            broker_id,
                            self._text(exc),
                        )
                    continue
                self._unidentified.discard(broker_id)
                version = kafka_version_of(answered or {})
                if version is not None:
                    found.append(version)
        return min(found, default=None)
