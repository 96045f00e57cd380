"""`kafka-health dev-spark ...`: a local Spark standalone cluster (one master, one or more workers)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from monitor.cli.common import number_parser
from monitor.core.errors import MonitorError
from monitor.devtools.paths import var_dir
from monitor.devtools.spark_cluster import DEFAULT_BASE_PORT, DRIVER_CONF, MAX_WORKERS, DevSparkCluster

app = typer.Typer(
    help="Run a Spark standalone master and workers on 127.0.0.1 from the installed PySpark.",
    no_args_is_help=True,
)

_out = Console()
_err = Console(stderr=True)

BasePortOption = Annotated[
    int,
    typer.Option(
        "--base-port",
        help="Master port; its web UI at +1, the first worker at +2 and its web UI at +3, the next "
        "worker at +4 and +5 ... "
        "(ignored while a cluster runs: it keeps its ports).",
        parser=number_parser("--base-port", 1024, 65_000),
    ),
]


def _cluster(
    base_port: int = DEFAULT_BASE_PORT, cores: int = 1, memory: str = "1g", workers: int = 1
) -> DevSparkCluster:
    return DevSparkCluster(
        var_dir() / "spark", base_port=base_port, worker_cores=cores, worker_memory=memory, workers=workers
    )


def _say(message: str) -> None:
    _err.print(f"- {message}", markup=False, highlight=False)


def _print_status(cluster: DevSparkCluster) -> None:
    table = Table(title=f"Spark standalone cluster in {cluster.home}", title_justify="left")
    for column in ("daemon", "port", "web UI port", "pid", "state"):
        table.add_column(column)
    for daemon in cluster.status():
        state = "[green]running[/green]" if daemon.running else "[red]stopped[/red]"
        pid = str(daemon.pid) if daemon.pid is not None else "-"
        table.add_row(daemon.role, str(daemon.port), str(daemon.webui_port), pid, state)
    _out.print(table)
    try:
        workers = cluster.workers()
    except MonitorError:
        return
    alive = [w for w in workers if w.state == "ALIVE"]
    _out.print(
        f"master: {cluster.master_url} (web UI {cluster.web_url}), "
        f"{len(alive)} alive worker(s), {sum(w.cores for w in alive)} core(s)",
        highlight=False,
    )


@app.command()
def up(
    base_port: BasePortOption = DEFAULT_BASE_PORT,
    cores: Annotated[
        int, typer.Option("--cores", help="Cores each worker offers.", parser=number_parser("--cores", 1, 64))
    ] = 1,
    memory: Annotated[str, typer.Option("--memory", help="Memory each worker offers (e.g. 1g).")] = "1g",
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            help=f"Workers to run (1-{MAX_WORKERS}; ignored while a cluster runs: it keeps its layout).",
            parser=number_parser("--workers", 1, MAX_WORKERS),
        ),
    ] = 1,
) -> None:
    """Start the master and the workers (those not running) and wait until every worker is registered."""
    cluster = _cluster(base_port, cores, memory, workers)
    cluster.up(report=_say)
    _print_status(cluster)
    options = " ".join(f"--conf {key}={value}" for key, value in DRIVER_CONF.items())
    _out.print(
        f"run the evaluation on it: spark.master: {cluster.master_url} (with spark.conf {DRIVER_CONF}), "
        f"or spark-submit --master {cluster.master_url} {options} ...",
        highlight=False,
        markup=False,
    )


@app.command()
def down(base_port: BasePortOption = DEFAULT_BASE_PORT) -> None:
    """Stop the workers (with their executors) and the master."""
    cluster = _cluster(base_port)
    cluster.down(report=_say)
    _out.print(f"stopped: {cluster.home}", highlight=False)


@app.command()
def status(base_port: BasePortOption = DEFAULT_BASE_PORT) -> None:
    """Show each daemon's ports, pid and state, and the workers the master knows."""
    _print_status(_cluster(base_port))
