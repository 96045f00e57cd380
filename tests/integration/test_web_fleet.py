"""Pages and API lists at fleet scale, over bench/web.py's read model of 1,000 topics (100 groups,
about 300 alerts): every page shows a bounded number of rows whatever the fleet's size, the
cluster page its counts and the worst rows with links to the full lists, the lists and the alerts
page go page by page and search names as typed text, and the API says where the next page is."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from bench.web import CLUSTER, Shape, fill
from monitor.core.clock import SystemClock
from monitor.expose.web.app import create_app
from monitor.expose.web.inputs import MAX_SEARCH
from monitor.expose.web.pages.alerts import SECTION_ROWS
from monitor.expose.web.pages.toolkit import LIST_ROWS, WORST_ROWS

SHAPE = Shape(1_000)
MAX_PAGE_BYTES = 1_000_000
CLUSTER_PAGE = f"/clusters/{CLUSTER}"


@pytest.fixture(scope="module")
def client(engine: Engine) -> Iterator[TestClient]:
    fill(engine, SHAPE, evaluations=2, now=datetime.now(UTC))
    app = create_app(engine, stale_after=timedelta(minutes=10), clock=SystemClock())
    with TestClient(app) as test_client:
        yield test_client


def _rows(html: str, table: str) -> list[str]:
    """The names linked in the rows of the table whose id is `table`."""
    body = html[html.index(f'id="{table}"') :]
    body = body[: body.index("</table>")]
    return re.findall(r'<td><a href="[^"]+">([^<]+)</a>', body)


def test_the_cluster_page_shows_counts_and_the_worst_rows_with_links(client: TestClient) -> None:
    page = client.get(CLUSTER_PAGE)
    assert page.status_code == 200 and len(page.content) < MAX_PAGE_BYTES
    html = page.text
    topics, groups = _rows(html, "topics"), _rows(html, "groups")
    assert len(topics) == WORST_ROWS and len(groups) == WORST_ROWS
    assert f"the {WORST_ROWS} worst of 1,000" in html and f"the {WORST_ROWS} worst of 100" in html
    assert 'href="/clusters/bench/topics" data-role="all-topics">All 1,000 topics' in html
    assert 'href="/clusters/bench/groups" data-role="all-groups">All 100 consumer groups' in html
    # topic n is under-replicated when n % 97 == 0: those come before any healthy topic
    assert topics[:3] == ["topic-00000", "topic-00097", "topic-00194"]


def test_the_topic_list_goes_page_by_page_worst_first(client: TestClient) -> None:
    seen: list[str] = []
    path = f"{CLUSTER_PAGE}/topics"
    while path:
        page = client.get(path)
        assert page.status_code == 200 and len(page.content) < MAX_PAGE_BYTES
        rows = _rows(page.text, "topics")
        assert 0 < len(rows) <= LIST_ROWS
        seen += rows
        found = re.search(r'rel="next" href="([^"]+)"', page.text)
        path = found.group(1).replace("&amp;", "&") if found else ""
    assert len(seen) == 1_000 and len(set(seen)) == 1_000, "every topic once"
    assert seen[0] == "topic-00000" and seen[1] == "topic-00097"
    assert 'rel="prev" href="/clusters/bench/topics?offset=800"' in page.text


def test_a_search_matches_names_as_typed(client: TestClient) -> None:
    one = client.get(f"{CLUSTER_PAGE}/topics", params={"q": "topic-0099"})
    assert _rows(one.text, "topics") == [f"topic-0099{d}" for d in range(10)]
    assert "1\u201310 of 10" in one.text and 'rel="next"' not in one.text
    groups = client.get(f"{CLUSTER_PAGE}/groups", params={"q": "group-001", "offset": "5"})
    assert _rows(groups.text, "groups") and len(_rows(groups.text, "groups")) == 5
    wildcard = client.get(f"{CLUSTER_PAGE}/topics", params={"q": "topic_%"})
    assert wildcard.status_code == 200 and _rows(wildcard.text, "topics") == []
    assert "Nothing matches." in wildcard.text


def test_search_text_is_data_shown_escaped(client: TestClient) -> None:
    markup = '<script>alert("x")</script>\x07'
    page = client.get(f"{CLUSTER_PAGE}/groups", params={"q": markup})
    assert page.status_code == 200
    assert "<script>alert" not in page.text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page.text
    alerts = client.get("/alerts", params={"q": markup})
    assert alerts.status_code == 200 and "<script>alert" not in alerts.text


@pytest.mark.parametrize(
    ("path", "params", "says"),
    [
        (f"{CLUSTER_PAGE}/topics", {"q": "x" * (MAX_SEARCH + 1)}, f"use at most {MAX_SEARCH}"),
        (f"{CLUSTER_PAGE}/groups", {"offset": "-1"}, "offset must be a whole number"),
        ("/alerts", {"section": "loud"}, "section must be one of firing, pending"),
        ("/alerts", {"offset": "ten"}, "offset must be a whole number"),
    ],
)
def test_bad_list_input_is_a_422_page_that_says_why(
    client: TestClient, path: str, params: dict[str, str], says: str
) -> None:
    page = client.get(path, params=params)
    assert page.status_code == 422 and "text/html" in page.headers["content-type"]
    assert says in page.text


def test_the_unknown_cluster_has_no_list(client: TestClient) -> None:
    assert client.get("/clusters/nowhere/topics").status_code == 404


def test_the_alerts_page_shows_each_section_a_page_at_a_time(client: TestClient) -> None:
    page = client.get("/alerts")
    assert page.status_code == 200 and len(page.content) < MAX_PAGE_BYTES
    firing = page.text[page.text.index('data-section="firing"') :]
    firing = firing[: firing.index("</table>")]
    first = re.findall(r'data-alert="([^"]+)"', firing)
    assert len(first) == SECTION_ROWS
    total = int(re.search(r'data-count="firing">(\d+)<', page.text).group(1))  # type: ignore[union-attr]
    assert total > SECTION_ROWS
    assert f'href="/alerts?section=firing&amp;offset={SECTION_ROWS}#firing"' in page.text
    second = client.get("/alerts", params={"section": "firing", "offset": str(SECTION_ROWS)}).text
    rows = second[second.index('data-section="firing"') :]
    following = re.findall(r'data-alert="([^"]+)"', rows[: rows.index("</table>")])
    assert following and not set(following) & set(first)
    searched = client.get("/alerts", params={"q": "group-0000 lags on topic-00000"}).text
    assert 'data-count="firing">1<' in searched or 'data-count="pending">1<' in searched


def test_api_lists_say_where_the_next_page_is(client: TestClient) -> None:
    topics = client.get(f"/api/v1/clusters/{CLUSTER}/topics", params={"sort": "worst"}).json()
    assert (topics["total"], topics["limit"], topics["offset"], topics["next_offset"]) == (1000, 100, 0, 100)
    assert [t["topic"] for t in topics["items"][:2]] == ["topic-00000", "topic-00097"]
    last = client.get(f"/api/v1/clusters/{CLUSTER}/topics", params={"offset": 950}).json()
    assert len(last["items"]) == 50 and last["next_offset"] is None
    assert client.get(f"/api/v1/clusters/{CLUSTER}/topics", params={"limit": 1001}).status_code == 422


def test_the_alert_api_pages_with_a_link_header(client: TestClient) -> None:
    first = client.get("/api/v1/alerts", params={"limit": 200})
    assert first.status_code == 200 and len(first.json()) == 200
    link = first.headers["link"]
    assert link == '</api/v1/alerts?limit=200&offset=200>; rel="next"'
    rest = client.get(link[1 : link.index(">")])
    assert 0 < len(rest.json()) <= 200 and "link" not in rest.headers
    ids = [a["id"] for a in first.json() + rest.json()]
    assert len(ids) == len(set(ids))
    default = client.get("/api/v1/alerts").json()
    assert isinstance(default, list) and len(default) == 100, "the first page, the same shape as before"
    incidents = client.get("/api/v1/incidents", params={"limit": 1})
    assert len(incidents.json()) == 1 and 'rel="next"' in incidents.headers["link"]
