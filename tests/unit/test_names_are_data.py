"""Names are data, never markup or control: a consumer group called `[bold red]x[/]`, one with a
link in Rich markup, or one with raw escape sequences (an OSC-8 hyperlink, a bell, a newline)
prints as written in every report and cannot forge a line in the daemon's log."""

from __future__ import annotations

import dataclasses
import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from monitor.cli import alerts as cli_alerts
from monitor.cli import reports as cli_reports
from monitor.cli.main import app
from monitor.core.formatting import PrintableLogFormatter, printable, printable_markup
from monitor.expose.read import lag as read_lag
from monitor.expose.read import topics as read_topics
from monitor.expose.read.queries import Listing
from monitor.expose.web.context import template_environment

runner = CliRunner()

MARKUP = "[bold red]x[/]"
LINK = "[link=http://evil.example]y[/link]"
ESCAPES = "g\x1b]8;;http://evil.example\x07click\x1b]8;;\x07\x1b[2J\x9b\nINFO forged"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def test_printable_makes_every_control_character_visible() -> None:
    assert printable("a\nb\rc\td") == "a\\nb\\rc\\td"
    assert printable(ESCAPES) == (
        "g\\x1b]8;;http://evil.example\\x07click\\x1b]8;;\\x07\\x1b[2J\\x9b\\nINFO forged"
    )
    assert printable("\x00\x7f\u202eabc\u2028") == "\\x00\\x7f\\u202eabc\\u2028"
    assert printable("payments-\u00e9t\u00e9 \u6f22\u5b57 [ok]") == "payments-\u00e9t\u00e9 \u6f22\u5b57 [ok]"
    assert printable(42) == "42"


def test_printable_markup_prints_markup_literally() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, color_system="truecolor", width=200)
    table = Table("group")
    for name in (MARKUP, LINK, ESCAPES, "ends with a backslash\\"):
        table.add_row(printable_markup(name))
    console.print(table)
    text = buffer.getvalue()
    assert MARKUP in text and LINK in text
    assert "\x1b]8" not in text and "\x07" not in text  # no hyperlink, no bell
    assert "ends with a backslash\\" in text


def make(cls: type[Any], **given: Any) -> Any:
    """A read-layer record with `given` and None elsewhere."""
    return cls(**{f.name: given.get(f.name) for f in dataclasses.fields(cls)})


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """The reports print to a colour terminal (where escapes would act), captured."""
    buffer = io.StringIO()
    monkeypatch.setattr(
        cli_reports, "out", Console(file=buffer, force_terminal=True, color_system="truecolor", width=400)
    )

    @contextmanager
    def no_database(config: object) -> Iterator[None]:
        yield None

    monkeypatch.setattr(cli_reports, "_connection", no_database)
    monkeypatch.setattr(cli_reports, "_cluster_of", lambda *args: "prod")
    yield buffer


def assert_literal(text: str) -> None:
    assert MARKUP in text
    assert LINK in text
    assert printable(ESCAPES) in text
    assert "\x1b]8" not in text and "\x07" not in text and "\x9b" not in text and "\x1b[2J" not in text
    assert "\nINFO forged" not in text


def test_lag_prints_group_topic_and_owner_names_as_written(
    terminal: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = make(read_lag.GroupSummary, group_id=ESCAPES, group_state=MARKUP, status="OK", evaluated_at=NOW)
    detail = read_lag.GroupDetail(group=group, members=[], topics=[])
    rows = [
        make(read_lag.GroupPartitionLag, topic=topic, partition=0, owner=owner, status="OK")
        for topic, owner in ((MARKUP, LINK), (ESCAPES, ESCAPES))
    ]
    monkeypatch.setattr(read_lag, "group", lambda conn, cluster, group_id: detail)
    monkeypatch.setattr(
        read_lag, "group_partitions", lambda *args, **kwargs: Listing(rows, len(rows), None, 0, NOW)
    )
    result = runner.invoke(app, ["lag", ESCAPES])
    assert result.exit_code == 0, result.output
    text = terminal.getvalue()
    assert_literal(text)
    assert "state [bold red]x[/]" in text


def test_topic_prints_consumer_group_names_as_written(
    terminal: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = make(
        read_topics.TopicSummary, topic=LINK, partitions=1, evaluated_at=NOW, cleanup_policy=MARKUP
    )
    consumers = [make(read_topics.TopicConsumer, group_id=name, status="OK") for name in (ESCAPES, MARKUP)]
    detail = make(
        read_topics.TopicDetail, topic=summary, partitions=Listing([], 0, None, 0, NOW), consumers=consumers
    )
    monkeypatch.setattr(read_topics, "topic", lambda *args, **kwargs: detail)
    result = runner.invoke(app, ["topic", LINK])
    assert result.exit_code == 0, result.output
    assert_literal(terminal.getvalue())


def test_alert_tables_print_values_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.StringIO()
    monkeypatch.setattr(cli_alerts, "out", Console(file=buffer, force_terminal=True, width=400))
    cli_alerts._table(
        [{"rule": MARKUP, "entity_key": ESCAPES, "comment": LINK}], ["rule", "entity_key", "comment"], "t"
    )
    assert_literal(buffer.getvalue())


def test_the_daemon_log_escapes_control_characters_in_names() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(PrintableLogFormatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("tests.names")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("group %s is lagging", "orders\nINFO monitor: all good\x1b[2J")
        try:
            raise ValueError("boom")
        except ValueError:
            logger.exception("cycle failed for %s", "a\rb")
    finally:
        logger.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "WARNING tests.names: group orders\\nINFO monitor: all good\\x1b[2J is lagging"
    assert lines[1] == "ERROR tests.names: cycle failed for a\\rb"
    assert lines[2] == "Traceback (most recent call last):"  # a traceback keeps its lines
    assert "\x1b" not in stream.getvalue()


def test_the_command_line_installs_the_formatter(monkeypatch: pytest.MonkeyPatch) -> None:
    from monitor.cli import main as cli

    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    cli._setup_logging("INFO")
    [handler] = root.handlers
    assert isinstance(handler.formatter, PrintableLogFormatter)


@pytest.mark.parametrize(
    ("comment", "shown"),
    [
        ("one line", "one line"),
        ("first\nsecond", "first<br>\nsecond"),
        ("windows\r\nline\rmac", "windows<br>\nline<br>\nmac"),
        ("two\n\nbreaks\n", "two<br>\n<br>\nbreaks<br>\n"),
        ("tab\there", "tab\\there"),
        ("<script>alert(1)</script>\n&", "&lt;script&gt;alert(1)&lt;/script&gt;<br>\n&amp;"),
        ("bidi \u202e evil\nzero\u200bwidth", "bidi \\u202e evil<br>\nzero\\u200bwidth"),
        ("escape \x1b[31mred\x07", "escape \\x1b[31mred\\x07"),
        ("unicode\u2028separator\x85c1", "unicode\\u2028separator\\x85c1"),
    ],
)
def test_a_comment_over_several_lines_shows_its_breaks_and_no_other_control(comment: str, shown: str) -> None:
    """The pages' `lines` filter (silence comments, retention reasons): LF, CR LF and CR are line
    breaks; every other control, separator or bidi character stays a visible escape; markup is
    escaped."""
    env = template_environment()
    assert env.from_string("{{ comment | lines }}").render(comment=comment) == shown
    assert env.from_string("{{ comment }}").render(comment="a\nb") == "a\\nb", (
        "elsewhere a newline stays visible"
    )
