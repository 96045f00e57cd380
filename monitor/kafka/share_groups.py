"""Share groups (KIP-932, Kafka 4.1+) through kafka-python: ListGroups filtered to the "share"
type, then ShareGroupDescribe and DescribeShareGroupOffsets to each group's coordinator, from
the message schemas of `monitor.kafka.messages` (kafka-python ships none for them).

Each request's version is the highest the broker's ApiVersions and the schema share:
DescribeShareGroupOffsets v1 (Kafka 4.2+, KIP-1226) answers the lag the broker keeps, v0 only the
start offsets. A cluster that lacks one of the three requests (before Kafka 4.1), or whose
`share.version` feature is off (Kafka 4.1 advertises the requests then, and lists no share group)
has no share groups to give: that is an answer ("not available", with the reason and how to turn
them on), not a failure, so it never fails a collection.

Policy: the listing must answer whole (a listing missing a broker would make its groups look
deleted), else the call raises; a coordinator that fails fails only its own groups (`errors`).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable
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
from monitor.kafka.coordinators import chunks, error_of, find_coordinators
from monitor.kafka.describe import current_assignment
from monitor.kafka.messages import DescribeShareGroupOffsetsRequest, ShareGroupDescribeRequest
from monitor.kafka.paced import in_flight_limit, send_all
from monitor.kafka.pyclient import KafkaPythonClient, KafkaPythonLoop, unavailable
from monitor.kafka.translate import FUTURE_GRACE_SECONDS, Outcome

log = logging.getLogger(__name__)

SHARE_TYPE: Final = "share"
GROUPS_PER_REQUEST: Final = 100
_NEEDED: Final = (
    (ListGroupsRequest, 5, "ListGroups v5 (the group type filter, Kafka 3.8+)"),
    (ShareGroupDescribeRequest, 1, "ShareGroupDescribe v1 (Kafka 4.1+)"),
    (DescribeShareGroupOffsetsRequest, 0, "DescribeShareGroupOffsets (Kafka 4.1+)"),
)
_GROUP_ID_NOT_FOUND: Final = kafka.errors.GroupIdNotFoundError.errno


SHARE_FEATURE: Final = "share.version"
"""The cluster-wide feature (KIP-584) that turns share groups on: finalized at level 1 or more."""


def feature_off(features: Any) -> str | None:
    """Why a cluster whose brokers have every share request still has no share groups (its
    `describe_features()`: Kafka 4.1 advertises the requests with the feature off, and lists no
    share group), with how to turn them on; None when the feature is on or not known."""
    feature = features.get(SHARE_FEATURE) if isinstance(features, dict) else None
    if not isinstance(feature, dict) or "supported" not in feature:
        return None
    finalized = feature.get("finalized")
    level = int(finalized[1]) if finalized else 0
    if level >= 1:
        return None
    turn_on = f"kafka-features.sh --bootstrap-server HOST:PORT upgrade --feature {SHARE_FEATURE}=1"
    state = f"feature {SHARE_FEATURE} is at level {level}"
    return f"share groups are off on this cluster ({state}); turn them on with `{turn_on}`"


def missing_request(versions: Any) -> str | None:
    """The first request share groups need that the broker's ApiVersions lacks (`versions`: its
    `api_version(request, min_version=...)`, `KafkaPythonLoop`'s), named for the operator; None
    when it has them all."""
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
                    (f"{topic.topic_name}:{p.partition_index}", error_of(p.error_code, p.error_message))
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
    """The describe and offsets requests of one `share_groups` call, paced per coordinator
    (`monitor.kafka.paced`), on kafka-python's IO loop."""

    def __init__(
        self, loop: KafkaPythonLoop, timeout: float, outcome: Outcome, per_request: int, limit: int
    ) -> None:
        self._loop = loop
        self._timeout = timeout
        self._outcome = outcome
        self._per_request = per_request
        self._limit = limit
        self.descriptions: dict[str, ShareGroupDescription] = {}
        self.offsets: list[SharePartitionOffset] = []
        self.stale = False

    async def run(self, group_ids: list[str]) -> None:
        coordinators = await find_coordinators(self._loop, group_ids, self._timeout, self._fail, self._limit)
        by_node: dict[int, list[str]] = defaultdict(list)
        for group_id, node in coordinators.items():
            by_node[node].append(group_id)
        asked = [
            (node, chunk) for node, ids in sorted(by_node.items()) for chunk in chunks(ids, self._per_request)
        ]
        requests = [
            sent
            for node, chunk in asked
            for sent in ((node, self._describe(chunk)), (node, self._ask_offsets(chunk)))
        ]
        until = time.monotonic() + self._timeout + FUTURE_GRACE_SECONDS
        answers = await send_all(self._loop, requests, self._timeout, until, self._limit)
        for index, (node, chunk) in enumerate(asked):
            described, offsets = answers[2 * index], answers[2 * index + 1]
            failure = next((a for a in (described, offsets) if isinstance(a, BaseException)), None)
            if failure is not None:
                for group_id in chunk:
                    self._fail(group_id, failure)
                continue
            for group in described.groups:
                self._described(group, node)
            for group in offsets.groups:
                self._offsets(group)

    def _describe(self, chunk: list[str]) -> Any:
        return ShareGroupDescribeRequest(group_ids=chunk, include_authorized_operations=False)

    def _ask_offsets(self, chunk: list[str]) -> Any:
        group_type = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
        return DescribeShareGroupOffsetsRequest(groups=[group_type(group_id=g, topics=None) for g in chunk])

    def _described(self, group: Any, node: int) -> None:
        group_id = str(group.group_id)
        if group.error_code == _GROUP_ID_NOT_FOUND:
            return  # deleted since it was listed
        if group.error_code:
            self._fail(group_id, error_of(group.error_code, group.error_message))
            return
        self.descriptions[group_id] = share_description(group, node)
        self._outcome.success()

    def _offsets(self, group: Any) -> None:
        group_id = str(group.group_id)
        if group.error_code == _GROUP_ID_NOT_FOUND:
            self.descriptions.pop(group_id, None)
            return
        if group.error_code:
            self._fail(group_id, error_of(group.error_code, group.error_message))
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
            missing = missing_request(client.loop)
            if missing is not None:
                return ShareGroups(False, reason=f"{NOT_AVAILABLE}: the brokers lack {missing}")
            try:
                off = feature_off(client.admin.describe_features())
            except Exception as exc:
                raise self._failed("describe the cluster's features", exc) from exc
            if off is not None:
                return ShareGroups(False, reason=f"{NOT_AVAILABLE}: {off}")
            try:
                listed = client.admin.list_groups(types_filter=[SHARE_TYPE])
            except Exception as exc:
                raise self._failed("list share groups", exc) from exc
            group_ids = sorted({str(g["group_id"]) for g in listed if accepts(str(g["group_id"]))})
            if not group_ids:
                return ShareGroups(True, errors={}, listed=())
            limit = in_flight_limit(client.max_in_flight)
            call = _Call(client.loop, self.timeout, outcome, groups_per_request, limit)
            try:
                client.loop.run(call.run, group_ids)
            except Exception as exc:
                for group_id in group_ids:
                    if group_id not in call.descriptions:
                        outcome.failure(group_id, exc)
            failure = outcome.unreachable()
            if failure is not None:
                raise self._failed("describe share groups", failure) from failure
            if call.stale:
                self._discard()  # connect afresh: the coordinators may have moved
        described = tuple(call.descriptions[g] for g in group_ids if g in call.descriptions)
        known = set(call.descriptions)
        offsets = tuple(o for o in call.offsets if o.group_id in known)
        return ShareGroups(True, described, offsets, outcome.errors, listed=tuple(group_ids))
