"""Property-based tests of the JSON API and the Burrow endpoints against their own OpenAPI
document (schemathesis, in process over ASGI): for generated parameters, valid and invalid, no
answer is a 5xx and every answer (status, content type, body) conforms to the document.

The app reads the synthetic rows of `tests.fixtures.read_model`; the documented examples of the
path parameters (cluster `prod`, topic `orders`, group `billing`) make some cases hit real rows.
Examples per operation are bounded so the module runs in well under a minute.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from sqlalchemy import Engine

from monitor.clock import FakeClock
from monitor.expose.web import create_app
from tests.fixtures.read_model import T1, fill

OURS = r"^/(api/v1/(clusters|findings)|v3/kafka)"
EXAMPLES = 15


@pytest.fixture(scope="module")
def api_schema(engine: Engine) -> schemathesis.BaseSchema:
    with engine.begin() as conn:
        fill(conn)
    app = create_app(engine, stale_after=timedelta(minutes=5), clock=FakeClock(T1))
    return schemathesis.openapi.from_asgi("/openapi.json", app).include(path_regex=OURS)


KNOWN = {"cluster": "prod", "topic": "orders", "group": "billing", "partition": 0}
"""Path parameters that name rows of the synthetic cluster."""


def test_every_answer_conforms_to_the_document(api_schema: schemathesis.BaseSchema) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) == 20
    for operation in operations:
        _conforms(operation)


def _conforms(operation: schemathesis.APIOperation) -> None:
    """One known case, then generated ones (valid and invalid parameters)."""
    names = [p.name for p in operation.path_parameters]
    operation.Case(path_parameters={n: KNOWN[n] for n in names}).call_and_validate()

    @given(case=operation.as_strategy())
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def generated(case: schemathesis.Case) -> None:
        case.call_and_validate()

    generated()
