"""Share groups (KIP-932, Kafka 4.1+) through kafka-python: ListGroups filtered to the "share"
type, then ShareGroupDescribe and DescribeShareGroupOffsets to each group's coordinator, from
the message schemas of `monitor.kafka.messages` (kafka-python ships none for them).

Each request's version is the highest the broker's ApiVersions and the schema share:
DescribeShareGroupOffsets v1 (Kafka 4.2+, KIP-1226) answers the lag the broker keeps, v0 only the
start offsets. A cluster that lacks one of the three requests (before Kafka 4.1, or with the
`share.version` feature off) has no share groups to give: that is an answer ("not available",
with the reason), not a failure, so it never fails a collection.

Policy: the listing must answer whole (a listing missing a broker would make its groups look
deleted), else the call raises; a coordinator that fails fails only its own groups (`errors`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

import kafka.errors
from kafka.protocol.admin import ListGroupsRequest

from monitor.core.share_groups import (
    NOT_AVAILABLE,
    ShareGroupDescription,
    ShareGroups,
    ShareMember,
    SharePartitionOffset,
)
from monitor.kafka.describe import current_assignment
from monitor.kafka.messages import DescribeShareGroupOffsetsRequest, ShareGroupDescribeRequest
from monitor.kafka.pyclient import KafkaPythonClient, unavailable
from monitor.kafka.translate import Outcome

log = logging.getLogger(__name__)

SHARE_TYPE: Final = "share"
GROUPS_PER_REQUEST: Final = 100
_NEEDED: Final = (
    (ListGroupsRequest, 5, "ListGroups v5 (the group type filter, Kafka 3.8+)"),
    (ShareGroupDescribeRequest, 1, "ShareGroupDescribe v1 (Kafka 4.1+)"),
    (DescribeShareGroupOffsetsRequest, 0, "DescribeShareGroupOffsets (Kafka 4.1+)"),
)
_GROUP_ID_NOT_FOUND: Final = kafka.errors.GroupIdNotFoundError.errno


def _chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def _error(code: int, message: object) -> kafka.errors.KafkaError:
    error_type: type[kafka.errors.KafkaError] = kafka.errors.for_code(code)
    return error_type(str(message)) if message else error_type()


def missing_request(versions: Any) -> str | None:
    """The first request share groups need that the broker's ApiVersions (kafka-python's
    `BrokerVersionData`) lacks, named for the operator; None when it has them all."""
    for request, min_version, name in _NEEDED:
        try:
            versions.api_version(request, min_version=min_version)
        except kafka.errors.IncompatibleBrokerVersion:
            return name
    return None


# -- answers -> records ----------------------------------------------------------------------------


def share_description(group: Any, coordinator: int | None) -> ShareGroupDescription:
    """One group of a ShareGroupDescribe answer as a record; members sorted by id, each with its
    current assignment sorted."""

    members = (
        ShareMember(
            member_id=str(m.member_id),
            client_id=str(m.client_id),
            host=str(m.client_host),
            assignment=current_assignment(m),
            rack=str(m.rack_id) if m.rack_id else None,
        )
        for m in group.members
    )
    return ShareGroupDescription(
        group_id=str(group.group_id),
        state=str(group.group_state) if group.group_state else "Unknown",
        coordinator=coordinator,
        members=tuple(sorted(members, key=lambda m: m.member_id)),
        assignor=str(group.assignor_name) if group.assignor_name else None,
        group_epoch=int(group.group_epoch),
    )


def share_offsets(group: Any) -> tuple[list[SharePartitionOffset], list[tuple[str, BaseException]]]:
    """One group of a DescribeShareGroupOffsets answer: its partitions' start offsets (-1: none
    yet) and the broker's lag (v1; -1 or absent: not reported), sorted; and the partitions that
    failed, as ("topic:partition", error)."""
    offsets: list[SharePartitionOffset] = []
    failed: list[tuple[str, BaseException]] = []
    for topic in group.topics:
        for p in topic.partitions:
            if p.error_code:
                failed.append(
                    (f"{topic.topic_name}:{p.partition_index}", _error(p.error_code, p.error_message))
                )
                continue
            start = int(p.start_offset)
            lag = getattr(p, "lag", None)
            offsets.append(
                SharePartitionOffset(
                    group_id=str(group.group_id),
                    topic=str(topic.topic_name),
                    partition=int(p.partition_index),
                    start_offset=start if start >= 0 else None,
                    broker_lag=int(lag) if lag is not None and int(lag) >= 0 else None,
                )
            )
    offsets.sort(key=lambda o: (o.topic, o.partition))
    return offsets, failed


# -- one call on kafka-python's IO loop --------------------------------------------------------------


class _Call:
    """The describe and offsets requests of one `share_groups` call, all sent before the first
    answer is awaited; `client` is kafka-python's admin client, `manager` its connection manager."""

    def __init__(self, client: Any, outcome: Outcome, per_request: int) -> None:
        self._client = client
        self._manager = client._manager
        self._outcome = outcome
        self._per_request = per_request
        self.descriptions: dict[str, ShareGroupDescription] = {}
        self.offsets: list[SharePartitionOffset] = []
        self.stale = False

    async def run(self, group_ids: list[str]) -> None:
        try:
            coordinators: dict[str, int] = await self._client._find_coordinator_ids(group_ids)
        except Exception as exc:
            self.stale = unavailable(exc)
            for group_id in group_ids:
                self._outcome.failure(group_id, exc)
            return
        by_node: dict[int, list[str]] = defaultdict(list)
        for group_id, node in coordinators.items():
            by_node[int(node)].append(group_id)
        sent = [
            (
                node,
                chunk,
                self._manager.send(self._describe(chunk), node_id=node),
                self._ask_offsets(chunk, node),
            )
            for node, ids in sorted(by_node.items())
            for chunk in _chunks(ids, self._per_request)
        ]
        for node, chunk, described, offsets in sent:
            try:
                for group in (await described).groups:
                    self._described(group, node)
                for group in (await offsets).groups:
                    self._offsets(group)
            except Exception as exc:
                self.stale = self.stale or unavailable(exc)
                for group_id in chunk:
                    self._outcome.failure(group_id, exc)

    def _describe(self, chunk: list[str]) -> Any:
        return ShareGroupDescribeRequest(group_ids=chunk, include_authorized_operations=False)

    def _ask_offsets(self, chunk: list[str], node: int) -> Any:
        group_type = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
        request = DescribeShareGroupOffsetsRequest(
            groups=[group_type(group_id=g, topics=None) for g in chunk]
        )
        return self._manager.send(request, node_id=node)

    def _described(self, group: Any, node: int) -> None:
        group_id = str(group.group_id)
        if group.error_code == _GROUP_ID_NOT_FOUND:
            return  # deleted since it was listed
        if group.error_code:
            self._fail(group_id, _error(group.error_code, group.error_message))
            return
        self.descriptions[group_id] = share_description(group, node)
        self._outcome.success()

    def _offsets(self, group: Any) -> None:
        group_id = str(group.group_id)
        if group.error_code == _GROUP_ID_NOT_FOUND:
            self.descriptions.pop(group_id, None)
            return
        if group.error_code:
            self._fail(group_id, _error(group.error_code, group.error_message))
            return
        found, failed = share_offsets(group)
        self.offsets.extend(found)
        for where, exc in failed:
            self._fail(f"{group_id} {where}", exc)

    def _fail(self, key: str, exc: BaseException) -> None:
        # NOT_COORDINATOR and friends are retriable: the cached coordinator moved.
        self.stale = self.stale or unavailable(exc)
        self._outcome.failure(key, exc)


class ShareGroupClient(KafkaPythonClient):
    """The share groups of one cluster (see `KafkaPythonClient` for the client's lifecycle)."""

    def share_groups(
        self,
        accepts: Callable[[str], bool] = lambda group_id: True,
        groups_per_request: int = GROUPS_PER_REQUEST,
    ) -> ShareGroups:
        """Every share group `accepts` lets through: its description and the start offset (and,
        from Kafka 4.2, the lag) of each partition it has state for.

        Blocks for a listing (one ListGroups per broker), a FindCoordinator and one round of two
        requests per coordinator, each bounded by `request_timeout_seconds`. A cluster without
        share groups answers `available=False` with the reason. Raises KafkaUnavailableError when
        the listing or every group got no answer, KafkaRequestError when the cluster refused.
        """
        if groups_per_request < 1:
            raise ValueError("groups_per_request must be at least 1")
        outcome = Outcome(self._options.secret_values(), self.timeout, unavailable)
        with self._lock:
            self._require_started()
            client = self._connect()
            missing = missing_request(client._manager.broker_version_data)
            if missing is not None:
                return ShareGroups(False, reason=f"{NOT_AVAILABLE}: the brokers lack {missing}")
            try:
                listed = client.list_groups(types_filter=[SHARE_TYPE])
            except Exception as exc:
                raise self._failed("list share groups", exc) from exc
            group_ids = sorted({str(g["group_id"]) for g in listed if accepts(str(g["group_id"]))})
            if not group_ids:
                return ShareGroups(True, errors={}, listed=())
            call = _Call(client, outcome, groups_per_request)
            try:
                client._manager.run(call.run, group_ids)
            except Exception as exc:
                for group_id in group_ids:
                    if group_id not in call.descriptions:
                        outcome.failure(group_id, exc)
            failure = outcome.unreachable()
            if failure is not None:
                raise self._failed("describe share groups", failure) from failure
            if call.stale:
                self._discard()  # kafka-python would keep asking the coordinator it cached
        described = tuple(call.descriptions[g] for g in group_ids if g in call.descriptions)
        known = set(call.descriptions)
        offsets = tuple(o for o in call.offsets if o.group_id in known)
        return ShareGroups(True, described, offsets, outcome.errors, listed=tuple(group_ids))
