"""The Grafana dashboards of deploy/grafana: each JSON model is well formed (unique uids, every
panel titled, described, on the `${datasource}` variable and with a query), every query names
catalogued metrics and labels, and every panel's PromQL, its template variables resolved the way
Grafana resolves them (the variables' own `label_values` queries, "All" selected), returns series
from Debian's real Prometheus scraping the real app's /metrics over the populated database."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from monitor.devtools.servers import PrometheusServer
from monitor.expose.metrics.catalogue import BY_NAME, MetricSpec
from tests.fixtures.populated import Populated

GRAFANA = Path(__file__).resolve().parents[2] / "deploy" / "grafana"
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

BUILTINS = {"__rate_interval": "1m", "__interval": "15s", "__range": "1h", "__range_s": "3600"}
"""Grafana's built-in variables, as a dashboard over the last hour at a 15 s scrape has them."""

MAY_BE_EMPTY: dict[tuple[str, str, str], str] = {
    ("kafka-health-cluster", "End-to-end probe", "A"): "the probe runs only with collect.probe.enabled",
    ("kafka-health-cluster", "End-to-end probe", "B"): "the probe runs only with collect.probe.enabled",
    ("kafka-health-consumer-group", "Time since last commit", "A"):
        "absent until the monitor has seen the group commit (a committed offset changing between two"
        " collections); the populated groups committed before the first collection",
    ("kafka-health-alerts", "Notifications by receiver and outcome", "A"):
        "a counter of delivery attempts, absent until this process delivered a notification; the"
        " populated alert cycle queues notifications without delivering them",
    ("kafka-health-alerts", "Notification failures by reason", "A"):
        "a counter of failed deliveries, absent until one failed",
    ("kafka-health-alerts", "Metrics push failures and queue", "A"):
        "a counter of failed pushes, absent until a configured push target failed",
    ("kafka-health-alerts", "Metrics push failures and queue", "B"):
        "one series per configured push target; the populated app pushes nowhere",
}  # fmt: skip
"""Panel queries that can have no series on a healthy monitor (dashboard uid, panel title, refId),
with the reason. Each panel's description says so too."""

VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")
LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*(?P<label>\w+)\)$")
SELECTOR = re.compile(r"\b(?P<name>(?:kafka|kminion)_\w+)(?:\{(?P<matchers>[^}]*)\})?")
GROUPING = re.compile(r"\b(?:by|without)\s*\((?P<labels>[^)]*)\)")
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")


def _load(path: Path) -> dict[str, Any]:
    board: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return board


def _yaml(relative: str) -> Any:
    return yaml.safe_load((GRAFANA / relative).read_text(encoding="utf-8"))


def _panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows too; rows themselves hold no query."""
    found: list[dict[str, Any]] = []
    for panel in board["panels"]:
        if panel["type"] == "row":
            found.extend(panel.get("panels", []))
        else:
            found.append(panel)
    return found


def _queries(board: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(panel title, refId, PromQL) of every target of the dashboard."""
    return [(p["title"], t["refId"], t["expr"]) for p in _panels(board) for t in p["targets"]]


def _variables(board: dict[str, Any]) -> list[dict[str, Any]]:
    return list(board["templating"]["list"])


def substitute(expr: str, values: dict[str, str]) -> str:
    """`expr` with `$name`, `${name}`, `${name:format}` and `[[name]]` replaced from `values` or
    Grafana's built-ins; an unknown variable fails, naming it."""

    def value(match: re.Match[str]) -> str:
        name = next(group for group in match.groups() if group)
        known = {**BUILTINS, **values}
        assert name in known, f"{expr!r} uses ${name}, which the dashboard does not define"
        return known[name]

    return VARIABLE.sub(value, expr)


def all_selected(values: list[str]) -> str:
    """A multi-value variable with "All" selected, as Grafana writes it into PromQL: the values
    regex-escaped, joined into one alternation, backslashes doubled inside the string literal."""
    return "(" + "|".join(re.escape(v).replace("\\", "\\\\") for v in sorted(values)) + ")"


def _spec(name: str) -> MetricSpec | None:
    if name in BY_NAME:
        return BY_NAME[name]
    for suffix in HISTOGRAM_SERIES:
        base = BY_NAME.get(name.removesuffix(suffix))
        if name.endswith(suffix) and base is not None and base.type == "histogram":
            return base
    return None


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.stem for p in DASHBOARDS])
def test_each_dashboard_is_well_formed(path: Path) -> None:
    board = _load(path)
    assert board["uid"].startswith("kafka-health-") and board["title"] and board["description"]
    assert board["schemaVersion"] >= 36
    variables = {v["name"]: v for v in _variables(board)}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert "cluster" in variables, "every dashboard selects clusters"
    for variable in _variables(board):
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE, variable["name"]
            assert LABEL_VALUES.match(variable["query"]), variable["query"]
    panels = _panels(board)
    assert 5 <= len(panels) <= 12, f"{path.name}: {len(panels)} panels"
    assert len({p["id"] for p in panels}) == len(panels), "panel ids repeat"
    defined = {name: "x" for name in variables}
    for panel in panels:
        title = panel.get("title", "")
        assert title, f"{path.name}: a panel has no title"
        assert len(panel.get("description", "")) > 80, f"{title}: say what it shows and what to do"
        assert panel["datasource"] == DATASOURCE, title
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}, title
        assert panel["targets"], f"{title}: no query"
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"]), title
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, title
            assert target["expr"].strip(), title
            substitute(target["expr"], defined)


def test_dashboard_uids_and_titles_are_unique() -> None:
    boards = [_load(path) for path in DASHBOARDS]
    assert len(boards) == 5
    assert len({b["uid"] for b in boards}) == len(boards)
    assert len({b["title"] for b in boards}) == len(boards)


def test_the_group_and_topic_dashboards_select_groups_and_topics() -> None:
    names = {b["uid"]: {v["name"] for v in _variables(b)} for b in map(_load, DASHBOARDS)}
    assert {"cluster", "group"} <= names["kafka-health-consumer-group"]
    assert {"cluster", "topic"} <= names["kafka-health-topic"]


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.stem for p in DASHBOARDS])
def test_every_query_names_catalogued_metrics_and_their_labels(path: Path) -> None:
    board = _load(path)
    exprs = [(title, expr) for title, _, expr in _queries(board)]
    exprs += [(v["name"], v["query"]) for v in _variables(board) if v["type"] == "query"]
    for title, expr in exprs:
        used: set[str] = set()
        for match in SELECTOR.finditer(expr):
            spec = _spec(match["name"])
            assert spec is not None, f"{title}: {match['name']} is not in metrics/catalogue.py"
            used |= set(spec.labels)
            for matcher in filter(None, (m.strip() for m in (match["matchers"] or "").split(","))):
                label = re.split(r"[=!~]", matcher, maxsplit=1)[0]
                assert label in spec.labels, f"{title}: {spec.name} has no label {label!r}"
        for grouping in GROUPING.finditer(expr):
            labels = {label.strip() for label in grouping["labels"].split(",")}
            assert labels <= used | {"instance", "job"}, f"{title}: grouped by {labels - used}"


def test_the_provisioning_files_load_the_dashboard_folder() -> None:
    provider = _yaml("provisioning/dashboards/kafka-health.yaml")
    (dashboards,) = provider["providers"]
    assert provider["apiVersion"] == 1
    assert dashboards["type"] == "file" and dashboards["options"]["path"]
    datasources = _yaml("provisioning/datasources/prometheus.yaml")
    assert [d["type"] for d in datasources["datasources"]] == ["prometheus"]


def test_may_be_empty_names_real_panels() -> None:
    known = {(b["uid"], title, ref) for b in map(_load, DASHBOARDS) for title, ref, _ in _queries(b)}
    assert set(MAY_BE_EMPTY) <= known, set(MAY_BE_EMPTY) - known


def _resolve(prometheus: PrometheusServer, board: dict[str, Any]) -> dict[str, str]:
    """Each query variable's values from its own `label_values` query (earlier variables
    substituted), "All" selected."""
    values: dict[str, str] = {"datasource": "prometheus"}
    for variable in _variables(board):
        if variable["type"] != "query":
            continue
        match = LABEL_VALUES.match(variable["query"])
        assert match is not None, variable["query"]
        series = prometheus.query(substitute(match["selector"], values))
        found = sorted({s["metric"][match["label"]] for s in series if match["label"] in s["metric"]})
        assert found, f"{board['uid']}: variable {variable['name']} has no values"
        values[variable["name"]] = all_selected(found)
    return values


def _series(prometheus: PrometheusServer, promql: str) -> list[dict[str, Any]] | str:
    """The series `promql` returns now, or Prometheus's error."""
    try:
        return prometheus.query(promql)
    except httpx.HTTPStatusError as exc:
        return f"{exc.response.status_code}: {exc.response.text}"


def test_every_panel_returns_series_from_a_real_scrape(
    populated: Populated, scraping_prometheus: PrometheusServer
) -> None:
    errors: dict[tuple[str, str, str], str] = {}
    empty: set[tuple[str, str, str]] = set()
    answered: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for board in map(_load, DASHBOARDS):
        values = _resolve(scraping_prometheus, board)
        for title, ref, expr in _queries(board):
            key = (board["uid"], title, ref)
            got = _series(scraping_prometheus, substitute(expr, values))
            if isinstance(got, str):
                errors[key] = got
            elif not got:
                empty.add(key)
            else:
                answered[key] = got
    assert not errors, errors
    assert empty <= set(MAY_BE_EMPTY), sorted(empty - set(MAY_BE_EMPTY))
    # The lag panel shows each group's known lag.
    lag = {s["metric"]["group"]: float(s["value"][1])
           for s in answered["kafka-health-consumer-group", "Lag in messages", "A"]}  # fmt: skip
    for role, group in populated.groups.items():
        assert lag[group.name] == group.lag, role
