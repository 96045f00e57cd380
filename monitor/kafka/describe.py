"""Consumer groups described through kafka-python: DescribeGroups, and ConsumerGroupDescribe for
KIP-848 ("consumer" protocol) groups.

librdkafka's admin DescribeConsumerGroups sends coordinator-targeted requests like its
ListConsumerGroupOffsets (see `monitor.kafka.groups`), with the same failure handling that can
abort or crash the whole process when a group coordinator dies during the request (librdkafka
issues 4605, 3663 and 5040). kafka-python fails such a request with an exception instead. Its
admin client cannot describe KIP-848 groups, though, so the requests are built here from its
protocol messages (and ours, `monitor.kafka.messages`) and sent on its IO loop:

1. FindCoordinator for every group (`monitor.kafka.coordinators`), asked afresh on every call.
2. DescribeGroups to each coordinator, `groups_per_request` groups per request, at most a
   connection's share of requests in flight to each at once (`monitor.kafka.paced`: sent all at
   once, kafka-python failed most of them at 5,000 groups with "Node paused: max_in_flight").
3. The groups the classic answer calls unknown (GROUP_ID_NOT_FOUND, or "Dead" before v6):
   ConsumerGroupDescribe to the same coordinator. A KIP-848 group is one of them; a group unknown
   there too (or to a broker without that API, before 3.7, or with it switched off, 3.7 to 3.9:
   UNSUPPORTED_VERSION per group) does not exist and is described as "Dead".

Each step waits at most the request timeout (plus a few seconds of grace) for all its requests;
a FindCoordinator that got no answer is asked once more, of another broker. A coordinator that
fails fails only its own groups (and its queued requests at once, not one timeout each).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import kafka.errors
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolType

from monitor.core.records import GroupDescription, GroupMember, Partial, TopicPartition
from monitor.kafka.coordinators import chunks, error_of, find_coordinators
from monitor.kafka.messages import ConsumerGroupDescribeRequest
from monitor.kafka.paced import in_flight_limit, send_all
from monitor.kafka.pyclient import KafkaPythonClient, KafkaPythonLoop, unavailable
from monitor.kafka.translate import FUTURE_GRACE_SECONDS, Outcome

log = logging.getLogger(__name__)

GROUPS_PER_REQUEST: Final = 100
_GRACE_SECONDS = FUTURE_GRACE_SECONDS
_GROUP_ID_NOT_FOUND: Final = kafka.errors.GroupIdNotFoundError.errno
_UNSUPPORTED_VERSION: Final = kafka.errors.UnsupportedVersionError.errno
_NO_KIP848_GROUP: Final = frozenset({_GROUP_ID_NOT_FOUND, _UNSUPPORTED_VERSION})
"""ConsumerGroupDescribe's answers for a group that is no KIP-848 group: not found, or (3.7 to
3.9, where the API is listed but the "consumer" protocol is off) the API refused per group."""
_DEAD: Final = "Dead"


def _by_member_id(member: GroupMember) -> str:
    return member.member_id


def _state(name: object) -> str:
    return str(name) if name else "Unknown"


# -- answers -> records ----------------------------------------------------------------------------


def classic_assignment(data: bytes | None) -> tuple[TopicPartition, ...]:
    """A classic consumer member's assignment (the consumer protocol's bytes), sorted; empty when
    there is none (the group is rebalancing) or it cannot be read."""
    if not data:
        return ()
    try:
        assignment = ConsumerProtocolAssignment.decode(bytes(data))
        return tuple(
            sorted((str(t.topic), int(p)) for t in assignment.assigned_partitions for p in t.partitions)
        )
    except Exception as exc:
        log.debug("cannot read a member assignment of %d bytes: %s", len(data), exc)
        return ()


def classic_description(group: Any, coordinator: int) -> GroupDescription:
    """A DescribeGroups answer as a record. `protocol_type` is what Kafka reports: "consumer" for
    consumer groups, "" for a simple group (offsets committed without ever joining), "connect" ..."""
    protocol_type = str(group.protocol_type or "")
    consumer = protocol_type == ConsumerProtocolType
    members = (
        GroupMember(
            member_id=str(m.member_id),
            client_id=str(m.client_id),
            host=str(m.client_host),
            assignment=classic_assignment(m.member_assignment) if consumer else (),
            group_instance_id=m.group_instance_id or None,
        )
        for m in group.members
    )
    return GroupDescription(
        group_id=str(group.group_id),
        state=_state(group.group_state),
        protocol_type=protocol_type,
        protocol=str(group.protocol_data or "") or None,
        coordinator=coordinator,
        members=tuple(sorted(members, key=_by_member_id)),
        is_simple=protocol_type == "",
    )


def current_assignment(member: Any) -> tuple[TopicPartition, ...]:
    """A member's current assignment (topic names and partitions), sorted, in the answers of the
    KIP-848 and KIP-932 describes alike (ConsumerGroupDescribe, ShareGroupDescribe)."""
    topics = member.assignment.topic_partitions if member.assignment is not None else []
    owned = ((str(t.topic_name), int(p)) for t in topics if t.topic_name for p in t.partitions)
    return tuple(sorted(owned))


def consumer_description(group: Any, coordinator: int) -> GroupDescription:
    """A ConsumerGroupDescribe answer (a KIP-848 group) as a record: its server-side assignor is
    the protocol and each member's current assignment (not its target) is its assignment."""
    members = (
        GroupMember(
            member_id=str(m.member_id),
            client_id=str(m.client_id),
            host=str(m.client_host),
            assignment=current_assignment(m),
            group_instance_id=m.instance_id or None,
        )
        for m in group.members
    )
    return GroupDescription(
        group_id=str(group.group_id),
        state=_state(group.group_state),
        protocol_type=ConsumerProtocolType,
        protocol=str(group.assignor_name or "") or None,
        coordinator=coordinator,
        members=tuple(sorted(members, key=_by_member_id)),
    )


def dead_description(group_id: str, coordinator: int | None) -> GroupDescription:
    """A group its coordinator does not know (never existed, or deleted)."""
    return GroupDescription(group_id, _DEAD, "", None, coordinator, ())


# -- one call on kafka-python's IO loop --------------------------------------------------------------

_Answer = Callable[[Any, int], bool]
"""Takes one group's answer and its coordinator; True passes the group on to the next step."""


class _Call:
    """The requests of one `describe_groups` call, run on kafka-python's IO loop by `run`, paced
    to at most `limit` requests in flight per coordinator (`monitor.kafka.paced`)."""

    def __init__(
        self, loop: KafkaPythonLoop, timeout: float, groups_per_request: int, outcome: Outcome, limit: int
    ) -> None:
        self._loop = loop
        self._timeout = timeout
        self._per_request = groups_per_request
        self._outcome = outcome
        self._limit = limit
        self.described: dict[str, GroupDescription] = {}

    async def run(self, group_ids: list[str]) -> None:
        coordinators = await find_coordinators(
            self._loop, group_ids, self._timeout, self._outcome.failure, self._limit
        )
        unknown = await self._ask(coordinators, self._describe_groups, self._classic)
        await self._ask(unknown, self._consumer_group_describe, self._consumer)

    def finish(self, group_ids: Sequence[str], failure: BaseException | None) -> None:
        """Account for the groups that got no answer: `failure` ended the call, or none came."""
        for group_id in group_ids:
            if group_id in self.described or group_id in self._outcome.errors:
                continue
            if failure is not None:
                self._outcome.failure(group_id, failure)
            else:
                self._outcome.unanswered(group_id, "its coordinator's answer left it out")

    def _describe_groups(self, group_ids: list[str]) -> Any:
        return DescribeGroupsRequest(groups=group_ids, include_authorized_operations=False)

    def _consumer_group_describe(self, group_ids: list[str]) -> Any:
        return ConsumerGroupDescribeRequest(group_ids=group_ids, include_authorized_operations=False)

    async def _ask(
        self, coordinators: Mapping[str, int], request: Callable[[list[str]], Any], answer: _Answer
    ) -> dict[str, int]:
        """Send `request` to each coordinator for its groups, paced, and hand each group's
        answer to `answer`; returns the groups it passed on, with their coordinators."""
        by_node: dict[int, list[str]] = {}
        for group_id, node in coordinators.items():
            by_node.setdefault(node, []).append(group_id)
        asked = [
            (node, chunk)
            for node, group_ids in sorted(by_node.items())
            for chunk in chunks(group_ids, self._per_request)
        ]
        until = time.monotonic() + self._timeout + _GRACE_SECONDS
        answers = await send_all(
            self._loop, [(node, request(chunk)) for node, chunk in asked], self._timeout, until, self._limit
        )
        passed: dict[str, int] = {}
        for (node, chunk), response in zip(asked, answers, strict=True):
            if isinstance(response, kafka.errors.IncompatibleBrokerVersion):
                # Only ConsumerGroupDescribe can be missing: a broker before Kafka 3.7 has no
                # KIP-848 groups, so a group its DescribeGroups does not know does not exist.
                log.debug("broker %s: %s; %d unknown groups are Dead", node, response, len(chunk))
                for group_id in chunk:
                    self.described[group_id] = dead_description(group_id, node)
                    self._outcome.success()
                continue
            if isinstance(response, BaseException):
                for group_id in chunk:
                    self._outcome.failure(group_id, response)
                continue
            for group in response.groups:
                if str(group.group_id) in chunk and answer(group, node):
                    passed[str(group.group_id)] = node
        return passed

    def _classic(self, group: Any, node: int) -> bool:
        if group.error_code == _GROUP_ID_NOT_FOUND or (not group.error_code and group.group_state == _DEAD):
            return True
        if group.error_code:
            self._outcome.failure(str(group.group_id), error_of(group.error_code, group.error_message))
        else:
            self.described[str(group.group_id)] = classic_description(group, node)
            self._outcome.success()
        return False

    def _consumer(self, group: Any, node: int) -> bool:
        group_id = str(group.group_id)
        if group.error_code in _NO_KIP848_GROUP:
            self.described[group_id] = dead_description(group_id, node)
        elif group.error_code:
            self._outcome.failure(group_id, error_of(group.error_code, group.error_message))
            return False
        else:
            self.described[group_id] = consumer_description(group, node)
        self._outcome.success()
        return False


WATCHED_GROUP_TYPES: Final = frozenset({"classic", "consumer"})
"""The group types (ListGroups v5, Kafka 3.8+) whose groups the monitor watches."""


def unwatched_of(listed: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Of kafka-python's ListGroups answers (dicts), the groups of other types: id -> type. A
    broker before 3.8 names no type: its groups are all consumer groups."""
    found: dict[str, str] = {}
    for group in listed:
        kind = str(group.get("group_type") or "").lower()
        if kind and kind not in WATCHED_GROUP_TYPES:
            found[str(group.get("group_id"))] = kind
    return dict(sorted(found.items()))


class GroupDescribeClient(KafkaPythonClient):
    """Descriptions of consumer groups (classic and KIP-848) for one cluster."""

    def unwatched_groups(self) -> dict[str, str]:
        """The groups every broker lists whose type the monitor does not watch (share, streams
        ...), id -> type. Never raises: when a broker did not answer the listing is {} this time
        (it is shown, nothing depends on it), logged at debug level."""
        with self._lock:
            self._require_started()
            try:
                return unwatched_of(self._connect().admin.list_groups())
            except Exception as exc:
                log.debug("cluster %s: listing the groups of every type failed: %s", self._cluster.name, exc)
                return {}

    def describe_groups(
        self, group_ids: Sequence[str], groups_per_request: int = GROUPS_PER_REQUEST
    ) -> Partial[list[GroupDescription]]:
        """State, protocol, members (client id, host, assignment) and coordinator of each group,
        in the order given; a group that does not exist is described as "Dead".

        Blocks for at most about three request timeouts (the three steps in the module's
        docstring). A group that failed (its coordinator unknown, unreachable or refusing) is in
        `errors` under its id. Raises KafkaUnavailableError when no group answered because the
        cluster did not, KafkaRequestError when it refused the client.
        """
        if groups_per_request < 1:
            raise ValueError("groups_per_request must be at least 1")
        wanted = list(dict.fromkeys(group_ids))
        outcome = Outcome(self._options.secret_values(), self.timeout, unavailable)
        if not wanted:
            return Partial([], outcome.errors)
        with self._lock:
            self._require_started()
            connection = self._connect()
            limit = in_flight_limit(connection.max_in_flight)
            call = _Call(connection.loop, self.timeout, groups_per_request, outcome, limit)
            failure: BaseException | None = None
            try:
                connection.loop.run(call.run, wanted)
            except Exception as exc:
                failure = exc
            call.finish(wanted, failure)
            unreachable = outcome.unreachable()
            if unreachable is not None:
                raise self._failed("describe consumer groups", unreachable) from unreachable
        return Partial([call.described[g] for g in wanted if g in call.described], outcome.errors)
