"""A rule's jinja2 summary as a Prometheus alert template (Go's text/template with Prometheus'
functions), where it reads only what an alert there knows.

- the entity's key columns and `cluster` are the alert's labels: `{{ $labels.group }}`;
- `value` is the alert's value, `{{ $value }}`, when the exported expression keeps the rule's value;
- `severity` is the tier's word, written in;
- another column `/metrics` serves is read when the notification is made, with `query`;
- the number filters map to Prometheus' own: `duration` to `humanizeDuration`, `number` to
  `humanize`, `percent` to `humanizePercentage`, `bytes` to `humanize1024` and `B`.

The catch-up forecast and the consumer advice (the `catch_up` and `advice` filters) are the
evaluation's sentences, not served: they are left out with the separator before them. Anything
else (a condition, a loop, another filter, a column not served) raises `Inexpressible`; the caller
then uses the rule's plain description.
"""

from __future__ import annotations

import json

import jinja2
from jinja2 import nodes

from monitor.evaluate.rules import template_environment
from monitor.expose.metrics.rules_export.promql import Inexpressible
from monitor.expose.metrics.rules_export.served import key_label, served_columns

_FILTERS = {
    "duration": "humanizeDuration",
    "latency": "humanizeDuration",
    "number": "humanize",
    "percent": "humanizePercentage",
    "bytes": "humanize1024",
    "int": 'printf "%.0f"',
}
_ROUND = "round"
"""jinja2's round(n): printf with n decimals."""
_UNITS = {"bytes": "B"}
_EVALUATION_SENTENCES = ("catch_up", "advice")
"""The filters of the catch-up forecast and the consumer advice (`monitor.core.formatting`)."""
_ENV = template_environment()


def go_template(source: str, entity: str, *, severity: str, value_kept: bool) -> str:
    """`source` as a Prometheus template for an alert of `entity`'s rule at tier `severity`."""
    try:
        tree = _ENV.parse(source)
    except jinja2.TemplateSyntaxError as exc:
        raise Inexpressible(f"the summary does not parse: {exc.message}") from exc
    parts: list[str] = []
    for node in tree.body:
        if not isinstance(node, nodes.Output):
            raise Inexpressible(f"the summary uses {type(node).__name__.lower()} blocks")
        for item in node.nodes:
            if isinstance(item, nodes.Filter) and item.name in _EVALUATION_SENTENCES:
                if parts:
                    parts[-1] = parts[-1].rstrip().rstrip(";,")
                continue
            parts.append(_item(item, entity, severity=severity, value_kept=value_kept))
    return "".join(parts)


def _item(item: nodes.Node, entity: str, *, severity: str, value_kept: bool) -> str:
    if isinstance(item, nodes.TemplateData):
        return str(item.data).replace("{{", '{{ "{{" }}')
    name, filter_name, pipe = _name_and_filter(item)
    if name == "severity" and filter_name is None:
        return severity
    label = "cluster" if name == "cluster" else key_label(entity, name)
    if label is not None and filter_name is None:
        return f"{{{{ $labels.{label} }}}}"
    unit = _UNITS.get(filter_name or "", "")
    if name == "value":
        if not value_kept:
            raise Inexpressible("the summary shows the rule's value, which /metrics does not serve")
        return f"{{{{ $value{pipe} }}}}{unit}"
    return _queried(name, entity, pipe) + unit


def _name_and_filter(item: nodes.Node) -> tuple[str, str | None, str]:
    """The variable, its filter and that filter as a Go template pipe (` | humanize`)."""
    if isinstance(item, nodes.Name):
        return item.name, None, ""
    if isinstance(item, nodes.Filter) and isinstance(item.node, nodes.Name):
        if item.name == _ROUND and not item.kwargs:
            digits = item.args[0].value if item.args and isinstance(item.args[0], nodes.Const) else 0
            if isinstance(digits, int) and 0 <= digits <= 9:
                return item.node.name, item.name, f' | printf "%.{digits}f"'
        elif item.name in _FILTERS:
            return item.node.name, item.name, f" | {_FILTERS[item.name]}"
    raise Inexpressible("the summary uses an expression beyond a variable and a number filter")


def _queried(column: str, entity: str, pipe: str) -> str:
    """`column` read with `query` when the notification is made ("unknown" when missing)."""
    served = served_columns(entity).get(column)
    if served is None or served.text_label is not None:
        raise Inexpressible(f"the summary shows {column!r}, which /metrics does not serve as a number")
    matchers = ",".join(f"{label}=%q" for label in served.keys)
    selector = json.dumps(served.read(f"{{{matchers}}}"))
    arguments = " ".join(f"$labels.{label}" for label in served.keys)
    return (
        f"{{{{ with printf {selector} {arguments} | query }}}}"
        f"{{{{ . | first | value{pipe} }}}}{{{{ else }}}}unknown{{{{ end }}}}"
    )
