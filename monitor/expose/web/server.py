"""The web server as an app component: uvicorn in a thread, stopped gracefully."""

from __future__ import annotations

import logging
import threading
import time

import uvicorn
from fastapi import FastAPI

from monitor.core.errors import MonitorError

log = logging.getLogger(__name__)


class WebServer:
    name = "web"

    def __init__(self, app: FastAPI, host: str, port: int) -> None:
        # proxy_headers=False: uvicorn would otherwise replace the peer's address with the first
        # X-Forwarded-For entry when the peer is 127.0.0.1, and the identity check, which trusts
        # proxy headers only from `web.identity.trusted_proxies`, would no longer see the proxy.
        # log_config=None: uvicorn's records go to the monitor's own log handler and formatter.
        self._config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            proxy_headers=False,
            log_config=None,
        )
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = f"http://{host}:{port}"

    def start(self) -> None:
        """Serve in a background thread; raises MonitorError if the port cannot be bound."""
        # uvicorn installs signal handlers only in the main thread, so the app keeps its own.
        self._server = uvicorn.Server(self._config)
        self._thread = threading.Thread(target=self._server.run, name="web", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise MonitorError(
                    f"the web UI could not listen on {self.url}; is the port in use? "
                    "Set web.port (or KAFKA_HEALTH_WEB__PORT) to a free port"
                )
            time.sleep(0.05)
        log.info("web UI on %s", self.url)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
