"""What every request must be before a route sees it, and the bounded field types request models
use, so that bad input is answered with a 4xx that says what is wrong, never a 500 or a 503.

- `guard_input`: a request whose path or query holds a NUL byte is refused with 422 before
  routing (PostgreSQL cannot store NUL, so nothing we serve is named so).
- `Text`: strings without NUL bytes or lone surrogates (which JSON can carry as `\\ud800` but
  UTF-8, and so PostgreSQL, cannot).
- `Id`, `Limit`, `Offset`: integers in the range of the columns and queries they reach, read
  as `monitor.core.user_input` reads every number a person types (ASCII digits, bounded before
  they are converted); `Paging`: a list's `limit` and `offset` as one `Page`. `JsonInt`: a
  number in a JSON body, which must be a JSON integer (not `true`, not `"5"`, not `5.0`).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Annotated
from urllib.parse import unquote

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import AfterValidator, BeforeValidator, Field
from starlette.convertors import Convertor, register_url_convertor

from monitor.core.user_input import BIGINT_MAX, whole_number
from monitor.expose.read.queries import DEFAULT_LIMIT, MAX_LIMIT, Page

MAX_ID = BIGINT_MAX
"""Ids are PostgreSQL bigints."""
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _text(value: str) -> str:
    if "\x00" in value:
        raise ValueError("contains a NUL byte (\\u0000); remove it")
    if _SURROGATE.search(value):
        raise ValueError("contains a lone surrogate (\\ud800-\\udfff), which is not text; send UTF-8 text")
    return value


Text = Annotated[str, AfterValidator(_text)]


def digits(what: str, low: int, high: int) -> BeforeValidator:
    """A path or query parameter's check: ASCII digits within [low, high] (`user_input.whole_number`).
    Put it after the `Path`/`Query` of an `Annotated`, whose bounds the document states."""
    return BeforeValidator(lambda value: whole_number(value, what, low=low, high=high))


def json_int(what: str, low: int, high: int) -> BeforeValidator:
    """A JSON body field's check: a JSON integer within [low, high]; `true`, `"5"` and `5.0` are
    refused (pydantic would read them as 1 and 5)."""

    def check(value: object) -> int:
        if isinstance(value, str):
            raise ValueError(f"{what} must be a JSON number, not the text {value[:40]!r}")
        return whole_number(value, what, low=low, high=high)

    return BeforeValidator(check)


Id = Annotated[
    int, Path(ge=1, le=MAX_ID, description="A positive id (a 64-bit integer)."), digits("id", 1, MAX_ID)
]
Limit = Annotated[
    int,
    Query(ge=1, le=MAX_LIMIT, description=f"entries per page (at most {MAX_LIMIT})"),
    digits("limit", 1, MAX_LIMIT),
]
JsonId = Annotated[int, Field(ge=1, le=MAX_ID), json_int("id", 1, MAX_ID)]
"""An id in a JSON body."""
MAX_OFFSET = 100_000_000
"""The largest `offset` of a list, API (`Offset`) or page (`list_offset`)."""
Offset = Annotated[
    int, Query(ge=0, le=MAX_OFFSET, description="entries to skip"), digits("offset", 0, MAX_OFFSET)
]


def page_asked(limit: Limit = DEFAULT_LIMIT, offset: Offset = 0) -> Page:
    """The page of a list a request asks for, from its `limit` and `offset` query parameters."""
    return Page(limit, offset)


Paging = Annotated[Page, Depends(page_asked)]
"""A list route's `limit` and `offset`, bounded, as the read layer's `Page`."""


def guard_input(app: FastAPI) -> None:
    """Refuse requests whose path or query string carries a NUL byte."""

    @app.middleware("http")
    async def refuse_control(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        raw = unquote(request.url.path) + unquote(request.url.query)
        if "\x00" in raw:
            return JSONResponse(
                {
                    "error": {
                        "code": "invalid_parameter",
                        "message": "the path or query string holds a NUL byte (%00); remove it",
                    }
                },
                status_code=422,
            )
        return await call_next(request)


class AnyNameConvertor(Convertor[str]):
    """A path parameter that is the rest of the path, whatever it holds: a consumer group id may
    hold `/` and control characters, a newline too, which Starlette's own `path` (`.*`) does not
    match. Routes name it `{group:name}` (`ANY_NAME`)."""

    regex = "(?s:.*)"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


ANY_NAME = "name"
"""The convertor's name, registered when this module is imported (before a route names it)."""
register_url_convertor(ANY_NAME, AnyNameConvertor())


MAX_SEARCH = 255
"""The longest search text a list page takes (a topic name is at most 249 characters)."""


def search_text(value: str) -> str:
    """A list page's search text, as typed: matched literally (no wildcards), bounded. Markup and
    control characters are data: they match names holding them and are shown back escaped."""
    if len(value) > MAX_SEARCH:
        raise ValueError(f"the search text is {len(value)} characters long; use at most {MAX_SEARCH}")
    return _text(value)


def list_offset(value: str) -> int:
    """A list page's `offset`: a whole number from 0 to `MAX_OFFSET`."""
    return whole_number(value, "offset", high=MAX_OFFSET)
