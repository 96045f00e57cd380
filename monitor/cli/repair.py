"""`kafka-health repair ...`: the reviewed repair actions on the command line.

Whoever can run this command can reach the database, so it trusts `--as` and `--team` like the
retention commands; the web UI and API authenticate instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from sqlalchemy import Engine

from monitor.act import repair_request as store
from monitor.act.repair_request import Repair
from monitor.act.repairs import KINDS, RepairService
from monitor.cli.common import (
    AsOption,
    ConfigOption,
    TeamOption,
    acting,
    id_argument,
    open_engine,
    out,
    run_or_exit,
    settings_from,
)
from monitor.core.formatting import printable

app = typer.Typer(
    help="Reviewed repair actions: preferred leader election, moving leadership off a broker.",
    no_args_is_help=True,
)
FindingId = Annotated[int, id_argument("finding id")]
RepairId = Annotated[int, id_argument("repair id")]
KindOption = Annotated[str, typer.Option("--kind", "-k", help=f"One of: {', '.join(KINDS)}.")]


@contextmanager
def _service(config: Path | None) -> Iterator[tuple[RepairService, Engine]]:
    from monitor.act.stage import build_repairs
    from monitor.core.clock import SystemClock

    settings = settings_from(config)
    engine = run_or_exit(lambda: open_engine(settings))
    service = build_repairs(settings, lambda: engine, SystemClock())
    try:
        yield service, engine
    finally:
        service.stop()
        engine.dispose()


def _print(repair: Repair) -> None:
    moves = repair.plan.get("partitions", [])
    line = (
        f"repair {repair.id}: {repair.state} {repair.kind} on {repair.cluster} for finding "
        f"{repair.finding_id} ({repair.rule}), {len(moves)} partition(s)"
    )
    if repair.outcome:
        line += f", finding {repair.outcome}"
    out.print(printable(line), highlight=False, markup=False)
    for text in (repair.refusal, repair.last_error):
        if text:
            out.print(f"  {printable(text)}", highlight=False, markup=False)


def _print_plan(plan: Mapping[str, Any]) -> None:
    table = Table("partition", "leader", "new leader", "replicas", "new replicas")
    for move in plan.get("partitions", []):
        table.add_row(
            printable(f"{move['topic']}:{move['partition']}"),
            str(move["leader"]),
            str(move["new_leader"]),
            str(move["replicas"]),
            str(move["new_replicas"]),
        )
    out.print(table)
    before, after = plan.get("leaders_before", {}), plan.get("leaders_after", {})
    counts = Table("broker", "leaders before", "leaders after")
    for broker in before:
        counts.add_row(str(broker), str(before[broker]), str(after.get(broker, "")))
    out.print(counts)


@app.command("preview")
def preview(
    finding_id: FindingId, kind: KindOption = "preferred_election", config: ConfigOption = None
) -> None:
    """What a repair of FINDING_ID would change and what would refuse it now. Changes nothing."""
    with _service(config) as (service, _):
        result = run_or_exit(lambda: service.preview(finding_id, kind))
    _print_plan(result)
    for refusal in result["refusals"]:
        out.print(f"refused now: {printable(refusal)}", highlight=False, markup=False)


@app.command("request")
def request(
    finding_id: FindingId,
    reason: Annotated[str, typer.Option("--reason", "-m", help="What the repair is for.")],
    kind: KindOption = "preferred_election",
    user: AsOption = None,
    team: TeamOption = None,
    config: ConfigOption = None,
) -> None:
    """Ask for a repair of FINDING_ID; it waits for a reviewer other than you."""
    who = run_or_exit(lambda: acting(user, team, config))
    with _service(config) as (service, _):
        repair = run_or_exit(lambda: service.request(who, finding_id, kind, reason))
    _print(repair)
    _print_plan(repair.plan)


@app.command("approve")
def approve(
    repair_id: RepairId,
    comment: Annotated[str, typer.Option("--comment", "-m")] = "",
    user: AsOption = None,
    team: TeamOption = None,
    config: ConfigOption = None,
) -> None:
    """Approve a waiting repair (a reviewer other than the requester); it is applied at once."""
    who = run_or_exit(lambda: acting(user, team, config))
    with _service(config) as (service, _):
        _print(run_or_exit(lambda: service.approve(who, repair_id, comment)))


@app.command("reject")
def reject(
    repair_id: RepairId,
    reason: Annotated[str, typer.Option("--reason", "-m")],
    user: AsOption = None,
    team: TeamOption = None,
    config: ConfigOption = None,
) -> None:
    """Reject a waiting repair (a reviewer), or withdraw your own."""
    who = run_or_exit(lambda: acting(user, team, config))
    with _service(config) as (service, _):
        _print(run_or_exit(lambda: service.reject(who, repair_id, reason)))


@app.command("check")
def check(config: ConfigOption = None) -> None:
    """Record whether the applied repairs helped (their findings resolved) after an evaluation."""
    with _service(config) as (service, _):
        recorded = run_or_exit(service.check_outcomes)
    out.print(f"{recorded} outcome(s) recorded", highlight=False)


@app.command("list")
def list_(
    cluster: Annotated[str | None, typer.Option("--cluster")] = None, config: ConfigOption = None
) -> None:
    """Repairs, newest first."""
    with _service(config) as (_, engine), engine.connect() as conn:
        rows = store.list_repairs(conn, cluster=cluster)
    for repair in rows:
        _print(repair)


@app.command("show")
def show(
    repair_id: RepairId, as_json: Annotated[bool, typer.Option("--json")] = False, config: ConfigOption = None
) -> None:
    """One repair: its plan, what applying did, its outcome and audit trail."""
    with _service(config) as (_, engine), engine.connect() as conn:
        repair = run_or_exit(lambda: store.get(conn, repair_id))
        audit = store.audit_of(conn, repair_id)
    if as_json:
        out.print_json(json.dumps({**repair.as_json(), "audit": audit}, default=str))
        return
    _print(repair)
    _print_plan(repair.plan)
    for entry in audit:
        out.print(
            printable(
                f"  {entry['at']:%Y-%m-%d %H:%M:%S} {entry['actor']} {entry['action']} "
                f"{entry['detail'] or ''}"
            ),
            highlight=False,
            markup=False,
        )
