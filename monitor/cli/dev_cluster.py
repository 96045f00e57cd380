"""`kafka-health dev-cluster ...`: the local Apache Kafka cluster."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from monitor.cli.common import number_parser
from monitor.core.errors import ConfigError
from monitor.core.settings import DevKafkaConfig, load_settings
from monitor.core.yaml_files import format_validation_error
from monitor.devtools.kafka_cluster import DevKafkaCluster, Report
from monitor.devtools.oidc_provider import DevOidcProvider
from monitor.devtools.paths import cache_dir, var_dir

app = typer.Typer(
    help="Run a local Apache Kafka cluster on 127.0.0.1 (4.x or 3.3+ with KRaft, 2.8 with ZooKeeper).",
    no_args_is_help=True,
)

_out = Console()
_err = Console(stderr=True)

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="monitor.yaml whose dev_kafka section gives the defaults."),
]
VersionOption = Annotated[
    str | None,
    typer.Option(
        "--version",
        help="Apache Kafka version: 2.8.x (with a ZooKeeper server at base port + 99), 3.3.x to 3.9.x "
        "or 4.x (KRaft) (default: dev_kafka.version).",
    ),
]
NodeArgument = Annotated[
    int,
    typer.Argument(
        help="Node id: 1 for a single node, 1-3 for three.", parser=number_parser("node id", 1, 3)
    ),
]


def _cluster(config_file: Path | None, **overrides: Any) -> DevKafkaCluster:
    """The cluster in `var/kafka`, configured by the file's dev_kafka section and the options."""
    settings = load_settings(config_file)
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        dev = DevKafkaConfig(**{**settings.dev_kafka.model_dump(), **given})
    except ValidationError as exc:
        problems = [f"dev_kafka.{problem}" for problem in format_validation_error(exc)]
        raise ConfigError(problems, "dev-cluster options") from exc
    return DevKafkaCluster(dev, var_dir() / "kafka", cache_dir())


@contextmanager
def _progress(title: str) -> Iterator[Report]:
    """A spinner on a terminal, and one line per step everywhere."""
    with _err.status(title) as status:

        def report(message: str) -> None:
            _err.print(f"- {message}", markup=False, highlight=False)
            status.update(message)

        yield report


OIDC_PORT_OFFSET = 400
"""The local OpenID provider listens at the cluster's base port + 400."""


def _provider(cluster: DevKafkaCluster) -> DevOidcProvider:
    return DevOidcProvider(cluster.home / "oidc", cache_dir(), cluster.config.base_port + OIDC_PORT_OFFSET)


def _print_status(cluster: DevKafkaCluster) -> None:
    table = Table(title=f"Kafka dev cluster in {cluster.home}", title_justify="left")
    secured = cluster.secured
    zookeeper = cluster.zookeeper
    columns = ["node", "broker port", "controller port"]
    columns += ["SASL_SSL port", "mutual-TLS port"] if secured else []
    for column in [*columns, "pid", "state"]:
        table.add_column(column)
    for node in cluster.status():
        state = "[green]running[/green]" if node.running else "[red]stopped[/red]"
        pid = str(node.pid) if node.pid is not None else "-"
        ports = [str(node.broker_port), "-" if zookeeper else str(node.controller_port)]
        ports += [str(node.sasl_ssl_port or 0), str(node.ssl_port or 0)] if secured else []
        table.add_row(str(node.node_id), *ports, pid, state)
    _out.print(table)
    _out.print(f"Apache Kafka {cluster.version}: {cluster.bootstrap_servers}", highlight=False)
    if zookeeper is not None:
        state = "running" if zookeeper.pid() is not None else "stopped"
        _out.print(f"ZooKeeper ({state}): {zookeeper.host}:{zookeeper.port}", highlight=False)
    if secured:
        security = cluster.security
        issuer = security.oidc()
        mechanisms = "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512" + (", OAUTHBEARER" if issuer else "")
        lines = [f"SASL_SSL ({mechanisms}; user monitor): {cluster.sasl_ssl_bootstrap_servers}"]
        lines += [f"OpenID provider (issuer): {issuer.issuer}"] if issuer else []
        lines += [
            f"mutual TLS (client certificate required): {cluster.ssl_bootstrap_servers}",
            f"CA certificate: {security.ca_file}",
            f"client certificate and key: {security.client_certificate}, {security.client_key}",
            f"every mechanism as monitor.yaml clusters, secrets included: {security.clusters_file}",
        ]
        _out.print(
            "\n".join(lines),
            highlight=False,
        )


def _number(name: str, low: int, high: int, help: str, *short: str) -> Any:
    """A whole-number option within [low, high] (`common.number_parser`)."""
    return typer.Option(name, *short, help=help, parser=number_parser(name, low, high))


@app.command()
def up(
    nodes: Annotated[
        int | None, _number("--nodes", 1, 3, "1 or 3 nodes (default: dev_kafka.nodes).", "-n")
    ] = None,
    version: VersionOption = None,
    base_port: Annotated[
        int | None,
        _number("--base-port", 1024, 65_000, "Broker ports start here; controllers at +100 (default 19092)."),
    ] = None,
    heap_mb: Annotated[int | None, _number("--heap-mb", 64, 1 << 20, "JVM heap of each node in MiB.")] = None,
    security: Annotated[
        str | None,
        typer.Option(
            "--security",
            help="plaintext, or sasl_ssl: also a SASL_SSL listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) at "
            "base port + 200 and a mutual-TLS listener at + 300, with a local CA under "
            "var/kafka/security (default: dev_kafka.security).",
        ),
    ] = None,
    oidc: Annotated[
        bool,
        typer.Option(
            "--oidc",
            help="With --security sasl_ssl: start the local OpenID provider at base port + 400 and "
            "accept its OAUTHBEARER tokens on the SASL_SSL listener.",
        ),
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Fetch the broker jars if needed, format a new cluster, start it and wait until it answers.

    Nodes already running are left alone, so running `up` twice is harmless.
    """
    cluster = _cluster(
        config, version=version, nodes=nodes, base_port=base_port, heap_mb=heap_mb, security=security
    )
    if oidc and cluster.config.security != "sasl_ssl":
        problem = "--oidc needs --security sasl_ssl (OAUTHBEARER is a SASL mechanism)"
        raise ConfigError([problem], "dev-cluster options")
    with _progress("starting Kafka") as report:
        if oidc:
            report("starting the OpenID provider (its jars fetched with mvn on the first run)")
            issuer = _provider(cluster).up()
            cluster.security.use_oidc(issuer)
            report(f"OpenID provider: {issuer.issuer}")
        cluster.up(nodes, report=report)
    _print_status(cluster)


@app.command()
def down(
    purge: Annotated[
        bool, typer.Option("--purge", help="Also delete the data, logs and cluster id.")
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Stop every node (cleanly, then by force after a timeout); --purge deletes the data too."""
    cluster = _cluster(config)
    with _progress("stopping Kafka"):
        cluster.down(purge=purge)
        _provider(cluster).down()
    _out.print(f"stopped{' and purged' if purge else ''}: {cluster.home}", highlight=False)


@app.command()
def status(config: ConfigOption = None) -> None:
    """Show each node's ports, pid and whether it is running."""
    cluster = _cluster(config)
    if not cluster.exists:
        _out.print(
            f"no cluster in {cluster.home}; create one with `kafka-health dev-cluster up`", highlight=False
        )
        return
    _print_status(cluster)


@app.command("stop-node")
def stop_node(node_id: NodeArgument, config: ConfigOption = None) -> None:
    """Stop one node cleanly (SIGTERM: controlled shutdown, leaders move away first)."""
    cluster = _cluster(config)
    with _progress(f"stopping node {node_id}"):
        cluster.stop_node(node_id)
    _out.print(f"node {node_id} stopped", highlight=False)


@app.command("kill-node")
def kill_node(node_id: NodeArgument, config: ConfigOption = None) -> None:
    """Kill one node with SIGKILL, as a crash would (no controlled shutdown)."""
    cluster = _cluster(config)
    cluster.kill_node(node_id)
    _out.print(f"node {node_id} killed", highlight=False)


@app.command("start-node")
def start_node(node_id: NodeArgument, config: ConfigOption = None) -> None:
    """Start one stopped node again and wait until it is back in the cluster metadata."""
    cluster = _cluster(config)
    with _progress(f"starting node {node_id}"):
        cluster.start_node(node_id)
    _out.print(f"node {node_id} running", highlight=False)


@app.command()
def install(version: VersionOption = None, config: ConfigOption = None) -> None:
    """Only fetch the broker jars (with mvn, from Maven Central) into the download cache."""
    cluster = _cluster(config, version=version)
    with _progress("fetching Kafka jars") as report:
        libs = cluster.ensure_jars(report)
    _out.print(f"Kafka {cluster.config.version} jars: {libs}", highlight=False)
