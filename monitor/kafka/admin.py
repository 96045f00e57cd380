"""`KafkaAdmin`: admin requests to one cluster through confluent-kafka, answered with records;
the requests to group coordinators go through kafka-python (`monitor.kafka.groups`, `.describe`).

Partial-failure policy, the same for every request over many entities (partitions, groups,
topics): an entity that fails is reported in `Partial.errors` under its key and the others are
returned; the request raises only when nothing answered because the cluster did not
(`KafkaUnavailableError`). Requests about the cluster as a whole raise on any failure.
"""

from __future__ import annotations

import concurrent.futures
import logging
import sys
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from confluent_kafka import (
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    TopicCollection,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, but not in its `__all__`
    AdminClient,
    ConfigResource,
    ResourceType,
)
from confluent_kafka.cimpl import NewTopic

from monitor.core.errors import KafkaAuthenticationError, KafkaUnavailableError
from monitor.core.records import (
    ClusterInfo,
    CommittedOffset,
    GroupDescription,
    ListedOffsets,
    Partial,
    PartitionOffsets,
    TopicConfigEntry,
    TopicInfo,
)
from monitor.core.records import TopicPartition as TopicPartitionKey
from monitor.core.settings import ClusterConfig
from monitor.kafka import records
from monitor.kafka.describe import GroupDescribeClient
from monitor.kafka.groups import GROUPS_PER_REQUEST, GroupOffsetsClient
from monitor.kafka.listoffsets import LeaderOffsetsClient, sorted_answers
from monitor.kafka.properties import ClientConfig, ClientLog, client_config, rejected_configuration
from monitor.kafka.records import CONFIG_KEYS
from monitor.kafka.registry import BrokerRegistryClient
from monitor.kafka.translate import (
    FUTURE_GRACE_SECONDS,
    KafkaCall,
    Outcome,
    is_security_failure,
    is_unknown_topic,
    kafka_error,
)

log = logging.getLogger(__name__)

# Entities per request where the API takes many: bounded so one request stays a few hundred KB.
_TOPICS_PER_REQUEST: Final = 100
_CONSUMER_GROUP_TYPES: Final = {ConsumerGroupType.CLASSIC, ConsumerGroupType.CONSUMER}
_UNSUPPORTED: Final = frozenset({KafkaError.UNSUPPORTED_VERSION, KafkaError._UNSUPPORTED_FEATURE})
# A broker learns of a new topic from the controller a moment after it was created, and each
# describe goes to a broker the client picks: a topic one broker does not know yet is asked for
# again after these pauses (seconds, within the request's timeout) before it counts as unknown.
_UNKNOWN_TOPIC_PAUSES: Final = (0.1, 0.3, 1.0)


def _is_internal_name(name: str) -> bool:
    # Kafka's own topics (__consumer_offsets, __transaction_state, __share_group_state ...).
    return name.startswith("__")


def _destroy(client: AdminClient) -> None:
    """Destroy a client now, on this thread (the GIL is released while librdkafka waits for its
    threads). Destroying an already destroyed client does nothing."""
    client.__exit__(None, None, None)


def _chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


class KafkaAdmin:
    """Admin requests to one cluster, answered with typed records.

    The constructor only builds the client configuration; `start()` creates the client (it
    connects lazily on the first request) and `close()` releases it. Each request blocks the
    calling thread for at most about `cluster.request_timeout_seconds` (plus a few seconds of
    grace) and raises `KafkaUnavailableError` (no answer) or `KafkaRequestError` (refused). After
    an unavailable error the client is replaced, so a dead controller does not wedge later
    requests.

    Several threads may use one instance at once: librdkafka's client handle is thread-safe and
    every request only enqueues work and waits on its own futures; the one shared mutable thing,
    the replacement of the client, happens under a lock.
    """

    def __init__(self, cluster: ClusterConfig) -> None:
        self._cluster = cluster
        self._config = client_config(cluster)
        self._client: AdminClient | None = None
        self._groups = GroupOffsetsClient(cluster)
        self._describe = GroupDescribeClient(cluster)
        self._offsets = LeaderOffsetsClient(cluster)
        self._registry = BrokerRegistryClient(cluster)
        self._retired: list[tuple[float, AdminClient]] = []
        self.retire_delay = cluster.request_timeout_seconds + FUTURE_GRACE_SECONDS
        """Seconds a replaced client is kept before it is destroyed (see `_destroy_unused_retired`)."""
        self._generation = 0
        self._lock = threading.Lock()
        self._security_failure: tuple[float, str] | None = None

    def __repr__(self) -> str:
        state = "started" if self._client is not None else "not started"
        return f"KafkaAdmin(cluster={self._cluster.name!r}, {state})"

    @property
    def cluster(self) -> ClusterConfig:
        return self._cluster

    @property
    def config(self) -> ClientConfig:
        return self._config

    @property
    def timeout(self) -> float:
        return self._cluster.request_timeout_seconds

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Create the client. Raises ConfigError if librdkafka rejects the configuration."""
        with self._lock:
            if self._client is None:
                self._client = self._new_client()
        self._groups.start()
        self._describe.start()
        self._offsets.start()
        self._registry.start()

    def _new_client(self) -> AdminClient:
        try:
            settings: dict[str, Any] = {**self._config, "error_cb": self._client_error}
            return AdminClient(settings, logger=ClientLog())
        except KafkaException as exc:
            secrets = self._config.secret_values()
            raise rejected_configuration(exc, self._cluster.name, secrets, "the Kafka client") from exc

    def _client_error(self, error: KafkaError) -> None:
        """librdkafka's report of an error outside any request (served when the client is polled):
        the last rejection of the credentials or certificate is kept to explain failed requests."""
        if is_security_failure(error):
            self._security_failure = (time.monotonic(), error.str())

    def security_failure(self, since: float) -> str | None:
        """What the brokers said when they last rejected the credentials or certificate, if that
        happened at or after `since` (a `time.monotonic()` value)."""
        failure = self._security_failure
        return failure[1] if failure is not None and failure[0] >= since else None

    def _renew(self, generation: int) -> None:
        """Replace the client after the cluster did not answer a request made with `generation`.

        librdkafka remembers which broker it last saw as the controller and, when that broker
        dies, keeps waiting for it request after request; a new client asks the cluster afresh.
        So one request fails after a broker failure, and the next one works again. When several
        threads fail at once only the first replaces the client.
        """
        with self._lock:
            if self._client is not None and generation == self._generation:
                self._drain_logs()
                self._retired.append((time.monotonic(), self._client))
                self._client = self._new_client()
                self._generation += 1
            self._destroy_unused_retired()

    def _destroy_unused_retired(self) -> None:
        """Destroy the replaced clients that nothing but `_retired` refers to any more and whose
        requests have all timed out.

        A client must never be destroyed on one of its own librdkafka threads: librdkafka aborts
        the process. That is what happens when the last reference to an AdminClient goes in a
        garbage collection that runs while that client's background thread completes a future
        (a client kept alive by a reference cycle, e.g. through an exception's traceback). So
        every client is destroyed here, explicitly, on a thread of ours: a replaced one once no
        request is using it and `retire_delay` has passed (destroying a client while its requests
        to a dead broker are still pending is another path into librdkafka's fragile failure
        handling), the current one in `close()`. Call with the lock held.
        """
        # References while checking: the tuple, the loop variable and getrefcount's argument.
        only_ours = 3
        now = time.monotonic()
        kept = []
        for retired_at, client in self._retired:
            if now - retired_at < self.retire_delay or sys.getrefcount(client) > only_ours:
                kept.append((retired_at, client))
            else:
                _destroy(client)
        self._retired = kept

    def close(self) -> None:
        """Destroy the client and every replaced one. Requests still waiting on them fail."""
        with self._lock:
            if self._client is not None:
                self._drain_logs()
                self._retired.append((time.monotonic(), self._client))
            self._client = None
            for _, client in self._retired:
                _destroy(client)
            self._retired = []
        self._groups.close()
        self._describe.close()
        self._offsets.close()
        self._registry.close()

    def __enter__(self) -> KafkaAdmin:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _admin(self) -> AdminClient:
        client = self._client
        if client is None:
            raise RuntimeError("KafkaAdmin.start() must be called before making requests")
        return client

    def _call(self, action: str) -> KafkaCall:
        if self._retired:
            with self._lock:
                self._destroy_unused_retired()
        return KafkaCall(self, action)

    def _outcome(self) -> Outcome:
        return Outcome(self._config.secret_values(), self.timeout)

    def _drain_logs(self) -> None:
        # The client forwards its log lines to the log only when polled.
        client = self._client
        if client is not None:
            client.poll(0)

    # -- cluster and topics -----------------------------------------------------------------

    def describe_cluster(self) -> ClusterInfo:
        """The cluster id, the active controller (a KRaft cluster's from its metadata quorum:
        `monitor.kafka.registry`), the live brokers, and the ids of the brokers
        registered with the controller (alive or fenced: `ClusterInfo.registered`) and the Kafka
        release of the oldest live broker (`ClusterInfo.kafka_version`), both asked through
        kafka-python (`monitor.kafka.registry`; None when unknown).

        DescribeCluster waits for an active controller; a cluster that has lost its controller
        quorum (or has not elected one yet) still serves metadata from its brokers, so then the
        brokers come from a Metadata request instead (without racks, which only DescribeCluster
        returns, and without the registered brokers and the release). Raises
        KafkaUnavailableError when neither answers.
        """
        try:
            with self._call("describe the cluster") as call:
                future = self._admin().describe_cluster(request_timeout=self.timeout / 2)
                info = records.cluster_info(future.result(timeout=min(call.remaining(), self.timeout / 2)))
            quorum, leader = self._registry.active_controller()
            return replace(
                info,
                controller_id=leader if quorum else info.controller_id,
                registered=self._registry.registered_brokers(),
                kafka_version=self._registry.kafka_version(info.broker_ids),
            )
        except KafkaAuthenticationError:
            raise  # asking again another way cannot help
        except KafkaUnavailableError as exc:
            log.warning("DescribeCluster failed (%s); reading the brokers from the metadata instead", exc)
        with self._call("read the cluster metadata"):
            metadata = self._admin().list_topics(timeout=self.timeout)
        return records.cluster_info_from_metadata(metadata)

    def list_topic_names(self, include_internal: bool) -> list[str]:
        """Names of all topics, sorted; Kafka's own `__` topics only when `include_internal`."""
        with self._call("list topics"):
            metadata = self._admin().list_topics(timeout=self.timeout)
        names = sorted(str(name) for name in metadata.topics)
        return [n for n in names if include_internal or not _is_internal_name(n)]

    def describe_topics(self, names: Sequence[str], skip_unknown: bool = False) -> list[TopicInfo]:
        """Partitions (leader, replicas, ISR) of each named topic, in the order given.

        An unknown topic (asked for again first: `_UNKNOWN_TOPIC_PAUSES`) raises KafkaRequestError
        naming it, or with `skip_unknown` is left out.
        """
        if not names:
            return []
        found: dict[str, TopicInfo] = {}
        pending = list(dict.fromkeys(names))
        with self._call("describe topics") as call:
            for pause in (*_UNKNOWN_TOPIC_PAUSES, None):
                pending = self._describe_pass(pending, call, found, pause, skip_unknown)
                if pause is None or not pending:
                    break
                time.sleep(pause)
        return [found[name] for name in names if name in found]

    def _describe_pass(
        self,
        names: list[str],
        call: KafkaCall,
        found: dict[str, TopicInfo],
        pause: float | None,
        skip_unknown: bool,
    ) -> list[str]:
        """Describe `names` into `found`; returns the unknown ones to ask for again after `pause`
        (while the call has that long left). An unknown one not asked for again raises, or with
        `skip_unknown` is left out."""
        futures = self._admin().describe_topics(TopicCollection(names), request_timeout=self.timeout)
        unknown: list[str] = []
        for name in names:
            with self._call(f"describe topic {name!r}"):
                try:
                    found[name] = records.topic_info(futures[name].result(timeout=call.remaining()))
                except KafkaException as exc:
                    if not is_unknown_topic(exc):
                        raise
                    if pause is not None and call.remaining() > pause:
                        unknown.append(name)
                    elif not skip_unknown:
                        raise
        return unknown

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        """Create a topic and wait (up to the timeout) until the controller has created it."""
        topic = NewTopic(
            name,
            num_partitions=partitions,
            replication_factor=replication_factor,
            config=dict(configs or {}),
        )
        with self._call(f"create topic {name!r}") as call:
            futures = self._admin().create_topics(
                [topic], request_timeout=self.timeout, operation_timeout=self.timeout
            )
            futures[name].result(timeout=call.remaining())

    def describe_topic_configs(
        self, topics: Sequence[str], names: Collection[str] | None = CONFIG_KEYS
    ) -> Partial[dict[str, list[TopicConfigEntry]]]:
        """The configs called `names` (all when None) of each topic, with where each value comes from.

        Topics go `_TOPICS_PER_REQUEST` to a DescribeConfigs request, all requests in flight at
        once; blocks until all answered or the timeout passed. Sensitive values are None. A topic
        that fails (unknown, not authorised) is in `errors` under its name. Raises
        KafkaUnavailableError when no topic answered because the cluster did not.
        """
        wanted = list(dict.fromkeys(topics))
        value: dict[str, list[TopicConfigEntry]] = {}
        outcome = self._outcome()
        if not wanted:
            return Partial(value, outcome.errors)
        with self._call("describe topic configs") as call:
            client = self._admin()
            futures: dict[str, concurrent.futures.Future[Any]] = {}
            for chunk in _chunks(wanted, _TOPICS_PER_REQUEST):
                resources = [ConfigResource(ResourceType.TOPIC, name) for name in chunk]
                for resource, future in client.describe_configs(
                    resources, request_timeout=self.timeout
                ).items():
                    futures[str(resource.name)] = future
            concurrent.futures.wait(futures.values(), timeout=call.remaining())
            for topic in wanted:
                future = futures[topic]
                try:
                    entries = future.result(timeout=0)
                except Exception as exc:
                    outcome.failure(topic, exc)
                    continue
                value[topic] = records.topic_config_entries(topic, entries, names)
                outcome.success()
            _raise_if_unreachable(outcome)
        return Partial(value, outcome.errors)

    # -- offsets ----------------------------------------------------------------------------

    def list_offsets(
        self,
        partitions: Sequence[TopicPartitionKey],
        leaders: Mapping[TopicPartitionKey, int] | None = None,
        known: Mapping[TopicPartitionKey, PartitionOffsets] | None = None,
    ) -> ListedOffsets:
        """Earliest, latest and max-timestamp offsets of every partition; the max timestamp only
        of the partitions whose start or end offset moved since `known` (the previous listing),
        the others keep its (`monitor.kafka.listoffsets` says why).

        One request per leader and kind through kafka-python (`leaders`, a hint: partition ->
        broker id; `monitor.kafka.listoffsets` says why not librdkafka); partitions whose leader
        had moved or could not be reached are asked once more of the current one. Blocks for at
        most about two request timeouts. A partition whose earliest or latest offset failed, or
        whose leader did not answer, is in `errors` as "topic:partition"; one whose max timestamp alone failed
        is returned without it. A partition whose leader cannot give its end offset now
        (OFFSET_NOT_AVAILABLE: high watermark held back, under min ISR) is in `held_back`, neither
        failed nor in `value`. Raises KafkaUnavailableError when no partition answered because
        the cluster did not.
        """
        wanted = list(dict.fromkeys((str(t), int(p)) for t, p in partitions))
        outcome = self._outcome()
        if not wanted:
            return ListedOffsets({}, outcome.errors)
        with self._call("list offsets"):
            value, held_back = sorted_answers(self._offsets.list_offsets(wanted, leaders, known), outcome)
            _raise_if_unreachable(outcome)
        return ListedOffsets(value, outcome.errors, held_back)

    def list_end_offsets(
        self, partitions: Sequence[TopicPartitionKey], leaders: Mapping[TopicPartitionKey, int] | None = None
    ) -> Partial[dict[TopicPartitionKey, int]]:
        """The end offset of every partition and nothing else (one request per leader: the
        refresh between two cycles of `list_offsets`). A partition that failed is in `errors` as
        "topic:partition"; one whose end offset is held back (under min ISR) is in neither.
        Raises KafkaUnavailableError when no partition answered because the cluster did not."""
        wanted = list(dict.fromkeys((str(t), int(p)) for t, p in partitions))
        outcome = self._outcome()
        if not wanted:
            return Partial({}, outcome.errors)
        with self._call("list end offsets"):
            value, _ = sorted_answers(self._offsets.list_end_offsets(wanted, leaders), outcome)
            _raise_if_unreachable(outcome)
        return Partial(value, outcome.errors)

    # -- consumer groups --------------------------------------------------------------------

    def list_group_ids(self) -> list[str]:
        """Ids of all consumer groups (classic and KIP-848 protocol, every state including Empty).

        One ListGroups request per broker; blocks until all answered or the timeout passed. Raises
        KafkaUnavailableError or KafkaRequestError when any broker failed: a listing with some
        coordinators missing would make their groups look deleted.
        """
        with self._call("list consumer groups") as call:
            client = self._admin()
            future = client.list_consumer_groups(request_timeout=self.timeout, types=_CONSUMER_GROUP_TYPES)
            result = future.result(timeout=call.remaining())
            if result.errors and all(_code(e) in _UNSUPPORTED for e in result.errors):
                # Brokers before 3.8 cannot filter by group type (ListGroups v5).
                future = client.list_consumer_groups(request_timeout=self.timeout)
                result = future.result(timeout=call.remaining())
            for error in result.errors or []:
                raise error if isinstance(error, KafkaException) else KafkaException(error)
        return sorted({str(listing.group_id) for listing in result.valid or []})

    def list_unwatched_groups(self) -> dict[str, str]:
        """Groups of the types the monitor does not watch (share, streams ...), id -> type, through
        kafka-python's ListGroups: see `monitor.kafka.describe.GroupDescribeClient.unwatched_groups`."""
        return self._describe.unwatched_groups()

    def describe_groups(self, group_ids: Sequence[str]) -> Partial[list[GroupDescription]]:
        """State, members, assignments and coordinator of each group (classic and KIP-848), in
        the order given, through kafka-python: see `monitor.kafka.describe` for why not
        librdkafka. A group that failed is in `errors` under its id; a group that does not exist
        is described as "Dead". Raises KafkaUnavailableError when no group answered because the
        cluster did not."""
        return self._describe.describe_groups(group_ids)

    def committed_offsets(
        self, group_ids: Sequence[str], groups_per_request: int = GROUPS_PER_REQUEST
    ) -> Partial[dict[str, list[CommittedOffset]]]:
        """Each group's committed offsets (partitions without one are left out), through
        kafka-python: see `monitor.kafka.groups` for why not librdkafka. A group that failed is in
        `errors` under its id. Raises KafkaUnavailableError when no group answered because the
        cluster did not."""
        return self._groups.committed_offsets(group_ids, groups_per_request)


def _code(error: object) -> int | None:
    inner = kafka_error(error) if isinstance(error, BaseException) else error
    return inner.code() if isinstance(inner, KafkaError) else None


def _raise_if_unreachable(outcome: Outcome) -> None:
    """Inside a `KafkaCall`: raise the cluster's "no answer" when nothing answered."""
    failure = outcome.unreachable()
    if failure is not None:
        raise failure
