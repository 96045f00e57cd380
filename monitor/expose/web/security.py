"""The security headers of every answer (pages, API, errors, static files, /metrics), set in
one middleware, and the API's documentation page under the same policy.

- `Content-Security-Policy`: only this site's own scripts, styles and images (`default-src
  'self'`); an inline `<style>` needs the answer's nonce (the charts' scoped CSS: `charts.Chart`
  asks `nonce()` while the page renders); no inline script at all; no plugins, no `<base>`, forms
  post only here; and `frame-ancestors 'none'`, so no other site can frame a page and trick a
  click on its buttons (clickjacking).
- `X-Frame-Options: DENY` for browsers that predate `frame-ancestors`; `X-Content-Type-Options:
  nosniff`; `Referrer-Policy: same-origin` (a page's address, which names topics and groups,
  never leaves the site); `Strict-Transport-Security` when `web.behind_tls` says the monitor is
  reached over HTTPS.

`/docs` is FastAPI's Swagger UI, whose script and style come from its CDN: that page's policy adds
the CDN and the hashes of its own inline script, nothing else. `/redoc` (FastAPI's other
documentation page) is not served: ReDoc writes its styles into the page as it runs (inline
`<style>` elements without the answer's nonce), which the policy would have to allow with
`style-src 'unsafe-inline'`; it answers 404 naming `/docs`.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import secrets
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Final

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response

log = logging.getLogger(__name__)

_NONCE: ContextVar[str] = ContextVar("csp_nonce", default="")
CDN: Final = "https://cdn.jsdelivr.net"
"""Where FastAPI's Swagger UI loads its script and style from."""
HSTS: Final = "max-age=31536000"
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def nonce() -> str:
    """The nonce of the answer being rendered, for an inline `<style nonce=...>` ("" outside one)."""
    return _NONCE.get()


def policy(style_nonce: str = "", *, script: str = "", style: str = "", img: str = "") -> str:
    """The Content-Security-Policy: this site only; `script`, `style` and `img` add sources."""
    style_sources = f"'self' 'nonce-{style_nonce}'" if style_nonce else "'self'"
    return "; ".join([
        "default-src 'self'",
        f"script-src 'self'{script}",
        f"style-src {style_sources}{style}",
        f"img-src 'self' data:{img}",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ])  # fmt: skip


def install(app: FastAPI, *, hsts: bool = False) -> None:
    """Send the security headers on every answer of `app`, and serve `/docs` under the policy."""

    @app.middleware("http")
    async def security_headers(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        value = secrets.token_urlsafe(16)
        token = _NONCE.set(value)
        try:
            response = await call_next(request)
        except Exception:  # answered here, so that even this answer carries the headers
            log.exception("unhandled error answering %s %s", request.method, request.url.path)
            message = "an internal error; it is logged"
            response = JSONResponse({"error": {"code": "internal_error", "message": message}}, 500)
        finally:
            _NONCE.reset(token)
        headers = response.headers
        headers.setdefault("Content-Security-Policy", policy(value))
        headers["X-Frame-Options"] = "DENY"
        headers["X-Content-Type-Options"] = "nosniff"
        headers["Referrer-Policy"] = "same-origin"
        if hsts:
            headers["Strict-Transport-Security"] = HSTS
        return response

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        """The API's documentation (Swagger UI): its CDN and its own inline script allowed."""
        page = get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} API")
        body = bytes(page.body).decode()
        hashes = "".join(f" '{_sha256(script)}'" for script in _INLINE_SCRIPT.findall(body))
        page.headers["Content-Security-Policy"] = policy(
            script=f" {CDN}{hashes}", style=f" {CDN}", img=" https://fastapi.tiangolo.com"
        )
        return page

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> JSONResponse:
        """Not served (see the module's docstring): a 404 that says where the documentation is."""
        return JSONResponse({"error": {"code": "not_found", "message": REDOC_REFUSED}}, 404)


REDOC_REFUSED: Final = (
    "/redoc is not served: ReDoc needs inline styles the Content-Security-Policy refuses. The API's "
    "documentation is /docs (Swagger UI); the OpenAPI document is /openapi.json"
)


def _sha256(script: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
