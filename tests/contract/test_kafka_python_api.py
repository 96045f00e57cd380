"""The contract between the monitor and kafka-python's public API: every public call the monitor
relies on (`monitor.kafka.pyclient` and the modules that send requests of their own), checked on
the installed release, so that a release that changes one underneath fails here rather than
collection failing silently.

- unit half (no broker): the signatures and options of the calls, and the fake loop of the unit
  tests (`tests.fixtures.kafka_python`) holding to the real loop's methods;
- real half (the session's dev cluster, marker `integration`): what the calls answer, the
  connection manager that the `kafka_client` option hands over being the admin client's own, and
  a paused connection failing a request with `NodeNotReadyError` (what `monitor.kafka.paced` sends
  again) while paced requests all get their answers.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import tenacity
from kafka.admin import KafkaAdminClient
from kafka.errors import CoordinatorLoadInProgressError, NodeNotReadyError
from kafka.net import KafkaConnectionManager, KafkaNetClient, NetworkSelector
from kafka.protocol.broker_version_data import BrokerVersionData
from kafka.protocol.consumer.group import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from monitor.core.settings import ClusterConfig
from monitor.kafka.coordinators import find_coordinators
from monitor.kafka.paced import send_all
from monitor.kafka.pyclient import Connection, KafkaPythonLoop, connect, kafka_python_options, newest_version
from tests.fixtures.kafka_python import FakeConnectionManager


def parameters(function: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(function).parameters)


# -- unit half: the shape of the calls ---------------------------------------------------------------


CALLS = [
    # (the call, the parameters the monitor passes, in order)
    (KafkaAdminClient.api_versions, ["self"]),
    (KafkaAdminClient.list_group_offsets, ["self", "group_specs"]),
    (KafkaAdminClient.list_groups, ["self", "broker_ids", "states_filter", "types_filter"]),
    (KafkaAdminClient.get_broker_version_data, ["self", "broker_id"]),
    (KafkaAdminClient.describe_features, ["self", "send_request_to_controller"]),
    (KafkaAdminClient.describe_metadata_quorum, ["self"]),
    (KafkaAdminClient.describe_log_dirs, ["self", "topic_partitions", "brokers"]),
    (KafkaAdminClient.describe_topics, ["self", "topics"]),
    (KafkaAdminClient.alter_partition_reassignments, ["self", "reassignments", "timeout_ms"]),
    (KafkaAdminClient.close, ["self"]),
    (KafkaNetClient.__init__, ["self", "net", "manager", "configs"]),
    (NetworkSelector.__init__, ["self", "configs"]),
    (NetworkSelector.sleep, ["self", "delay"]),
    (KafkaConnectionManager.__init__, ["self", "net", "configs"]),
    (KafkaConnectionManager.send, ["self", "request", "node_id", "request_timeout_ms"]),
    (KafkaConnectionManager.call_soon, ["self", "coro", "args"]),
    (KafkaConnectionManager.wait_for, ["self", "future", "timeout_ms"]),
    (KafkaConnectionManager.run, ["self", "coro", "args"]),
    (BrokerVersionData.api_version, ["self", "operation", "min_version", "max_version"]),
]


@pytest.mark.unit
@pytest.mark.parametrize(("call", "expected"), CALLS, ids=[c.__qualname__ for c, _ in CALLS])
def test_the_public_calls_relied_on_take_what_the_monitor_passes(
    call: Callable[..., Any], expected: list[str]
) -> None:
    assert parameters(call) == expected


@pytest.mark.unit
def test_the_admin_client_takes_the_options_the_monitor_gives() -> None:
    options = dict(kafka_python_options(ClusterConfig(name="contract", bootstrap_servers=["127.0.0.1:9"])))
    options.update(kafka_client=None, max_in_flight_requests_per_connection=5)

    assert set(options) <= set(KafkaAdminClient.DEFAULT_CONFIG)
    assert KafkaAdminClient.DEFAULT_CONFIG["max_in_flight_requests_per_connection"] == 5
    assert inspect.iscoroutinefunction(KafkaConnectionManager.wait_for)


@pytest.mark.unit
@pytest.mark.parametrize("method", ["send", "call_soon", "wait_for", "sleep", "run", "api_version"])
def test_the_unit_tests_fake_loop_has_the_real_loops_methods(method: str) -> None:
    real, fake = getattr(KafkaPythonLoop, method), getattr(FakeConnectionManager, method)

    assert parameters(fake)[: len(parameters(real))] == parameters(real)
    assert inspect.iscoroutinefunction(fake) == inspect.iscoroutinefunction(real)


# -- real half: what the calls answer on a broker ----------------------------------------------------


@pytest.fixture
def connection(kafka: Any) -> Iterator[Connection]:
    made = connect(kafka_python_options(kafka.cluster_config("contract", request_timeout_seconds=10)))
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def one_at_a_time(kafka: Any) -> Iterator[Connection]:
    """A connection that takes one request at a time."""
    options = dict(kafka_python_options(kafka.cluster_config("contract", request_timeout_seconds=10)))
    made = connect({**options, "max_in_flight_requests_per_connection": 1})
    try:
        yield made
    finally:
        made.close()


@pytest.mark.integration
def test_the_loop_handed_over_is_the_admin_clients_own(connection: Connection, kafka: Any) -> None:
    async def metadata() -> Any:
        return await connection.loop.send(MetadataRequest(topics=[], allow_auto_topic_creation=False))

    answer = connection.loop.run(metadata)

    assert connection.max_in_flight == 5
    assert sorted(b.node_id for b in answer.brokers) == sorted(kafka.broker_ids)
    assert connection.loop.api_version(OffsetFetchRequest) >= 1
    assert newest_version(connection, OffsetFetchRequest) >= connection.loop.api_version(OffsetFetchRequest)


@pytest.mark.integration
def test_the_admin_calls_answer_in_the_shape_the_monitor_reads(connection: Connection, kafka: Any) -> None:
    topic = kafka.create_topic(partitions=1, replication_factor=1)
    group = f"contract-{time.monotonic_ns()}"
    kafka.commit(group, topic, 0, 0)

    # A coordinator still loading its part of __consumer_offsets after the broker's start says so
    # (a retriable error) until it has: the call is asked again until then.
    loaded = tenacity.retry(
        retry=tenacity.retry_if_exception_type(CoordinatorLoadInProgressError),
        stop=tenacity.stop_after_delay(60),
        wait=tenacity.wait_fixed(0.5),
        reraise=True,
    )
    listed = loaded(connection.admin.list_groups)()
    offsets = connection.admin.list_group_offsets([group])
    versions = connection.admin.get_broker_version_data(kafka.broker_ids[0]).api_versions
    topics = connection.admin.describe_topics([topic])

    assert any(g["group_id"] == group for g in listed)
    assert [(tp.topic, tp.partition, meta.offset) for tp, meta in offsets[group].items()] == [(topic, 0, 0)]
    assert all(isinstance(k, int) and len(v) == 2 for k, v in dict(versions).items())
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in topics] == [(topic, [0])]


@pytest.mark.integration
def test_a_paused_connection_refuses_a_request_and_paced_requests_are_all_answered(
    one_at_a_time: Connection, kafka: Any
) -> None:
    loop, node = one_at_a_time.loop, kafka.broker_ids[0]
    requests = [(node, FindCoordinatorRequest(key=f"g{i}", key_type=0, max_version=3)) for i in range(40)]

    async def at_once(count: int) -> list[BaseException | None]:
        futures = [loop.send(request, node_id=node) for _, request in requests[:count]]
        outcomes: list[BaseException | None] = []
        for future in futures:
            try:
                await future
                outcomes.append(None)
            except Exception as exc:
                outcomes.append(exc)
        return outcomes

    async def paced() -> list[Any]:
        # More senders than the connection takes: each paused send is sent again.
        return await send_all(loop, requests, 10, time.monotonic() + 30, limit=3)

    # Connected first: a connection being made buffers its requests and sends them all once made,
    # past its limit (those not written then wait out the request timeout).
    assert loop.run(at_once, 1) == [None]
    refused = loop.run(at_once, 3)
    answers = loop.run(paced)

    # kafka-python's own metadata request may hold the one slot too: then the first is refused as well.
    assert any(isinstance(e, NodeNotReadyError) for e in refused), refused
    assert all(e is None or isinstance(e, NodeNotReadyError) for e in refused), refused
    assert [getattr(a, "error_code", a) for a in answers] == [0] * len(requests)


@pytest.mark.integration
def test_coordinators_are_found_for_many_groups_at_once(connection: Connection, kafka: Any) -> None:
    # Before Kafka 3.0 one request per group: 1,200 requests on the connections of a 3-node cluster.
    groups = [f"contract-{i}" for i in range(1_200)]
    failed: list[tuple[str, BaseException]] = []

    async def find() -> dict[str, int]:
        return await find_coordinators(connection.loop, groups, 10, lambda g, e: failed.append((g, e)))

    found = connection.loop.run(find)

    assert failed == []
    assert set(found) == set(groups)
    assert set(found.values()) <= set(kafka.broker_ids)
