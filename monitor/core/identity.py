"""Who makes a change: the one identity every change a person makes carries, from the web (the
proxy's headers or an API token) or the command line."""

from __future__ import annotations

import getpass
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

IdentitySource = Literal["proxy", "token", "development", "cli"]


@dataclass(frozen=True, slots=True)
class Identity:
    """Who makes a change, the teams they belong to (from the proxy's groups header, the API token,
    or the command line) and from where (`address`: the web client's address, `cli@host`)."""

    user: str
    teams: frozenset[str]
    source: IdentitySource
    address: str = ""

    def __post_init__(self) -> None:
        if not self.user.strip():
            raise ValueError("an identity needs a user name")

    @classmethod
    def command_line(cls, user: str | None, teams: Iterable[str] | None) -> Identity:
        """Who runs a command: `--as USER` (default: the login name) and the `--team`s given.
        The command line acts with the database's credentials, which are its trust boundary."""
        if not user:
            try:
                user = getpass.getuser()
            except (KeyError, OSError):
                raise ValueError("no login name: say who acts with --as NAME") from None
        return cls(user, frozenset(teams or ()), "cli", f"cli@{socket.gethostname()}")
