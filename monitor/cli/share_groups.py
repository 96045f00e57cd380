"""`kafka-health share-groups [GROUP]`: a cluster's share groups (KIP-932) with the records each
has waiting, or one group's members and share partitions, as terminal tables or JSON (`--json`).
Reads the same records as the pages and the API (`monitor.expose.read.share_groups`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from monitor.cli.common import ConfigOption, out
from monitor.cli.reports import (
    ClusterOption,
    JsonOption,
    ReportError,
    _connection,
    _count,
    _json,
    _mark,
    _text,
)
from monitor.expose.read import clusters as read_clusters
from monitor.expose.read import queries
from monitor.expose.read import share_groups as read_share


def register(app: typer.Typer) -> None:
    app.command("share-groups")(share_groups)


def share_groups(
    group: Annotated[str | None, typer.Argument(help="One share group: its members and partitions.")] = None,
    cluster: ClusterOption = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Share groups (KIP-932): state, members and records waiting, most waiting first; a cluster
    without share groups says why."""
    with _connection(config) as conn:
        names = [s.cluster for s in read_clusters.clusters(conn)]
        wanted = [n for n in names if cluster is None or n == cluster]
        if not wanted:
            raise ReportError(f"no cluster {cluster!r}; known: {', '.join(names) or 'none yet'}")
        if group is not None:
            found = [(n, d) for n in wanted if (d := read_share.share_group(conn, n, group)) is not None]
            if not found:
                raise ReportError(f"no share group {group!r} in the newest share-groups sample")
            if as_json:
                _json([{"cluster": n, "group": d} for n, d in found])
                return
            for name, detail in found:
                _print_group(name, detail)
            return
        listings = {n: read_share.share_groups(conn, n, queries.ALL) for n in wanted}
    if as_json:
        _json(listings)
        return
    for name, listing in listings.items():
        if listing.available is False:
            out.print(f"{_text(name)}: share groups {_text(listing.reason or 'not available')}")
            continue
        table = Table(title=f"Share groups of {_text(name)}")
        for column in ("share group", "state", "members", "partitions", "records waiting", "how known"):
            table.add_column(column)
        for g in listing.items:
            table.add_row(
                _text(g.group_id), _text(g.state), _mark(str(g.members), g.members == 0 and bool(g.lag)),
                str(g.partitions), _mark(_count(g.lag), bool(g.lag), "yellow"), _text(g.lag_method),
            )  # fmt: skip
        out.print(table)


def _print_group(cluster: str, detail: read_share.ShareGroupDetail) -> None:
    out.print(
        f"{_text(cluster)} / {_text(detail.group_id)}: {_text(detail.state)}, {detail.members} member(s), "
        f"{_count(detail.lag)} records waiting ({_text(detail.lag_method)})"
    )
    members = Table(title="Members")
    for column in ("member", "client", "host", "assigned"):
        members.add_column(column, overflow="fold")
    for m in detail.member_list:
        members.add_row(_text(m.member_id), _text(m.client_id), _text(m.host), _text(", ".join(m.assignment)))
    out.print(members)
    partitions = Table(title="Share partitions")
    for column in ("topic", "partition", "start offset", "end offset", "records waiting", "how known"):
        partitions.add_column(column)
    for p in detail.share_partitions:
        partitions.add_row(
            _text(p.topic), str(p.partition), _count(p.start_offset), _count(p.end_offset),
            _mark(_count(p.lag), bool(p.lag), "yellow"), _text(p.lag_method),
        )  # fmt: skip
    out.print(partitions)
