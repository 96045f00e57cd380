"""Named errors shared by every stage.

Each error carries a message that says what is wrong and how to fix it; callers show it as is.
"""

from __future__ import annotations


class MonitorError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(MonitorError):
    """The configuration is invalid. The message names each key path and the fix."""

    def __init__(self, problems: list[str], source: str = "configuration") -> None:
        self.problems = problems
        self.source = source
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{source} is invalid ({len(problems)} problem(s)):\n{lines}")

    def lines(self) -> list[str]:
        """One line per problem, naming the file it is in (problems gathered from several files
        under the source "configuration" name theirs already)."""
        if self.source == "configuration":
            return list(self.problems)
        return [f"{self.source}: {problem}" for problem in self.problems]


class KafkaUnavailableError(MonitorError):
    """A Kafka cluster or broker did not answer within the timeout."""


class KafkaAuthenticationError(KafkaUnavailableError):
    """The brokers rejected the client's SASL credentials or its TLS handshake (an unknown
    certificate, a CA that does not match). Handled like no answer: retried at the next cycle."""


class KafkaRequestError(MonitorError):
    """Kafka answered a request with an error (bad topic, authorisation, invalid config ...)."""


class KafkaAuthorizationError(KafkaRequestError):
    """Kafka refused the request because the monitor's principal lacks an ACL (the message says
    which resource and operation); a fallback that needs less may still work."""


class StoreUnavailableError(MonitorError):
    """PostgreSQL could not be reached or refused the connection."""


class DevEnvironmentError(MonitorError):
    """A local development service (Kafka, PostgreSQL, Spark) could not be installed or started."""
