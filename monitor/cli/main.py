"""The `kafka-health` command line: the root commands (setup, run, demo, config check) and the
command groups, one module each in `monitor.cli`."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from monitor.cli.common import ConfigOption, err, fail, fail_config, number_parser, out, settings_from
from monitor.cli.lazy import Deferred, LazyGroup
from monitor.core.errors import ConfigError, MonitorError
from monitor.core.formatting import PrintableLogFormatter

if TYPE_CHECKING:
    from monitor.app import Checked
    from monitor.core.settings import Settings


class Commands(LazyGroup):
    """The command groups and the report commands, each imported only when it runs."""

    deferred = (
        Deferred(
            "status", "monitor.cli.reports", "Every cluster at a glance: brokers down, offline / "
            "under-min-ISR / under-replicated\npartitions, groups by status, open findings, and how "
            "fresh the numbers are.", "register", first=True,
        ),
        Deferred(
            "lag", "monitor.cli.reports", "A consumer group's lag: status, members, lag in offsets and "
            "seconds per topic and per\npartition, time until data loss, the catch-up forecast and the "
            "consumer advice, and the lag\nobjectives it is held to (budget left, burn rates).",
            "register", first=True,
        ),
        Deferred(
            "topic", "monitor.cli.reports", "A topic: retention (size vs retention.bytes, time coverage "
            "vs retention.ms, shortfall),\nreplication per partition, and the groups reading it, "
            "soonest data loss first.", "register", first=True,
        ),
        Deferred(
            "share-groups", "monitor.cli.share_groups", "Share groups (KIP-932): state, members and "
            "records waiting, most waiting first; a cluster\nwithout share groups says why.",
            "register", first=True,
        ),
        Deferred(
            "dev-cluster", "monitor.cli.dev_cluster", "Run a local Apache Kafka cluster on 127.0.0.1 "
            "(4.x or 3.3+ with KRaft, 2.8 with ZooKeeper).",
        ),
        Deferred(
            "dev-spark", "monitor.cli.dev_spark",
            "Run a Spark standalone master and workers on 127.0.0.1 from the installed PySpark.",
        ),
        Deferred("db", "monitor.cli.db", "Start the local PostgreSQL and migrate the schema."),
        Deferred("rules", "monitor.cli.rules", "Check and list the alert rules (alert_rules/*.yaml)."),
        Deferred(
            "routes", "monitor.cli.routes",
            "Test, check and show the alert routing (alert_rules/routing.yaml and owners.yaml).",
        ),
        Deferred(
            "alerts", "monitor.cli.alerts",
            "Alerts: list (the default), acknowledge, silence, and the notification outbox.",
        ),
        Deferred(
            "retention", "monitor.cli.retention",
            "The retention button: raise, review, revert and extend retention.",
        ),
        Deferred(
            "repair", "monitor.cli.repair",
            "Reviewed repair actions: preferred leader election, moving leadership off a broker.",
        ),
    )  # fmt: skip


app = typer.Typer(
    name="kafka-health",
    help="Kafka health monitor: consumer lag, retention and replication, with tiered alerts.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    cls=Commands,
)
config_app = typer.Typer(help="Validate configuration files.", no_args_is_help=True)
app.add_typer(config_app, name="config")


@config_app.command("check")
def config_check(
    file: Annotated[Path, typer.Argument(help="The YAML file to validate.", exists=False)],
) -> None:
    """Validate FILE (and the KAFKA_HEALTH_* environment) without starting anything."""
    from monitor.core.settings import load_settings

    try:
        settings = load_settings(file)
    except ConfigError as exc:
        raise fail_config(exc) from exc
    for warning in settings.warnings():
        err.print(f"warning: {file}: {warning}", markup=False, highlight=False)
    names = ", ".join(c.name for c in settings.clusters)
    out.print(f"{file}: OK ({len(settings.clusters)} cluster(s): {names})", highlight=False)


def _checked(settings: Settings) -> Checked:
    """Every operator file the daemon will use, checked: a bad one stops here, before
    PostgreSQL, Kafka or Spark is started."""
    from monitor.app import check_operator_files

    try:
        return check_operator_files(settings)
    except ConfigError as exc:
        raise fail_config(exc) from exc


def _setup_logging(level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(
        PrintableLogFormatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s", datefmt="%H:%M:%S")
    )
    logging.basicConfig(level=getattr(logging, level), handlers=[handler])
    for noisy in ("py4j", "apscheduler", "httpx", "uvicorn.error", "alembic", "monitor.kafka.client"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _say(message: str) -> None:
    out.print(f"[bold cyan]>>[/] {escape(message)}", highlight=False)


@app.command()
def setup(
    config: ConfigOption = None,
    skip_kafka: Annotated[bool, typer.Option(help="Do not fetch the Kafka broker jars.")] = False,
    skip_postgres: Annotated[bool, typer.Option(help="Do not look for the PostgreSQL server.")] = False,
) -> None:
    """Fetch or check what the embedded stack needs: Kafka jars, JDBC driver, PostgreSQL server."""
    from monitor.devtools import stack

    stack.setup(settings_from(config), _say, kafka=not skip_kafka, postgres=not skip_postgres)
    _say("setup complete")


@app.command()
def run(config: ConfigOption = None) -> None:
    """Run the monitor daemon: collectors, evaluation, alerting and the web UI.

    Uses the database at database.url / DATABASE_URL; when unset, starts the project-local
    PostgreSQL under var/ (and stops it on exit). SIGTERM or Ctrl-C stops it cleanly.
    """
    from monitor.app import build_app
    from monitor.core.malloc import limit_arenas
    from monitor.devtools import stack

    settings = settings_from(config)
    checked = _checked(settings)
    _setup_logging(settings.log_level)
    limit_arenas()
    with stack.local_services(settings, _say, with_kafka=False) as services:
        daemon = build_app(settings, services.database_url, checked=checked)
        _say(f"web UI on http://{settings.web.host}:{settings.web.port}  (Ctrl-C stops)")
        daemon.run_until_signalled()


@app.command()
def demo(
    config: ConfigOption = None,
    with_prometheus: Annotated[
        bool,
        typer.Option(
            "--with-prometheus",
            help="Also start Debian's Prometheus on 127.0.0.1:9090, scraping the daemon's /metrics, "
            "receiving its remote write (labelled source=remote_write) and evaluating the rule pack "
            "as exported by `rules export --format prometheus`.",
        ),
    ] = False,
    prometheus_port: Annotated[
        int,
        typer.Option(
            help="Port of the demo's Prometheus.", parser=number_parser("--prometheus-port", 1024, 65535)
        ),
    ] = 9090,
) -> None:
    """The embedded defaults end to end: a local 3-node Kafka cluster, PostgreSQL under var/,
    Spark in-process, the daemon with its web UI, and a workload of producers and consumer groups
    that behave differently, with two broker stops. Ctrl-C stops everything it started."""
    from contextlib import ExitStack

    from monitor.app import build_app
    from monitor.cli.rules import export_prometheus_rules
    from monitor.core.malloc import limit_arenas
    from monitor.devtools import stack
    from monitor.devtools.demo import (
        demo_settings,
        ensure_demo_topic,
        start_workload,
        web_url,
        with_prometheus_push,
    )

    # Inbox files instead of Slack, email and PagerDuty, the retention button in the labelled
    # development mode, shorter collection intervals, and the workload (monitor/devtools/demo.py).
    settings = demo_settings(settings_from(config))
    checked = _checked(settings)
    _setup_logging(settings.log_level)
    limit_arenas()
    with stack.local_services(settings, _say, with_kafka=True) as services, ExitStack() as extras:
        if with_prometheus:
            from monitor.devtools.paths import var_dir
            from monitor.devtools.servers import PrometheusServer

            rules_file = var_dir() / "prometheus" / "kafka-health.rules.yaml"
            rules_file.parent.mkdir(parents=True, exist_ok=True)
            exported, not_exported = export_prometheus_rules(settings.evaluate.rules_dir, rules_file)
            prometheus = PrometheusServer(
                var_dir() / "prometheus", prometheus_port, scrape_targets=[f"127.0.0.1:{settings.web.port}"],
                scrape_interval="15s", rule_files=[rules_file],
            )  # fmt: skip
            prometheus.start()
            extras.callback(prometheus.stop)
            settings = with_prometheus_push(settings, prometheus.remote_write_url)
            checked = _checked(settings)
            _say(
                f"Prometheus on {prometheus.url}: scraping the daemon and receiving its remote write; "
                "try  max by (group) (kafka_consumer_group_max_lag_in_seconds)"
            )
            _say(
                f"Prometheus evaluates {exported} rules of the pack ({not_exported} not expressible over "
                f"/metrics: `kafka-health rules export --format prometheus`): {prometheus.url}/alerts"
            )
        ensure_demo_topic(settings, _say)
        daemon = build_app(settings, services.database_url, checked=checked)
        if settings.web.identity.mode == "development":
            _say(f"development mode: no sign-in, everyone is {settings.web.identity.development_user}")
        workload = start_workload(settings, stack.dev_kafka(settings), _say)
        try:
            _say(f"open {web_url(settings)}  (Ctrl-C stops the demo)")
            daemon.run_until_signalled()
        finally:
            _say("stopping the workload ...")
            workload.stop()


def _usage_error(exc: typer.TyperException) -> str:
    """A usage error in one line: what is wrong, and where the command's help is ("" when there
    is nothing to say)."""
    message = " ".join(str(getattr(exc, "format_message", lambda: str(exc))()).split())
    context = getattr(exc, "ctx", None)
    command = getattr(context, "command_path", "") or "kafka-health"
    return f"{message} (see {command} --help)" if message else ""


def main(args: list[str] | None = None) -> None:
    """The entry point. Every error is one line on stderr, `error: ...`, with exit status 2 (a
    refusal a command reports itself: 1): click's usage errors are said so too, not as a box."""
    try:
        code = app(args=args, prog_name="kafka-health", standalone_mode=False)
    except typer.TyperException as exc:  # a usage error: a bad or missing argument or option
        message = _usage_error(exc)
        if message:  # none when the help was shown instead (a group run without a command)
            fail(message)
        sys.exit(2)
    except typer.Abort:
        fail("interrupted", 1)
        sys.exit(1)
    except ConfigError as exc:
        fail_config(exc)
        sys.exit(2)
    except MonitorError as exc:
        fail(str(exc))
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)
