"""Notification text from `templates/notifications/`: one documented context, strict undefined.

Every template gets the context documented in `monitor.alert.model` (notification, alerts,
firing, resolved, common_labels, owners, title, external_url) and nothing else, so a template that names
anything else fails when it is rendered, not with an empty gap in a page. `Templates`
compiles every template when it is built, so a template that does not parse stops the start.

Templates render in jinja2's immutable sandbox: an edited template cannot reach Python internals
(`cycler.__init__.__globals__`) or change what it is given, and what it may cost is bounded
(`monitor.core.templating`: a few seconds, 1 MiB of text). Autoescape is on for the `.html`
templates only; the others are plain text (Slack mrkdwn, the
email's text part and subject, the PagerDuty summary). Filters: `duration`, `percent`, `bytes`,
`number`, `timestamp`, `annotations` (the distinct (name, text) pairs of some alerts' annotations,
in the rule file's order), and for Slack text `mrkdwn` (escapes `&`, `<` and `>`, so a group or
topic name cannot become a link or an @channel); the test `link` says whether an annotation's
text is an http(s) URL to show as a link (`monitor.core.annotations.is_link`).

The number filters are the rule templates' (`monitor.core.formatting`), since the same person reads a
rule's summary and the notification around it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Final

import jinja2

from monitor.alert.model import AlertView, Notification
from monitor.core.annotations import is_link
from monitor.core.errors import ConfigError
from monitor.core.formatting import NUMBER_FILTERS, printable, visible_output
from monitor.core.resources import templates_dir
from monitor.core.templating import BoundedSandbox, render_bounded

TEMPLATE_NAMES: Final = (
    "slack.txt",
    "email.subject.txt",
    "email.txt",
    "email.html",
    "pagerduty.summary.txt",
)
"""The templates receivers use; each must exist and parse in a template directory."""

MAX_NOTIFICATION_TEXT: Final = 1024 * 1024
"""Characters one notification template may render to (an email about hundreds of alerts is far
less); more is a template error, and the receiver gives up on the notification."""

NOTIFICATION_RENDER_SECONDS: Final = 5.0
"""Time one notification template may take to render."""

_TITLE_RULES: Final = 3
_WHITESPACE = re.compile(r"\s+")


def default_template_dir() -> Path:
    """The shipped `templates/notifications/`."""
    return templates_dir() / "notifications"


# ---------------------------------------------------------------------------------------------
# Filters


def timestamp_filter(moment: datetime | None) -> str:
    """2026-11-21 14:03:09 UTC; a naive datetime is taken as UTC (the store keeps UTC)."""
    if moment is None:
        return "unknown"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def mrkdwn_filter(text: object) -> str:
    """Slack's escaping for text inside mrkdwn: only &, < and > are special."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def annotations_filter(alerts: Iterable[AlertView]) -> list[tuple[str, str]]:
    """The distinct (name, text) pairs of the alerts' annotations, first seen first."""
    return list(dict.fromkeys(pair for alert in alerts for pair in alert.annotations.items()))


FILTERS: Final[Mapping[str, Callable[..., Any]]] = {
    **NUMBER_FILTERS,
    "timestamp": timestamp_filter,
    "mrkdwn": mrkdwn_filter,
    "annotations": annotations_filter,
}


# ---------------------------------------------------------------------------------------------
# The context


def title(notification: Notification) -> str:
    """One line: `[CRITICAL] 3 firing: UnderMinIsr (cluster=prod)`.

    The tag says what kind of notice it is (`[RESOLVED]`, `[ACKNOWLEDGED]`, `[ESCALATED WARNING]`),
    the count is of firing alerts (of resolved ones in a resolved notice), then the rules and
    the labels the group was formed on.
    """
    severity = notification.severity.upper()
    tag = {
        "resolved": "RESOLVED",
        "acknowledge": "ACKNOWLEDGED",
        "escalation": f"ESCALATED {severity}",
    }.get(notification.kind, severity)
    firing, resolved = notification.firing, notification.resolved
    if notification.kind != "resolved" and firing:
        count = f"{len(firing)} firing"
    else:
        count = f"{len(resolved or notification.alerts)} resolved"
    rules = list(dict.fromkeys(alert.rule for alert in notification.alerts))
    named = ", ".join(rules[:_TITLE_RULES])
    if len(rules) > _TITLE_RULES:
        named += f" and {len(rules) - _TITLE_RULES} more"
    labels = {k: v for k, v in notification.group_labels.items() if k != "rule"}
    clusters = {alert.cluster for alert in notification.alerts}
    if not labels and len(clusters) == 1:
        labels = {"cluster": clusters.pop()}
    where = f" ({', '.join(f'{k}={v}' for k, v in sorted(labels.items()))})" if labels else ""
    return printable(f"[{tag}] {count}: {named}{where}")


def template_context(notification: Notification, external_url: str) -> dict[str, Any]:
    """The documented context (see `monitor.alert.model`)."""
    return {
        "notification": notification,
        "alerts": list(notification.alerts),
        "firing": notification.firing,
        "resolved": notification.resolved,
        "common_labels": notification.common_labels,
        "owners": notification.owners,
        "title": title(notification),
        "external_url": external_url.rstrip("/"),
    }


def one_line(text: str) -> str:
    """A rendered subject or summary as one line: runs of whitespace become one space."""
    return _WHITESPACE.sub(" ", text).strip()


# ---------------------------------------------------------------------------------------------
# Rendering


def notification_environment(directory: Path) -> jinja2.Environment:
    """Sandboxed and bounded (a template reaches no Python internals, changes nothing and costs
    little: `monitor.core.templating`), strict undefined, our filters, HTML escaping for `.html`
    templates only, and every printed string shown through `printable` (`visible_output`), so a
    name cannot steer or pass for another in any message."""
    env = BoundedSandbox(
        loader=jinja2.FileSystemLoader(directory),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html",), default_for_string=False),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        finalize=visible_output,
    )
    env.filters.update(FILTERS)
    env.tests["link"] = is_link
    return env


class Templates:
    """The notification templates of one directory, compiled once; safe to share between threads.

    `external_url` is the monitor's web address used in links (a trailing slash is dropped).
    Raises `ConfigError` when a template is missing or does not parse.
    """

    def __init__(self, external_url: str = "", directory: Path | None = None) -> None:
        self.directory = directory if directory is not None else default_template_dir()
        self.external_url = external_url.rstrip("/")
        self._env = notification_environment(self.directory)
        problems = []
        for name in TEMPLATE_NAMES:
            try:
                self._env.get_template(name)
            except jinja2.TemplateNotFound:
                problems.append(f"{name}: template is missing; add it (see {default_template_dir()})")
            except jinja2.TemplateSyntaxError as exc:
                problems.append(f"{exc.name or name} line {exc.lineno}: {exc.message}")
        if problems:
            raise ConfigError(problems, f"notification templates in {self.directory}")

    def render(self, template_name: str, notification: Notification) -> str:
        """The template's text. Raises `jinja2.TemplateError` (e.g. `UndefinedError`) on a bad
        template; receivers turn that into a delivery that gives up."""
        template = self._env.get_template(template_name)
        context = template_context(notification, self.external_url)
        return render_bounded(
            template, context, limit=MAX_NOTIFICATION_TEXT, seconds=NOTIFICATION_RENDER_SECONDS
        )

    def __repr__(self) -> str:
        return f"Templates({str(self.directory)!r}, external_url={self.external_url!r})"


@lru_cache(maxsize=8)
def _default_templates(external_url: str) -> Templates:
    return Templates(external_url)


def render(template_name: str, notification: Notification, external_url: str) -> str:
    """Render one of `templates/notifications/` for `notification`, with links to `external_url`."""
    return _default_templates(external_url.rstrip("/")).render(template_name, notification)
