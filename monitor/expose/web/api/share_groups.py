"""The JSON API of share groups (KIP-932, Kafka 4.1+): `/api/v1/clusters/{cluster}/share-groups`
and `.../share-groups/{group}`, the read layer (`monitor.expose.read.share_groups`) over HTTP.

A cluster without share groups answers its list with `available: false` and the reason, never an
error; an unknown cluster or share group is a 404 (`cluster_not_found`, `share_group_not_found`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from monitor.expose.read import share_groups as read_share
from monitor.expose.read.share_groups import ShareGroupDetail, ShareGroupList
from monitor.expose.web.api.clusters import ERRORS, NAME, ClusterName, Search, known_cluster
from monitor.expose.web.context import Context, not_found
from monitor.expose.web.inputs import Paging

router = APIRouter(prefix="/api/v1", responses=ERRORS, tags=["share groups"])
TAG = {
    "name": "share groups",
    "description": "Share groups (KIP-932, Kafka 4.1+): state, members, each share partition's start "
    "offset and lag (reported by the broker from Kafka 4.2, else end - start offset), or why a "
    "cluster has none to give.",
}
ShareGroupId = Annotated[str, Path(pattern=NAME, description="share group id", examples=["orders-queue"])]


@router.get("/clusters/{cluster}/share-groups", response_model=ShareGroupList)
def share_groups(
    *, ctx: Context, cluster: ClusterName, search: Search = None, page: Paging
) -> ShareGroupList:
    """The share groups of a cluster, most records waiting first, or `available: false` with the
    reason on a cluster without share groups."""
    with ctx.engine.connect() as conn:
        known_cluster(conn, cluster)
        return read_share.share_groups(conn, cluster, page, search)


@router.get("/clusters/{cluster}/share-groups/{group}", response_model=ShareGroupDetail)
def share_group(ctx: Context, cluster: ClusterName, group: ShareGroupId) -> ShareGroupDetail:
    """One share group: state, members and assignments, and each share partition's start offset,
    end offset and lag with how it is known."""
    with ctx.engine.connect() as conn:
        known_cluster(conn, cluster)
        found = read_share.share_group(conn, cluster, group)
    if found is None:
        hint = f"GET /api/v1/clusters/{cluster}/share-groups lists the share groups"
        raise not_found("share group", group, hint)
    return found
